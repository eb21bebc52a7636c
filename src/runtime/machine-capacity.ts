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

/** Room on `node` (offering `offered`) for one replica of `option`, in the transaction that writes its row. */
export async function admitOnMachine(
  tx: Queryable,
  node: string,
  offered: Partial<Record<GpuType, number>>,
  option: InstanceOption,
): Promise<Admission> {
  const capacity = offered[option.gpuType] ?? 0;
  const used = await lockedUse(tx, node, option.gpuType);
  if (used + option.numGpu > capacity) return { admitted: false, reason: capacityWait(option, used, capacity) };
  return { admitted: true, node };
}
