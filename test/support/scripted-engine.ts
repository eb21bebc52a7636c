/**
 * Pieces of the small OpenAI-compatible servers tests run as engines through ENGINE_COMMAND (each test writes its
 * own script around them, for what it needs the engine to do): JavaScript source, to be put in the script's text.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startTestApp, TINY_REPO, waitForStatus, type SeededUser, type TestApp } from './app.js';
import { onCleanup } from './cleanup.js';

/** `chunk(content)`: one chat.completion.chunk's JSON. */
export const CHUNK_JS = `const chunk = (content) => JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] });`;

/** `answerWhole(res, status)`: a whole chat.completion (status 200), or an error body with `status`. */
export const ANSWER_WHOLE_JS = `const answerWhole = (res, status = 200) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(status === 200 ? { id: 'c', object: 'chat.completion', created: 1, model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } } : { error: { message: 'no' } }));
};`;

/** `pump(res, piece, count, then)`: writes `piece` `count` times as fast as the client reads, then calls `then`. */
export const PUMP_JS = `const pump = (res, piece, count, then) => {
  let n = 0;
  const more = () => { while (n < count) { n++; if (!res.write(piece)) return res.once('drain', more); } then(); };
  res.on('close', () => (n = count));
  more();
};`;

/**
 * `streamReleased(res, tokens)`: a streamed answer whose first token goes at once and whose others, then `[DONE]`, wait
 * until the test writes `release` in the engine's directory (`dir`, in scope); for answers a test holds mid-stream.
 */
export const STREAM_RELEASED_JS = `const streamReleased = (res, tokens) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write('data: ' + chunk(tokens[0]) + '\\n\\n');
  const wait = setInterval(() => {
    if (!existsSync(dir + '/release')) return;
    clearInterval(wait);
    for (const token of tokens.slice(1)) res.write('data: ' + chunk(token) + '\\n\\n');
    res.end('data: [DONE]\\n\\n');
  }, 50);
  res.on('close', () => clearInterval(wait));
};`;

/**
 * A whole engine script: an OpenAI-compatible server on 127.0.0.1 at the port ENGINE_COMMAND gives it, whose health
 * route (any GET) reports `active` (a variable `handler` may count), and whose POSTs go, their body parsed, to
 * `onRequest(req, res, request, text)` (`text`: the request's messages as JSON), which `handler` defines. In scope:
 * `http`, `appendFileSync`, `existsSync`, `port`, `dir` (the test's directory), `note(line)` (appends the port and the
 * line to dir/engine.log), `chunk`, `answerWhole` and `pump` (above).
 */
export function engineScript(handler: string): string {
  return `
import http from 'node:http';
import { appendFileSync, existsSync } from 'node:fs';
const [port, dir] = [Number(process.argv[2]), process.argv[3]];
const note = (line) => appendFileSync(dir + '/engine.log', port + ' ' + line + '\\n');
${CHUNK_JS}
${ANSWER_WHOLE_JS}
${PUMP_JS}
let active = 0;
${handler}
http.createServer((req, res) => {
  if (req.method === 'GET') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok', active, queued: 0 }));
  let raw = '';
  req.on('data', (c) => (raw += c));
  req.on('end', () => {
    const request = JSON.parse(raw);
    onRequest(req, res, request, JSON.stringify(request.messages ?? ''));
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;
}

/** A test app whose engines run `script` (see engineScript) with ENGINE_COMMAND, in a directory of their own. */
export interface ScriptedApp {
  t: TestApp;
  /** The directory the engines are given (their `dir`): their engine.log, and the files the test writes for them. */
  dir: string;
  /** What the engines have noted so far (dir/engine.log). */
  engineLog(): Promise<string>;
}

/**
 * Starts a test app whose engines run `script` through ENGINE_COMMAND (`node script {port} dir`), `dir` a fresh
 * temporary directory removed at the end of the test file, with `env` added to the app's.
 */
export async function startScriptedApp(name: string, script: string, env: Record<string, string> = {}): Promise<ScriptedApp> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `${name}-`));
  onCleanup(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, 'engine.log'), '');
  const file = path.join(dir, 'engine.mjs');
  await writeFile(file, script);
  const t = await startTestApp({ env: { ENGINE_COMMAND: `"${process.execPath}" "${file}" {port} "${dir}"`, ...env } });
  return { t, dir, engineLog: () => readFile(path.join(dir, 'engine.log'), 'utf8') };
}

/**
 * `count` endpoints of one max_batch_size 1 replica each (so that a slot not given back shows at once) in a project
 * of `user`'s, RUNNING.
 */
export async function singleSlotEndpoints(t: TestApp, user: SeededUser, projectName: string, count: number): Promise<string[]> {
  const project = await user.project(projectName);
  const spec = { hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } };
  const advanced = { max_batch_size: 1, max_token_count: 4096, max_input_length: 64 };
  const ids = await Promise.all(Array.from({ length: count }, () => project.endpoint({ ...spec, advanced })));
  for (const id of ids) await waitForStatus(t.sql, id, 'RUNNING', 60_000);
  return ids;
}
