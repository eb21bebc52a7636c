/**
 * HEALTH_PORT through the start: the probes' listener opens right after the configuration is read, before the
 * database and its migrations, and answers /healthz 200 and /readyz 503 `starting` (with the step the start is at)
 * while the migrations wait; the gateway then takes the same listener over, on the same port, and its /readyz answers
 * 200. The real gateway (src/main.ts, as `npm start` runs it) on a database not migrated yet, whose migrations the
 * test holds back by holding their advisory lock.
 *
 * Before: the listener opened only once the gateway served, after the migrations: on Kubernetes a long migration
 * failed the liveness probe, and the kubelet restarted the gateway mid-migration, over and over.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, inject, test } from 'vitest';
import { connectDatabase, MIGRATION_LOCK_ID, type Sql } from '../../src/storage/database.js';
import { testEnv, waitFor } from '../support/app.js';
import { createEmptyDatabase } from '../support/database.js';
import { startGatewayProcess } from '../support/processes.js';

const ADMIN_KEY = 'test_health_port_startup_admin_key_01';

/** Where the probes' listener is: the gateway logs it as it opens. */
const HEALTH_LINE = /Health checks \(\/healthz, \/readyz\) on (http:\/\/[\d.:]+)/;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'health-port-startup-'));
  for (const sub of ['held', 'failing']) await mkdir(path.join(dir, sub));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  body: string;
}

/** A probe as a kubelet makes it: a new connection, one GET; rejects when the connection is refused or cut. */
function probe(url: string, route: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${url}${route}`, { agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/** The gateway as `npm start` runs it (the run's bundle, as test/support/processes.ts starts it), with its output. */
function spawnGateway(env: Record<string, string>): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const entry = process.env.TEST_ENGINE === 'tsx' ? ['--import', 'tsx', 'src/main.ts'] : [inject('gatewayBundle')];
  const child = spawn(process.execPath, entry, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

test('the probes answer through held migrations (alive, 503 starting), then the running gateway answers on the same port', async () => {
  const dbUrl = await createEmptyDatabase();
  // The test's own session holds the migrations' advisory lock: the gateway's migrations wait for it, as they would
  // for a long migration another gateway applies.
  const holder: Sql = connectDatabase(dbUrl, { max: 1 });
  let gateway: ReturnType<typeof spawnGateway> | undefined;
  try {
    await holder`SELECT pg_advisory_lock(${MIGRATION_LOCK_ID})`;
    gateway = spawnGateway(
      testEnv(path.join(dir, 'held'), 'http://127.0.0.1:9', { DATABASE_URL: dbUrl, ADMIN_API_KEY: ADMIN_KEY, HEALTH_PORT: '0' }),
    );
    const { output } = gateway;
    // The gateway's migrations wait for the lock (the gateway's start, through Node.js and its modules, may take a
    // while on a loaded machine).
    await waitFor(
      "the gateway's migrations waiting for their lock",
      async () => {
        const [waiting] = await holder<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock%'`;
        return waiting!.n > 0;
      },
      60_000,
    );

    const healthUrl = await waitFor('the health listener in the log', async () => HEALTH_LINE.exec(output())?.[1], 30_000);
    expect(await probe(healthUrl, '/healthz')).toEqual({ status: 200, body: '{"status":"ok"}' });
    expect(await probe(healthUrl, '/readyz')).toEqual({ status: 503, body: '{"status":"starting","step":"migrating the database"}' });
    // Anything else is a 404 there, as once the gateway serves.
    expect((await probe(healthUrl, '/graphql')).status).toBe(404);
    // The API's port is not open yet: the migrations hold the start.
    expect(output()).not.toMatch(/Serving on/);

    // The kubelet keeps probing while the migrations finish and the gateway starts: every probe is answered, first
    // `starting`, then `ready`, on the same port; none is refused or cut.
    const answers: Array<Answer | string> = [];
    let ready = false;
    const probing = (async () => {
      while (!ready) {
        const answer = await probe(healthUrl, '/readyz').catch((error: Error) => error.message);
        answers.push(answer);
        ready = typeof answer !== 'string' && answer.status === 200;
        // Paced as a kubelet's probes are (not a wait on anything): a tight loop would only load the machine.
        await sleep(20);
      }
    })();
    await holder`SELECT pg_advisory_unlock(${MIGRATION_LOCK_ID})`;
    await waitFor('the gateway to serve', async () => /Serving on/.test(output()), 120_000);
    await probing;
    for (const answer of answers) {
      expect([
        { status: 503, body: '{"status":"starting","step":"migrating the database"}' },
        { status: 503, body: '{"status":"starting","step":"starting the gateway"}' },
        { status: 200, body: '{"status":"ready"}' },
      ]).toContainEqual(answer);
    }
    expect(answers.at(-1)).toEqual({ status: 200, body: '{"status":"ready"}' });
    expect(await probe(healthUrl, '/healthz')).toEqual({ status: 200, body: '{"status":"ok"}' });
    // One listener, opened once.
    expect(output().match(new RegExp(HEALTH_LINE, 'g'))).toHaveLength(1);

    // It closes with the gateway, after its drain.
    gateway.child.kill('SIGTERM');
    expect(await gateway.exited).toBe(0);
    await expect(probe(healthUrl, '/healthz')).rejects.toThrow(/ECONNREFUSED/);
  } finally {
    if (gateway && gateway.child.exitCode === null && gateway.child.signalCode === null) {
      gateway.child.kill('SIGKILL');
      await gateway.exited;
    }
    await holder.end({ timeout: 5 });
  }
}, 180_000);

test('a start that fails with the probes listening still exits, and says why', async () => {
  // Nothing listens on port 9: the migrations' first read fails, and with it the start.
  const failure = await startGatewayProcess(
    testEnv(path.join(dir, 'failing'), 'http://127.0.0.1:9', {
      DATABASE_URL: 'postgres://dedicated@127.0.0.1:9/dedicated',
      ADMIN_API_KEY: ADMIN_KEY,
      HEALTH_PORT: '0',
    }),
  ).then(
    () => 'started',
    (error: Error) => error.message,
  );
  expect(failure).toMatch(/^gateway exited with 1:/);
  expect(failure).toMatch(HEALTH_LINE);
  expect(failure).toMatch(/start-up failed/);
  expect(failure).toMatch(/ECONNREFUSED/);
}, 120_000);
