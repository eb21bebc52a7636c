/**
 * The authorization matrix (issue 31): every operation of the gateway, as
 * each principal that may not use a victim team's resources, gets the
 * documented refusal and changes no row.
 *
 * The operations are enumerated, not listed: every Query, Mutation and
 * Subscription field of schema.graphql (parsed with `buildSchema`), every
 * route of the REST router's table (`endpointRoutes(services).list()`), and
 * every route that src/http/rest dispatches by path (its `const *_PATH`
 * constants). Each needs a row in ./authorization-matrix.ts, which gives only
 * the arguments that name the victim's resource and, where it is not 404, the
 * refusal; an operation without a row fails the first tests, naming it.
 *
 * Principals: a member of another team; a member removed from the victim
 * team (without, and with, the victim team in the team header); someone the
 * victim team invited who has not accepted; a victim team member whose key
 * was revoked; no key. Their answers: 404 (or `null`, `NotFoundError`,
 * `NOT_FOUND`), 404, 403, 404, 401 and 401 (README "Authentication and
 * teams", "Errors"; docs/management-api.md; docs/chat-api.md). Every GraphQL
 * operation is sent over HTTP (subscriptions as SSE) and over graphql-ws
 * (where a refused key closes the socket 4401, a team header 4403).
 *
 * For each request: the answer holds no id or name of the victim's that the
 * request did not itself name, and a dump of every table (but the logs, see
 * the data file) is the same before and after. Then a control: the same
 * arguments sent by someone entitled (the victim's owner, unless the row
 * says) are not refused, so that no row passes by naming nothing real.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  buildSchema,
  getNamedType,
  isAbstractType,
  isLeafType,
  isNonNullType,
  type GraphQLField,
  type GraphQLObjectType,
  type GraphQLOutputType,
} from 'graphql';
import { beforeAll, describe, expect, test } from 'vitest';
import { endpointRoutes } from '../../src/http/rest/endpoint-routes.js';
import type { Principal } from '../../src/services/principal.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { openSocket } from '../support/live-clients.js';
import {
  GRAPHQL_MATRIX,
  IGNORED_COLUMNS,
  LOG_TABLES,
  REST_MATRIX,
  UNSELECTED_FIELDS,
  unique,
  type Caller,
  type Control,
  type GraphQLCase,
  type Refusal,
  type RestCase,
  type Victim,
} from './authorization-matrix.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const schema = buildSchema(readFileSync(path.join(ROOT, 'schema.graphql'), 'utf8'));
const ROOT_TYPES = [
  ['Query', 'query'],
  ['Mutation', 'mutation'],
  ['Subscription', 'subscription'],
] as const;
type Kind = (typeof ROOT_TYPES)[number][1];

/** Every root field of the printed schema: `Type.field`. */
const GRAPHQL_OPERATIONS = ROOT_TYPES.flatMap(([typeName, kind]) => {
  const type = schema.getType(typeName) as GraphQLObjectType | undefined;
  return type ? Object.values(type.getFields()).map((field) => ({ name: `${typeName}.${field.name}`, kind, field })) : [];
});

