/**
 * OpenAI fields the engine once lost silently, on tiny generated GGUFs: `reasoning_effort` is the
 * template's think switch, a template variable named like a Jinja global is refused naming it,
 * and a forced tool call cut by max_tokens never shows its JSON as content, whole or streamed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getLlama, LlamaLogLevel, type Llama, type LlamaContext, type LlamaModel } from 'node-llama-cpp';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseChatRequest } from '../../src/domain/chat-request.js';
import { ChatPromptRenderer } from '../../src/engine/prompt.js';
import { Scheduler } from '../../src/engine/scheduler.js';
import { startEngineServer, type EngineServer } from '../../src/engine/server.js';
import { openThinkTemplate, toolsChatTemplate, writeTinyGguf } from '../support/tiny-gguf.js';

type Json = Record<string, any>;
let dir: string;
let llama: Llama;
let thinkModel: LlamaModel;
let context: LlamaContext;
let thinking: EngineServer;
let tools: EngineServer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'openai-compat-'));
  const thinkGguf = await writeTinyGguf(join(dir, 'think.gguf'), { chatTemplate: openThinkTemplate('on') });
  const toolsGguf = await writeTinyGguf(join(dir, 'tools.gguf'), { chatTemplate: toolsChatTemplate() });
  llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.warn });
  thinkModel = await llama.loadModel({ modelPath: thinkGguf.path });
  context = await thinkModel.createContext({ contextSize: 256, sequences: 1 });
  const options = { llama, gpu: false, threads: 1, contextSize: 1024, maxBatchSize: 2 } as const;
  thinking = await startEngineServer({ ...options, modelPath: thinkGguf.path });
  tools = await startEngineServer({ ...options, modelPath: toolsGguf.path });
}, 60_000);

afterAll(async () => {
  await thinking?.close(0);
  await tools?.close(0);
  await context?.dispose();
  await thinkModel?.dispose();
  await llama?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const messages = [{ role: 'user', content: 'Weather in Paris?' }];

async function post(server: EngineServer, body: Json): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, temperature: 0, ...body }),
  });
  return { status: res.status, json: (await res.json()) as Json };
}

/** The streamed answer's chunks (parsed), up to [DONE]. */
async function streamed(server: EngineServer, body: Json): Promise<Json[]> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, temperature: 0, ...body, stream: true }),
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  return text
    .split('\n\n')
    .filter((event) => event.startsWith('data: {'))
    .map((event) => JSON.parse(event.slice(6)) as Json);
}

test('reasoning_effort "none" turns a thinking template off; a level leaves it thinking', async () => {
  const ask = async (body: Json) => {
    const { status, json } = await post(thinking, { max_tokens: 8, ...body });
    expect(status).toBe(200);
    return json.choices[0].message as { content: string; reasoning_content?: string };
  };
  // The template thinks by default: without the field, the answer is reasoning.
  expect((await ask({})).reasoning_content?.length).toBeGreaterThan(0);
  for (const effort of ['none', 'minimal']) {
    const off = await ask({ reasoning_effort: effort });
    expect(off).not.toHaveProperty('reasoning_content');
    expect(off.content.length).toBeGreaterThan(0);
  }
  const high = await ask({ reasoning_effort: 'high' });
  expect(high.content).toBe('');
  expect(high.reasoning_content?.length).toBeGreaterThan(0);
  const contradicted = await post(thinking, { reasoning_effort: 'none', chat_template_kwargs: { enable_thinking: true } });
  expect(contradicted.status).toBe(400);
  expect(contradicted.json.error.param).toBe('reasoning_effort');
});

