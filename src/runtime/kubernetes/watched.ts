/**
 * One informer kept running: restarted with back-off after a watch or list
 * error (a 410 Gone relists), and `synced` only between a successful list and
 * the next error, so that the runtime can tell "unknown" from "gone".
 */
import type { Informer, ObjectCache, V1Node, V1Pod } from '@kubernetes/client-node';

const BACKOFF_MS = { first: 500, max: 30_000 };

/** Keeps an informer running: restarted with back-off after an error; `synced` only between a successful list and the next error. */
export class Watched<T extends V1Pod | V1Node> {
  synced = false;
  /** Errors the informer reported so far: a start during which one came did not sync. */
  private errors = 0;
  private stopped = false;
  private delay = BACKOFF_MS.first;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly informer: Informer<T> & ObjectCache<T>,
    private readonly what: string,
    private readonly log: (message: string, error?: unknown) => void,
    onChange: (object: T, verb: 'add' | 'update' | 'delete') => void,
  ) {
    for (const verb of ['add', 'update', 'delete'] as const) informer.on(verb, (object: T) => onChange(object, verb));
    informer.on('error', (error: unknown) => {
      this.errors++;
      this.synced = false;
      if (this.stopped) return;
      this.log(`the ${what} watch failed; restarting in ${this.delay} ms`, error);
      this.runLater();
    });
  }

  async run(): Promise<void> {
    if (this.stopped) return;
    const errorsBefore = this.errors;
    try {
      await this.informer.start();
      // client-node's start() also resolves when its list failed: the failure came as an 'error' event, whose
      // handler scheduled the next try. The cache then holds what it held before the failure, not the cluster now.
      if (this.errors !== errorsBefore) return;
      this.synced = true;
      this.delay = BACKOFF_MS.first;
    } catch (error) {
      this.log(`listing ${this.what} failed; retrying in ${this.delay} ms`, error);
      this.runLater();
    }
  }

  /** Starts again after the back-off, which doubles up to its maximum until a list succeeds. */
  private runLater(): void {
    this.timer = setTimeout(() => void this.run(), this.delay);
    this.delay = Math.min(this.delay * 2, BACKOFF_MS.max);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.informer.stop().catch(() => {});
  }
}
