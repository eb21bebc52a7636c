/**
 * The authorization matrix's data (issue 31): one row per operation of the
 * gateway, GraphQL (every Query, Mutation and Subscription field of the
 * printed schema) and REST (every route of the router table, and every
 * `*_PATH` route that src/http/rest dispatches by hand). The operations come
 * from the schema and the route table (see authorization-matrix.test.ts); a
 * row says only what cannot be derived from them:
 *
 * - the arguments, path parameters or body that name the victim team's
 *   resource (its project, an endpoint in a status from which the action
 *   would succeed, a key, an invitation, a member);
 * - `refusal`, the documented answer to an authenticated caller of another
 *   team (README "Authentication and teams", docs/management-api.md):
 *   `not-found` (the default: 404, `NotFoundError`, `null`, `NOT_FOUND`,
 *   OpenAI's 404), `forbidden` (what only an admin may do, whoever names it:
 *   403, `ForbiddenError`), or `self` (the operation names no one else's
 *   resource: it succeeds for the caller, on the caller's own things, and
 *   nothing of the victim's is in its answer or in the rows it writes);
 * - `control`: who, entitled, sends the same arguments in the control run,
 *   which proves the arguments name a real resource (a control answered with
 *   the refusal fails the test): the victim team's owner by default.
 *
 * What the principals without a key, with a revoked key, or acting as a team
 * they are not in (team header) get is the same for every row (401, 401,
 * 403), so no row says it.
 *
 * The database is compared before and after each refused request: every
 * table except the append-only logs and samples that a refused request (or
 * the gateway's timers) legitimately write (`LOG_TABLES`), and except the
 * caller's own key's `last_used_at`, which every authenticated request may
 * touch (`IGNORED_COLUMNS`).
 */

/** The victim team and what it holds; every id here is one that another team must never reach. */
export interface Victim {
  teamId: string;
  teamName: string;
  owner: { id: string; email: string; name: string };
  /** A plain member of the team (removeTeamMember's target). */
  memberId: string;
  projectId: string;
  projectName: string;
  /** Endpoints in the statuses from which each action would succeed. */
  endpoints: { running: string; sleeping: string; failed: string; artifact: string };
  /** The idempotency key that created `endpoints.artifact` (wandb-artifact-create). */
  idempotencyKey: string;
  /** A key of the owner's that no request uses (revokeApiKey's target). */
  spareKeyId: string;
  /** A replica (stopped) of `endpoints.running`, and its failure message (a FAILED replica of `endpoints.failed`). */
  replicaId: string;
  replicaError: string;
  /** A pending invitation of the team to `guest` (not one of the principals). */
  invitationId: string;
  guest: { id: string; email: string };
}

/** The caller: its own user and project. */
export interface Caller {
  userId: string;
  email: string;
  teamId: string;
  projectId: string;
  /** An endpoint in the caller's own project. */
  endpointId: string;
}

export type Refusal = 'not-found' | 'forbidden' | 'self';
export type Control = 'owner' | 'guest' | 'admin';

export interface GraphQLCase {
  /** Tells cases of one operation apart. */
  name?: string;
  /** The field's arguments (every required one). */
  args: (v: Victim, me: Caller) => Record<string, unknown>;
  refusal?: Refusal;
  control?: Control;
}

export interface RestCase {
  name?: string;
  /** The path template's parameters. */
  params?: (v: Victim, me: Caller) => Record<string, string>;
  query?: (v: Victim, me: Caller) => Record<string, string>;
  body?: (v: Victim, me: Caller) => unknown;
  refusal?: Refusal;
  control?: Control;
}

let counter = 0;
/** A value no other request used (emails, names). */
export const unique = (prefix: string) => `${prefix}-${process.pid}-${++counter}`;

const H100_X1 = 'TwD5AqnBSVN0';
const MESSAGES = [{ role: 'user', content: 'hello' }];
const ARTIFACT = 'attacker/model-registry/stolen:v1';

const createInput = (projectId: string) => ({
  projectId,
  name: 'intruder',
  instanceOptionId: H100_X1,
  hfModelRepo: 'org/tiny-model',
  advanced: {},
});

