/**
 * Who is calling, and on behalf of which team. Built once per request from the
 * API key and the team header. The visibility rule is here, once: a team's
 * records (projects, endpoints) are seen by its members only
 * (`canAccessTeam`, `visibleTo`). The services apply it; the surfaces and the
 * router ask the services.
 */
import DataLoader from 'dataloader';
import { LRUCache } from 'lru-cache';
import { hashApiKey } from '../domain/ids.js';
import { fail, forbidden, ok, type Result } from '../domain/result.js';
import type { Queryable } from '../storage/database.js';
import type { TeamRole, UserRecord } from '../domain/identity.js';
import { findKeyHolders, touchApiKey, type KeyHolder } from '../storage/identity-repository.js';

export interface Principal {
  user: UserRecord;
  /** Team id to the caller's role in it. */
  memberships: ReadonlyMap<string, TeamRole>;
  /** The team named by the team header, or the caller's default team. */
  actingTeamId: string | null;
  /** The API key the request came with (absent for principals built without one, e.g. the admin CLI). */
  keyId?: string;
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

function bearerToken(authorization: string | null | undefined): string | undefined {
  if (!authorization) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  return match?.[1];
}

/**
 * Resolves the caller from a key holder read for this request. A missing or
 * unknown key is UNAUTHENTICATED; a team header naming a team the caller does
 * not belong to is FORBIDDEN.
 */
async function resolve(
  db: Queryable,
  loadHolder: (keyHash: Buffer) => Promise<KeyHolder | undefined>,
  authorization: string | null | undefined,
  teamHeader: string | null | undefined,
): Promise<Result<Principal>> {
  const token = bearerToken(authorization);
  if (!token) {
    return fail({ type: 'UNAUTHENTICATED', message: 'missing API key: send "Authorization: Bearer <API_KEY>"' });
  }
  const holder = await loadHolder(hashApiKey(token));
  if (!holder) return fail({ type: 'UNAUTHENTICATED', message: 'invalid or revoked API key' });
  const { user } = holder;
  // `lastUsedAt` is kept to the minute, so that reads do not each cost a write.
  if (!holder.keyLastUsedAt || Date.now() - holder.keyLastUsedAt.getTime() > KEY_TOUCH_INTERVAL_MS) {
    touchApiKey(db, holder.keyId).catch(() => {});
  }
  const memberships = new Map(holder.memberships.map((m) => [m.teamId, m.role]));
  const team = teamHeader?.trim();
  if (team) {
    if (!memberships.has(team)) return fail(forbidden(`you are not a member of team '${team}'`));
    return ok({ user, memberships, actingTeamId: team, keyId: holder.keyId });
  }
  const fallback = user.defaultTeamId && memberships.has(user.defaultTeamId) ? user.defaultTeamId : [...memberships.keys()][0];
  return ok({ user, memberships, actingTeamId: fallback ?? null, keyId: holder.keyId });
}

/** Resolves the caller with a statement of its own (for callers outside a gateway: tests, tools). */
export async function authenticate(
  db: Queryable,
  authorization: string | null | undefined,
  teamHeader: string | null | undefined,
): Promise<Result<Principal>> {
  const loadHolder = async (hash: Buffer) => (await findKeyHolders(db, [hash])).get(hash.toString('hex'));
  return resolve(db, loadHolder, authorization, teamHeader);
}

/**
 * Authentication that is never stale: every request's key is read from the
 * database after the request arrived, so a key revoked (or a membership
 * removed) through any gateway, or by plain SQL, is refused by every gateway
 * from the moment its transaction commits, with no announcement to wait for.
 * The reads are batched: the requests that arrive while a read is under way
 * share the next one, which starts when it returns (and those of one tick
 * share one when none is under way). So a burst costs one statement per
 * database round trip, not one per request, and each request's read still
 * starts after the request arrived.
 */
export class Authenticator {
  private readonly holders: DataLoader<Buffer, KeyHolder | undefined, string>;
  /** The read under way, if any: the next batch waits for it. */
  private reading: Promise<unknown> | undefined;
  /** The key id of each Authorization value that authenticated lately: for access log lines (never the key). */
  private readonly keyIds = new LRUCache<string, string>({ max: 10_000, ttl: 600_000 });

  constructor(
    private readonly db: Queryable,
    maxBatchSize = 500,
  ) {
    this.holders = new DataLoader(
      async (hashes) => {
        const read = findKeyHolders(db, hashes);
        this.reading = read;
        try {
          const found = await read;
          return hashes.map((hash) => found.get(hash.toString('hex')));
        } finally {
          if (this.reading === read) this.reading = undefined;
        }
      },
      {
        cache: false,
        maxBatchSize,
        batchScheduleFn: (dispatch) => {
          if (this.reading) void this.reading.then(dispatch, dispatch);
          else process.nextTick(dispatch);
        },
      },
    );
  }

  async authenticate(authorization: string | null | undefined, teamHeader: string | null | undefined): Promise<Result<Principal>> {
    const result = await resolve(this.db, (hash) => this.holders.load(hash), authorization, teamHeader);
    if (result.type === 'ok' && authorization && result.value.keyId) this.keyIds.set(authorization, result.value.keyId);
    return result;
  }

  /** The id of the key in `authorization` when it authenticated lately (no statement: for log lines). */
  keyIdOf(authorization: string | undefined): string | undefined {
    return authorization ? this.keyIds.get(authorization) : undefined;
  }
}
