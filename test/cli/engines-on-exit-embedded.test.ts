/**
 * Ctrl-C with the embedded database, as a new user runs `npm start` in a
 * terminal: the signal goes to the whole process group, so the embedded
 * PostgreSQL stops at once too. The gateway still names the engine it leaves
 * running (from the runtime's own records), the next start adopts it, and
 * Ctrl-C twice stops it and marks its replica STOPPED in a database opened
 * again for that.
 *
 * The data directory starts with an initialised, empty cluster (a copy: test/support/cli-pg-template.ts): the subject
 * here is the Ctrl-C, not initdb (test/storage/embedded-postgres-race.test.ts starts new clusters), which would take
 * most of the first start's time. The first start still creates the database, migrates it and makes the admin.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isRunning } from '../support/processes.js';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/storage/open-database.js';
import { standardRepos, testEnv, TINY_REPO, waitFor } from '../support/app.js';
import { copyInitialisedDataDir } from '../support/cli-pg-template.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { createBody, restClient } from '../support/gateway.js';

const ADMIN_KEY = 'test_engines_embedded_admin_key_0123';

let hub: FakeHub;

beforeAll(async () => {
  hub = await startFakeHub({ repos: standardRepos() });
});

afterAll(async () => {
  await hub?.close();
});

/** The exit code, or 'still running' after `ms` (so that a hang fails with the process's output, not the test's timeout). */
function exitWithin(exited: Promise<number | null>, ms: number): Promise<number | null | 'still running'> {
  return Promise.race([exited, new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), ms).unref())]);
}

describe('stopping npm start with the embedded database', () => {
  test('a terminal Ctrl-C reaches PostgreSQL too; the engine is named, adopted, and Ctrl-C twice stops and marks it', async () => {
    const own = await mkdtemp(path.join(os.tmpdir(), 'dedicated-engines-embedded-'));
    await chmod(own, 0o755);
    await copyInitialisedDataDir(path.join(own, 'pg'));
    const ownEnv = testEnv(own, hub.url, { ADMIN_API_KEY: ADMIN_KEY });
    const gateways: DetachedGateway[] = [];
    let pid: number | undefined;
    try {
      // One Ctrl-C: the gateway waits out the second-Ctrl-C window before it exits; 1 s here, instead of 5.
      const first = await startDetached({ ...ownEnv, SECOND_SIGNAL_WINDOW_MS: '1000' });
      gateways.push(first);
      const rest = restClient(first.url, ADMIN_KEY);
      const me = await rest('POST', '/graphql', { query: '{ me { defaultTeam { projects { id } } } }' });
      const projectId = me.body.data.me.defaultTeam.projects[0].id as string;
      const created = await rest(
        'POST',
        '/dedicated/beta/endpoint',
        createBody(projectId, { hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } }),
      );
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      const id = created.body.endpointId as string;
      const ready = await waitFor(
        'a ready engine',
        async () => {
          const status = await rest('GET', `/dedicated/beta/endpoint/${id}/status`);
          if (status.body.status !== 'RUNNING') return undefined;
          return /ENGINE_READY \{"port":(\d+),"pid":(\d+)/.exec(await readReplicaLogs(own)) ?? undefined;
        },
        60_000,
      );
      pid = Number(ready[2]);

      // One Ctrl-C: the gateway (and its PostgreSQL) stop, the engine is named and keeps running.
      first.interrupt();
      expect(await exitWithin(first.exited, 45_000), first.output()).toBe(0);
      expect(first.output()).toContain(`${id}  replica `);
      expect(first.output()).toContain(`pid ${pid}  port ${ready[1]}`);
      expect(await isRunning(pid)).toBe(true);

      // The next start adopts it (a chat answers at once), then Ctrl-C twice stops it and marks its replica.
      const second = await startDetached(ownEnv);
      gateways.push(second);
      const chat = await restClient(second.url, ADMIN_KEY)('POST', '/dedicated/v1/chat/completions', {
        model: id,
        messages: [{ role: 'user', content: 'Hi' }],
        max_tokens: 4,
      });
      expect(chat.status, JSON.stringify(chat.body)).toBe(200);
      expect((await readReplicaLogs(own)).match(/ENGINE_READY/g)).toHaveLength(1);
      second.interrupt();
      await waitFor('the list of engines left running', async () => second.output().includes('Press Ctrl-C again within'), 30_000).catch(
        (error: Error) => {
          throw new Error(`${error.message}; the gateway wrote:\n${second.output()}`);
        },
      );
      expect(second.output()).toContain(`pid ${pid}  port ${ready[1]}`);
      // A person reads the list first: a signal within 150 ms of the last would count as the same keypress.
      await new Promise((r) => setTimeout(r, 200));
      second.interrupt();
      expect(await exitWithin(second.exited, 60_000), second.output()).toBe(0);
      expect(second.output()).toContain('Stopped 1 engine(s)');
      expect(second.output()).not.toContain('could not mark');
      expect(await isRunning(pid)).toBe(false);

      // The replica is marked STOPPED in the embedded database (opened again here, as the next start would).
      const database = await openDatabase(loadConfig(ownEnv));
      try {
        const rows = await database.sql<{ state: string }[]>`SELECT state FROM replicas WHERE endpoint_id = ${id}`;
        expect(rows.map((r) => r.state)).toEqual(['STOPPED']);
      } finally {
        await database.close();
      }
    } finally {
      for (const gateway of gateways) await gateway.kill();
      if (pid !== undefined && (await isRunning(pid))) process.kill(-pid, 'SIGKILL');
      // Whatever PostgreSQL a failure left: its pid file names it.
      const pg = await readFile(path.join(own, 'pg', 'postmaster.pid'), 'utf8').catch(() => '');
      if (pg) process.kill(Number(pg.split('\n')[0]), 'SIGINT');
      await rm(own, { recursive: true, force: true });
    }
  }, 150_000);
});

