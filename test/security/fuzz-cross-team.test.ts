/**
 * Two teams, interleaved (issue 31): a property test that draws sequences of
 * operations by members of team A and team B, over REST and GraphQL, each
 * naming a resource drawn from everything either team holds (so about half
 * of them name the other team's), and learns who owns what as it goes
 * (created endpoints and projects, deleted ones).
 *
 * For every operation:
 * - on the other team's resource, or a deleted one: the documented not-found
 *   (404, `NotFoundError`, `null`, `NOT_FOUND`), and the other team's rows
 *   (projects, endpoints, versions, events) exactly as they were;
 * - on the caller's own live resource: never a not-found (the refusal is for
 *   others only);
 * - no answer names an id of the other team's that the request did not name
 *   (ids are recognized by their prefixes: usr_, team_, prj_, ep_, key_, inv_);
 * and after each sequence, no row crosses teams: every endpoint is in its
 * project's team, every creator and actor of an endpoint, a version, an event
 * or a request log row is a member of the endpoint's team, and each team's
 * live endpoints are exactly those the model says it owns.
 *
 * Each run draws a seed (printed: `cross-team fuzz seed N`); `FUZZ_SEED=N`
 * replays it. A failure prints fast-check's shrunk sequence.
 */
import fc from 'fast-check';
import { beforeAll, expect, test } from 'vitest';
import type { EndpointStatus } from '../../src/domain/lifecycle.js';
import { createBody, startTestGateway, type TestGateway } from '../support/gateway.js';

type TeamName = 'A' | 'B';

interface Member {
  id: string;
  key: string;
}

interface Team {
  name: TeamName;
  id: string;
  members: Member[];
}

/** FUZZ_SEED replays a run; else each run draws a fresh seed (printed). */
const SEED =
  process.env.FUZZ_SEED && process.env.FUZZ_SEED !== 'random' ? Number(process.env.FUZZ_SEED) : Math.floor(Math.random() * 2 ** 31);
const RUNS = 30;

let t: TestGateway;
const teams = {} as Record<TeamName, Team>;
/** Who owns each id the fuzzer has seen (users, teams, projects, endpoints). */
const owner = new Map<string, TeamName>();
const deleted = new Set<string>();
const projects: string[] = [];
const endpoints: string[] = [];

const other = (team: TeamName): TeamName => (team === 'A' ? 'B' : 'A');

async function seedTeam(name: TeamName): Promise<Team> {
  const first = await t.seed.user();
  const second = await t.seed.user();
  const added = await t.services.identity.addTeamMember('system', { teamId: first.teamId, user: second.user.id });
  if (added.type === 'error') throw new Error(added.error.message);
  const team: Team = {
    name,
    id: first.teamId,
    members: [
      { id: first.user.id, key: first.key },
      { id: second.user.id, key: second.key },
    ],
  };
  owner.set(team.id, name);
  // The second member's own personal team is theirs alone: it belongs to neither side, and must not show up either.
  owner.set(second.teamId, name);
  for (const m of team.members) owner.set(m.id, name);
  const project = await first.project(`project-${name}`);
  owner.set(project.id, name);
  projects.push(project.id);
  for (let i = 0; i < 2; i++) {
    const id = await project.endpoint({ autoscalingPolicy: { minReplica: 0, maxReplica: 1 } });
    owner.set(id, name);
    endpoints.push(id);
  }
  return team;
}

beforeAll(async () => {
  t = await startTestGateway();
  teams.A = await seedTeam('A');
  teams.B = await seedTeam('B');
}, 60_000);

// ---------------------------------------------------------------------------
// Requests and what their answers amount to.

type Outcome = 'ok' | 'not-found' | 'denied' | `other: ${string}`;

interface Answer {
  outcome: Outcome;
  text: string;
  body: any;
}

