/**
 * Prepares the model of an endpoint version for its replicas: resolves the
 * hub repository at its revision, downloads the GGUF file into the cache (or
 * finds it there), and checks the endpoint's settings against the model.
 * What a version resolved to is remembered, so that a wake or a second
 * replica finds the file in the cache without asking the hub again.
 */
import type { EndpointSpec } from '../domain/endpoint-spec.js';
import { ModelSourceError } from './errors.js';
import { GgufFormatError, readGgufHeader, trainedContextLength, type GgufHeader } from './gguf-header.js';
import { resolveTokenLimits, tokensThatFit, type TokenLimits } from './token-limits.js';
import { resolveHubModel, treeListings, type HubAccessOptions, type ResolvedHubModel } from './hf-hub.js';
import type { DownloadProgress, ModelCache } from './model-cache.js';
import type { RetryPolicy, RetryReporter } from './retry.js';
import { SharedTransfers } from './shared-transfers.js';

/** What a version's model resolved to; stored with the version. */
export type ResolvedModel =
  | { source: 'hf'; repo: string; commitSha: string; file: string; sha256: string | null; size: number }
  | {
      source: 'wandb';
      /** The artifact with its concrete version, e.g. `acme/models/llama:v3`. */
      artifact: string;
      /** The artifact version's digest. */
      digest: string;
      file: string;
      sha256: string | null;
      size: number;
    };

/** The commit or artifact version a resolution pins, for engines that fetch models themselves. */
export function pinnedRevision(resolved: ResolvedModel | null): string | null {
  if (!resolved) return null;
  return resolved.source === 'hf' ? resolved.commitSha : (resolved.artifact.split(':').pop() ?? null);
}

/** Resolves and downloads registry artifacts (the W&B registry). */
export interface ArtifactSource {
  prepare(artifact: string, hooks: PrepareHooks): Promise<{ resolved: ResolvedModel; path: string }>;
  /** The artifact version and file to serve, without downloading it (for a runtime that fetches where the replica runs). */
  resolve(artifact: string, hooks: PrepareHooks): Promise<ResolvedModel>;
}

export interface PreparedModel {
  resolved: ResolvedModel | null;
  /** The local GGUF file; null when an external engine fetches the model itself. */
  path: string | null;
}

/** Settings that do not fit the model or engine; `advice` says what to change. */
export class SettingsError extends Error {
  constructor(
    message: string,
    readonly advice?: string,
  ) {
    super(message);
    this.name = 'SettingsError';
  }
}

export interface ModelStoreOptions {
  cache: ModelCache;
  hubEndpoint?: string;
  hubToken?: string;
  quantPreference?: readonly string[];
  /** With an engine command template, a repository without GGUF files is handed to the engine by id. */
  allowExternalFormats: boolean;
  /** The registry artifact source; without it, artifact versions cannot start. */
  artifacts?: ArtifactSource;
  /** How hub calls and downloads are retried (see retry.ts); default DEFAULT_RETRY_POLICY. */
  retry?: Partial<RetryPolicy>;
}

export interface PrepareHooks {
  /** Called once, before bytes are transferred (not at all when the file is cached). */
  onDownloadStart?: () => Promise<void> | void;
  onProgress?: (progress: DownloadProgress) => void;
  /** Called before each retry of a hub or registry call or download, with the attempt that comes next. */
  onRetry?: RetryReporter;
  signal?: AbortSignal;
}

function toResolvedHub(resolved: Extract<ResolvedModel, { source: 'hf' }>): ResolvedHubModel {
  return {
    repo: resolved.repo,
    revision: resolved.commitSha,
    commitSha: resolved.commitSha,
    file: { path: resolved.file, size: resolved.size, ...(resolved.sha256 ? { sha256: resolved.sha256 } : {}) },
  };
}

export class ModelStore {
  /** The hub commits this store has listed (hf-hub.ts): endpoints of one model list its commit once. */
  private readonly listings = treeListings();
  /**
   * Hub resolutions under way, by repository and revision: endpoints of one model started together (a fleet created
   * at once, a gateway taking over many) wait for one resolution instead of asking the hub each, which would spend the
   * hub's rate limit. Only a resolution under way is shared: one asked after it ended asks the hub again, so a branch
   * that moved is seen. Each caller still waits through its own signal and hears the retries (shared-transfers.ts).
   */
  private readonly resolutions = new SharedTransfers<ResolvedHubModel>();

  constructor(private readonly options: ModelStoreOptions) {}

  /** The cached file of an earlier resolution, without touching the network. */
  async cached(resolved: ResolvedModel | null): Promise<PreparedModel | undefined> {
    if (!resolved?.sha256) return undefined;
    const hit = await this.options.cache.lookup(resolved.sha256, resolved.size);
    return hit ? { resolved, path: hit.path } : undefined;
  }

  /**
   * The model of a version: the file of an earlier resolution when the cache
   * still holds it (no network), else resolved and downloaded now.
   */
  async prepareVersion(spec: EndpointSpec, known: ResolvedModel | null, hooks: PrepareHooks = {}): Promise<PreparedModel> {
    const hit = await this.cached(known);
    if (hit) return hit;
    if (known?.source === 'hf') return this.ensure(known, hooks);
    return this.prepare(spec, hooks);
  }

