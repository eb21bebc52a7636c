/**
 * `response_format` on the built-in engine, end to end on the tiny generated GGUF: JSON enforced
 * by a grammar while sampling (the random model would otherwise never write JSON), streamed and
 * not, after a think block, and schemas refused with their path and rule when the grammar
 * generator could not enforce them.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getLlama, LlamaLogLevel, type Llama } from 'node-llama-cpp';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startEngineServer, type EngineServer } from '../../src/engine/server.js';
import { VERDICT_FORMAT } from '../support/response-formats.js';
import { REASONING_TEMPLATE, writeTinyGguf } from '../support/tiny-gguf.js';

let dir: string;
let llama: Llama;
let server: EngineServer;
let thinking: EngineServer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'structured-'));
  const plain = await writeTinyGguf(join(dir, 'tiny.gguf'));
  // The template opens the think block for the model when thinking is on (the random model never opens one itself).
  const thinks = await writeTinyGguf(join(dir, 'tiny-think.gguf'), { chatTemplate: REASONING_TEMPLATE });
  llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.warn });
  server = await startEngineServer({ llama, gpu: false, threads: 1, modelPath: plain.path, contextSize: 1024, maxBatchSize: 4 });
  thinking = await startEngineServer({ llama, gpu: false, threads: 1, modelPath: thinks.path, contextSize: 1024, maxBatchSize: 2 });
}, 60_000);

afterAll(async () => {
  await Promise.all([server?.close(0), thinking?.close(0)]);
  await llama?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

type Json = Record<string, any>;
const messages = [{ role: 'user', content: 'Answer in JSON.' }];

async function post(base: string, body: Json): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 300, ...body }),
  });
  return { status: res.status, json: (await res.json()) as Json };
}

/** The streamed answer's content, concatenated, and its finish reason. */
async function streamed(base: string, body: Json): Promise<{ content: string; reasoning: string; finish: string }> {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 300, ...body, stream: true }),
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  let content = '';
  let reasoning = '';
  let finish = '';
  for (const event of text.split('\n\n')) {
    const data = event.slice('data: '.length);
    if (data === '' || data === '[DONE]') continue;
    const choice = (JSON.parse(data) as Json).choices[0];
    content += choice.delta.content ?? '';
    reasoning += choice.delta.reasoning_content ?? '';
    finish = choice.finish_reason ?? finish;
  }
  return { content, reasoning, finish };
}

const yesNo = VERDICT_FORMAT;

