/**
 * Tool calling on the built-in engine, on tiny generated GGUFs: one whose template knows tools
 * (Qwen2.5's syntax) and the default one, which does not (node-llama-cpp's own syntax then).
 * Forced calls (`required`, a named tool) through real engines, streamed and whole; the prompt
 * the tools and tool turns render to; the 400s.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getLlama, LlamaLogLevel, type Llama, type LlamaModel } from 'node-llama-cpp';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ChatPromptRenderer } from '../../src/engine/prompt.js';
import { startEngineServer, type EngineServer } from '../../src/engine/server.js';
import { toolsChatTemplate, writeTinyGguf } from '../support/tiny-gguf.js';

let dir: string;
let llama: Llama;
let toolsModel: LlamaModel;
let plainModel: LlamaModel;
let withTools: EngineServer;
let plain: EngineServer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tools-'));
  const toolsGguf = await writeTinyGguf(join(dir, 'tools.gguf'), { chatTemplate: toolsChatTemplate() });
  const plainGguf = await writeTinyGguf(join(dir, 'plain.gguf'));
  llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.warn });
  toolsModel = await llama.loadModel({ modelPath: toolsGguf.path });
  plainModel = await llama.loadModel({ modelPath: plainGguf.path });
  const options = { llama, gpu: false, threads: 1, contextSize: 2048, maxBatchSize: 2 } as const;
  withTools = await startEngineServer({ ...options, modelPath: toolsGguf.path });
  plain = await startEngineServer({ ...options, modelPath: plainGguf.path });
}, 60_000);

afterAll(async () => {
  await withTools?.close(0);
  await plain?.close(0);
  await toolsModel?.dispose();
  await plainModel?.dispose();
  await llama?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

type Json = Record<string, any>;
const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', enum: ['Paris', 'Rome'] }, unit: { type: 'string', enum: ['c', 'f'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
};
const clock = {
  type: 'function',
  function: { name: 'get_time', parameters: { type: 'object', properties: {}, additionalProperties: false } },
};
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
const call = (id: string, city = 'Paris') => ({
  id,
  type: 'function',
  function: { name: 'get_weather', arguments: JSON.stringify({ city, unit: 'c' }) },
});
const answer = (id: string, content = 'sunny') => ({ role: 'tool', tool_call_id: id, content });
/** A schema `levels` objects deep (twice as deep in JSON). */
function deepSchema(levels: number): Json {
  let schema: Json = { type: 'string' };
  for (let i = 0; i < levels; i++) schema = { type: 'object', properties: { p: schema } };
  return schema;
}

async function post(server: EngineServer, body: Json): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 200, temperature: 0, ...body }),
  });
  return { status: res.status, json: (await res.json()) as Json };
}

/** The streamed answer's chunks (parsed), up to [DONE]. */
async function streamed(server: EngineServer, body: Json): Promise<Json[]> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: 200, temperature: 0, ...body, stream: true }),
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  return text
    .split('\n\n')
    .filter((event) => event.startsWith('data: {'))
    .map((event) => JSON.parse(event.slice(6)) as Json);
}

describe.each([
  ['a template with tools', () => withTools],
  ['a template without tools', () => plain],
])('forced calls on %s', (_name, server) => {
  test('tool_choice required (one call): the answer is a call of an offered tool whose arguments follow its schema', async () => {
    const { status, json } = await post(server(), { tools: [weather, clock], tool_choice: 'required', parallel_tool_calls: false });
    expect(status, JSON.stringify(json)).toBe(200);
    const choice = json.choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toHaveLength(1);
    const [call] = choice.message.tool_calls;
    expect(call).toMatchObject({ id: expect.stringMatching(/^call_[A-Za-z0-9]{24}$/), type: 'function' });
    expect(['get_weather', 'get_time']).toContain(call.function.name);
    const args = JSON.parse(call.function.arguments);
    if (call.function.name === 'get_weather') {
      expect(['Paris', 'Rome']).toContain(args.city);
      expect(['c', 'f']).toContain(args.unit);
    } else expect(args).toEqual({});
  });

  test('a named tool is the one called, streamed as one tool_calls delta equal to the whole answer', async () => {
    const body = { tools: [weather, clock], tool_choice: { type: 'function', function: { name: 'get_weather' } } };
    const whole = await post(server(), body);
    expect(whole.status).toBe(200);
    const [call] = whole.json.choices[0].message.tool_calls;
    expect(call.function.name).toBe('get_weather');

    const chunks = await streamed(server(), body);
    const deltas = chunks.map((c) => c.choices[0]?.delta ?? {});
    expect(deltas.some((d) => typeof d.content === 'string' && d.content !== '')).toBe(false);
    const calls = deltas.flatMap((d) => d.tool_calls ?? []);
    expect(calls).toEqual([{ index: 0, id: expect.stringMatching(/^call_/), type: 'function', function: call.function }]);
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe('tool_calls');
  });
});

