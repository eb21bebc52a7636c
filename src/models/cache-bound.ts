/**
 * The bound on a model cache volume that several pods share (the Kubernetes runtime's KUBERNETES_MODEL_CACHE_MAX_BYTES,
 * enforced by each replica's model fetcher, fetch-main.ts): before a download, room is made by evicting the
 * least recently used model files that no pod uses; a file larger than the bound, or one that finds the bound full of
 * files in use, fails with WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR. Downloads under way count with their full size.
 *
 * On the volume, besides ModelCache's blobs/, index/ and tmp/ (model-cache.ts):
 *   <dir>/leases/<name>       a pod uses a blob: the file holds the blob's name, and its mtime is refreshed while the
 *                             pod runs (the engine container's heartbeat, pod-spec.ts); refreshed within the lease's
 *                             time to live = in use, never evicted
 *   <dir>/tmp/<id>.reserve    a download under way: its size and what it downloads, counted against the bound until
 *                             it ends, once per file however many pods wait for it (mtime refreshed while it runs;
 *                             a fetcher that died stops refreshing it)
 *   <dir>/tmp/volume.lock     serializes finding-and-leasing, evicting and reserving among the fetchers
 * A blob's mtime is its last use (set whenever a fetcher finds or downloads it): the eviction order.
 *
 * Why files and mtimes rather than pids or advisory locks: pods on a node share a hostPath (and pods on many nodes a
 * ReadWriteMany claim) but no process table, and advisory locks across NFS clients are not dependable. An mtime the
 * user refreshes, compared with a deadline, means the same on every filesystem, and a pod that dies or is deleted
 * simply stops refreshing: its files become evictable one time-to-live later, with nothing to clean up.
 */
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rename, rm, stat, statfs, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { acquireLock, isLockHeld, LOCK_HEARTBEAT_MS, LOCK_STALE_MS, tryLock } from '../util/file-lock.js';
import { DISK_ERROR, diskFullError, gib, isDiskFull } from './disk-space.js';
import { ModelSourceError } from './errors.js';
import type { CachedModelFile } from './model-cache.js';

/** A lease refreshed within this long means its blob is in use (the heartbeat refreshes it every LEASE_REFRESH_SECONDS). */
export const LEASE_TTL_MS = 5 * 60_000;
export const LEASE_REFRESH_SECONDS = 60;
/** A blob used (found or downloaded) within this long is not evicted: it covers a fetcher between its download and its lease. */
export const RECENT_USE_MS = 10 * 60_000;
/** Leases not refreshed for this long are removed (their pods are long gone). */
const LEASE_GARBAGE_MS = 7 * 86_400_000;
/** A lease's name: the pod's namespace and name. */
export const LEASE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

export interface CacheBoundOptions {
  dir: string;
  /** The most bytes the cache's model files (complete, and downloads under way) may take; undefined: only the disk bounds them. */
  maxBytes?: number;
  /** What sets `maxBytes`, for messages. @default 'the bound' */
  setting?: string;
  /** @default LEASE_TTL_MS */
  leaseTtlMs?: number;
  /** @default RECENT_USE_MS */
  recentUseMs?: number;
  /** The clock, for tests. */
  now?: () => number;
}

/** What the volume holds, as the bound counts it. */
export interface CacheUsage {
  /** complete blobs, live reservations and partial files no download owns */
  usedBytes: number;
  blobs: { name: string; size: number; lastUsedMs: number; inUse: boolean }[];
  /** sizes of the downloads under way (their reservations, each file once) */
  reservedBytes: number;
  /** the files being downloaded, by the key their fetchers reserved them under */
  reservedKeys: Set<string>;
  /** partial files of live downloads (already inside their reservations) */
  livePartialBytes: number;
  /** partial files of downloads that died: counted, and evicted like unused blobs */
  orphanPartials: { key: string; size: number; lastUsedMs: number }[];
}

export interface Reservation {
  release(): Promise<void>;
}

interface Candidate {
  kind: 'blob' | 'partial';
  name: string;
  size: number;
  lastUsedMs: number;
}

export class CacheBound {
  private readonly blobsDir: string;
  private readonly tmpDir: string;
  private readonly leasesDir: string;
  private readonly now: () => number;

  constructor(private readonly options: CacheBoundOptions) {
    this.blobsDir = join(options.dir, 'blobs');
    this.tmpDir = join(options.dir, 'tmp');
    this.leasesDir = join(options.dir, 'leases');
    this.now = options.now ?? Date.now;
  }

  /** The file of a lease name on this volume. */
  leasePath(name: string): string {
    if (!LEASE_NAME.test(name)) throw new Error(`a lease name must match ${LEASE_NAME.source}: ${name}`);
    return join(this.leasesDir, name);
  }

  /**
   * Runs `find` under the volume lock; the blob it finds is leased to `lease` and marked used before the lock is
   * released, so that no fetcher evicts it in between.
   */
  async claim(lease: string, find: () => Promise<CachedModelFile | undefined>): Promise<CachedModelFile | undefined> {
    return this.locked(async () => {
      const file = await find();
      if (file) await this.markUsed(lease, file);
      return file;
    });
  }

