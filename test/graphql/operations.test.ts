/** Every query and mutation, through the typed SDK (graphql-request and the generated documents) over a real socket. */
import { ClientError } from 'graphql-request';
import { beforeAll, describe, expect, test } from 'vitest';
import {
  AcceptTeamInvitationDocument,
  AddTeamMemberDocument,
  CreateApiKeyDocument,
  CreateEndpointDocument,
  CreateProjectDocument,
  CreateTeamDocument,
  CreateUserDocument,
  DeleteEndpointDocument,
  EndpointDocument,
  EndpointsDocument,
  EndpointVersionsDocument,
  InstanceOptionsDocument,
  MeDocument,
  ProjectDocument,
  RemoveTeamMemberDocument,
  RestartEndpointDocument,
  RevokeApiKeyDocument,
  RollbackEndpointDocument,
  SleepEndpointDocument,
  TeamDocument,
  TeamsDocument,
  TerminateEndpointDocument,
  UpdateEndpointDocument,
  WakeEndpointDocument,
  createClient,
  type CreateEndpointInput,
} from '../../src/sdk/client.js';
import type { EndpointVersionsQuery } from '../../src/sdk/generated/graphql.js';
import { H100_X1, startTestGateway, type SeededProject, type SeededUser, type TestGateway } from '../support/gateway.js';

let t: TestGateway;
let admin: SeededUser;
let alice: SeededUser;
let bob: SeededUser;
let project: SeededProject;

beforeAll(async () => {
  t = await startTestGateway();
  admin = await t.seed.user({ admin: true });
  alice = await t.seed.user();
  bob = await t.seed.user();
  project = await alice.project('graphql');
});

const input = (overrides: Partial<CreateEndpointInput> = {}): CreateEndpointInput => ({
  projectId: project.id,
  name: 'gql',
  instanceOptionId: H100_X1,
  hfModelRepo: 'org/tiny-model',
  advanced: {},
  ...overrides,
});

async function createEndpoint(overrides: Partial<CreateEndpointInput> = {}): Promise<string> {
  const { createEndpoint } = await alice.graphql.request(CreateEndpointDocument, { input: input(overrides) });
  if (createEndpoint.__typename !== 'CreateEndpointSuccess') throw new Error(createEndpoint.__typename);
  return createEndpoint.endpoint.id;
}

