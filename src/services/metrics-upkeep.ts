/**
 * The gateway's background work for metrics: sampling every live endpoint's
 * replica counts into the current minute's roll-up (and Prometheus), the GPUs
 * the runtime's pool offers and those its replicas request, and
 * retention, which deletes request-log rows and content logs older than
 * REQUEST_LOG_RETENTION_DAYS and roll-ups older than METRICS_RETENTION_DAYS.
 * Every gateway process does both; the writes are idempotent.
 */
import { DEFAULTS } from '../defaults.js';
import type { Sql } from '../storage/database.js';
import type { GpuType } from '../domain/instance-catalog.js';
import type { Runtime } from '../runtime/runtime.js';
import { deleteOldMinutes, sampleReplicas, type ReplicaSample } from '../storage/metrics-repository.js';
import { requestedGpus } from '../storage/replicas-repository.js';
import { deleteOldRequests } from '../storage/request-log-repository.js';

const DAY_MS = 86_400_000;

export interface UpkeepOptions {
  /** Days request-log rows and content logs are kept. @default 30 */
  requestLogRetentionDays?: number;
  /** Days per-minute roll-ups are kept. @default 90 */
  metricsRetentionDays?: number;
  /** How often replica counts are sampled. @default 10000 */
  sampleMs?: number;
  /** How often retention runs. @default one hour */
  retentionMs?: number;
  onSample?: (samples: ReplicaSample[]) => void;
  /** The runtime's pool, whose GPUs (or CPU-backed slots) are sampled with the replica counts. */
  pool?: Pick<Runtime, 'node' | 'capacity'>;
  onGpus?: (gpus: { offered: Partial<Record<GpuType, number>>; requested: Partial<Record<GpuType, number>> }) => void;
  log?: (message: string, error?: unknown) => void;
}

export class MetricsUpkeep {
  private readonly timers: NodeJS.Timeout[] = [];
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly sql: Sql,
    private readonly options: UpkeepOptions = {},
  ) {}

  start(): void {
    const every = (ms: number, work: () => Promise<unknown>) => {
      const run = () =>
        (this.running = this.running.then(work).catch((error: unknown) => this.options.log?.('metrics upkeep failed', error)));
      void run();
      const timer = setInterval(() => void run(), ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(this.options.sampleMs ?? DEFAULTS.metricsSampleMs, () => this.sample());
    every(this.options.retentionMs ?? 3_600_000, () => this.retain());
  }

  async sample(): Promise<void> {
    const samples = await sampleReplicas(this.sql, new Date(Math.floor(Date.now() / 60_000) * 60_000));
    this.options.onSample?.(samples);
    const { pool, onGpus } = this.options;
    if (pool && onGpus) onGpus({ offered: pool.capacity(), requested: await requestedGpus(this.sql, pool.node) });
  }

  /** Deletes what is past retention, in batches; returns the rows deleted. */
  async retain(now = Date.now()): Promise<number> {
    const logBefore = new Date(now - (this.options.requestLogRetentionDays ?? DEFAULTS.requestLogRetentionDays) * DAY_MS);
    const minutesBefore = new Date(now - (this.options.metricsRetentionDays ?? DEFAULTS.metricsRetentionDays) * DAY_MS);
    let total = 0;
    for (let n = Infinity; n > 0; total += n) n = await deleteOldRequests(this.sql, logBefore);
    for (let n = Infinity; n > 0; total += n) n = await deleteOldMinutes(this.sql, minutesBefore);
    return total;
  }

  async close(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    await this.running;
  }
}
