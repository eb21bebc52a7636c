/**
 * The REST relay passes an engine's events through byte for byte, whichever
 * blank line ends them (`\n\n`, or `\r\n\r\n` as sse-starlette servers send),
 * however the chunks cut them, and measures the answer on the way.
 */
import { expect, test } from 'vitest';
import { CUT_EVENTS } from '../../src/http/rest/chat-errors.js';
import { collectBody, pipeStream, relayStream, UpstreamCutError } from '../../src/router/relay.js';
import { routedToStandIn, sink } from '../support/relay-stand-in.js';

const chunk = (content: string | null, finish: string | null = null) =>
  `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":${content === null ? '{}' : JSON.stringify({ content })},"finish_reason":${finish ? `"${finish}"` : 'null'}}],"usage":null}`;
const usage =
  'data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}';

for (const [name, end] of [
  ['LF', '\n\n'],
  ['CRLF', '\r\n\r\n'],
] as const) {
  test(`events ended by ${name}, cut anywhere: passed through as they are, less the usage event the client did not ask for`, async () => {
    const { upstream, request, outcomes } = routedToStandIn();
    const { out, text } = sink();
    const events = [chunk(''), chunk('Hé'), chunk('llo'), chunk(null, 'stop'), usage, 'data: [DONE]'];
    const body = events.map((e) => e + end).join('');
    const piping = pipeStream(request, out, CUT_EVENTS);
    // Cut inside events, inside a blank line and inside the two bytes of 'é'.
    const bytes = Buffer.from(body);
    const cuts = [5, bytes.indexOf('é') + 1, bytes.indexOf('llo') + 2, bytes.indexOf('[DONE]') - 3];
    let at = 0;
    for (const cut of [...cuts, bytes.length]) {
      upstream.write(bytes.subarray(at, cut));
      at = cut;
      await new Promise((resolve) => setImmediate(resolve));
    }
    upstream.end();
    await piping;
    const expected = events
      .filter((e) => e !== usage)
      .map((e) => e + end)
      .join('');
    expect(text()).toBe(expected);
    expect(outcomes).toEqual([
      { promptTokens: 7, completionTokens: 3, ttftMs: expect.any(Number), finishReason: 'stop', cancelled: false, errorCode: null },
    ]);
  });
}

test('a usage event the client asked for passes; a last event without its blank line is delivered (with one) and counted', async () => {
  const { upstream, request, outcomes } = routedToStandIn({ includeUsage: true });
  const { out, text } = sink();
  const body = `${chunk('a')}\n\n${chunk(null, 'length')}\n\n${usage}\n\ndata: [DONE]\n`;
  const piping = pipeStream(request, out, CUT_EVENTS);
  upstream.end(body);
  await piping;
  expect(text()).toBe(`${body}\n`);
  expect(outcomes[0]).toMatchObject({ completionTokens: 3, finishReason: 'length', cancelled: false });
});

test('an event cut short at the end, or one that is not JSON, is passed on without breaking the relay (recorded as upstream_invalid)', async () => {
  const { upstream, request, outcomes } = routedToStandIn({ includeUsage: true });
  const { out, text } = sink();
  const piping = pipeStream(request, out, CUT_EVENTS);
  upstream.write(`${chunk('a')}\r\n\r\ndata: {"usage": {broken\r\n\r\n`);
  upstream.end(`${usage.slice(0, 60)}`);
  await piping;
  expect(text()).toBe(`${chunk('a')}\r\n\r\ndata: {"usage": {broken\r\n\r\n${usage.slice(0, 60)}\n\n${CUT_EVENTS}`);
  // The event that is not JSON is the replica's invalid answer (as GraphQL's relay records it), before its cut.
  expect(outcomes[0]).toMatchObject({
    promptTokens: null,
    completionTokens: null,
    cancelled: false,
    errorCode: 'upstream_invalid',
    httpStatus: 502,
  });
});