/** Routes that src/http/rest dispatches by path (server.ts compares the path with these constants). */
function dispatchedPaths(): string[] {
  const dir = path.join(ROOT, 'src/http/rest');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .flatMap((f) => [...readFileSync(path.join(dir, f), 'utf8').matchAll(/const [A-Z_]+_PATH = '([^']+)'/g)].map((m) => m[1]!));
}

const casesOf = <T>(row: T | T[]): T[] => (Array.isArray(row) ? row : [row]);

// ---------------------------------------------------------------------------
// The documents: the row's arguments as variables, and a selection of every field to depth 2 (enough to see a leak).

function selectionOf(type: GraphQLOutputType, depth: number): string {
  const named = getNamedType(type);
  if (isLeafType(named)) return '';
  if (isAbstractType(named)) {
    return `{ __typename ${schema
      .getPossibleTypes(named)
      .map((member) => `... on ${member.name} ${selectionOf(member, depth)}`)
      .join(' ')} }`;
  }
  const fields = Object.values((named as GraphQLObjectType).getFields()).filter(
    (f) =>
      f.args.every((a) => !isNonNullType(a.type) || a.defaultValue !== undefined) && !UNSELECTED_FIELDS.includes(`${named.name}.${f.name}`),
  );
  const parts = fields.flatMap((f) => {
    if (isLeafType(getNamedType(f.type))) return [f.name];
    return depth > 0 ? [`${f.name} ${selectionOf(f.type, depth - 1)}`] : [];
  });
  return `{ __typename ${parts.join(' ')} }`;
}

function documentOf(operation: string, kind: Kind, field: GraphQLField<unknown, unknown>, args: Record<string, unknown>): string {
  const unknown = Object.keys(args).filter((name) => !field.args.some((a) => a.name === name));
  if (unknown.length > 0) throw new Error(`the row of ${operation} names arguments the field does not take: ${unknown.join(', ')}`);
  const missing = field.args.filter((a) => isNonNullType(a.type) && a.defaultValue === undefined && !(a.name in args));
  if (missing.length > 0) throw new Error(`the row of ${operation} lacks required arguments: ${missing.map((a) => a.name).join(', ')}`);
  const used = field.args.filter((a) => a.name in args);
  const definitions = used.length > 0 ? `(${used.map((a) => `$${a.name}: ${String(a.type)}`).join(', ')})` : '';
  const call = used.length > 0 ? `(${used.map((a) => `${a.name}: $${a.name}`).join(', ')})` : '';
  return `${kind} Matrix${definitions} { ${field.name}${call} ${selectionOf(field.type, 2)} }`;
}

// ---------------------------------------------------------------------------
// Outcomes: what an answer amounts to.

type Outcome = 'unauthenticated' | 'forbidden' | 'not-found' | 'ok' | `other: ${string}`;

/** A GraphQL result for one root field. */
function graphqlOutcome(result: any, field: string): Outcome {
  // The root field's error (an error below it, in a nested field, is not the operation's answer).
  const error = result?.errors?.find((e: { path?: unknown[] }) => !e.path || e.path.length <= 1);
  if (error) {
    const { code, status } = error.extensions ?? {};
    if (code === 'UNAUTHENTICATED') return 'unauthenticated';
    if (code === 'FORBIDDEN' || status === 403) return 'forbidden';
    if (code === 'NOT_FOUND' || status === 404) return 'not-found';
    return `other: ${code ?? error.message}`;
  }
  const value = result?.data?.[field];
  // Queries answer null for what the caller cannot see.
  if (value === null) return 'not-found';
  if (value === undefined) return `other: no data for ${field}`;
  const typename: unknown = value.__typename;
  if (typename === 'NotFoundError') return 'not-found';
  if (typename === 'ForbiddenError') return 'forbidden';
  if (typename === 'ChatCompletionError') {
    if (value.status === 404) return 'not-found';
    if (value.status === 403) return 'forbidden';
    return `other: ChatCompletionError ${value.status}`;
  }
  if (typeof typename === 'string' && /Error$/.test(typename)) return `other: ${typename}`;
  return 'ok';
}

function httpOutcome(status: number): Outcome {
  if (status === 401) return 'unauthenticated';
  if (status === 403) return 'forbidden';
  if (status === 404) return 'not-found';
  if (status >= 200 && status < 300) return 'ok';
  return `other: ${status}`;
}

// ---------------------------------------------------------------------------
// The database: a dump of every table but the logs.

type Dump = Record<string, string[]>;
let dumpQuery: string;

async function prepareDump(): Promise<void> {
  const tables = await t.sql<{ name: string }[]>`
    SELECT table_name AS name FROM information_schema.tables
    WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`;
  const dumped = tables.map((r) => r.name).filter((name) => !LOG_TABLES.includes(name));
  for (const name of LOG_TABLES)
    expect(
      tables.map((r) => r.name),
      `log table ${name} no longer exists`,
    ).toContain(name);
  const columns = (name: string) => (IGNORED_COLUMNS[name] ?? []).map((c) => ` - '${c}'`).join('');
  dumpQuery = `SELECT ${dumped
    .map(
      (name) =>
        `(SELECT coalesce(array_agg(r ORDER BY r), '{}') FROM (SELECT (to_jsonb(x)${columns(name)})::text AS r FROM "${name}" x) s) AS "${name}"`,
    )
    .join(', ')}`;
}

async function dump(): Promise<Dump> {
  const [row] = await t.sql.unsafe(dumpQuery);
  return row as Dump;
}

/** The rows that differ (gone or new), each as `table: row`. */
function difference(before: Dump, after: Dump): string[] {
  const changed: string[] = [];
  for (const table of Object.keys(before)) {
    const was = new Set(before[table]);
    const now = new Set(after[table]);
    for (const row of before[table]!) if (!now.has(row)) changed.push(`${table} (gone): ${row}`);
    for (const row of after[table]!) if (!was.has(row)) changed.push(`${table} (new): ${row}`);
  }
  return changed;
}

// ---------------------------------------------------------------------------
// The victim, the principals, the requests.

let t: TestGateway;

async function principalOf(userId: string): Promise<Principal> {
  const principal = await t.services.identity.actAs(userId);
  if (!principal) throw new Error(`no user ${userId}`);
  return principal;
}

function ok<T>(result: { type: 'ok'; value: T } | { type: 'error'; error: { message: string } }): T {
  if (result.type === 'error') throw new Error(result.error.message);
  return result.value;
}

const endpointBody = (projectId: string) => ({
  projectId,
  name: unique('endpoint'),
  instanceOptionId: 'TwD5AqnBSVN0',
  advanced: {},
  hfModelRepo: 'org/tiny-model',
  autoscalingPolicy: { minReplica: 0, maxReplica: 1 },
});

/** A replica row, as the controller would have left it (no engine runs here). */
async function insertReplica(endpointId: string, state: 'STOPPED' | 'FAILED', lastError: string | null): Promise<string> {
  const id = unique('rep_victim').replace(/-/g, '');
  await t.sql`
    INSERT INTO replicas (id, endpoint_id, version_index, runtime, node, gpu_type, num_gpu, state, last_error, stopped_at)
    VALUES (${id}, ${endpointId}, 0, 'local', 'victim-node', 'H100', 1, ${state}, ${lastError}, now())`;
  return id;
}

async function newUser(options: { admin?: boolean } = {}) {
  const user = await t.seed.user(options);
  const principal = await principalOf(user.user.id);
  const project = ok(await t.services.identity.createProject(principal, { name: unique('own-project') }));
  const endpoint = ok(await t.services.endpoints.create(principal, endpointBody(project.id)));
  const caller: Caller = {
    userId: user.user.id,
    email: user.user.email,
    teamId: user.teamId,
    projectId: project.id,
    endpointId: endpoint.id,
  };
  return { ...user, caller };
}

/** A team with a project, endpoints in the statuses each action starts from, a member, a spare key and an invitation. */
async function seedVictim(): Promise<Victim> {
  const owner = await t.seed.user();
  const teamName = unique('victim-team');
  const team = ok(await t.services.identity.createTeam(await principalOf(owner.user.id), { name: teamName }));
  const ownerPrincipal = { ...(await principalOf(owner.user.id)), actingTeamId: team.id };
  const projectName = unique('victim-project');
  const project = ok(await t.services.identity.createProject(ownerPrincipal, { teamId: team.id, name: projectName }));
  const endpoint = async (status: 'RUNNING' | 'SLEEPING' | 'FAILED') => {
    const body = {
      projectId: project.id,
      name: unique('victim-ep'),
      instanceOptionId: 'TwD5AqnBSVN0',
      advanced: {},
      hfModelRepo: 'org/tiny-model',
    };
    const created = ok(await t.services.endpoints.create(ownerPrincipal, { ...body, autoscalingPolicy: { minReplica: 0, maxReplica: 1 } }));
    // A second version, so that a rollback to version 0 has somewhere to go back from.
    ok(await t.services.endpoints.update(ownerPrincipal, created.id, { newVersionComment: 'second' }));
    await t.setStatus(created.id, status);
    return created.id;
  };
  const idempotencyKey = unique('victim-idempotency');
  const artifact = ok(
    await t.services.endpoints.createFromArtifact(ownerPrincipal, {
      wandbArtifactVersionName: 'victim/model-registry/secret:v1',
      projectId: project.id,
      idempotencyKey,
    }),
  );
  const member = await t.seed.user();
  ok(await t.services.identity.addTeamMember('system', { teamId: team.id, user: member.user.id }));
  const spare = ok(await t.services.identity.createApiKey('system', { name: 'spare', user: owner.user.id }));
  const guest = await t.seed.user();
  const invited = ok(await t.services.identity.addTeamMember(ownerPrincipal, { teamId: team.id, user: guest.user.email }));
  if (invited.type !== 'invitation') throw new Error('expected an invitation');
  const endpoints = { running: await endpoint('RUNNING'), sleeping: await endpoint('SLEEPING'), failed: await endpoint('FAILED') };
  const replicaError = unique('victim-engine-secret');
  await insertReplica(endpoints.failed, 'FAILED', replicaError);
  return {
    teamId: team.id,
    teamName,
    owner: { id: owner.user.id, email: owner.user.email, name: owner.user.name },
    memberId: member.user.id,
    projectId: project.id,
    projectName,
    endpoints: { ...endpoints, artifact: artifact.endpoint.id },
    replicaId: await insertReplica(endpoints.running, 'STOPPED', null),
    replicaError,
    idempotencyKey,
    spareKeyId: spare.record.id,
    invitationId: invited.invitation.id,
    guest: { id: guest.user.id, email: guest.user.email },
    // Keys of the victim's people, for the controls.
    ...{ keys: { owner: owner.key, guest: guest.key } },
  } as Victim;
}

const keysOf = (v: Victim) => (v as Victim & { keys: { owner: string; guest: string } }).keys;

/** What an entitled caller of the victim's is, for a control. */
async function controlCaller(v: Victim, who: Control): Promise<{ key: string; caller: Caller }> {
  if (who === 'admin') return { key: admin.key, caller: admin.caller };
  const userId = who === 'owner' ? v.owner.id : v.guest.id;
  const email = who === 'owner' ? v.owner.email : v.guest.email;
  return { key: keysOf(v)[who], caller: { userId, email, teamId: v.teamId, projectId: v.projectId, endpointId: v.endpoints.running } };
}

interface MatrixPrincipal {
  name: string;
  key: string | undefined;
  headers: Record<string, string>;
  caller: Caller;
  /** What every row answers them, or undefined when it is the row's refusal. */
  fixed?: Outcome;
  /** Victim markers this principal may legitimately see (an invitee sees the inviting team's id and name). */
  sees: string[];
}

let victim: Victim;
let principals: MatrixPrincipal[];
let admin: Awaited<ReturnType<typeof newUser>>;

/** Ids and names of the victim's: none may reach another principal unless the request named it. */
function markersOf(v: Victim): string[] {
  return [
    v.teamId,
    v.teamName,
    v.owner.id,
    v.owner.email,
    v.owner.name,
    v.memberId,
    v.projectId,
    v.projectName,
    ...Object.values(v.endpoints),
    v.idempotencyKey,
    v.spareKeyId,
    v.replicaId,
    v.replicaError,
    v.invitationId,
    v.guest.id,
    v.guest.email,
  ];
}

function leaked(text: string, request: string, principal: MatrixPrincipal, v: Victim): string[] {
  return markersOf(v).filter((m) => text.includes(m) && !request.includes(m) && !principal.sees.includes(m));
}

beforeAll(async () => {
  t = await startTestGateway();
  await prepareDump();
  victim = await seedVictim();
  admin = await newUser({ admin: true });
  const ownerPrincipal = { ...(await principalOf(victim.owner.id)), actingTeamId: victim.teamId };

  const outsider = await newUser();
  // Each principal is what it claims: the member and the key reached the victim's endpoint before the change.
  const seesVictim = async (key: string) => {
    const answer = await postJson(
      '/graphql',
      key,
      {},
      { query: 'query($id: ID!) { endpoint(id: $id) { id } }', variables: { id: victim.endpoints.running } },
    );
    return (await answer.json()).data?.endpoint?.id === victim.endpoints.running;
  };
  const removed = await newUser();
  ok(await t.services.identity.addTeamMember('system', { teamId: victim.teamId, user: removed.user.id }));
  expect(await seesVictim(removed.key)).toBe(true);
  ok(await t.services.identity.removeTeamMember(ownerPrincipal, { teamId: victim.teamId, userId: removed.user.id }));
  const invitee = await newUser();
  const invitation = ok(await t.services.identity.addTeamMember(ownerPrincipal, { teamId: victim.teamId, user: invitee.user.id }));
  expect(invitation.type).toBe('invitation');
  const revoked = await newUser();
  ok(await t.services.identity.addTeamMember('system', { teamId: victim.teamId, user: revoked.user.id }));
  const revokedKey = ok(await t.services.identity.createApiKey('system', { name: 'to revoke', user: revoked.user.id }));
  expect(await seesVictim(revokedKey.secret)).toBe(true);
  ok(await t.services.identity.revokeApiKey('system', revokedKey.record.id));

  principals = [
    { name: 'a member of another team', key: outsider.key, headers: {}, caller: outsider.caller, sees: [] },
    { name: 'a member removed from the team', key: removed.key, headers: {}, caller: removed.caller, sees: [] },
    {
      name: 'a removed member acting as the team (team header)',
      key: removed.key,
      headers: { 'x-friendli-team': victim.teamId },
      caller: removed.caller,
      fixed: 'forbidden',
      sees: [],
    },
    // The invitation shows the invitee the team's id and name, and who invited them (README "Members join by invitation").
    {
      name: 'an invitee who has not accepted',
      key: invitee.key,
      headers: {},
      caller: invitee.caller,
      sees: [victim.teamId, victim.teamName, victim.owner.name],
    },
    {
      name: 'a revoked key of a team member',
      key: revokedKey.secret,
      headers: {},
      caller: revoked.caller,
      fixed: 'unauthenticated',
      sees: [],
    },
    { name: 'no key', key: undefined, headers: {}, caller: outsider.caller, fixed: 'unauthenticated', sees: [] },
  ];
}, 60_000);

interface Exchange {
  outcome: Outcome;
  /** The answer as text, for the leak check and for messages. */
  text: string;
}

async function postJson(
  pathname: string,
  key: string | undefined,
  headers: Record<string, string>,
  body: unknown,
  accept = 'application/json',
) {
  const response = await fetch(`${t.url}${pathname}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept, ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
    body: JSON.stringify(body),
  });
  return response;
}

async function graphqlOverHttp(
  kind: Kind,
  field: string,
  document: string,
  variables: unknown,
  key: string | undefined,
  headers: Record<string, string>,
): Promise<Exchange> {
  if (kind === 'subscription') return subscriptionOverSse(field, document, variables, key, headers);
  const response = await postJson('/graphql', key, headers, { query: document, variables });
  const text = await response.text();
  const body = JSON.parse(text);
  if (response.status === 401 || response.status === 403) {
    expect(body.errors?.[0]?.extensions?.code, text).toBe(response.status === 401 ? 'UNAUTHENTICATED' : 'FORBIDDEN');
    return { outcome: httpOutcome(response.status), text };
  }
  expect(response.status, text).toBeLessThan(500);
  return { outcome: graphqlOutcome(body, field), text };
}

/** The first result of an SSE subscription (then it is closed). */
async function subscriptionOverSse(
  field: string,
  document: string,
  variables: unknown,
  key: string | undefined,
  headers: Record<string, string>,
): Promise<Exchange> {
  const abort = new AbortController();
  const response = await fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...headers,
    },
    body: JSON.stringify({ query: document, variables }),
    signal: abort.signal,
  });
  if (!response.headers.get('content-type')?.startsWith('text/event-stream')) {
    const text = await response.text();
    return { outcome: response.status === 200 ? graphqlOutcome(JSON.parse(text), field) : httpOutcome(response.status), text };
  }
  const decoder = new TextDecoder();
  let text = '';
  const timer = setTimeout(() => abort.abort(), 5000);
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      const next = /event: next\ndata: (.*)\n\n/.exec(text);
      if (next) return { outcome: graphqlOutcome(JSON.parse(next[1]!), field), text };
      if (text.includes('event: complete')) break;
    }
  } catch {
    // aborted
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  return { outcome: 'other: no result within 5 s', text };
}

/** The first message of an operation over graphql-ws (a subscription's first result), or the socket's refusal. */
async function subscriptionOverWs(
  field: string,
  document: string,
  variables: unknown,
  key: string | undefined,
  headers: Record<string, string>,
): Promise<Exchange> {
  const ws = await openSocket(t.url, { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers });
  try {
    if (ws.closed) {
      const text = JSON.stringify(ws.closed);
      if (ws.closed.code === 4401) return { outcome: 'unauthenticated', text };
      if (ws.closed.code === 4403) return { outcome: 'forbidden', text };
      return { outcome: `other: closed ${ws.closed.code}`, text };
    }
    ws.subscribe('1', document, variables as Record<string, unknown>);
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && ws.of('1').length === 0 && !ws.closed) await new Promise((r) => setTimeout(r, 10));
    const [message] = ws.of('1');
    const text = JSON.stringify(message ?? ws.closed ?? null);
    if (!message) return { outcome: 'other: no message within 5 s', text };
    if (message.type === 'error') return { outcome: graphqlOutcome({ errors: message.payload }, field), text };
    return { outcome: graphqlOutcome(message.payload, field), text };
  } finally {
    ws.socket.close();
    await ws.waitClosed().catch(() => {});
  }
}

type Transport = (
  key: string | undefined,
  headers: Record<string, string>,
  v: Victim,
  me: Caller,
) => Promise<Exchange & { request: string }>;

function graphqlTransports(operation: string, kind: Kind, field: GraphQLField<unknown, unknown>, c: GraphQLCase): [string, Transport][] {
  const request = (v: Victim, me: Caller) => {
    const variables = c.args(v, me);
    return { variables, document: documentOf(operation, kind, field, variables) };
  };
  const http: Transport = async (key, headers, v, me) => {
    const { variables, document } = request(v, me);
    const answer = await graphqlOverHttp(kind, field.name, document, variables, key, headers);
    return { ...answer, request: JSON.stringify({ variables, headers }) };
  };

  const ws: Transport = async (key, headers, v, me) => {
    const { variables, document } = request(v, me);
    const answer = await subscriptionOverWs(field.name, document, variables, key, headers);
    return { ...answer, request: JSON.stringify({ variables, headers }) };
  };
  // graphql-ws carries queries and mutations too, authenticated once per connection.
  return [
    [kind === 'subscription' ? 'SSE' : 'HTTP', http],
    ['WebSocket', ws],
  ];
}

function restTransport(route: string, c: RestCase): Transport {
  const [method, template] = route.split(' ') as [string, string];
  return async (key, headers, v, me) => {
    const params = c.params?.(v, me) ?? {};
    const pathname = template.replace(/:(\w+)/g, (_, name: string) => {
      if (!(name in params)) throw new Error(`the row of ${route} lacks the path parameter ${name}`);
      return encodeURIComponent(params[name]!);
    });
    const query = c.query ? `?${new URLSearchParams(c.query(v, me))}` : '';
    const body = c.body?.(v, me);
    const response = await fetch(`${t.url}${pathname}${query}`, {
      method,
      headers: {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    const outcome = httpOutcome(response.status);
    if (outcome === 'unauthenticated' || outcome === 'forbidden' || outcome === 'not-found') {
      // The documented error body: the management shape, or OpenAI's under /dedicated/v1.
      const error = JSON.parse(text).error;
      const expected = pathname.startsWith('/dedicated/v1/')
        ? { unauthenticated: 'authentication_error', forbidden: 'permission_error', 'not-found': 'not_found_error' }[outcome]
        : { unauthenticated: 'UNAUTHENTICATED', forbidden: 'FORBIDDEN', 'not-found': 'NOT_FOUND' }[outcome];
      expect(pathname.startsWith('/dedicated/v1/') ? error?.type : error?.code, `${route}: ${text}`).toBe(expected);
    }
    return { outcome, text, request: JSON.stringify({ pathname, query, body, headers }) };
  };
}

/** Runs one case as every principal: the expected refusal, no leak, and no row changed (a `self` case: none of the victim's). */
async function refusedToAll(label: string, refusal: Refusal, transports: [string, Transport][]): Promise<number> {
  if (refusal !== 'self') return refusedAtOnce(label, refusal, transports);
  const failures: string[] = [];
  let requests = 0;
  // A refused request writes nothing, so the dump after it is the next request's dump before: a write of its that
  // lands late then shows in the next comparison (named by the next request) instead of in none. After one that may
  // write (a `self` case), a fresh dump: its own writes may still be landing.
  let before: Dump | undefined;
  for (const principal of principals) {
    for (const [transport, send] of transports) {
      const expected: Outcome = principal.fixed ?? (refusal === 'self' ? 'ok' : refusal);
      before ??= await dump();
      const answer = await send(principal.key, principal.headers, victim, principal.caller);
      requests++;
      const after = await dump();
      const where = `${label} over ${transport}, as ${principal.name}`;
      if (answer.outcome !== expected) failures.push(`${where}: expected ${expected}, got ${answer.outcome}: ${answer.text.slice(0, 400)}`);
      const leaks = leaked(answer.text, answer.request, principal, victim);
      if (leaks.length > 0) failures.push(`${where}: the answer names the victim's ${leaks.join(', ')}: ${answer.text.slice(0, 400)}`);
      const changed = difference(before, after);
      const wrong = expected === 'ok' ? changed.filter((row) => leaked(row, answer.request, principal, victim).length > 0) : changed;
      if (wrong.length > 0) failures.push(`${where}: rows changed:\n  ${wrong.join('\n  ')}`);
      before = expected === 'ok' ? undefined : after;
    }
  }
  expect(failures, failures.join('\n')).toEqual([]);
  return requests;
}