async function rest(key: string, method: string, path: string, body?: unknown, timeoutMs = 10_000): Promise<Answer> {
  let response: Response;
  try {
    response = await fetch(`${t.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch {
    // Still waiting (a chat for an endpoint with no replica yet): it got past the access check.
    return { outcome: 'other: still waiting', text: '', body: undefined };
  }
  const text = await response.text();
  const parsed = text ? JSON.parse(text) : undefined;
  const { status } = response;
  const outcome: Outcome =
    status === 404 ? 'not-found' : status === 401 || status === 403 ? 'denied' : status < 300 ? 'ok' : `other: ${status}`;
  return { outcome, text, body: parsed };
}

async function graphql(key: string, query: string, variables: Record<string, unknown>): Promise<Answer> {
  const answer = await rest(key, 'POST', '/graphql', { query, variables });
  if (answer.outcome !== 'ok') return answer;
  const { data, errors } = answer.body;
  const field = data ? Object.keys(data)[0]! : undefined;
  const value = field ? data[field] : undefined;
  const code = errors?.[0]?.extensions?.code;
  let outcome: Outcome;
  if (code === 'NOT_FOUND') outcome = 'not-found';
  else if (code) outcome = `other: ${code}`;
  else if (value === null || value?.__typename === 'NotFoundError') outcome = 'not-found';
  else if (typeof value?.__typename === 'string' && /Error$/.test(value.__typename)) outcome = `other: ${value.__typename}`;
  else outcome = 'ok';
  return { ...answer, outcome };
}

// ---------------------------------------------------------------------------
// The operations.

type Target = 'endpoint' | 'project' | 'team' | 'none';

interface Operation {
  target: Target;
  /** Sends it; `id` is the target's id (absent for `none`). */
  send(key: string, id: string, pick: Pick, actor: TeamName): Promise<Answer>;
  /** What a success teaches the model. */
  learn?(answer: Answer, id: string, actor: TeamName): void;
}

interface Pick {
  graphql: boolean;
  status: EndpointStatus;
  idempotencyKey: string | undefined;
}

const ACTIONS = ['sleep', 'wake', 'terminate', 'restart'] as const;
const gqlAction = (action: string) =>
  `mutation($id: ID!) { ${action}Endpoint(id: $id) { __typename ... on Error { message } ... on ${action[0]!.toUpperCase()}${action.slice(1)}EndpointSuccess { endpoint { id status { status } } } } }`;

const created = (answer: Answer, actor: TeamName, id: string | undefined) => {
  if (answer.outcome !== 'ok' || !id) return;
  if (!owner.has(id)) endpoints.push(id);
  owner.set(id, actor);
};

const OPERATIONS: Record<string, Operation> = {
  read: {
    target: 'endpoint',
    send: (key, id, pick) =>
      pick.graphql
        ? graphql(key, 'query($id: ID!) { endpoint(id: $id) { id name creator { id } project { id team { id } } } }', { id })
        : rest(key, 'GET', `/dedicated/beta/endpoint/${id}`),
  },
  status: { target: 'endpoint', send: (key, id) => rest(key, 'GET', `/dedicated/beta/endpoint/${id}/status`) },
  versions: {
    target: 'endpoint',
    send: (key, id, pick) =>
      pick.graphql
        ? graphql(
            key,
            'query($id: ID!) { endpoint(id: $id) { versions { nodes { versionIndex creator { id } spec { projectId teamId creatorId } } } } }',
            {
              id,
            },
          )
        : rest(key, 'GET', `/dedicated/beta/endpoint/${id}/version`),
  },
  update: {
    target: 'endpoint',
    send: (key, id, pick) =>
      pick.graphql
        ? graphql(
            key,
            'mutation($id: ID!) { updateEndpoint(id: $id, input: { newVersionComment: "fuzz" }) { __typename ... on Error { message } } }',
            {
              id,
            },
          )
        : rest(key, 'PUT', `/dedicated/beta/endpoint/${id}`, { newVersionComment: 'fuzz' }),
  },
  rollback: {
    target: 'endpoint',
    send: (key, id) =>
      graphql(key, 'mutation($id: ID!) { rollbackEndpoint(id: $id, versionIndex: 0) { __typename ... on Error { message } } }', { id }),
  },
  ...Object.fromEntries(
    ACTIONS.map((action) => [
      action,
      {
        target: 'endpoint',
        send: (key: string, id: string, pick: Pick) =>
          pick.graphql ? graphql(key, gqlAction(action), { id }) : rest(key, 'PUT', `/dedicated/beta/endpoint/${id}/${action}`),
      } satisfies Operation,
    ]),
  ),
  delete: {
    target: 'endpoint',
    send: (key, id, pick) =>
      pick.graphql
        ? graphql(key, 'mutation($id: ID!) { deleteEndpoint(id: $id) { __typename ... on Error { message } } }', { id })
        : rest(key, 'DELETE', `/dedicated/beta/endpoint/${id}`),
    learn: (answer, id) => {
      if (answer.outcome === 'ok') deleted.add(id);
    },
  },
  chat: {
    target: 'endpoint',
    // An endpoint of one's own may hold the request while it waits for a replica: it is cut short, having got past the check.
    send: (key, id) =>
      rest(key, 'POST', '/dedicated/v1/chat/completions', { model: id, messages: [{ role: 'user', content: 'hi' }] }, 1500),
  },
  model: { target: 'endpoint', send: (key, id) => rest(key, 'GET', `/dedicated/v1/models/${id}`) },
  listProject: {
    target: 'project',
    send: (key, id, pick) =>
      pick.graphql
        ? graphql(key, 'query($p: ID) { endpoints(projectId: $p) { nodes { id project { id } } } }', { p: id })
        : rest(key, 'GET', `/dedicated/beta/endpoint?projectId=${id}`),
  },
  project: {
    target: 'project',
    send: (key, id) => graphql(key, 'query($id: ID!) { project(id: $id) { id team { id } endpoints { nodes { id } } } }', { id }),
  },
  createEndpoint: {
    target: 'project',
    send: (key, id, pick) =>
      pick.graphql
        ? graphql(
            key,
            'mutation($input: CreateEndpointInput!) { createEndpoint(input: $input) { __typename ... on CreateEndpointSuccess { endpoint { id project { id } } } ... on Error { message } } }',
            { input: { ...createBody(id), advanced: {} } },
          )
        : rest(key, 'POST', '/dedicated/beta/endpoint', createBody(id)),
    learn: (answer, _, actor) => created(answer, actor, answer.body?.endpointId ?? answer.body?.data?.createEndpoint?.endpoint?.id),
  },
  artifact: {
    target: 'project',
    send: (key, id, pick) => {
      const input = {
        wandbArtifactVersionName: 'fuzz/model-registry/llama:v1',
        projectId: id,
        ...(pick.idempotencyKey ? { idempotencyKey: pick.idempotencyKey } : {}),
      };
      return pick.graphql
        ? graphql(
            key,
            'mutation($input: ArtifactEndpointInput!) { createEndpointFromArtifact(input: $input) { __typename ... on CreateEndpointFromArtifactSuccess { endpoint { id } project { id team { id } } } ... on Error { message } } }',
            { input },
          )
        : rest(key, 'POST', '/dedicated/endpoint/wandb-artifact-create', input);
    },
    learn: (answer, _, actor) =>
      created(answer, actor, answer.body?.endpointId ?? answer.body?.data?.createEndpointFromArtifact?.endpoint?.id),
  },
  team: {
    target: 'team',
    send: (key, id) => graphql(key, 'query($id: ID!) { team(id: $id) { id members { user { id } } projects { id } } }', { id }),
  },
  createProject: {
    target: 'team',
    send: (key, id) =>
      graphql(
        key,
        'mutation($t: ID) { createProject(name: "fuzz", teamId: $t) { __typename ... on CreateProjectSuccess { project { id } } ... on Error { message } } }',
        {
          t: id,
        },
      ),
    learn: (answer, _, actor) => {
      const id = answer.body?.data?.createProject?.project?.id;
      if (answer.outcome === 'ok' && id) {
        owner.set(id, actor);
        projects.push(id);
      }
    },
  },
  // The caller's own views: only the leak check applies.
  listOwn: {
    target: 'none',
    send: (key, _, pick) =>
      pick.graphql
        ? graphql(key, '{ teams { id members { user { id } } projects { id endpoints { nodes { id creator { id } } } } } }', {})
        : rest(key, 'GET', '/dedicated/beta/endpoint?limit=100'),
  },
  models: { target: 'none', send: (key) => rest(key, 'GET', '/dedicated/v1/models') },
};

/** A status forced on an endpoint, as the controller would move it (no request, no actor). */
interface Step {
  team: TeamName;
  member: number;
  operation: string;
  target: number;
  pick: Pick;
  force: EndpointStatus | undefined;
}

const STATUSES: EndpointStatus[] = ['RUNNING', 'SLEEPING', 'FAILED', 'TERMINATED', 'INITIALIZING', 'UPDATING'];

const step: fc.Arbitrary<Step> = fc.record({
  team: fc.constantFrom<TeamName>('A', 'B'),
  member: fc.nat({ max: 1 }),
  operation: fc.constantFrom(...Object.keys(OPERATIONS)),
  target: fc.nat(),
  pick: fc.record({
    graphql: fc.boolean(),
    status: fc.constantFrom(...STATUSES),
    idempotencyKey: fc.constantFrom(undefined, 'shared-key-1', 'shared-key-2'),
  }),
  force: fc.option(fc.constantFrom(...STATUSES), { freq: 5, nil: undefined }),
});

// ---------------------------------------------------------------------------
// Rows.

/** A digest of one team's projects, endpoints, versions and events (last_request_at left out: the matrix checks it exactly). */
async function teamDigest(teamId: string): Promise<string> {
  const [row] = await t.sql<{ digest: string }[]>`
    SELECT md5(
      coalesce((SELECT string_agg((to_jsonb(p))::text, ',' ORDER BY p.id) FROM projects p WHERE p.team_id = ${teamId}), '') ||
      coalesce((SELECT string_agg((to_jsonb(e) - 'last_request_at')::text, ',' ORDER BY e.id) FROM endpoints e WHERE e.team_id = ${teamId}), '') ||
      coalesce((SELECT string_agg((to_jsonb(v))::text, ',' ORDER BY v.endpoint_id, v.version_index)
                FROM endpoint_versions v JOIN endpoints e ON e.id = v.endpoint_id WHERE e.team_id = ${teamId}), '') ||
      coalesce((SELECT string_agg((to_jsonb(x))::text, ',' ORDER BY x.id) FROM endpoint_events x WHERE x.team_id = ${teamId}), '')
    ) AS digest`;
  return row!.digest;
}

/** Rows that cross teams: each line names one. */
async function crossingRows(): Promise<string[]> {
  const rows = await t.sql<{ problem: string }[]>`
    SELECT 'endpoint ' || e.id || ' is in team ' || e.team_id || ' but its project is in ' || p.team_id AS problem
      FROM endpoints e JOIN projects p ON p.id = e.project_id WHERE e.team_id <> p.team_id
    UNION ALL
    SELECT 'endpoint ' || e.id || ' was created by a non-member ' || e.creator_id FROM endpoints e
      WHERE NOT EXISTS (SELECT 1 FROM team_members m WHERE m.team_id = e.team_id AND m.user_id = e.creator_id)
    UNION ALL
    SELECT 'version ' || v.version_index || ' of ' || v.endpoint_id || ' was made by a non-member ' || v.creator_id
      FROM endpoint_versions v JOIN endpoints e ON e.id = v.endpoint_id
      WHERE NOT EXISTS (SELECT 1 FROM team_members m WHERE m.team_id = e.team_id AND m.user_id = v.creator_id)
    UNION ALL
    SELECT 'event ' || x.id || ' of ' || x.endpoint_id || ' is filed under another team or project, or was caused by a non-member'
      FROM endpoint_events x JOIN endpoints e ON e.id = x.endpoint_id
      WHERE x.team_id <> e.team_id OR x.project_id <> e.project_id
         OR (x.actor_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM team_members m WHERE m.team_id = e.team_id AND m.user_id = x.actor_id))
    UNION ALL
    SELECT 'request log row ' || r.id || ' of ' || r.endpoint_id || ' is filed under another team, or was sent by a non-member'
      FROM request_log r JOIN endpoints e ON e.id = r.endpoint_id
      WHERE r.team_id <> e.team_id
         OR (r.user_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM team_members m WHERE m.team_id = e.team_id AND m.user_id = r.user_id))`;
  return rows.map((r) => r.problem);
}

/** Each team's live endpoints in the database are those the model says it owns. */
async function ownershipAgrees(): Promise<string[]> {
  const rows = await t.sql<{ id: string; team_id: string }[]>`SELECT id, team_id FROM endpoints WHERE deleted_at IS NULL`;
  const problems: string[] = [];
  const live = new Set(rows.map((r) => r.id));
  for (const r of rows) {
    const expected = owner.get(r.id);
    if (expected === undefined) problems.push(`endpoint ${r.id} exists, but no request of the fuzzer created it`);
    else if (teams[expected].id !== r.team_id) problems.push(`endpoint ${r.id} belongs to team ${r.team_id}, not ${expected}'s`);
  }
  for (const id of endpoints) if (!deleted.has(id) && !live.has(id)) problems.push(`endpoint ${id} is gone without a delete`);
  return problems;
}

