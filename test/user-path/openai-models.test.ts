/**
 * OpenAI tooling against a real gateway, through the `openai` npm client
 * (issue 19): models.list() and models.retrieve() list the endpoints the key
 * may call, unknown /dedicated/v1/ routes answer in OpenAI's error shape, and a
 * chat `model` may name an endpoint by its name when the name is unique in
 * the caller's teams (an ambiguous one is a 400 listing the ids).
 */
import OpenAI from 'openai';
import { beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, TINY_REPO, type SeededUser, type TestApp } from '../support/app.js';

let t: TestApp;
let alice: SeededUser;
let bob: SeededUser;
let openai: OpenAI;
let alpha: string;
let twins: string[];
let bobs: string;

beforeAll(async () => {
  t = await startTestApp();
  alice = await t.seed.user();
  bob = await t.seed.user();
  const project = await alice.project('models');
  alpha = await project.endpoint({ name: 'alpha', hfModelRepo: TINY_REPO, advanced: { max_token_count: 1024 } });
  // Two endpoints of one name (their model has no weights: they fail at once, and need no engine).
  twins = [
    await project.endpoint({ name: 'twin', hfModelRepo: 'test-org/no-weights' }),
    await project.endpoint({ name: 'twin', hfModelRepo: 'test-org/no-weights' }),
  ];
  // Bob's endpoint has alice's name: it is not hers to call, and does not make her name ambiguous.
  bobs = await (await bob.project('his')).endpoint({ name: 'alpha', hfModelRepo: 'test-org/no-weights' });
  openai = new OpenAI({ apiKey: alice.key, baseURL: `${t.url}/dedicated/v1`, maxRetries: 0 });
});

describe('models', () => {
  test('models.list() lists the endpoints the key may call, in OpenAI shape', async () => {
    const page = await openai.models.list();
    const ids = page.data.map((m) => m.id);
    expect(ids).toEqual(expect.arrayContaining([alpha, ...twins]));
    expect(ids).not.toContain(bobs);
    const model = page.data.find((m) => m.id === alpha)!;
    expect(model).toMatchObject({ id: alpha, object: 'model', owned_by: alice.teamId, name: 'alpha' });
    expect(model.created).toBeGreaterThan(Date.now() / 1000 - 600);
    expect(model.created).toBeLessThanOrEqual(Date.now() / 1000 + 1);
    // The raw body is OpenAI's list shape.
    const raw = await fetch(`${t.url}/dedicated/v1/models`, { headers: { authorization: `Bearer ${alice.key}` } });
    expect(await raw.json()).toMatchObject({ object: 'list', data: expect.any(Array) });
  });

  test('models.retrieve() answers one; one not yours is NotFoundError', async () => {
    expect(await openai.models.retrieve(alpha)).toMatchObject({ id: alpha, object: 'model', owned_by: alice.teamId });
    const missing = await openai.models.retrieve(bobs).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(missing).toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
  });

  test('a bad key is AuthenticationError', async () => {
    const stranger = new OpenAI({ apiKey: 'dek_not_a_key_at_all_000000', baseURL: `${t.url}/dedicated/v1`, maxRetries: 0 });
    const refused = await stranger.models.list().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
  });
});

describe('unknown routes under /dedicated/v1', () => {
  test('answer 404 in the OpenAI error shape', async () => {
    const missing = await openai.get('/embeddings-or-whatever').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(missing).toMatchObject({ status: 404, type: 'not_found_error', code: 'unknown_url' });
    const raw = await fetch(`${t.url}/dedicated/v1/embeddings`, { method: 'POST', headers: { authorization: `Bearer ${alice.key}` } });
    expect(raw.status).toBe(404);
    expect(await raw.json()).toEqual({
      error: { message: 'Unknown request URL: POST /dedicated/v1/embeddings.', type: 'not_found_error', param: null, code: 'unknown_url' },
    });
  });
});

describe('a method a route does not take', () => {
  test('is a 405 in the OpenAI error shape, with Allow', async () => {
    const auth = { authorization: `Bearer ${alice.key}` };
    const chat = await fetch(`${t.url}/dedicated/v1/chat/completions`, { headers: auth });
    expect(chat.status).toBe(405);
    expect(chat.headers.get('allow')).toBe('POST');
    expect(((await chat.json()) as { error: { code: string } }).error.code).toBe('method_not_allowed');
    for (const [method, path] of [
      ['POST', '/dedicated/v1/models'],
      ['DELETE', `/dedicated/v1/models/${alpha}`],
    ] as const) {
      const res = await fetch(`${t.url}${path}`, { method, headers: auth });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get('allow')).toBe('GET, HEAD');
    }
  });
});

describe('an endpoint name as model', () => {
  test('a unique name is accepted, and the answer comes from that endpoint', async () => {
    const completion = await openai.chat.completions.create({
      model: 'alpha',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 4,
    });
    expect(completion.choices[0]!.message.content).toBeTypeOf('string');
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0);
  }, 120_000);

  test('an ambiguous name is a 400 listing the ids; an unknown name is model_not_found', async () => {
    const ambiguous = await openai.chat.completions
      .create({ model: 'twin', messages: [{ role: 'user', content: 'Hi' }] })
      .catch((e: unknown) => e);
    expect(ambiguous).toBeInstanceOf(OpenAI.BadRequestError);
    expect(ambiguous).toMatchObject({ status: 400, code: 'model_ambiguous', param: 'model' });
    for (const id of twins) expect((ambiguous as Error).message).toContain(id);

    const unknown = await openai.chat.completions
      .create({ model: 'nobody', messages: [{ role: 'user', content: 'Hi' }] })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect(unknown).toMatchObject({ status: 404, code: 'model_not_found', param: 'model', type: 'not_found_error' });
    // It says what `model` takes and where to find the values (issue 32).
    expect((unknown as Error).message).toContain(
      "The model 'nobody' does not exist or you do not have access to it. model is one of your endpoints' ids or names: GET /dedicated/v1/models lists them.",
    );
  });
});
