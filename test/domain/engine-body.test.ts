/**
 * The engine receives the request as the gateway validated it: parsing the
 * body written for the engine gives back the same request, for every request
 * the gateway accepts, and nothing else the client sent goes along.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { parseChatRequest, type GenerationRequest } from '../../src/domain/chat-request.js';
import { parseCompletionRequest } from '../../src/domain/completion-request.js';
import { chatEngineBody, completionEngineBody } from '../../src/domain/engine-body.js';

/**
 * The request as JSON carries it (-0 is 0 on the wire), its logit biases as entries. What the engine is asked for
 * usage is the relay's business: only a stream's include_usage means anything.
 */
const comparable = <R extends GenerationRequest>(request: R): unknown =>
  JSON.parse(
    JSON.stringify({
      ...request,
      includeUsage: request.stream && request.includeUsage,
      sampling: { ...request.sampling, logitBias: [...request.sampling.logitBias] },
    }),
  );

const maybe = <T>(arbitrary: fc.Arbitrary<T>) => fc.option(arbitrary, { nil: undefined });
const text = fc.string({ maxLength: 20 });
const schema = fc.constantFrom(
  { type: 'object', properties: { verdict: { type: 'string', enum: ['yes', 'no'] } }, required: ['verdict'] },
  { type: 'array', items: { type: 'integer' }, maxItems: 3 },
  { type: 'string' },
);

const generationFields = {
  model: maybe(fc.constantFrom('ep_1', 'my-endpoint')),
  stream: maybe(fc.boolean()),
  stream_options: maybe(fc.record({ include_usage: fc.boolean() })),
  temperature: maybe(fc.double({ min: 0, max: 2, noNaN: true })),
  top_p: maybe(fc.double({ min: 0, max: 1, noNaN: true })),
  max_tokens: maybe(fc.integer({ min: 1, max: 4096 })),
  max_completion_tokens: maybe(fc.integer({ min: 1, max: 4096 })),
  stop: maybe(fc.oneof(fc.string({ minLength: 1, maxLength: 8 }), fc.array(fc.string({ minLength: 1, maxLength: 8 }), { maxLength: 4 }))),
  seed: maybe(fc.integer()),
  top_k: maybe(fc.integer({ min: 0, max: 100 })),
  min_p: maybe(fc.double({ min: 0, max: 1, noNaN: true })),
  presence_penalty: maybe(fc.double({ min: -2, max: 2, noNaN: true })),
  frequency_penalty: maybe(fc.double({ min: -2, max: 2, noNaN: true })),
  repetition_penalty: maybe(fc.double({ min: 0.5, max: 2, noNaN: true })),
  logit_bias: maybe(fc.dictionary(fc.integer({ min: 0, max: 300 }).map(String), fc.integer({ min: -100, max: 100 }), { maxKeys: 4 })),
  response_format: maybe(
    fc.oneof(
      fc.constant({ type: 'text' }),
      fc.constant({ type: 'json_object' }),
      fc.record({
        type: fc.constant('json_schema'),
        json_schema: fc.record({ name: fc.constantFrom('verdict', 'list'), schema, strict: fc.boolean() }),
      }),
    ),
  ),
  // Fields the gateway does not read: they must not reach the engine.
  user: maybe(text),
  id_slot: maybe(fc.integer()),
  n_probs: maybe(fc.integer()),
};

const message = fc.oneof(
  fc.record({ role: fc.constantFrom('system', 'developer', 'user', 'assistant'), content: text, name: maybe(text) }),
  fc.record({
    role: fc.constant('user'),
    content: fc.array(fc.record({ type: fc.constant('text'), text }), { minLength: 1, maxLength: 3 }),
  }),
);
const tool = fc.record({
  type: fc.constant('function'),
  function: fc.record({ name: fc.constantFrom('lookup', 'weather'), description: maybe(text), parameters: maybe(schema) }),
});

/** OpenAI refuses max_tokens with max_completion_tokens (400 invalid_parameter_combination): a body sends one of them. */
const oneTokenLimit = <T extends { max_tokens?: number; max_completion_tokens?: number }>({ max_tokens, ...body }: T) =>
  body.max_completion_tokens === undefined && max_tokens !== undefined ? { ...body, max_tokens } : body;

