/**
 * The local runtime's placement: a machine's GPUs (or CPU-backed slots) of
 * each kind, counted against the live replicas placed on it by every gateway
 * that shares the machine and the database. The count and the replica's row
 * are written in one transaction, under a per-machine, per-kind lock, so two
 * gateways never both take the last slot. Without room the start waits, and
 * the reason says for what.
 */
import { describeGpus, type GpuType, type InstanceOption } from '../domain/instance-catalog.js';
import type { Queryable } from '../storage/database.js';
import { lockedUse } from '../storage/replicas-repository.js';
import type { Admission } from './runtime.js';

/** Why a start waits for capacity: "waiting for 1 × H100 80 GB: 2 of 2 in use". */
export function capacityWait(option: InstanceOption, used: number, capacity: number): string {
  const wanted = `waiting for ${describeGpus(option)}`;
  if (capacity === 0) return `${wanted}: this runtime offers none`;
  if (option.numGpu > capacity) return `${wanted}: this runtime offers only ${capacity}`;
  return `${wanted}: ${used} of ${capacity} in use`;
}

/** Room on `node` (offering `offered`) for up to `count` replicas of `option`, in the transaction that writes their rows. */
export async function admitOnMachine(
  tx: Queryable,
  node: string,
  offered: Partial<Record<GpuType, number>>,
  option: InstanceOption,
  count: number,
): Promise<Admission> {
  const capacity = offered[option.gpuType] ?? 0;
  const used = await lockedUse(tx, node, option.gpuType);
  const admitted = Math.min(count, Math.max(0, Math.floor((capacity - used) / option.numGpu)));
  if (admitted === count) return { admitted, node };
  return { admitted, node, reason: capacityWait(option, used + admitted * option.numGpu, capacity) };
}
