/**
 * Ends access everywhere at once. Every change that can narrow what a key may
 * do (a key revoked, a user deleted, a membership removed or its role
 * changed) is announced on the `identity_changes` channel by a PostgreSQL
 * trigger, with the user's id, whichever process (or the admin CLI, or plain
 * SQL) made it. On each announcement this process drops the user's cached
 * principals (see principal.ts) and authenticates each of the user's open
 * connections (WebSocket sockets, SSE streams) again with the credentials it
 * opened with. A connection that no longer authenticates is revoked as a
 * whole (its transport closes it); one that does keeps going, but each of
 * its subscriptions that asked about a team whose answer has changed (a
 * membership gone, a role changed where the role was asked) ends with a
 * FORBIDDEN error.
 *
 * A subscription's principal reads the connection's current memberships and
 * records each answer it gave (`WatchedMemberships`), so that "what did this
 * subscription's access depend on" needs no knowledge of the schema.
 *
 * A lost LISTEN connection may have missed announcements: when it is
 * re-established, every cached principal is dropped and every open connection
 * is checked again. HTTP requests do not depend on announcements alone: a
 * narrowing change returns to its caller only once every cached principal
 * read before it has expired (`outlastCachedPrincipals`).
 */
import { GraphQLError } from 'graphql';
import type { DomainError } from '../domain/result.js';
import type { ResultSink } from '../http/graphql/shared-execution.js';
import type { Authenticator, Principal } from '../services/principal.js';
import type { TeamRole } from '../domain/identity.js';
import type { Sql } from '../storage/database.js';

export const IDENTITY_CHANNEL = 'identity_changes';

/** How long a check that failed (the database is away) waits before it is tried again. */
const RETRY_MS = 1000;

/** What a connection authenticated with, to authenticate it again. */
export interface Credentials {
  authorization: string | null | undefined;
  team: string | null | undefined;
}

/**
 * A subscription's view of its connection's memberships: always the current
 * answer, each one recorded. `changedIn` says whether any recorded answer
 * differs in another membership map.
 */
class WatchedMemberships implements ReadonlyMap<string, TeamRole> {
  /** Team id to the answer given: whether a member (`has`), or the role (`get`). */
  private asked: Map<string, { member: boolean; role?: TeamRole | undefined; roleAsked: boolean }> | undefined;
  /** Set when the whole map was read (iterated, or its size). */
  private whole: ReadonlyMap<string, TeamRole> | undefined;

  constructor(private readonly connection: WatchedConnection) {}

  private get current(): ReadonlyMap<string, TeamRole> {
    return this.connection.principal.memberships;
  }

  private record(teamId: string, role: TeamRole | undefined, roleAsked: boolean): void {
    this.asked ??= new Map();
    const previous = this.asked.get(teamId);
    this.asked.set(teamId, { member: role !== undefined, role, roleAsked: roleAsked || (previous?.roleAsked ?? false) });
  }

  private all(): ReadonlyMap<string, TeamRole> {
    this.whole ??= new Map(this.current);
    return this.current;
  }

  has(teamId: string): boolean {
    const role = this.current.get(teamId);
    this.record(teamId, role, false);
    return role !== undefined;
  }

  get(teamId: string): TeamRole | undefined {
    const role = this.current.get(teamId);
    this.record(teamId, role, true);
    return role;
  }

  get size(): number {
    return this.all().size;
  }

  forEach(callback: (value: TeamRole, key: string, map: ReadonlyMap<string, TeamRole>) => void, thisArg?: unknown): void {
    this.all().forEach((value, key) => callback.call(thisArg, value, key, this));
  }

  entries(): MapIterator<[string, TeamRole]> {
    return this.all().entries();
  }

  keys(): MapIterator<string> {
    return this.all().keys();
  }

  values(): MapIterator<TeamRole> {
    return this.all().values();
  }

  [Symbol.iterator](): MapIterator<[string, TeamRole]> {
    return this.all()[Symbol.iterator]();
  }

