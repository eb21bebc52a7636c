/**
 * Registry artifacts as a model source: resolves an artifact version through
 * the W&B API, picks its GGUF file, and downloads it into the shared model
 * cache (digest-verified). A file already cached is found by its manifest
 * digest, without a download.
 */
import type { ModelCache } from '../model-cache.js';
import type { RetryPolicy } from '../retry.js';
import type { ArtifactSource, PrepareHooks, ResolvedModel } from '../model-store.js';
import { formatArtifactName, pickModelFile, resolveArtifact, wandbFileDownload } from './registry-client.js';

export interface WandbSourceOptions {
  baseUrl?: string;
  apiKey?: string;
  quantPreference?: readonly string[];
  /** How registry calls and downloads are retried (see ../retry.ts). */
  retry?: Partial<RetryPolicy>;
}

export class WandbArtifactSource implements ArtifactSource {
  constructor(
    private readonly cache: ModelCache,
    private readonly options: WandbSourceOptions = {},
  ) {}

  async prepare(artifact: string, hooks: PrepareHooks): Promise<{ resolved: ResolvedModel; path: string }> {
    const { found, file, resolved } = await this.find(artifact, hooks);
    const hit = await this.cache.lookupMd5(file.md5, file.size);
    if (hit) return { resolved: { ...resolved, sha256: hit.sha256 }, path: hit.path };
    await hooks.onDownloadStart?.();
    const blob = await this.cache.ensureUrlFile({
      ...wandbFileDownload(found, file, this.options.apiKey ? { apiKey: this.options.apiKey } : {}),
      ...(hooks.onProgress ? { onProgress: hooks.onProgress } : {}),
      ...(hooks.signal ? { signal: hooks.signal } : {}),
      ...(this.options.retry ? { retry: this.options.retry } : {}),
      ...(hooks.onRetry ? { onRetry: hooks.onRetry } : {}),
    });
    return { resolved: { ...resolved, sha256: blob.sha256 }, path: blob.path };
  }

  /** The version and its file, pinned (`v<N>`), for a replica that fetches the file itself (sha256 unknown until then). */
  async resolve(artifact: string, hooks: PrepareHooks): Promise<ResolvedModel> {
    const { resolved } = await this.find(artifact, hooks);
    return { ...resolved, sha256: null };
  }

  private async find(artifact: string, hooks: PrepareHooks) {
    const access = {
      ...(this.options.baseUrl ? { baseUrl: this.options.baseUrl } : {}),
      ...(this.options.apiKey ? { apiKey: this.options.apiKey } : {}),
      ...(hooks.signal ? { signal: hooks.signal } : {}),
      ...(this.options.retry ? { retry: this.options.retry } : {}),
      ...(hooks.onRetry ? { onRetry: hooks.onRetry } : {}),
    };
    const found = await resolveArtifact(artifact, access);
    const file = pickModelFile(found.files, {
      artifact,
      ...(this.options.quantPreference ? { quantPreference: this.options.quantPreference } : {}),
    });
    const resolved = {
      source: 'wandb' as const,
      artifact: formatArtifactName(found),
      digest: found.digest,
      file: file.path,
      size: file.size,
    };
    return { found, file, resolved };
  }
}
