/**
 * The GPUs of this machine, by kind. By default the real GPUs are detected
 * with nvidia-smi; without any, every kind is offered as a number of
 * CPU-backed slots, so endpoints of any instance option run here (slowly).
 * GPU_INVENTORY overrides both ("H100=8,A100=2").
 */
import { execFileSync } from 'node:child_process';
import { GPU_TYPES, type GpuType } from '../domain/instance-catalog.js';

export type Inventory = Partial<Record<GpuType, number>>;

export interface DetectedInventory {
  inventory: Inventory;
  /** 'configured', 'nvidia' (real GPUs found) or 'cpu' (CPU-backed slots). */
  source: 'configured' | 'nvidia' | 'cpu';
}

export class InventoryError extends Error {}

export function parseInventory(text: string): Inventory {
  const inventory: Inventory = {};
  for (const part of text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const match = /^([A-Za-z0-9]+)\s*=\s*(\d+)$/.exec(part);
    const kind = match?.[1]?.toUpperCase() as GpuType | undefined;
    if (!match || !kind || !GPU_TYPES.includes(kind)) {
      throw new InventoryError(`GPU_INVENTORY must look like "H100=8,A100=2" with kinds ${GPU_TYPES.join(', ')} (got "${part}")`);
    }
    inventory[kind] = Number(match[2]);
  }
  return inventory;
}

/** Maps an nvidia-smi product name to our kinds; other GPUs are not offered. */
export function kindOfGpuName(name: string): GpuType | undefined {
  const upper = name.toUpperCase();
  if (upper.includes('B200')) return 'B200';
  if (upper.includes('H200')) return 'H200';
  if (upper.includes('H100')) return 'H100';
  if (upper.includes('A100')) return 'A100';
  return undefined;
}

function nvidiaGpus(): string[] {
  try {
    const out = execFileSync('nvidia-smi', ['--query-gpu=name', '--format=csv,noheader'], {
      encoding: 'utf8',
      timeout: 5000,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return out
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
  } catch {
    return [];
  }
}

export function detectInventory(options: { configured?: string; cpuSlots: number }): DetectedInventory {
  if (options.configured) return { inventory: parseInventory(options.configured), source: 'configured' };
  const inventory: Inventory = {};
  for (const name of nvidiaGpus()) {
    const kind = kindOfGpuName(name);
    if (kind) inventory[kind] = (inventory[kind] ?? 0) + 1;
  }
  if (Object.keys(inventory).length > 0) return { inventory, source: 'nvidia' };
  return { inventory: Object.fromEntries(GPU_TYPES.map((kind) => [kind, options.cpuSlots])), source: 'cpu' };
}