const chatBody = fc
  .record(
    {
      ...generationFields,
      messages: fc.array(message, { minLength: 1, maxLength: 4 }),
      logprobs: maybe(fc.boolean()),
      top_logprobs: maybe(fc.integer({ min: 0, max: 20 })),
      chat_template_kwargs: maybe(fc.record({ enable_thinking: fc.boolean() })),
      tools: maybe(fc.array(tool, { minLength: 1, maxLength: 1 })),
      tool_choice: maybe(fc.constantFrom('auto', 'none', 'required')),
      parallel_tool_calls: maybe(fc.boolean()),
    },
    { requiredKeys: ['messages'] },
  )
  .map(oneTokenLimit);

const completionBody = fc
  .record(
    {
      ...generationFields,
      prompt: maybe(
        fc.oneof(fc.string({ minLength: 1, maxLength: 30 }), fc.array(fc.integer({ min: 0, max: 500 }), { minLength: 1, maxLength: 8 })),
      ),
      tokens: maybe(fc.array(fc.integer({ min: 0, max: 500 }), { minLength: 1, maxLength: 8 })),
      logprobs: maybe(fc.integer({ min: 0, max: 5 })),
      echo: maybe(fc.constant(false)),
    },
    { requiredKeys: [] },
  )
  .map(oneTokenLimit);

/** Keys of the body the engine gets that the client's body did not have (besides what the gateway always writes). */
const WRITTEN_ALWAYS = new Set([
  'stream',
  // With tools: the choice and parallel calls as the gateway read them (their defaults included).
  'tool_choice',
  'parallel_tool_calls',
]);

describe('the body an engine receives', () => {
  test('chat: parsing it gives back the request the gateway accepted', () => {
    let accepted = 0;
    fc.assert(
      fc.property(chatBody, (body) => {
        const parsed = parseChatRequest(body);
        if (parsed.type === 'error') return;
        accepted++;
        const sent = chatEngineBody(parsed.value, body.model);
        const again = parseChatRequest(JSON.parse(JSON.stringify(sent)));
        expect(again.type, JSON.stringify(again)).toBe('ok');
        if (again.type === 'ok') expect(comparable(again.value)).toEqual(comparable(parsed.value));
        for (const key of Object.keys(sent)) if (!WRITTEN_ALWAYS.has(key)) expect(body).toHaveProperty(key);
        expect(sent).not.toHaveProperty('user');
        expect(sent).not.toHaveProperty('id_slot');
        expect(sent).not.toHaveProperty('n_probs');
      }),
      { numRuns: 1000, seed: 7 },
    );
    // The property is about accepted requests: most generated bodies must be some.
    expect(accepted).toBeGreaterThan(100);
  });

  test('text completions: the same, the legacy logprobs count and a prompt of token ids included', () => {
    let accepted = 0;
    fc.assert(
      fc.property(completionBody, (body) => {
        const parsed = parseCompletionRequest(body);
        if (parsed.type === 'error') return;
        accepted++;
        const sent = completionEngineBody(parsed.value, body.model);
        const again = parseCompletionRequest(JSON.parse(JSON.stringify(sent)));
        expect(again.type, JSON.stringify(again)).toBe('ok');
        if (again.type === 'ok') expect(comparable(again.value)).toEqual(comparable(parsed.value));
        expect(sent).not.toHaveProperty('id_slot');
      }),
      { numRuns: 400, seed: 7 },
    );
    expect(accepted).toBeGreaterThan(100);
  });

  test('the client’s name for the token limit is kept, so that an engine’s refusal names the field the client sent', () => {
    const parsed = parseChatRequest({ messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: 9 });
    if (parsed.type !== 'ok') throw new Error('refused');
    expect(chatEngineBody(parsed.value, 'ep_1')).toMatchObject({ model: 'ep_1', max_completion_tokens: 9 });
    expect(chatEngineBody(parsed.value, 'ep_1')).not.toHaveProperty('max_tokens');
  });
});
