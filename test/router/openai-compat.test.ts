/**
 * OpenAI fields the chat route once lost silently, through the gateway to a real replica: the
 * deprecated `functions` / `function_call` are refused naming the field, a `chat_template_kwargs`
 * name that collides with a Jinja global is refused at the gateway naming that member (it reached
 * the replica and came back naming `messages`), and a forced tool call cut by max_tokens does not
 * show its internal JSON list as content.
 */
import { beforeAll, expect, test } from 'vitest';
import { startTestApp, TINY_TOOLS_REPO, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';

let t: TestApp;
let alice: SeededUser;
let tools: string;

beforeAll(async () => {
  t = await startTestApp();
  alice = await t.seed.user();
  const project = await alice.project('openai-compat');
  tools = await project.endpoint({
    name: 'tools',
    hfModelRepo: TINY_TOOLS_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
    advanced: { max_token_count: 2048, max_input_length: 1536 },
  });
  await waitForStatus(t.sql, tools, 'RUNNING', 150_000);
}, 200_000);

async function chat(body: Record<string, unknown>) {
  const r = await fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: tools, messages: M, ...body }),
  });
  return { status: r.status, body: (await r.json()) as any };
}
const M = [{ role: 'user', content: 'Weather in Paris?' }];

test('legacy `functions` / `function_call` are refused naming the field, not silently ignored', async () => {
  const fn = { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
  const r = await chat({ max_tokens: 20, functions: [fn], function_call: { name: 'get_weather' } });
  expect(r.status).toBe(400);
  expect(r.body.error).toMatchObject({ type: 'invalid_request_error', param: 'functions', message: expect.stringContaining('send tools') });
  const choice = await chat({ max_tokens: 20, function_call: 'auto' });
  expect(choice.status).toBe(400);
  expect(choice.body.error.param).toBe('function_call');
});

test('a chat_template_kwargs name that collides with a Jinja global is a 400 naming that kwarg', async () => {
  for (const name of ['namespace', 'raise_exception', 'none']) {
    const r = await chat({ max_tokens: 3, chat_template_kwargs: { [name]: 1 } });
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe(`chat_template_kwargs.${name}`);
  }
});

test('a forced tool call cut by max_tokens does not leak the internal call list as content', async () => {
  const tool = {
    type: 'function',
    function: {
      name: 'get',
      parameters: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false },
    },
  };
  const r = await chat({ max_tokens: 8, temperature: 0, tools: [tool], tool_choice: 'required' });
  expect(r.status).toBe(200);
  expect(r.body.choices[0].message.content ?? '').toBe('');
  expect(r.body.choices[0].finish_reason).toBe('length');
});
