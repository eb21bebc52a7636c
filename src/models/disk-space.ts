/**
 * Disk space for the model cache's downloads: the check before a download starts (with what the other downloads of
 * this process still have to write counted as taken), and what a full disk met during one becomes.
 */
import { stat, statfs } from 'node:fs/promises';
import { ModelSourceError } from './errors.js';

export const DISK_ERROR = 'WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR';

export const gib = (n: number) => `${(n / 2 ** 30).toFixed(2)} GiB`;

/** A write failed because the disk (or the user's quota on it) is full: retrying cannot help until room is made. */
export function isDiskFull(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}

/** The error for a disk found full while `what` was written (e.g. `downloading model.gguf from org/model`). */
export function diskFullError(what: string, cause: unknown): ModelSourceError {
  return new ModelSourceError(DISK_ERROR, `The model cache's disk filled up while ${what}: free some space and try again.`, { cause });
}

/** A download under way: its size, and how much of it is on disk (as last reported: a report late by a moment counts a little too much as still needed, the safe side). */
interface Need {
  size: number;
  done: number;
}

/**
 * The downloads under way in this process, by the device their cache is on. The free space a check sees is not all
 * free: each of these still has to write the rest of its file there. Without them, two downloads that fit only one at
 * a time would both pass their check and both fail midway with the disk full.
 */
const underWay = new Map<number, Set<Need>>();

export interface DiskClaim {
  /** How much of the file is on disk now. */
  progress(done: number): void;
  release(): void;
}

/**
 * Refuses (WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR) when the disk of `dir` cannot take the rest of a download of `size`
 * bytes, `partial` holding what is already there, once the other downloads under way have written theirs; otherwise
 * counts it as under way until the claim is released.
 */
export async function claimDisk(dir: string, size: number, label: string, partial: string): Promise<DiskClaim> {
  const [info, fs, alreadyHave] = await Promise.all([
    stat(dir),
    statfs(dir),
    stat(partial).then(
      (s) => Math.min(s.size, size),
      () => 0,
    ),
  ]);
  // From here to the count, no await: two checks cannot both pass on the same free space.
  const needs = underWay.get(info.dev) ?? new Set<Need>();
  const promised = [...needs].reduce((sum, need) => sum + Math.max(0, need.size - need.done), 0);
  const free = Number(fs.bavail) * Number(fs.bsize);
  const wanted = size - alreadyHave;
  if (free - promised < wanted) {
    const others = promised > 0 ? `, ${gib(promised)} of which other downloads under way still need` : '';
    throw new ModelSourceError(DISK_ERROR, `${label} needs ${gib(wanted)} more disk space but only ${gib(free)} is free${others}.`);
  }
  const need: Need = { size, done: alreadyHave };
  needs.add(need);
  underWay.set(info.dev, needs);
  return {
    progress(done) {
      need.done = done;
    },
    release() {
      needs.delete(need);
      if (needs.size === 0 && underWay.get(info.dev) === needs) underWay.delete(info.dev);
    },
  };
}
