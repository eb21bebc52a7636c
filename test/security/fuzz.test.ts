/**
 * Fuzzing the gateway's surfaces with generated input (issue 13): REST bodies
 * and query strings, GraphQL documents and variables over POST, GET and SSE,
 * raw HTTP requests over sockets, and graphql-ws frames, against a real
 * gateway (with its controller) on a real PostgreSQL.
 *
 * Every property holds for every generated input:
 * - no 5xx answer, and no masked internal error in a GraphQL result (GraphQL's 500);
 * - an answer within HANG_MS (a raw request may instead be closed, only when
 *   it is HTTP that Node's parser refuses);
 * - no WebSocket closed by the server with 4500 (or 1011, or without a close frame);
 * - no uncaught exception or unhandled rejection in the gateway (it runs in this process);
 * - no row written by a request that was refused: endpoints, versions, events
 *   of user actions, projects, teams, memberships, users and keys are counted
 *   before and after each request.
 * Each run's seed is printed at the start (`fuzz seed N`), and each property's
 * seed is that seed plus the property's own offset (1301 and so on); each run
 * draws a fresh seed unless `FUZZ_SEED=N` replays one. A failure prints fast-check's shrunk
 * counterexample, with the property's seed and the run's.
 * `FUZZ_SURVEY=1` runs every generated case instead and lists each distinct
 * failure once, with the gateway's own log of it (see `survey`).
 */
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { GraphQLError, parse, validate, getOperationAST } from 'graphql';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { startTestApp, type TestApp } from '../support/app.js';
import { onCleanup } from '../support/cleanup.js';
import { createBody, type SeededProject, type SeededUser } from '../support/gateway.js';
import {
  anyJson,
  bodyEncoding,
  contentType,
  corrupt,
  crossFieldViolation,
  deepJson,
  describeCase,
  documentCorruption,
  encodeBody,
  field,
  headerSafeString,
  hostileNumber,
  hostileString,
  INSTANCE_IDS,
  GPU_TYPE_NAMES,
  looseRecord,
  mutatedValid,
  operation,
  pctEncode,
  printable,
  raw,
  type RawJson,
  printedSchema,
  tokenSoup,
  toJsonText,
  urlPiece,
  validAdvanced,
  validArtifactName,
  validComment,
  validName,
  validPolicy,
  validRepo,
  validRevision,
  validSimplescale,
  wrongValue,
  type BodyEncoding,
  type Contextual,
  type GraphQLOperation,
} from '../support/fuzz-arbitraries.js';

/** How long any request may go unanswered. */
const HANG_MS = 5_000;
/** A property that runs longer than this fails (it takes a few seconds alone; the whole suite on 2 cores can slow it 5 times). */
const PROPERTY_BUDGET_MS = 60_000;
const TEST_TIMEOUT_MS = 90_000;

let t: TestApp;
let alice: SeededUser;
let bob: SeededUser;
let project: SeededProject;
let bobProject: SeededProject;
/** Endpoints the fuzzed requests act on: two from the hub (unknown repositories), one from a registry artifact, one of another team. */
let seeded: { hub: string[]; artifact: string; bobs: string };
const MISSING_ENDPOINT = 'ep_0000fuzz000000';
const stats = { http: 0, raw: 0, wsConnections: 0, wsFrames: 0 };

// ---------------------------------------------------------------------------
// Crashes: the gateway runs in this process, so its uncaught exceptions land here.

const crashes: string[] = [];
const crashWaiters = new Set<(message: string) => void>();
const onCrash = (kind: string) => (error: unknown) => {
  const message = `${kind}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`;
  crashes.push(message);
  for (const wake of crashWaiters) wake(message);
};
const onUncaught = onCrash('uncaughtException');
const onUnhandled = onCrash('unhandledRejection');

/**
 * Runs `work` with a deadline of HANG_MS; it fails at once, naming the
 * exception, when the gateway throws an uncaught exception meanwhile.
 */
async function bounded<T>(label: string, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let waiter: ((message: string) => void) | undefined;
  const failure = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new Error(`no answer within ${HANG_MS} ms: ${label}`));
    }, HANG_MS);
    waiter = (message) => {
      controller.abort();
      reject(new Error(`the gateway threw while serving ${label}: ${message.split('\n').slice(0, 4).join(' | ')}`));
    };
    crashWaiters.add(waiter);
  });
  failure.catch(() => {});
  try {
    return await Promise.race([work(controller.signal), failure]);
  } finally {
    clearTimeout(timer);
    crashWaiters.delete(waiter!);
  }
}

// ---------------------------------------------------------------------------
// Rows: what a refused request must not have written.

type Counts = Record<string, number>;

async function rowCounts(): Promise<Counts> {
  const [row] = await t.sql<Counts[]>`
    SELECT (SELECT count(*) FROM endpoints)::int AS endpoints,
           (SELECT count(*) FROM endpoint_versions)::int AS versions,
           (SELECT count(*) FROM endpoint_events WHERE cause NOT LIKE 'controller:%')::int AS events,
           (SELECT count(*) FROM projects)::int AS projects,
           (SELECT count(*) FROM teams)::int AS teams,
           (SELECT count(*) FROM team_members)::int AS members,
           (SELECT count(*) FROM users)::int AS users,
           (SELECT count(*) FROM api_keys)::int AS keys`;
  return row!;
}

/**
 * The counts once no write is under way: unchanged for 400 ms (a mutation left in flight by a closed socket may
 * wait that long behind a loaded machine before it writes), within 4 s.
 */
async function settledCounts(): Promise<Counts> {
  let previous = await rowCounts();
  let stableSince = performance.now();
  const deadline = stableSince + 4000;
  while (performance.now() < deadline) {
    await sleep(50);
    const next = await rowCounts();
    if (!Object.keys(next).every((k) => next[k] === previous[k])) {
      previous = next;
      stableSince = performance.now();
    } else if (performance.now() - stableSince >= 400) return next;
  }
  return previous;
}

/**
 * The counts after the last request, when it was refused (and so wrote nothing): the next request's counts before.
 * Two requests checked in a row share the count between them, one statement per request instead of two, and a
 * refused request's write that lands after its own check shows in the next request's (a fresh count there would
 * take it in unseen). A request that may have written (one that succeeded) leaves none: the next one counts afresh.
 */
let countsAfterRefusal: Counts | undefined;

/** The counts before a request: those after the previous one when it was refused, else fresh. */
async function countsBefore(): Promise<Counts> {
  const counts = countsAfterRefusal;
  countsAfterRefusal = undefined;
  return counts ?? rowCounts();
}

/** The counts after a refused request; the next request starts from them. */
async function countsAfter(): Promise<Counts> {
  countsAfterRefusal = await rowCounts();
  return countsAfterRefusal;
}

function expectNoNewRows(before: Counts, after: Counts, label: string): void {
  const grown = Object.keys(before).filter((k) => after[k] !== before[k]);
  if (grown.length > 0) {
    throw new Error(`a refused request wrote rows (${grown.map((k) => `${k} ${before[k]} -> ${after[k]}`).join(', ')}): ${label}`);
  }
}

// ---------------------------------------------------------------------------
// HTTP through fetch.

interface Answer {
  status: number;
  contentType: string;
  text: string;
}

const snippet = (text: string) => (text.length > 400 ? `${text.slice(0, 400)}…` : text);

/**
 * One request. An SSE answer is read until it completes, or for `sseWaitMs`:
 * a subscription may rightly stay silent, while the SSE answer to a query or
 * mutation must be read whole (to see whether it succeeded).
 */
function send(method: string, path: string, headers: Record<string, string>, body?: Buffer, sseWaitMs = 100): Promise<Answer> {
  stats.http++;
  const label = `${method} ${path.length > 200 ? `${path.slice(0, 200)}…` : path}`;
  return bounded(label, async (signal) => {
    const response = await fetch(`${t.url}${path}`, {
      method,
      headers,
      signal,
      redirect: 'manual',
      ...(body !== undefined ? { body: new Uint8Array(body) } : {}),
    });
    const type = response.headers.get('content-type') ?? '';
    let text = '';
    if (type.startsWith('text/event-stream') && response.body) {
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      const until = Date.now() + sseWaitMs;
      for (;;) {
        const step = await Promise.race([reader.read(), sleep(Math.max(0, until - Date.now())).then(() => null)]);
        if (!step || step.done) break;
        text += decoder.decode(step.value, { stream: true });
        if (text.includes('event: complete')) break;
      }
      await reader.cancel().catch(() => {});
    } else {
      text = await response.text();
    }
    const route = /^\/[\w-]*(\/[\w-]*(\/[\w-]*)?)?/.exec(path)?.[0];
    tally.set(`${method} ${route} ${response.status}`, (tally.get(`${method} ${route} ${response.status}`) ?? 0) + 1);
    return { status: response.status, contentType: type, text };
  });
}

/** Answers by method, route and status, printed in survey mode: how far the generated requests got. */
const tally = new Map<string, number>();

/** A GraphQL result's internal errors: thrown exceptions that yoga masks (`maskedErrors`). */
const MASKED = /Unexpected error\./;
/** A mutation result that succeeded (and so may have written rows). */
const SUCCEEDED = /"__typename":\s*"\w+Success"/;

