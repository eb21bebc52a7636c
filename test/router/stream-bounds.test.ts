/**
 * The relay's bounds on a replica's answer, against a stand-in upstream (a PassThrough): an event that never ends
 * costs its length once and is cut past the answer's bound (upstream_invalid), on both relays; an engine's own
 * error event is recorded as the error it is (its code, status 502), on both relays; a non-streamed answer (or error
 * body) over the bound is cut and recorded as upstream_invalid; a replica silent past the idle bound once the first
 * token came is cut, and its silence before the first token (a long prefill) is not bounded.
 */
import { afterEach, expect, test, vi } from 'vitest';
import { CUT_EVENTS } from '../../src/http/rest/chat-errors.js';
import { collectBody, pipeStream, relayStream, UpstreamCutError } from '../../src/router/relay.js';
import { answerBytesLimit } from '../../src/router/answer-bounds.js';
import { SseParser } from '../../src/router/sse.js';
import { routedToStandIn, sink } from '../support/relay-stand-in.js';

const chunk = (content: string) =>
  `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":${JSON.stringify({ content })},"finish_reason":null}]}`;
const ERROR_EVENT = 'data: {"error":{"message":"The generation failed","type":"server_error","param":null,"code":"generation_failed"}}';
const tick = () => new Promise((resolve) => setImmediate(resolve));

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

test('the parser finds the same events however the chunks cut them (LF and CRLF, a blank line split anywhere)', () => {
  const events = [chunk('a'), chunk('bé'), 'data: [DONE]'];
  for (const end of ['\n\n', '\r\n\r\n']) {
    const bytes = Buffer.from(events.map((e) => e + end).join(''));
    for (let size = 1; size <= 7; size++) {
      const parser = new SseParser(1024);
      const found: string[] = [];
      for (let at = 0; at < bytes.length; at += size) {
        const parsed = parser.push(bytes.subarray(at, at + size));
        for (const e of parsed?.events ?? []) found.push(parsed!.bytes.toString('utf8', e.start, e.end));
      }
      expect(found).toEqual(events);
      expect(parser.end()).toBeNull();
    }
  }
});

test('an event that never ends costs its length once, not once per chunk (the bytes copied are counted)', async () => {
  const { upstream, request, outcomes } = routedToStandIn();
  const { out, text } = sink();
  const piping = pipeStream(request, out, CUT_EVENTS);
  await tick();
  const concat = vi.spyOn(Buffer, 'concat');
  const piece = 'y'.repeat(16 * 1024);
  upstream.write('data: {"id":"c","choices":[{"delta":{"content":"');
  for (let i = 0; i < 256; i++) {
    upstream.write(piece);
    await tick();
  }
  upstream.write('"}}]}\n\ndata: [DONE]\n\n');
  upstream.end();
  await piping;
  const copied = concat.mock.calls.reduce((sum, [list]) => sum + list.reduce((n, b) => n + b.length, 0), 0);
  const sent = 256 * piece.length;
  // Once as each chunk is searched (with 3 bytes before it), once when the event ends: about twice what came.
  expect(copied).toBeLessThan(3 * sent);
  expect(text().length).toBeGreaterThan(sent);
  expect(outcomes[0]).toMatchObject({ cancelled: false, errorCode: null });
});

test('an event longer than the bound is cut with the cut events (REST) and recorded as upstream_invalid, 502', async () => {
  const { upstream, request, outcomes } = routedToStandIn({ maxAnswerBytes: 64 * 1024 });
  const { out, text } = sink();
  const piping = pipeStream(request, out, CUT_EVENTS);
  upstream.write(`${chunk('hi')}\n\n`);
  upstream.write('data: {"id":"c","choices":[{"delta":{"content":"');
  // Written until the relay lets go of the replica (at most a little past the bound).
  for (let i = 0; i < 64 && !upstream.destroyed; i++) {
    upstream.write('y'.repeat(4096));
    await tick();
  }
  await piping;
  expect(upstream.destroyed).toBe(true);
  expect(text()).toBe(`${chunk('hi')}\n\n${CUT_EVENTS}`);
  expect(outcomes).toEqual([expect.objectContaining({ cancelled: false, errorCode: 'upstream_invalid', httpStatus: 502 })]);
});

test('the GraphQL relay cuts an event longer than the bound too (UpstreamCutError), recorded as upstream_invalid', async () => {
  const { upstream, request, outcomes } = routedToStandIn({ maxAnswerBytes: 64 * 1024 });
  const payloads: string[] = [];
  const reading = expect(
    (async () => {
      for await (const data of relayStream(request)) payloads.push(data);
    })(),
  ).rejects.toBeInstanceOf(UpstreamCutError);
  upstream.write(`${chunk('hi')}\n\n`);
  upstream.write('data: {"id":"c","choices":[{"delta":{"content":"');
  for (let i = 0; i < 64 && !upstream.destroyed; i++) {
    upstream.write('y'.repeat(4096));
    await tick();
  }
  await reading;
  expect(upstream.destroyed).toBe(true);
  expect(payloads).toEqual([chunk('hi').slice(6)]);
  expect(outcomes).toEqual([expect.objectContaining({ cancelled: false, errorCode: 'upstream_invalid', httpStatus: 502 })]);
});

