/**
 * Content-addressed store of downloaded model files:
 *   <dir>/blobs/<sha256>          complete, verified files (never written in place)
 *   <dir>/tmp/<key>.partial       download in progress, resumed with `Range: bytes=<size>-`
 *   <dir>/tmp/<key>.lock          O_EXCL lock naming the pid that owns the partial
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, readdir, rename, rm, stat, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ModelSourceError } from './errors.js';
import { hubEndpoint, hubHeaders, hubResolveUrl, hubResponseError, hubToken, type HubAccessOptions, type ResolvedHubModel } from './hf-hub.js';

export interface DownloadProgress {
  bytesDone: number;
  bytesTotal: number;
}

export interface EnsureHubFileOptions extends HubAccessOptions {
  onProgress?: (progress: DownloadProgress) => void;
}

export interface CachedModelFile {
  path: string;
  sha256: string;
  size: number;
  /** true when the blob was already present and nothing was downloaded */
  cached: boolean;
}

const PROGRESS_INTERVAL_MS = 100;
const LOCK_POLL_MS = 200;
/** A lock without a readable pid this old is left over from a crash between create and write. */
const ORPHAN_LOCK_MS = 30_000;
const SHA256 = /^[0-9a-f]{64}$/;
const DOWNLOAD_ERROR = 'WORKLOAD_INIT_DOWNLOAD_ERROR';

/** In-flight downloads per blob key across every ModelCache of this process, so two callers share one transfer. */
const inFlight = new Map<string, Promise<CachedModelFile>>();

export class ModelCache {
  readonly dir: string;
  readonly maxBytes: number | undefined;
  private readonly blobsDir: string;
  private readonly tmpDir: string;

  constructor({ dir, maxBytes }: { dir: string; maxBytes?: number }) {
    this.dir = dir;
    this.maxBytes = maxBytes;
    this.blobsDir = join(dir, 'blobs');
    this.tmpDir = join(dir, 'tmp');
  }

  async ensureHubFile(resolved: ResolvedHubModel, options: EnsureHubFileOptions = {}): Promise<CachedModelFile> {
    const expected = resolved.file.sha256?.toLowerCase();
    if (expected !== undefined && !SHA256.test(expected)) {
      throw new ModelSourceError('WORKLOAD_INIT_HF_WANDB_API_ERROR', `The hub reported an invalid checksum for ${resolved.file.path}.`);
    }
    const hit = expected && (await this.lookup(expected, resolved.file.size));
    if (hit) return this.reportCached(hit, options);

    // Without a known sha256 (a plain git file) the partial is keyed by what was asked for instead.
    const key = expected ?? createHash('sha256').update(`${resolved.repo}@${resolved.commitSha}:${resolved.file.path}`).digest('hex');
    const flightKey = `${this.dir}\0${key}`;
    let flight = inFlight.get(flightKey);
    if (!flight) {
      flight = this.fetchLocked(resolved, key, expected, options).finally(() => inFlight.delete(flightKey));
      inFlight.set(flightKey, flight);
    } else if (options.onProgress) {
      // A joiner sees no intermediate progress from the shared transfer, but still gets the final report.
      flight.then((file) => options.onProgress?.({ bytesDone: file.size, bytesTotal: file.size }), () => {});
    }
    return flight;
  }

  /** Total bytes of complete blobs, the figure `maxBytes` limits. */
  async usedBytes(): Promise<number> {
    const names = await readdir(this.blobsDir).catch(() => [] as string[]);
    const sizes = await Promise.all(names.map((name) => stat(join(this.blobsDir, name)).then((s) => s.size, () => 0)));
    return sizes.reduce((a, b) => a + b, 0);
  }

  /** The complete blob with this digest and size, if the cache holds it (no network). */
  async lookup(sha256: string, size: number): Promise<CachedModelFile | undefined> {
    const path = join(this.blobsDir, sha256);
    const info = await stat(path).catch(() => undefined);
    return info?.isFile() && info.size === size ? { path, sha256, size, cached: true } : undefined;
  }

  private reportCached(file: CachedModelFile, options: EnsureHubFileOptions): CachedModelFile {
    options.onProgress?.({ bytesDone: file.size, bytesTotal: file.size });
    return file;
  }

  private async fetchLocked(resolved: ResolvedHubModel, key: string, expected: string | undefined, options: EnsureHubFileOptions): Promise<CachedModelFile> {
    await mkdir(this.blobsDir, { recursive: true });
    await mkdir(this.tmpDir, { recursive: true });
    const release = await acquireLock(join(this.tmpDir, `${key}.lock`), options.signal);
    try {
      // Another process may have finished this blob while we waited for its lock.
      const hit = expected && (await this.lookup(expected, resolved.file.size));
      if (hit) return this.reportCached(hit, options);
      const partial = join(this.tmpDir, `${key}.partial`);
      await this.checkSpace(resolved, partial);
      const sha256 = await download(resolved, partial, expected, options);
      const path = join(this.blobsDir, sha256);
      await rename(partial, path);
      return { path, sha256, size: resolved.file.size, cached: false };
    } finally {
      await release();
    }
  }

  /** Refuses before any byte is transferred when the cache limit or the disk cannot take the file. */
  private async checkSpace(resolved: ResolvedHubModel, partial: string): Promise<void> {
    const { size, path } = resolved.file;
    const gib = (n: number) => `${(n / 2 ** 30).toFixed(2)} GiB`;
    if (this.maxBytes !== undefined) {
      const used = await this.usedBytes();
      if (used + size > this.maxBytes) {
        throw new ModelSourceError(
          'WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR',
          `${path} (${gib(size)}) does not fit in the model cache: ${gib(used)} of its ${gib(this.maxBytes)} limit are in use.`,
        );
      }
    }
    const alreadyHave = await stat(partial).then((s) => Math.min(s.size, size), () => 0);
    const fs = await statfs(this.tmpDir);
    const free = Number(fs.bavail) * Number(fs.bsize);
    if (free < size - alreadyHave) {
      throw new ModelSourceError(
        'WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR',
        `${path} needs ${gib(size - alreadyHave)} more disk space but only ${gib(free)} is free.`,
      );
    }
  }
}