/**
 * A case that every principal is refused (all but `self`): its requests go out together, between one dump before
 * and one after. No request of it may change a row, so a change needs no single request to blame: it fails the case,
 * naming all of them (and a write that lands late shows in the next case's comparison, as before). One by one, each
 * request with its own dump, they were most of this file's time.
 */
async function refusedAtOnce(label: string, refusal: Exclude<Refusal, 'self'>, transports: [string, Transport][]): Promise<number> {
  const failures: string[] = [];
  const requests = principals.flatMap((principal) => transports.map(([transport, send]) => ({ principal, transport, send })));
  const before = await dump();
  const answers = await Promise.all(
    requests.map(({ principal, send }) => send(principal.key, principal.headers, victim, principal.caller)),
  );
  const after = await dump();
  requests.forEach(({ principal, transport }, i) => {
    const answer = answers[i]!;
    const expected: Outcome = principal.fixed ?? refusal;
    const where = `${label} over ${transport}, as ${principal.name}`;
    if (answer.outcome !== expected) failures.push(`${where}: expected ${expected}, got ${answer.outcome}: ${answer.text.slice(0, 400)}`);
    const leaks = leaked(answer.text, answer.request, principal, victim);
    if (leaks.length > 0) failures.push(`${where}: the answer names the victim's ${leaks.join(', ')}: ${answer.text.slice(0, 400)}`);
  });
  const changed = difference(before, after);
  if (changed.length > 0) {
    const sent = requests.map(({ principal, transport }) => `over ${transport} as ${principal.name}`).join('; ');
    failures.push(`${label}, sent together (${sent}): rows changed:\n  ${changed.join('\n  ')}`);
  }
  expect(failures, failures.join('\n')).toEqual([]);
  return requests.length;
}

