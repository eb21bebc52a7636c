/**
 * Content-addressed store of downloaded model files:
 *   <dir>/blobs/<sha256>          complete, verified files (never written in place)
 *   <dir>/index/md5-<hex>         the sha256 of the blob with that md5, for sources that publish md5 only (W&B)
 *   <dir>/tmp/<key>.partial       download in progress, resumed with `Range: bytes=<size>-`
 *   <dir>/tmp/<key>.lock          the lock of the download that owns the partial (src/util/file-lock.ts)
 * Every source goes through one download core: sha256 computed while streaming (plus md5 when the source gave one),
 * verified against what the source announced, resumed, locked across processes and shared within one.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { acquireLock, capitalize, download, DOWNLOAD_ERROR, type BlobRequest, type DownloadProgress } from './blob-download.js';
import { claimDisk, DISK_ERROR, gib } from './disk-space.js';
import { ModelSourceError } from './errors.js';
import { isTransientStatus, retryAfterMs, TransientError, type RetryPolicy, type RetryReporter } from './retry.js';
import {
  hubEndpoint,
  hubHeaders,
  hubResolveUrl,
  hubRetryOptions,
  hubToken,
  type HubAccessOptions,
  type ResolvedHubModel,
} from './hf-hub.js';
import { hubResponseError } from './hub-errors.js';
import { SharedTransfers } from './shared-transfers.js';

export type { DownloadProgress } from './blob-download.js';

export interface EnsureHubFileOptions extends HubAccessOptions {
  onProgress?: (progress: DownloadProgress) => void;
}

/** A file at a URL, e.g. a W&B artifact file (see `wandbFileDownload` in ./wandb/registry-client.ts). */
export interface EnsureUrlFileOptions {
  /** Where the bytes are; redirects are followed (fetch drops `authorization` on a redirect to another origin). */
  url: string;
  /** Sent with every request for the file, e.g. its authorization; never logged or put in messages. */
  headers?: Record<string, string>;
  /** The size the source announced; more or fewer bytes fail the download. */
  size: number;
  /** The content's sha256 (hex), when the source publishes it: then a cached blob is found without any request. */
  sha256?: string;
  /** The content's md5 in base64, as W&B manifests give it: verified, and indexed so the next call needs no request. */
  md5Base64?: string;
  /** Identifies the content when neither digest is given (names the partial file); defaults to the URL without query. */
  key?: string;
  /** The file as users know it, for messages, e.g. `model.gguf from acme/models/llama:v3`. Never put secrets here. */
  label?: string;
  /** Who serves the file, for messages, e.g. `W&B` (default `the server`). */
  source?: string;
  /** Maps a failed answer (status >= 400) to an error; by default 401, 403, 404 and others are told apart by status. */
  responseError?: (res: Response) => ModelSourceError;
  onProgress?: (progress: DownloadProgress) => void;
  signal?: AbortSignal;
  /** How 429, 5xx and cut transfers are retried (each retry resumes by Range); default DEFAULT_RETRY_POLICY. */
  retry?: Partial<RetryPolicy>;
  /** Told about each retry before it is waited for. */
  onRetry?: RetryReporter;
}

export interface CachedModelFile {
  path: string;
  sha256: string;
  size: number;
  /** true when the blob was already present and nothing was downloaded */
  cached: boolean;
}

/** One download, whatever its source: what the shared core needs. */

const SHA256 = /^[0-9a-f]{64}$/;
const MD5_BASE64 = /^[A-Za-z0-9+/]{22}==$/;

/** Downloads under way per cache and blob key across every ModelCache of this process, so two callers share one transfer. */
const transfers = new SharedTransfers<CachedModelFile>();

const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

/** A W&B-style base64 md5 as hex, or undefined when it is not one. */
export function md5Base64ToHex(md5Base64: string): string | undefined {
  return MD5_BASE64.test(md5Base64) ? Buffer.from(md5Base64, 'base64').toString('hex') : undefined;
}

