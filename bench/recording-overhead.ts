/**
 * Recording's cost on the hot path, side by side: the same streamed answers
 * relayed by `pipeStream` (the REST path) with recording off (the outcome is
 * thrown away) and on (the real recorder with Prometheus observation and
 * per-minute roll-ups, and again with content logging capturing every
 * event). Reports the relay time per streamed token and per request.
 *
 *   npx tsx bench/recording-overhead.ts [requests=2000] [tokens=200]
 *
 * The recorder's writes go to a stand-in database that answers at once: what
 * they cost is off the request path by design (a timer, a bounded buffer).
 */
import { PassThrough, Writable } from 'node:stream';
import type http from 'node:http';
import { ContentCapture } from '../src/router/content-capture.js';
import type { RoutedRequest } from '../src/router/chat-router.js';
import { GatewayPrometheus } from '../src/router/prometheus.js';
import { pipeStream } from '../src/router/relay.js';
import { RequestRecorder } from '../src/router/request-recorder.js';
import type { Sql } from '../src/storage/database.js';
import type { ChatRequest } from '../src/domain/chat-request.js';
import type { EndpointRecord } from '../src/domain/endpoint.js';
import type { ReplicaRecord } from '../src/domain/replica.js';

const REQUESTS = Number(process.argv[2] ?? 2000);
const TOKENS = Number(process.argv[3] ?? 200);

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
  const upstream = new PassThrough() as unknown as http.IncomingMessage;
  (upstream as unknown as { statusCode: number }).statusCode = 200;
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
  const done = pipeStream(routed, out);
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

const results: Record<string, { perRequestUs: number; perTokenNs: number }> = {};
// Interleaved rounds, so that drift in the machine's speed touches every mode alike.
const modes: Mode[] = ['off', 'on', 'on+content'];
const totals = new Map<Mode, number[]>(modes.map((m) => [m, []]));
for (let round = 0; round < 3; round++) for (const mode of modes) totals.get(mode)!.push(await run(mode));
for (const mode of modes) {
  const best = Math.min(...totals.get(mode)!);
  results[mode] = { perRequestUs: (best / REQUESTS) * 1000, perTokenNs: (best / (REQUESTS * TOKENS)) * 1e6 };
}
console.log(`${REQUESTS} streamed requests of ${TOKENS} tokens each, relayed by pipeStream (best of 3 interleaved rounds):`);
console.table(results);
