/**
 * How the local runtime notices that a starting engine is ready (or gone):
 * fast health polling, and its log's ENGINE_READY / ENGINE_ERROR lines and
 * the process's exit, which end the wait at once.
 */
import { startReplica } from '../support/start-replica.js';
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { watchForProtocolLine } from '../../src/runtime/engine-log-files.js';
import { healthPollDelay, LocalRuntime, SPAWN_LINE_PREFIX } from '../../src/runtime/local-runtime.js';
import { Nudge } from '../../src/util/nudge.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { ReplicaStartError, type LaunchModel, type ModelSteps, type PendingLaunch, type ReplicaLaunch } from '../../src/runtime/runtime.js';

let dir: string;
let fakeEngine: string;

/**
 * A stand-in engine: `node fake-engine.mjs PORT DELAY_MS MODE`. `ready` listens at once but answers
 * /health 503 until DELAY_MS have passed, then 200 and prints ENGINE_READY; `quiet` does the same
 * but prints nothing (as an ENGINE_COMMAND server would); `error` prints ENGINE_ERROR after DELAY_MS
 * and exits 3; `crash` exits 1 after DELAY_MS without a word.
 */
const FAKE_ENGINE = `
import http from 'node:http';
const [port, delay, mode] = [Number(process.argv[2]), Number(process.argv[3]), process.argv[4]];
const now = () => performance.timeOrigin + performance.now();
if (mode === 'error') {
  setTimeout(() => { process.stderr.write('ENGINE_ERROR {"code":"WORKLOAD_INIT_SETTINGS_ERROR","message":"the model does not fit"}\\n'); process.exit(3); }, delay);
} else if (mode === 'crash') {
  setTimeout(() => process.exit(1), delay);
} else {
  let ready = false;
  const server = http.createServer((req, res) => {
    res.writeHead(ready ? 200 : 503, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ status: ready ? 'ok' : 'loading', active: 0, queued: 0 }));
  });
  server.listen(port, '127.0.0.1', () => setTimeout(() => {
    ready = true;
    if (mode === 'ready') process.stdout.write('ENGINE_READY ' + JSON.stringify({ port, pid: process.pid, readyAt: now(), uptimeMs: performance.now() }) + '\\n');
  }, delay));
  process.on('SIGTERM', () => process.exit(0));
}
`;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'local-runtime-'));
  fakeEngine = path.join(dir, 'fake-engine.mjs');
  await writeFile(fakeEngine, FAKE_ENGINE);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

function launch(replicaId: string): ReplicaLaunch {
  return {
    replicaId,
    endpointId: 'ep_test',
    modelPath: '/nowhere/model.gguf',
    modelRepo: 'org/model',
    modelRevision: null,
    gpuType: 'H100',
    numGpu: 1,
    maxBatchSize: 1,
    contextSize: 512,
    maxInputLength: 256,
    addSpecialTokens: false,
    skipSpecialTokens: true,
  };
}

/** A runtime running the stand-in engine; by default its health polling is so slow that only a nudge can end a wait in time (null: the real polling). */
function runtimeFor(delayMs: number, mode: 'ready' | 'quiet' | 'error' | 'crash', pollMs: number | null = 60_000): LocalRuntime {
  return new LocalRuntime({
    dir: path.join(dir, 'replicas'),
    inventory: { H100: 1 },
    cpuOnly: true,
    engineTemplate: `"${process.execPath}" "${fakeEngine}" {port} ${delayMs} ${mode}`,
    startTimeoutMs: 30_000,
    ...(pollMs !== null ? { healthPollDelay: () => pollMs } : {}),
  });
}

