import { beforeAll, describe, expect, test } from 'vitest';
import { createBody, restClient, startTestGateway, type SeededProject, type SeededUser, type TestGateway } from '../support/gateway.js';

let t: TestGateway;
let alice: SeededUser;
let bob: SeededUser;
let project: SeededProject;

beforeAll(async () => {
  t = await startTestGateway();
  alice = await t.seed.user();
  bob = await t.seed.user();
  project = await alice.project('alice project');
});

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('POST /dedicated/beta/endpoint', () => {
  test('creates an endpoint, INITIALIZING in REQUESTING_VIRTUAL_MACHINE', async () => {
    const res = await alice.rest('POST', '/dedicated/beta/endpoint', createBody(project.id, { initialVersionComment: 'first' }));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      endpointId: expect.stringMatching(/^ep_[0-9a-z]{14}$/),
      status: 'INITIALIZING',
      phase: 'REQUESTING_VIRTUAL_MACHINE',
      errorCode: null,
      createdAt: expect.stringMatching(ISO),
      updatedAt: expect.stringMatching(ISO),
    });
    const spec = await alice.rest('GET', `/dedicated/beta/endpoint/${res.body.endpointId}`);
    expect(spec.body).toMatchObject({
      versionIndex: 0,
      versionComment: 'first',
      autoscalingMin: 0,
      autoscalingMax: 1,
      autoscalingCooldown: 300,
    });
  });

  test('400 names every bad field and its rule, and writes nothing', async () => {
    const before = await t.sql`SELECT count(*)::int AS n FROM endpoints`;
    const res = await alice.rest('POST', '/dedicated/beta/endpoint', {
      projectId: project.id,
      name: '   ',
      instanceOptionId: 'nope',
      advanced: { max_batch_size: 0, max_input_length: 'long', bogus: true },
      hfModelRepo: 'not a repo',
      autoscalingPolicy: { minReplica: -1, maxReplica: 11, cooldownPeriod: 1.5 },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('INVALID_ARGUMENT');
    const fields = Object.fromEntries(res.body.error.details.fields.map((f: { field: string; message: string }) => [f.field, f.message]));
    expect(fields).toEqual({
      name: 'must not be empty',
      instanceOptionId: expect.stringContaining(
        'must be one of the instance option ids: ShbPuOs4tfGb (1 × A100 80 GB), TwD5AqnBSVN0 (1 × H100 80 GB),',
      ),
      'advanced.bogus': 'is not a known field',
      'advanced.max_batch_size': 'must be from 1 to 1024',
      'advanced.max_input_length': 'must be an integer',
      hfModelRepo: expect.stringContaining("must be a model id such as 'org/model'"),
      'autoscalingPolicy.minReplica': 'must be from 0 to 10',
      'autoscalingPolicy.maxReplica': 'must be from 0 to 10',
      'autoscalingPolicy.cooldownPeriod': 'must be an integer',
    });
    const after = await t.sql`SELECT count(*)::int AS n FROM endpoints`;
    expect(after[0]!.n).toBe(before[0]!.n);
  });

  test('a name of only invisible characters (format characters, bidi controls) or whitespace is blank: 400', async () => {
    for (const name of ['\u202e\u200b', '\u200b', '\ufeff \u2060', '\u3000\t']) {
      const res = await alice.rest('POST', '/dedicated/beta/endpoint', createBody(project.id, { name }));
      expect(res.status, JSON.stringify(name)).toBe(400);
      expect(res.body.error.details.fields).toEqual([{ field: 'name', message: 'must not be empty' }]);
    }
    // A visible name with a format character in it (an emoji sequence joined by U+200D) stays fine.
    const joined = await alice.rest('POST', '/dedicated/beta/endpoint', createBody(project.id, { name: 'team \u{1f469}\u200d\u{1f4bb}' }));
    expect(joined.status).toBe(200);
  });

  test('a name with a C1 control or a bidi override is refused (400 naming the rule); right-to-left text stays fine', async () => {
    const refused = {
      'prod\u009b2J': 'must not contain control characters',
      'prod\u202edetsurt': 'must not contain bidirectional embeddings, overrides or isolates (U+202A to U+202E, U+2066 to U+2069)',
      'a\u2066b\u2069': 'must not contain bidirectional embeddings, overrides or isolates (U+202A to U+202E, U+2066 to U+2069)',
    };
    for (const [name, message] of Object.entries(refused)) {
      const res = await alice.rest('POST', '/dedicated/beta/endpoint', createBody(project.id, { name }));
      expect(res.status, JSON.stringify(name)).toBe(400);
      expect(res.body.error.details.fields).toEqual([{ field: 'name', message }]);
    }
    const hebrew = await alice.rest('POST', '/dedicated/beta/endpoint', createBody(project.id, { name: 'מודל \u200fראשי' }));
    expect(hebrew.status).toBe(200);
  });

  test('cross-field rules: minReplica <= maxReplica, max_input_length <= max_token_count', async () => {
    const res = await alice.rest(
      'POST',
      '/dedicated/beta/endpoint',
      createBody(project.id, {
        autoscalingPolicy: { minReplica: 3, maxReplica: 2 },
        advanced: { max_input_length: 9000, max_token_count: 4096 },
      }),
    );
    expect(res.status).toBe(400);
    expect(res.body.error.details.fields).toEqual([
      { field: 'autoscalingPolicy.minReplica', message: 'must not exceed maxReplica (3 > 2)' },
      { field: 'advanced.max_input_length', message: 'must not exceed max_token_count (9000 > 4096)' },
    ]);
  });

  test('required fields, simplescale, and a body that is not JSON', async () => {
    const missing = await alice.rest('POST', '/dedicated/beta/endpoint', {});
    expect(missing.body.error.details.fields.map((f: { field: string }) => f.field)).toEqual([
      'projectId',
      'name',
      'instanceOptionId',
      'advanced',
      'hfModelRepo',
    ]);
    const both = await alice.rest(
      'POST',
      '/dedicated/beta/endpoint',
      createBody(project.id, { simplescale: { replicas: 2 }, autoscalingPolicy: {} }),
    );
    expect(both.body.error.details.fields).toEqual([{ field: 'simplescale', message: 'cannot be given together with autoscalingPolicy' }]);
    const simple = await alice.rest('POST', '/dedicated/beta/endpoint', createBody(project.id, { simplescale: { replicas: 2 } }));
    const spec = await alice.rest('GET', `/dedicated/beta/endpoint/${simple.body.endpointId}`);
    expect([spec.body.autoscalingMin, spec.body.autoscalingMax]).toEqual([2, 2]);
    const broken = await alice.rest('POST', '/dedicated/beta/endpoint', '{"projectId":');
    expect(broken.status).toBe(400);
    expect(broken.body.error).toMatchObject({
      code: 'INVALID_ARGUMENT',
      details: {
        fields: [{ field: 'body', message: 'must be valid JSON: unexpected end of input (expected a value) at line 1, column 14' }],
      },
    });
    // Where it goes wrong, by line and column (issue 32).
    const misplaced = await alice.rest('POST', '/dedicated/beta/endpoint', '{\n  "projectId": "x",\n  "name": "y",,\n}');
    expect(misplaced.body.error.details.fields).toEqual([
      { field: 'body', message: "must be valid JSON: unexpected ',' (expected a member name in double quotes) at line 3, column 15" },
    ]);
  });

  test('a body over 1 MiB is answered 413 (the client reads the answer, not a reset), and nothing is written', async () => {
    const before = await t.sql`SELECT count(*)::int AS n FROM endpoints`;
    const huge = JSON.stringify(createBody(project.id, { name: 'x'.repeat(3 << 20) }));
    const tooLarge = await alice.rest('POST', '/dedicated/beta/endpoint', huge);
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error).toMatchObject({ code: 'INVALID_ARGUMENT', message: 'request body exceeds 1048576 bytes' });
    expect(await t.sql`SELECT count(*)::int AS n FROM endpoints`).toEqual(before);
    // The connection still serves.
    expect((await alice.rest('GET', `/dedicated/beta/endpoint?projectId=${project.id}`)).status).toBe(200);
  });

  test("another team's project is 404, as is a missing one", async () => {
    const res = await bob.rest('POST', '/dedicated/beta/endpoint', createBody(project.id));
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: { code: 'NOT_FOUND', message: `project '${project.id}' not found` } });
  });
});

