/**
 * Closed-loop HTTP load generator (a child process): `concurrency` workers
 * send the given requests round-robin over keep-alive connections for
 * `durationMs` after a warm-up, recording each one's latency. An answer
 * counts as an error unless its status is `expectStatus` and, for GraphQL,
 * it carries `data` and no `errors`. With `capture`, a top-level number field
 * of each successful answer is returned per request (e.g. `versionIndex`).
 */
import http from 'node:http';
import { runClosedLoop, type Attempt, type ClosedLoopConfig, type ClosedLoopResult } from '../lib/closed-loop.js';
import { childMain } from '../lib/env.js';

export interface HttpRequestSpec {
  method: string;
  path: string;
  body?: string;
}

export interface HttpLoadConfig extends ClosedLoopConfig {
  baseUrl: string;
  headers: Record<string, string>;
  requests: HttpRequestSpec[];
  expectStatus: number;
  graphql?: boolean;
  capture?: string;
}

export interface HttpLoadResult extends ClosedLoopResult {
  /** With `capture`: [request index, captured value] pairs of the measured phase, warm-up included first. */
  captured: [number, number][];
}

childMain<HttpLoadConfig, HttpLoadResult>(async (config) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: config.concurrency, keepAliveMsecs: 60_000 });
  const base = new URL(config.baseUrl);
  const captured: [number, number][] = [];
  let next = 0;

  const send = (index: number): Promise<Attempt> =>
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
          headers: {
            ...config.headers,
            ...(spec.body !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(spec.body) } : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const ms = performance.now() - started;
            const text = Buffer.concat(chunks).toString('utf8');
            if (res.statusCode !== config.expectStatus)
              return resolve({ ok: false, ms, detail: `HTTP ${res.statusCode}: ${text.slice(0, 200)}` });
            if (config.graphql && (!text.startsWith('{"data"') || text.includes('"errors"')))
              return resolve({ ok: false, ms, detail: text.slice(0, 200) });
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

  const result = await runClosedLoop(config, () => send(next++ % config.requests.length));
  agent.destroy();
  return { ...result, captured };
});
