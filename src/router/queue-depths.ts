/**
 * Publishes how many requests wait in this process's queues, per endpoint
 * (see queue-depth-repository.ts), so that the controller holding an
 * endpoint's lease scales on the demand of every gateway process: the counts
 * that changed since the last publication, and those not zero again before
 * they go stale.
 */
import type { ChatAccess } from '../services/chat-access.js';
import { QUEUE_DEPTH_PUBLISH_MS, QUEUE_DEPTH_REFRESH_MS, QUEUE_DEPTH_STALE_MS } from '../storage/queue-depth-repository.js';

export class QueueDepthPublisher {
  /** Endpoints whose queued count changed since it was last published. */
  private readonly changed = new Set<string>();
  /** What was last published per endpoint, and when. */
  private readonly published = new Map<string, { queued: number; at: number }>();
  private publishing = false;
  private readonly timer: NodeJS.Timeout;

  /** `queuedOf` reads an endpoint's queued count in this process. */
  constructor(
    private readonly access: ChatAccess,
    private readonly processId: string,
    private readonly queuedOf: (endpointId: string) => number,
  ) {
    this.timer = setInterval(() => void this.publish(), QUEUE_DEPTH_PUBLISH_MS);
    this.timer.unref();
  }

  /** Marks an endpoint's count as changed (published at the next tick). */
  changedAt(endpointId: string): void {
    this.changed.add(endpointId);
  }

  close(): void {
    clearInterval(this.timer);
    if (this.published.size > 0) void this.access.forgetQueueDepths(this.processId).catch(() => {});
  }

  private async publish(): Promise<void> {
    if (this.publishing) return;
    const now = performance.now();
    const depths = new Map<string, number>();
    for (const id of this.changed) depths.set(id, this.queuedOf(id));
    for (const [id, last] of this.published) {
      if (last.queued > 0 && now - last.at >= QUEUE_DEPTH_REFRESH_MS) depths.set(id, this.queuedOf(id));
    }
    if (depths.size === 0) return;
    this.changed.clear();
    this.publishing = true;
    try {
      await this.access.publishQueueDepths(this.processId, depths, QUEUE_DEPTH_STALE_MS);
      for (const [id, queued] of depths) this.published.set(id, { queued, at: now });
    } catch {
      for (const id of depths.keys()) this.changed.add(id); // the next tick tries again
    } finally {
      this.publishing = false;
    }
  }
}
