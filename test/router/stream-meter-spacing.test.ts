/**
 * REST's byte relay measures a stream whatever the spacing of its engine's JSON: Python's `json.dumps`, which
 * llama-cpp-python's server (sse-starlette) streams with, writes `"content": "hi"` and `"finish_reason": "stop"`,
 * with a space after each colon, and an engine's error event may be written `{ "error": … }`. End to end through a
 * real gateway whose engine is a small OpenAI-compatible server run through ENGINE_COMMAND; each outcome read from the
 * request log as recorded.
 *
 * The engine streams, for `SPACED`, two tokens and a last chunk with `"finish_reason": "stop"` in that spacing, then
 * `[DONE]`; for `SILENT` one spaced token, then nothing (its connection open); for `ERROR` a compact token, then an
 * error event `{ "error": { "code": "generation_failed", … } }` and `[DONE]`.
 *
 * Before: the first token and the finish reason were searched for without the space, so a spaced stream was recorded
 * without its time to the first token or finish reason, and, the first token never seen, the idle bound
 * (ENGINE_IDLE_TIMEOUT_MS) never armed: an engine that went silent mid-answer held its client and its slot for good.
 * An error event spaced so, after the first token, was not looked at and was recorded as the 200 it is not.
 */
import { beforeAll, expect, test } from 'vitest';
import { waitFor, type SeededUser, type TestApp } from '../support/app.js';
import { engineScript, singleSlotEndpoints, startScriptedApp } from '../support/scripted-engine.js';

const IDLE_MS = 1000;

const ENGINE = engineScript(`
// Python's json.dumps: ', ' between items and ': ' after each key.
const spaced = (value) => JSON.stringify(value).replace(/","/g, '", "').replace(/":/g, '": ').replace(/,"/g, ', "');
const piece = (content, finish = null) => spaced({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm',
  choices: [{ index: 0, delta: content === null ? {} : { content }, finish_reason: finish }] });
const onRequest = (req, res, request, text) => {
  if (!request.stream) return answerWhole(res);
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  if (text.includes('SPACED')) {
    return res.end('data: ' + piece('hi') + '\\r\\n\\r\\ndata: ' + piece(' there') + '\\r\\n\\r\\ndata: ' + piece(null, 'stop') + '\\r\\n\\r\\ndata: [DONE]\\r\\n\\r\\n');
  }
  if (text.includes('SILENT')) return res.write('data: ' + piece('hi') + '\\r\\n\\r\\n');
  if (text.includes('BLANK')) {
    // After a token: an event that opens as an object, then only spaces to its end (past the short events' size).
    res.write('data: ' + chunk('hi') + '\\n\\n');
    return res.end('data: {' + ' '.repeat(40) + '\\n\\ndata: [DONE]\\n\\n');
  }
  if (text.includes('ERROR')) {
    res.write('data: ' + chunk('hi') + '\\n\\n');
    return res.end('data: { "error": { "code": "generation_failed", "message": "the generation failed" } }\\n\\ndata: [DONE]\\n\\n');
  }
  res.end('data: ' + chunk('ok') + '\\n\\ndata: [DONE]\\n\\n');
};
`);

let t: TestApp;
let alice: SeededUser;
let endpoint: string;

beforeAll(async () => {
  ({ t } = await startScriptedApp('stream-meter-spacing', ENGINE, { ENGINE_IDLE_TIMEOUT_MS: String(IDLE_MS) }));
  alice = await t.seed.user();
  endpoint = (await singleSlotEndpoints(t, alice, 'meter-spacing', 1))[0]!;
}, 120_000);

interface Row {
  http_status: number;
  error_code: string | null;
  ttft_ms: number | null;
  finish_reason: string | null;
  cancelled: boolean;
}

/** Streams a chat completion over REST; answers what the client read, and the request's row once the log has it. */
async function streamed(content: string): Promise<{ text: string; row: Row }> {
  const [counted] = await t.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM request_log WHERE endpoint_id = ${endpoint}`;
  const before = counted!.count;
  const res = await fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: endpoint, messages: [{ role: 'user', content }], stream: true }),
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  // The log is written in batches: the request shows once its batch is.
  const row = await waitFor('the request recorded', async () => {
    const rows = await t.sql<Row[]>`
      SELECT http_status, error_code, ttft_ms, finish_reason, cancelled FROM request_log
      WHERE endpoint_id = ${endpoint} ORDER BY id`;
    return rows.length > before ? rows[rows.length - 1] : undefined;
  });
  return { text, row };
}

test("a stream in Python's spacing is recorded with its time to the first token and its finish reason", async () => {
  const { text, row } = await streamed('SPACED');
  expect(text).toContain('"content": " there"');
  expect(row).toMatchObject({ http_status: 200, error_code: null, finish_reason: 'stop', cancelled: false });
  expect(row.ttft_ms).not.toBeNull();
}, 60_000);

test('an error event written `{ "error": … }` after the first token is recorded as the engine\'s error, 502', async () => {
  const { text, row } = await streamed('ERROR');
  // Relayed as it is over REST.
  expect(text).toContain('data: { "error": { "code": "generation_failed"');
  expect(row).toMatchObject({ http_status: 502, error_code: 'generation_failed', cancelled: false });
}, 60_000);

test('an engine in that spacing gone silent after its first token is cut after ENGINE_IDLE_TIMEOUT_MS', async () => {
  const { text, row } = await streamed('SILENT');
  expect(text).toContain('"content": "hi"');
  expect(text).toMatch(/"code":"upstream_disconnected"\}\}\n\ndata: \[DONE\]\n\n$/);
  expect(row.error_code).toBe('upstream_disconnected');
  expect(row.ttft_ms).not.toBeNull();
}, 60_000);

test('an event that opens as an object and holds only spaces after it is recorded as not JSON, 502, and the gateway goes on', async () => {
  const { text, row } = await streamed('BLANK');
  expect(text).toContain('"content":"hi"');
  expect(row).toMatchObject({ http_status: 502, error_code: 'upstream_invalid' });
  // The gateway still answers.
  expect((await streamed('SPACED')).row.http_status).toBe(200);
}, 60_000);