  /**
   * The model of a version resolved (repository, pinned commit, file, digest) without downloading it: for a runtime
   * that fetches the file where the replica runs. An earlier resolution is used as it is.
   */
  async resolveVersion(spec: EndpointSpec, known: ResolvedModel | null, hooks: PrepareHooks = {}): Promise<PreparedModel> {
    if (known) return { resolved: known, path: null };
    if (spec.model.source === 'wandb') return { resolved: await this.artifacts().resolve(spec.model.artifact, hooks), path: null };
    const resolved = await this.resolveHub(spec.model.repo, spec.model.revision, hooks);
    return { resolved, path: null };
  }

  /** A hub repository at a revision, resolved to its commit and the GGUF file to run (null: an external engine's model). */
  private async resolveHub(repo: string, revision: string | null | undefined, hooks: PrepareHooks): Promise<ResolvedModel | null> {
    let hub: ResolvedHubModel;
    const waiter = { ...(hooks.signal ? { signal: hooks.signal } : {}), ...(hooks.onRetry ? { onRetry: hooks.onRetry } : {}) };
    try {
      // The store's hub, token and preferences are the same for every caller: the repository and revision name the answer.
      hub = await this.resolutions.join(`${repo}\n${revision ?? ''}`, waiter, (shared) =>
        resolveHubModel({
          ...this.hubAccess({ signal: shared.signal, onRetry: shared.onRetry }),
          repo,
          listings: this.listings,
          ...(revision ? { revision } : {}),
          ...(this.options.quantPreference ? { quantPreference: this.options.quantPreference } : {}),
        }),
      );
    } catch (error) {
      if (this.options.allowExternalFormats && error instanceof ModelSourceError && error.code === 'WORKLOAD_INIT_MANIFEST_TYPE_ERROR') {
        return null;
      }
      throw error;
    }
    return {
      source: 'hf',
      repo: hub.repo,
      commitSha: hub.commitSha,
      file: hub.file.path,
      sha256: hub.file.sha256 ?? null,
      size: hub.file.size,
    };
  }

  async prepare(spec: EndpointSpec, hooks: PrepareHooks = {}): Promise<PreparedModel> {
    if (spec.model.source === 'wandb') return this.artifacts().prepare(spec.model.artifact, hooks);
    const resolved = await this.resolveHub(spec.model.repo, spec.model.revision, hooks);
    if (!resolved) return { resolved: null, path: null };
    if (resolved.source !== 'hf') throw new Error('a hub resolution names a hub repository');
    return this.ensure(resolved, hooks);
  }

  /** The blob of a hub resolution made earlier, fetched again (same commit) if it left the cache. */
  private async ensure(resolved: Extract<ResolvedModel, { source: 'hf' }>, hooks: PrepareHooks = {}): Promise<PreparedModel> {
    const hit = await this.cached(resolved);
    if (hit) return hit;
    await hooks.onDownloadStart?.();
    const file = await this.options.cache.ensureHubFile(toResolvedHub(resolved), {
      ...this.hubAccess(hooks),
      ...(hooks.onProgress ? { onProgress: hooks.onProgress } : {}),
    });
    return { resolved: { ...resolved, sha256: file.sha256 }, path: file.path };
  }

  private artifacts(): ArtifactSource {
    if (!this.options.artifacts) {
      throw new ModelSourceError('WORKLOAD_INIT_HF_WANDB_API_ERROR', 'the W&B registry is not configured on this gateway');
    }
    return this.options.artifacts;
  }

  /** Where the hub is, with which token, and how its calls are retried and reported. */
  private hubAccess(hooks: PrepareHooks): HubAccessOptions {
    return {
      ...(this.options.hubEndpoint ? { endpoint: this.options.hubEndpoint } : {}),
      ...(this.options.hubToken ? { token: this.options.hubToken } : {}),
      ...(hooks.signal ? { signal: hooks.signal } : {}),
      ...(this.options.retry ? { retry: this.options.retry } : {}),
      ...(hooks.onRetry ? { onRetry: hooks.onRetry } : {}),
    };
  }
}

/** llama.cpp decodes at most this many sequences in one context. */
export const BUILT_IN_ENGINE_MAX_SEQUENCES = 256;

/**
 * Checks the endpoint's settings against the built-in engine (batch size) and
 * the model (token limits against its trained context), and that the file is
 * a GGUF the built-in engine can run. Returns the token limits to run with:
 * limits left out follow the model (token-limits.ts), bounded by
 * `memoryBytes`, the instance's memory, when known.
 */
export async function checkModelSettings(path: string, spec: EndpointSpec, memoryBytes?: number): Promise<TokenLimits> {
  if (spec.advanced.maxBatchSize > BUILT_IN_ENGINE_MAX_SEQUENCES) {
    throw new SettingsError(
      `max_batch_size (${spec.advanced.maxBatchSize}) is larger than the built-in engine's ${BUILT_IN_ENGINE_MAX_SEQUENCES} sequences; use ENGINE_COMMAND for larger batches`,
      `lower max_batch_size to at most ${BUILT_IN_ENGINE_MAX_SEQUENCES} with an update, then restart the endpoint`,
    );
  }
  let header: GgufHeader;
  try {
    header = await readGgufHeader(path);
  } catch (error) {
    if (error instanceof GgufFormatError) {
      throw new ModelSourceError(
        'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
        `the model file cannot be run by the built-in engine: ${error.message}`,
      );
    }
    throw error;
  }
  const context = trainedContextLength(header);
  const fit =
    spec.advanced.maxTokenCountAuto && memoryBytes !== undefined
      ? await tokensThatFit(header, path, memoryBytes, spec.advanced.maxBatchSize)
      : undefined;
  return resolveTokenLimits(spec.advanced, context, fit);
}
