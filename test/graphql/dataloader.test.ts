/** Per-request dataloaders: listing many endpoints with nested fields costs a constant number of statements. */
import { beforeAll, expect, test } from 'vitest';
import { startTestGateway, type SeededUser, type TestGateway } from '../support/gateway.js';

let t: TestGateway;
let alice: SeededUser;

beforeAll(async () => {
  t = await startTestGateway();
  alice = await t.seed.user();
});

const QUERY = `query($projectId: ID!) {
  endpoints(projectId: $projectId, first: 100) {
    nodes { id name status { status phase } spec { gpuType maxBatchSize } project { id name team { id name } } team { name } creator { email } }
  }
}`;

/** Waits out the gateway's background reads (the router reads endpoints as their creation is announced), then caches the key. */
async function quietAndWarm(): Promise<void> {
  await t.queries.settled();
  await alice.rest('POST', '/graphql', { query: '{ __typename }' });
  t.queries.reset();
}

async function statementsFor(projectId: string, expected: number): Promise<number> {
  await quietAndWarm();
  const res = await alice.rest('POST', '/graphql', { query: QUERY, variables: { projectId } });
  expect(res.body.errors).toBeUndefined();
  expect(res.body.data.endpoints.nodes).toHaveLength(expected);
  return t.queries.count;
}

test('50 endpoints with project, team and status cost as many statements as 2', async () => {
  const small = await alice.project('small');
  for (let i = 0; i < 2; i++) await small.endpoint();
  const large = await alice.project('large');
  for (let i = 0; i < 50; i++) await large.endpoint({ name: `e${i}` });

  await statementsFor(small.id, 2); // the first request also records the key's last use
  // The fewest of three: a background statement (the metrics sampler, every few seconds) can only add one.
  const fewest = async (projectId: string, expected: number) => {
    const counts: number[] = [];
    for (let i = 0; i < 3; i++) counts.push(await statementsFor(projectId, expected));
    return Math.min(...counts);
  };
  const forTwo = await fewest(small.id, 2);
  const forFifty = await fewest(large.id, 50);
  expect(forFifty).toBe(forTwo);
  // project check (1) + endpoint page (1) + projects (1) + teams (1) + users (1); the key is cached
  expect(forFifty).toBeLessThanOrEqual(6);
});

test('one endpoint with its project and team is one statement, and never shows another team', async () => {
  const project = await alice.project('single');
  const endpoint = { id: await project.endpoint({ name: 'single' }) };
  const read = `query($id: ID!) { endpoint(id: $id) { id name project { id name team { id name } } team { id name } } }`;
  // The fewest of three: the key's cached principal lives 1 s, and a busy machine can let it expire between the warm
  // request and this one (one more statement).
  const counts: number[] = [];
  const readOnce = async () => {
    await quietAndWarm();
    const answer = await alice.rest('POST', '/graphql', { query: read, variables: { id: endpoint.id } });
    counts.push(t.queries.count);
    return answer;
  };
  await readOnce();
  await readOnce();
  const res = await readOnce();
  expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
  expect(res.body.data.endpoint).toMatchObject({
    id: endpoint.id,
    name: 'single',
    project: { id: project.id, name: 'single', team: { id: project.teamId } },
  });
  expect(res.body.data.endpoint.team).toEqual(res.body.data.endpoint.project.team);
  expect(Math.min(...counts)).toBe(1);

  const mallory = await t.seed.user();
  const hidden = await mallory.rest('POST', '/graphql', { query: read, variables: { id: endpoint.id } });
  expect(hidden.body.errors).toBeUndefined();
  expect(hidden.body.data.endpoint).toBeNull();
});
