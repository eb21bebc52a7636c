/**
 * A replica that answers with something other than JSON (an ENGINE_COMMAND server gone wrong): GraphQL clients get a
 * 502 `upstream_invalid`, and nothing of the text reaches the log (JSON.parse's own message would quote it there),
 * content logging being off. The REST route relays bytes as they are, so it is not concerned.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { CreateChatCompletionDocument } from '../../src/sdk/client.js';
import { openSse } from '../support/live-clients.js';
import { startTestApp, TINY_REPO, waitFor, waitForStatus, type TestApp } from '../support/app.js';
import type { SeededUser } from '../support/gateway.js';

/** Valid answers (the warm-up's) unless the question holds LEAK; then SECRET text where JSON should be. */
const ENGINE = `
import http from 'node:http';
const port = Number(process.argv[2]);
const chunk = (content) => JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] });
http.createServer((req, res) => {
  if (req.method === 'GET') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok","active":0,"queued":0}');
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const request = JSON.parse(body);
    const leak = JSON.stringify(request.messages ?? '').includes('LEAK');
    if (request.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: ' + chunk('hi') + '\\n\\n');
      if (leak) res.write('data: SECRET-STREAMED-ANSWER\\n\\n');
      return res.end('data: [DONE]\\n\\n');
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(leak ? 'SECRET-WHOLE-ANSWER' : JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;

let dir: string;
let app: TestApp;
let user: SeededUser;
let endpoint: string;
const logged: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'garbage-engine-'));
  const script = path.join(dir, 'engine.mjs');
  await writeFile(script, ENGINE);
  app = await startTestApp({
    env: { ENGINE_COMMAND: `"${process.execPath}" "${script}" {port} {model}` },
    log: (message, error) => logged.push(`${message} ${error instanceof Error ? `${error.message} ${error.stack}` : String(error ?? '')}`),
  });
  user = await app.seed.user();
  const project = await user.project();
  endpoint = await project.endpoint({ hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } });
  await waitForStatus(app.sql, endpoint, 'RUNNING', 60_000);
}, 90_000);

afterAll(() => rm(dir, { recursive: true, force: true }));

const LEAK = [{ role: 'user', content: 'LEAK please' }];

test('createChatCompletion: a 502 upstream_invalid, not a masked 500', async () => {
  const answer = await user.graphql.request(CreateChatCompletionDocument, { input: { model: endpoint, messages: LEAK } });
  expect(answer.createChatCompletion).toMatchObject({ __typename: 'ChatCompletionError', status: 502, code: 'upstream_invalid' });
});

test('the chatCompletion subscription: the chunks before, then the error, and nothing of the text in the log', async () => {
  const stream = await openSse(
    app.url,
    user.key,
    'subscription($input: ChatCompletionInput!) { chatCompletion(input: $input) { choices { delta { content } } } }',
    { input: { model: endpoint, messages: LEAK } },
  );
  await waitFor('the stream to end', async () => stream.ended !== undefined, 20_000);
  const nexts = stream.events.filter((e) => e.event === 'next').map((e) => e.data);
  expect(nexts[0].data.chatCompletion.choices[0].delta.content).toBe('hi');
  expect(nexts.at(-1).errors[0]).toMatchObject({ extensions: { code: 'upstream_invalid', status: 502 } });
  expect(logged.join('\n')).not.toContain('SECRET');
});