describe('JSON enforced while sampling', () => {
  test('json_object: every answer is one JSON object, nothing after it', async () => {
    for (const seed of [1, 2, 3, 4]) {
      const { status, json } = await post(server.url, { seed, temperature: 1, response_format: { type: 'json_object' } });
      expect(status).toBe(200);
      const { content } = json.choices[0].message;
      expect(json.choices[0].finish_reason).toBe('stop');
      expect(typeof JSON.parse(content)).toBe('object');
      expect(content).toBe(content.trim());
    }
    // The same random model without a format writes no JSON.
    const free = await post(server.url, { seed: 1, temperature: 1, max_tokens: 20 });
    expect(() => JSON.parse(free.json.choices[0].message.content)).toThrow();
  });

  test('json_schema: the answer has exactly the schema’s properties, with allowed values; streamed equals non-streamed', async () => {
    for (const seed of [5, 6, 7]) {
      const { json } = await post(server.url, { seed, temperature: 1, response_format: yesNo });
      const value = JSON.parse(json.choices[0].message.content) as Json;
      expect(Object.keys(value).sort()).toEqual(['answer', 'sure']);
      expect(['yes', 'no']).toContain(value.answer);
      expect(typeof value.sure).toBe('boolean');
      const stream = await streamed(server.url, { seed, temperature: 1, response_format: yesNo });
      expect(stream).toEqual({ content: json.choices[0].message.content, reasoning: '', finish: 'stop' });
    }
  });

  test('the answer ends with the value: no padding after it, so a short max_tokens still finishes with "stop"', async () => {
    const boolean = { type: 'json_schema', json_schema: { name: 'flag', schema: { type: 'boolean' } } };
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const { json } = await post(server.url, { seed, temperature: 1, max_tokens: 8, response_format: boolean });
      expect(json.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: expect.stringMatching(/^(true|false)$/) } });
    }
  });

  test('requests decoded in one batch each keep their own format: schema, any JSON, free text', async () => {
    const formats = [VERDICT_FORMAT, { type: 'json_object' }, undefined, VERDICT_FORMAT];
    const answers = await Promise.all(
      formats.map((response_format, i) =>
        post(server.url, { seed: 20 + i, temperature: 1, max_tokens: 40, ...(response_format ? { response_format } : {}) }),
      ),
    );
    const contents = answers.map(({ json }) => json.choices[0].message.content as string);
    for (const i of [0, 3]) expect(Object.keys(JSON.parse(contents[i]!) as Json).sort()).toEqual(['answer', 'sure']);
    if (answers[1]!.json.choices[0].finish_reason === 'stop') expect(typeof JSON.parse(contents[1]!)).toBe('object');
    else expect(contents[1]!.trimStart().startsWith('{')).toBe(true);
    expect(() => JSON.parse(contents[2]!)).toThrow();
  });

  test('anyOf, nullable types, $defs and arrays are enforced', async () => {
    const schema = {
      type: 'object',
      properties: {
        items: { type: 'array', items: { $ref: '#/$defs/item' }, minItems: 1, maxItems: 2 },
        note: { type: ['string', 'null'] },
        kind: { anyOf: [{ type: 'boolean' }, { const: 'other' }] },
      },
      required: ['items', 'note', 'kind'],
      additionalProperties: false,
      $defs: { item: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false } },
    };
    let checked = 0;
    for (const seed of [8, 9, 10, 11]) {
      const { json } = await post(server.url, {
        seed,
        temperature: 1,
        response_format: { type: 'json_schema', json_schema: { name: 'x', schema } },
      });
      if (json.choices[0].finish_reason !== 'stop') continue; // a string the random model never closed: cut at max_tokens
      checked++;
      const value = JSON.parse(json.choices[0].message.content) as Json;
      expect(value.items.length).toBeGreaterThanOrEqual(1);
      expect(value.items.length).toBeLessThanOrEqual(2);
      for (const item of value.items) expect(typeof item.ok).toBe('boolean');
      expect(value.note === null || typeof value.note === 'string').toBe(true);
      expect(value.kind === 'other' || typeof value.kind === 'boolean').toBe(true);
    }
    expect(checked).toBeGreaterThan(0);
  });

  test('after a think block: the reasoning is free text, and the grammar starts with the answer', async () => {
    // Thinking off: the template closes the block itself, so the answer is JSON from its first token.
    const off = await post(thinking.url, { seed: 3, response_format: yesNo, chat_template_kwargs: { enable_thinking: false } });
    expect(JSON.parse(off.json.choices[0].message.content)).toMatchObject({ sure: expect.any(Boolean) });
    // Thinking on: the random model never closes the block, so all it writes is reasoning, unconstrained (not JSON).
    const on = await streamed(thinking.url, {
      seed: 3,
      max_tokens: 24,
      response_format: yesNo,
      chat_template_kwargs: { enable_thinking: true },
    });
    expect(on.content).toBe('');
    expect(on.reasoning.length).toBeGreaterThan(0);
    expect(() => JSON.parse(on.reasoning)).toThrow();
  });
});

