/**
 * This process's figures in the Prometheus text format, through prom-client:
 * per-endpoint counters (`*_total`) and latency histograms, replica gauges,
 * and the recorder's dropped samples. The only label beyond the metric's own
 * is `endpoint_id` (plus a status class where it says so): never a request
 * id or a user, so the series count stays that of the endpoints. Each
 * gateway process exposes its own counts; Prometheus sums them across the
 * scraped instances.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { GPU_TYPES, type GpuType } from '../domain/instance-catalog.js';
import type { RecordedRequest } from './request-recorder.js';
import { errorClassOf, timePerOutputTokenMs, type ErrorClass } from './minute-rollup.js';

/** Every value of `dedicated_requests_total`'s outcome label. */
const OUTCOMES: readonly (NonNullable<ErrorClass> | 'cancelled' | 'ok')[] = ['4xx', '5xx', 'cut', 'cancelled', 'ok'];
import type { ReplicaSample } from '../storage/metrics-repository.js';

/** Latency buckets in seconds: 5 ms to 2 minutes. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const TOKEN_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export class GatewayPrometheus {
  readonly registry = new Registry();
  private readonly requests: Counter<'endpoint_id' | 'outcome'>;
  private readonly promptTokens: Counter<'endpoint_id'>;
  private readonly completionTokens: Counter<'endpoint_id'>;
  private readonly duration: Histogram<'endpoint_id'>;
  private readonly ttft: Histogram<'endpoint_id'>;
  private readonly tpot: Histogram<'endpoint_id'>;
  private readonly queueWait: Histogram<'endpoint_id'>;
  private readonly replicas: Gauge<'endpoint_id' | 'kind'>;
  private readonly gpus: Gauge<'gpu_type' | 'state'>;
  private readonly knownReplicaEndpoints = new Set<string>();
  /** Endpoints with request series in this process. */
  private readonly knownRequestEndpoints = new Set<string>();

  constructor(droppedSamples: () => number) {
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'dedicated_requests_total',
      help: 'Chat completion requests served, by endpoint and outcome (ok, cancelled, 4xx, 5xx, cut).',
      labelNames: ['endpoint_id', 'outcome'],
      registers,
    });
    this.promptTokens = new Counter({
      name: 'dedicated_prompt_tokens_total',
      help: 'Prompt tokens processed.',
      labelNames: ['endpoint_id'],
      registers,
    });
    this.completionTokens = new Counter({
      name: 'dedicated_completion_tokens_total',
      help: 'Completion tokens generated.',
      labelNames: ['endpoint_id'],
      registers,
    });
    this.duration = new Histogram({
      name: 'dedicated_request_duration_seconds',
      help: 'Time from the request to the end of its answer.',
      labelNames: ['endpoint_id'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.ttft = new Histogram({
      name: 'dedicated_time_to_first_token_seconds',
      help: 'Time from the request to the first token of its answer (the whole answer when not streamed).',
      labelNames: ['endpoint_id'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.tpot = new Histogram({
      name: 'dedicated_time_per_output_token_seconds',
      help: 'Time per output token after the first, for streamed answers.',
      labelNames: ['endpoint_id'],
      buckets: TOKEN_BUCKETS,
      registers,
    });
    this.queueWait = new Histogram({
      name: 'dedicated_queue_wait_seconds',
      help: 'Time a request waited for a free slot.',
      labelNames: ['endpoint_id'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.replicas = new Gauge({
      name: 'dedicated_endpoint_replicas',
      help: 'Replicas of an endpoint: current, desired and updated (to its current version), as last sampled.',
      labelNames: ['endpoint_id', 'kind'],
      registers,
    });
    this.gpus = new Gauge({
      name: 'dedicated_runtime_gpus',
      help:
        'GPUs (CPU-backed slots on a machine without GPUs) of each kind in the runtime’s pool: offered (a machine’s, or the ' +
        'Ready, schedulable Kubernetes nodes’ allocatable) and requested by the live replicas, as last sampled.',
      labelNames: ['gpu_type', 'state'],
      registers,
    });
    new Counter({
      name: 'dedicated_request_records_dropped_total',
      help: 'Request outcomes not recorded because writing them fell behind.',
      registers,
      collect() {
        this.reset();
        this.inc(droppedSamples());
      },
    });
  }

  observe(batch: readonly RecordedRequest[]): void {
    for (const entry of batch) {
      const endpoint_id = entry.endpointId;
      this.knownRequestEndpoints.add(endpoint_id);
      const error = errorClassOf(entry);
      this.requests.inc({ endpoint_id, outcome: error ?? (entry.cancelled ? 'cancelled' : 'ok') });
      if (entry.promptTokens) this.promptTokens.inc({ endpoint_id }, entry.promptTokens);
      if (entry.completionTokens) this.completionTokens.inc({ endpoint_id }, entry.completionTokens);
      if (entry.refused) continue; // never served: no latency of a replica's
      this.duration.observe({ endpoint_id }, entry.durationMs / 1000);
      if (entry.ttftMs !== null) this.ttft.observe({ endpoint_id }, entry.ttftMs / 1000);
      const tpot = timePerOutputTokenMs(entry);
      if (tpot !== null) this.tpot.observe({ endpoint_id }, tpot / 1000);
      this.queueWait.observe({ endpoint_id }, entry.queuedMs / 1000);
    }
  }

  /**
   * Drops the request series of endpoints that were deleted (`gone` says which of those with series here): the
   * label values would otherwise pile up, one set per endpoint ever created, until the process restarts.
   */
  async forgetDeleted(gone: (ids: string[]) => Promise<string[]>): Promise<void> {
    for (const endpoint_id of await gone([...this.knownRequestEndpoints])) {
      for (const outcome of OUTCOMES) this.requests.remove({ endpoint_id, outcome });
      for (const metric of [this.promptTokens, this.completionTokens]) metric.remove({ endpoint_id });
      for (const metric of [this.duration, this.ttft, this.tpot, this.queueWait]) metric.remove({ endpoint_id });
      this.knownRequestEndpoints.delete(endpoint_id);
    }
  }

  /** The latest replica counts; an endpoint no longer sampled (asleep, deleted) loses its series. */
  replicaCounts(samples: readonly ReplicaSample[]): void {
    const seen = new Set<string>();
    for (const s of samples) {
      seen.add(s.endpointId);
      this.replicas.set({ endpoint_id: s.endpointId, kind: 'current' }, s.current);
      this.replicas.set({ endpoint_id: s.endpointId, kind: 'desired' }, s.desired);
      this.replicas.set({ endpoint_id: s.endpointId, kind: 'updated' }, s.updated);
    }
    for (const id of this.knownReplicaEndpoints) {
      if (seen.has(id)) continue;
      for (const kind of ['current', 'desired', 'updated']) this.replicas.remove({ endpoint_id: id, kind });
      this.knownReplicaEndpoints.delete(id);
    }
    for (const id of seen) this.knownReplicaEndpoints.add(id);
  }

  /** The runtime pool's GPUs of every kind, offered and requested (0 where none). */
  runtimeGpus(gpus: { offered: Partial<Record<GpuType, number>>; requested: Partial<Record<GpuType, number>> }): void {
    for (const gpu_type of GPU_TYPES) {
      this.gpus.set({ gpu_type, state: 'offered' }, gpus.offered[gpu_type] ?? 0);
      this.gpus.set({ gpu_type, state: 'requested' }, gpus.requested[gpu_type] ?? 0);
    }
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