const ID = /\b(?:usr|team|prj|ep|key|inv)_[0-9a-z]{6,}\b/g;

// ---------------------------------------------------------------------------
// One step.

async function run(s: Step): Promise<void> {
  if (s.force && endpoints.length > 0) {
    const id = endpoints[s.target % endpoints.length]!;
    if (!deleted.has(id)) await t.setStatus(id, s.force);
  }
  const operation = OPERATIONS[s.operation]!;
  const actor = teams[s.team];
  const member = actor.members[s.member]!;
  const pool = operation.target === 'endpoint' ? endpoints : operation.target === 'project' ? projects : [teams.A.id, teams.B.id];
  const id = operation.target === 'none' ? '' : pool[s.target % pool.length]!;
  const targetTeam = operation.target === 'none' ? s.team : owner.get(id)!;
  const foreign = targetTeam !== s.team || deleted.has(id);
  const label = `${s.team}'s member ${s.member} ${s.pick.graphql ? 'GraphQL' : 'REST'} ${s.operation} ${id} (${operation.target === 'none' ? 'own' : `${targetTeam}'s${deleted.has(id) ? ', deleted' : ''}`})`;

  const watched = teams[other(s.team)].id;
  const before = foreign ? await teamDigest(watched) : undefined;
  const answer = await operation.send(member.key, id, s.pick, s.team);
  if (answer.outcome === 'denied') throw new Error(`${label}: a member was denied: ${answer.text.slice(0, 300)}`);
  if (foreign && operation.target !== 'none') {
    if (answer.outcome !== 'not-found')
      throw new Error(`${label}: expected not found, got ${answer.outcome}: ${answer.text.slice(0, 300)}`);
    const after = await teamDigest(watched);
    if (after !== before) throw new Error(`${label}: refused, yet the other team's rows changed`);
  } else if (operation.target !== 'none' && answer.outcome === 'not-found') {
    throw new Error(`${label}: the caller's own resource answered not found: ${answer.text.slice(0, 300)}`);
  }
  const leaked = [...new Set(answer.text.match(ID) ?? [])].filter((seen) => owner.get(seen) === other(s.team) && seen !== id);
  if (leaked.length > 0) throw new Error(`${label}: the answer names the other team's ${leaked.join(', ')}: ${answer.text.slice(0, 300)}`);
  operation.learn?.(answer, id, s.team);
}

test('two teams interleaved: no answer and no row ever crosses teams', async () => {
  console.log(`cross-team fuzz seed ${SEED} (FUZZ_SEED=${SEED} replays it)`);
  let steps = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 25 }), async (sequence) => {
      for (const s of sequence) {
        await run(s);
        steps++;
      }
      const problems = [...(await crossingRows()), ...(await ownershipAgrees())];
      if (problems.length > 0) throw new Error(`rows cross teams:\n  ${problems.join('\n  ')}`);
    }),
    { seed: SEED, numRuns: RUNS, endOnFailure: true },
  );
  expect(steps).toBeGreaterThan(0);
  console.log(`cross-team fuzz: ${steps} operations, ${endpoints.length} endpoints, ${projects.length} projects`);
}, 180_000);