/** The same arguments, sent by someone entitled on a victim of its own, are not refused. */
async function controlOf(
  label: string,
  refusal: Refusal,
  who: Control,
  transports: [string, Transport][],
  readOnly: boolean,
): Promise<void> {
  if (refusal === 'self') return;
  for (const [transport, send] of transports) {
    const v = readOnly ? (controlVictim ??= await seedVictim()) : await seedVictim();
    const { key, caller } = await controlCaller(v, who);
    const answer = await send(key, {}, v, caller);
    // Any answer but a refusal: an entitled caller may still meet a conflict or a transition the status forbids.
    const refused = ['unauthenticated', 'forbidden', 'not-found'].includes(answer.outcome) || (who === 'admin' && answer.outcome !== 'ok');
    expect(refused, `control of ${label} over ${transport} (${who}): ${answer.outcome}: ${answer.text.slice(0, 400)}`).toBe(false);
  }
}

let controlVictim: Victim | undefined;
const counts = { operations: 0, cases: 0, requests: 0 };

describe('every operation has a row', () => {
  test('every Query, Mutation and Subscription field of schema.graphql', () => {
    const missing = GRAPHQL_OPERATIONS.map((o) => o.name).filter((name) => !(name in GRAPHQL_MATRIX));
    expect(missing, `operations without a row in test/security/authorization-matrix.ts: ${missing.join(', ')}`).toEqual([]);
    const stale = Object.keys(GRAPHQL_MATRIX).filter((name) => !GRAPHQL_OPERATIONS.some((o) => o.name === name));
    expect(stale, `rows for operations the schema no longer has: ${stale.join(', ')}`).toEqual([]);
  });

  test('every REST route', () => {
    const table = endpointRoutes(t.services)
      .list()
      .map((r) => `${r.method} ${r.path}`);
    const rows = Object.keys(REST_MATRIX);
    const missing = table.filter((route) => !rows.includes(route));
    const dispatched = dispatchedPaths();
    const missingPaths = dispatched.filter((p) => !rows.some((row) => row.split(' ')[1] === p));
    expect([...missing, ...missingPaths], `routes without a row in test/security/authorization-matrix.ts`).toEqual([]);
    const stale = rows.filter((row) => {
      const template = row.split(' ')[1]!;
      return !table.includes(row) && !dispatched.some((p) => template === p || template.startsWith(`${p}/`));
    });
    expect(stale, 'rows for routes that no longer exist').toEqual([]);
  });
});

