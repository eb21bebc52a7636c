/**
 * Event ids follow commit order: a writer takes its id only once the writers
 * before it have committed, so that a subscriber resuming after event N can
 * never miss an event with a smaller id that commits later.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { EndpointEventInput } from '../../src/domain/endpoint.js';
import { insertEvent } from '../../src/storage/events-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => db.close());

const event = (cause: string): EndpointEventInput => ({
  endpointId: 'ep_order',
  projectId: 'pj_order',
  teamId: 'tm_order',
  type: 'STATUS_CHANGED',
  status: 'RUNNING',
  phase: null,
  errorCode: null,
  versionIndex: 3,
  cause,
  actorId: null,
  detail: { message: 'x' },
});

test('a second writer takes no id until the first commits; ids then follow commit order', async () => {
  const lastId = async () => (await db.sql<{ last_value: string }[]>`SELECT last_value FROM endpoint_events_id_seq`)[0]!.last_value;
  let releaseFirst!: () => void;
  const firstHolds = new Promise<void>((resolve) => (releaseFirst = resolve));
  let firstId = '';
  const first = db.sql.begin(async (tx) => {
    firstId = await insertEvent(tx, event('test:first'));
    await firstHolds; // still open: its id is taken, its commit is to come
  });
  while (firstId === '') await new Promise((resolve) => setTimeout(resolve, 5));

  let secondId = '';
  const second = db.sql.begin(async (tx) => {
    secondId = await insertEvent(tx, event('test:second'));
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(secondId).toBe(''); // waiting for the first to commit...
  expect(await lastId()).toBe(firstId); // ...without having drawn an id

  releaseFirst();
  await Promise.all([first, second]);
  expect(BigInt(secondId)).toBe(BigInt(firstId) + 1n);
  const rows = await db.sql`SELECT id::text, cause, version_index, status, detail FROM endpoint_events ORDER BY id`;
  expect(rows).toEqual([
    { id: firstId, cause: 'test:first', version_index: 3, status: 'RUNNING', detail: { message: 'x' } },
    { id: secondId, cause: 'test:second', version_index: 3, status: 'RUNNING', detail: { message: 'x' } },
  ]);
});