/** wandb-artifact-create, as REST takes it and as GraphQL's ArtifactEndpointInput does. */
const ARTIFACT_CASES = <T extends GraphQLCase | RestCase>(wrap: (input: (v: Victim, me: Caller) => unknown) => Partial<T>): T[] =>
  [
    { name: "the victim's project", ...wrap((v) => ({ wandbArtifactVersionName: ARTIFACT, projectId: v.projectId })) },
    {
      name: "the victim's project and idempotency key",
      ...wrap((v) => ({ wandbArtifactVersionName: ARTIFACT, projectId: v.projectId, idempotencyKey: v.idempotencyKey })),
    },
    {
      // Keys are per project: the caller's own project gets a new endpoint, and the victim's is not rolled out.
      name: "the caller's own project with the victim's idempotency key",
      refusal: 'self',
      ...wrap((v, me) => ({ wandbArtifactVersionName: ARTIFACT, projectId: me.projectId, idempotencyKey: v.idempotencyKey })),
    },
  ] as T[];

/** One row per field of Query, Mutation and Subscription in schema.graphql, named `Type.field`. */
export const GRAPHQL_MATRIX: Record<string, GraphQLCase | GraphQLCase[]> = {
  'Query.endpoint': { args: (v) => ({ id: v.endpoints.running }) },
  'Query.endpoints': [
    { name: "the victim's project", args: (v) => ({ projectId: v.projectId }) },
    { name: "the acting team's", args: () => ({}), refusal: 'self' },
  ],
  'Query.instanceOptions': { args: () => ({}), refusal: 'self' },
  'Query.me': { args: () => ({}), refusal: 'self' },
  'Query.project': { args: (v) => ({ id: v.projectId }) },
  'Query.team': { args: (v) => ({ id: v.teamId }) },
  'Query.teams': { args: () => ({}), refusal: 'self' },

  'Mutation.acceptTeamInvitation': { args: (v) => ({ id: v.invitationId }), control: 'guest' },
  'Mutation.addTeamMember': [
    { name: 'the caller', args: (v, me) => ({ teamId: v.teamId, user: me.userId, role: 'OWNER' }) },
    { name: 'someone new', args: (v) => ({ teamId: v.teamId, user: `${unique('newcomer')}@example.com` }) },
  ],
  'Mutation.createApiKey': [
    { name: "for the victim's owner", args: (v) => ({ name: 'stolen', user: v.owner.id }), refusal: 'forbidden' },
    { name: 'for oneself', args: () => ({ name: 'mine' }), refusal: 'self' },
  ],
  'Mutation.createChatCompletion': { args: (v) => ({ input: { model: v.endpoints.failed, messages: MESSAGES } }) },
  'Mutation.createEndpoint': { args: (v) => ({ input: createInput(v.projectId) }) },
  'Mutation.createEndpointFromArtifact': ARTIFACT_CASES<GraphQLCase>((input) => ({ args: (v, me) => ({ input: input(v, me) }) })),
  'Mutation.createProject': [
    { name: "in the victim's team", args: (v) => ({ name: 'intruder', teamId: v.teamId }) },
    { name: 'in the acting team', args: () => ({ name: 'mine' }), refusal: 'self' },
  ],
  'Mutation.createTeam': { args: () => ({ name: 'mine' }), refusal: 'self' },
  'Mutation.createUser': {
    args: () => ({ email: `${unique('created')}@example.com`, name: 'Created', isAdmin: true }),
    refusal: 'forbidden',
    control: 'admin',
  },
  'Mutation.declineTeamInvitation': { args: (v) => ({ id: v.invitationId }) },
  'Mutation.deleteEndpoint': { args: (v) => ({ id: v.endpoints.running }) },
  'Mutation.removeTeamMember': [
    { name: 'a member', args: (v) => ({ teamId: v.teamId, userId: v.memberId }) },
    { name: 'the caller', args: (v, me) => ({ teamId: v.teamId, userId: me.userId }) },
  ],
  'Mutation.restartEndpoint': { args: (v) => ({ id: v.endpoints.failed }) },
  'Mutation.revokeApiKey': { args: (v) => ({ id: v.spareKeyId }) },
  'Mutation.rollbackEndpoint': { args: (v) => ({ id: v.endpoints.running, versionIndex: 0 }) },
  'Mutation.sleepEndpoint': { args: (v) => ({ id: v.endpoints.running }) },
  'Mutation.terminateEndpoint': { args: (v) => ({ id: v.endpoints.running }) },
  'Mutation.updateEndpoint': {
    args: (v) => ({ id: v.endpoints.running, input: { name: 'hijacked', autoscalingPolicy: { maxReplica: 3 } } }),
  },
  'Mutation.wakeEndpoint': { args: (v) => ({ id: v.endpoints.sleeping }) },

  'Subscription.chatCompletion': { args: (v) => ({ input: { model: v.endpoints.failed, messages: MESSAGES } }) },
  'Subscription.endpointEvents': { args: (v) => ({ projectId: v.projectId, after: '0' }) },
  'Subscription.endpointMetrics': { args: (v) => ({ id: v.endpoints.running }) },
  'Subscription.endpointStatus': { args: (v) => ({ endpointId: v.endpoints.running }) },
  'Subscription.replicaLogs': [
    { args: (v) => ({ endpointId: v.endpoints.running, tail: 10 }) },
    // A replica is looked up within the endpoint named: the caller's own endpoint does not reach the victim's replica.
    { name: "the caller's endpoint, the victim's replica", args: (v, me) => ({ endpointId: me.endpointId, replicaId: v.replicaId }) },
  ],
};

