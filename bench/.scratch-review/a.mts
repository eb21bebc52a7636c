import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';
import { startEngineServer } from '../../src/engine/server.js';
import { writeTinyGguf, TINY_SPECIAL_TOKENS } from '../../test/support/tiny-gguf.js';
const dir = await mkdtemp(join(tmpdir(), 'rev-'));
const tiny = await writeTinyGguf(join(dir, 'tiny.gguf'));
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.warn });
const s = await startEngineServer({ llama, modelPath: tiny.path, maxBatchSize: 2, contextSize: 512, threads: 1, gpu: false, host: '127.0.0.1', port: 0 } as any);
async function post(path: string, body: unknown, timeout = 20000) {
  const res = await fetch(`${s.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(timeout) });
  const text = await res.text();
  return { status: res.status, text: text.slice(0, 1500) };
}
const cases: [string, string, unknown][] = JSON.parse(process.argv[2] ?? '[]');
for (const [name, path, body] of cases) {
  try { console.log(name, JSON.stringify(await post(path, body))); } catch (e) { console.log(name, 'ERR', String(e)); }
}
console.log('special', TINY_SPECIAL_TOKENS);
await s.close(0); await llama.dispose();