  /**
   * The first team on which an answer given would now be narrower (a
   * membership gone, or a role that was asked for changed), or null. Access
   * gained ends nothing.
   */
  changedIn(memberships: ReadonlyMap<string, TeamRole>): string | null {
    for (const [teamId, answer] of this.asked ?? []) {
      const role = memberships.get(teamId);
      if ((answer.member && role === undefined) || (answer.roleAsked && role !== answer.role)) return teamId;
    }
    for (const [teamId, role] of this.whole ?? []) if (memberships.get(teamId) !== role) return teamId;
    return null;
  }
}

function forbidden(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: 'FORBIDDEN' } });
}

/**
 * One subscription of a connection: its principal (whose membership answers
 * are recorded), and, once it runs, its result stream, which `revoke` ends
 * with an error.
 */
export class WatchedSubscription {
  readonly principal: Principal;
  private readonly memberships: WatchedMemberships;
  private revoked: GraphQLError | undefined;
  private stream: RevocableStream<unknown> | undefined;

  constructor(private readonly connection: WatchedConnection) {
    this.memberships = new WatchedMemberships(connection);
    const { user, actingTeamId } = connection.principal;
    this.principal = { user, actingTeamId, memberships: this.memberships };
  }

  /** A result sink that refuses everything once this subscription is revoked. */
  sink(inner: ResultSink): ResultSink {
    return { write: (result) => this.revoked === undefined && inner.write(result) };
  }

  /**
   * The subscription's results, revocable; registered with the connection
   * until they end. A stream that started after its connection lost access
   * ends at once.
   */
  watch<T>(stream: AsyncIterable<T>): AsyncIterableIterator<T> {
    const watched = new RevocableStream<T>(stream[Symbol.asyncIterator](), () => this.connection.release(this));
    this.stream = watched as RevocableStream<unknown>;
    if (this.revoked) watched.revoke(this.revoked);
    else this.connection.adopt(this);
    return watched;
  }

  /** Ends the subscription with `error` (its first revocation wins). */
  revoke(error: GraphQLError): void {
    this.revoked ??= error;
    this.stream?.revoke(this.revoked);
  }

  /** Revokes the subscription when an answer its access depended on is different now. */
  recheck(principal: Principal): void {
    const teamId = this.memberships.changedIn(principal.memberships);
    if (teamId !== null) this.revoke(forbidden(`your access to team '${teamId}' changed: this subscription has ended`));
  }
}

/**
 * An async iterator that `revoke` ends with an error: a pending `next()`
 * rejects at once, and the inner stream is returned.
 */
class RevocableStream<T> implements AsyncIterableIterator<T> {
  private error: GraphQLError | undefined;
  private rejectPending: ((error: unknown) => void) | undefined;
  private ended = false;

  constructor(
    private readonly inner: AsyncIterator<T>,
    private readonly onEnd: () => void,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.onEnd();
  }

  next(): Promise<IteratorResult<T>> {
    if (this.error) return Promise.reject(this.error);
    return new Promise<IteratorResult<T>>((resolve, reject) => {
      this.rejectPending = reject;
      this.inner.next().then(
        (step) => {
          this.rejectPending = undefined;
          if (step.done) this.end();
          resolve(step);
        },
        (error: unknown) => {
          this.rejectPending = undefined;
          this.end();
          reject(error);
        },
      );
    });
  }

  return(): Promise<IteratorResult<T>> {
    this.end();
    return this.inner.return?.() ?? Promise.resolve({ done: true, value: undefined });
  }

  revoke(error: GraphQLError): void {
    if (this.error || this.ended) return;
    this.error = error;
    this.end();
    void this.inner.return?.()?.catch(() => {});
    this.rejectPending?.(error);
    this.rejectPending = undefined;
  }
}

/**
 * One authenticated connection: a WebSocket (many subscriptions) or an SSE
 * stream (one). `principal` is kept current; `onRevoked` is the transport's
 * way to end the whole connection when its credentials stop authenticating.
 */
export class WatchedConnection {
  private readonly subscriptions = new Set<WatchedSubscription>();
  private closed = false;
  private checking = false;
  private again = false;

  constructor(
    private readonly watch: AccessWatch,
    readonly credentials: Credentials,
    public principal: Principal,
    private readonly onRevoked: (error: DomainError) => void,
  ) {}

  get userId(): string {
    return this.principal.user.id;
  }

  /** A new subscription's access, unregistered until it runs (`watch`). */
  subscription(): WatchedSubscription {
    return new WatchedSubscription(this);
  }