interface DetachedGateway {
  url: string;
  output(): string;
  exited: Promise<number | null>;
  /** Ctrl-C in a terminal: SIGINT to the whole process group (the embedded PostgreSQL included). */
  interrupt(): void;
  kill(): Promise<void>;
}

/**
 * `src/main.ts` leading its own process group, as `npm start` in a terminal does, with the embedded database: from the
 * run's bundle of it with plain Node.js (test/support/global-setup.ts, as test/support/processes.ts runs it: about a
 * second less CPU a start than tsx's loader), or through tsx with TEST_ENGINE=tsx. Either is one Node.js process
 * (tsx's loader runs in it), so the signals reach the same process group.
 */
async function startDetached(gatewayEnv: Record<string, string>): Promise<DetachedGateway> {
  const { DATABASE_URL: _unset, ...inherited } = process.env;
  const entry = process.env.TEST_ENGINE === 'tsx' ? ['--import', 'tsx', 'src/main.ts'] : [inject('gatewayBundle')];
  const child = spawn(process.execPath, entry, {
    env: { ...inherited, ...gatewayEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const gateway: DetachedGateway = {
    url: '',
    output: () => output,
    exited,
    interrupt: () => process.kill(-child.pid!, 'SIGINT'),
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      process.kill(-child.pid!, 'SIGKILL');
      await exited;
    },
  };
  try {
    gateway.url = await waitFor(
      'the gateway to serve',
      async () => {
        if (child.exitCode !== null) throw new Error(`the gateway exited with ${child.exitCode}:\n${output}`);
        return /Serving on (http:\/\/[\d.:]+)/.exec(output)?.[1];
      },
      90_000,
    );
  } catch (error) {
    await gateway.kill();
    throw error;
  }
  return gateway;
}

/** The replicas' logs under a data directory, concatenated. */
async function readReplicaLogs(dir: string): Promise<string> {
  const logs = await readdir(path.join(dir, 'replicas')).catch(() => [] as string[]);
  const texts = await Promise.all(logs.filter((n) => n.endsWith('.log')).map((n) => readFile(path.join(dir, 'replicas', n), 'utf8')));
  return texts.join('\n');
}