/** Creates the lock with O_EXCL, waiting while a live process holds it and taking over from dead ones. */
async function acquireLock(lockPath: string, signal?: AbortSignal): Promise<() => Promise<void>> {
  for (;;) {
    try {
      const handle = await open(lockPath, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      return () => rm(lockPath, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (await isStaleLock(lockPath)) {
      await rm(lockPath, { force: true });
      continue;
    }
    await sleep(LOCK_POLL_MS, undefined, { signal });
  }
}

async function isStaleLock(lockPath: string): Promise<boolean> {
  const [text, info] = await Promise.all([readFile(lockPath, 'utf8').catch(() => ''), stat(lockPath).catch(() => undefined)]);
  if (!info) return false; // released meanwhile: the next open will tell
  const pid = Number.parseInt(text, 10);
  if (!Number.isInteger(pid) || pid <= 0) return Date.now() - info.mtimeMs > ORPHAN_LOCK_MS;
  try {
    process.kill(pid, 0); // signal 0 only probes for existence
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

function throttledProgress(total: number, onProgress?: (p: DownloadProgress) => void): (done: number, final?: boolean) => void {
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

/**
 * Fetches the file into `partial`, resuming what is already there, and returns its verified sha256.
 * An interrupted transfer keeps the partial for the next call; corrupt content deletes it.
 */
async function download(resolved: ResolvedHubModel, partial: string, expected: string | undefined, options: EnsureHubFileOptions): Promise<string> {
  const { repo, commitSha, file } = resolved;
  const { signal } = options;
  const token = hubToken(options.token);
  const url = hubResolveUrl(hubEndpoint(options.endpoint), repo, commitSha, file.path);
  const ctx = { repo, revision: commitSha, file: file.path, tokenSent: Boolean(token) };
  const failed = (message: string, cause?: unknown) => new ModelSourceError(DOWNLOAD_ERROR, message, { cause });

  let offset = await stat(partial).then((s) => s.size, () => 0);
  if (offset > file.size) {
    await rm(partial, { force: true });
    offset = 0;
  }
  const hash = createHash('sha256');
  // Re-hash what is already on disk: the digest must cover the whole file, not just the resumed tail.
  if (offset > 0) for await (const chunk of createReadStream(partial, { end: offset - 1 })) hash.update(chunk as Buffer);
  const progress = throttledProgress(file.size, options.onProgress);

  if (offset < file.size) {
    const request = (from: number) =>
      fetch(url, {
        headers: hubHeaders(token, { 'accept-encoding': 'identity', ...(from > 0 ? { range: `bytes=${from}-` } : {}) }),
        signal,
      }).catch((err: unknown) => {
        if (signal?.aborted) throw signal.reason;
        throw failed(`Could not download ${file.path} from ${repo}: the connection failed.`, err);
      });

    let res = await request(offset);
    let digest = hash;
    const resumed = res.status === 206 && res.headers.get('content-range')?.startsWith(`bytes ${offset}-`);
    if (offset > 0 && !resumed && (res.ok || res.status === 416)) {
      // The server ignored or refused the range: start over rather than append misaligned bytes.
      void res.body?.cancel().catch(() => {});
      await rm(partial, { force: true });
      [offset, digest, res] = [0, createHash('sha256'), await request(0)];
    }
    return finish(await streamInto(res, offset, digest));
  }
  return finish(hash);

  async function streamInto(res: Response, from: number, digest: Hash): Promise<Hash> {
    if (!res.ok) throw hubResponseError(res, ctx);
    if (!res.body) throw failed(`The hub sent no content for ${file.path}.`);
    let done = from;
    let oversized = false;
    progress(done, true);
    const handle = await open(partial, 'a');
    // A reader rather than `for await`: the body's declared type is not async-iterable under every lib setup.
    const reader = res.body.getReader();
    try {
      for (let next = await reader.read(); !next.done; next = await reader.read()) {
        const chunk = next.value;
        if ((oversized = done + chunk.byteLength > file.size)) {
          await reader.cancel();
          break;
        }
        await handle.appendFile(chunk);
        digest.update(chunk);
        done += chunk.byteLength;
        progress(done);
      }
      await handle.sync(); // the rename into blobs/ must not expose data still in the page cache only
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw failed(`Download of ${file.path} from ${repo} was interrupted after ${done} of ${file.size} bytes; retrying resumes it.`, err);
    } finally {
      await handle.close().catch(() => {});
    }
    if (oversized) {
      await rm(partial, { force: true });
      throw failed(`${file.path} from ${repo} is larger than the ${file.size} bytes the hub announced.`);
    }
    if (done !== file.size) {
      throw failed(`Download of ${file.path} from ${repo} stopped after ${done} of ${file.size} bytes; retrying resumes it.`);
    }
    return digest;
  }

  async function finish(digest: Hash): Promise<string> {
    const actual = digest.digest('hex');
    if (expected && actual !== expected) {
      await rm(partial, { force: true });
      throw failed(`${file.path} from ${repo} failed its checksum check (expected sha256 ${expected}, got ${actual}).`);
    }
    progress(file.size, true);
    return actual;
  }
}