  /** @internal */
  adopt(subscription: WatchedSubscription): void {
    if (this.closed) return subscription.revoke(forbidden('your access was revoked: this subscription has ended'));
    this.subscriptions.add(subscription);
    // Answers given before a check replaced the principal are checked against the new one.
    subscription.recheck(this.principal);
  }

  /** @internal */
  release(subscription: WatchedSubscription): void {
    this.subscriptions.delete(subscription);
  }

  /** Authenticates again (now, or after the check in progress). */
  check(): void {
    if (this.closed) return;
    if (this.checking) {
      this.again = true;
      return;
    }
    this.checking = true;
    void this.run();
  }

  private async run(): Promise<void> {
    try {
      do {
        this.again = false;
        const result = await this.watch.auth.authenticate(this.credentials.authorization, this.credentials.team);
        if (this.closed) return;
        if (result.type === 'error') return this.revoke(result.error);
        this.principal = result.value;
        for (const subscription of [...this.subscriptions]) subscription.recheck(result.value);
      } while (this.again && !this.closed);
    } catch (error) {
      // The database is away: access cannot be decided now, so the check is tried again.
      this.watch.log('re-checking an open connection failed; trying again', error);
      setTimeout(() => this.check(), RETRY_MS).unref();
    } finally {
      this.checking = false;
    }
  }

  private revoke(error: DomainError): void {
    const subscriptions = [...this.subscriptions];
    this.close();
    const ended = new GraphQLError(`${error.message}: this subscription has ended`, { extensions: { code: error.type } });
    for (const subscription of subscriptions) subscription.revoke(ended);
    this.onRevoked(error);
  }

  /** The connection went away: it is no longer watched. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.subscriptions.clear();
    this.watch.forget(this);
  }
}

export class AccessWatch {
  private readonly connections = new Map<string, Set<WatchedConnection>>();
  private listening: { unlisten(): Promise<void> } | undefined;
  private started = false;
  /** Counts announcements (and resyncs): an authentication that spans one may have read the state before it. */
  private changes = 0;

  constructor(
    private readonly sql: Sql,
    readonly auth: Authenticator,
    readonly log: (message: string, error?: unknown) => void = () => {},
  ) {}

  async start(): Promise<void> {
    this.listening = await this.sql.listen(
      IDENTITY_CHANNEL,
      (userId) => this.onChange(userId),
      () => {
        // The first listen is the start; later ones are reconnections after which announcements may be missing.
        if (this.started) this.resync();
      },
    );
    this.started = true;
  }

  async close(): Promise<void> {
    await this.listening?.unlisten().catch(() => {});
    this.listening = undefined;
    this.connections.clear();
  }

  /** Taken before authenticating a connection, and handed to `open`. */
  get epoch(): number {
    return this.changes;
  }

  /**
   * Watches a connection authenticated as `principal`. When an announcement
   * came while it was authenticating (`epoch` is older), it is checked again
   * at once.
   */
  open(credentials: Credentials, principal: Principal, epoch: number, onRevoked: (error: DomainError) => void): WatchedConnection {
    const connection = new WatchedConnection(this, credentials, principal, onRevoked);
    let set = this.connections.get(connection.userId);
    if (!set) this.connections.set(connection.userId, (set = new Set()));
    set.add(connection);
    if (epoch !== this.changes) connection.check();
    return connection;
  }

  /** @internal */
  forget(connection: WatchedConnection): void {
    const set = this.connections.get(connection.userId);
    set?.delete(connection);
    if (set?.size === 0) this.connections.delete(connection.userId);
  }

  /** Open connections (for tests and metrics). */
  get connectionCount(): number {
    let n = 0;
    for (const set of this.connections.values()) n += set.size;
    return n;
  }

  private onChange(userId: string): void {
    this.changes++;
    this.auth.forgetUser(userId);
    for (const connection of this.connections.get(userId) ?? []) connection.check();
  }

  /** Announcements may have been missed: nothing cached or open is trusted until checked. */
  private resync(): void {
    this.changes++;
    this.auth.forgetAll();
    this.log('the identity LISTEN connection was re-established: re-checking every open connection');
    for (const set of this.connections.values()) for (const connection of set) connection.check();
  }
}
