/**
 * Streaming load generator (a child process of the streaming benchmark):
 * `concurrency` closed-loop workers, each sending a streamed chat completion,
 * reading it to `data: [DONE]`, and sending the next, for `durationMs` after a
 * `warmupMs` warm-up. Per request it records the time to the first content
 * token and the gaps between content tokens as the client sees them.
 */
import http from 'node:http';
import { childMain } from '../lib/env.js';

export interface StreamLoadConfig {
  url: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
  /** Content tokens each answer must carry (else the stream counts as dropped). */
  expectTokens: number;
  concurrency: number;
  warmupMs: number;
  durationMs: number;
  /** How long streams still open at the end may take to finish. */
  graceMs: number;
}

export interface StreamLoadResult {
  ttftMs: Float64Array;
  itlMs: Float64Array;
  /** Content tokens received inside the measured window. */
  windowTokens: number;
  windowMs: number;
  started: number;
  completed: number;
  dropped: number;
  errors: Record<string, number>;
  errorSamples: string[];
  /** Streams dropped during the warm-up (they count against the run too). */
  warmupDropped: number;
}

interface Recorder {
  ttft: number[];
  itl: number[];
  windowTokens: number;
  windowStart: number;
  windowEnd: number;
  started: number;
  completed: number;
  dropped: number;
  errors: Record<string, number>;
  errorSamples: string[];
}

function newRecorder(windowStart: number, windowEnd: number): Recorder {
  return { ttft: [], itl: [], windowTokens: 0, windowStart, windowEnd, started: 0, completed: 0, dropped: 0, errors: {}, errorSamples: [] };
}

function oneStream(agent: http.Agent, config: StreamLoadConfig, payload: string, rec: Recorder, deadline: number): Promise<void> {
  return new Promise((resolve) => {
    const sentAt = performance.now();
    rec.started++;
    let tokens = 0;
    let last = 0;
    let done = false;
    let settled = false;
    let buffer = '';
    const fail = (kind: string, detail: string) => {
      if (settled) return;
      settled = true;
      rec.dropped++;
      rec.errors[kind] = (rec.errors[kind] ?? 0) + 1;
      if (rec.errorSamples.length < 5) rec.errorSamples.push(`${kind}: ${detail}`.slice(0, 300));
      resolve();
    };
    const req = http.request(config.url, {
      method: 'POST',
      agent,
      headers: { ...config.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
    });
    const guard = setTimeout(
      () => {
        fail('stalled', `no end ${Math.round(performance.now() - sentAt)} ms after sending`);
        req.destroy();
      },
      Math.max(1000, deadline - sentAt),
    );
    req.on('error', (error) => {
      clearTimeout(guard);
      fail('socket', error.message);
    });
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          clearTimeout(guard);
          fail(`http_${res.statusCode}`, text);
        });
        return;
      }
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const now = performance.now();
        buffer += chunk;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (event === 'data: [DONE]') {
            done = true;
            continue;
          }
          const at = event.indexOf('"content":"');
          if (at >= 0 && event.charCodeAt(at + 11) !== 34 /* " */) {
            if (tokens === 0) rec.ttft.push(now - sentAt);
            else rec.itl.push(now - last);
            last = now;
            tokens++;
            if (now >= rec.windowStart && now <= rec.windowEnd) rec.windowTokens++;
          } else if (event.includes('"error"')) {
            if (rec.errorSamples.length < 5) rec.errorSamples.push(event.slice(0, 300));
          }
        }
      });
      res.on('end', () => {
        clearTimeout(guard);
        if (settled) return;
        if (!done) return fail('no_done', `stream ended after ${tokens} tokens without [DONE]`);
        if (tokens !== config.expectTokens) return fail('short', `${tokens} of ${config.expectTokens} tokens`);
        settled = true;
        rec.completed++;
        resolve();
      });
      res.on('error', (error) => {
        clearTimeout(guard);
        fail('stream', error.message);
      });
    });
    req.end(payload);
  });
}

async function phase(
  agent: http.Agent,
  config: StreamLoadConfig,
  payload: string,
  durationMs: number,
  mark?: (what: string) => void,
): Promise<Recorder> {
  const start = performance.now();
  const end = start + durationMs;
  const rec = newRecorder(start, end);
  if (mark) {
    // The parent samples CPU times of the servers at the window's edges.
    mark('start');
    setTimeout(() => mark('end'), durationMs);
  }
  const hardDeadline = end + config.graceMs;
  const worker = async () => {
    while (performance.now() < end) await oneStream(agent, config, payload, rec, hardDeadline);
  };
  await Promise.all(Array.from({ length: config.concurrency }, worker));
  return rec;
}

childMain<StreamLoadConfig, StreamLoadResult>(async (config, send) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: config.concurrency, keepAliveMsecs: 60_000 });
  const payload = JSON.stringify(config.body);
  const warm = config.warmupMs > 0 ? await phase(agent, config, payload, config.warmupMs) : undefined;
  const rec = await phase(agent, config, payload, config.durationMs, (what) => send({ type: 'mark', what }));
  agent.destroy();
  return {
    ttftMs: Float64Array.from(rec.ttft),
    itlMs: Float64Array.from(rec.itl),
    windowTokens: rec.windowTokens,
    windowMs: rec.windowEnd - rec.windowStart,
    started: rec.started,
    completed: rec.completed,
    dropped: rec.dropped,
    errors: rec.errors,
    errorSamples: [...rec.errorSamples, ...(warm?.errorSamples ?? []).map((e) => `warm-up ${e}`)],
    warmupDropped: warm?.dropped ?? 0,
  };
});