describe('the prompt', () => {
  const conversation = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Weather in Paris?' },
    {
      role: 'assistant',
      content: 'Let me check.',
      toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city": "Paris", "unit": "c"}' }],
    },
    { role: 'tool', content: '{"temp": 20}', toolCallId: 'call_1' },
  ] as const;
  const definitions = [{ name: 'get_weather', description: 'The weather in a city', parameters: weather.function.parameters }];

  test("a template with tools gets them as `tools`, the calls as the assistant's tool_calls, the results as tool messages", () => {
    const renderer = new ChatPromptRenderer(toolsModel, { addSpecialTokens: true });
    const { text } = renderer.render(conversation as never, {}, definitions);
    expect(text).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city"');
    expect(text).toContain(
      '<|im_start|>assistant\nLet me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call><|im_end|>',
    );
    expect(text).toContain('<|im_start|>user\n<tool_response>\n{"temp": 20}\n</tool_response><|im_end|>\n<|im_start|>assistant\n');
    expect(renderer.toolSyntax({})).toEqual({
      prefixes: ['<tool_call>\n{"name": "'],
      paramsPrefix: '", "arguments": ',
      suffix: '}\n</tool_call>',
      resultPrefix: '<tool_response>',
    });
    // Without tools offered (tool_choice none), the turns still render; the tools are left out.
    const noTools = renderer.render(conversation as never, {}).text;
    expect(noTools).not.toContain('<tools>');
    expect(noTools).toContain('<tool_response>\n{"temp": 20}\n</tool_response>');
  });

  test("a template that writes a tool message's content as text gets the client's text as sent, JSON or not", () => {
    const renderer = new ChatPromptRenderer(toolsModel, { addSpecialTokens: true });
    for (const content of ['Sunny, 21 °C', '{"temp":20.50, "sky" :"clear"}', '"quoted"']) {
      const turns = [...conversation.slice(0, 3), { role: 'tool', content, toolCallId: 'call_1' }];
      expect(renderer.render(turns as never, {}, definitions).text, content).toContain(`<tool_response>\n${content}\n</tool_response>`);
    }
  });

  test("a template without tools gets them documented in the system prompt, in node-llama-cpp's syntax", () => {
    const renderer = new ChatPromptRenderer(plainModel, { addSpecialTokens: true });
    const { text } = renderer.render(conversation as never, {}, definitions);
    expect(text).toContain('function get_weather(');
    expect(text).toContain('||call: get_weather({"city": "Paris", "unit": "c"})');
    expect(renderer.toolSyntax({}).prefixes).toContain('||call: ');
  });
});

