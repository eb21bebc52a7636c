/**
 * A replica's engine log on Kubernetes: the container's log as the kubelet keeps it (gone with the pod), read once or
 * followed. A log the API server will not give (the pod gone: 404; the engine not started: 400) is
 * EngineLogUnavailable, thrown before anything is read.
 */
import { PassThrough } from 'node:stream';
import { Log, type CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { EngineLogUnavailable, type ReplicaRef } from '../runtime.js';
import { isStatus } from './endpoint-secrets.js';
import { ENGINE_CONTAINER, podName } from './pod-spec.js';

export class PodLogs {
  /** The client configuration the follower uses (made at its first use). */
  private config: KubeConfig | undefined;

  constructor(
    private readonly api: CoreV1Api,
    private readonly namespace: string,
    private readonly kubeConfig: () => KubeConfig,
  ) {}

  /** The last lines the engine wrote, for a death's diagnosis (never shown to users): empty when unreadable. */
  async tail(ref: Pick<ReplicaRef, 'replicaId' | 'locator'>): Promise<string> {
    try {
      return await this.api.readNamespacedPodLog({
        name: ref.locator ?? podName(ref.replicaId),
        namespace: this.namespace,
        container: ENGINE_CONTAINER,
        tailLines: 200,
        limitBytes: 8192,
      });
    } catch {
      return '';
    }
  }

  /** The engine container's log, as the kubelet keeps it (gone with the pod). */
  async read(ref: Pick<ReplicaRef, 'replicaId' | 'locator'>, options: { tailLines: number }): Promise<string> {
    try {
      const text = await this.api.readNamespacedPodLog({
        name: ref.locator ?? podName(ref.replicaId),
        namespace: this.namespace,
        container: ENGINE_CONTAINER,
        tailLines: options.tailLines,
        limitBytes: 4 << 20,
      });
      return text.endsWith('\n') ? text.slice(0, -1) : text;
    } catch (error) {
      throw logFailure(error);
    }
  }

  /**
   * Follows the engine container's log (the client's Log: `follow=true`), in chunks of whole lines. The log is opened
   * before this answers: a pod gone, or an engine not started, throws EngineLogUnavailable here, not on the first read.
   */
  async follow(
    ref: Pick<ReplicaRef, 'replicaId' | 'locator'>,
    signal: AbortSignal,
    options: { tailLines?: number } = {},
  ): Promise<AsyncIterable<string>> {
    const kc = (this.config ??= this.kubeConfig());
    const stream = new PassThrough();
    const name = ref.locator ?? podName(ref.replicaId);
    // The client leaves out a tailLines of 0 (the whole log would come first): as text, it is sent.
    const tailLines = options.tailLines ? options.tailLines : ('0' as unknown as number);
    let request: AbortController;
    try {
      request = await new Log(kc).log(this.namespace, name, ENGINE_CONTAINER, stream, { follow: true, tailLines });
    } catch (error) {
      throw logFailure(error);
    }
    const stop = () => {
      request.abort();
      stream.end();
    };
    // Closed when the caller stops, whether or not it ever read.
    signal.addEventListener('abort', stop, { once: true });
    if (signal.aborted) stop();
    return wholeLines(stream, () => {
      signal.removeEventListener('abort', stop);
      stop();
    });
  }
}

/** A log read the API server refused: the pod gone (404), or its engine not started (400); else the error as it is. */
function logFailure(error: unknown): unknown {
  if (isStatus(error, 404)) return new EngineLogUnavailable("the replica's pod is gone, and its log with it");
  if (isStatus(error, 400)) return new EngineLogUnavailable("the replica's engine has not started yet: no log so far");
  return error;
}

/** The stream's text in chunks of whole lines (a partial last line waits for its newline); `done` when it ends. */
async function* wholeLines(stream: PassThrough, done: () => void): AsyncGenerator<string> {
  let partial = '';
  try {
    for await (const chunk of stream) {
      const text = partial + (chunk as Buffer).toString('utf8');
      const end = text.lastIndexOf('\n');
      partial = text.slice(end + 1);
      if (end >= 0) yield text.slice(0, end);
    }
  } finally {
    done();
  }
}
