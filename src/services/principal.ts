/**
 * Who is calling, and on behalf of which team. Built once per request from the
 * API key and the team header. The visibility rule is here, once: a team's
 * records (projects, endpoints) are seen by its members only
 * (`canAccessTeam`, `visibleTo`). The services apply it; the surfaces and the
 * router ask the services.
 */
import { LRUCache } from 'lru-cache';
import { hashApiKey } from '../domain/ids.js';
import { fail, forbidden, ok, type Result } from '../domain/result.js';
import type { Queryable } from '../storage/database.js';
import type { TeamRole, UserRecord } from '../domain/identity.js';
import { findKeyHolder, touchApiKey } from '../storage/identity-repository.js';

export interface Principal {
  user: UserRecord;
  /** Team id to the caller's role in it: accepted memberships only (an invitation is none). */
  memberships: ReadonlyMap<string, TeamRole>;
  /** The team named by the team header, or the caller's default team. */
  actingTeamId: string | null;
  /** The API key the request came with (absent for principals built without one, e.g. the admin CLI). */
  keyId?: string;
  /**
   * Authenticates the same credentials again (from the cache that revocations clear): work that waits (a queued
   * chat request, a wake) asks before it acts, so that a key revoked or a membership removed meanwhile acts no more.
   */
  recheck?: () => Promise<Result<Principal>>;
}

/** The caller as of now (`recheck`), or as authenticated when it cannot be asked again. */
export function currentPrincipal(principal: Principal): Promise<Result<Principal>> {
  return principal.recheck ? principal.recheck() : Promise.resolve(ok(principal));
}

/** The team header of the API we are compatible with, and a neutral alias. */
export const TEAM_HEADERS = ['x-friendli-team', 'x-team-id'] as const;

const KEY_TOUCH_INTERVAL_MS = 60_000;

export function canAccessTeam(principal: Principal, teamId: string): boolean {
  return principal.memberships.has(teamId);
}

/** The record, when the caller may see it (a member of its team); otherwise undefined, as if it did not exist. */
export function visibleTo<T extends { teamId: string }>(principal: Principal, record: T | undefined): T | undefined {
  return record && canAccessTeam(principal, record.teamId) ? record : undefined;
}

export function isTeamOwner(principal: Principal, teamId: string): boolean {
  return principal.user.isAdmin || principal.memberships.get(teamId) === 'OWNER';
}

/**
 * Whether the caller's additions to a team take effect at once: the system
 * (the admin CLI) and admins add members; a team owner's addition of someone
 * not yet in the team is an invitation, which grants nothing until the
 * invitee accepts it (`memberships` holds accepted memberships only).
 */
export function addsMembersDirectly(principal: Principal | 'system'): boolean {
  return principal === 'system' || principal.user.isAdmin;
}

function bearerToken(authorization: string | null | undefined): string | undefined {
  if (!authorization) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  return match?.[1];
}

/** The most of a header value an error quotes back (a team id is 18 characters; a header may be kilobytes). */
export const MAX_ECHOED_CHARS = 64;

/** A client's value as an error quotes it: at most MAX_ECHOED_CHARS characters, then `…`. */
function echoed(value: string): string {
  const chars = Array.from(value);
  return chars.length > MAX_ECHOED_CHARS ? `${chars.slice(0, MAX_ECHOED_CHARS).join('')}…` : value;
}

/** A key that is unknown, or revoked. */
export const INVALID_KEY = { type: 'UNAUTHENTICATED', message: 'invalid or revoked API key' } as const;

/**
 * Resolves the caller. A missing or unknown key is UNAUTHENTICATED; a team
 * header naming a team the caller does not belong to is FORBIDDEN.
 */