function expectSound(answer: Answer, label: string): void {
  if (answer.status >= 500) throw new Error(`${answer.status} from ${label}: ${snippet(answer.text)}`);
  if (MASKED.test(answer.text))
    throw new Error(`a masked internal error (GraphQL's 500), status ${answer.status}, from ${label}: ${snippet(answer.text)}`);
}

// ---------------------------------------------------------------------------
// Who is calling.

interface Caller {
  auth: 'alice' | 'none' | 'bearer-only' | 'wrong' | 'basic' | 'alice-extra' | 'lowercase' | 'revoked-shape';
  team?: 'own' | 'bob' | 'empty' | { value: string };
  teamHeader: 'x-friendli-team' | 'x-team-id';
}

const caller: fc.Arbitrary<Caller> = fc.record({
  auth: fc.oneof(
    { arbitrary: fc.constant('alice' as const), weight: 12 },
    {
      arbitrary: fc.constantFrom(
        'none' as const,
        'bearer-only' as const,
        'wrong' as const,
        'basic' as const,
        'alice-extra' as const,
        'lowercase' as const,
        'revoked-shape' as const,
      ),
      weight: 2,
    },
  ),
  team: fc.oneof(
    { arbitrary: fc.constant(undefined), weight: 10 },
    { arbitrary: fc.constantFrom('own' as const, 'bob' as const, 'empty' as const), weight: 2 },
    { arbitrary: headerSafeString.map((value) => ({ value })), weight: 1 },
  ),
  teamHeader: fc.constantFrom('x-friendli-team' as const, 'x-team-id' as const),
});

function callerHeaders(c: Caller): Record<string, string> {
  const headers: Record<string, string> = {};
  const key = alice.key;
  const authorization = {
    alice: `Bearer ${key}`,
    none: undefined,
    'bearer-only': 'Bearer',
    wrong: 'Bearer dek_wrong',
    basic: `Basic ${Buffer.from('a:b').toString('base64')}`,
    'alice-extra': `Bearer ${key} extra`,
    lowercase: `bearer ${key}`,
    'revoked-shape': `Bearer ${key.slice(0, -1)}`,
  }[c.auth];
  if (authorization !== undefined) headers.authorization = authorization;
  if (c.team !== undefined) {
    headers[c.teamHeader] = c.team === 'own' ? alice.teamId : c.team === 'bob' ? bob.teamId : c.team === 'empty' ? '' : c.team.value;
  }
  return headers;
}

// ---------------------------------------------------------------------------
// Properties.

/**
 * FUZZ_SURVEY=1 runs each property over all of its generated cases instead of
 * stopping at the first failure, and prints each distinct failure once (with
 * the gateway's own log of it): a list of what is broken, not just the first.
 */
const SURVEY = process.env.FUZZ_SURVEY === '1';

/**
 * This run's seed: FUZZ_SEED replays one; otherwise each run draws a fresh one (printed), so that every run explores
 * new cases. (Seed 1327664504 once left the file's clean-up hanging: closing the gateway waited on sockets handed to
 * the upgrade listener and on WebSocket peers that never answer a close; test/http/close-bounded.test.ts covers both.)
 */
const RUN_SEED = ((): number => {
  const given = process.env.FUZZ_SEED;
  if (given === undefined || given === '' || given === 'random') return Math.floor(Math.random() * 0x7fffffff);
  const seed = Number(given);
  if (!Number.isSafeInteger(seed)) throw new Error(`FUZZ_SEED must be an integer (got ${JSON.stringify(given)})`);
  return seed;
})();
console.log(`fuzz seed ${RUN_SEED} (replay with FUZZ_SEED=${RUN_SEED})`);

/** A property's seed in this run: the run's seed plus the property's own offset, as a 32-bit integer. */
const seedOf = (offset: number): number => (RUN_SEED + offset) | 0;
const serverLog: string[] = [];
if (SURVEY) {
  // Put back when this file ends: the suite's files share their worker's globals (isolate: false).
  const before = { error: console.error, debug: process.env.DEBUG_CONTROLLER };
  onCleanup(() => {
    console.error = before.error;
    if (before.debug === undefined) delete process.env.DEBUG_CONTROLLER;
    else process.env.DEBUG_CONTROLLER = before.debug;
  });
  process.env.DEBUG_CONTROLLER = '1';
  console.error = (...args: unknown[]) => {
    serverLog.push(
      args
        .map((a) =>
          a instanceof Error
            ? `${a.name}: ${a.message} ${
                a.stack
                  ?.split('\n')
                  .find((l) => l.includes('/src/'))
                  ?.trim() ?? ''
              }`
            : String(a),
        )
        .join(' '),
    );
  };
}

/** What kind of failure a message reports, and where: `500 PUT /dedicated/beta`, `ws close 4500 graphql-ws`. */
function symptomOf(message: string): string {
  const kinds: [RegExp, (m: RegExpExecArray) => string][] = [
    [/^(\d{3}) /, (m) => m[1]!],
    [/^a masked internal error/, () => 'masked internal error'],
    [/^a refused request wrote rows \(([^)]*)\)/, (m) => `wrote rows (${m[1]!.replace(/ \d+ -> \d+/g, '')})`],
    [/^no answer within/, () => 'no answer'],
    [/^the gateway threw/, () => 'threw'],
    [/^the connection was (closed|reset)/, (m) => `${m[1]} without an answer`],
    [/^the server closed the socket with (\d+)/, (m) => `closed ${m[1]}`],
    [/^not an HTTP answer/, () => 'not HTTP'],
  ];
  const found = kinds.map(([re, name]) => [re.exec(message), name] as const).find(([m]) => m);
  const kind = found ? found[1](found[0]!) : message.slice(0, 60);
  const where = / raw "/.test(message)
    ? 'raw'
    : /graphql-ws session/.test(message)
      ? 'graphql-ws'
      : (/\b(GET|POST|PUT|DELETE|PATCH|OPTIONS) (\/[\w-]*(?:\/[\w-]*)?)/.exec(message)?.slice(1).join(' ') ?? '');
  return `${kind} ${where}`;
}

async function survey<T extends object>(seed: number, numRuns: number, arb: fc.Arbitrary<T>, run: (value: T) => Promise<void>) {
  const failures = new Map<string, string>();
  for (const value of fc.sample(printable(arb), { seed, numRuns })) {
    serverLog.length = 0;
    const before = crashes.length;
    try {
      await run(value);
      await new Promise((resolve) => setImmediate(resolve));
      if (crashes.length > before)
        throw new Error(`the gateway threw: ${crashes[crashes.length - 1]!.split('\n').slice(0, 2).join(' | ')}`);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      // The gateway's own reports of a request that failed (not the controller's work on endpoints).
      const server = serverLog.filter(
        (l) => /Error/.test(l) && (/^\[controller\] (\/|[A-Z]+ \/|an SSE)/.test(l) || !l.startsWith('[controller]')),
      );
      // One entry per symptom and cause: the status and route (or the kind of failure), and the gateway's own error and where it was thrown.
      const symptom = symptomOf(message);
      const cause = (server.find((l) => /\w+Error: /.test(l)) ?? '')
        .replace(/^[^]*?(\w+Error: [^:]*)[^]*?( at [^ ]*\/src\/[^ ]*)?$/, '$1$2')
        .replace(/ep_\w+|\d+|"[^"]*"/g, '…');
      const key = `${symptom.slice(0, 200)} | ${cause.slice(0, 200)}`;
      if (!failures.has(key))
        failures.set(key, `${snippet(message)}\n    case: ${describeCase(value)}\n    gateway log: ${snippet(server.join(' / '))}`);
    }
  }
  if (failures.size > 0) {
    const report = [...failures.values()].map((f, i) => `  ${i + 1}. ${f}`).join('\n');
    console.log(`survey (seed ${seed}, ${numRuns} cases): ${failures.size} distinct failures\n${report}`);
    throw new Error(`${failures.size} distinct failures (see the log)`);
  }
}

async function check<T extends object>(offset: number, numRuns: number, arb: fc.Arbitrary<T>, run: (value: T) => Promise<void>) {
  const seed = seedOf(offset);
  // What ran before this property (another's requests, unchecked) may have written: its first request counts afresh.
  countsAfterRefusal = undefined;
  if (SURVEY) return survey(seed, numRuns, arb, run);
  try {
    await fc.assert(
      fc.asyncProperty(printable(arb), async (value) => {
        const before = crashes.length;
        await run(value);
        // Give an exception thrown after the answer (a late write, a timer) the time to surface.
        await new Promise((resolve) => setImmediate(resolve));
        if (crashes.length > before)
          throw new Error(`the gateway threw: ${crashes[crashes.length - 1]!.split('\n').slice(0, 4).join(' | ')}`);
      }),
      { seed, numRuns, plugins: [fc.interruptAfterTimeLimit(PROPERTY_BUDGET_MS, { failOnInterrupt: true })] },
    );
  } catch (error) {
    if (error instanceof Error) error.message = `[fuzz seed ${RUN_SEED}: replay with FUZZ_SEED=${RUN_SEED}] ${error.message}`;
    throw error;
  }
}

interface RestCase {
  caller: Caller;
  encoding: BodyEncoding;
  contentType: string | undefined;
}

/** Mostly a clean envelope (Alice's key, JSON), so that the body reaches the rules; otherwise any caller, encoding and content type. */
const restEnvelope: fc.Arbitrary<RestCase> = fc.oneof(
  {
    arbitrary: fc.constant<RestCase>({
      caller: { auth: 'alice', teamHeader: 'x-friendli-team' },
      encoding: { kind: 'json' },
      contentType: 'application/json',
    }),
    weight: 3,
  },
  { arbitrary: fc.record({ caller, encoding: bodyEncoding, contentType }), weight: 2 },
);

