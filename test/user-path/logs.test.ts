/**
 * Logs an operator can use (issue 19): JSON lines through pino, one access
 * line per request (method, route, status, duration, request id, key id;
 * never the key or content), a user's mistake as one line without a stack,
 * and an internal error with its stack and the request id the client got.
 */
import { Writable } from 'node:stream';
import { beforeAll, describe, expect, test } from 'vitest';
import { ModelSourceError } from '../../src/models/errors.js';
import { invalidInputError } from '../../src/domain/errors.js';
import { createLogger, logFunction } from '../../src/log.js';
import { routeOf } from '../../src/http/access-log.js';
import { logFailure } from '../../src/http/request-id.js';
import { startTestApp, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';

type Line = Record<string, unknown> & { level: string; msg: string };

/** A logger whose JSON lines are kept for the test to read. */
function capturedLogger() {
  const lines: Line[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const text of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(text) as Line);
      done();
    },
  });
  return { logger: createLogger({ level: 'info', format: 'json' }, stream), lines };
}

async function eventually<T>(probe: () => T | undefined, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('no such log line');
    await new Promise((r) => setTimeout(r, 20));
  }
}

let t: TestApp;
let alice: SeededUser;
let captured: ReturnType<typeof capturedLogger>;

beforeAll(async () => {
  captured = capturedLogger();
  t = await startTestApp({ logger: captured.logger });
  alice = await t.seed.user();
});

describe('the access log', () => {
  test('one JSON line per request: method, route, status, duration, request id, key id; never the key', async () => {
    const res = await fetch(`${t.url}/dedicated/beta/endpoint/ep_0123456789abcd/status?limit=5`, {
      headers: { authorization: `Bearer ${alice.key}`, 'x-request-id': 'access-log-test-1' },
    });
    expect(res.status).toBe(404);
    const [key] = await t.sql<{ id: string }[]>`SELECT id FROM api_keys WHERE user_id = ${alice.user.id}`;
    const line = await eventually(() => captured.lines.find((l) => l.reqId === 'access-log-test-1'));
    expect(line).toMatchObject({
      level: 'info',
      msg: 'request',
      method: 'GET',
      route: '/dedicated/beta/endpoint/:id/status',
      status: 404,
      keyId: key!.id,
      service: 'dedicated-gateway',
    });
    expect(line.durationMs).toBeTypeOf('number');
    expect(line.time).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(captured.lines.filter((l) => l.reqId === 'access-log-test-1' && l.msg === 'request')).toHaveLength(1);
    // Neither the key nor the query string is logged, in any line.
    const all = JSON.stringify(captured.lines);
    expect(all).not.toContain(alice.key);
    expect(all).not.toContain('limit=5');
  });

  test('a request with a wrong key is logged with its 401 and no key id; a chat body is never logged', async () => {
    const res = await fetch(`${t.url}/dedicated/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: 'Bearer dek_wrong_key_0000000000000',
        'content-type': 'application/json',
        'x-request-id': 'access-log-test-2',
      },
      body: JSON.stringify({ model: 'x', messages: [{ role: 'user', content: 'a secret prompt' }] }),
    });
    expect(res.status).toBe(401);
    const line = await eventually(() => captured.lines.find((l) => l.reqId === 'access-log-test-2'));
    expect(line).toMatchObject({ method: 'POST', route: '/dedicated/v1/chat/completions', status: 401 });
    expect('keyId' in line).toBe(false);
    expect(JSON.stringify(captured.lines)).not.toContain('a secret prompt');
    expect(JSON.stringify(captured.lines)).not.toContain('dek_wrong_key');
  });

  test('routes group by route: ids and version numbers become :id', () => {
    expect(routeOf('/dedicated/beta/endpoint/ep_abc123def456gh/version')).toBe('/dedicated/beta/endpoint/:id/version');
    expect(routeOf('/dedicated/endpoint/wandb-artifact-create')).toBe('/dedicated/endpoint/wandb-artifact-create');
    expect(routeOf('/dedicated/v1/models/ep_abc123def456gh')).toBe('/dedicated/v1/models/:id');
  });
});

describe('failures', () => {
  test("a user's mistake (a repository that does not exist) is one warning line without a stack", async () => {
    const project = await alice.project('logs');
    const id = await project.endpoint({ hfModelRepo: 'test-org/does-not-exist' });
    await waitForStatus(t.sql, id, 'FAILED');
    const line = await eventually(() => captured.lines.find((l) => typeof l.msg === 'string' && l.msg.includes(`starting ${id} failed`)));
    expect(line).toMatchObject({ level: 'warn', component: 'controller', error: { type: 'ModelSourceError' } });
    expect(JSON.stringify(line)).not.toContain('stack');
  });

  test('an internal error is logged with its stack and the request id; a client error without a stack', () => {
    const { logger, lines } = capturedLogger();
    const log = logFunction(logger);
    // As the surfaces log a 500: through logFailure, with the id the client got in x-request-id.
    logFailure(log, 'r-1', 'GET /x', new TypeError('cannot read properties of undefined'));
    expect(lines[0]).toMatchObject({
      level: 'error',
      reqId: 'r-1',
      msg: 'GET /x failed (request r-1)',
      err: { type: 'TypeError', message: 'cannot read properties of undefined' },
    });
    expect((lines[0]!.err as { stack: string }).stack).toMatch(/TypeError: cannot read properties of undefined\n\s+at /);

    log('bad input', invalidInputError([{ field: 'name', message: 'must not be empty' }]));
    expect(lines[1]).toMatchObject({ level: 'warn', msg: 'bad input', error: { message: 'invalid request: name: must not be empty' } });
    expect(JSON.stringify(lines[1])).not.toContain('stack');

    // What a component calls expected (the controller: a start error the user can read) is one line too.
    logFunction(logger, (e) => e instanceof ModelSourceError)(
      'start failed',
      new ModelSourceError('WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR', 'no such repo'),
    );
    expect(lines[2]).toMatchObject({ level: 'warn', error: { type: 'ModelSourceError', message: 'no such repo' } });
    expect(JSON.stringify(lines[2])).not.toContain('stack');
  });

  test('LOG_LEVEL filters lines', () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'warn', format: 'json' }, { write: (s: string) => void lines.push(s) });
    logger.info('hidden');
    logger.warn('shown');
    expect(lines.map((l) => (JSON.parse(l) as Line).msg)).toEqual(['shown']);
  });
});
