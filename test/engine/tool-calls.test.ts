/** Reading tool calls from an answer in the model's own syntax (auto) and from a forced JSON list. */
import { describe, expect, test } from 'vitest';
import {
  jsonEnd,
  looseMatch,
  parseForcedCalls,
  parseNativeCalls,
  ToolCallCapture,
  type ToolPlan,
  type ToolSyntax,
} from '../../src/engine/tool-calls.js';

const QWEN: ToolSyntax = {
  prefixes: ['<tool_call>\n{"name": "'],
  paramsPrefix: '", "arguments": ',
  suffix: '}\n</tool_call>',
  resultPrefix: '<tool_response>',
};
const NODE_LLAMA: ToolSyntax = { prefixes: ['||call: ', '||call:'], paramsPrefix: '(', suffix: ')', resultPrefix: '||result:' };
const names = new Set(['get_weather', 'get_time']);
const auto = (syntax: ToolSyntax, single = false): ToolPlan => ({ mode: 'auto', syntax, names, single });

/** Pushes `text` in pieces of `size` characters and finishes. */
function capture(plan: ToolPlan, text: string, size: number) {
  const tools = new ToolCallCapture(plan);
  let content = '';
  for (let i = 0; i < text.length; i += size) content += tools.push(text.slice(i, i + size));
  const end = tools.finish();
  return { content: content + end.text, calls: end.calls };
}

describe('the syntax helpers', () => {
  test('looseMatch: whitespace matches any run of it, or none', () => {
    for (const text of ['<tool_call>{"name":"x"', '  <tool_call>\n\n{ "name" :  "x']) {
      expect(looseMatch(text, 0, '<tool_call>\n{"name": "')).toBe(text.indexOf('x'));
    }
    expect(looseMatch('<tool_cal>', 0, '<tool_call>')).toBe(-1);
  });

  test('jsonEnd: the end of an object or array, strings and escapes respected; -1 when cut', () => {
    const text = ' {"a": "}\\"]", "b": [1, {"c": 2}]} tail';
    expect(text.slice(0, jsonEnd(text, 0))).toBe(' {"a": "}\\"]", "b": [1, {"c": 2}]}');
    expect(jsonEnd('{"a": [1, 2', 0)).toBe(-1);
    expect(jsonEnd('"text"', 0)).toBe(-1);
  });
});