test("an engine's error event then [DONE] is recorded as the engine's error (502), passed through as it is (REST)", async () => {
  const { upstream, request, outcomes } = routedToStandIn();
  const { out, text } = sink();
  const piping = pipeStream(request, out, CUT_EVENTS);
  const body = `${chunk('hi')}\n\n${ERROR_EVENT}\n\ndata: [DONE]\n\n`;
  upstream.end(body);
  await piping;
  expect(text()).toBe(body);
  expect(outcomes).toEqual([expect.objectContaining({ cancelled: false, errorCode: 'generation_failed', httpStatus: 502 })]);

  // One without a code of its own, and one with whitespace (a Python engine's json.dumps): upstream_error.
  const other = routedToStandIn();
  const piped = pipeStream(other.request, sink().out, CUT_EVENTS);
  other.upstream.end(`${chunk('hi')}\n\ndata: {"error": {"message": "no", "code": 400}}\n\ndata: [DONE]\n\n`);
  await piped;
  expect(other.outcomes).toEqual([expect.objectContaining({ cancelled: false, errorCode: 'upstream_error', httpStatus: 502 })]);
});

test("the GraphQL relay records the engine's error event the same, its consumer ending at it (not a client's cancel)", async () => {
  const { upstream, request, outcomes } = routedToStandIn();
  upstream.end(`${chunk('hi')}\n\n${ERROR_EVENT}\n\ndata: [DONE]\n\n`);
  // As the chatCompletion subscription does: the error event ends the stream with the engine's error.
  for await (const data of relayStream(request)) if (data.startsWith('{"error"')) break;
  expect(outcomes).toEqual([expect.objectContaining({ cancelled: false, errorCode: 'generation_failed', httpStatus: 502 })]);
});

test('a non-streamed answer, or error body, over the bound is cut: upstream_invalid, recorded with 502', async () => {
  for (const status of [200, 500]) {
    const { upstream, request, outcomes } = routedToStandIn({ maxAnswerBytes: 64 * 1024, status });
    const reading = expect(collectBody(request)).rejects.toMatchObject({ name: 'UpstreamCutError', code: 'upstream_invalid' });
    upstream.write('{"id":"c1","choices":[{"message":{"content":"');
    for (let i = 0; i < 64 && !upstream.destroyed; i++) {
      upstream.write('z'.repeat(4096));
      await tick();
    }
    await reading;
    expect(upstream.destroyed).toBe(true);
    expect(outcomes).toEqual([expect.objectContaining({ cancelled: false, errorCode: 'upstream_invalid', httpStatus: 502 })]);
  }
});

test('the bound follows the request: max_tokens, else the version max_token_count, logprobs; at most 64 MiB', () => {
  const sampling = { logprobs: false, topLogprobs: 0 };
  expect(answerBytesLimit({ maxTokens: undefined, sampling }, 4096)).toBe(1024 * 1024 + 4096 * 64);
  expect(answerBytesLimit({ maxTokens: 100, sampling }, 4096)).toBe(1024 * 1024 + 100 * 64);
  expect(answerBytesLimit({ maxTokens: 100, sampling: { logprobs: true, topLogprobs: 4 } }, 4096)).toBe(1024 * 1024 + 100 * (64 + 5 * 192));
  expect(answerBytesLimit({ maxTokens: undefined, sampling: { logprobs: true, topLogprobs: 20 } }, 1 << 20)).toBe(64 * 1024 * 1024);
});

test('a replica silent past the idle bound once the first token came is cut (REST); before it, not bounded', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  const { upstream, request, outcomes } = routedToStandIn({ idleTimeoutMs: 1000 });
  const { out, text } = sink();
  let ended = false;
  const piping = pipeStream(request, out, CUT_EVENTS).then(() => (ended = true));
  // The role chunk comes at once; the prompt's prefill then takes long: no bound yet.
  upstream.write(`${chunk('')}\n\n`);
  await tick();
  vi.advanceTimersByTime(60_000);
  await tick();
  expect(ended).toBe(false);
  upstream.write(`${chunk('hi')}\n\n`);
  await tick();
  vi.advanceTimersByTime(900);
  upstream.write(`${chunk(' there')}\n\n`);
  await tick();
  vi.advanceTimersByTime(900);
  await tick();
  expect(ended).toBe(false);
  vi.advanceTimersByTime(200);
  await piping;
  expect(upstream.destroyed).toBe(true);
  expect(text()).toBe(`${chunk('')}\n\n${chunk('hi')}\n\n${chunk(' there')}\n\n${CUT_EVENTS}`);
  expect(outcomes).toEqual([expect.objectContaining({ cancelled: true, errorCode: 'upstream_disconnected' })]);
});

test('the GraphQL relay cuts a silent replica too; a whole answer whose body stops is cut as well', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  const streamed = routedToStandIn({ idleTimeoutMs: 1000 });
  const reading = (async () => {
    for await (const data of relayStream(streamed.request)) void data;
  })();
  const failed = expect(reading).rejects.toBeInstanceOf(UpstreamCutError);
  streamed.upstream.write(`${chunk('hi')}\n\n`);
  await tick();
  vi.advanceTimersByTime(1001);
  await failed;
  expect(streamed.outcomes).toEqual([expect.objectContaining({ errorCode: 'upstream_disconnected' })]);

  const whole = routedToStandIn({ idleTimeoutMs: 1000 });
  const collecting = expect(collectBody(whole.request)).rejects.toMatchObject({ code: 'upstream_disconnected' });
  whole.upstream.write('{"id":"c1","choi');
  await tick();
  vi.advanceTimersByTime(1001);
  await collecting;
  expect(whole.outcomes).toEqual([expect.objectContaining({ errorCode: 'upstream_disconnected' })]);
});