describe('health polling', () => {
  test('every 20 ms for the first 2 s, then backing off to 150 ms by 5 s', () => {
    expect(healthPollDelay(0)).toBe(20);
    expect(healthPollDelay(1999)).toBe(20);
    expect(healthPollDelay(3500)).toBe(85);
    expect(healthPollDelay(5000)).toBe(150);
    expect(healthPollDelay(600_000)).toBe(150);
    let last = 0;
    for (let t = 0; t <= 10_000; t += 100) {
      expect(healthPollDelay(t)).toBeGreaterThanOrEqual(last);
      last = healthPollDelay(t);
    }
  });

  test('a nudge ends the current wait, or the next one when it came between waits', async () => {
    const nudge = new Nudge();
    const t0 = performance.now();
    const waiting = nudge.wait(10_000);
    nudge.poke();
    await waiting;
    nudge.poke();
    await nudge.wait(10_000);
    expect(performance.now() - t0).toBeLessThan(1000);
    // Consumed: the next wait runs its course.
    const t1 = performance.now();
    await nudge.wait(50);
    expect(performance.now() - t1).toBeGreaterThanOrEqual(45);
    const abort = new AbortController();
    const aborted = nudge.wait(10_000, abort.signal);
    abort.abort();
    await aborted;
    expect(performance.now() - t0).toBeLessThan(2000);
  });
});

describe('watching the replica log', () => {
  test('ENGINE_READY or ENGINE_ERROR at a line start pokes, also when split over two writes; other lines do not', async () => {
    const file = path.join(dir, 'watched.log');
    await writeFile(file, `${SPAWN_LINE_PREFIX}{"at":1}\n`);
    const nudge = new Nudge();
    const watcher = watchForProtocolLine(file, nudge);
    const poked = async (ms: number) => {
      const t0 = performance.now();
      await nudge.wait(ms);
      return performance.now() - t0 < ms - 5;
    };
    try {
      expect(await poked(300)).toBe(false);
      await appendFile(file, 'llama.cpp: loading the model\nsome line mentioning ENGINE_READY in passing\n');
      expect(await poked(300)).toBe(false);
      await appendFile(file, 'ENGINE_RE');
      expect(await poked(300)).toBe(false);
      await appendFile(file, 'ADY {"port":1,"pid":2}\n');
      expect(await poked(5000)).toBe(true);
      await appendFile(file, 'ENGINE_ERROR {"code":"X","message":"y"}\n');
      expect(await poked(5000)).toBe(true);
    } finally {
      watcher.close();
    }
    // Closed: nothing pokes any more.
    await appendFile(file, 'ENGINE_READY {"port":1,"pid":2}\n');
    expect(await poked(300)).toBe(false);
  });
});

