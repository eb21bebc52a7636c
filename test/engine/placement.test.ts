/**
 * What the engine says it runs on: /health's backend, gpuWanted, gpuLayers and totalLayers, and
 * the ENGINE_WARNING line of an engine that wanted a GPU and serves on the CPU (here, where no GPU
 * is: the lent Llama is a CPU one, as node-llama-cpp's 'auto' gives on a machine without a GPU).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { getLlama, LlamaLogLevel, type Llama } from 'node-llama-cpp';
import { placementWarnings } from '../../src/engine/load.js';
import { startEngineServer } from '../../src/engine/server.js';
import { TINY_GGUF_DIMENSIONS, writeTinyGguf, type TinyGgufFile } from '../support/tiny-gguf.js';

let dir: string;
let llama: Llama;
let tiny: TinyGgufFile;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'engine-placement-'));
  tiny = await writeTinyGguf(join(dir, 'tiny.gguf'));
  llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.warn });
}, 60_000);

afterAll(async () => {
  await llama?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function health(url: string): Promise<Record<string, unknown>> {
  return (await (await fetch(`${url}/health`)).json()) as Record<string, unknown>;
}

test('an engine started with --cpu reports the CPU backend, no layer on a GPU, and no warning', async () => {
  const log: string[] = [];
  const server = await startEngineServer({
    llama,
    gpu: false,
    threads: 1,
    modelPath: tiny.path,
    contextSize: 256,
    maxBatchSize: 1,
    log: (l) => log.push(l),
  });
  try {
    const body = await health(server.url);
    // The tiny model has 2 blocks; llama.cpp counts the output layer too.
    expect(body).toMatchObject({
      status: 'ok',
      backend: 'cpu',
      gpuWanted: false,
      gpuLayers: 0,
      totalLayers: TINY_GGUF_DIMENSIONS.layers + 1,
      gpuDevices: [],
    });
    // The fields that were there before are still there.
    expect(body).toMatchObject({ maxBatchSize: 1, sequences: 1, contextSize: 256, active: 0, queued: 0 });
    expect(server.warnings).toEqual([]);
    expect(log.filter((l) => l.startsWith('ENGINE_WARNING'))).toEqual([]);
  } finally {
    await server.close(0);
  }
});

test('an engine that wanted a GPU and got none says so in its log and on /health, and still serves', async () => {
  const log: string[] = [];
  // gpu 'auto' (no --cpu), on a Llama that found no GPU.
  const server = await startEngineServer({
    llama,
    gpu: 'auto',
    threads: 1,
    modelPath: tiny.path,
    contextSize: 256,
    maxBatchSize: 1,
    log: (l) => log.push(l),
  });
  try {
    expect(await health(server.url)).toMatchObject({ status: 'ok', backend: 'cpu', gpuWanted: true, gpuLayers: 0 });
    const warnings = log.filter((l) => l.startsWith('ENGINE_WARNING '));
    expect(warnings).toHaveLength(1);
    const warning = JSON.parse(warnings[0]!.slice('ENGINE_WARNING '.length)) as { code: string; message: string };
    expect(warning.code).toBe('NO_GPU');
    expect(warning.message).toMatch(/serving on the CPU/);
    expect(server.warnings).toEqual([warning]);
    const answer = await fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'hello', max_tokens: 2 }),
    });
    expect(answer.status).toBe(200);
  } finally {
    await server.close(0);
  }
});

test('a GPU engine with part of the model on the CPU is warned about; a full offload is not', () => {
  const gpu = { backend: 'cuda' as const, gpuWanted: true, totalLayers: 23, gpuDevices: ['NVIDIA H100 80GB HBM3'] };
  expect(placementWarnings({ ...gpu, gpuLayers: 23 })).toEqual([]);
  expect(placementWarnings({ ...gpu, gpuLayers: 10 })).toEqual([
    { code: 'PARTIAL_GPU_OFFLOAD', message: expect.stringMatching(/Only 10 of the model's 23 layers/) },
  ]);
  expect(placementWarnings({ ...gpu, backend: 'cpu', gpuLayers: 0, gpuDevices: [] }).map((w) => w.code)).toEqual(['NO_GPU']);
  expect(placementWarnings({ ...gpu, backend: 'cpu', gpuWanted: false, gpuLayers: 0, gpuDevices: [] })).toEqual([]);
});
