/**
 * Recording's cost on the hot path, side by side: the same streamed answers
 * relayed by `pipeStream` (the REST path) with recording off (the outcome is
 * thrown away) and on (the real recorder with Prometheus observation and
 * per-minute roll-ups, and again with content logging capturing every
 * event). Reports the relay time per streamed token and per request.
 *
 *   npm run bench -- recording      (BENCH_RECORDING_REQUESTS, BENCH_RECORDING_TOKENS)
 *
 * The recorder's writes go to a stand-in database that answers at once: what
 * they cost is off the request path by design (a timer, a bounded buffer).
 */
import { PassThrough, Writable } from 'node:stream';
import { target, type Bench, type BenchOutcome } from './lib/result.js';
import { round } from './lib/stats.js';
import { ContentCapture } from '../src/router/content-capture.js';
import type { RoutedRequest } from '../src/router/dispatch.js';
import { GatewayPrometheus } from '../src/router/prometheus.js';
import { CUT_EVENTS } from '../src/http/rest/chat-errors.js';
import { pipeStream } from '../src/router/relay.js';
import { RequestRecorder } from '../src/router/request-recorder.js';
import type { Sql } from '../src/storage/database.js';
import type { ChatRequest } from '../src/domain/chat-request.js';
import type { EndpointRecord } from '../src/domain/endpoint.js';
import type { ReplicaRecord } from '../src/domain/replica.js';

const REQUESTS = Number(process.env.BENCH_RECORDING_REQUESTS ?? 2000);
const TOKENS = Number(process.env.BENCH_RECORDING_TOKENS ?? 200);

const chunk = (i: number) =>
  `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok${i} "},"finish_reason":null}]}\n\n`;
const EVENTS = [
  ...Array.from({ length: TOKENS }, (_, i) => Buffer.from(chunk(i))),
  Buffer.from(
    `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":${TOKENS}}}\n\ndata: [DONE]\n\n`,
  ),
];

const instantDb = Object.assign(async () => [], { array: (values: unknown[]) => values }) as unknown as Sql;

type Mode = 'off' | 'on' | 'on+content';

async function relayOne(mode: Mode, recorder: RequestRecorder): Promise<void> {
  const body = new PassThrough();
  const upstream = { status: 200, contentType: 'text/event-stream', body };
  const startedAt = performance.now();
  const request = { stream: true, includeUsage: false, messages: [{ role: 'user', content: 'hi' }] } as unknown as ChatRequest;
  const routed: RoutedRequest = {
    endpoint: {} as EndpointRecord,
    replica: {} as ReplicaRecord,
    request,
    upstream,
    startedAt,
    queuedMs: 0,
    finish: (outcome) => {
      if (mode === 'off') return;
      recorder.record({
        endpointId: 'ep_bench',
        replicaId: 'rp_bench',
        teamId: 'tm',
        userId: 'us',
        stream: true,
        httpStatus: 200,
        durationMs: performance.now() - startedAt,
        queuedMs: 0,
        startedAt: new Date(),
        ...outcome,
        ...(routed.capture ? { content: routed.capture } : {}),
      });
    },
  };
  if (mode === 'on+content') routed.capture = new ContentCapture(request.messages, 0);
  const out = new Writable({ write: (_chunk, _encoding, callback) => callback() });
  const done = pipeStream(routed, out, CUT_EVENTS);
  for (const event of EVENTS) (upstream as unknown as PassThrough).write(event);
  (upstream as unknown as PassThrough).end();
  await done;
}

async function run(mode: Mode): Promise<number> {
  const prometheus = new GatewayPrometheus(() => 0);
  const recorder = new RequestRecorder(instantDb, 250, () => {}, { observe: (batch) => prometheus.observe(batch) });
  for (let i = 0; i < 200; i++) await relayOne(mode, recorder); // warm-up
  const t0 = performance.now();
  for (let i = 0; i < REQUESTS; i++) await relayOne(mode, recorder);
  const ms = performance.now() - t0;
  await recorder.close();
  return ms;
}

const MODES: Mode[] = ['off', 'on', 'on+content'];

export const recording: Bench = {
  name: 'recording',
  title: 'Recording on the hot path: the REST relay with recording off, on, and with content logging',
  async run(): Promise<BenchOutcome> {
    // Interleaved rounds, so that drift in the machine's speed touches every mode alike.
    const totals = new Map<Mode, number[]>(MODES.map((m) => [m, []]));
    for (let round = 0; round < 3; round++) for (const mode of MODES) totals.get(mode)!.push(await run(mode));
    const perToken = new Map<Mode, number>();
    const rows = MODES.map((mode) => {
      const best = Math.min(...totals.get(mode)!);
      perToken.set(mode, (best / (REQUESTS * TOKENS)) * 1e6);
      return [
        mode,
        round((best / REQUESTS) * 1000, 1),
        round(perToken.get(mode)!, 0),
        round(perToken.get(mode)! / perToken.get('off')!, 3),
      ];
    });
    const addedOn = perToken.get('on')! / perToken.get('off')!;
    return {
      method:
        `${REQUESTS} streamed answers of ${TOKENS} tokens each relayed by pipeStream (the REST path) into a sink, three ways in ` +
        'interleaved rounds (best of 3): recording off (the outcome thrown away), on (the real recorder: bounded buffer, ' +
        'Prometheus observation, per-minute roll-ups, writes to a stand-in database that answers at once), and on with content ' +
        'logging capturing every event.',
      valid: true,
      problems: [],
      table: { columns: ['recording', 'µs per request', 'ns per token', '÷ off'], rows },
      targets: [target('relay time per token, recording on ÷ off', addedOn, '<=', 1.05, '', 3)],
      notes: ['Content logging is opt-in per endpoint; its cost is shown for reference, with no target.'],
      data: Object.fromEntries(MODES.map((m) => [m, totals.get(m)])),
    };
  },
};