describe('starting an engine', () => {
  test("resolves on the engine's ENGINE_READY line without waiting for the next poll; the log starts with the spawn line", async () => {
    const runtime = runtimeFor(300, 'ready');
    const t0 = performance.now();
    const handle = await startReplica(runtime, launch('rep_ready'));
    const resolvedAt = performance.timeOrigin + performance.now();
    try {
      // The health polling is set to once a minute here: only the log line can have ended the wait.
      expect(performance.now() - t0).toBeLessThan(15_000);
      expect(await runtime.health(handle)).toMatchObject({ status: 'ok' });
      const log = await readFile(path.join(dir, 'replicas', 'rep_ready.log'), 'utf8');
      const lines = log.split('\n');
      expect(lines[0]!.startsWith(SPAWN_LINE_PREFIX)).toBe(true);
      const { at } = JSON.parse(lines[0]!.slice(SPAWN_LINE_PREFIX.length)) as { at: number };
      const ready = JSON.parse(lines.find((l) => l.startsWith('ENGINE_READY '))!.slice('ENGINE_READY '.length)) as {
        readyAt: number;
        pid: number;
      };
      expect(String(ready.pid)).toBe(handle.locator);
      // Spawned before it was ready (the stand-in waits 300 ms after listening), found ready after.
      expect(ready.readyAt - at).toBeGreaterThanOrEqual(300);
      expect(resolvedAt).toBeGreaterThanOrEqual(ready.readyAt);
      expect(resolvedAt - ready.readyAt).toBeLessThan(10_000);
    } finally {
      await runtime.stop(handle, 2000);
    }
    expect(runtime.liveness(handle).kind).toBe('dead');
  });

  test('an engine that reports ENGINE_ERROR and exits fails the start with its code, without waiting for the next poll', async () => {
    const runtime = runtimeFor(200, 'error');
    const t0 = performance.now();
    const error = await startReplica(runtime, launch('rep_error')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ReplicaStartError);
    expect(error).toMatchObject({ code: 'WORKLOAD_INIT_SETTINGS_ERROR', message: 'the model does not fit' });
    expect(performance.now() - t0).toBeLessThan(15_000);
  });

  test('an engine that exits without a word fails the start as soon as it exits', async () => {
    const runtime = runtimeFor(200, 'crash');
    const t0 = performance.now();
    const error = await startReplica(runtime, launch('rep_crash')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ReplicaStartError);
    expect(error).toMatchObject({ code: 'WORKLOAD_INIT_GRPC_ERROR' });
    expect((error as Error).message).toContain('exit code 1');
    expect(performance.now() - t0).toBeLessThan(15_000);
  });

  test("an engine gets the variables meant for it, never the gateway's own secrets", async () => {
    const secrets = {
      DATABASE_URL: 'postgres://u:hunter2@db/x',
      METRICS_TOKEN: 'm-secret',
      ADMIN_API_KEY: 'a-secret',
      PGPASSWORD: 'p-secret',
    };
    Object.assign(process.env, secrets);
    try {
      const runtime = new LocalRuntime({
        dir: path.join(dir, 'replicas'),
        inventory: { H100: 1 },
        cpuOnly: true,
        env: { HF_TOKEN: 'hf-for-the-engine' },
        engineTemplate: `"${process.execPath}" -e "console.log(JSON.stringify(process.env))" {port}`,
        startTimeoutMs: 30_000,
      });
      await startReplica(runtime, launch('rep_env')).catch(() => undefined);
      const tail = await runtime.logTail({ replicaId: 'rep_env' });
      expect(tail).toContain('hf-for-the-engine');
      expect(tail).toContain('ENGINE_TOKEN');
      for (const value of Object.values(secrets)) expect(tail).not.toContain(value);
    } finally {
      for (const name of Object.keys(secrets)) delete process.env[name];
    }
  });

  test('with the default polling, an engine that prints no ENGINE_READY is found by its health check within a few polls', async () => {
    const runtime = runtimeFor(300, 'quiet', null);
    const t0 = performance.now();
    const handle = await startReplica(runtime, launch('rep_quiet'));
    const tookMs = performance.now() - t0;
    try {
      expect(await runtime.health(handle)).toMatchObject({ status: 'ok' });
      expect(await readFile(path.join(dir, 'replicas', 'rep_quiet.log'), 'utf8')).not.toContain('ENGINE_READY');
      // Not before the stand-in answered its health check with 200 (it answers 503 for its first 300 ms).
      expect(tookMs).toBeGreaterThanOrEqual(300);
    } finally {
      await runtime.stop(handle, 2000);
    }
  });
});