  /**
   * Makes room for a download of `size` bytes, evicting unused model files in least-recently-used order, and counts
   * it until the reservation is released. Throws WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR when the file cannot fit.
   * `key` names the file (its digest): a file another pod is already downloading needs no more room (the fetchers
   * share the download through ModelCache's lock), and is counted once.
   */
  async reserve(size: number, label: string, key?: string): Promise<Reservation> {
    const { maxBytes } = this.options;
    const setting = this.options.setting ?? 'the bound';
    if (maxBytes !== undefined && size > maxBytes) {
      throw new ModelSourceError(
        DISK_ERROR,
        `${label} (${gib(size)}) is larger than the model cache's bound (${setting} = ${gib(maxBytes)}): raise ${setting} or choose a smaller model file.`,
      );
    }
    return this.locked(async () => {
      await this.makeRoom(size, label, key);
      const path = join(this.tmpDir, `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}.reserve`);
      await writeFile(path, JSON.stringify({ size, label, ...(key ? { key } : {}) }));
      const heartbeat = setInterval(() => void touch(path, new Date(this.now())), LOCK_HEARTBEAT_MS);
      heartbeat.unref();
      return {
        release: async () => {
          clearInterval(heartbeat);
          await rm(path, { force: true });
        },
      };
    });
  }

  /** What the volume holds now (read without the lock); reservations and leases long dead are removed on the way. */
  async usage(): Promise<CacheUsage> {
    const now = this.now();
    const ttl = this.options.leaseTtlMs ?? LEASE_TTL_MS;
    const inUse = new Set<string>();
    for (const name of await list(this.leasesDir)) {
      const path = join(this.leasesDir, name);
      const info = await stat(path).catch(() => undefined);
      if (!info?.isFile()) continue;
      if (now - info.mtimeMs > LEASE_GARBAGE_MS) await rm(path, { force: true });
      else if (now - info.mtimeMs <= ttl) inUse.add((await readFile(path, 'utf8').catch(() => '')).trim());
    }
    const blobs: CacheUsage['blobs'] = [];
    for (const name of await list(this.blobsDir)) {
      const info = await stat(join(this.blobsDir, name)).catch(() => undefined);
      if (info?.isFile()) blobs.push({ name, size: info.size, lastUsedMs: info.mtimeMs, inUse: inUse.has(name) });
    }
    const reserved = new Map<string, number>();
    let livePartialBytes = 0;
    const orphanPartials: CacheUsage['orphanPartials'] = [];
    for (const name of await list(this.tmpDir)) {
      const path = join(this.tmpDir, name);
      if (name.endsWith('.reserve')) {
        const info = await stat(path).catch(() => undefined);
        if (!info) continue;
        if (now - info.mtimeMs > LOCK_STALE_MS) await rm(path, { force: true });
        else {
          const { size, key = `unnamed:${name}` } = reservation(await readFile(path, 'utf8').catch(() => ''));
          reserved.set(key, Math.max(size, reserved.get(key) ?? 0));
        }
      } else if (name.endsWith('.partial')) {
        const info = await stat(path).catch(() => undefined);
        if (!info) continue;
        const key = name.slice(0, -'.partial'.length);
        if (await this.downloading(key)) livePartialBytes += info.size;
        else orphanPartials.push({ key, size: info.size, lastUsedMs: info.mtimeMs });
      }
    }
    const sum = (sizes: number[]) => sizes.reduce((a, b) => a + b, 0);
    const reservedBytes = sum([...reserved.values()]);
    return {
      usedBytes: sum(blobs.map((b) => b.size)) + reservedBytes + sum(orphanPartials.map((p) => p.size)),
      blobs,
      reservedBytes,
      reservedKeys: new Set(reserved.keys()),
      livePartialBytes,
      orphanPartials,
    };
  }

  private async locked<T>(work: () => Promise<T>): Promise<T> {
    await mkdir(this.tmpDir, { recursive: true });
    const release = await acquireLock(join(this.tmpDir, 'volume.lock')).catch((err: unknown) => {
      throw isDiskFull(err) ? diskFullError("taking the model cache's lock", err) : err;
    });
    try {
      return await work();
    } finally {
      await release();
    }
  }

  /** Writes the lease (the blob's name; its mtime now) and marks the blob used now. */
  private async markUsed(lease: string, file: CachedModelFile): Promise<void> {
    await mkdir(this.leasesDir, { recursive: true });
    const path = this.leasePath(lease);
    const temporary = `${path}.${process.pid}.tmp`;
    await writeFile(temporary, `${file.sha256}\n`);
    await rename(temporary, path);
    await touch(file.path, new Date(this.now()));
  }

  /** Whether a live download holds the lock of `key` (ModelCache's tmp/<key>.lock). */
  private async downloading(key: string): Promise<boolean> {
    return isLockHeld(join(this.tmpDir, `${key}.lock`));
  }

