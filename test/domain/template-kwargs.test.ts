/**
 * The OpenAI fields a chat request may not silently lose (pure): the deprecated `functions` and
 * `function_call` are refused, `reasoning_effort` becomes the template's think switch, and
 * `chat_template_kwargs` may not name what the template language declares itself.
 */
import { describe, expect, test } from 'vitest';
import { parseChatRequest, type ParseResult } from '../../src/domain/chat-request.js';
import { paramOf } from '../../src/domain/request-checks.js';

const messages = [{ role: 'user', content: 'Weather in Paris?' }];
const refusal = (result: ParseResult) => {
  if (result.type !== 'error') throw new Error(`accepted: ${JSON.stringify(result.value).slice(0, 200)}`);
  return { param: paramOf(result.error), message: result.error.message };
};
const kwargsOf = (result: ParseResult) => {
  if (result.type !== 'ok') throw new Error(`refused: ${result.error.message}`);
  return result.value.chatTemplateKwargs;
};

describe('legacy function calling', () => {
  const fn = { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } };

  test('functions and function_call are 400s naming the field and its replacement', () => {
    expect(refusal(parseChatRequest({ messages, functions: [fn] }))).toEqual({
      param: 'functions',
      message: expect.stringMatching(/^functions is OpenAI's deprecated form of tools, .*send tools \(/),
    });
    for (const choice of ['auto', 'none', { name: 'get_weather' }]) {
      expect(refusal(parseChatRequest({ messages, function_call: choice }))).toEqual({
        param: 'function_call',
        message: expect.stringMatching(/deprecated form of tool_choice, .*send tool_choice/),
      });
    }
    // Both: the first is named.
    expect(refusal(parseChatRequest({ messages, functions: [fn], function_call: { name: 'get_weather' } })).param).toBe('functions');
    // null is "not set", as for every other field.
    expect(parseChatRequest({ messages, functions: null, function_call: null }).type).toBe('ok');
  });

  test("an assistant message's function_call is refused, not dropped from the conversation", () => {
    const turns = [...messages, { role: 'assistant', content: null, function_call: { name: 'get_weather', arguments: '{}' } }];
    expect(refusal(parseChatRequest({ messages: turns }))).toEqual({
      param: 'messages[1].function_call',
      message: expect.stringContaining('send the call as messages[1].tool_calls'),
    });
  });
});

describe('reasoning_effort', () => {
  test('none and minimal turn thinking off; low, medium and high turn it on and name the level', () => {
    expect(kwargsOf(parseChatRequest({ messages, reasoning_effort: 'none' }))).toEqual({ enable_thinking: false });
    expect(kwargsOf(parseChatRequest({ messages, reasoning_effort: 'minimal' }))).toEqual({ enable_thinking: false });
    for (const level of ['low', 'medium', 'high']) {
      expect(kwargsOf(parseChatRequest({ messages, reasoning_effort: level }))).toEqual({ enable_thinking: true, reasoning_effort: level });
    }
    expect(kwargsOf(parseChatRequest({ messages, reasoning_effort: null }))).toEqual({});
  });

  test('agreeing kwargs are kept; contradicting ones, other values and types are 400s naming reasoning_effort', () => {
    const agree = parseChatRequest({ messages, reasoning_effort: 'high', chat_template_kwargs: { enable_thinking: true, x: 1 } });
    expect(kwargsOf(agree)).toEqual({ enable_thinking: true, x: 1, reasoning_effort: 'high' });
    const cases: unknown[] = [
      { reasoning_effort: 'none', chat_template_kwargs: { enable_thinking: true } },
      { reasoning_effort: 'low', chat_template_kwargs: { reasoning_effort: 'high' } },
      { reasoning_effort: 'extreme' },
      { reasoning_effort: 2 },
      { reasoning_effort: 'low', chat_template_kwargs: Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, i])) },
    ];
    for (const body of cases)
      expect(refusal(parseChatRequest({ messages, ...(body as object) })).param, JSON.stringify(body)).toBe('reasoning_effort');
    expect(refusal(parseChatRequest({ messages, reasoning_effort: 'extreme' })).message).toBe(
      'reasoning_effort must be one of "none", "minimal", "low", "medium", "high" (got string "extreme")',
    );
  });
});

describe('chat_template_kwargs', () => {
  test.each([
    'namespace',
    'range',
    'raise_exception',
    'strftime_now',
    'true',
    'false',
    'none',
    'True',
    'False',
    'None',
    'loop',
    'dict',
    'cycler',
    'joiner',
    'lipsum',
    'self',
  ])('%s, declared by the template language, is a 400 naming the member', (name) => {
    expect(refusal(parseChatRequest({ messages, chat_template_kwargs: { [name]: 1 } }))).toEqual({
      param: `chat_template_kwargs.${name}`,
      message: expect.stringContaining(`${name} is a literal or a built-in of the chat template language`),
    });
  });

  test('eot_token, which the engine passes, is refused like bos_token; a name that merely looks alike passes', () => {
    expect(refusal(parseChatRequest({ messages, chat_template_kwargs: { eot_token: 'x' } })).param).toBe('chat_template_kwargs.eot_token');
    expect(kwargsOf(parseChatRequest({ messages, chat_template_kwargs: { namespaces: 1, Range: 2 } }))).toEqual({
      namespaces: 1,
      Range: 2,
    });
  });
});
