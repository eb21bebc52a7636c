import http from 'node:http';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';
import { startEngineServer } from '../../src/engine/server.js';
import { writeTinyGguf } from '../../test/support/tiny-gguf.js';
import { parseCompletionRequest } from '../../src/domain/completion-request.js';
import { TEXT_KIND } from '../../src/router/inference-kinds.js';
import { checkPromptTokens } from '../../src/router/pre-admission.js';
const dir = await mkdtemp(join(tmpdir(), 'rev-'));
const tiny = await writeTinyGguf(join(dir, 'tiny.gguf'));
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.warn });
const s = await startEngineServer({ llama, modelPath: tiny.path, maxBatchSize: 2, contextSize: 512, threads: 1, gpu: false, host: '127.0.0.1', port: 0 } as any);
const endpoint = { id: 'ep_x', current: { spec: { advanced: { maxInputLength: 512, maxTokenCount: 512 } } } } as any;
const agent = new http.Agent({ keepAlive: true });
for (const n of [600, 20000]) {
  const p = parseCompletionRequest({ model: 'ep_x', prompt: 'a '.repeat(n) });
  if (p.type !== 'ok') throw new Error('parse');
  const shape = TEXT_KIND.prompt(p.value, 'ep_x');
  const r = await checkPromptTokens(agent, { address: s.url, token: null } as any, endpoint, p.value, shape, AbortSignal.timeout(5000));
  console.log(n, 'words ->', r ? `${r.status} ${r.message.slice(0, 90)}` : 'undefined (unchecked)');
}
// tokenize cost for a 1 MiB prompt, in-engine, event loop blocked
const big = 'lorem ipsum dolor sit amet '.repeat(40000).slice(0, 1 << 20);
let t = performance.now();
const res = await fetch(`${s.url}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: big }) });
const txt = await res.text();
console.log('tokenize 1MiB:', res.status, txt.length, 'bytes answer', (performance.now() - t).toFixed(0), 'ms');
t = performance.now();
const res2 = await fetch(`${s.url}/detokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tokens: new Array(500000).fill(100) }) });
console.log('detokenize 500k:', res2.status, (await res2.text()).length, (performance.now() - t).toFixed(0), 'ms');
agent.destroy();
await s.close(0); await llama.dispose();