  /** Evicts unused files, least recently used first, until `size` more bytes fit the bound and the disk. */
  private async makeRoom(wanted: number, label: string, key: string | undefined): Promise<void> {
    const { maxBytes } = this.options;
    const recent = this.options.recentUseMs ?? RECENT_USE_MS;
    const usage = await this.usage();
    // Already counted: another pod downloads this very file, and this one will wait for it.
    const size = key !== undefined && usage.reservedKeys.has(key) ? 0 : wanted;
    const fs = await statfs(this.options.dir);
    // Downloads under way will still write what their partial files do not hold yet.
    const pending = Math.max(0, usage.reservedBytes - usage.livePartialBytes);
    let used = usage.usedBytes;
    let free = Number(fs.bavail) * Number(fs.bsize) - pending;
    const fits = () => (maxBytes === undefined || used + size <= maxBytes) && free >= size;
    if (fits()) return;
    const now = this.now();
    const candidates: Candidate[] = [
      ...usage.blobs
        .filter((b) => !b.inUse && now - b.lastUsedMs > recent)
        .map((b) => ({ kind: 'blob' as const, name: b.name, size: b.size, lastUsedMs: b.lastUsedMs })),
      ...usage.orphanPartials.map((p) => ({ kind: 'partial' as const, name: p.key, size: p.size, lastUsedMs: p.lastUsedMs })),
    ].sort((a, b) => a.lastUsedMs - b.lastUsedMs);
    const evicted: string[] = [];
    for (const candidate of candidates) {
      if (fits()) break;
      if (!(await this.evict(candidate))) continue;
      used -= candidate.size;
      free += candidate.size;
      if (candidate.kind === 'blob') evicted.push(candidate.name);
    }
    if (evicted.length > 0) await this.forgetBlobs(new Set(evicted));
    if (fits()) return;
    const inUse = usage.blobs.filter((b) => b.inUse || now - b.lastUsedMs <= recent);
    const held = `${inUse.length} model file${inUse.length === 1 ? '' : 's'} in use or just used (${gib(inUse.reduce((a, b) => a + b.size, 0))}) and downloads under way (${gib(usage.reservedBytes)})`;
    if (maxBytes !== undefined && used + size > maxBytes) {
      throw new ModelSourceError(
        DISK_ERROR,
        `${label} (${gib(size)}) does not fit in the model cache: ${gib(used)} of its ${gib(maxBytes)} bound (${this.options.setting ?? 'the bound'}) are held by ${held}; it fits once replicas of other models stop, or with a larger bound.`,
      );
    }
    throw new ModelSourceError(
      DISK_ERROR,
      `${label} needs ${gib(size)} of disk space but the model cache volume has ${gib(Math.max(0, free))} free once unused models are evicted; the rest is held by ${held}.`,
    );
  }

  /** Removes one unused file; false when it cannot be taken now (a download just took over the partial). */
  private async evict(candidate: Candidate): Promise<boolean> {
    if (candidate.kind === 'blob') {
      await rm(join(this.blobsDir, candidate.name), { force: true });
      return true;
    }
    // A partial is removed under its own download lock, so that no download resumes into a file being removed; a lock
    // a dead download left is taken over (by one taker only: a waiting download may be taking it over too).
    const release = await tryLock(join(this.tmpDir, `${candidate.name}.lock`));
    if (!release) return false;
    try {
      await rm(join(this.tmpDir, `${candidate.name}.partial`), { force: true });
      return true;
    } finally {
      await release();
    }
  }

  /** Drops what pointed at evicted blobs: md5 index entries and the links the fetchers made. */
  private async forgetBlobs(evicted: ReadonlySet<string>): Promise<void> {
    const indexDir = join(this.options.dir, 'index');
    for (const name of await list(indexDir)) {
      const sha256 = (await readFile(join(indexDir, name), 'utf8').catch(() => '')).trim();
      if (evicted.has(sha256)) await rm(join(indexDir, name), { force: true });
    }
    await removeDanglingLinks(join(this.options.dir, 'links'));
  }
}

async function list(dir: string): Promise<string[]> {
  return readdir(dir).catch(() => [] as string[]);
}

async function touch(path: string, at: Date): Promise<void> {
  await utimes(path, at, at).catch(() => {});
}

function reservation(text: string): { size: number; key?: string } {
  try {
    const { size, key } = JSON.parse(text) as { size?: unknown; key?: unknown };
    return {
      size: Number.isSafeInteger(size) && (size as number) > 0 ? (size as number) : 0,
      ...(typeof key === 'string' && key ? { key } : {}),
    };
  } catch {
    return { size: 0 };
  }
}

/** Removes symbolic links under `dir` whose target is gone (the blob they pointed at was evicted). */
async function removeDanglingLinks(dir: string): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await removeDanglingLinks(path);
    else if (entry.isSymbolicLink() && !(await stat(path).catch(() => undefined))) {
      if ((await lstat(path).catch(() => undefined))?.isSymbolicLink()) await rm(path, { force: true });
    }
  }
}
