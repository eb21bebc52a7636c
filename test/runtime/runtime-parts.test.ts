import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { GgufFormatError, readGgufHeader, trainedContextLength } from '../../src/models/gguf-header.js';
import { checkModelSettings, SettingsError } from '../../src/models/model-store.js';
import { DEFAULT_ADVANCED, DEFAULT_AUTOSCALING } from '../../src/domain/endpoint-spec.js';
import { engineCommand, splitWords } from '../../src/runtime/engine-command.js';
import { detectInventory, kindOfGpuName, parseInventory } from '../../src/runtime/gpu-inventory.js';
import type { ReplicaLaunch } from '../../src/runtime/runtime.js';
import { buildTinyGguf } from '../support/tiny-gguf.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'runtime-parts-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const launch: ReplicaLaunch = {
  replicaId: 'rep_1',
  endpointId: 'ep_1',
  modelPath: '/cache/blobs/abc',
  modelRepo: 'org/model',
  modelRevision: 'deadbeef',
  gpuType: 'H100',
  numGpu: 2,
  maxBatchSize: 8,
  contextSize: 4096,
  maxInputLength: 2048,
  addSpecialTokens: false,
  skipSpecialTokens: true,
};

describe('engine command templates', () => {
  test('placeholders are filled; quotes group words', () => {
    const command = engineCommand(launch, 4321, {
      template: `llama-server -m {model} --port {port} -np {maxBatchSize} --alias "my model"`,
      cpuOnly: false,
    });
    expect(command).toEqual({
      file: 'llama-server',
      args: ['-m', '/cache/blobs/abc', '--port', '4321', '-np', '8', '--alias', 'my model'],
    });
    const vllm = engineCommand({ ...launch, modelPath: null }, 9000, {
      template: 'vllm serve {model} --port {port} --tensor-parallel-size {numGpu} --revision {revision}',
      cpuOnly: false,
    });
    expect(vllm.args).toEqual(['serve', 'org/model', '--port', '9000', '--tensor-parallel-size', '2', '--revision', 'deadbeef']);
    expect(splitWords(`a 'b c' "d"`)).toEqual(['a', 'b c', 'd']);
  });

  test('the built-in engine gets the endpoint settings', () => {
    const command = engineCommand(launch, 4321, { cpuOnly: true, threads: 2 });
    expect(command.file).toBe(process.execPath);
    expect(command.args).toEqual(
      expect.arrayContaining([
        '--model',
        '/cache/blobs/abc',
        '--port',
        '4321',
        '--max-batch-size',
        '8',
        '--context-size',
        '4096',
        '--max-input-length',
        '2048',
        '--cpu',
        '--threads',
        '2',
      ]),
    );
  });
});

describe('GPU inventory', () => {
  test('configured, parsed and mapped', () => {
    expect(parseInventory('H100=8, a100=2')).toEqual({ H100: 8, A100: 2 });
    expect(() => parseInventory('T4=1')).toThrow('GPU_INVENTORY must look like');
    expect(kindOfGpuName('NVIDIA H100 80GB HBM3')).toBe('H100');
    expect(kindOfGpuName('NVIDIA A100-SXM4-80GB')).toBe('A100');
    expect(kindOfGpuName('Tesla T4')).toBeUndefined();
    expect(detectInventory({ configured: 'B200=1', cpuSlots: 4 })).toEqual({ inventory: { B200: 1 }, source: 'configured' });
  });
});

describe('GGUF header', () => {
  test('reads the trained context length of the tiny model; rejects other files', async () => {
    const file = path.join(dir, 'tiny.gguf');
    await writeFile(file, buildTinyGguf({ contextLength: 777 }));
    const header = await readGgufHeader(file);
    expect(header.metadata.get('general.architecture')).toBe('llama');
    expect(trainedContextLength(header)).toBe(777);
    const spec = {
      name: 'x',
      instanceId: 'TwD5AqnBSVN0',
      model: { source: 'hf' as const, repo: 'o/m', revision: null },
      autoscaling: DEFAULT_AUTOSCALING,
    };
    await expect(
      checkModelSettings(file, { ...spec, advanced: { ...DEFAULT_ADVANCED, maxTokenCount: 777, maxInputLength: 700 } }),
    ).resolves.toEqual({ maxTokenCount: 777, maxInputLength: 700 });
    await expect(
      checkModelSettings(file, { ...spec, advanced: { ...DEFAULT_ADVANCED, maxTokenCount: 778, maxInputLength: 700 } }),
    ).rejects.toThrow("max_token_count (778) is larger than the model's context (777 tokens)");
    await expect(
      checkModelSettings(file, { ...spec, advanced: { ...DEFAULT_ADVANCED, maxTokenCount: 777, maxInputLength: 700, maxBatchSize: 300 } }),
    ).rejects.toBeInstanceOf(SettingsError);
    const other = path.join(dir, 'not.gguf');
    await writeFile(other, 'hello world, not a model');
    await expect(readGgufHeader(other)).rejects.toBeInstanceOf(GgufFormatError);
  });
});

describe('engine health checks', () => {
  test('answer within their deadline, also when queued behind engines that do not answer; never reject', async () => {
    const { createServer } = await import('node:http');
    const { LocalRuntime } = await import('../../src/runtime/local-runtime.js');
    let answer = true;
    const held: ServerResponse[] = [];
    const server = createServer((req, res) => {
      if (answer) res.end(JSON.stringify({ status: 'ok', active: 1, queued: 0, sequences: 4 }));
      else held.push(res); // a busy engine: no answer
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const runtime = new LocalRuntime({ dir, inventory: {}, cpuOnly: true });
    const handle = { replicaId: 'rep_h', address, locator: String(process.pid), node: 'n' };
    try {
      expect(await runtime.health(handle, 1000)).toMatchObject({ status: 'ok', sequences: 4 });
      answer = false;
      const started = performance.now();
      // More checks than the agent's sockets: the last ones wait for a socket that never frees.
      const results = await Promise.all([1, 2, 3, 4].map(() => runtime.health(handle, 300)));
      expect(results).toEqual([undefined, undefined, undefined, undefined]);
      expect(performance.now() - started).toBeLessThan(1500);
      expect(await runtime.health({ ...handle, address: 'http://[bad' }, 300)).toBeUndefined();
    } finally {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      server.close();
    }
  });
});