describe("a replica's model step, run by the runtime before its engine", () => {
  /** A model step the test drives: the download answers when `finish` is called, or fails with `fail`. */
  function heldModelStep() {
    let finish!: (model: LaunchModel | null) => void;
    let fail!: (error: unknown) => void;
    let downloadStarted!: () => void;
    const seen: { signal?: AbortSignal } = {};
    const answered = new Promise<LaunchModel | null>((resolve, reject) => ([finish, fail] = [resolve, reject]));
    const model: ModelSteps = {
      resolve: () => Promise.reject(new Error('the local runtime downloads, it does not only resolve')),
      download: (signal, onDownloadStart) => {
        seen.signal = signal;
        downloadStarted = onDownloadStart;
        return new Promise((resolve, reject) => {
          signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
          answered.then(resolve, reject);
        });
      },
    };
    const { modelPath: _p, modelRepo: _r, modelRevision: _v, modelFile: _f, contextSize: _c, maxInputLength: _m, ...replica } = launch('x');
    const pending = (replicaId: string): PendingLaunch => ({ ...replica, replicaId, model });
    const { replicaId: _id, endpointId: _e, ...rest } = launch('x');
    const downloaded: LaunchModel = rest;
    return { pending, finish: () => finish(downloaded), answer: finish, fail, started: () => downloadStarted(), seen };
  }

  test('ensure answers at once with no locator; the steps are observed (each told), then the engine spawned with the model', async () => {
    const runtime = runtimeFor(100, 'ready');
    const told: string[] = [];
    runtime.onChange((endpointId) => told.push(endpointId));
    const step = heldModelStep();
    const ref = await runtime.ensure(step.pending('rep_step'));
    expect(ref).toMatchObject({ replicaId: 'rep_step', locator: null, address: null });
    expect(runtime.observe(ref)).toEqual({ state: 'starting', phase: 'RESOLVING_MODEL' });
    // Idempotent: the same replica is answered as it is, its model step not run twice.
    expect(await runtime.ensure(step.pending('rep_step'))).toBe(ref);
    step.started();
    expect(runtime.observe(ref)).toEqual({ state: 'starting', phase: 'DOWNLOADING_MODEL' });
    expect(told).toEqual(['ep_test']);
    step.finish();
    const ready = await waitUntil(() => {
      const seen = runtime.observe(ref);
      return seen.state === 'ready' ? seen : undefined;
    });
    try {
      expect(ready.locator).toMatch(/^\d+$/);
      expect(ready.address).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const placed = { ...ref, locator: ready.locator!, address: ready.address };
      expect(await runtime.health(placed)).toMatchObject({ status: 'ok' });
      expect(await runtime.recorded()).toContainEqual({
        replicaId: 'rep_step',
        endpointId: 'ep_test',
        pid: Number(ready.locator),
        address: ready.address,
      });
      expect(told.length).toBeGreaterThanOrEqual(3); // downloading, spawned, ready
    } finally {
      // Stopped by the ref its row first recorded (no locator): the engine the runtime spawned goes.
      await runtime.stop(ref, 2000);
    }
    expect(runtime.liveness({ ...ref, locator: ready.locator! }).kind).toBe('dead');
  });

  test('a serving engine that dies is told at once (its endpoint is passed over now, not at its next rest check)', async () => {
    const runtime = runtimeFor(100, 'ready');
    const told: string[] = [];
    runtime.onChange((endpointId) => told.push(endpointId));
    const step = heldModelStep();
    const ref = await runtime.ensure(step.pending('rep_dies'));
    step.finish();
    const ready = await waitUntil(() => {
      const seen = runtime.observe(ref);
      return seen.state === 'ready' ? seen : undefined;
    });
    const placed = { ...ref, locator: ready.locator!, address: ready.address };
    try {
      const before = told.length;
      process.kill(Number(ready.locator), 'SIGKILL');
      await waitUntil(() => (told.length > before ? true : undefined));
      expect(told.slice(before)).toEqual(['ep_test']);
      expect(runtime.liveness(placed).kind).toBe('dead');
      expect(runtime.observe(placed)).toMatchObject({ state: 'dead' });
    } finally {
      await runtime.stop(placed, 2000);
    }
  });

  test('stopping the replica aborts its download, and no engine is spawned', async () => {
    const runtime = runtimeFor(100, 'ready');
    const step = heldModelStep();
    const ref = await runtime.ensure(step.pending('rep_cut'));
    step.started();
    await runtime.stop(ref, 0);
    expect(step.seen.signal?.aborted).toBe(true);
    step.finish();
    await sleep(300);
    expect((await runtime.recorded()).some((r) => r.replicaId === 'rep_cut')).toBe(false);
  });

  test("a failed model step is the replica's death, with the step's error as its cause", async () => {
    const runtime = runtimeFor(100, 'ready');
    const step = heldModelStep();
    const ref = await runtime.ensure(step.pending('rep_fail'));
    const error = new Error('the hub answered 404');
    step.fail(error);
    const dead = await waitUntil(() => {
      const seen = runtime.observe(ref);
      return seen.state === 'dead' ? seen : undefined;
    });
    expect(dead).toMatchObject({ reason: 'the hub answered 404' });
    expect(dead.cause).toBe(error);
    await runtime.stop(ref, 0);
  });

  test('a replica no longer wanted when its model is ready (null) is not spawned; close cuts the downloads under way', async () => {
    const runtime = runtimeFor(100, 'ready');
    const unwanted = heldModelStep();
    await runtime.ensure(unwanted.pending('rep_unwanted'));
    unwanted.answer(null);
    const open = heldModelStep();
    await runtime.ensure(open.pending('rep_open'));
    await runtime.close();
    expect(open.seen.signal?.aborted).toBe(true);
    await sleep(300);
    const recorded = (await runtime.recorded()).map((r) => r.replicaId);
    expect(recorded).not.toContain('rep_unwanted');
    expect(recorded).not.toContain('rep_open');
  });
});

/** Polls `probe` every 20 ms until it answers (15 s at most). */
async function waitUntil<T>(probe: () => T | undefined): Promise<T> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(20);
  }
}
