/**
 * The engine's health check, as every runtime asks it: GET /health with the
 * engine's token, answered with its load (EngineHealth) or nothing.
 */
import http from 'node:http';
import { engineAuthHeaders, type EngineHealth, type ReplicaRef } from './runtime.js';

/** The engine's health, or undefined when it does not answer 200 with JSON within `timeoutMs` (never a rejection). */
export function engineHealth(ref: Pick<ReplicaRef, 'address' | 'token'>, timeoutMs = 2000): Promise<EngineHealth | undefined> {
  if (!ref.address) return Promise.resolve(undefined);
  return getJson(`${ref.address}/health`, timeoutMs, engineAuthHeaders(ref.token)) as Promise<EngineHealth | undefined>;
}

/**
 * Health checks share keep-alive connections: the controller asks every
 * serving replica twice a second, and a new connection (or fetch's machinery)
 * for each costs more than the answer. Idle sockets are closed after 2 s,
 * before an engine's own keep-alive timeout could close one under a request.
 */
const healthAgent = new http.Agent({ keepAlive: true, maxSockets: 2, timeout: 2000 });

/** GET a JSON document; undefined for anything but a 200 with JSON within `timeoutMs` (never a rejection). */
function getJson(url: string, timeoutMs: number, headers: Record<string, string>): Promise<unknown> {
  return new Promise((resolve) => {
    let req: http.ClientRequest;
    const settle = (value: unknown) => {
      clearTimeout(deadline);
      resolve(value);
    };
    // The deadline answers by itself: a request still queued for a socket reports its end only once one frees.
    const deadline = setTimeout(() => {
      settle(undefined);
      req?.destroy();
    }, timeoutMs);
    try {
      req = http.get(url, { agent: healthAgent, headers }, (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return settle(undefined);
        }
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.once('end', () => {
          try {
            settle(JSON.parse(Buffer.concat(chunks).toString('utf8')));
          } catch {
            settle(undefined);
          }
        });
        res.once('error', () => settle(undefined));
      });
    } catch {
      return settle(undefined); // a malformed address
    }
    req.once('error', () => settle(undefined));
  });
}
