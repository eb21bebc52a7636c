/**
 * The GPU check (scripts/gpu-check) run through here, on the CPU, as the GPU machine runs it: the
 * app archive packed and cut into call folders under a small budget, the calls received and put
 * back together by device.sh, and the bundled runner starting the bundled engine (no repository,
 * no node_modules of ours beside it) on a small generated model, once GPU-wanted and once with
 * --cpu. Node.js and the CUDA binaries are left out (packing them takes minutes: see README.md);
 * this machine's node stands in for the carried one.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { pack, type Manifest } from '../../scripts/gpu-check/pack.js';

const run = promisify(execFile);
const MiB = 2 ** 20;
const DEVICE = join(import.meta.dirname, '../../scripts/gpu-check/device.sh');

let dir: string;
let manifest: Manifest;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gpu-check-'));
  // A 4 MiB part size, so that the app archive needs several parts and calls like the real ones. xz's fastest level
  // (0): about 12 MiB instead of 11 from about 50 MiB staged (four parts either way), for about 40% less of xz's CPU.
  manifest = await pack({ out: join(dir, 'pack'), only: ['app'], chunkBytes: 4 * MiB, xzLevel: 0, treeBytes: 57 * MiB });
}, 120_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('the packer cuts the archives into call folders that fit the 64 MiB a call carries', async () => {
  const app = manifest.archives.find((a) => a.name === 'app')!;
  expect(app.parts.length).toBeGreaterThan(1);
  // 64 MiB less the tree (57 MiB here) less the 4 MiB margin.
  expect(manifest.callBudgetBytes).toBe(3 * MiB);
  for (const call of manifest.calls) {
    const files = await readdir(join(dir, 'pack', call.folder));
    expect(files).toContain('manifest.txt');
    let bytes = 0;
    for (const f of files) if (f !== 'manifest.txt') bytes += (await stat(join(dir, 'pack', call.folder, f))).size;
    expect(bytes).toBe(call.bytes);
    expect(bytes + 57 * MiB).toBeLessThanOrEqual(64 * MiB);
  }
  expect(manifest.calls.flatMap((c) => c.parts)).toEqual(app.parts);
});

test('device.sh puts the calls back together and the bundled runner measures the bundled engine', async () => {
  const env = {
    ...process.env,
    GPU_CHECK_WORK: join(dir, 'work'),
    OUT: join(dir, 'out'),
    GPU_CHECK_NODE: process.execPath,
    NODE_OPTIONS: '',
  };
  const calls = manifest.calls.map((c) => c.folder);
  // Each call carries only its own folder, as the device tool does: a pack folder holding that one.
  for (const folder of calls) {
    const one = join(dir, 'single', folder);
    await mkdir(one, { recursive: true });
    await cp(join(dir, 'pack', folder), join(one, folder), { recursive: true });
  }
  for (const folder of calls.slice(0, -1))
    await run('bash', [DEVICE, 'receive', folder], { env: { ...env, GPU_CHECK_PACK: join(dir, 'single', folder) } });
  const last = calls.at(-1)!;
  // Each level's clients send one request after another for --level-ms (400 ms in quick mode), each at least one: 50 ms
  // still measures every level, in 1.4 s less.
  const { stdout } = await run('bash', [DEVICE, 'run', '--quick', '--threads', '1', '--level-ms', '50'], {
    env: { ...env, GPU_CHECK_PACK: join(dir, 'single', last) },
    maxBuffer: 16 * MiB,
  });
  expect(stdout).toMatch(/unpacked app\.tar\.xz/);
  expect(stdout).toMatch(/run\.mjs exited 0/);

  const result = JSON.parse(await readFile(join(dir, 'out', 'gpu.json'), 'utf8')) as Record<string, any>;
  // The shape bench/run.ts summarizes.
  expect(result).toMatchObject({ name: 'gpu', valid: true, problems: [] });
  for (const key of ['title', 'method', 'startedAt', 'durationS', 'machine', 'table', 'targets', 'notes', 'data'])
    expect(result).toHaveProperty(key);
  const runs = result.data.runs as any[];
  expect(runs.map((r) => r.mode)).toEqual(['gpu', 'cpu']);
  const [gpu, cpu] = runs;
  // No GPU here: the GPU-wanted engine says so, in its log and on /health.
  expect(gpu.health).toMatchObject({ backend: 'cpu', gpuWanted: true, gpuLayers: 0 });
  expect(gpu.ready).toMatchObject({ backend: 'cpu', gpuWanted: true, gpuLayers: 0 });
  expect(gpu.warnings.map((w: { code: string }) => w.code)).toEqual(['NO_GPU']);
  expect(cpu.health).toMatchObject({ backend: 'cpu', gpuWanted: false, gpuLayers: 0 });
  expect(cpu.warnings).toEqual([]);
  for (const r of runs) {
    expect(r.health.totalLayers).toBe(result.data.model.shape.layers + 1);
    expect(r.loadMs).toBeGreaterThan(0);
    expect(r.prompt.tokensPerSecond).toBeGreaterThan(0);
    expect(r.levels.map((l: { inFlight: number }) => l.inFlight)).toEqual([1, 4]);
    for (const l of r.levels) {
      expect(l.errors).toBe(0);
      expect(l.tokensPerSecond).toBeGreaterThan(0);
    }
  }
  expect(result.table.rows).toHaveLength(2);
  expect(result.targets.find((t: { what: string }) => t.what.startsWith('layers offloaded'))).toMatchObject({ met: false });
  // What the check leaves behind there: only its results (the model is removed).
  expect(existsSync(join(dir, 'work', 'gpu-check-quick-q8_0.gguf'))).toBe(false);
}, 120_000);