describe('authentication and tenancy', () => {
  test('401 without a key, with a wrong key, and with a revoked key', async () => {
    const anonymous = await restClient(t.url)('GET', '/dedicated/beta/endpoint');
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error.code).toBe('UNAUTHENTICATED');
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer');
    const wrong = await restClient(t.url, 'dek_wrong')('GET', '/dedicated/beta/endpoint');
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.message).toBe('invalid or revoked API key');

    const carol = await t.seed.user();
    const keys = await t.services.identity.listApiKeys({ user: carol.user, memberships: new Map(), actingTeamId: null });
    await t.services.identity.revokeApiKey('system', keys[0]!.id);
    expect((await carol.rest('GET', '/dedicated/beta/endpoint')).status).toBe(401);
  });

  test('keys are stored only as hashes', async () => {
    const rows = await t.sql`SELECT * FROM api_keys`;
    const dump = JSON.stringify(rows);
    expect(dump).not.toContain(alice.key);
    expect(dump).not.toContain(alice.key.slice(12));
  });

  test("another team's endpoint answers 404 on every route", async () => {
    const id = await project.endpoint();
    const routes: [string, string][] = [
      ['GET', ''],
      ['PUT', ''],
      ['DELETE', ''],
      ['GET', '/version'],
      ['GET', '/status'],
      ['PUT', '/restart'],
      ['PUT', '/wake'],
      ['PUT', '/sleep'],
      ['PUT', '/terminate'],
    ];
    for (const [method, suffix] of routes) {
      const res = await bob.rest(method, `/dedicated/beta/endpoint/${id}${suffix}`, method === 'PUT' && suffix === '' ? {} : undefined);
      expect(res.status, `${method} ${suffix}`).toBe(404);
      expect(res.body.error).toEqual({ code: 'NOT_FOUND', message: `endpoint '${id}' not found` });
    }
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${id}`)).status).toBe(200);
  });

  test('the team header: 403 for a team the caller is not in; a shared team works', async () => {
    const forbidden = await bob.rest('GET', '/dedicated/beta/endpoint', undefined, { 'x-friendli-team': alice.teamId });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error).toEqual({ code: 'FORBIDDEN', message: `you are not a member of team '${alice.teamId}'` });
    // A header kilobytes long is quoted back cut to 64 characters.
    const long = `team_${'x'.repeat(5000)}`;
    const capped = await bob.rest('GET', '/dedicated/beta/endpoint', undefined, { 'x-friendli-team': long });
    expect(capped.status).toBe(403);
    expect(capped.body.error).toEqual({ code: 'FORBIDDEN', message: `you are not a member of team '${long.slice(0, 64)}…'` });

    // Alice adds Bob to her team; listing with the alias header now shows her team's endpoints.
    const added = await t.services.identity.addTeamMember('system', { teamId: alice.teamId, user: bob.user.email });
    expect(added.type).toBe('ok');
    const listed = await bob.rest('GET', '/dedicated/beta/endpoint', undefined, { 'x-team-id': alice.teamId });
    expect(listed.status).toBe(200);
    expect(Object.keys(listed.body.data).length).toBeGreaterThan(0);
    await t.services.identity.removeTeamMember(
      { user: alice.user, memberships: new Map([[alice.teamId, 'OWNER']]), actingTeamId: alice.teamId },
      { teamId: alice.teamId, userId: bob.user.id },
    );
    expect((await bob.rest('GET', '/dedicated/beta/endpoint', undefined, { 'x-team-id': alice.teamId })).status).toBe(403);
  });

  test('the team header and its alias naming two teams is a 400 naming the rule, not one of them picked; the same team twice is fine', async () => {
    const both = { 'x-friendli-team': alice.teamId, 'x-team-id': bob.teamId };
    const conflict = await alice.rest('GET', '/dedicated/beta/endpoint', undefined, both);
    expect(conflict.status).toBe(400);
    expect(conflict.body.error.code).toBe('INVALID_ARGUMENT');
    expect(conflict.body.error.details.fields).toEqual([
      {
        field: 'X-Team-Id',
        message: 'names another team than X-Friendli-Team: send one team, in either header (x-friendli-team, x-team-id)',
      },
    ]);
    const graphql = await alice.rest('POST', '/graphql', { query: '{ teams { id } }' }, both);
    expect(graphql.body.errors[0].extensions.code).toBe('INVALID_ARGUMENT');
    const same = await alice.rest('GET', '/dedicated/beta/endpoint', undefined, {
      'x-friendli-team': alice.teamId,
      'x-team-id': alice.teamId,
    });
    expect(same.status).toBe(200);
  });
});

describe('reading endpoints', () => {
  test('GET spec has exactly the documented fields plus the extensions', async () => {
    const id = await project.endpoint({ hfModelRepoRevision: 'v1', advanced: { max_batch_size: 4 } });
    const res = await alice.rest('GET', `/dedicated/beta/endpoint/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      name: 'demo',
      gpuType: 'H100',
      numGpu: 1,
      instanceId: 'TwD5AqnBSVN0',
      projectId: project.id,
      creatorId: alice.user.id,
      teamId: alice.teamId,
      autoscalingMin: 0,
      autoscalingMax: 1,
      autoscalingCooldown: 300,
      maxBatchSize: 4,
      maxInputLength: 2048,
      tokenizerSkipSpecialTokens: true,
      tokenizerAddSpecialTokens: false,
      maxTokenCount: 4096,
      maxTokenCountFromModel: true,
      enableContentLogging: false,
      currReplicaCnt: 0,
      desiredReplicaCnt: 0,
      updatedReplicaCnt: 0,
      endpointId: id,
      hfModelRepo: 'org/tiny-model',
      hfModelRepoRevision: 'v1',
      wandbArtifact: null,
      versionIndex: 0,
      versionComment: null,
      createdAt: expect.stringMatching(ISO),
    });
  });

  test('GET status and 404 for an unknown id', async () => {
    const id = await project.endpoint();
    const res = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`);
    expect(res.body).toMatchObject({ endpointId: id, status: 'INITIALIZING', phase: 'REQUESTING_VIRTUAL_MACHINE', errorCode: null });
    const missing = await alice.rest('GET', '/dedicated/beta/endpoint/ep_missing/status');
    expect(missing.status).toBe(404);
  });

  test('GET list pages through a project with cursors; bad limits are 400', async () => {
    const p = await alice.project('listing');
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await p.endpoint({ name: `e${i}` }));
    const first = await alice.rest('GET', `/dedicated/beta/endpoint?projectId=${p.id}&limit=2`);
    expect(Object.keys(first.body.data)).toEqual(ids.slice(0, 2));
    expect(first.body.data[ids[0]!]).toMatchObject({ endpointId: ids[0], status: 'INITIALIZING' });
    const second = await alice.rest('GET', `/dedicated/beta/endpoint?projectId=${p.id}&limit=2&cursor=${first.body.nextCursor}`);
    expect(Object.keys(second.body.data)).toEqual(ids.slice(2, 4));
    const third = await alice.rest('GET', `/dedicated/beta/endpoint?projectId=${p.id}&limit=2&cursor=${second.body.nextCursor}`);
    expect(Object.keys(third.body.data)).toEqual(ids.slice(4));
    expect(third.body.nextCursor).toBeNull();
    for (const limit of ['0', '101', 'ten', '1.5']) {
      const bad = await alice.rest('GET', `/dedicated/beta/endpoint?projectId=${p.id}&limit=${limit}`);
      expect(bad.status).toBe(400);
      expect(bad.body.error.details.fields).toEqual([{ field: 'limit', message: 'must be an integer from 1 to 100' }]);
    }
    const badCursor = await alice.rest('GET', `/dedicated/beta/endpoint?projectId=${p.id}&cursor=garbage`);
    expect(badCursor.body.error.details.fields).toEqual([{ field: 'cursor', message: 'is not a cursor returned by this list' }]);
    expect((await bob.rest('GET', `/dedicated/beta/endpoint?projectId=${p.id}`)).status).toBe(404);
  });
});

describe('updates and versions', () => {
  test('PUT appends exactly one version per call, an empty body included, and answers the new spec', async () => {
    const id = await project.endpoint();
    const empty = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, {});
    expect(empty.status).toBe(200);
    expect(empty.body.versionIndex).toBe(1);
    const noBody = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`);
    expect(noBody.body.versionIndex).toBe(2);
    const changed = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, {
      name: 'renamed',
      instanceOptionId: 'Tu6GjBnfHPe4',
      advanced: { max_batch_size: 32 },
      autoscalingPolicy: { maxReplica: 4 },
      newVersionComment: 'bigger',
    });
    expect(changed.body).toMatchObject({
      name: 'renamed',
      gpuType: 'H200',
      numGpu: 2,
      maxBatchSize: 32,
      maxInputLength: 2048,
      autoscalingMin: 0,
      autoscalingMax: 4,
      versionIndex: 3,
      versionComment: 'bigger',
    });
    const versions = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/version`);
    expect(Object.keys(versions.body.data)).toEqual(['0', '1', '2', '3']);
    expect(versions.body.data['0'].name).toBe('demo');
    expect(versions.body.nextCursor).toBeNull();
  });

  test('an invalid update is 400 and appends nothing; merged rules are checked', async () => {
    const id = await project.endpoint({ autoscalingPolicy: { minReplica: 1, maxReplica: 2 } });
    const res = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { autoscalingPolicy: { maxReplica: 0 } });
    expect(res.status).toBe(400);
    expect(res.body.error.details.fields).toEqual([
      { field: 'autoscalingPolicy.minReplica', message: 'must not exceed maxReplica (1 > 0)' },
    ]);
    const typo = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { nmae: 'x' });
    expect(typo.body.error.details.fields).toEqual([{ field: 'nmae', message: "is not a known field; did you mean 'name'?" }]);
    // A field in another case or separator style names the documented one (issue 32).
    const camel = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { maxBatchSize: 4 } });
    expect(camel.body.error.details.fields).toEqual([
      { field: 'advanced.maxBatchSize', message: "is not a known field; did you mean 'max_batch_size'?" },
    ]);
    const versions = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/version`);
    expect(Object.keys(versions.body.data)).toEqual(['0']);
  });

  test('two concurrent updates produce two distinct versions', async () => {
    const id = await project.endpoint();
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { newVersionComment: `c${i}` })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(new Set(results.map((r) => r.body.versionIndex)).size).toBe(8);
    const rows = await t.sql`SELECT version_index, comment FROM endpoint_versions WHERE endpoint_id = ${id} ORDER BY version_index`;
    expect(rows.map((r) => r.version_index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(new Set(rows.slice(1).map((r) => r.comment)).size).toBe(8);
  });

  test("version history pages with the official Python SDK's bytes form of the cursor, b'<cursor>', and nothing else new", async () => {
    const id = await project.endpoint();
    for (let i = 0; i < 4; i++) await t.services.endpoints.update(await principalOf(alice), id, { newVersionComment: `v${i + 1}` });
    const base = `/dedicated/beta/endpoint/${id}/version`;
    const seen: number[] = [];
    let cursor: string | null = null;
    do {
      // The SDK puts str(bytes) in the query: b'<cursor>', percent-encoded by its HTTP client.
      const query: string = cursor ? `&cursor=${encodeURIComponent(`b'${cursor}'`)}` : '';
      const res: { status: number; body: { data: Record<string, { versionIndex: number }>; nextCursor: string | null } } = await alice.rest(
        'GET',
        `${base}?limit=2${query}`,
      );
      expect(res.status).toBe(200);
      seen.push(...Object.values(res.body.data).map((spec) => spec.versionIndex));
      cursor = res.body.nextCursor;
    } while (cursor);
    expect(seen).toEqual([0, 1, 2, 3, 4]);

    const first = await alice.rest('GET', `${base}?limit=2`);
    const issued = first.body.nextCursor as string;
    const plain = await alice.rest('GET', `${base}?limit=2&cursor=${issued}`);
    const wrapped = await alice.rest('GET', `${base}?limit=2&cursor=${encodeURIComponent(`b'${issued}'`)}`);
    expect(wrapped.body).toEqual(plain.body);
    // Only that exact wrapping of a cursor we issued: other quotings, and wrapped garbage, are still 400.
    for (const bad of [
      `b"${issued}"`,
      `B'${issued}'`,
      `b'${issued}`,
      `'${issued}'`,
      `b'b'${issued}''`,
      `b''`,
      `b'bm9wZQ'`,
      `b'${issued}=='`,
    ]) {
      const res = await alice.rest('GET', `${base}?limit=2&cursor=${encodeURIComponent(bad)}`);
      expect(res.status, bad).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { fields: [{ field: 'cursor' }] } });
    }
  });

  test('version history pages at limits 1 and 100, rejects 0 and 101, and walks 130 versions with cursors', async () => {
    const id = await project.endpoint();
    for (let i = 0; i < 129; i++) await t.services.endpoints.update(await principalOf(alice), id, { newVersionComment: `v${i + 1}` });
    const base = `/dedicated/beta/endpoint/${id}/version`;
    for (const limit of [0, 101]) {
      const res = await alice.rest('GET', `${base}?limit=${limit}`);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { fields: [{ field: 'limit' }] } });
    }
    const one = await alice.rest('GET', `${base}?limit=1`);
    expect(Object.keys(one.body.data)).toEqual(['0']);
    const defaultPage = await alice.rest('GET', base);
    expect(Object.keys(defaultPage.body.data)).toHaveLength(20);

    const seen: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: { body: { data: Record<string, { versionIndex: number }>; nextCursor: string | null } } = await alice.rest(
        'GET',
        `${base}?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
      );
      for (const [key, spec] of Object.entries(res.body.data)) {
        expect(spec.versionIndex).toBe(Number(key));
        seen.push(spec.versionIndex);
      }
      cursor = res.body.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(2);
    expect(seen).toEqual(Array.from({ length: 130 }, (_, i) => i));

    const walkedByOne: number[] = [];
    cursor = null;
    for (let i = 0; i < 3; i++) {
      const res: { body: { data: Record<string, unknown>; nextCursor: string | null } } = await alice.rest(
        'GET',
        `${base}?limit=1${cursor ? `&cursor=${cursor}` : ''}`,
      );
      walkedByOne.push(...Object.keys(res.body.data).map(Number));
      cursor = res.body.nextCursor;
    }
    expect(walkedByOne).toEqual([0, 1, 2]);
  });
});

async function principalOf(u: SeededUser) {
  const { authenticate } = await import('../../src/services/principal.js');
  const result = await authenticate(t.sql, `Bearer ${u.key}`, undefined);
  if (result.type === 'error') throw new Error(result.error.message);
  return result.value;
}

describe('lifecycle actions', () => {
  test('sleep and terminate answer without phase; wake and restart with it', async () => {
    const id = await project.endpoint();
    await t.setStatus(id, 'RUNNING');
    const slept = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`);
    expect(slept.status).toBe(200);
    expect(slept.body).toEqual({
      endpointId: id,
      status: 'SLEEPING',
      errorCode: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect('phase' in slept.body).toBe(false);

    const woken = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/wake`);
    expect(woken.body).toMatchObject({ status: 'AWAKING', phase: 'ENGINE_INITIALIZING' });

    const terminated = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/terminate`);
    expect(terminated.body).toMatchObject({ status: 'TERMINATING' });
    expect('phase' in terminated.body).toBe(false);

    await t.setStatus(id, 'TERMINATED');
    const restarted = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/restart`);
    expect(restarted.body).toMatchObject({ status: 'INITIALIZING', phase: 'REQUESTING_VIRTUAL_MACHINE', errorCode: null });
  });

  test('the actions and DELETE take no body: members are 400s naming them; empty, null and {} are fine', async () => {
    const id = await project.endpoint();
    await t.setStatus(id, 'RUNNING');
    const before = await t.sql`SELECT count(*)::int AS n FROM endpoint_events WHERE endpoint_id = ${id}`;
    for (const action of ['sleep', 'wake', 'restart', 'terminate']) {
      const res = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/${action}`, { force: true, replicas: 0 });
      expect(res.status, action).toBe(400);
      expect(res.body.error).toMatchObject({
        code: 'INVALID_ARGUMENT',
        details: {
          fields: [
            { field: 'force', message: 'is not a known field' },
            { field: 'replicas', message: 'is not a known field' },
          ],
        },
      });
    }
    const list = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`, [1]);
    expect(list.status).toBe(400);
    expect(list.body.error.details.fields).toEqual([{ field: 'body', message: 'must be empty: this route takes no body' }]);
    const deleted = await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`, { cascade: true });
    expect(deleted.status).toBe(400);
    expect(deleted.body.error.details.fields).toEqual([{ field: 'cascade', message: 'is not a known field' }]);
    // Nothing happened.
    expect(await t.sql`SELECT count(*)::int AS n FROM endpoint_events WHERE endpoint_id = ${id}`).toEqual(before);
    expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`, {})).body.status).toBe('SLEEPING');
    expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/wake`, 'null')).body.status).toBe('AWAKING');
    expect((await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/terminate`)).body.status).toBe('TERMINATING');
  });

  test('disallowed actions are 409 INVALID_TRANSITION naming the status', async () => {
    const id = await project.endpoint();
    const cases: [string, string][] = [
      ['sleep', 'INITIALIZING'],
      ['wake', 'INITIALIZING'],
      ['restart', 'INITIALIZING'],
    ];
    for (const [action, status] of cases) {
      const res = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/${action}`);
      expect(res.status).toBe(409);
      expect(res.body.error).toEqual({
        code: 'INVALID_TRANSITION',
        message: `cannot ${action} an endpoint whose status is ${status}`,
        details: { status, action },
      });
    }
    // Waking a FAILED endpoint says what does run it again (issue 32).
    await t.setStatus(id, 'FAILED');
    const wake = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/wake`);
    expect(wake.status).toBe(409);
    expect(wake.body.error.message).toBe(
      'cannot wake an endpoint whose status is FAILED: restart it instead (restart runs a FAILED or TERMINATED endpoint again)',
    );
    await t.setStatus(id, 'TERMINATING');
    const update = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { name: 'x' });
    expect(update.status).toBe(409);
    expect(update.body.error.details).toEqual({ status: 'TERMINATING', action: 'update' });
    const terminate = await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/terminate`);
    expect(terminate.body.error.details).toEqual({ status: 'TERMINATING', action: 'terminate' });
  });

  test('update of a serving endpoint rolls out (UPDATING); of a sleeping one only records', async () => {
    const running = await project.endpoint();
    await t.setStatus(running, 'RUNNING');
    await alice.rest('PUT', `/dedicated/beta/endpoint/${running}`, { name: 'v2' });
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${running}/status`)).body.status).toBe('UPDATING');

    const sleeping = await project.endpoint();
    await t.setStatus(sleeping, 'SLEEPING');
    const res = await alice.rest('PUT', `/dedicated/beta/endpoint/${sleeping}`, { name: 'v2' });
    expect(res.body).toMatchObject({ name: 'v2', versionIndex: 1 });
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${sleeping}/status`)).body.status).toBe('SLEEPING');
  });

  test('every status change and version appends an event, in the same order', async () => {
    const id = await project.endpoint();
    await t.setStatus(id, 'RUNNING');
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}`, { name: 'v1' });
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/sleep`);
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/wake`);
    await alice.rest('PUT', `/dedicated/beta/endpoint/${id}/terminate`);
    await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`);
    const events =
      await t.sql`SELECT type, status, phase, version_index, cause, actor_id FROM endpoint_events WHERE endpoint_id = ${id} ORDER BY id`;
    expect(events.map((e) => [e.type, e.status, e.phase, e.version_index, e.cause])).toEqual([
      ['CREATED', 'INITIALIZING', 'REQUESTING_VIRTUAL_MACHINE', 0, 'api:create'],
      ['STATUS_CHANGED', 'UPDATING', null, 1, 'api:update'],
      ['VERSION_ADDED', null, null, 1, 'api:update'],
      ['STATUS_CHANGED', 'SLEEPING', null, null, 'api:sleep'],
      ['STATUS_CHANGED', 'AWAKING', 'ENGINE_INITIALIZING', null, 'api:wake'],
      ['STATUS_CHANGED', 'TERMINATING', null, null, 'api:terminate'],
      ['DELETED', 'TERMINATING', null, null, 'api:delete'],
    ]);
    expect(new Set(events.map((e) => e.actor_id))).toEqual(new Set([alice.user.id]));
  });

  test('DELETE answers 200 with the final status object (what the official SDK accepts), then the endpoint is gone', async () => {
    const id = await project.endpoint();
    const before = await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`);
    const res = await fetch(new URL(`/dedicated/beta/endpoint/${id}`, t.url), {
      method: 'DELETE',
      headers: { authorization: `Bearer ${alice.key}` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = await res.json();
    expect(body).toEqual({
      endpointId: id,
      status: before.body.status,
      phase: before.body.phase,
      errorCode: null,
      createdAt: before.body.createdAt,
      updatedAt: expect.stringMatching(ISO),
    });
    expect(Date.parse(body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(before.body.updatedAt));
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${id}`)).status).toBe(404);
    expect((await alice.rest('DELETE', `/dedicated/beta/endpoint/${id}`)).status).toBe(404);
  });
});

