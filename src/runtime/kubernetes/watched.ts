/**
 * One informer kept running: restarted with back-off after a watch or list
 * error (a 410 Gone relists), and `synced` only between a successful list and
 * the next error, so that the runtime can tell "unknown" from "gone".
 *
 * A watch whose connection died without a word (a load balancer that dropped
 * it, a half-open TCP connection) reports no error: its cache would stay
 * "synced" and stale until TCP's keep-alive gave up (a quarter of an hour).
 * The informer's watches therefore end on the server's side every
 * `WATCH_TIMEOUT_S` (`watchPath`), each end starting the next from where it
 * was; an informer that has heard nothing (no event, no new watch) for
 * `stuckMs` is taken as dead: a new one lists again (not synced meanwhile).
 */
import type { Informer, ObjectCache, V1Node, V1Pod } from '@kubernetes/client-node';

const BACKOFF_MS = { first: 500, max: 30_000 };

/** How long the API server keeps one watch open (its `timeoutSeconds`): a healthy informer starts a new one this often. */
export const WATCH_TIMEOUT_S = 120;

/** How long an informer may hear nothing before it counts as dead: its server-side timeout, and a minute's margin. */
const STUCK_MS = (WATCH_TIMEOUT_S + 60) * 1000;

/**
 * The path an informer watches: `path`, its watches ending on the server's side every `timeoutSeconds`, with the
 * server's bookmarks. client-node's informer starts each watch from the last resourceVersion it heard; while our pods
 * are quiet, only bookmarks move it on. Without them, it would fall behind the rest of the cluster's changes, past the
 * server's watch cache, and each new watch would be answered 410 Expired: a full list every `timeoutSeconds`.
 */
export const watchPath = (path: string, timeoutSeconds = WATCH_TIMEOUT_S) =>
  `${path}?timeoutSeconds=${timeoutSeconds}&allowWatchBookmarks=true`;

type Keepable<T extends V1Pod | V1Node> = Informer<T> & ObjectCache<T>;

/** Keeps an informer running: restarted with back-off after an error; `synced` only between a successful list and the next error. */
export class Watched<T extends V1Pod | V1Node> {
  synced = false;
  /** The informer whose cache is read: replaced by a new one when it has heard nothing for too long. */
  informer: Keepable<T>;
  /** Errors the informer reported so far: a start during which one came did not sync. */
  private errors = 0;
  private stopped = false;
  private delay = BACKOFF_MS.first;
  private timer: NodeJS.Timeout | undefined;
  /** When the informer last heard from the server: an event, or the start of a watch. */
  private heard = Date.now();
  private readonly watchdog: NodeJS.Timeout;
  /** What a replaced (dead) informer held: those the new one's list no longer shows were deleted meanwhile. */
  private before: readonly T[] | undefined;

  constructor(
    /** Makes the informer (again: a dead one is replaced). */
    private readonly make: () => Keepable<T>,
    private readonly what: string,
    private readonly log: (message: string, error?: unknown) => void,
    private readonly onChange: (object: T, verb: 'add' | 'update' | 'delete') => void,
    private readonly stuckMs = STUCK_MS,
    /**
     * The cache became a complete, current view (after a list): its objects. client-node tells the list's objects
     * (`onChange`) before its watch is open and the cache counts as synced: whoever acted on those at once found it
     * "unknown", and looks again from here.
     */
    private readonly onSynced?: (objects: readonly T[]) => void,
  ) {
    this.informer = this.attach(make());
    this.watchdog = setInterval(() => this.checkHeard(), Math.max(50, Math.floor(stuckMs / 4)));
    this.watchdog.unref();
  }

  /** Follows `informer` for as long as it is the one kept (a replaced one's late callbacks change nothing). */
  private attach(informer: Keepable<T>): Keepable<T> {
    const kept = () => informer === this.informer && !this.stopped;
    for (const verb of ['add', 'update', 'delete'] as const)
      informer.on(verb, (object: T) => {
        if (!kept()) return;
        this.heard = Date.now();
        this.onChange(object, verb);
      });
    informer.on('connect', () => {
      if (kept()) this.heard = Date.now();
    });
    informer.on('error', (error: unknown) => {
      if (!kept()) return;
      this.errors++;
      this.synced = false;
      this.log(`the ${this.what} watch failed; restarting in ${this.delay} ms`, error);
      this.runLater();
    });
    return informer;
  }

  async run(): Promise<void> {
    if (this.stopped) return;
    const errorsBefore = this.errors;
    const informer = this.informer;
    try {
      await informer.start();
      // Stopped while the list or the watch's fetch was in flight: client-node opened the watch all the same, and the
      // first stop() found no request to abort. This one does (start() resolves once the request is set).
      if (this.stopped) {
        await informer.stop().catch(() => {});
        return;
      }
      // client-node's start() also resolves when its list failed: the failure came as an 'error' event, whose
      // handler scheduled the next try. The cache then holds what it held before the failure, not the cluster now.
      if (this.errors !== errorsBefore || informer !== this.informer) return;
      this.synced = true;
      this.heard = Date.now();
      this.delay = BACKOFF_MS.first;
      this.onSynced?.(informer.list());
      // Deleted while the dead informer heard nothing: told as the watch would have told them.
      const before = this.before;
      this.before = undefined;
      for (const object of before ?? []) {
        const { name, namespace } = object.metadata ?? {};
        if (name && !informer.get(name, namespace)) this.onChange(object, 'delete');
      }
    } catch (error) {
      if (this.stopped) return;
      this.log(`listing ${this.what} failed; retrying in ${this.delay} ms`, error);
      this.runLater();
    }
  }

  /** A synced informer that has heard nothing for `stuckMs`: its watch died without a word. A new one lists again. */
  private checkHeard(): void {
    if (this.stopped || !this.synced || Date.now() - this.heard < this.stuckMs) return;
    this.log(
      `the ${this.what} watch heard nothing for ${Math.round(this.stuckMs / 1000)} s (its connection is taken as dead): listing again`,
    );
    const dead = this.informer;
    this.before = dead.list();
    this.synced = false;
    this.informer = this.attach(this.make());
    this.heard = Date.now();
    void dead.stop().catch(() => {});
    clearTimeout(this.timer);
    this.delay = BACKOFF_MS.first;
    void this.run();
  }

  /** Starts again after the back-off, which doubles up to its maximum until a list succeeds. */
  private runLater(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.run(), this.delay);
    this.delay = Math.min(this.delay * 2, BACKOFF_MS.max);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.watchdog);
    await this.informer.stop().catch(() => {});
  }
}