/** Sends a REST request with a generated body; checks the answer and, when it is refused, the rows. */
async function restRequest(method: string, path: string, c: RestCase, body: unknown | undefined): Promise<Answer> {
  const headers = callerHeaders(c.caller);
  if (body !== undefined && c.contentType !== undefined) headers['content-type'] = c.contentType;
  const payload = body === undefined ? undefined : encodeBody(body, c.encoding);
  const before = await countsBefore();
  const label = `${method} ${path}`;
  const answer = await send(method, path, headers, payload);
  expectSound(answer, label);
  if (answer.status >= 400) expectNoNewRows(before, await countsAfter(), `${answer.status} from ${label}: ${snippet(answer.text)}`);
  return answer;
}

/** A seeded endpoint (mostly), or a path segment that names none, encoded or broken. */
function endpointSegment(): fc.Arbitrary<string> {
  return fc.oneof(
    { arbitrary: fc.constantFrom(...seeded.hub, seeded.artifact), weight: 6 },
    { arbitrary: fc.constantFrom(seeded.bobs, MISSING_ENDPOINT), weight: 1 },
    { arbitrary: urlPiece, weight: 3 },
  );
}

/** Cursors: issued ones, ones of the other list, positions out of every range, the Python SDK's b'…' form, and junk. */
const cursor: fc.Arbitrary<string> = fc.oneof(
  {
    arbitrary: fc
      .tuple(
        fc.constantFrom('ver', 'ep', 'x', ''),
        fc.oneof(
          fc.integer({ min: -3, max: 40 }),
          fc.constantFrom(
            2 ** 31 - 1,
            2 ** 31,
            -(2 ** 31) - 1,
            999_999_999_999_999,
            -999_999_999_999_999,
            2 ** 53,
            '1.5',
            '1e3',
            '01',
            '+1',
            ' 1',
            '1:2',
            '',
          ),
        ),
        fc.boolean(),
      )
      .map(([kind, position, bytesForm]) => {
        const c = Buffer.from(`${kind}:${position}`, 'utf8').toString('base64url');
        return bytesForm ? `b'${c}'` : c;
      }),
    weight: 3,
  },
  { arbitrary: hostileString, weight: 1 },
);

