/**
 * The gateway's authenticator is never stale and never costs a statement per
 * request in a burst: requests that arrive together share one statement read
 * after they arrived, so a change committed before a request is what that
 * request sees, whichever process made it.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createServices, type Services } from '../../src/services/index.js';
import { Authenticator } from '../../src/services/principal.js';
import type { Queryable } from '../../src/storage/database.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

let db: TestDatabase;
let services: Services;
const statements: string[] = [];
let seeded = 0;

beforeAll(async () => {
  db = await createTestDatabase({ onQuery: (query) => statements.push(query) });
  services = createServices(db.sql);
});

afterAll(async () => {
  await db?.close();
});

async function seedKeys(n: number) {
  const created = await services.identity.createUser('system', { email: `auth${++seeded}@example.com`, name: 'Auth' });
  if (created.type === 'error') throw new Error(created.error.message);
  const keys = [];
  for (let i = 0; i < n; i++) {
    const key = await services.identity.createApiKey('system', { name: `k${i}`, user: created.value.id });
    if (key.type === 'error') throw new Error(key.error.message);
    keys.push({ secret: key.value.secret, id: key.value.record.id });
  }
  return { user: created.value, keys };
}

const holderReads = () => statements.filter((q) => q.includes('FROM api_keys k JOIN users u')).length;

test('a burst of requests with many keys costs one statement, and each gets its own principal', async () => {
  const { user, keys } = await seedKeys(5);
  const auth = new Authenticator(db.sql);
  const before = holderReads();
  const headers = [...keys.map((k) => `Bearer ${k.secret}`), `Bearer ${keys[0]!.secret}`, 'Bearer not_a_key_0123456789', 'Basic abc'];
  const results = await Promise.all(headers.map((h) => auth.authenticate(h, null)));
  expect(holderReads() - before).toBe(1);
  expect(results.slice(0, 6).map((r) => (r.type === 'ok' ? r.value.keyId : r.error.type))).toEqual([...keys.map((k) => k.id), keys[0]!.id]);
  for (const r of results.slice(0, 6)) expect(r.type === 'ok' && r.value.user.id).toBe(user.id);
  expect(results.slice(6).map((r) => r.type === 'error' && r.error.message)).toEqual([
    'invalid or revoked API key',
    'missing API key: send "Authorization: Bearer <API_KEY>"',
  ]);
});

test('requests that arrive while a read is under way share the next one', async () => {
  const { keys } = await seedKeys(4);
  // The first statement is held until released, so that the later requests arrive while it is under way.
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let calls = 0;
  const held = Object.assign(
    (...args: Parameters<Queryable>) => {
      const query = db.sql(...args);
      if (!String(args[0]).includes('FROM api_keys k JOIN users u')) return query; // the keys' last-use writes
      return ++calls === 1 ? gate.then(() => query) : query;
    },
    { unsafe: db.sql.unsafe },
  ) as unknown as Queryable;
  const auth = new Authenticator(held);
  const before = holderReads();
  const results = [auth.authenticate(`Bearer ${keys[0]!.secret}`, null)];
  for (const key of keys.slice(1)) {
    await new Promise((r) => setImmediate(r));
    results.push(auth.authenticate(`Bearer ${key.secret}`, null));
  }
  await new Promise((r) => setTimeout(r, 20));
  expect(calls).toBe(1);
  release();
  const settled = await Promise.all(results);
  expect(settled.map((r) => r.type === 'ok' && r.value.keyId)).toEqual(keys.map((k) => k.id));
  expect(calls).toBe(2);
  expect(holderReads() - before).toBe(2);
});

test('a key revoked through another process (plain SQL here) is refused by the very next request', async () => {
  const { keys } = await seedKeys(1);
  const auth = new Authenticator(db.sql);
  const header = `Bearer ${keys[0]!.secret}`;
  for (let i = 0; i < 3; i++) expect((await auth.authenticate(header, null)).type).toBe('ok');
  await db.sql`UPDATE api_keys SET revoked_at = now() WHERE id = ${keys[0]!.id}`;
  const after = await auth.authenticate(header, null);
  expect(after.type === 'error' && after.error).toMatchObject({ type: 'UNAUTHENTICATED', message: 'invalid or revoked API key' });
});

test('a membership removed by another process is refused by the very next request naming that team', async () => {
  const { user, keys } = await seedKeys(1);
  const auth = new Authenticator(db.sql);
  const header = `Bearer ${keys[0]!.secret}`;
  const team = user.defaultTeamId!;
  expect((await auth.authenticate(header, team)).type).toBe('ok');
  await db.sql`DELETE FROM team_members WHERE user_id = ${user.id} AND team_id = ${team}`;
  const after = await auth.authenticate(header, team);
  expect(after.type === 'error' && after.error.type).toBe('FORBIDDEN');
});