export async function authenticate(
  db: Queryable,
  authorization: string | null | undefined,
  teamHeader: string | null | undefined,
): Promise<Result<Principal>> {
  const token = bearerToken(authorization);
  if (!token) {
    return fail({ type: 'UNAUTHENTICATED', message: 'missing API key: send "Authorization: Bearer <API_KEY>"' });
  }
  const holder = await findKeyHolder(db, hashApiKey(token));
  if (!holder) return fail(INVALID_KEY);
  const { user } = holder;
  // `lastUsedAt` is kept to the minute, so that reads do not each cost a write.
  if (!holder.keyLastUsedAt || Date.now() - holder.keyLastUsedAt.getTime() > KEY_TOUCH_INTERVAL_MS) {
    touchApiKey(db, holder.keyId).catch(() => {});
  }
  const memberships = new Map(holder.memberships.map((m) => [m.teamId, m.role]));
  const team = teamHeader?.trim();
  if (team) {
    if (!memberships.has(team)) return fail(forbidden(`you are not a member of team '${echoed(team)}'`));
    return ok({ user, memberships, actingTeamId: team, keyId: holder.keyId });
  }
  const fallback = user.defaultTeamId && memberships.has(user.defaultTeamId) ? user.defaultTeamId : [...memberships.keys()][0];
  return ok({ user, memberships, actingTeamId: fallback ?? null, keyId: holder.keyId });
}

/** How long a cached principal serves, counted from the moment its read started. */
export const PRINCIPAL_TTL_MS = 1000;

/** A cached authentication; `userId` is set once it succeeded. */
interface CacheEntry {
  result: Promise<Result<Principal>>;
  userId?: string;
}

/**
 * Authentication with a short-lived, bounded cache of principals, so that a
 * hot path (a chat request, a GraphQL read) costs no statement for its key.
 * Revocation is still in effect everywhere at once, by two rules:
 *
 * - every process drops the affected entries as soon as an access change is
 *   announced (`AccessWatch` calls `forgetUser`, or `forgetAll` after a
 *   missed announcement): usually within milliseconds;
 * - a change made through the services that narrows access returns to its
 *   caller only after `outlastCachedPrincipals`, when every entry read before
 *   the change has expired in every process, announced or not. So by the
 *   time a revocation's caller learns it is done, no gateway accepts the key.
 *
 * An entry's lifetime counts from the start of its read, so a read that
 * began before a change and ended after it cannot outlive the wait.
 */
export class Authenticator {
  private readonly cache: LRUCache<string, CacheEntry>;
  /** The key id of each Authorization value that authenticated lately: for access log lines (never the key). */
  private readonly keyIds = new LRUCache<string, string>({ max: 10_000, ttl: 600_000 });

  constructor(
    private readonly db: Queryable,
    maxEntries = 10_000,
  ) {
    this.cache = new LRUCache<string, CacheEntry>({ max: maxEntries, ttl: PRINCIPAL_TTL_MS });
  }

  authenticate(authorization: string | null | undefined, teamHeader: string | null | undefined): Promise<Result<Principal>> {
    const key = `${authorization ?? ''}\n${teamHeader ?? ''}`;
    const hit = this.cache.get(key);
    if (hit) return hit.result;
    const recheck = () => this.authenticate(authorization, teamHeader);
    const entry: CacheEntry = {
      result: authenticate(this.db, authorization, teamHeader).then((r) => (r.type === 'ok' ? ok({ ...r.value, recheck }) : r)),
    };
    // Only successes are kept: a wrong key is checked again next time.
    const drop = () => this.cache.peek(key) === entry && this.cache.delete(key);
    entry.result.then((r) => {
      if (r.type !== 'ok') return drop();
      entry.userId = r.value.user.id;
      if (authorization && r.value.keyId) this.keyIds.set(authorization, r.value.keyId);
    }, drop);
    // Set before the read: the entry's lifetime counts from here.
    this.cache.set(key, entry);
    return entry.result;
  }

  /**
   * Forgets every cached principal of a user (their keys or memberships
   * changed), and every lookup still in flight, which may have read the state
   * before the change.
   */
  forgetUser(userId: string): void {
    const stale: string[] = [];
    for (const [key, entry] of this.cache.entries()) if (entry.userId === undefined || entry.userId === userId) stale.push(key);
    for (const key of stale) this.cache.delete(key);
  }

  /** The id of the key in `authorization` when it authenticated lately (no statement: for log lines). */
  keyIdOf(authorization: string | undefined): string | undefined {
    return authorization ? this.keyIds.get(authorization) : undefined;
  }

  /** Forgets every cached principal (changes may have gone unannounced). */
  forgetAll(): void {
    this.cache.clear();
  }
}

/**
 * Resolves once no process can hold a principal read before now (see
 * `Authenticator`): a narrowing change awaits it before it returns. The
 * margin covers timers firing late.
 */
export function outlastCachedPrincipals(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, PRINCIPAL_TTL_MS + 50));
}