describe('requests', () => {
  test('a call id used again in a later turn gets its own result: each result answers the call just before it', () => {
    const renderer = new ChatPromptRenderer(toolsModel, { addSpecialTokens: true });
    const { text } = renderer.render(
      [
        { role: 'user', content: 'Paris?' },
        { role: 'assistant', content: '', toolCalls: [{ id: 'call_0', name: 'get_weather', arguments: '{"city": "CITY_A"}' }] },
        { role: 'tool', content: 'PARIS_RESULT', toolCallId: 'call_0' },
        { role: 'assistant', content: 'Sunny.' },
        { role: 'user', content: 'Rome?' },
        { role: 'assistant', content: '', toolCalls: [{ id: 'call_0', name: 'get_weather', arguments: '{"city": "CITY_B"}' }] },
        { role: 'tool', content: 'ROME_RESULT', toolCallId: 'call_0' },
      ],
      {},
      [{ name: 'get_weather', parameters: weather.function.parameters }],
    );
    expect(text.indexOf('CITY_A')).toBeLessThan(text.indexOf('PARIS_RESULT'));
    expect(text.indexOf('PARIS_RESULT')).toBeLessThan(text.indexOf('CITY_B'));
    expect(text.indexOf('CITY_B')).toBeLessThan(text.indexOf('ROME_RESULT'));
    expect(text.split('PARIS_RESULT')).toHaveLength(2);
  });

  test("a forced call ignores stop strings (the grammar ends it) and follows a schema's $defs", async () => {
    const address = {
      type: 'function',
      function: {
        name: 'send',
        parameters: {
          type: 'object',
          $defs: { Town: { type: 'string', enum: ['Oslo', 'Lima'] } },
          properties: { to: { $ref: '#/$defs/Town' } },
          required: ['to'],
          additionalProperties: false,
        },
      },
    };
    const { status, json } = await post(withTools, {
      tools: [address],
      tool_choice: 'required',
      stop: [',', '"'],
      parallel_tool_calls: false,
    });
    expect(status, JSON.stringify(json)).toBe(200);
    expect(json.choices[0].finish_reason).toBe('tool_calls');
    expect(['Oslo', 'Lima']).toContain(JSON.parse(json.choices[0].message.tool_calls[0].function.arguments).to);
  });

  test('a conversation with tool turns is answered; tool_choice none answers text', async () => {
    const turns = [
      ...messages,
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"c"}' } }],
      },
      answer('call_a', 'sunny, 20 degrees'),
    ];
    for (const server of [withTools, plain]) {
      const answered = await post(server, { messages: turns, tools: [weather], max_tokens: 8 });
      expect(answered.status, JSON.stringify(answered.json)).toBe(200);
      const none = await post(server, { messages: turns, tools: [weather], tool_choice: 'none', max_tokens: 8 });
      expect(none.status).toBe(200);
      expect(none.json.choices[0].message.tool_calls).toBeUndefined();
      expect(typeof none.json.choices[0].message.content).toBe('string');
    }
  });

  test('tools too large to render safely are a 400: parameters nested past 32 levels, more than 128 KiB of tools', async () => {
    const deep = await post(withTools, { tools: [{ type: 'function', function: { name: 'f', parameters: deepSchema(20) } }] });
    expect(deep.status).toBe(400);
    expect(deep.json.error).toMatchObject({ param: 'tools[0].function.parameters', message: expect.stringContaining('32 levels') });
    const many = Array.from({ length: 100 }, (_, i) => ({ type: 'function', function: { name: `f${i}`, description: 'x'.repeat(2000) } }));
    const large = await post(withTools, { tools: many });
    expect(large.status).toBe(400);
    expect(large.json.error).toMatchObject({ param: 'tools', message: expect.stringContaining('131072 bytes') });
    // Line breaks, which node-llama-cpp indents once per level when it writes the tools into a prompt.
    const lines = (n: number) => 'line\n'.repeat(n);
    const broken = await post(plain, { tools: [{ type: 'function', function: { name: 'f', description: lines(1001) } }] });
    expect(broken.status).toBe(400);
    expect(broken.json.error).toMatchObject({ param: 'tools', message: expect.stringContaining('at most 1000 line breaks') });
    const describedDeep = (depth: number, perLevel: number): Record<string, unknown> =>
      depth === 0
        ? { type: 'string', description: lines(perLevel) }
        : { type: 'object', description: lines(perLevel), properties: { a: describedDeep(depth - 1, perLevel) } };
    const heavy = await post(plain, {
      tools: [{ type: 'function', function: { name: 'f', parameters: describedDeep(15, 62) } }],
      max_tokens: 1,
    });
    // The most the limit lets through renders to tens of thousands of tokens (too many for this context), not millions.
    expect(heavy.json.error?.code, JSON.stringify(heavy.json).slice(0, 300)).toBe('context_length_exceeded');
    expect(Number(/has (?:at least )?(\d+) tokens/.exec(heavy.json.error.message)?.[1])).toBeLessThan(50_000);
    // Within the bounds, the deepest allowed schema renders, on either template.
    for (const server of [withTools, plain]) {
      const ok = await post(server, { tools: [{ type: 'function', function: { name: 'f', parameters: deepSchema(15) } }], max_tokens: 1 });
      expect(ok.status, JSON.stringify(ok.json)).toBe(200);
    }
  });

  test.each([
    [{ tools: {} }, 'tools'],
    [{ tools: [] }, 'tools'],
    [{ tools: [{ type: 'function', function: { name: 'has space' } }] }, 'tools[0].function.name'],
    [{ tools: [{ type: 'retrieval' }] }, 'tools[0].type'],
    [{ tools: [weather, weather] }, 'tools[1].function.name'],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: 'object' } }] }, 'tools[0].function.parameters'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ tools: [weather], tool_choice: 'sometimes' }, 'tool_choice'],
    [{ tools: [weather], tool_choice: { type: 'function', function: { name: 'get_time' } } }, 'tool_choice.function.name'],
    [{ tools: [weather], parallel_tool_calls: 'yes' }, 'parallel_tool_calls'],
    // Parameters shaped as a JSON Schema all through (node-llama-cpp reads every part of them).
    [
      { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: null } } } }] },
      'tools[0].function.parameters.properties.a',
    ],
    [
      {
        tools: [
          {
            type: 'function',
            function: {
              name: 'f',
              parameters: { type: 'object', properties: { a: { type: 'object', properties: { b: { oneOf: 'x' } } } } },
            },
          },
        ],
      },
      'tools[0].function.parameters.properties.a.properties.b.oneOf',
    ],
    [
      { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { enum: 'abc' } } } } }] },
      'tools[0].function.parameters.properties.a.enum',
    ],
    [
      { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', required: 'a' } } }] },
      'tools[0].function.parameters.required',
    ],
    [
      { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'text' } } } } }] },
      'tools[0].function.parameters.properties.a.type',
    ],
    [
      { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'array', items: { type: 'integer' } } } }] },
      'tools[0].function.parameters',
    ],
    [{ messages: [...messages, { role: 'assistant', tool_calls: [call('c'), call('c')] }, answer('c')] }, 'messages[1].tool_calls[1].id'],
    [
      { messages: [...messages, { role: 'assistant', tool_calls: [call('a'), call('b')] }, answer('a'), ...messages] },
      'messages[1].tool_calls',
    ],
    [{ messages: [...messages, { role: 'assistant', tool_calls: [call('a')] }, ...messages, answer('a')] }, 'messages[1].tool_calls'],
    [{ tools: [weather], response_format: { type: 'json_object' } }, 'response_format'],
    [{ tools: [weather], logprobs: true }, 'logprobs'],
    [{ messages: [...messages, { role: 'tool', content: 'x' }] }, 'messages[1].tool_call_id'],
    [{ messages: [...messages, { role: 'tool', content: 'x', tool_call_id: 'call_nowhere' }] }, 'messages[1].tool_call_id'],
    [
      {
        messages: [
          ...messages,
          { role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{oops' } }] },
        ],
      },
      'messages[1].tool_calls[0].function.arguments',
    ],
    [
      { messages: [...messages, { role: 'assistant', tool_calls: [{ id: 'c', function: { name: 'f', arguments: {} } }] }] },
      'messages[1].tool_calls[0].function.arguments',
    ],
  ])('%j is a 400 naming %s', async (body, param) => {
    const { status, json } = await post(withTools, body);
    expect(status, JSON.stringify(json)).toBe(400);
    expect(json.error.param).toBe(param);
    expect(json.error.message).toMatch(/\S/);
  });
});