describe('the server', () => {
  test('a method a route does not take is 405 with Allow, in the error shape; HEAD is GET without the body', async () => {
    const id = await project.endpoint();
    const cases: [string, string, string][] = [
      ['PATCH', `/dedicated/beta/endpoint/${id}`, 'GET, HEAD, PUT, DELETE'],
      ['POST', `/dedicated/beta/endpoint/${id}/status`, 'GET, HEAD'],
      ['GET', `/dedicated/beta/endpoint/${id}/sleep`, 'PUT'],
      ['DELETE', '/dedicated/beta/endpoint', 'POST, GET, HEAD'],
      ['PUT', '/dedicated/endpoint/wandb-artifact-create', 'POST'],
    ];
    for (const [method, path, allow] of cases) {
      const res = await alice.rest(method, path);
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get('allow')).toBe(allow);
      expect(res.body).toEqual({
        error: { code: 'METHOD_NOT_ALLOWED', message: `${path} does not accept ${method}: it accepts ${allow}` },
      });
    }
    // Nothing was changed by the PATCH or the GET of an action.
    expect((await alice.rest('GET', `/dedicated/beta/endpoint/${id}/status`)).body.status).toBe('INITIALIZING');

    for (const path of [
      `/dedicated/beta/endpoint/${id}/status`,
      `/dedicated/beta/endpoint/${id}`,
      `/dedicated/beta/endpoint?projectId=${project.id}`,
    ]) {
      const get = await fetch(new URL(path, t.url), { headers: { authorization: `Bearer ${alice.key}` } });
      const head = await fetch(new URL(path, t.url), { method: 'HEAD', headers: { authorization: `Bearer ${alice.key}` } });
      expect(head.status, path).toBe(200);
      expect(head.headers.get('content-type')).toBe(get.headers.get('content-type'));
      expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(await get.text())));
      expect(await head.text()).toBe('');
    }
    const unauthenticated = await fetch(new URL(`/dedicated/beta/endpoint/${id}`, t.url), { method: 'HEAD' });
    expect(unauthenticated.status).toBe(401);
    // An unknown path stays 404, whatever the method.
    expect((await alice.rest('PATCH', '/dedicated/beta/nothing')).status).toBe(404);
  });

  test('health checks need no key; unknown routes are 404 in the error shape', async () => {
    expect(await (await fetch(new URL('/healthz', t.url))).json()).toEqual({ status: 'ok' });
    expect(await (await fetch(new URL('/readyz', t.url))).json()).toEqual({ status: 'ready' });
    const res = await alice.rest('GET', '/dedicated/beta/nothing');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('NOT_FOUND');
  });
});
