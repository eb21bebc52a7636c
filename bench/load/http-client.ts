/**
 * Closed-loop HTTP load generator (a child process): `concurrency` workers
 * send the given requests round-robin over keep-alive connections for
 * `durationMs` after a warm-up, recording each one's latency. An answer
 * counts as an error unless its status is `expectStatus` and, for GraphQL,
 * it carries `data` and no `errors`. With `capture`, a top-level number field
 * of each successful answer is returned per request (e.g. `versionIndex`).
 */
import http from 'node:http';
import { childMain } from '../lib/env.js';

export interface HttpRequestSpec {
  method: string;
  path: string;
  body?: string;
}

export interface HttpLoadConfig {
  baseUrl: string;
  headers: Record<string, string>;
  requests: HttpRequestSpec[];
  concurrency: number;
  warmupMs: number;
  durationMs: number;
  /** Stop after this many requests in the measured phase (0: no limit). */
  maxRequests?: number;
  expectStatus: number;
  graphql?: boolean;
  capture?: string;
}

export interface HttpLoadResult {
  ok: number;
  errors: number;
  errorSamples: string[];
  latencyMs: Float64Array;
  windowMs: number;
  /** With `capture`: [request index, captured value] pairs of the measured phase, warm-up included first. */
  captured: [number, number][];
  warmup: { ok: number; errors: number };
}

childMain<HttpLoadConfig, HttpLoadResult>(async (config) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: config.concurrency, keepAliveMsecs: 60_000 });
  const base = new URL(config.baseUrl);
  const captured: [number, number][] = [];
  let next = 0;

  const send = (index: number): Promise<{ ok: boolean; ms: number; detail?: string }> =>
    new Promise((resolve) => {
      const spec = config.requests[index]!;
      const started = performance.now();
      const req = http.request(
        {
          host: base.hostname,
          port: base.port,
          path: spec.path,
          method: spec.method,
          agent,
          headers: { ...config.headers, ...(spec.body !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(spec.body) } : {}) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const ms = performance.now() - started;
            const text = Buffer.concat(chunks).toString('utf8');
            if (res.statusCode !== config.expectStatus) return resolve({ ok: false, ms, detail: `HTTP ${res.statusCode}: ${text.slice(0, 200)}` });
            if (config.graphql && (!text.startsWith('{"data"') || text.includes('"errors"'))) return resolve({ ok: false, ms, detail: text.slice(0, 200) });
            if (config.capture) {
              try {
                const value = (JSON.parse(text) as Record<string, unknown>)[config.capture];
                if (typeof value !== 'number') return resolve({ ok: false, ms, detail: `no ${config.capture}: ${text.slice(0, 200)}` });
                captured.push([index, value]);
              } catch {
                return resolve({ ok: false, ms, detail: `not JSON: ${text.slice(0, 200)}` });
              }
            }
            resolve({ ok: true, ms });
          });
          res.on('error', (e) => resolve({ ok: false, ms: performance.now() - started, detail: e.message }));
        },
      );
      req.on('error', (e) => resolve({ ok: false, ms: performance.now() - started, detail: e.message }));
      req.setTimeout(30_000, () => req.destroy(new Error('timeout')));
      req.end(spec.body);
    });

  const phase = async (durationMs: number, maxRequests: number) => {
    const end = performance.now() + durationMs;
    const latencies: number[] = [];
    const samples: string[] = [];
    let ok = 0;
    let errors = 0;
    let sent = 0;
    const worker = async () => {
      while (performance.now() < end && (maxRequests === 0 || sent < maxRequests)) {
        sent++;
        const r = await send(next++ % config.requests.length);
        if (r.ok) {
          ok++;
          latencies.push(r.ms);
        } else {
          errors++;
          if (samples.length < 5 && r.detail) samples.push(r.detail);
        }
      }
    };
    const start = performance.now();
    await Promise.all(Array.from({ length: config.concurrency }, worker));
    return { ok, errors, latencies, samples, windowMs: performance.now() - start };
  };

  const warm = config.warmupMs > 0 ? await phase(config.warmupMs, 0) : { ok: 0, errors: 0, samples: [] as string[] };
  const measured = await phase(config.durationMs, config.maxRequests ?? 0);
  agent.destroy();
  return {
    ok: measured.ok,
    errors: measured.errors + warm.errors,
    errorSamples: [...warm.samples, ...measured.samples],
    latencyMs: Float64Array.from(measured.latencies),
    windowMs: measured.windowMs,
    captured,
    warmup: { ok: warm.ok, errors: warm.errors },
  };
});