describe('fuzz', () => {
  beforeAll(async () => {
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onUnhandled);
    t = await startTestApp();
    alice = await t.seed.user();
    bob = await t.seed.user();
    project = await alice.project('fuzz');
    bobProject = await bob.project('bob');
    const hub = [
      await project.endpoint({ hfModelRepo: 'fuzz-nohub/seed-a' }),
      await project.endpoint({ hfModelRepo: 'fuzz-nohub/seed-b' }),
    ];
    for (let i = 0; i < 3; i++) {
      const updated = await alice.rest('PUT', `/dedicated/beta/endpoint/${hub[0]}`, { newVersionComment: `v${i + 1}` });
      expect(updated.status).toBe(200);
    }
    const artifact = await alice.rest('POST', '/dedicated/endpoint/wandb-artifact-create', {
      wandbArtifactVersionName: 'acme/model/seed:v1',
      projectId: project.id,
    });
    expect(artifact.status).toBe(200);
    seeded = { hub, artifact: artifact.body.endpointId, bobs: await bobProject.endpoint({ hfModelRepo: 'fuzz-nohub/seed-bob' }) };
  });

  afterAll(() => {
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onUnhandled);
    if (SURVEY)
      console.log(
        [...tally]
          .sort()
          .map(([k, n]) => `${k}: ${n}`)
          .join('\n'),
      );
    console.log(
      `fuzz: ${stats.http} HTTP requests, ${stats.raw} raw requests, ${stats.wsConnections} WebSocket connections with ${stats.wsFrames} frames`,
    );
  });

  // -------------------------------------------------------------------------
  // REST bodies.

  test('POST /dedicated/beta/endpoint: any body', { timeout: TEST_TIMEOUT_MS }, async () => {
    const valid = fc.record(
      {
        projectId: fc.constantFrom(project.id, project.id, bobProject.id),
        name: validName,
        instanceOptionId: fc.constantFrom(...INSTANCE_IDS),
        advanced: validAdvanced,
        hfModelRepo: validRepo,
        autoscalingPolicy: validPolicy,
        hfModelRepoRevision: validRevision,
        initialVersionComment: validComment,
      },
      { requiredKeys: ['projectId', 'name', 'instanceOptionId', 'advanced', 'hfModelRepo'] },
    );
    const loose = looseRecord({
      projectId: field(fc.constantFrom(project.id, bobProject.id, 'prj_0000fuzz000000')),
      name: field(validName),
      instanceOptionId: field(fc.constantFrom(...INSTANCE_IDS)),
      advanced: field(
        looseRecord({
          max_batch_size: field(fc.nat(2000)),
          max_token_count: hostileNumber,
          max_input_length: hostileNumber,
          tokenizer_skip_special_tokens: field(fc.boolean()),
          enable_content_logging: field(fc.boolean()),
        }),
      ),
      hfModelRepo: field(validRepo),
      autoscalingPolicy: field(looseRecord({ minReplica: hostileNumber, maxReplica: hostileNumber, cooldownPeriod: hostileNumber })),
      simplescale: field(looseRecord({ replicas: hostileNumber })),
      hfModelRepoRevision: field(validRevision),
      initialVersionComment: field(validComment),
    });
    const body = fc.oneof(
      { arbitrary: mutatedValid(valid), weight: 4 },
      { arbitrary: fc.tuple(valid, crossFieldViolation).map(([v, c]) => ({ ...v, ...c })), weight: 1 },
      { arbitrary: loose, weight: 4 },
      { arbitrary: wrongValue, weight: 1 },
    );
    await check(1301, 400, fc.record({ envelope: restEnvelope, body }), async ({ envelope, body }) => {
      await restRequest('POST', '/dedicated/beta/endpoint', envelope, body);
    });
  });

  test('PUT /dedicated/beta/endpoint/{id}: any body', { timeout: TEST_TIMEOUT_MS }, async () => {
    const valid = fc.record(
      {
        name: validName,
        instanceOptionId: fc.constantFrom(...INSTANCE_IDS),
        advanced: validAdvanced,
        hfModelRepo: validRepo,
        autoscalingPolicy: validPolicy,
        simplescale: validSimplescale,
        hfModelRepoRevision: fc.oneof(validRevision, fc.constant(null)),
        newVersionComment: validComment,
      },
      { requiredKeys: [] },
    );
    const body = fc.oneof(
      { arbitrary: mutatedValid(valid), weight: 5 },
      { arbitrary: fc.tuple(valid, crossFieldViolation).map(([v, c]) => ({ ...v, simplescale: undefined, ...c })), weight: 1 },
      {
        arbitrary: looseRecord({
          name: field(validName),
          advanced: field(validAdvanced),
          autoscalingPolicy: field(validPolicy),
          simplescale: field(validSimplescale),
          hfModelRepoRevision: field(validRevision),
          newVersionComment: field(validComment),
        }),
        weight: 3,
      },
      { arbitrary: wrongValue, weight: 1 },
      { arbitrary: fc.constant(undefined), weight: 1 },
    );
    await check(1302, 300, fc.record({ envelope: restEnvelope, id: endpointSegment(), body }), async ({ envelope, id, body }) => {
      await restRequest('PUT', `/dedicated/beta/endpoint/${id}`, envelope, body);
    });
  });

  test('the lifecycle actions, reads and deletes: any id, any body, any method', { timeout: TEST_TIMEOUT_MS }, async () => {
    const route = fc.oneof(
      fc.record({
        method: fc.constant('PUT'),
        suffix: fc.constantFrom('/restart', '/wake', '/sleep', '/terminate', '/restart/', '//wake', '/sleep/x'),
      }),
      fc.record({
        method: fc.constantFrom('GET', 'POST', 'PATCH', 'OPTIONS'),
        suffix: fc.constantFrom('', '/', '/status', '/version', '/restart', '/terminate'),
      }),
      fc.record({ method: fc.constant('DELETE'), suffix: fc.constantFrom('', '/', '/status') }),
    );
    const arb = fc.record({
      envelope: restEnvelope,
      id: endpointSegment(),
      route,
      body: fc.option(fc.oneof(anyJson, deepJson), { freq: 2, nil: undefined }),
    });
    await check(1303, 250, arb, async ({ envelope, id, route, body }) => {
      // Deleting a seeded endpoint would leave the other runs nothing to act on.
      const target = route.method === 'DELETE' && [...seeded.hub, seeded.artifact].includes(id) ? MISSING_ENDPOINT : id;
      await restRequest(
        route.method,
        `/dedicated/beta/endpoint/${target}${route.suffix}`,
        envelope,
        route.method === 'GET' || route.method === 'OPTIONS' ? undefined : body,
      );
    });
  });

  test('POST /dedicated/endpoint/wandb-artifact-create: any body', { timeout: TEST_TIMEOUT_MS }, async () => {
    const valid = fc.record(
      {
        wandbArtifactVersionName: validArtifactName,
        name: validName,
        projectId: fc.constantFrom(project.id, bobProject.id),
        idempotencyKey: fc.constantFrom('k1', 'k2', 'fuzz-key'),
        autoscalingPolicy: validPolicy,
        accelerator: fc.record(
          { type: fc.constantFrom(...GPU_TYPE_NAMES, 'h100', 'TPU'), count: fc.constantFrom(1, 2, 3, 4, 8, 16) },
          { requiredKeys: [] },
        ),
      },
      { requiredKeys: ['wandbArtifactVersionName'] },
    );
    const loose = looseRecord({
      wandbArtifactVersionName: field(validArtifactName),
      name: field(validName),
      projectId: field(fc.constantFrom(project.id, bobProject.id)),
      idempotencyKey: field(fc.string({ maxLength: 300 })),
      autoscalingPolicy: field(validPolicy),
      simplescale: field(validSimplescale),
      accelerator: field(looseRecord({ type: field(fc.constantFrom(...GPU_TYPE_NAMES)), count: hostileNumber })),
    });
    // Without projectId (and so without idempotencyKey) the call makes a new project for the endpoint.
    const inNewProject = fc.record(
      {
        wandbArtifactVersionName: validArtifactName,
        name: validName,
        autoscalingPolicy: validPolicy,
        accelerator: fc.record({ type: fc.constantFrom(...GPU_TYPE_NAMES), count: fc.constantFrom(1, 2, 4, 8) }),
      },
      { requiredKeys: ['wandbArtifactVersionName'] },
    );
    const body = fc.oneof(
      { arbitrary: mutatedValid(valid), weight: 3 },
      { arbitrary: mutatedValid(inNewProject), weight: 2 },
      {
        arbitrary: fc
          .tuple(
            fc.oneof(valid, inNewProject),
            crossFieldViolation.filter((c) => 'autoscalingPolicy' in c),
          )
          .map(([v, c]) => ({ ...v, ...c })),
        weight: 1,
      },
      { arbitrary: loose, weight: 4 },
      { arbitrary: wrongValue, weight: 1 },
    );
    await check(1304, 300, fc.record({ envelope: restEnvelope, body }), async ({ envelope, body }) => {
      await restRequest('POST', '/dedicated/endpoint/wandb-artifact-create', envelope, body);
    });
  });

  test('query strings: the endpoint list and the version list (limit, cursor, projectId)', { timeout: TEST_TIMEOUT_MS }, async () => {
    const limit = fc.oneof(
      fc.integer({ min: -2, max: 102 }).map(String),
      fc.constantFrom('1.5', '1e2', 'NaN', 'Infinity', '0x10', ' 5', '5 ', '+5', '05', '99999999999999999999999', '2147483648', '-0', ''),
      hostileString,
    );
    const param = (name: string, value: fc.Arbitrary<string>) =>
      fc.option(
        fc.oneof(
          { arbitrary: value.map((v) => `${name}=${pctEncode(v)}`), weight: 5 },
          { arbitrary: urlPiece.map((p) => `${name}=${p}`), weight: 2 },
          { arbitrary: fc.constantFrom(name, `${name}=`, `${name}=1&${name}=2`, `${name}[]=1`, `${name}%00=1`), weight: 1 },
        ),
        { freq: 2, nil: undefined },
      );
    const query = fc
      .tuple(
        param('limit', limit),
        param('cursor', cursor),
        param('projectId', fc.constantFrom(project.id, bobProject.id, '', 'prj_0000fuzz000000')),
        fc.option(fc.constantFrom('&&', '=', '%=%', 'x=%', '&limit', '#frag'), { freq: 6, nil: undefined }),
      )
      .map((parts) => parts.filter((p) => p !== undefined).join('&'));
    const arb = fc.record({ caller, list: fc.constantFrom('endpoints', 'versions'), id: endpointSegment(), query });
    await check(1305, 300, arb, async ({ caller: c, list, id, query }) => {
      const path = list === 'endpoints' ? `/dedicated/beta/endpoint?${query}` : `/dedicated/beta/endpoint/${id}/version?${query}`;
      await restRequest('GET', path, { caller: c, encoding: { kind: 'json' }, contentType: undefined }, undefined);
    });
  });

  test('POST /dedicated/v1/chat/completions: refused bodies (no endpoint serves)', { timeout: TEST_TIMEOUT_MS }, async () => {
    // Valid requests for endpoints that do not serve (missing, another team's, or a hostile id), then mutated.
    const model = fc.oneof(fc.constantFrom(MISSING_ENDPOINT, seeded.bobs, '', 'ep_'), hostileString);
    const valid = fc.record(
      {
        model,
        messages: fc.array(
          fc.record({ role: fc.constantFrom('user', 'system', 'assistant'), content: fc.oneof(fc.string(), hostileString) }),
          { minLength: 1, maxLength: 3 },
        ),
        stream: fc.boolean(),
        temperature: fc.double({ min: 0, max: 2, noNaN: true }),
        top_p: fc.double({ min: 0, max: 1, noNaN: true }),
        max_tokens: fc.integer({ min: 1, max: 64 }),
        stop: fc.array(fc.string(), { maxLength: 3 }),
        seed: fc.nat(),
        stream_options: fc.record({ include_usage: fc.boolean() }),
        chat_template_kwargs: fc.oneof(fc.record({ enable_thinking: fc.boolean() }), fc.dictionary(fc.string(), anyJson, { maxKeys: 3 })),
      },
      { requiredKeys: ['model', 'messages'] },
    );
    const loose = looseRecord({
      model: field(model),
      messages: field(
        fc.array(
          looseRecord({ role: field(fc.constantFrom('user', 'system', 'assistant', 'tool', 'developer')), content: field(hostileString) }),
          { maxLength: 3 },
        ),
      ),
      stream: field(fc.boolean()),
      temperature: hostileNumber,
      top_p: hostileNumber,
      max_tokens: hostileNumber,
      stop: field(fc.array(fc.string(), { maxLength: 3 })),
      seed: hostileNumber,
      stream_options: field(fc.record({ include_usage: fc.boolean() })),
      chat_template_kwargs: fc.oneof(anyJson, deepJson),
    });
    const body = fc.oneof(
      { arbitrary: mutatedValid(valid), weight: 4 },
      { arbitrary: loose, weight: 2 },
      { arbitrary: wrongValue, weight: 1 },
    );
    const arb = fc.record({ envelope: restEnvelope, method: fc.constantFrom('POST', 'POST', 'POST', 'GET', 'PUT'), body });
    await check(1306, 100, arb, async ({ envelope, method, body }) => {
      await restRequest(method, '/dedicated/v1/chat/completions', envelope, method === 'GET' ? undefined : body);
    });
  });

  // -------------------------------------------------------------------------
  // GraphQL.

  function graphqlContext(): { ctx: Contextual; fieldCtx: Record<string, Contextual> } {
    const endpointId = fc.oneof(
      { arbitrary: fc.constantFrom(...seeded.hub, seeded.artifact), weight: 4 },
      { arbitrary: fc.constantFrom(seeded.bobs, MISSING_ENDPOINT), weight: 1 },
    );
    const missingIds = fc.oneof(fc.constantFrom(MISSING_ENDPOINT, 'key_0000fuzz000000', 'usr_0000fuzz000000'), hostileString);
    const eventId = fc.oneof(
      fc.nat(50).map(String),
      fc.constantFrom('-1', '0', '99999999999999999999', '9223372036854775807', '9223372036854775808', '1.5', '1e3', ' 1', 'x'),
      hostileString,
    );
    const ctx: Contextual = {
      id: endpointId,
      endpointId,
      projectId: fc.constantFrom(project.id, project.id, bobProject.id, 'prj_0000fuzz000000'),
      teamId: fc.constantFrom(alice.teamId, bob.teamId, 'team_0000fuzz000000'),
      userId: fc.constantFrom(bob.user.id, 'usr_0000fuzz000000'),
      user: fc.constantFrom(bob.user.id, bob.user.email, 'nobody@example.com'),
      hfModelRepo: validRepo,
      instanceOptionId: fc.constantFrom(...INSTANCE_IDS),
      wandbArtifactVersionName: validArtifactName,
      name: validName,
      email: fc.constantFrom('fuzz@example.com', 'not-an-email'),
      after: cursor,
      first: fc.integer({ min: -2, max: 102 }),
      model: fc.constantFrom(MISSING_ENDPOINT, seeded.bobs),
      role: fc.constantFrom('user', 'system', 'assistant', 'tool'),
      versionIndex: fc.integer({ min: -2, max: 6 }),
    };
    const fieldCtx: Record<string, Contextual> = {
      // Acting on the seeded world for good would leave the other runs nothing to act on.
      deleteEndpoint: { id: missingIds },
      revokeApiKey: { id: missingIds },
      endpointStatus: { after: eventId },
      endpointEvents: { after: eventId },
    };
    return { ctx, fieldCtx };
  }

  type Transport = 'post' | 'get' | 'post-sse' | 'get-sse';

  interface GraphQLParams {
    query: unknown;
    variables?: unknown;
    operationName?: unknown;
    extensions?: unknown;
  }

  /** Sends an operation; refused mutations (and anything over GET) must not write. */
  async function graphqlRequest(
    transport: Transport,
    c: Caller,
    params: GraphQLParams | GraphQLParams[],
    encoding: BodyEncoding = { kind: 'json' },
    type: string | undefined = 'application/json',
    subscription = false,
  ): Promise<Answer> {
    const sseWaitMs = subscription ? 100 : 2_000;
    const headers = callerHeaders(c);
    if (transport.endsWith('sse')) headers.accept = 'text/event-stream';
    const before = await countsBefore();
    let answer: Answer;
    let label: string;
    const defined = (p: GraphQLParams) => Object.fromEntries(Object.entries(p).filter(([, v]) => v !== undefined));
    if (transport.startsWith('get')) {
      const qs = Object.entries(Array.isArray(params) ? params[0]! : params)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => `${k}=${pctEncode(typeof v === 'string' ? v : toJsonText(v))}`)
        .join('&');
      label = `GET /graphql?${qs}`;
      answer = await send('GET', `/graphql?${qs}`, headers, undefined, sseWaitMs);
    } else {
      if (type !== undefined) headers['content-type'] = type;
      const body = encodeBody(Array.isArray(params) ? params.map(defined) : defined(params), encoding);
      label = `POST /graphql ${snippet(body.toString('utf8'))}`;
      answer = await send('POST', '/graphql', headers, body, sseWaitMs);
    }
    expectSound(answer, label);
    if (transport.startsWith('get') || answer.status >= 400 || !SUCCEEDED.test(answer.text)) {
      expectNoNewRows(before, await countsAfter(), `${answer.status} from ${label}: ${snippet(answer.text)}`);
    }
    return answer;
  }

  test('GraphQL: every root field with generated variables, over POST, GET and SSE', { timeout: TEST_TIMEOUT_MS }, async () => {
    const { ctx, fieldCtx } = graphqlContext();
    const op = fc.oneof(
      { arbitrary: operation('query', ctx, fieldCtx), weight: 3 },
      { arbitrary: operation('mutation', ctx, fieldCtx), weight: 5 },
      { arbitrary: operation('subscription', ctx, fieldCtx), weight: 2 },
    );
    const arb = fc.record({
      caller,
      op,
      transport: fc.constantFrom<Transport>('post', 'post', 'post', 'get', 'post-sse', 'get-sse'),
      variablesAs: fc.constantFrom('object', 'object', 'object', 'string', 'array', 'null'),
    });
    await check(1307, 500, arb, async ({ caller: c, op, transport, variablesAs }) => {
      const variables =
        variablesAs === 'object'
          ? op.variables
          : variablesAs === 'string'
            ? JSON.stringify(op.variables)
            : variablesAs === 'array'
              ? [op.variables]
              : null;
      await graphqlRequest(
        transport,
        c,
        { query: op.query, variables, operationName: op.operationName },
        undefined,
        undefined,
        op.kind === 'subscription',
      );
    });
  });

  test('GraphQL: broken documents and malformed request bodies', { timeout: TEST_TIMEOUT_MS }, async () => {
    const { ctx, fieldCtx } = graphqlContext();
    const anyOp = fc.oneof(
      operation('query', ctx, fieldCtx),
      operation('mutation', ctx, fieldCtx),
      operation('subscription', ctx, fieldCtx),
    );
    const document = fc.oneof(
      {
        arbitrary: fc
          .tuple(anyOp, fc.array(documentCorruption, { minLength: 1, maxLength: 3 }))
          .map(([op, cs]) => ({ query: cs.reduce(corrupt, op.query), variables: op.variables as unknown })),
        weight: 6,
      },
      { arbitrary: tokenSoup.map((query) => ({ query, variables: undefined as unknown })), weight: 2 },
      {
        arbitrary: fc.tuple(wrongValue, fc.option(wrongValue, { nil: undefined })).map(([query, variables]) => ({ query, variables })),
        weight: 1,
      },
      { arbitrary: anyOp.map((op) => ({ query: op.query, variables: wrongVariables(op) })), weight: 2 },
    );
    const arb = fc.record({
      caller,
      document,
      operationName: fc.option(fc.oneof(fc.constantFrom('Op', 'Nope'), hostileString, anyJson), { freq: 3, nil: undefined }),
      extensions: fc.option(fc.oneof(anyJson, fc.constant({ persistedQuery: { version: 1, sha256Hash: 'abc' } })), {
        freq: 4,
        nil: undefined,
      }),
      transport: fc.constantFrom<Transport>('post', 'post', 'post', 'get', 'post-sse'),
      encoding: bodyEncoding,
      contentType: fc.oneof({ arbitrary: contentType, weight: 3 }, { arbitrary: fc.constant('application/graphql'), weight: 1 }),
      batch: fc.boolean(),
    });
    await check(
      1308,
      400,
      arb,
      async ({ caller: c, document, operationName, extensions, transport, encoding, contentType: type, batch }) => {
        const params = { query: document.query, variables: document.variables, operationName, extensions };
        await graphqlRequest(
          transport,
          c,
          batch && transport === 'post' ? [params, params] : params,
          encoding,
          type,
          isSubscription(document.query, operationName),
        );
      },
    );
  });

  /** Whether a document is a valid subscription (whose SSE stream may rightly stay open and silent). */
  function isSubscription(query: unknown, operationName: unknown): boolean {
    if (typeof query !== 'string') return false;
    try {
      const document = parse(query);
      const name = typeof operationName === 'string' && operationName !== '' ? operationName : undefined;
      return getOperationAST(document, name)?.operation === 'subscription';
    } catch {
      return false;
    }
  }

  /** Variables of the wrong shape for an operation: each replaced by a hostile value. */
  function wrongVariables(op: GraphQLOperation): Record<string, unknown> {
    return Object.fromEntries(Object.keys(op.variables).map((k, i) => [k, [2 ** 31, -1.5, '', '\u0000', { a: 1 }, [[[]]], true][i % 7]]));
  }

  test('GraphQL: deep nesting, many aliases, directives and fragments', { timeout: TEST_TIMEOUT_MS }, async () => {
    // Cheap fields, and fields that cost the database a statement or more per alias.
    const aliasField = fc.oneof(
      { arbitrary: fc.constantFrom('__typename', 'me { user { id } }', 'instanceOptions { id gpuType }'), weight: 1 },
      {
        arbitrary: fc.constantFrom(
          'endpoints(first: 100) { nodes { id versions(first: 100) { nodes { versionIndex spec { name } } } } }',
          `endpoint(id: "${'$ID'}") { versions(first: 100) { edges { cursor node { creator { email } } } } }`,
          'teams { members { user { email } } projects { name } }',
        ),
        weight: 3,
      },
    );
    const shape = fc.oneof(
      fc.record({ kind: fc.constant('nested-selection' as const), n: fc.constantFrom(5, 30, 200, 2_000) }),
      fc.record({ kind: fc.constant('nested-fragments' as const), n: fc.constantFrom(10, 300, 5_000) }),
      fc.record({ kind: fc.constant('deep-list-argument' as const), n: fc.constantFrom(10, 1_000, 20_000) }),
      fc.record({ kind: fc.constant('deep-object-argument' as const), n: fc.constantFrom(10, 1_000, 20_000) }),
      fc.record({ kind: fc.constant('aliases' as const), n: fc.constantFrom(50, 500, 2_000), field: aliasField }),
      fc.record({ kind: fc.constant('aliases' as const), n: fc.constantFrom(500, 2_000), field: aliasField }),
      fc.record({ kind: fc.constant('directives' as const), n: fc.constantFrom(10, 1_000, 10_000) }),
      fc.record({ kind: fc.constant('fragment-bomb' as const), n: fc.constantFrom(5, 15, 30) }),
      fc.record({ kind: fc.constant('fragment-cycle' as const), n: fc.constantFrom(2, 50) }),
      fc.record({ kind: fc.constant('many-operations' as const), n: fc.constantFrom(10, 1_000) }),
      fc.record({ kind: fc.constant('tokens' as const), n: fc.constantFrom(1_000, 50_000) }),
      fc.record({ kind: fc.constant('deep-variables' as const), n: fc.constantFrom(100, 10_000, 50_000) }),
    );
    const arb = fc.record({ shape, transport: fc.constantFrom<Transport>('post', 'post', 'get') });
    await check(1309, 60, arb, async ({ shape, transport }) => {
      const params = deepDocument(shape);
      await graphqlRequest(transport, { auth: 'alice', teamHeader: 'x-team-id' }, params);
    });
  });

  function deepDocument(shape: { kind: string; n: number; field?: string }): { query: string; variables?: unknown } {
    const { n } = shape;
    switch (shape.kind) {
      case 'nested-selection':
        return { query: `{ me { defaultTeam { ${'projects { team { '.repeat(n)}id${' } }'.repeat(n)} } } }` };
      case 'nested-fragments':
        return { query: `{ ${'... on Query { '.repeat(n)}__typename${' }'.repeat(n)} }` };
      case 'deep-list-argument':
        return { query: `{ endpoints(projectId: ${'['.repeat(n)}"x"${']'.repeat(n)}) { nodes { id } } }` };
      case 'deep-object-argument':
        return {
          query: `mutation { createChatCompletion(input: { model: "${MISSING_ENDPOINT}", messages: [], chatTemplateKwargs: ${'{ a: '.repeat(n)}1${' }'.repeat(n)} }) { __typename } }`,
        };
      case 'aliases':
        return { query: `{ ${Array.from({ length: n }, (_, i) => `a${i}: ${shape.field!.replace('$ID', seeded.hub[0]!)}`).join(' ')} }` };
      case 'directives':
        return { query: `{ me ${'@include(if: true) '.repeat(n)}{ user { id } } }` };
      case 'fragment-bomb': {
        const fragments = Array.from({ length: n }, (_, i) =>
          i === 0
            ? 'fragment F0 on Query { me { user { id email } } instanceOptions { id } }'
            : `fragment F${i} on Query { ...F${i - 1} ...F${i - 1} me { user { id } } }`,
        );
        return { query: `{ ...F${n - 1} } ${fragments.join(' ')}` };
      }
      case 'fragment-cycle': {
        const fragments = Array.from({ length: n }, (_, i) => `fragment C${i} on Query { ...C${(i + 1) % n} __typename }`);
        return { query: `{ ...C0 } ${fragments.join(' ')}` };
      }
      case 'many-operations':
        return { query: Array.from({ length: n }, (_, i) => `query Q${i} { __typename }`).join(' ') };
      case 'tokens':
        return { query: `{ ${'__typename '.repeat(n)}}` };
      case 'deep-variables':
        return {
          query: `mutation($input: ChatCompletionInput!) { createChatCompletion(input: $input) { __typename ... on ChatCompletionError { status code } } }`,
          variables: { input: { model: MISSING_ENDPOINT, messages: [{ role: 'user', content: 'hi' }], chatTemplateKwargs: deepValue(n) } },
        };
      default:
        throw new Error(`unknown shape ${shape.kind}`);
    }
  }

  /** Objects and arrays nested n deep, alternately, as JSON text. */
  function deepValue(n: number): RawJson {
    const open = Array.from({ length: n }, (_, i) => (i % 2 ? '[' : '{"a":')).join('');
    const close = Array.from({ length: n }, (_, i) => (i % 2 ? ']' : '}'))
      .reverse()
      .join('');
    return raw(`${open}1${close}`);
  }

  // -------------------------------------------------------------------------
  // Raw HTTP over sockets.

  interface RawOutcome {
    status: number | null;
    head: string;
    /** The connection ended (FIN or reset) before any status line. */
    closed: 'end' | 'reset' | null;
  }

  function rawExchange(bytes: Buffer, label: string): Promise<RawOutcome> {
    stats.raw++;
    const { port, hostname } = new URL(t.url);
    return bounded(
      label,
      (signal) =>
        new Promise<RawOutcome>((resolve) => {
          const socket = net.connect(Number(port), hostname);
          let received = Buffer.alloc(0);
          let done = false;
          const finish = (outcome: RawOutcome) => {
            if (done) return;
            done = true;
            socket.destroy();
            resolve(outcome);
          };
          signal.addEventListener('abort', () => socket.destroy());
          socket.on('connect', () => socket.write(bytes, () => {}));
          socket.on('data', (chunk: Buffer) => {
            received = Buffer.concat([received, chunk]);
            // Skip interim answers (100 Continue) up to the final one.
            let text = received.toString('latin1');
            for (;;) {
              const line = /^HTTP\/1\.[01] (\d{3})[^\r\n]*\r\n/.exec(text);
              if (!line) {
                if (text.length > 64 && !text.startsWith('HTTP/')) finish({ status: -1, head: text.slice(0, 200), closed: null });
                return;
              }
              const status = Number(line[1]);
              if (status >= 200 || status === 101) return finish({ status, head: text.slice(0, 200), closed: null });
              const end = text.indexOf('\r\n\r\n');
              if (end < 0) return;
              text = text.slice(end + 4);
              received = Buffer.from(text, 'latin1');
            }
          });
          socket.on('end', () => finish({ status: null, head: received.toString('latin1').slice(0, 200), closed: 'end' }));
          socket.on('close', () => finish({ status: null, head: received.toString('latin1').slice(0, 200), closed: 'end' }));
          socket.on('error', () => finish({ status: null, head: received.toString('latin1').slice(0, 200), closed: 'reset' }));
        }),
    );
  }

  interface Part {
    text: string;
    /** HTTP that Node's parser refuses (it answers 400 itself, or closes). */
    malformed?: boolean;
  }

  const ok = (text: string): Part => ({ text });
  const bad = (text: string): Part => ({ text, malformed: true });

  test('raw HTTP: odd request lines, targets, methods, headers and framing', { timeout: TEST_TIMEOUT_MS }, async () => {
    const method = fc.oneof(
      { arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH').map(ok), weight: 8 },
      { arbitrary: fc.constantFrom('TRACE', 'PROPFIND', 'QUERY', 'SEARCH', 'PURGE', 'LINK').map(ok), weight: 2 },
      { arbitrary: fc.constantFrom('CONNECT').map(ok), weight: 1 },
      // Not PRI: Node's parser (llhttp) holds a "PRI <target> HTTP/1.1" request while it waits for the rest of an HTTP/2
      // preface, until headersTimeout, whatever the server does; a plain http.Server does the same.
      { arbitrary: fc.constantFrom('get', 'FOO', 'G ET', 'GET\u0000', '', 'M-SEARCH2', 'A'.repeat(2_000), 'GÉT').map(bad), weight: 2 },
    );
    const path = fc.oneof(
      fc.constantFrom(
        '/',
        '/healthz',
        '/readyz',
        '/graphql',
        '/dedicated/',
        '/dedicated/beta/endpoint',
        `/dedicated/beta/endpoint/${'{id}'}`,
        '/dedicated/v1/chat/completions',
        '/dedicated/endpoint/wandb-artifact-create',
        '/nope',
      ),
      urlPiece.map((p) => `/dedicated/beta/endpoint/${p}`),
      urlPiece.map((p) => `/dedicated/beta/endpoint/${p}/version?cursor=${p}&limit=${p}`),
      urlPiece.map((p) => `/graphql?query=${p}`),
    );
    const target = fc.oneof(
      { arbitrary: path.map(ok), weight: 6 },
      {
        arbitrary: fc
          .constantFrom(
            '//',
            '//[',
            '//[::1',
            '//[::1]',
            '//%',
            '///',
            '//a',
            '//a/dedicated/beta/endpoint',
            '//[/graphql',
            '/\\',
            '\\',
            '/..',
            '/../../etc/passwd',
            '/./dedicated/beta/endpoint',
            '/dedicated/beta/endpoint/..%2f..%2f',
            '*',
            '?',
            '?%',
            '/?%',
            '/healthz?%',
            '/graphql?%',
            '/graphql?query=%',
            '/graphql?query=%7B&variables=%',
            '/dedicated/beta/endpoint?limit=%',
            '/dedicated/beta/endpoint/%',
            '/dedicated/beta/endpoint/%zz/status',
            '/dedicated/beta/endpoint/%E0%A4%A',
            '/dedicated/beta/endpoint/%ED%A0%80',
            '/dedicated/beta/endpoint/%00',
            '/dedicated/beta/endpoint/%C0%80/restart',
            '/#frag',
            '/dedicated/beta/endpoint#x',
            '/%2e%2e/dedicated',
            '/dedicated/beta/endpoint/a%2Fb/status',
          )
          .map(ok),
        weight: 6,
      },
      {
        arbitrary: fc
          .constantFrom(
            'http://evil.example/dedicated/beta/endpoint',
            'http://gateway/graphql',
            'https://x/healthz',
            'http://[/',
            'http://[::1]/healthz',
            'http://a:b@c/',
            'http:///x',
            'ftp://x/',
            'http://%/',
            'http://x:99999/',
            'javascript:alert(1)',
            'file:///etc/passwd',
            'http://x/%',
            'mailto:x',
            'a:b',
          )
          .map(ok),
        weight: 3,
      },
      { arbitrary: fc.constantFrom('example.com:443', 'localhost:80', '[::1]:443', 'x:', ':1').map(ok), weight: 2 },
      { arbitrary: fc.constantFrom(200, 9_000, 70_000).map((n) => ok(`/dedicated/beta/endpoint/${'a'.repeat(n)}`)), weight: 1 },
      { arbitrary: fc.constantFrom(70_000).map((n) => ok(`/graphql?query=${'%7B'.repeat(n / 3)}`)), weight: 1 },
      { arbitrary: fc.constantFrom('/ x', '/\u0000', '/\t', '/\u007f', '/é', '', '/a b/c').map(bad), weight: 2 },
    );
    const version = fc.oneof(
      { arbitrary: fc.constant(ok('HTTP/1.1')), weight: 10 },
      { arbitrary: fc.constant(ok('HTTP/1.0')), weight: 2 },
      {
        arbitrary: fc
          .constantFrom('HTTP/2.0', 'HTTP/0.9', 'HTTP/1.1 x', 'http/1.1', 'HTTP/1.12', 'HTTP/9.9', '', 'HTTP/1.1\u0000', 'HTTPS/1.1')
          .map(bad),
        weight: 2,
      },
    );
    const header = fc.oneof(
      { arbitrary: fc.constant(ok('authorization: Bearer $KEY')), weight: 4 },
      {
        arbitrary: fc
          .constantFrom(
            'authorization: Bearer',
            'authorization: Bearer dek_x',
            'authorization: Basic Og==',
            'authorization: Bearer $KEY $KEY',
            'x-friendli-team: $TEAM',
            'x-team-id: team_0000',
            'x-friendli-team: ',
            'accept: text/event-stream',
            'accept: */*',
            'accept: application/graphql-response+json',
            'content-type: application/json',
            'content-type: text/plain',
            'content-type: multipart/form-data; boundary=x',
            'content-type: application/x-www-form-urlencoded',
            'content-type: ',
            'expect: 100-continue',
            'expect: 200-ok',
            'connection: close',
            'connection: keep-alive',
            'connection: upgrade',
            'upgrade: websocket',
            'upgrade: h2c',
            'sec-websocket-version: 13',
            'sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==',
            'sec-websocket-protocol: graphql-transport-ws',
            'sec-websocket-version: 99',
            'origin: http://evil.example',
            'host: ',
            'host: [',
            'host: a b',
            'host: x:99999',
            'x-forwarded-for: 1.2.3.4',
            'cookie: a=b',
            'range: bytes=0-1',
            'if-none-match: *',
            'content-encoding: gzip',
            'accept-encoding: br',
          )
          .map(ok),
        weight: 6,
      },
      { arbitrary: headerSafeString.map((v) => ok(`x-friendli-team: ${v}`)), weight: 1 },
      { arbitrary: fc.constantFrom(2_000, 20_000).map((n) => ok(`x-long: ${'a'.repeat(n)}`)), weight: 1 },
      {
        arbitrary: fc
          .constantFrom(
            'no-colon',
            'bad name: x',
            ': empty-name',
            'x-nul: a\u0000b',
            'x-fold: a\r\n folded',
            'x-cr: a\rb',
            'content-length: -1',
            'content-length: 1e3',
            'content-length: 99999999999999999999',
            'transfer-encoding: gzip',
            'transfer-encoding: chunked, chunked',
            'x-é: 1',
          )
          .map(bad),
        weight: 2,
      },
      { arbitrary: fc.integer({ min: 0x80, max: 0xff }).map((c) => ok(`x-friendli-team: team_${String.fromCharCode(c)}`)), weight: 1 },
    );
    const framing = fc.oneof(
      { arbitrary: fc.constant('none' as const), weight: 3 },
      { arbitrary: fc.constant('length' as const), weight: 5 },
      { arbitrary: fc.constant('chunked' as const), weight: 2 },
      {
        arbitrary: fc.constantFrom('bad-chunks' as const, 'length-and-chunked' as const, 'two-lengths' as const, 'extra-bytes' as const),
        weight: 1,
      },
    );
    const body = fc.oneof(
      anyJson.map((v) => Buffer.from(toJsonText(v), 'utf8')),
      fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
      fc.constant(Buffer.from(JSON.stringify(createBody('$PROJECT', { name: 'raw' })), 'utf8')),
    );
    const arb = fc.record({
      method,
      target,
      version,
      headers: fc.array(header, { maxLength: 6 }),
      framing,
      body,
      host: fc.constantFrom(true, true, true, false),
      close: fc.boolean(),
    });
    await check(1310, 400, arb, async (r) => {
      const endpointId = seeded.hub[0]!;
      const fill = (s: string) =>
        s.replaceAll('$KEY', alice.key).replaceAll('$TEAM', alice.teamId).replaceAll('$PROJECT', project.id).replaceAll('{id}', endpointId);
      const lines: string[] = [`${r.method.text} ${fill(r.target.text)} ${r.version.text}`];
      let malformed = Boolean(r.method.malformed || r.target.malformed || r.version.malformed);
      if (r.host) lines.push('host: gateway');
      for (const h of r.headers) {
        lines.push(fill(h.text));
        malformed ||= Boolean(h.malformed);
      }
      // The body as JSON, and a create body for a project of the seeded user.
      const payload = Buffer.from(r.body.toString('latin1').replace('$PROJECT', project.id), 'latin1');
      let bodyBytes = Buffer.alloc(0);
      switch (r.framing) {
        case 'length':
          lines.push(`content-length: ${payload.length}`);
          bodyBytes = payload;
          break;
        case 'chunked':
          lines.push('transfer-encoding: chunked');
          bodyBytes = Buffer.concat([Buffer.from(`${payload.length.toString(16)}\r\n`), payload, Buffer.from('\r\n0\r\n\r\n')]);
          if (payload.length === 0) bodyBytes = Buffer.from('0\r\n\r\n');
          break;
        case 'bad-chunks':
          lines.push('transfer-encoding: chunked');
          bodyBytes = Buffer.from('zz\r\nhello\r\n0\r\n\r\n');
          malformed = true;
          break;
        case 'length-and-chunked':
          lines.push(`content-length: ${payload.length}`, 'transfer-encoding: chunked');
          bodyBytes = Buffer.concat([Buffer.from(`${payload.length.toString(16)}\r\n`), payload, Buffer.from('\r\n0\r\n\r\n')]);
          malformed = true;
          break;
        case 'two-lengths':
          lines.push(`content-length: ${payload.length}`, `content-length: ${payload.length + 1}`);
          bodyBytes = payload;
          malformed = true;
          break;
        case 'extra-bytes':
          // More bytes than announced: the rest reads as a second (garbage) request on the same connection.
          lines.push(`content-length: ${Math.max(0, payload.length - 1)}`);
          bodyBytes = Buffer.concat([payload, Buffer.from('GARBAGE\r\n\r\n')]);
          break;
      }
      // Two Content-Length headers, or one beside chunked framing, are malformed whatever the framing picked.
      const lengths = lines.filter((l) => /^content-length:/i.test(l)).length;
      if (lengths > 1 || (lengths === 1 && lines.some((l) => /^transfer-encoding:/i.test(l)))) malformed = true;
      if (lines.some((l) => /^transfer-encoding:/i.test(l)) && r.framing !== 'chunked' && r.framing !== 'bad-chunks') malformed = true;
      // Node refuses a request without Host (HTTP/1.1), and headers past its 16 KiB limit.
      if (!r.host && r.version.text === 'HTTP/1.1') malformed = true;
      if (lines.join('\r\n').length > 16_000) malformed = true;
      if (r.close) lines.push('connection: close');
      const head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
      const bytes = Buffer.concat([head, bodyBytes]);
      const label = `raw ${describeCase(bytes.toString('latin1'))}`;

      const before = await countsBefore();
      const outcome = await rawExchange(bytes, label);
      if (outcome.status === -1) throw new Error(`not an HTTP answer (${JSON.stringify(outcome.head)}) to ${label}`);
      if (outcome.status === null && !malformed)
        throw new Error(`the connection was ${outcome.closed === 'reset' ? 'reset' : 'closed'} without an answer to ${label}`);
      if (outcome.status !== null && outcome.status >= 500)
        throw new Error(`${outcome.status} (${JSON.stringify(outcome.head)}) from ${label}`);
      if (outcome.status === null || outcome.status >= 400)
        expectNoNewRows(before, await countsAfter(), `${outcome.status ?? 'no answer'} from ${label}`);
    });
  });

  // -------------------------------------------------------------------------
  // graphql-ws frames.

  type Frame =
    | {
        kind: 'subscribe';
        id: string;
        op: GraphQLOperation;
        shape: 'normal' | 'corrupted' | 'query-not-string' | 'variables-wrong' | 'extra-keys' | 'no-payload';
        corruption?: unknown;
        junk?: unknown;
      }
    | { kind: 'complete'; id: string }
    | { kind: 'ping' | 'pong'; payload: unknown }
    | { kind: 'json'; value: unknown }
    | { kind: 'text'; text: string }
    | { kind: 'binary'; bytes: Uint8Array }
    | { kind: 'invalid-utf8' }
    | { kind: 'init-again' };

  test('graphql-ws: random frames and subscribe messages with random payloads', { timeout: TEST_TIMEOUT_MS }, async () => {
    const { ctx, fieldCtx } = graphqlContext();
    const op = fc.oneof(
      { arbitrary: operation('subscription', ctx, fieldCtx), weight: 3 },
      { arbitrary: operation('query', ctx, fieldCtx), weight: 3 },
      { arbitrary: operation('mutation', ctx, fieldCtx), weight: 2 },
    );
    const id = fc.oneof({ arbitrary: fc.constantFrom('1', '2', '3'), weight: 6 }, { arbitrary: hostileString, weight: 1 });
    const frame: fc.Arbitrary<Frame> = fc.oneof(
      {
        arbitrary: fc.record({
          kind: fc.constant('subscribe' as const),
          id,
          op,
          shape: fc.constantFrom(
            'normal',
            'normal',
            'normal',
            'normal',
            'corrupted',
            'corrupted',
            'corrupted',
            'query-not-string',
            'variables-wrong',
            'extra-keys',
            'no-payload',
          ) as fc.Arbitrary<'normal'>,
          corruption: documentCorruption,
          junk: wrongValue,
        }),
        weight: 14,
      },
      { arbitrary: fc.record({ kind: fc.constant('complete' as const), id }), weight: 3 },
      {
        arbitrary: fc.record({ kind: fc.constantFrom('ping' as const, 'pong' as const), payload: fc.option(anyJson, { nil: undefined }) }),
        weight: 1,
      },
      { arbitrary: fc.record({ kind: fc.constant('json' as const), value: anyJson }), weight: 1 },
      { arbitrary: fc.record({ kind: fc.constant('text' as const), text: hostileString }), weight: 1 },
      { arbitrary: fc.record({ kind: fc.constant('binary' as const), bytes: fc.uint8Array({ maxLength: 32 }) }), weight: 1 },
      { arbitrary: fc.constant({ kind: 'invalid-utf8' as const }), weight: 1 },
      { arbitrary: fc.constant({ kind: 'init-again' as const }), weight: 1 },
    );
    const init = fc.oneof(
      { arbitrary: fc.constant({ kind: 'alice' as const }), weight: 10 },
      {
        arbitrary: fc.constantFrom(
          { kind: 'none' as const },
          { kind: 'no-payload' as const },
          { kind: 'wrong-key' as const },
          { kind: 'bob-team' as const },
        ),
        weight: 2,
      },
      { arbitrary: fc.record({ kind: fc.constant('payload' as const), payload: anyJson }), weight: 1 },
    );
    const arb = fc.record({
      init,
      frames: fc.array(frame, { minLength: 1, maxLength: 8 }),
      protocol: fc.oneof(
        { arbitrary: fc.constant('graphql-transport-ws'), weight: 8 },
        { arbitrary: fc.constantFrom('graphql-ws', ''), weight: 1 },
      ),
    });
    // A session whose socket closed with a valid mutation in flight: its write may land after its own check settled.
    let earlierUnsettled = false;
    await check(1311, 250, arb, async ({ init, frames, protocol }) => {
      const before = earlierUnsettled ? await settledCounts() : await countsBefore();
      const { messages, unsettled } = await wsSession(init, frames, protocol);
      // A mutation that succeeded may still be writing (its answer can come before every row is visible).
      earlierUnsettled = unsettled || messages.some((m) => SUCCEEDED.test(m));
      // A valid mutation sent before the socket closed (a later frame broke the protocol) still runs; its outcome is unknown
      // here. Its writes are waited for before the next session counts (earlierUnsettled), not twice.
      if (!unsettled && !messages.some((m) => SUCCEEDED.test(m)))
        expectNoNewRows(
          before,
          await countsAfter(),
          `graphql-ws session ${describeCase({ init, frames })}: ${snippet(messages.join(' '))}`,
        );
    });
  });

  /** The subscribe message of a frame, and whether the server must answer it (a query, a mutation, or a document that does not validate). */
  function subscribeMessage(frame: Extract<Frame, { kind: 'subscribe' }>): { message: unknown; mustAnswer: boolean; mutation: boolean } {
    const payload: Record<string, unknown> = { query: frame.op.query, variables: frame.op.variables };
    if (frame.op.operationName !== undefined) payload.operationName = frame.op.operationName;
    switch (frame.shape) {
      case 'corrupted':
        payload.query = corrupt(frame.op.query, frame.corruption as never);
        break;
      case 'query-not-string':
        payload.query = frame.junk;
        break;
      case 'variables-wrong':
        payload.variables = frame.junk;
        break;
      case 'extra-keys':
        payload.extensions = frame.junk;
        break;
      case 'no-payload':
        return { message: { id: frame.id, type: 'subscribe' }, mustAnswer: false, mutation: false };
    }
    // Shapes graphql-ws itself refuses close the socket (4400): nothing to answer.
    const isObj = (v: unknown) => v === undefined || v === null || (typeof v === 'object' && !Array.isArray(v));
    const wellFormed =
      typeof payload.query === 'string' &&
      isObj(payload.variables) &&
      isObj(payload.extensions) &&
      frame.id !== '' &&
      (payload.operationName === undefined || typeof payload.operationName === 'string');
    let mustAnswer = wellFormed;
    let mutation = false;
    if (wellFormed) {
      try {
        const document = parse(payload.query as string);
        const operation = getOperationAST(document, (payload.operationName as string | undefined) || undefined);
        const valid = validate(printedSchema, document).length === 0 && operation !== null;
        // A valid subscription may stay silent until an event comes.
        mustAnswer = !valid || operation?.operation !== 'subscription';
        mutation = valid && operation?.operation === 'mutation';
      } catch (error) {
        if (!(error instanceof GraphQLError)) throw error;
      }
    }
    return { message: { id: frame.id, type: 'subscribe', payload }, mustAnswer, mutation };
  }

  /** One graphql-ws connection: init, the frames, then waits for the answers it must get; returns every message received. */
  function wsSession(
    init: { kind: 'alice' | 'none' | 'no-payload' | 'wrong-key' | 'bob-team' | 'payload'; payload?: unknown },
    frames: Frame[],
    protocol: string,
  ): Promise<{ messages: string[]; unsettled: boolean }> {
    stats.wsConnections++;
    const label = `graphql-ws session ${describeCase({ protocol, init, frames })}`;
    return bounded(label, async (signal) => {
      const ws = new WebSocket(`${t.url.replace('http', 'ws')}/graphql`, protocol ? [protocol] : []);
      signal.addEventListener('abort', () => ws.terminate());
      const messages: string[] = [];
      const pending = new Set<string>();
      // Mutations sent whose outcome has not come back may still write after the socket closes. Per id, in the order sent, whether each operation still unanswered is a mutation: a client may reuse an id once
      // its operation ended, and the server's complete for the first must not settle the second.
      const mutations = new Map<string, boolean[]>();
      // A mutation the client completed before its answer: the server answers nothing more for it, and it may still write.
      let abandoned = false;
      let closedBy: { code: number; reason: string; byUs: boolean } | null = null;
      let closingByUs = false;
      let acked = false;
      let progress: () => void = () => {};
      const changed = () => new Promise<void>((resolve) => (progress = resolve));
      ws.on('message', (data) => {
        const text = String(data);
        messages.push(text);
        try {
          const m = JSON.parse(text) as { type?: string; id?: string };
          if (m.type === 'connection_ack') acked = true;
          if ((m.type === 'error' || m.type === 'complete') && m.id !== undefined) {
            pending.delete(m.id);
            mutations.get(m.id)?.shift();
          }
        } catch {
          // not ours to judge here
        }
        progress();
      });
      ws.on('close', (code, reason) => {
        closedBy = { code, reason: reason.toString(), byUs: closingByUs };
        progress();
      });
      ws.on('error', () => progress());
      await new Promise<void>((resolve) => {
        ws.once('open', () => resolve());
        ws.once('close', () => resolve());
        ws.once('error', () => resolve());
      });
      const open = () => ws.readyState === WebSocket.OPEN;
      const sendText = (text: string) => {
        stats.wsFrames++;
        if (open()) ws.send(text);
      };

      if (open() && init.kind !== 'none') {
        const payload =
          init.kind === 'alice'
            ? { authorization: `Bearer ${alice.key}` }
            : init.kind === 'wrong-key'
              ? { authorization: 'Bearer dek_wrong' }
              : init.kind === 'bob-team'
                ? { authorization: `Bearer ${alice.key}`, 'x-friendli-team': bob.teamId }
                : init.kind === 'payload'
                  ? init.payload
                  : undefined;
        sendText(JSON.stringify(payload === undefined ? { type: 'connection_init' } : { type: 'connection_init', payload }));
        while (open() && !acked && closedBy === null) await changed();
      }
      for (const frame of frames) {
        if (!open()) break;
        switch (frame.kind) {
          case 'subscribe': {
            const { message, mustAnswer, mutation } = subscribeMessage(frame);
            if (mustAnswer && acked) pending.add(frame.id);
            if (acked) mutations.set(frame.id, [...(mutations.get(frame.id) ?? []), mutation]);
            sendText(toJsonText(message));
            break;
          }
          case 'complete':
            pending.delete(frame.id);
            // Its operation in flight gets no answer now: the next answer for this id is a later operation's.
            if (open() && mutations.get(frame.id)?.shift()) abandoned = true;
            sendText(JSON.stringify({ id: frame.id, type: 'complete' }));
            break;
          case 'ping':
          case 'pong':
            sendText(toJsonText(frame.payload === undefined ? { type: frame.kind } : { type: frame.kind, payload: frame.payload }));
            break;
          case 'json':
            sendText(toJsonText(frame.value));
            break;
          case 'text':
            sendText(frame.text);
            break;
          case 'binary':
            stats.wsFrames++;
            ws.send(Buffer.from(frame.bytes), { binary: true });
            break;
          case 'invalid-utf8':
            stats.wsFrames++;
            ws.send(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), { binary: false });
            break;
          case 'init-again':
            sendText(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${alice.key}` } }));
            break;
        }
        // Let the server see each frame on its own, as a client would send them.
        await new Promise((resolve) => setImmediate(resolve));
      }
      while (open() && pending.size > 0 && closedBy === null) await changed();
      // A moment for a late close (the answer to the last frame) before we close ourselves.
      if (open()) await Promise.race([changed(), sleep(20)]);
      if (closedBy === null) {
        closingByUs = true;
        ws.close(1000);
        while (closedBy === null) await changed();
      }
      const closed = closedBy as { code: number; reason: string; byUs: boolean };
      if (!closed.byUs && [4500, 1011, 1006].includes(closed.code)) {
        throw new Error(
          `the server closed the socket with ${closed.code} "${closed.reason}" after ${label}; it sent: ${snippet(messages.join(' '))}`,
        );
      }
      const masked = messages.find((m) => MASKED.test(m));
      if (masked) throw new Error(`a masked internal error in ${snippet(masked)} after ${label}`);
      return { messages, unsettled: abandoned || [...mutations.values()].some((sent) => sent.includes(true)) };
    });
  }

  // -------------------------------------------------------------------------

  test('the gateway is alive and threw nothing', async () => {
    const health = await send('GET', '/healthz', {});
    expect(health.status).toBe(200);
    expect(crashes).toEqual([]);
  });
});