test('legacy functions and function_call: 400 naming the field, pointing to tools and tool_choice', async () => {
  const fn = { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
  const both = await post(tools, { max_tokens: 20, functions: [fn], function_call: { name: 'get_weather' } });
  expect(both.status).toBe(400);
  expect(both.json.error).toMatchObject({ type: 'invalid_request_error', param: 'functions' });
  expect(both.json.error.message).toMatch(/send tools/);
  const call = await post(tools, { max_tokens: 20, function_call: 'auto' });
  expect(call.json.error).toMatchObject({ param: 'function_call', message: expect.stringMatching(/send tool_choice/) });
});

describe('chat_template_kwargs named like a Jinja global', () => {
  test.each(['namespace', 'raise_exception', 'range', 'strftime_now', 'true', 'None'])('%s: 400 naming the member', async (name) => {
    const { status, json } = await post(thinking, { max_tokens: 3, chat_template_kwargs: { [name]: 1 } });
    expect(status).toBe(400);
    expect(json.error).toMatchObject({ type: 'invalid_request_error', param: `chat_template_kwargs.${name}` });
  });

  test("a name the template engine declares that got past the checks: the template's error names the member, not the messages", async () => {
    const scheduler = new Scheduler(thinkModel, new ChatPromptRenderer(thinkModel, { addSpecialTokens: true }), [context.getSequence()], {
      contextSize: 256,
      maxInputLength: 128,
      skipSpecialTokens: true,
      reusePrefix: false,
      addSpecialTokens: true,
    });
    const parsed = parseChatRequest({ messages });
    if (parsed.type !== 'ok') throw new Error(parsed.error.message);
    // As a later @huggingface/jinja that declares a global the checks do not know yet would see it.
    const rendered = await scheduler.render({ ...parsed.value, chatTemplateKwargs: { namespace: 1 } });
    expect(rendered).toMatchObject({ status: 400, param: 'chat_template_kwargs.namespace', code: 'chat_template_error' });
    expect((rendered as { message: string }).message).toContain('Variable already declared: namespace');
    // Other variables render.
    const fine = await scheduler.render({ ...parsed.value, chatTemplateKwargs: { unrelated: 1 } });
    expect(fine).not.toHaveProperty('status');
  });
});

describe('a forced tool call cut by max_tokens', () => {
  const tool = {
    type: 'function',
    function: {
      name: 'get',
      parameters: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false },
    },
  };
  const forced = [
    { tools: [tool], tool_choice: 'required' },
    { tools: [tool], tool_choice: { type: 'function', function: { name: 'get' } } },
  ];

  test.each([1, 3, 8, 12])('at %i tokens: no content, finish_reason "length", the same streamed', async (maxTokens) => {
    for (const choice of forced) {
      const body = { ...choice, max_tokens: maxTokens };
      const { status, json } = await post(tools, body);
      expect(status).toBe(200);
      const [answer] = json.choices;
      expect(answer.finish_reason).toBe('length');
      expect(answer.message.content ?? '').toBe('');
      expect(json.usage.completion_tokens).toBe(maxTokens);

      const chunks = await streamed(tools, body);
      const deltas = chunks.flatMap((c) => c.choices.map((ch: Json) => ch.delta as Json));
      expect(deltas.map((d) => d.content ?? '').join('')).toBe('');
      expect(chunks.at(-1)!.choices[0].finish_reason).toBe('length');
    }
  });
});

describe('a forced tool call cut by max_tokens, with answers.ts patched (/tmp/fix-chat/answers.patch)', () => {
  const tool = {
    type: 'function',
    function: {
      name: 'get',
      parameters: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false },
    },
  };
  test('once its name is whole: a partial tool_calls entry, content null, finish_reason "length", the same streamed', async () => {
    const seen: string[] = [];
    for (let maxTokens = 1; maxTokens <= 40; maxTokens++) {
      const body = { tools: [tool], tool_choice: 'required', max_tokens: maxTokens };
      const { json } = await post(tools, body);
      const [answer] = json.choices;
      const chunks = await streamed(tools, body);
      const streamedCalls = chunks.flatMap((c) => c.choices.flatMap((ch: Json) => (ch.delta.tool_calls ?? []) as Json[]));
      if (answer.finish_reason !== 'length') break; // the call came whole
      expect(answer.message.content ?? '').toBe('');
      expect(chunks.at(-1)!.choices[0].finish_reason).toBe('length');
      const calls = (answer.message.tool_calls ?? []) as Json[];
      expect(streamedCalls.map((c) => c.function)).toEqual(calls.map((c) => c.function));
      if (calls.length > 0) {
        expect(calls).toHaveLength(1);
        expect(answer.message.content).toBe(null);
        expect(calls[0]).toMatchObject({ type: 'function', id: expect.stringMatching(/^call_/), function: { name: 'get' } });
        seen.push(calls[0]!.function.arguments);
      }
    }
    expect(seen.length).toBeGreaterThan(0);
  });
});