describe('schemas the grammar cannot enforce are refused, naming the keyword', () => {
  const refused = async (schema: unknown) => {
    const { status, json } = await post(server.url, { response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
    expect(status).toBe(400);
    expect(json.error.param).toBe('response_format.json_schema.schema');
    return json.error.message as string;
  };

  test.each(
    (
      [
        [{ type: 'string', pattern: '^a+$' }, 'schema.pattern is not supported'],
        [
          { type: 'object', properties: { a: { type: 'integer', minimum: 3 } }, required: ['a'] },
          'schema.properties.a.minimum is not supported',
        ],
        [{ type: 'object', properties: { a: { type: 'string' }, b: { type: 'string' } }, required: ['a'] }, 'missing: "b"'],
        [{ description: 'anything' }, 'must say what it allows'],
        [{ type: ['object', 'null'], properties: {} }, 'use anyOf'],
        [{ type: 'object', properties: { a: { $ref: '#/definitions/a' } }, required: ['a'] }, '$ref must be "#/$defs/<name>"'],
        [{ type: 'string', format: 'email' }, 'format must be one of date, time, date-time'],
        [{ type: 'string', minItems: 2 }, 'minItems applies only to a schema whose type is "array"'],
        // The generator reads one keyword per node: any other beside $ref, anyOf, const or enum would be dropped.
        [{ type: 'string', const: 5 }, 'const holds 5, which is not of its type'],
        [{ type: 'string', enum: ['a', 1] }, 'enum holds 1, which is not of its type'],
        [{ const: 'a', enum: ['b'] }, 'enum cannot be combined with const'],
        [{ type: 'string', enum: ['abcdef'], maxLength: 2 }, 'maxLength cannot be combined with enum'],
        [{ anyOf: [{ type: 'null' }], type: 'object', properties: {} }, 'cannot be combined with anyOf'],
        [{ oneOf: [{ type: 'integer' }, { type: 'number' }] }, 'oneOf is not supported: use anyOf'],
        [{ type: 'string', format: 'date', maxLength: 3 }, 'format cannot be combined with minLength or maxLength'],
        // Bounds that contradict each other, which the generator would relax.
        [{ type: 'string', minLength: 5, maxLength: 2 }, 'minLength is more than maxLength'],
        [{ type: 'array', prefixItems: [{ type: 'null' }, { type: 'null' }], maxItems: 1 }, "maxItems is less than prefixItems' length"],
        [{ type: [] }, 'type must name at least one type'],
        [
          { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'], additionalProperties: true },
          'only without named properties',
        ],
        [{ type: 'object', properties: {}, additionalProperties: false, maxProperties: 2 }, 'apply only to a map'],
        // $defs only at the root; refs inlined, so that sharing cannot multiply the grammar's parse stacks.
        [
          { type: 'object', properties: { a: { type: 'object', properties: {}, $defs: { A: { type: 'string' } } } }, required: ['a'] },
          "schema.properties.a.$defs: definitions are allowed only at the schema's root",
        ],
        [{ $ref: '#/$defs/A', $defs: { A: { type: 'array', items: { $ref: '#/$defs/A' } } } }, 'recursive definitions'],
        [
          {
            $ref: '#/$defs/A0',
            $defs: {
              ...Object.fromEntries(
                Array.from({ length: 12 }, (_, i) => [`A${i}`, { anyOf: [{ $ref: `#/$defs/A${i + 1}` }, { $ref: `#/$defs/A${i + 1}` }] }]),
              ),
              A12: { type: 'string' },
            },
          },
          'more than 500 subschemas (with each $ref counted as its definition)',
        ],
        [{ type: 'string', maxLength: 501 }, 'maxLength must be a whole number from 0 to 500'],
        // Strings the grammar would write raw where JSON needs an escape; an empty object type; hostile nesting and sizes.
        [{ const: 'a\u0001b' }, 'control characters cannot be enforced'],
        [{ type: 'object', properties: { 'k\u0002': { type: 'null' } }, required: ['k\u0002'] }, 'control characters cannot be enforced'],
        [{ type: 'object' }, 'names no properties: say additionalProperties'],
        [{ type: 'object', properties: {}, constructor: 1 }, 'schema.constructor is not supported'],
        [{ type: 'string', description: JSON.parse('['.repeat(100) + ']'.repeat(100)) as unknown }, 'nests JSON more than 64 levels deep'],
        [
          { type: 'array', prefixItems: Array.from({ length: 20 }, (_, i) => ({ type: 'string', minLength: i, maxLength: 500 })) },
          'distinct lengths and counts add up to more than 5000',
        ],
        [{ type: 'string', enum: Array.from({ length: 1001 }, (_, i) => `v${i}`) }, 'more than 1000 enum and const values'],
        [{ type: 'boolean', description: 'x'.repeat(70_000) }, 'schema is larger than 64 KiB'],
        // Small as sent (under 64 KiB), but one large definition referenced 249 times inlines to 7 MB.
        [
          {
            type: 'object',
            $defs: { s: { const: 'x'.repeat(28_000) } },
            properties: Object.fromEntries(Array.from({ length: 249 }, (_, i) => [`p${i}`, { $ref: '#/$defs/s' }])),
            required: Array.from({ length: 249 }, (_, i) => `p${i}`),
            additionalProperties: false,
          },
          'schema is larger than 256 KiB as JSON once its $refs are inlined',
        ],
        [
          {
            type: 'object',
            properties: Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`p${i}`, { type: 'null' }])),
            required: Array.from({ length: 500 }, (_, i) => `p${i}`),
          },
          'more than 500 subschemas',
        ],
      ] as [unknown, string][]
    ).map(([schema, rule]) => [rule, schema] as const),
  )('refused: “%s”', async (rule, schema) => {
    expect(await refused(schema)).toContain(rule);
  });

  test('a name, a type and a schema object are required; text is the default', async () => {
    const noName = await post(server.url, { response_format: { type: 'json_schema', json_schema: { schema: { type: 'boolean' } } } });
    expect(noName.json.error.param).toBe('response_format.json_schema.name');
    const badType = await post(server.url, { response_format: { type: 'yaml' } });
    expect(badType.json.error).toMatchObject({ param: 'response_format.type', message: expect.stringContaining('"yaml"') });
    const text = await post(server.url, { seed: 1, max_tokens: 8, response_format: { type: 'text' } });
    expect(text.status).toBe(200);
  });
});