test("an answer the replica ends before [DONE] ends with an error event in OpenAI's shape and [DONE], and is recorded as cut", async () => {
  const { upstream, request, outcomes } = routedToStandIn();
  const { out, text } = sink();
  const piping = pipeStream(request, out, CUT_EVENTS);
  upstream.end(`${chunk('a')}\n\n`);
  await piping;
  const events = text().split('\n\n').filter(Boolean);
  expect(events).toEqual([chunk('a'), expect.stringMatching(/^data: \{"error":/), 'data: [DONE]']);
  expect(JSON.parse(events[1]!.slice(6))).toEqual({
    error: {
      message: expect.stringMatching(/stopped before the answer was complete/),
      type: 'server_error',
      param: null,
      code: 'upstream_disconnected',
    },
  });
  expect(outcomes[0]).toMatchObject({ cancelled: true, finishReason: null, errorCode: 'upstream_disconnected' });
});

test('a broken upstream connection (an error, not an end) is a cut too; a client that left is not', async () => {
  const broken = routedToStandIn();
  const a = sink();
  const piping = pipeStream(broken.request, a.out, CUT_EVENTS);
  broken.upstream.write(`${chunk('a')}\n\n`);
  await new Promise((resolve) => setImmediate(resolve));
  broken.upstream.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
  await piping;
  expect(a.text()).toBe(`${chunk('a')}\n\n${CUT_EVENTS}`);
  expect(broken.outcomes[0]).toMatchObject({ cancelled: true, errorCode: 'upstream_disconnected' });

  const left = routedToStandIn();
  const b = sink();
  const leaving = pipeStream(left.request, b.out, CUT_EVENTS);
  left.upstream.write(`${chunk('a')}\n\n`);
  await new Promise((resolve) => setImmediate(resolve));
  b.out.destroy();
  await leaving;
  expect(b.text()).toBe(`${chunk('a')}\n\n`);
  expect(left.outcomes[0]).toMatchObject({ cancelled: true, errorCode: null });
});

test('the GraphQL relay throws UpstreamCutError for an answer cut before [DONE], after what came', async () => {
  const { upstream, request, outcomes } = routedToStandIn();
  const payloads: string[] = [];
  const reading = (async () => {
    for await (const data of relayStream(request)) payloads.push(data);
  })();
  upstream.end(`${chunk('x')}\n\n`);
  await expect(reading).rejects.toBeInstanceOf(UpstreamCutError);
  expect(payloads).toEqual([chunk('x').slice(6)]);
  expect(outcomes[0]).toMatchObject({ cancelled: true, errorCode: 'upstream_disconnected' });
});

test('the GraphQL relay reads the same framings into payloads', async () => {
  const { upstream, request } = routedToStandIn();
  const reading = (async () => {
    const payloads: string[] = [];
    for await (const data of relayStream(request)) payloads.push(data);
    return payloads;
  })();
  upstream.write(`${chunk('x')}\r\n\r\n${chunk('y')}\n`);
  upstream.end(`\n${chunk(null, 'stop')}\r\n\r\ndata: [DONE]`);
  expect(await reading).toEqual([chunk('x'), chunk('y'), chunk(null, 'stop')].map((e) => e.slice(6)).concat('[DONE]'));
});

test('a non-streamed body broken off by the replica throws UpstreamCutError (502 on the chat route); a client abort does not', async () => {
  const broken = routedToStandIn();
  const reading = collectBody(broken.request);
  broken.upstream.write('{"id":"c1","choi');
  broken.upstream.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
  await expect(reading).rejects.toBeInstanceOf(UpstreamCutError);
  expect(broken.outcomes[0]).toMatchObject({ cancelled: true, errorCode: 'upstream_disconnected' });

  const aborted = routedToStandIn();
  const leaving = collectBody(aborted.request);
  aborted.upstream.destroy(Object.assign(new Error('This operation was aborted'), { name: 'AbortError' }));
  await expect(leaving).rejects.toMatchObject({ name: 'AbortError' });
  expect(aborted.outcomes[0]).toMatchObject({ cancelled: true, errorCode: null });
});

test('an answer that only calls tools has its time to first token at the chunk with the calls', async () => {
  const { upstream, request, outcomes } = routedToStandIn();
  const { out } = sink();
  const calls =
    'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}';
  const piping = pipeStream(request, out, CUT_EVENTS);
  upstream.write(`${chunk('')}\n\n`);
  await new Promise((resolve) => setTimeout(resolve, 20));
  upstream.end(`${calls}\n\n${chunk(null, 'tool_calls')}\n\n${usage}\n\ndata: [DONE]\n\n`);
  await piping;
  expect(outcomes[0]).toMatchObject({ finishReason: 'tool_calls', ttftMs: expect.any(Number) });
  expect(outcomes[0]!.ttftMs).toBeGreaterThanOrEqual(15);
});