/** The default reading of a failed answer for a plain URL download. */
function urlResponseError(res: Response, label: string, source: string): ModelSourceError {
  void res.body?.cancel().catch(() => {});
  switch (res.status) {
    case 401:
      return new ModelSourceError(
        'WORKLOAD_INIT_INVALID_TOKEN_ERROR',
        `${capitalize(source)} rejected the credentials (401) for ${label}.`,
      );
    case 403:
      return new ModelSourceError('WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR', `${capitalize(source)} denied access (403) to ${label}.`);
    case 404:
    case 410:
      return new ModelSourceError('WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR', `${capitalize(source)} has no ${label} (${res.status}).`);
    default: {
      const message = `${capitalize(source)} answered ${res.status} while sending ${label}.`;
      return isTransientStatus(res.status)
        ? new TransientError(DOWNLOAD_ERROR, message, retryAfterMs(res))
        : new ModelSourceError(DOWNLOAD_ERROR, message);
    }
  }
}

export class ModelCache {
  readonly dir: string;
  readonly maxBytes: number | undefined;
  /** Bytes of the downloads this process has under way: counted against `maxBytes` with the finished files. */
  private downloading = 0;
  private readonly blobsDir: string;
  private readonly indexDir: string;
  private readonly tmpDir: string;

  constructor({ dir, maxBytes }: { dir: string; maxBytes?: number }) {
    this.dir = dir;
    this.maxBytes = maxBytes;
    this.blobsDir = join(dir, 'blobs');
    this.indexDir = join(dir, 'index');
    this.tmpDir = join(dir, 'tmp');
  }

  async ensureHubFile(resolved: ResolvedHubModel, options: EnsureHubFileOptions = {}): Promise<CachedModelFile> {
    const expected = resolved.file.sha256?.toLowerCase();
    if (expected !== undefined && !SHA256.test(expected)) {
      throw new ModelSourceError('WORKLOAD_INIT_HF_WANDB_API_ERROR', `The hub reported an invalid checksum for ${resolved.file.path}.`);
    }
    const hit = expected && (await this.lookup(expected, resolved.file.size));
    if (hit) return this.reportCached(hit, options.onProgress);

    const { repo, commitSha, file } = resolved;
    const token = hubToken(options.token);
    const ctx = { repo, revision: commitSha, file: file.path, tokenSent: Boolean(token) };
    return this.ensureBlob({
      // Without a known sha256 (a plain git file) the partial is keyed by what was asked for instead.
      key: expected ?? sha256Hex(`${repo}@${commitSha}:${file.path}`),
      size: file.size,
      ...(expected ? { sha256: expected } : {}),
      url: hubResolveUrl(hubEndpoint(options.endpoint), repo, commitSha, file.path),
      headers: hubHeaders(token),
      label: `${file.path} from ${repo}`,
      source: 'the hub',
      responseError: (res) => hubResponseError(res, ctx),
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      retry: hubRetryOptions(options),
    });
  }

