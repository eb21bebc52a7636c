/**
 * REST's byte relay and a replica whose stream is not the JSON it should be, end to end through a real gateway whose
 * engine is a small OpenAI-compatible server run through ENGINE_COMMAND: an event that is not JSON is passed on to
 * the client as it is (its stream goes on to `[DONE]`), and the request is recorded as `upstream_invalid` with status
 * 502, as GraphQL's relay records it, not as the 200 its headers said; an event past the answer's bound ends the
 * stream with the cut events and is recorded the same. Each outcome is read as users read it: the endpoint's
 * `requests` in GraphQL.
 *
 * The engine streams a token, then for `TEXT` a short line of text, for `LONG` a long one (past the length that
 * relay reads as text), for `TRUNCATED` a chunk's JSON cut short, for `HUGE` a 2 MiB event (past the bound of a
 * request of max_tokens 1), for `COMMENT` a comment; then another token and `[DONE]`.
 */
import { beforeAll, expect, test } from 'vitest';
import { waitFor, type SeededUser, type TestApp } from '../support/app.js';
import { engineScript, singleSlotEndpoints, startScriptedApp } from '../support/scripted-engine.js';

const ENGINE = engineScript(`
const onRequest = (req, res, request, text) => {
  if (!request.stream) return answerWhole(res);
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write('data: ' + chunk('hi') + '\\n\\n');
  const rest = () => res.end('data: ' + chunk('there') + '\\n\\ndata: [DONE]\\n\\n');
  if (text.includes('TEXT')) res.write('data: not json at all\\n\\n');
  if (text.includes('LONG')) res.write('data: <html><body>' + 'An engine of its own, gone wrong. '.repeat(8) + '</body></html>\\n\\n');
  if (text.includes('TRUNCATED')) res.write('data: ' + chunk('cut short').slice(0, 60) + '\\n\\n');
  if (text.includes('COMMENT')) res.write(': keep-alive\\n\\n');
  if (text.includes('HUGE')) {
    res.write('data: {"id":"c","choices":[{"delta":{"content":"');
    return pump(res, 'y'.repeat(64 * 1024), 32, () => res.end('"}}]}\\n\\ndata: [DONE]\\n\\n'));
  }
  rest();
};
`);

let t: TestApp;
let alice: SeededUser;
let endpoint: string;

beforeAll(async () => {
  ({ t } = await startScriptedApp('relay-invalid-record', ENGINE));
  alice = await t.seed.user();
  endpoint = (await singleSlotEndpoints(t, alice, 'invalid-record', 1))[0]!;
}, 120_000);

interface Recorded {
  status: number;
  errorCode: string | null;
  cancelled: boolean;
  stream: boolean;
}

const REQUESTS = `query($id: ID!) { endpoint(id: $id) { requests(first: 100) { nodes { status errorCode cancelled stream } } } }`;

/** The endpoint's requests as its user reads them (newest first). */
async function recorded(): Promise<Recorded[]> {
  const data = await alice.graphql.request<{ endpoint: { requests: { nodes: Recorded[] } } }>(REQUESTS, { id: endpoint });
  return data.endpoint.requests.nodes;
}

/** Streams a chat completion over REST, and answers its text with the request as recorded once the log has it. */
async function streamed(content: string, extra: Record<string, unknown> = {}): Promise<{ text: string; row: Recorded }> {
  const before = (await recorded()).length;
  const res = await fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: endpoint, messages: [{ role: 'user', content }], stream: true, ...extra }),
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  // The log is written in batches: the request shows once its batch is.
  const rows = await waitFor('the request recorded', async () => {
    const now = await recorded();
    return now.length > before ? now : undefined;
  });
  return { text, row: rows[0]! };
}

const INVALID: Recorded = { status: 502, errorCode: 'upstream_invalid', cancelled: false, stream: true };

test('a stream that is JSON throughout, a comment among its events, is recorded as the 200 it is', async () => {
  const { text, row } = await streamed('COMMENT');
  expect(text).toContain(': keep-alive\n\n');
  expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  expect(row).toEqual({ status: 200, errorCode: null, cancelled: false, stream: true });
}, 60_000);

test.each([
  ['a short line of text', 'TEXT', 'data: not json at all\n\n'],
  ['a long line of text, where a token would be', 'LONG', 'data: <html><body>An engine'],
  ["a chunk's JSON cut short", 'TRUNCATED', '"created":1,"mode\n\n'],
])(
  'an event that is not JSON (%s) is passed on as it is, and recorded as upstream_invalid, 502',
  async (_, prompt, passed) => {
    const { text, row } = await streamed(prompt);
    // What the client sees is what the replica sent: the event as it is, and the stream on to its end.
    expect(text).toContain(passed);
    expect(text).toContain('"content":"there"');
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(text).not.toContain('"error"');
    expect(row).toEqual(INVALID);
  },
  60_000,
);

test('an event past the bound ends the stream with the cut events, and is recorded as upstream_invalid, 502', async () => {
  const { text, row } = await streamed('HUGE', { max_tokens: 1 });
  expect(text.length).toBeLessThan(1024 * 1024);
  expect(text).toMatch(/data: \{"error":\{[^\n]*"type":"server_error"[^\n]*"code":"upstream_disconnected"\}\}\n\ndata: \[DONE\]\n\n$/);
  expect(row).toEqual(INVALID);
}, 60_000);