describe('calls in the model syntax (tool_choice auto)', () => {
  const qwenAnswer =
    'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "note": "a } in a string"}}\n</tool_call>\n' +
    '<tool_call>\n{"name":"get_time","arguments":{}}</tool_call>';

  test.each([1, 3, 1000])("Qwen's syntax in pieces of %i: content before the first call is streamed, the calls read at the end", (size) => {
    expect(capture(auto(QWEN), qwenAnswer, size)).toEqual({
      content: 'Let me check.\n',
      calls: [
        { name: 'get_weather', arguments: '{"city": "Paris", "note": "a } in a string"}' },
        { name: 'get_time', arguments: '{}' },
      ],
    });
  });

  test('parallel_tool_calls false keeps the first call', () => {
    expect(capture(auto(QWEN, true), qwenAnswer, 5).calls).toEqual([
      { name: 'get_weather', arguments: '{"city": "Paris", "note": "a } in a string"}' },
    ]);
  });

  test("node-llama-cpp's syntax, with or without arguments", () => {
    expect(parseNativeCalls('||call: get_weather({"city": "Rome"})\n||call:get_time()', NODE_LLAMA, names)).toEqual({
      calls: [
        { name: 'get_weather', arguments: '{"city": "Rome"}' },
        { name: 'get_time', arguments: '{}' },
      ],
      rest: '',
    });
  });

  test('a call spaced its own way is still a call; text between and after calls, and a call of another tool, stay content', () => {
    const text =
      'Checking.<tool_call>{"name":"get_time","arguments":{}}</tool_call>\nAnd also:\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>' +
      '\n<tool_call>{"name": "rm", "arguments": {}}</tool_call>';
    expect(capture(auto(QWEN), text, 7)).toEqual({
      content: 'Checking.And also:\n\n<tool_call>{"name": "rm", "arguments": {}}</tool_call>',
      calls: [
        { name: 'get_time', arguments: '{}' },
        { name: 'get_weather', arguments: '{"city": "Rome"}' },
      ],
    });
  });

  test.each([
    ['an unknown tool', 'Sure.\n<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>'],
    ['arguments that are not an object', 'Sure.\n<tool_call>\n{"name": "get_time", "arguments": [1]}\n</tool_call>'],
    ['a call cut short', 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa'],
  ])('%s is content after all', (_what, text) => {
    expect(capture(auto(QWEN), text, 4)).toEqual({ content: text, calls: [] });
  });

  test('an opening that starts no call (another tool, the tag in prose) is content, and the calls after it are still read', () => {
    const bad = '<tool_call>\n{"name": "zz", "arguments": {}}\n</tool_call>';
    const good = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>';
    expect(capture(auto(QWEN), bad + good, 5)).toEqual({ content: bad, calls: [{ name: 'get_time', arguments: '{}' }] });
    const prose = 'I will use <tool_call> tags. ';
    expect(capture(auto(QWEN), prose + good + ' Done.', 3)).toEqual({
      content: 'I will use <tool_call> tags.  Done.',
      calls: [{ name: 'get_time', arguments: '{}' }],
    });
  });

  test('text that only starts like a call is passed on once it differs; an answer without calls is all content', () => {
    const tools = new ToolCallCapture(auto(QWEN));
    expect(tools.push('a <tool')).toBe('a ');
    expect(tools.push('box> b')).toBe('<toolbox> b');
    expect(tools.finish()).toEqual({ text: '', calls: [] });
  });
});

describe('a forced call (a JSON list)', () => {
  test('is read whole, arguments serialized again; anything else is not a call', () => {
    expect(
      parseForcedCalls('[{"name": "get_time", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "Rome"}}]', names),
    ).toEqual([
      { name: 'get_time', arguments: '{}' },
      { name: 'get_weather', arguments: '{"city":"Rome"}' },
    ]);
    expect(parseForcedCalls('[{"name": "get_time", "argu', names)).toBeUndefined();
    expect(parseForcedCalls('[]', names)).toBeUndefined();
    expect(parseForcedCalls('[{"name": "get_time", "arguments": [1]}]', names)).toBeUndefined();
    expect(parseForcedCalls('[{"name": "other", "arguments": {}}]', names)).toBeUndefined();
  });

  test('cut short (max_tokens): never content; the calls begun, the last with its arguments so far', () => {
    const forced = (single = false) => ({ mode: 'forced' as const, names, single });
    const finish = (text: string, single = false) => {
      const tools = new ToolCallCapture(forced(single));
      for (let i = 0; i < text.length; i += 3) expect(tools.push(text.slice(i, i + 3))).toBe('');
      return tools.finish();
    };
    // No name whole yet: nothing to show, and nothing leaks as content.
    for (const text of ['[', '[{"name"', '[{"name": "get_ti']) expect(finish(text)).toEqual({ text: '', calls: [], cut: [] });
    expect(finish('[{"name": "get_time", "argu')).toEqual({ text: '', calls: [], cut: [{ name: 'get_time', arguments: '' }] });
    expect(finish('[ { "name" : "get_weather" , "arguments" : {"city": "Pa')).toEqual({
      text: '',
      calls: [],
      cut: [{ name: 'get_weather', arguments: '{"city": "Pa' }],
    });
    const two = '[{"name": "get_time", "arguments": {}}, {"name": "get_weather", "arguments": {"ci';
    expect(finish(two).cut).toEqual([
      { name: 'get_time', arguments: '{}' },
      { name: 'get_weather', arguments: '{"ci' },
    ]);
    expect(finish(two, true).cut).toEqual([{ name: 'get_time', arguments: '{}' }]);
    // A name the grammar would not have written is not a call.
    expect(finish('[{"name": "rm", "arguments": {').cut).toEqual([]);
    // A whole list is read as before.
    expect(finish('[{"name": "get_time", "arguments": {}}]')).toEqual({ text: '', calls: [{ name: 'get_time', arguments: '{}' }] });
  });
});
