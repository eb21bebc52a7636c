/**
 * Overload load generator (a child process of the overload benchmark):
 * `concurrency` closed-loop clients, each sending a streamed chat completion,
 * reading it to `data: [DONE]`, and sending the next, for `durationMs`. A
 * client answered 429 or 503 waits the answer's Retry-After (`retry-after-ms`
 * when given, else `retry-after` in seconds), clamped to
 * [minRetryMs, maxRetryMs], and tries again; any other failure waits
 * `errorBackoffMs`.
 *
 * Per request it records when it was sent, how many requests were then
 * waiting for an answer's head (the gateway's queue as this, the only client,
 * sees it), the status and the time to it, and for a 200 the time to the first
 * content token and whether the stream completed. Every `sampleMs` it samples
 * the requests waiting for a head; completed streams are also counted per
 * second of the run (goodput as it evolves).
 *
 * No request is sent after `durationMs`; those under way then finish on their
 * own (a 200 stream must still complete), within `graceMs`.
 */
import http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { childMain, nowMs } from '../lib/env.js';

export interface OverloadLoadConfig {
  url: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
  /** Content tokens each answer must carry (else the stream counts as dropped). */
  expectTokens: number;
  concurrency: number;
  durationMs: number;
  /** Goodput counts streams completed from this offset to `durationMs` (the queue fills before). */
  windowStartMs: number;
  graceMs: number;
  minRetryMs: number;
  maxRetryMs: number;
  errorBackoffMs: number;
  sampleMs: number;
  /** Clients start spread over this long (0: all at once). */
  rampMs: number;
  /**
   * Before the clock starts, each client opens its keep-alive connection (a `GET /healthz` answered
   * by the server under test), so that the times measured are the requests' own, as wrk and k6's
   * `http_req_duration` measure them: not the TCP connections' set-up. Off: the first burst opens
   * `concurrency` connections at once, and its times include their set-up.
   */
  preconnect: boolean;
}

export interface OverloadLoadResult {
  /** Wall clock (ms since the epoch) of the load's start: comparable with timestamps from PostgreSQL on this machine. */
  startWallMs: number;
  durationMs: number;
  windowMs: number;
  /** Streams completed inside the goodput window. */
  windowCompleted: number;
  /** Per request, in the order they ended. */
  sentAtMs: Float64Array;
  /** Requests waiting for a head when this one was sent (not counting itself). */
  aheadAtSend: Float64Array;
  status: Int32Array;
  /** Time to the answer's head (any status); NaN when none came. */
  headMs: Float64Array;
  /** For 200: time to the first content token; NaN otherwise. */
  ttftMs: Float64Array;
  /** For 200: time to the end of the stream; NaN otherwise. */
  totalMs: Float64Array;
  /** 1 when a 200 stream completed, 0 otherwise. */
  completed: Uint8Array;
  /** Retry-After of each 429/503, in ms as sent (NaN when absent). */
  retryAfterMs: Float64Array;
  /** The OpenAI error `code` of each answer other than 200 ('' when none), as an index into `codes`. */
  codeIndex: Int32Array;
  codes: string[];
  /** Content tokens received inside the goodput window (all streams). */
  windowTokens: number;
  /** Completed streams per second of the run (by their end). */
  completedPerSecond: number[];
  /** 429s per second of the run (by their head). */
  refusedPerSecond: number[];
  /** Requests waiting for a head, sampled every sampleMs: [ms since start, count]. */
  waitingSamples: Float64Array;
  /** Completed streams per client. */
  perClient: Int32Array;
  counts: {
    sent: number;
    ok: number;
    completed: number;
    dropped: number;
    s429: number;
    s503: number;
    otherStatus: number;
    socketErrors: number;
  };
  errors: Record<string, number>;
  errorSamples: string[];
  /** Bodies of some 429/503 answers, for the record. */
  refusalSamples: string[];
  /** Requests still open when the grace period ended (they were abandoned). */
  abandoned: number;
  /** This load generator's own event-loop delay (ms): how late it may have seen an answer. */
  loopDelayMs: { p50: number; p99: number; max: number };
  /** CPU this process used, ms per second of the run. */
  cpuMsPerS: number;
}

interface Rec {
  sentAt: number[];
  ahead: number[];
  status: number[];
  head: number[];
  ttft: number[];
  total: number[];
  completed: number[];
  retryAfter: number[];
  code: number[];
  windowTokens: number;
  completedPerSecond: number[];
  refusedPerSecond: number[];
  perClient: number[];
  counts: OverloadLoadResult['counts'];
  errors: Record<string, number>;
  errorSamples: string[];
  refusalSamples: string[];
  windowCompleted: number;
}

function bump(array: number[], index: number): void {
  if (index < 0) return;
  while (array.length <= index) array.push(0);
  array[index]!++;
}