  /**
   * Fetches a file at a URL into the cache, or finds it there: by `sha256`, or by `md5Base64` through the md5 index
   * (neither needs a request). The bytes are verified against every digest given, and the blob is keyed by sha256.
   */
  async ensureUrlFile(options: EnsureUrlFileOptions): Promise<CachedModelFile> {
    const { url, size } = options;
    const source = options.source ?? 'the server';
    const label = options.label ?? (new URL(url).pathname.split('/').pop() || 'the file');
    const sha256 = options.sha256?.toLowerCase();
    const md5 = options.md5Base64 === undefined ? undefined : md5Base64ToHex(options.md5Base64);
    if ((sha256 !== undefined && !SHA256.test(sha256)) || (options.md5Base64 !== undefined && md5 === undefined)) {
      throw new ModelSourceError('WORKLOAD_INIT_HF_WANDB_API_ERROR', `${capitalize(source)} reported an invalid checksum for ${label}.`);
    }
    if (!Number.isSafeInteger(size) || size < 0) {
      throw new ModelSourceError('WORKLOAD_INIT_HF_WANDB_API_ERROR', `${capitalize(source)} reported an invalid size for ${label}.`);
    }
    const hit = (sha256 && (await this.lookup(sha256, size))) || (md5 && (await this.lookupMd5Hex(md5, size)));
    if (hit) return this.reportCached(hit, options.onProgress);

    const withoutQuery = new URL(url);
    withoutQuery.search = '';
    return this.ensureBlob({
      key: sha256 ?? (md5 ? `md5-${md5}` : sha256Hex(options.key ?? withoutQuery.href)),
      size,
      ...(sha256 ? { sha256 } : {}),
      ...(md5 ? { md5 } : {}),
      url,
      headers: options.headers ?? {},
      label,
      source,
      responseError: options.responseError ?? ((res) => urlResponseError(res, label, source)),
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      retry: {
        ...(options.retry ? { policy: options.retry } : {}),
        ...(options.onRetry ? { onRetry: options.onRetry } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      },
    });
  }

  /** Total bytes of complete blobs, the figure `maxBytes` limits. */
  async usedBytes(): Promise<number> {
    const names = await readdir(this.blobsDir).catch(() => [] as string[]);
    const sizes = await Promise.all(
      names.map((name) =>
        stat(join(this.blobsDir, name)).then(
          (s) => s.size,
          () => 0,
        ),
      ),
    );
    return sizes.reduce((a, b) => a + b, 0);
  }

  /** The complete blob with this digest and size, if the cache holds it (no network). */
  async lookup(sha256: string, size: number): Promise<CachedModelFile | undefined> {
    const path = join(this.blobsDir, sha256);
    const info = await stat(path).catch(() => undefined);
    return info?.isFile() && info.size === size ? { path, sha256, size, cached: true } : undefined;
  }

  /** The complete blob whose md5 (base64, as in W&B manifests) and size are these, if the cache holds it (no network). */
  async lookupMd5(md5Base64: string, size: number): Promise<CachedModelFile | undefined> {
    const md5 = md5Base64ToHex(md5Base64);
    return md5 ? this.lookupMd5Hex(md5, size) : undefined;
  }

  private async lookupMd5Hex(md5: string, size: number): Promise<CachedModelFile | undefined> {
    const sha256 = (await readFile(join(this.indexDir, `md5-${md5}`), 'utf8').catch(() => '')).trim();
    return SHA256.test(sha256) ? this.lookup(sha256, size) : undefined;
  }

  /** Records md5 -> sha256 once the blob is in place (written aside, then renamed, so readers never see half of it). */
  private async writeMd5Index(md5: string, sha256: string): Promise<void> {
    await mkdir(this.indexDir, { recursive: true });
    const path = join(this.indexDir, `md5-${md5}`);
    const tmp = `${path}.${process.pid}.tmp`;
    await writeFile(tmp, `${sha256}\n`);
    await rename(tmp, path);
  }

  private reportCached(file: CachedModelFile, onProgress?: (progress: DownloadProgress) => void): CachedModelFile {
    onProgress?.({ bytesDone: file.size, bytesTotal: file.size });
    return file;
  }

  /**
   * The blob of `req`, downloading it unless this process is already doing so: then the transfer is shared, and this
   * caller is told its progress and retries from now on. The transfer goes on while any caller still waits for it.
   */
  private async ensureBlob(req: BlobRequest): Promise<CachedModelFile> {
    let reported: number | undefined;
    const onProgress = req.onProgress;
    const waiter = {
      ...(req.signal ? { signal: req.signal } : {}),
      ...(onProgress
        ? {
            onProgress: (progress: DownloadProgress) => {
              reported = progress.bytesDone;
              onProgress(progress);
            },
          }
        : {}),
      ...(req.retry.onRetry ? { onRetry: req.retry.onRetry } : {}),
    };
    const file = await transfers.join(`${this.dir}\0${req.key}`, waiter, ({ signal, onProgress, onRetry }) =>
      this.fetchLocked({ ...req, signal, onProgress, retry: { ...req.retry, signal, onRetry } }),
    );
    // A caller that joined near the end may have missed the last report.
    if (reported !== file.size) onProgress?.({ bytesDone: file.size, bytesTotal: file.size });
    return file;
  }

  private async cachedBlob(req: BlobRequest): Promise<CachedModelFile | undefined> {
    return (
      (req.sha256 && (await this.lookup(req.sha256, req.size))) || (req.md5 && (await this.lookupMd5Hex(req.md5, req.size))) || undefined
    );
  }

  private async fetchLocked(req: BlobRequest): Promise<CachedModelFile> {
    await mkdir(this.blobsDir, { recursive: true });
    await mkdir(this.tmpDir, { recursive: true });
    const release = await acquireLock(join(this.tmpDir, `${req.key}.lock`), req.signal);
    // A lock lost meanwhile (its heartbeat failed, or another process took it over) stops the transfer, and leaves the
    // partial to whoever holds the lock now: two downloads appending to one partial would spoil it.
    const signal = req.signal ? AbortSignal.any([req.signal, release.lost]) : release.lost;
    try {
      // Another process may have finished this blob while we waited for its lock.
      const hit = await this.cachedBlob(req);
      if (hit) return this.reportCached(hit, req.onProgress);
      const partial = join(this.tmpDir, `${req.key}.partial`);
      let sha256: string;
      let path: string;
      const claim = await this.claimSpace(req, partial);
      try {
        const onProgress = (progress: DownloadProgress) => {
          claim.progress(progress.bytesDone);
          req.onProgress?.(progress);
        };
        sha256 = await download({ ...req, signal, retry: { ...req.retry, signal }, onProgress }, partial);
        if (release.lost.aborted) throw release.lost.reason;
        // The digest covers the bytes this download wrote; a file grown by another writer besides must not become the blob.
        const onDisk = (await stat(partial)).size;
        if (onDisk !== req.size) {
          await rm(partial, { force: true });
          throw new ModelSourceError(
            DOWNLOAD_ERROR,
            `The download of ${req.label} was spoiled on disk (${onDisk} bytes instead of ${req.size}); it was deleted.`,
          );
        }
        path = join(this.blobsDir, sha256);
        await rename(partial, path);
      } finally {
        this.downloading -= req.size;
        claim.release();
      }
      if (req.md5) await this.writeMd5Index(req.md5, sha256);
      return { path, sha256, size: req.size, cached: false };
    } catch (error) {
      if (!release.lost.aborted || req.signal?.aborted) throw error;
      throw new ModelSourceError(
        DOWNLOAD_ERROR,
        `The download of ${req.label} stopped: this process lost its lock on it (${(release.lost.reason as Error).message}); its partial file is left to the process that holds the lock now.`,
        { cause: error },
      );
    } finally {
      await release();
    }
  }

  /**
   * Refuses before any byte is transferred when the cache limit or the disk cannot take the file; otherwise counts it
   * as under way: against `maxBytes` (`downloading`) and on its disk (the claim), both given back by the caller when
   * the download ends.
   */
  private async claimSpace({ size, label }: BlobRequest, partial: string) {
    if (this.maxBytes !== undefined) {
      const used = (await this.usedBytes()) + this.downloading;
      if (used + size > this.maxBytes) {
        throw new ModelSourceError(
          DISK_ERROR,
          `${label} (${gib(size)}) does not fit in the model cache: ${gib(used)} of its ${gib(this.maxBytes)} limit are in use.`,
        );
      }
    }
    // Counted from the check on (the check and the count in one turn: two downloads cannot both pass it).
    this.downloading += size;
    try {
      return await claimDisk(this.tmpDir, size, label, partial);
    } catch (error) {
      this.downloading -= size;
      throw error;
    }
  }
}
