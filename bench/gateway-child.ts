/**
 * A gateway process for the fan-out benchmark: `src/app.ts` (gateway and
 * controller, as `npm start` builds them) in a child of the benchmark, run
 * with `--expose-gc`, so that it can report its own heap over IPC:
 *
 *   parent → { type: 'heap', gc? }   child → { type: 'heap', heapUsed, rss, subscribers }   (after two full GCs unless gc is false)
 *   parent → { type: 'profile', action: 'start', name } / { type: 'profile', action: 'stop' }
 *            CPU profile of this process (bench/results/profiles/<name>/), answered { type: 'profiled' }
 *   parent → { type: 'snapshot', file }   a V8 heap snapshot (after GC), answered { type: 'snapshotted' }
 *   parent → { type: 'stop' }   child closes and reports its result
 */
import v8 from 'node:v8';
import { loadConfig } from '../src/config.js';
import { startApp } from '../src/app.js';
import { connectDatabase } from '../src/storage/database.js';
import { childMain } from './lib/env.js';
import { startInProcessProfile } from './lib/inprocess-profile.js';

export interface GatewayChildConfig {
  env: Record<string, string>;
  databaseUrl: string;
}

export interface HeapReport {
  heapUsed: number;
  rss: number;
  subscribers: number;
}

declare const gc: (() => void) | undefined;

childMain<GatewayChildConfig, { closed: true }>(async (config, send, receive) => {
  const sql = connectDatabase(config.databaseUrl);
  const app = await startApp(loadConfig({ ...config.env, DATABASE_URL: config.databaseUrl }), sql, { log: () => {} });
  send({ type: 'ready', url: app.gateway.url });
  let stopProfile: (() => Promise<void>) | undefined;
  await new Promise<void>((resolve) => {
    receive((message) => {
      if (message.type === 'heap') {
        if (message.gc !== false && typeof gc === 'function') {
          gc();
          gc();
        }
        const usage = process.memoryUsage();
        send({ type: 'heap', heapUsed: usage.heapUsed, rss: usage.rss, subscribers: app.gateway.hub.subscriberCount });
      } else if (message.type === 'profile') {
        void (async () => {
          if (message.action === 'start') stopProfile = await startInProcessProfile(String(message.name));
          else await stopProfile?.();
          send({ type: 'profiled' });
        })();
      } else if (message.type === 'snapshot') {
        if (typeof gc === 'function') gc();
        v8.writeHeapSnapshot(String(message.file));
        send({ type: 'snapshotted' });
      } else if (message.type === 'stop') {
        resolve();
      }
    });
  });
  await app.close();
  await sql.end({ timeout: 2 });
  return { closed: true };
});
