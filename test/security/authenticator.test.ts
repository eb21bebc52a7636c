/**
 * The gateway's principal cache, and why revocation is still in effect
 * everywhere at once: requests with one key share one read; a change made
 * elsewhere and never announced here is seen once the cache's lifetime has
 * passed; and a narrowing change made through the services returns only when
 * another process (another Authenticator on the same database, with no
 * announcement reaching it) already refuses the old access.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createServices, type Services } from '../../src/services/index.js';
import { Authenticator, PRINCIPAL_TTL_MS } from '../../src/services/principal.js';
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

async function seedKey() {
  const created = await services.identity.createUser('system', { email: `auth${++seeded}@example.com`, name: 'Auth' });
  if (created.type === 'error') throw new Error(created.error.message);
  const key = await services.identity.createApiKey('system', { name: 'k', user: created.value.id });
  if (key.type === 'error') throw new Error(key.error.message);
  const user = created.value;
  const team = await services.identity.createTeam({ user, memberships: new Map(), actingTeamId: null }, { name: `team ${seeded}` });
  if (team.type === 'error') throw new Error(team.error.message);
  return { user, teamId: team.value.id, secret: key.value.secret, keyId: key.value.record.id };
}

const holderReads = () => statements.filter((q) => q.includes('FROM api_keys k JOIN users u')).length;

test('requests with one key share one read while it is cached, and a wrong key is read every time', async () => {
  const { secret, keyId } = await seedKey();
  const auth = new Authenticator(db.sql);
  const before = holderReads();
  const results = await Promise.all(Array.from({ length: 20 }, () => auth.authenticate(`Bearer ${secret}`, null)));
  for (let i = 0; i < 3; i++) await auth.authenticate(`Bearer ${secret}`, null);
  expect(holderReads() - before).toBe(1);
  expect(new Set(results.map((r) => r.type === 'ok' && r.value.keyId))).toEqual(new Set([keyId]));
  await auth.authenticate('Bearer not_a_key_0123456789', null);
  await auth.authenticate('Bearer not_a_key_0123456789', null);
  expect(holderReads() - before).toBe(3);
});

test('a change never announced here is seen once the cache lifetime has passed', async () => {
  const { secret, keyId } = await seedKey();
  const auth = new Authenticator(db.sql);
  const header = `Bearer ${secret}`;
  expect((await auth.authenticate(header, null)).type).toBe('ok');
  await db.sql`UPDATE api_keys SET revoked_at = now() WHERE id = ${keyId}`;
  expect((await auth.authenticate(header, null)).type).toBe('ok'); // cached: nothing told this process
  await new Promise((r) => setTimeout(r, PRINCIPAL_TTL_MS + 20));
  const after = await auth.authenticate(header, null);
  expect(after.type === 'error' && after.error).toMatchObject({ type: 'UNAUTHENTICATED', message: 'invalid or revoked API key' });
});

test("a key revoked through the services is refused by another process's cache by the time the call returns", async () => {
  const { secret, keyId } = await seedKey();
  const elsewhere = new Authenticator(db.sql); // another gateway: no announcement reaches it here
  const header = `Bearer ${secret}`;
  expect((await elsewhere.authenticate(header, null)).type).toBe('ok');
  const started = performance.now();
  const revoked = await services.identity.revokeApiKey('system', keyId);
  expect(revoked.type).toBe('ok');
  expect(performance.now() - started).toBeGreaterThanOrEqual(PRINCIPAL_TTL_MS);
  const after = await elsewhere.authenticate(header, null);
  expect(after.type === 'error' && after.error.type).toBe('UNAUTHENTICATED');
  // Revoking it again changes nothing, and does not wait.
  const again = performance.now();
  expect((await services.identity.revokeApiKey('system', keyId)).type).toBe('ok');
  expect(performance.now() - again).toBeLessThan(PRINCIPAL_TTL_MS);
});

test("a member removed or demoted through the services is refused by another process's cache by the time the call returns", async () => {
  const owner = await seedKey();
  const member = await seedKey();
  const ownerPrincipal = { user: owner.user, memberships: new Map([[owner.teamId, 'OWNER' as const]]), actingTeamId: owner.teamId };
  // Added at once (by the system: a team owner's addition would be an invitation), then demoted by the owner.
  const added = await services.identity.addTeamMember('system', { teamId: owner.teamId, user: member.user.id, role: 'OWNER' });
  expect(added.type).toBe('ok');
  const elsewhere = new Authenticator(db.sql);
  const header = `Bearer ${member.secret}`;
  const seen = await elsewhere.authenticate(header, owner.teamId);
  expect(seen.type === 'ok' && seen.value.memberships.get(owner.teamId)).toBe('OWNER');

  // Demoted: OWNER to MEMBER.
  await services.identity.addTeamMember(ownerPrincipal, { teamId: owner.teamId, user: member.user.id, role: 'MEMBER' });
  const demoted = await elsewhere.authenticate(header, owner.teamId);
  expect(demoted.type === 'ok' && demoted.value.memberships.get(owner.teamId)).toBe('MEMBER');

  // Removed.
  expect((await services.identity.removeTeamMember(ownerPrincipal, { teamId: owner.teamId, userId: member.user.id })).type).toBe('ok');
  const removed = await elsewhere.authenticate(header, owner.teamId);
  expect(removed.type === 'error' && removed.error.type).toBe('FORBIDDEN');
});
