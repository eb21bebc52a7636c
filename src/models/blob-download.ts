/**
 * The download core of the model cache: one transfer of one blob, streamed to
 * a partial file with its digests computed on the way, resumed with `Range`
 * after an interruption, verified against what the source announced, retried
 * on transient failures; and the cross-process lock that owns a partial.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, readFile, rm, stat, utimes, type FileHandle } from 'node:fs/promises';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { diskFullError, isDiskFull } from './disk-space.js';
import { ModelSourceError } from './errors.js';

/** The source's name at the start of a sentence. */
export const capitalize = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);
import { TransientError, withRetries, type RetryOptions } from './retry.js';

export interface DownloadProgress {
  bytesDone: number;
  bytesTotal: number;
}

export interface BlobRequest {
  /** names tmp/<key>.partial and tmp/<key>.lock, and the in-flight entry */
  key: string;
  size: number;
  sha256?: string;
  /** md5 in hex */
  md5?: string;
  url: string;
  headers: Record<string, string>;
  label: string;
  source: string;
  /** 429 and 5xx come back as TransientError, which is retried */
  responseError: (res: Response) => ModelSourceError;
  onProgress?: (progress: DownloadProgress) => void;
  signal?: AbortSignal;
  retry: RetryOptions;
  /**
   * The slowest the transfer may go (default MIN_PACE); below it, an attempt fails and the next resumes. An attempt that
   * wrote at least its `bytes` renews the retry budget.
   */
  minPace?: { bytes: number; ms: number };
}

const PROGRESS_INTERVAL_MS = 100;
const LOCK_POLL_MS = 200;
/** A lock without a readable pid this old is left over from a crash between create and write. */
const ORPHAN_LOCK_MS = 30_000;
/**
 * Locks on a volume that pods share (the Kubernetes model cache): a holder refreshes its lock's mtime this often, and
 * a lock written on another host (another pod: its own pid namespace, where our pid probe means nothing) is stale
 * once its mtime is older than LOCK_STALE_MS.
 */
export const LOCK_HEARTBEAT_MS = 10_000;
export const LOCK_STALE_MS = 60_000;
export const DOWNLOAD_ERROR = 'WORKLOAD_INIT_DOWNLOAD_ERROR';

/**
 * Creates the lock with O_EXCL, waiting while a live process holds it and taking over from dead ones. The lock names
 * its holder (`<pid> <hostname>`) and its mtime is refreshed while held, so that holders on other hosts can tell a live
 * lock from one left by a process that died.
 */
export async function acquireLock(lockPath: string, signal?: AbortSignal): Promise<() => Promise<void>> {
  for (;;) {
    if (await createLock(lockPath)) {
      const heartbeat = setInterval(() => {
        const now = new Date();
        utimes(lockPath, now, now).catch(() => {});
      }, LOCK_HEARTBEAT_MS);
      heartbeat.unref();
      return () => {
        clearInterval(heartbeat);
        return rm(lockPath, { force: true });
      };
    }
    const tookOver = (await isStaleLock(lockPath)) && (await takeOver(lockPath));
    if (!tookOver) await sleep(LOCK_POLL_MS, undefined, { signal });
  }
}

/**
 * Creates `path` with O_EXCL and writes its holder into it; false when it exists. A lock whose holder could not be
 * written (the disk is full) is removed rather than left nameless, which would hold every waiter for ORPHAN_LOCK_MS.
 */
async function createLock(path: string): Promise<boolean> {
  let handle: FileHandle;
  try {
    handle = await open(path, 'wx');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw isDiskFull(err) ? diskFullError('taking the download lock', err) : err;
  }
  try {
    await handle.writeFile(`${process.pid} ${hostname()}`);
    await handle.close();
    return true;
  } catch (err) {
    await handle.close().catch(() => {});
    await rm(path, { force: true });
    throw isDiskFull(err) ? diskFullError('taking the download lock', err) : err;
  }
}

/**
 * Removes the stale lock at `lockPath`, unless another waiter is taking it over (false: wait). Finding a lock stale and
 * removing it are two steps: two waiters that both found it stale would otherwise both remove it, the second removing
 * the lock the first had just created, and both would hold it (and append to one partial). So the removal is done by
 * one waiter at a time, holding a guard created with O_EXCL, after finding the lock still stale. A guard is held for
 * milliseconds; one left by a waiter that died then is stale by the same rules as a lock, and removed.
 */
