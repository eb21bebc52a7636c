/**
 * The REST relay passes an engine's events through byte for byte, whichever
 * blank line ends them (`\n\n`, or `\r\n\r\n` as sse-starlette servers send),
 * however the chunks cut them, and measures the answer on the way.
 */
import { PassThrough, Writable } from 'node:stream';
import type http from 'node:http';
import { expect, test } from 'vitest';
import type { RoutedRequest } from '../../src/router/chat-router.js';
import { pipeStream, relayStream } from '../../src/router/relay.js';

type Outcome = Parameters<RoutedRequest['finish']>[0];

function routed(includeUsage: boolean) {
  const upstream = new PassThrough() as PassThrough & { statusCode: number };
  upstream.statusCode = 200;
  const outcomes: Outcome[] = [];
  const request = {
    upstream: upstream as unknown as http.IncomingMessage,
    request: { stream: true, includeUsage },
    startedAt: performance.now(),
    queuedMs: 0,
    finish: (outcome: Outcome) => outcomes.push(outcome),
  } as unknown as RoutedRequest;
  return { upstream, request, outcomes };
}

function sink() {
  const chunks: Buffer[] = [];
  const out = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      callback();
    },
  });
  return { out, text: () => Buffer.concat(chunks).toString('utf8') };
}

const chunk = (content: string | null, finish: string | null = null) =>
  `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":${content === null ? '{}' : JSON.stringify({ content })},"finish_reason":${finish ? `"${finish}"` : 'null'}}],"usage":null}`;
const usage = 'data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}';

for (const [name, end] of [['LF', '\n\n'], ['CRLF', '\r\n\r\n']] as const) {
  test(`events ended by ${name}, cut anywhere: passed through as they are, less the usage event the client did not ask for`, async () => {
    const { upstream, request, outcomes } = routed(false);
    const { out, text } = sink();
    const events = [chunk(''), chunk('Hé'), chunk('llo'), chunk(null, 'stop'), usage, 'data: [DONE]'];
    const body = events.map((e) => e + end).join('');
    const piping = pipeStream(request, out);
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
    const expected = events.filter((e) => e !== usage).map((e) => e + end).join('');
    expect(text()).toBe(expected);
    expect(outcomes).toEqual([{ promptTokens: 7, completionTokens: 3, ttftMs: expect.any(Number), finishReason: 'stop', cancelled: false }]);
  });
}

test('a usage event the client asked for passes; a last event without its blank line is delivered (with one) and counted', async () => {
  const { upstream, request, outcomes } = routed(true);
  const { out, text } = sink();
  const body = `${chunk('a')}\n\n${chunk(null, 'length')}\n\n${usage}\n\ndata: [DONE]\n`;
  const piping = pipeStream(request, out);
  upstream.end(body);
  await piping;
  expect(text()).toBe(`${body}\n`);
  expect(outcomes[0]).toMatchObject({ completionTokens: 3, finishReason: 'length', cancelled: false });
});

test('an event cut short at the end, or one that is not JSON, is passed on without breaking the relay', async () => {
  const { upstream, request, outcomes } = routed(true);
  const { out, text } = sink();
  const piping = pipeStream(request, out);
  upstream.write(`${chunk('a')}\r\n\r\ndata: {"usage": {broken\r\n\r\n`);
  upstream.end(`${usage.slice(0, 60)}`);
  await piping;
  expect(text()).toBe(`${chunk('a')}\r\n\r\ndata: {"usage": {broken\r\n\r\n${usage.slice(0, 60)}\n\n`);
  expect(outcomes[0]).toMatchObject({ promptTokens: null, completionTokens: null, cancelled: true });
});

test('an answer cut off before [DONE] is recorded as cancelled', async () => {
  const { upstream, request, outcomes } = routed(false);
  const { out } = sink();
  const piping = pipeStream(request, out);
  upstream.end(`${chunk('a')}\n\n`);
  await piping;
  expect(outcomes[0]).toMatchObject({ cancelled: true, finishReason: null });
});

test('the GraphQL relay reads the same framings into payloads', async () => {
  const { upstream, request } = routed(false);
  const reading = (async () => {
    const payloads: string[] = [];
    for await (const data of relayStream(request)) payloads.push(data);
    return payloads;
  })();
  upstream.write(`${chunk('x')}\r\n\r\n${chunk('y')}\n`);
  upstream.end(`\n${chunk(null, 'stop')}\r\n\r\ndata: [DONE]`);
  expect(await reading).toEqual([chunk('x'), chunk('y'), chunk(null, 'stop')].map((e) => e.slice(6)).concat('[DONE]'));
});