/**
 * Fields left out of the generated selections, and why: `Endpoint.logs` reads
 * an engine's log through the runtime, which the gateway-only test has not
 * (its error, on a non-null field, would null the endpoint for the control
 * too); its access is the endpoint's, and is tested through the logs route
 * and the replicaLogs subscription.
 */
export const UNSELECTED_FIELDS = ['Endpoint.logs'];

const running = (v: Victim) => ({ id: v.endpoints.running });

/**
 * One row per REST route, named `METHOD path-template`: the router's table
 * (`endpointRoutes(services).list()`), and the OpenAI-compatible routes
 * dispatched by path (each `const *_PATH` of src/http/rest; a row for a path
 * below one, such as `/models/:id`, is that path's too).
 */
export const REST_MATRIX: Record<string, RestCase | RestCase[]> = {
  'POST /dedicated/beta/endpoint': { body: (v) => createInput(v.projectId) },
  'GET /dedicated/beta/endpoint': [
    { name: "the victim's project", query: (v) => ({ projectId: v.projectId }) },
    { name: "the acting team's", refusal: 'self' },
  ],
  'GET /dedicated/beta/endpoint/:id': { params: running },
  'PUT /dedicated/beta/endpoint/:id': { params: running, body: () => ({ name: 'hijacked', newVersionComment: 'mine now' }) },
  'DELETE /dedicated/beta/endpoint/:id': { params: running },
  'GET /dedicated/beta/endpoint/:id/version': { params: running },
  'GET /dedicated/beta/endpoint/:id/status': { params: running },
  'GET /dedicated/beta/endpoint/:id/replicas': { params: running },
  'GET /dedicated/beta/endpoint/:id/events': { params: running },
  'GET /dedicated/beta/endpoint/:id/logs': [
    { params: running },
    { name: 'followed', params: running, query: () => ({ follow: 'true' }) },
    {
      name: "the caller's endpoint, the victim's replica",
      params: (_, me) => ({ id: me.endpointId }),
      query: (v) => ({ replica: v.replicaId }),
    },
  ],
  'POST /dedicated/endpoint/wandb-artifact-create': ARTIFACT_CASES<RestCase>((input) => ({ body: input })),
  'PUT /dedicated/beta/endpoint/:id/restart': { params: (v) => ({ id: v.endpoints.failed }) },
  'PUT /dedicated/beta/endpoint/:id/wake': { params: (v) => ({ id: v.endpoints.sleeping }) },
  'PUT /dedicated/beta/endpoint/:id/sleep': { params: running },
  'PUT /dedicated/beta/endpoint/:id/terminate': { params: running },

  'POST /dedicated/v1/chat/completions': { body: (v) => ({ model: v.endpoints.failed, messages: MESSAGES }) },
  'POST /dedicated/v1/completions': { body: (v) => ({ model: v.endpoints.failed, prompt: 'hello' }) },
  'POST /dedicated/v1/tokenize': { body: (v) => ({ model: v.endpoints.failed, prompt: 'hello' }) },
  'POST /dedicated/v1/detokenize': { body: (v) => ({ model: v.endpoints.failed, tokens: [1, 2] }) },
  'GET /dedicated/v1/models': { refusal: 'self' },
  'GET /dedicated/v1/models/:id': { params: running },
  'GET /metrics': { refusal: 'forbidden', control: 'admin' },
};

/** Append-only logs and samples: a refused request is recorded (request_log), and timers sample (see the file's comment). */
export const LOG_TABLES = ['request_log', 'request_content', 'endpoint_metrics_minute', 'gateway_queue_depth'];
/** Per table, columns left out of the comparison. */
export const IGNORED_COLUMNS: Record<string, string[]> = { api_keys: ['last_used_at'] };