async function takeOver(lockPath: string): Promise<boolean> {
  const guard = `${lockPath}.takeover`;
  if (!(await createLock(guard))) {
    if (await isStaleLock(guard)) await rm(guard, { force: true });
    return false;
  }
  try {
    if (await isStaleLock(lockPath)) await rm(lockPath, { force: true });
    return true;
  } finally {
    await rm(guard, { force: true });
  }
}

/** Whether the lock at `lockPath` was left by a holder that is gone (false when it is held, or already released). */
export async function isStaleLock(lockPath: string, now = Date.now()): Promise<boolean> {
  const [text, info] = await Promise.all([readFile(lockPath, 'utf8').catch(() => ''), stat(lockPath).catch(() => undefined)]);
  if (!info) return false; // released meanwhile: the next open will tell
  const [pidText, host] = text.trim().split(' ');
  const pid = Number.parseInt(pidText ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0) return now - info.mtimeMs > ORPHAN_LOCK_MS;
  // Another host's process cannot be probed: its heartbeat says whether it lives.
  if (host !== undefined && host !== hostname()) return now - info.mtimeMs > LOCK_STALE_MS;
  try {
    process.kill(pid, 0); // signal 0 only probes for existence
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

export function throttledProgress(total: number, onProgress?: (p: DownloadProgress) => void): (done: number, final?: boolean) => void {
  let lastAt = 0;
  let lastDone = -1;
  return (done, final = false) => {
    const now = Date.now();
    if (!onProgress || done === lastDone || (!final && now - lastAt < PROGRESS_INTERVAL_MS)) return;
    lastAt = now;
    lastDone = done;
    onProgress({ bytesDone: done, bytesTotal: total });
  };
}

/** The digests computed while streaming: sha256 always (it names the blob), md5 when the source gave one to check. */
export class Digests {
  readonly sha256: Hash = createHash('sha256');
  readonly md5: Hash | undefined;

  constructor(withMd5: boolean) {
    this.md5 = withMd5 ? createHash('md5') : undefined;
  }

  update(chunk: Uint8Array): void {
    this.sha256.update(chunk);
    this.md5?.update(chunk);
  }
}

/**
 * The slowest a download may go: at least MIN_PACE.bytes in every MIN_PACE.ms. A server that stops sending, or
 * drips a byte at a time, would otherwise hold the endpoint in its download (and its replica's place) for hours.
 */
const MIN_PACE = { bytes: 1 << 20, ms: 60_000 };

class StalledError extends Error {}

/** Reads a body, failing with StalledError once it falls below MIN_PACE. */
class PaceWatch {
  constructor(private readonly pace = MIN_PACE) {}

  private windowStart = performance.now();
  private windowBytes = 0;
  private timer: NodeJS.Timeout | undefined;

  async read(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<ReadableStreamReadResult<Uint8Array>> {
    const { bytes, ms } = this.pace;
    const left = this.windowStart + ms - performance.now();
    const stalled = new Promise<never>((_, reject) => {
      this.timer = setTimeout(() => reject(new StalledError(`fell below ${bytes} bytes in ${ms / 1000} s`)), Math.max(0, left));
    });
    try {
      const next = await Promise.race([reader.read(), stalled]);
      this.windowBytes += next.value?.byteLength ?? 0;
      if (this.windowBytes >= bytes) [this.windowStart, this.windowBytes] = [performance.now(), 0];
      return next;
    } catch (error) {
      void reader.cancel().catch(() => {});
      throw error;
    } finally {
      this.stop();
    }
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}

/**
 * Fetches the file into `partial`, resuming what is already there, and returns its verified sha256.
 * An interrupted transfer keeps the partial for the next call; corrupt content deletes it.
 */
export async function download(req: BlobRequest, partial: string): Promise<string> {
  const { url, size, label, source, signal } = req;
  const failed = (message: string, cause?: unknown) => new ModelSourceError(DOWNLOAD_ERROR, message, { cause });

  let offset = await stat(partial).then(
    (s) => s.size,
    () => 0,
  );
  if (offset > size) {
    await rm(partial, { force: true });
    offset = 0;
  }
  const digests = new Digests(req.md5 !== undefined);
  // Re-hash what is already on disk: the digest must cover the whole file, not just the resumed tail.
  if (offset > 0) for await (const chunk of createReadStream(partial, { end: offset - 1 })) digests.update(chunk as Buffer);
  const progress = throttledProgress(size, req.onProgress);

  let current = digests;
  // The most of the file that any attempt had on disk. An attempt that raised it by at least the minimum pace's bytes
  // starts a new retry budget (see retry.ts); one that did not, does not: a server that cuts every connection after a
  // byte or two, or one that ignores ranges (each attempt starts over) and cuts at the same place, or a file shorter
  // than announced, would otherwise be tried for ever.
  let reached = offset;
  let renewals = 0;
  const renewAfter = (req.minPace ?? MIN_PACE).bytes;
  if (offset < size) {
    await withRetries(
      source,
      `downloading ${label}`,
      async () => {
        try {
          await attempt();
        } finally {
          if (offset >= reached + renewAfter) renewals++;
          reached = Math.max(reached, offset);
        }
      },
      { ...req.retry, progress: () => renewals },
    );
  }
  return finish(current);

  /** One attempt: resumes from what the earlier ones wrote (`offset` and `current` follow the partial file). */
  async function attempt(): Promise<void> {
    let res = await request(offset);
    const resumed = res.status === 206 && res.headers.get('content-range')?.startsWith(`bytes ${offset}-`);
    if (offset > 0 && !resumed && (res.ok || res.status === 416)) {
      // The server ignored or refused the range: start over rather than append misaligned bytes.
      void res.body?.cancel().catch(() => {});
      await rm(partial, { force: true });
      [offset, current] = [0, new Digests(req.md5 !== undefined)];
      res = await request(0);
    }
    await streamInto(res);
  }

  function request(from: number): Promise<Response> {
    return fetch(url, {
      headers: { ...req.headers, 'accept-encoding': 'identity', ...(from > 0 ? { range: `bytes=${from}-` } : {}) },
      signal,
    }).catch((err: unknown) => {
      if (signal?.aborted) throw signal.reason;
      throw new TransientError(DOWNLOAD_ERROR, `Could not download ${label}: the connection failed.`, undefined, { cause: err });
    });
  }

  /** Appends the answer's bytes to the partial, advancing `offset` and `current` with every chunk written. */
  async function streamInto(res: Response): Promise<void> {
    if (!res.ok) throw req.responseError(res);
    if (!res.body) throw new TransientError(DOWNLOAD_ERROR, `${capitalize(source)} sent no content for ${label}.`);
    let oversized = false;
    progress(offset, true);
    const handle = await open(partial, 'a').catch(async (err: unknown) => {
      throw isDiskFull(err) ? await diskFull(err) : err;
    });
    // A reader rather than `for await`: the body's declared type is not async-iterable under every lib setup.
    const reader = res.body.getReader();
    const pace = new PaceWatch(req.minPace);
    try {
      for (let next = await pace.read(reader); !next.done; next = await pace.read(reader)) {
        const chunk = next.value;
        if ((oversized = offset + chunk.byteLength > size)) {
          await reader.cancel();
          break;
        }
        await handle.appendFile(chunk);
        current.update(chunk);
        offset += chunk.byteLength;
        progress(offset);
      }
      await handle.sync(); // the rename into blobs/ must not expose data still in the page cache only
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (isDiskFull(err)) throw await diskFull(err);
      const why = err instanceof StalledError ? err.message : 'was interrupted';
      throw new TransientError(
        DOWNLOAD_ERROR,
        `Download of ${label} ${why} after ${offset} of ${size} bytes; retrying resumes it.`,
        undefined,
        {
          cause: err,
        },
      );
    } finally {
      pace.stop();
      await handle.close().catch(() => {});
    }
    if (oversized) {
      await rm(partial, { force: true });
      throw failed(`${label} is larger than the ${size} bytes ${source} announced.`);
    }
    if (offset !== size) {
      throw new TransientError(DOWNLOAD_ERROR, `Download of ${label} stopped after ${offset} of ${size} bytes; retrying resumes it.`);
    }
  }

  /**
   * The disk filled up: no retry can help until room is made, so the download fails for good, and its partial, which
   * holds space the disk needs back (and may end in half a chunk), is deleted.
   */
  async function diskFull(err: unknown): Promise<ModelSourceError> {
    await rm(partial, { force: true });
    return diskFullError(`downloading ${label} (after ${offset} of ${size} bytes)`, err);
  }

  async function finish(digest: Digests): Promise<string> {
    const actual = digest.sha256.digest('hex');
    const actualMd5 = digest.md5?.digest('hex');
    const mismatch =
      req.sha256 && actual !== req.sha256
        ? `expected sha256 ${req.sha256}, got ${actual}`
        : req.md5 && actualMd5 !== req.md5
          ? `expected md5 ${hexToBase64(req.md5)}, got ${hexToBase64(actualMd5 ?? '')}`
          : undefined;
    if (mismatch) {
      await rm(partial, { force: true });
      throw failed(`${label} failed its checksum check (${mismatch}).`);
    }
    progress(size, true);
    return actual;
  }
}

const hexToBase64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64');
