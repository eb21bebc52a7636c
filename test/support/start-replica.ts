/**
 * Starts a replica through a runtime the way the controller's passes do,
 * for tests of a runtime alone: `ensure` places it, then `observe` is read
 * (every 20 ms unless told otherwise) until it is ready,
 * or dead (thrown as the ReplicaStartError the controller would record).
 */
import { ReplicaStartError, type ReplicaLaunch, type ReplicaRef, type Runtime, type StartProgress } from '../../src/runtime/runtime.js';

export async function startReplica(
  runtime: Runtime,
  launch: ReplicaLaunch,
  options: { timeoutMs?: number; pollMs?: number; onProgress?: (progress: StartProgress) => void } = {},
): Promise<ReplicaRef> {
  const ref = await runtime.ensure(launch);
  const deadline = Date.now() + (options.timeoutMs ?? 120_000);
  while (Date.now() < deadline) {
    const seen = runtime.observe(ref);
    if (seen.state === 'ready') return { ...ref, address: seen.address };
    if (seen.state === 'dead') {
      throw new ReplicaStartError(seen.code ?? 'WORKLOAD_INIT_GRPC_ERROR', seen.reason ?? 'the engine stopped before it was ready');
    }
    if (seen.state === 'starting') options.onProgress?.({ phase: seen.phase, ...(seen.reason ? { reason: seen.reason } : {}) });
    await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 20));
  }
  throw new Error(`${launch.replicaId} was not ready within ${options.timeoutMs ?? 120_000} ms`);
}