describe('queries', () => {
  test('me, teams, team and project', async () => {
    const { me } = await alice.graphql.request(MeDocument);
    expect(me.user).toEqual({ id: alice.user.id, email: alice.user.email, name: alice.user.name, isAdmin: false });
    expect(me.defaultTeam?.id).toBe(alice.teamId);
    expect(me.apiKeys).toHaveLength(1);
    expect(me.apiKeys[0]!.prefix).toBe(alice.key.slice(0, 12));

    const { teams } = await alice.graphql.request(TeamsDocument);
    expect(teams).toHaveLength(1);
    expect(teams[0]).toMatchObject({ id: alice.teamId, myRole: 'OWNER', members: [{ role: 'OWNER', user: { id: alice.user.id } }] });
    expect(teams[0]!.projects.map((p) => p.id)).toContain(project.id);

    expect((await alice.graphql.request(TeamDocument, { id: alice.teamId })).team?.id).toBe(alice.teamId);
    expect((await bob.graphql.request(TeamDocument, { id: alice.teamId })).team).toBeNull();

    const { project: p } = await alice.graphql.request(ProjectDocument, { id: project.id });
    expect(p).toMatchObject({ id: project.id, name: 'graphql', team: { id: alice.teamId } });
    expect((await bob.graphql.request(ProjectDocument, { id: project.id })).project).toBeNull();
  });

  test('endpoint(id) with status, spec and current version; null for another team', async () => {
    const id = await createEndpoint({ advanced: { maxBatchSize: 3 }, autoscalingPolicy: { maxReplica: 2 } });
    const { endpoint } = await alice.graphql.request(EndpointDocument, { id });
    expect(endpoint).toMatchObject({
      id,
      name: 'gql',
      status: { endpointId: id, status: 'INITIALIZING', phase: 'REQUESTING_VIRTUAL_MACHINE', errorCode: null, currReplicaCnt: 0 },
      spec: {
        gpuType: 'H100',
        numGpu: 1,
        maxBatchSize: 3,
        autoscalingMax: 2,
        projectId: project.id,
        teamId: alice.teamId,
        creatorId: alice.user.id,
      },
      currentVersion: { versionIndex: 0, comment: null, rolloutState: 'RECORDED' },
    });
    expect((await bob.graphql.request(EndpointDocument, { id })).endpoint).toBeNull();
  });

  test('endpoints(projectId, first, after) pages; first outside 1..100 is an error naming the argument', async () => {
    const p = await alice.project('paged');
    const ids = [await p.endpoint({ name: 'a' }), await p.endpoint({ name: 'b' }), await p.endpoint({ name: 'c' })];
    const page1 = await alice.graphql.request(EndpointsDocument, { projectId: p.id, first: 2 });
    expect(page1.endpoints.edges.map((e) => e.node.id)).toEqual(ids.slice(0, 2));
    expect(page1.endpoints.edges[0]!.node.project).toEqual({
      id: p.id,
      name: 'paged',
      team: { id: alice.teamId, name: expect.any(String) },
    });
    expect(page1.endpoints.pageInfo.hasNextPage).toBe(true);
    const page2 = await alice.graphql.request(EndpointsDocument, { projectId: p.id, first: 2, after: page1.endpoints.pageInfo.endCursor });
    expect(page2.endpoints.edges.map((e) => e.node.id)).toEqual(ids.slice(2));
    expect(page2.endpoints.pageInfo.hasNextPage).toBe(false);

    for (const first of [0, 101]) {
      const error = await alice.graphql.request(EndpointsDocument, { projectId: p.id, first }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ClientError);
      expect((error as ClientError).response.errors![0]).toMatchObject({
        message: 'invalid request: first: must be an integer from 1 to 100',
        extensions: { code: 'INVALID_ARGUMENT', fields: [{ field: 'first', message: 'must be an integer from 1 to 100' }] },
      });
    }
    const other = await bob.graphql.request(EndpointsDocument, { projectId: p.id }).catch((e: unknown) => e);
    expect((other as ClientError).response.errors![0]!.extensions).toEqual({ code: 'NOT_FOUND' });
  });

  test('Endpoint.versions is a connection walked with first/after', async () => {
    const id = await createEndpoint();
    for (let i = 1; i <= 4; i++) await alice.graphql.request(UpdateEndpointDocument, { id, input: { newVersionComment: `v${i}` } });
    const seen: number[] = [];
    let after: string | null | undefined;
    do {
      const { endpoint } = await alice.graphql.request(EndpointVersionsDocument, { id, first: 2, after });
      seen.push(...endpoint!.versions.edges.map((e) => e.node.versionIndex));
      after = endpoint!.versions.pageInfo.hasNextPage ? endpoint!.versions.pageInfo.endCursor : null;
    } while (after);
    expect(seen).toEqual([0, 1, 2, 3, 4]);
    // A history view: newest first, `after` paging towards older versions.
    const newest: number[] = [];
    after = undefined;
    do {
      const { endpoint }: EndpointVersionsQuery = await alice.graphql.request(EndpointVersionsDocument, {
        id,
        first: 2,
        after,
        newestFirst: true,
      });
      newest.push(...endpoint!.versions.edges.map((e) => e.node.versionIndex));
      after = endpoint!.versions.pageInfo.hasNextPage ? endpoint!.versions.pageInfo.endCursor : null;
    } while (after);
    expect(newest).toEqual([4, 3, 2, 1, 0]);
    const error = await alice.graphql.request(EndpointVersionsDocument, { id, first: 101 }).catch((e: unknown) => e);
    expect((error as ClientError).response.errors![0]!.extensions).toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  test('instanceOptions lists the 16 options', async () => {
    const { instanceOptions } = await alice.graphql.request(InstanceOptionsDocument);
    expect(instanceOptions).toHaveLength(16);
    expect(instanceOptions).toContainEqual({ id: 'ShbPuOs4tfGb', gpuType: 'A100', numGpu: 1, gpuMemoryGb: 80 });
    expect(instanceOptions).toContainEqual({ id: 'drbc6G9FxJWZ', gpuType: 'B200', numGpu: 8, gpuMemoryGb: 192 });
  });

  test('no key is 401 and a foreign team header is 403, with codes', async () => {
    const anonymous = await fetch(new URL('/graphql', t.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ me { user { id } } }' }),
    });
    expect(anonymous.status).toBe(401);
    expect((await anonymous.json()).errors[0].extensions.code).toBe('UNAUTHENTICATED');
    const foreign = await createClient(t.url, bob.key, { team: alice.teamId })
      .request(MeDocument)
      .catch((e: unknown) => e);
    expect((foreign as ClientError).response.status).toBe(403);
    expect((foreign as ClientError).response.errors![0]!.extensions).toEqual({ code: 'FORBIDDEN' });
  });
});

describe('endpoint mutations', () => {
  test('createEndpoint: success, and InvalidArgumentError naming GraphQL fields', async () => {
    const bad = await alice.graphql.request(CreateEndpointDocument, {
      input: input({ name: '', advanced: { maxBatchSize: 0 }, autoscalingPolicy: { minReplica: 2, maxReplica: 1 } }),
    });
    expect(bad.createEndpoint).toEqual({
      __typename: 'InvalidArgumentError',
      message: expect.stringContaining('invalid request'),
      fields: [
        { field: 'name', message: 'must not be empty' },
        { field: 'advanced.maxBatchSize', message: 'must be from 1 to 1024' },
      ],
    });
    const foreign = await bob.graphql.request(CreateEndpointDocument, { input: input() });
    expect(foreign.createEndpoint).toEqual({ __typename: 'NotFoundError', message: `project '${project.id}' not found` });
  });

  test('updateEndpoint appends a version; rollbackEndpoint copies an old spec into a new version', async () => {
    const id = await createEndpoint({ name: 'original' });
    const updated = await alice.graphql.request(UpdateEndpointDocument, {
      id,
      input: { name: 'changed', advanced: { maxInputLength: 100 }, hfModelRepoRevision: 'abc' },
    });
    expect(updated.updateEndpoint).toMatchObject({
      __typename: 'UpdateEndpointSuccess',
      endpoint: { name: 'changed', spec: { maxInputLength: 100, hfModelRepoRevision: 'abc' }, currentVersion: { versionIndex: 1 } },
    });
    const rolled = await alice.graphql.request(RollbackEndpointDocument, { id, versionIndex: 0 });
    expect(rolled.rollbackEndpoint).toMatchObject({
      __typename: 'RollbackEndpointSuccess',
      endpoint: {
        name: 'original',
        spec: { maxInputLength: 2048, hfModelRepoRevision: null },
        currentVersion: { versionIndex: 2, comment: 'Rollback to version 0' },
      },
    });
    const { endpoint } = await alice.graphql.request(EndpointVersionsDocument, { id });
    expect(endpoint!.versions.edges.map((e) => [e.node.versionIndex, e.node.rolledBackFrom, e.node.spec.name])).toEqual([
      [0, null, 'original'],
      [1, null, 'changed'],
      [2, 0, 'original'],
    ]);
    const missing = await alice.graphql.request(RollbackEndpointDocument, { id, versionIndex: 9 });
    expect(missing.rollbackEndpoint).toMatchObject({ __typename: 'NotFoundError', message: `version '9 of endpoint ${id}' not found` });
    const invalid = await alice.graphql.request(UpdateEndpointDocument, { id, input: { instanceOptionId: 'nope' } });
    expect(invalid.updateEndpoint).toMatchObject({ __typename: 'InvalidArgumentError', fields: [{ field: 'instanceOptionId' }] });
  });

  test('sleep, wake, terminate and restart; InvalidTransitionError names the status', async () => {
    const id = await createEndpoint();
    const early = await alice.graphql.request(SleepEndpointDocument, { id });
    expect(early.sleepEndpoint).toEqual({
      __typename: 'InvalidTransitionError',
      message: 'cannot sleep an endpoint whose status is INITIALIZING',
      status: 'INITIALIZING',
      action: 'sleep',
    });
    await t.setStatus(id, 'RUNNING');
    expect((await alice.graphql.request(SleepEndpointDocument, { id })).sleepEndpoint).toMatchObject({
      endpoint: { status: { status: 'SLEEPING' } },
    });
    expect((await alice.graphql.request(WakeEndpointDocument, { id })).wakeEndpoint).toMatchObject({
      endpoint: { status: { status: 'AWAKING', phase: 'ENGINE_INITIALIZING' } },
    });
    expect((await alice.graphql.request(TerminateEndpointDocument, { id })).terminateEndpoint).toMatchObject({
      endpoint: { status: { status: 'TERMINATING' } },
    });
    expect((await alice.graphql.request(RestartEndpointDocument, { id })).restartEndpoint).toMatchObject({
      __typename: 'InvalidTransitionError',
      status: 'TERMINATING',
    });
    await t.setStatus(id, 'FAILED');
    expect((await alice.graphql.request(RestartEndpointDocument, { id })).restartEndpoint).toMatchObject({
      endpoint: { status: { status: 'INITIALIZING', phase: 'REQUESTING_VIRTUAL_MACHINE' } },
    });
    expect((await bob.graphql.request(WakeEndpointDocument, { id })).wakeEndpoint).toMatchObject({ __typename: 'NotFoundError' });
  });

  test('deleteEndpoint', async () => {
    const id = await createEndpoint();
    expect((await bob.graphql.request(DeleteEndpointDocument, { id })).deleteEndpoint.__typename).toBe('NotFoundError');
    expect((await alice.graphql.request(DeleteEndpointDocument, { id })).deleteEndpoint).toEqual({
      __typename: 'DeleteEndpointSuccess',
      endpointId: id,
    });
    expect((await alice.graphql.request(EndpointDocument, { id })).endpoint).toBeNull();
  });
});

describe('identity mutations', () => {
  test('createUser is for admins; createApiKey shows the key once; revokeApiKey ends it', async () => {
    expect((await alice.graphql.request(CreateUserDocument, { email: 'x@example.com', name: 'X' })).createUser.__typename).toBe(
      'ForbiddenError',
    );
    const created = await admin.graphql.request(CreateUserDocument, { email: 'dana@example.com', name: 'Dana' });
    expect(created.createUser).toMatchObject({ __typename: 'CreateUserSuccess', user: { email: 'dana@example.com' } });
    const duplicate = await admin.graphql.request(CreateUserDocument, { email: 'dana@example.com', name: 'Dana' });
    expect(duplicate.createUser.__typename).toBe('ConflictError');
    const invalid = await admin.graphql.request(CreateUserDocument, { email: 'not-an-email', name: 'D' });
    expect(invalid.createUser).toMatchObject({
      __typename: 'InvalidArgumentError',
      fields: [{ field: 'email', message: 'must be an email address' }],
    });

    const forDana = await admin.graphql.request(CreateApiKeyDocument, { name: 'dana laptop', user: 'dana@example.com' });
    if (forDana.createApiKey.__typename !== 'CreateApiKeySuccess') throw new Error('expected a key');
    const dana = createClient(t.url, forDana.createApiKey.secret);
    expect((await dana.request(MeDocument)).me.user.email).toBe('dana@example.com');
    expect((await alice.graphql.request(CreateApiKeyDocument, { name: 'x', user: 'dana@example.com' })).createApiKey.__typename).toBe(
      'ForbiddenError',
    );

    const own = await dana.request(CreateApiKeyDocument, { name: 'second' });
    if (own.createApiKey.__typename !== 'CreateApiKeySuccess') throw new Error('expected a key');
    expect((await alice.graphql.request(RevokeApiKeyDocument, { id: own.createApiKey.apiKey.id })).revokeApiKey.__typename).toBe(
      'NotFoundError',
    );
    const revoked = await dana.request(RevokeApiKeyDocument, { id: own.createApiKey.apiKey.id });
    expect(revoked.revokeApiKey).toMatchObject({ __typename: 'RevokeApiKeySuccess', apiKey: { revokedAt: expect.any(String) } });
    const rejected = await createClient(t.url, own.createApiKey.secret)
      .request(MeDocument)
      .catch((e: unknown) => e);
    expect((rejected as ClientError).response.status).toBe(401);
  });

  test('createTeam, addTeamMember, removeTeamMember and createProject', async () => {
    const created = await alice.graphql.request(CreateTeamDocument, { name: 'research' });
    if (created.createTeam.__typename !== 'CreateTeamSuccess') throw new Error('expected a team');
    const teamId = created.createTeam.team.id;
    expect(created.createTeam.team.myRole).toBe('OWNER');

    expect((await bob.graphql.request(AddTeamMemberDocument, { teamId, user: bob.user.email })).addTeamMember.__typename).toBe(
      'NotFoundError',
    );
    // Alice owns the team but is no admin: adding Bob invites him, and he is a member once he accepts.
    const invited = await alice.graphql.request(AddTeamMemberDocument, { teamId, user: bob.user.email });
    if (invited.addTeamMember.__typename !== 'InviteTeamMemberSuccess') throw new Error(invited.addTeamMember.__typename);
    expect(invited.addTeamMember.invitation).toMatchObject({ teamId, invitee: bob.user.email, role: 'MEMBER' });
    const accepted = await bob.graphql.request(AcceptTeamInvitationDocument, { id: invited.addTeamMember.invitation.id });
    expect(accepted.acceptTeamInvitation).toMatchObject({ member: { role: 'MEMBER', user: { id: bob.user.id } }, team: { id: teamId } });
    expect((await bob.graphql.request(AddTeamMemberDocument, { teamId, user: admin.user.email })).addTeamMember.__typename).toBe(
      'ForbiddenError',
    );

    const proj = await bob.graphql.request(CreateProjectDocument, { name: 'shared', teamId });
    expect(proj.createProject).toMatchObject({ __typename: 'CreateProjectSuccess', project: { name: 'shared', team: { id: teamId } } });
    const blank = await bob.graphql.request(CreateProjectDocument, { name: ' ', teamId });
    expect(blank.createProject).toMatchObject({ __typename: 'InvalidArgumentError', fields: [{ field: 'name' }] });

    const lastOwner = await alice.graphql.request(RemoveTeamMemberDocument, { teamId, userId: alice.user.id });
    expect(lastOwner.removeTeamMember.__typename).toBe('ConflictError');
    const removed = await alice.graphql.request(RemoveTeamMemberDocument, { teamId, userId: bob.user.id });
    expect(removed.removeTeamMember).toEqual({ __typename: 'RemoveTeamMemberSuccess', teamId, userId: bob.user.id });
    const gone = await bob.graphql.request(CreateProjectDocument, { name: 'again', teamId });
    expect(gone.createProject.__typename).toBe('NotFoundError');
  });
});

test('an internal fault is masked: no stack, no SQL', async () => {
  // A database connection that goes away makes every resolver throw; the client sees only a generic message.
  const { createServices } = await import('../../src/services/index.js');
  const { startGateway } = await import('../../src/gateway.js');
  const { connectDatabase } = await import('../../src/storage/database.js');
  const dead = connectDatabase(t.dbUrl, { max: 1 });
  const gateway = await startGateway(dead, createServices(dead), { port: 0, host: '127.0.0.1', log: () => {} });
  await dead.end({ timeout: 1 });
  try {
    const res = await fetch(new URL('/graphql', gateway.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${alice.key}` },
      body: JSON.stringify({ query: '{ me { user { id } } }' }),
    });
    const body = await res.json();
    expect(body.errors[0].message).toBe('Unexpected error.');
    expect(JSON.stringify(body)).not.toMatch(/ECONNREFUSED|postgres|stack/i);
    const rest = await fetch(new URL('/dedicated/beta/endpoint', gateway.url), { headers: { authorization: `Bearer ${alice.key}` } });
    expect(rest.status).toBe(500);
    expect(await rest.json()).toEqual({ error: { code: 'INTERNAL', message: 'internal error' } });
  } finally {
    await gateway.close();
  }
});
