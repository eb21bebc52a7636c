/**
 * The download core of the model cache: one transfer of one blob, streamed to
 * a partial file with its digests computed on the way, resumed with `Range`
 * after an interruption, verified against what the source announced, retried
 * on transient failures; and taking the cross-process lock that owns a partial.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, rm, stat } from 'node:fs/promises';
import { acquireLock as acquireFileLock, type ReleaseLock } from '../util/file-lock.js';
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
export const DOWNLOAD_ERROR = 'WORKLOAD_INIT_DOWNLOAD_ERROR';

/**
 * Takes a download lock (src/util/file-lock.ts: it names its holder, is waited for while that holder lives, and is
 * taken over from one that is gone; its `lost` signal aborts when this holder may no longer have it, and the transfer
 * is then stopped). A disk too full to write the lock fails as the download would.
 */
export async function acquireLock(lockPath: string, signal?: AbortSignal): Promise<ReleaseLock> {
  try {
    return await acquireFileLock(lockPath, signal ? { signal } : {});
  } catch (err) {
    throw isDiskFull(err) ? diskFullError('taking the download lock', err) : err;
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
    // Stopped (its lock lost, see model-cache.ts) as it ended: the partial, another's now, is not judged or deleted.
    if (signal?.aborted) throw signal.reason;
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