function retryAfterOf(headers: http.IncomingHttpHeaders): number {
  const ms = Number(headers['retry-after-ms']);
  if (headers['retry-after-ms'] !== undefined && Number.isFinite(ms)) return ms;
  const value = headers['retry-after'];
  if (value === undefined) return Number.NaN;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isFinite(date) ? Math.max(0, date - Date.now()) : Number.NaN;
}

/** Opens `count` keep-alive connections in `agent` (concurrent GETs of `url`, each on its own socket), then lets them settle. */
async function preconnect(agent: http.Agent, url: URL, count: number): Promise<void> {
  await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<void>((resolve, reject) => {
          const req = http.get(url, { agent }, (res) => {
            res.resume();
            res.on('end', resolve);
          });
          req.on('error', reject);
        }),
    ),
  );
  const open = Object.values(agent.freeSockets).reduce((n, sockets) => n + (sockets?.length ?? 0), 0);
  if (open < count) throw new Error(`preconnect: ${open} of ${count} connections stayed open`);
  await new Promise((r) => setTimeout(r, 200));
}

childMain<OverloadLoadConfig, OverloadLoadResult>(async (config, send) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: config.concurrency, keepAliveMsecs: 60_000 });
  const payload = JSON.stringify(config.body);
  const rec: Rec = {
    sentAt: [],
    ahead: [],
    status: [],
    head: [],
    ttft: [],
    total: [],
    completed: [],
    retryAfter: [],
    code: [],
    windowTokens: 0,
    completedPerSecond: [],
    refusedPerSecond: [],
    perClient: Array.from({ length: config.concurrency }, () => 0),
    counts: { sent: 0, ok: 0, completed: 0, dropped: 0, s429: 0, s503: 0, otherStatus: 0, socketErrors: 0 },
    errors: {},
    errorSamples: [],
    refusalSamples: [],
    windowCompleted: 0,
  };
  const codes: string[] = [''];
  const codeOf = (text: string): number => {
    const code = /"code"\s*:\s*"([^"]*)"/.exec(text)?.[1] ?? '';
    let index = codes.indexOf(code);
    if (index < 0) index = codes.push(code) - 1;
    return index;
  };
  if (config.preconnect) await preconnect(agent, new URL('/healthz', config.url), config.concurrency);
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  const cpu0 = process.cpuUsage();
  const startWallMs = nowMs();
  const start = performance.now();
  // The parent polls the replicas from the load's start.
  send({ type: 'mark', what: 'start', wallMs: startWallMs });
  const end = start + config.durationMs;
  const hardDeadline = end + config.graceMs;
  let waiting = 0;
  const open = new Set<http.ClientRequest>();
  const samples: number[] = [];
  const sampler = setInterval(() => samples.push(performance.now() - start, waiting), config.sampleMs);

  const error = (kind: string, detail: string) => {
    rec.errors[kind] = (rec.errors[kind] ?? 0) + 1;
    if (rec.errorSamples.length < 8) rec.errorSamples.push(`${kind}: ${detail}`.slice(0, 300));
  };

  /** One request; resolves with how long the client waits before its next. */
  const oneRequest = (client: number): Promise<number> =>
    new Promise((resolve) => {
      const sentAt = performance.now();
      const ahead = waiting;
      waiting++;
      rec.counts.sent++;
      let headed = false;
      let status = 0;
      let headAt = Number.NaN;
      let firstAt = Number.NaN;
      let tokens = 0;
      let done = false;
      let settled = false;
      let retryAfter = Number.NaN;
      let code = 0;
      const settle = (ok: boolean, waitMs: number) => {
        if (settled) return;
        settled = true;
        clearTimeout(guard);
        open.delete(req);
        if (!headed) waiting--;
        const now = performance.now();
        rec.sentAt.push(sentAt - start);
        rec.ahead.push(ahead);
        rec.status.push(status);
        rec.head.push(headAt - sentAt);
        rec.ttft.push(firstAt - sentAt);
        rec.total.push(status === 200 ? now - sentAt : Number.NaN);
        rec.completed.push(ok ? 1 : 0);
        rec.retryAfter.push(retryAfter);
        rec.code.push(code);
        if (ok) {
          rec.counts.completed++;
          rec.perClient[client]!++;
          bump(rec.completedPerSecond, Math.floor((now - start) / 1000));
          if (now >= start + config.windowStartMs && now <= end) rec.windowCompleted++;
        }
        resolve(waitMs);
      };
      const req = http.request(config.url, {
        method: 'POST',
        agent,
        headers: { ...config.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      });
      open.add(req);
      const guard = setTimeout(
        () => {
          if (status === 200) rec.counts.dropped++;
          error(
            'stalled',
            `status ${status || 'none'}, ${tokens} tokens, no end ${Math.round(performance.now() - sentAt)} ms after sending`,
          );
          req.destroy();
          settle(false, config.errorBackoffMs);
        },
        Math.max(1000, hardDeadline - sentAt),
      );
      req.on('error', (e) => {
        if (settled) return;
        if (status === 200) {
          rec.counts.dropped++;
          error('stream', `${e.message} after ${tokens} tokens`);
        } else {
          rec.counts.socketErrors++;
          error('socket', e.message);
        }
        settle(false, config.errorBackoffMs);
      });
      req.on('response', (res) => {
        headed = true;
        waiting--;
        status = res.statusCode ?? 0;
        headAt = performance.now();
        if (status !== 200) {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => {
            code = codeOf(text);
            if (status === 429 || status === 503) {
              retryAfter = retryAfterOf(res.headers);
              if (status === 429) {
                rec.counts.s429++;
                bump(rec.refusedPerSecond, Math.floor((headAt - start) / 1000));
              } else rec.counts.s503++;
              if (
                rec.refusalSamples.length < 4 ||
                (rec.refusalSamples.length < 8 && !rec.refusalSamples.some((s) => s.startsWith(String(status))))
              ) {
                rec.refusalSamples.push(`${status} retry-after ${res.headers['retry-after'] ?? '–'}: ${text}`.slice(0, 400));
              }
              const wait = Number.isFinite(retryAfter) ? retryAfter : config.maxRetryMs;
              settle(false, Math.min(config.maxRetryMs, Math.max(config.minRetryMs, wait)));
            } else {
              rec.counts.otherStatus++;
              error(`http_${status}`, text);
              settle(false, config.errorBackoffMs);
            }
          });
          res.on('error', (e) => {
            rec.counts.socketErrors++;
            error('socket', e.message);
            settle(false, config.errorBackoffMs);
          });
          return;
        }
        rec.counts.ok++;
        let buffer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          const now = performance.now();
          buffer += chunk;
          let at: number;
          while ((at = buffer.indexOf('\n\n')) >= 0) {
            const event = buffer.slice(0, at);
            buffer = buffer.slice(at + 2);
            if (event === 'data: [DONE]') {
              done = true;
              continue;
            }
            const c = event.indexOf('"content":"');
            if (c >= 0 && event.charCodeAt(c + 11) !== 34 /* " */) {
              if (tokens === 0) firstAt = now;
              tokens++;
              if (now >= start + config.windowStartMs && now <= end) rec.windowTokens++;
            } else if (event.includes('"error"')) {
              error('stream_error_event', event);
            }
          }
        });
        res.on('end', () => {
          if (settled) return;
          if (!done || tokens !== config.expectTokens) {
            rec.counts.dropped++;
            error(done ? 'short' : 'no_done', `${tokens} of ${config.expectTokens} tokens${done ? '' : ', no [DONE]'}`);
            return settle(false, config.errorBackoffMs);
          }
          settle(true, 0);
        });
        res.on('error', (e) => {
          if (settled) return;
          rec.counts.dropped++;
          error('stream', `${e.message} after ${tokens} tokens`);
          settle(false, config.errorBackoffMs);
        });
      });
      req.end(payload);
    });

  const client = async (index: number) => {
    if (config.rampMs > 0) await new Promise((r) => setTimeout(r, (config.rampMs * index) / config.concurrency));
    while (performance.now() < end) {
      const waitMs = await oneRequest(index);
      if (waitMs > 0) {
        const left = end - performance.now();
        if (left <= 0) break;
        await new Promise((r) => setTimeout(r, Math.min(waitMs, left)));
      }
    }
  };
  await Promise.all(Array.from({ length: config.concurrency }, (_, i) => client(i)));
  clearInterval(sampler);
  loop.disable();
  const cpu = process.cpuUsage(cpu0);
  const elapsedS = (performance.now() - start) / 1000;
  const abandoned = open.size;
  for (const req of open) req.destroy();
  agent.destroy();
  return {
    startWallMs,
    durationMs: config.durationMs,
    windowMs: config.durationMs - config.windowStartMs,
    windowCompleted: rec.windowCompleted,
    sentAtMs: Float64Array.from(rec.sentAt),
    aheadAtSend: Float64Array.from(rec.ahead),
    status: Int32Array.from(rec.status),
    headMs: Float64Array.from(rec.head),
    ttftMs: Float64Array.from(rec.ttft),
    totalMs: Float64Array.from(rec.total),
    completed: Uint8Array.from(rec.completed),
    retryAfterMs: Float64Array.from(rec.retryAfter),
    codeIndex: Int32Array.from(rec.code),
    codes,
    windowTokens: rec.windowTokens,
    completedPerSecond: rec.completedPerSecond,
    refusedPerSecond: rec.refusedPerSecond,
    waitingSamples: Float64Array.from(samples),
    perClient: Int32Array.from(rec.perClient),
    counts: rec.counts,
    errors: rec.errors,
    errorSamples: rec.errorSamples,
    refusalSamples: rec.refusalSamples,
    abandoned,
    loopDelayMs: { p50: loop.percentile(50) / 1e6, p99: loop.percentile(99) / 1e6, max: loop.max / 1e6 },
    cpuMsPerS: (cpu.user + cpu.system) / 1000 / elapsedS,
  };
});