interface MatrixCase {
  label: string;
  refusal: Refusal;
  control: Control;
  transports: [string, Transport][];
  /** Its control may share a victim with other read-only controls. */
  readOnly: boolean;
}

/** Every operation with a row, and its cases: GraphQL's first, then REST's. */
const OPERATIONS: { surface: 'GraphQL' | 'REST'; name: string; cases: MatrixCase[] }[] = [
  ...GRAPHQL_OPERATIONS.filter(({ name }) => GRAPHQL_MATRIX[name]).map(({ name, kind, field }) => ({
    surface: 'GraphQL' as const,
    name,
    cases: casesOf(GRAPHQL_MATRIX[name]!).map((c) => ({
      label: c.name ? `${name} (${c.name})` : name,
      refusal: c.refusal ?? 'not-found',
      control: c.control ?? 'owner',
      transports: graphqlTransports(name, kind, field, c),
      readOnly: kind !== 'mutation',
    })),
  })),
  ...Object.entries(REST_MATRIX).map(([route, row]) => ({
    surface: 'REST' as const,
    name: route,
    cases: casesOf(row).map((c) => ({
      label: c.name ? `${route} (${c.name})` : route,
      refusal: c.refusal ?? 'not-found',
      control: c.control ?? 'owner',
      transports: [['HTTP', restTransport(route, c)]] as [string, Transport][],
      readOnly: route.startsWith('GET '),
    })),
  })),
];

for (const surface of ['GraphQL', 'REST'] as const) {
  describe(`${surface}: every operation, as every principal`, () => {
    for (const { name, cases } of OPERATIONS.filter((o) => o.surface === surface)) {
      test(name, async () => {
        counts.operations++;
        for (const c of cases) {
          counts.cases++;
          counts.requests += await refusedToAll(c.label, c.refusal, c.transports);
        }
      });
    }
  });
}

// After every refusal: a control's writes (a chat's last-request time is written a moment later) must not land in a refusal's comparison.
describe('controls: the same arguments, sent by someone entitled, are not refused', () => {
  for (const { surface, name, cases } of OPERATIONS) {
    if (cases.every((c) => c.refusal === 'self')) continue;
    test(`${surface} ${name}`, async () => {
      for (const c of cases) await controlOf(c.label, c.refusal, c.control, c.transports, c.readOnly);
    });
  }

  test('the tally', () => {
    // For the record: operations, cases, principals, and the refused requests (every principal, every transport).
    console.log(
      `authorization matrix: ${counts.operations} operations, ${counts.cases} cases, ${principals.length} principals, ${counts.requests} requests`,
    );
  });
});
