/**
 * Client for model artifacts in the W&B Registry, speaking the wire protocol of the `wandb` SDK
 * (`wandb.Api().artifact("<org>/wandb-registry-<registry>/<name>:<version>")`, then `.download()`):
 *
 *   POST {WANDB_BASE_URL}/graphql, HTTP basic auth `api:<WANDB_API_KEY>`:
 *     FetchOrganization(org)                      the organization's entity, which owns its registries
 *     ArtifactMembershipByName(entity, project, name)
 *                                                 the version `<name>:<vN or alias>` in project `wandb-registry-<registry>`
 *     FetchArtifactManifest(id)                   the signed `directUrl` of the manifest JSON
 *     ServerFeaturesQuery                         whether V2 file URLs carry the artifact id
 *   GET  <directUrl>                              {"version":1,"storagePolicy":"wandb-storage-policy-v1",
 *                                                  "storagePolicyConfig":{"storageLayout":"V2"},
 *                                                  "contents":{"<path>":{"digest":"<base64 md5>","size":N,...}}}
 *   GET  {base}/artifactsV2/{region}/{entity}/{project}/{collection}/[{artifactId}/]{birthArtifactId}/{md5hex}/{name}
 *        {base}/artifacts/{entity}/{md5hex}       (storage layout V1)
 *                                                 a file's bytes, same basic auth; usually a redirect to object storage
 *
 * The manifest is checked against the artifact's digest, and each file against its md5 while it downloads
 * (ModelCache.ensureUrlFile), so nothing unverified is served.
 */
import { parseArtifactName, REGISTRY_PROJECT_PREFIX, formatArtifactName, type ArtifactName } from '../../domain/artifact-name.js';
import { ModelSourceError, serverText } from '../errors.js';
import { withinDeadline, withRetries, type RetryOptions, type RetryPolicy, type RetryReporter } from '../retry.js';
import { DEFAULT_QUANT_PREFERENCE, pickGgufFile } from '../gguf-choice.js';
import type { EnsureUrlFileOptions } from '../model-cache.js';
import {
  ArtifactMembershipByNameDocument,
  FetchArtifactManifestDocument,
  FetchOrganizationDocument,
  ServerFeaturesQueryDocument,
} from './generated.js';
import { fetchManifest, manifestDigest, parseManifest } from './manifest.js';
import {
  API_ERROR,
  graphqlCaller,
  httpError,
  isInt,
  isObject,
  malformed,
  NOT_FOUND,
  wandbAuthHeaders,
  type Context,
} from './wandb-http.js';

export { manifestDigest } from './manifest.js';
export { wandbAuthHeaders } from './wandb-http.js';

export const DEFAULT_WANDB_BASE_URL = 'https://api.wandb.ai';
/** A registry `<registry>` of an organization is the project `wandb-registry-<registry>` of the organization's entity. */
/** The artifact type W&B registries give models; only these are served. */
export const MODEL_ARTIFACT_TYPE = 'model';
/** The server feature that adds the artifact id to V2 download URLs. */
export const V2_URL_WITH_ARTIFACT_ID = 'ARTIFACT_V2_DOWNLOAD_HANDLER_SUPPORTS_ARTIFACT_ID';

/** The parts of `<org>/<registry>/<name>:<version>`; `registry` without the `wandb-registry-` prefix. */
export interface WandbAccessOptions {
  /** W&B API base URL; defaults to $WANDB_BASE_URL, then https://api.wandb.ai. */
  baseUrl?: string;
  /** API key; defaults to $WANDB_API_KEY. */
  apiKey?: string;
  signal?: AbortSignal;
  /** How 429, 5xx and failed connections are retried (see ../retry.ts); default DEFAULT_RETRY_POLICY. */
  retry?: Partial<RetryPolicy>;
  /** Told about each retry before it is waited for. */
  onRetry?: RetryReporter;
  /** How long the whole resolution may take, retries included. @default WANDB_RESOLVE_DEADLINE_MS */
  deadlineMs?: number;
}

/**
 * How long one resolution may take in all (the organization, the version, the manifest, the server's features, and
 * their retries): each answer is bounded and each call's retries are, but a registry slow at every step, or failing
 * one call after another just within their budgets, would hold the endpoint's start for hours.
 */
export const WANDB_RESOLVE_DEADLINE_MS = 5 * 60_000;

function wandbRetryOptions(options: WandbAccessOptions): RetryOptions {
  return {
    ...(options.retry ? { policy: options.retry } : {}),
    ...(options.onRetry ? { onRetry: options.onRetry } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  };
}

export interface ArtifactFile {
  /** the path inside the artifact, as in the manifest */
  path: string;
  size: number;
  /** md5 of the content, base64, as in the manifest */
  md5: string;
  /** where W&B serves the bytes (with basic auth, see wandbFileDownload); stable, unlike signed URLs */
  url: string;
}

export interface ResolvedArtifact {
  org: string;
  registry: string;
  name: string;
  /** the concrete version, `v<N>`, whatever alias was asked for */
  version: string;
  /** the version's aliases in this collection, e.g. ['latest', 'production'] */
  aliases: string[];
  /** the artifact type, `model` */
  type: string;
  /** W&B's id of the artifact version */
  artifactId: string;
  /** the artifact's digest (md5 hex over its manifest entries), checked against the manifest */
  digest: string;
  /** the entity and project the version was found in: the organization's entity and `wandb-registry-<registry>` */
  entity: string;
  project: string;
  /** the files W&B stores; reference entries (s3://, gs://, ...) are left out */
  files: ArtifactFile[];
}

export interface PickModelFileOptions {
  quantPreference?: readonly string[];
  /** names the artifact in messages, e.g. `acme/model/llama:v3` */
  artifact?: string;
}

const MD5_BASE64 = /^[A-Za-z0-9+/]{22}==$/;

/** Parses `<org>/<registry>/<name>:<version>`; `<registry>` may also be given as `wandb-registry-<registry>`. */
export { parseArtifactName, formatArtifactName, REGISTRY_PROJECT_PREFIX, type ArtifactName };

export function wandbBaseUrl(baseUrl?: string): string {
  return (baseUrl ?? (process.env.WANDB_BASE_URL || DEFAULT_WANDB_BASE_URL)).replace(/\/+$/, '');
}

export function wandbApiKey(apiKey?: string): string | undefined {
  return apiKey ?? (process.env.WANDB_API_KEY || undefined);
}

/** The headers of every authenticated W&B request: HTTP basic auth with user `api` and the key as password. */

/** Chooses the GGUF file to serve (the hub's rule: the only one, or the preferred quantization), or explains why not. */
export function pickModelFile<F extends { path: string }>(files: readonly F[], options: PickModelFileOptions = {}): F {
  return pickGgufFile(files, options.quantPreference ?? DEFAULT_QUANT_PREFERENCE, options.artifact ?? 'The artifact');
}

/**
 * What ModelCache.ensureUrlFile needs to fetch one file of a resolved artifact (add onProgress and signal):
 *   await cache.ensureUrlFile({ ...wandbFileDownload(artifact, file), onProgress, signal })
 * A second call for the same file finds it through the md5 index, without a request.
 */
export function wandbFileDownload(
  artifact: ResolvedArtifact,
  file: ArtifactFile,
  options: Pick<WandbAccessOptions, 'apiKey'> = {},
): Omit<EnsureUrlFileOptions, 'onProgress' | 'signal'> {
  const apiKey = wandbApiKey(options.apiKey);
  const label = `${file.path} from ${formatArtifactName(artifact)}`;
  return {
    url: file.url,
    headers: wandbAuthHeaders(apiKey),
    size: file.size,
    md5Base64: file.md5,
    label,
    source: 'W&B',
    responseError: (res) => httpError(res.status, { label, keySent: Boolean(apiKey), what: 'downloading', download: true }, res),
  };
}

/** Python's `urllib.parse.quote` (safe `/`), which the SDK applies to the parts of V2 download URLs. */
function quote(part: string): string {
  return encodeURIComponent(part)
    .replace(/%2F/g, '/')
    .replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/**
 * Finds the artifact version `ref` names in the W&B Registry, checks that it is a committed model, and reads its
 * manifest (verified against the artifact's digest) into the list of its files with their md5 and download URL. All of
 * it, retries included, ends by its deadline (`deadlineMs`, WANDB_RESOLVE_DEADLINE_MS by default): then the request
 * under way is cut, and the resolution fails with WORKLOAD_INIT_HF_WANDB_API_ERROR.
 */
export async function resolveArtifact(ref: string | ArtifactName, options: WandbAccessOptions = {}): Promise<ResolvedArtifact> {
  const parsed = typeof ref === 'string' ? parseArtifactName(ref) : parseArtifactName(formatArtifactName(ref));
  if (parsed.type === 'error') throw new ModelSourceError(NOT_FOUND, parsed.error);
  const baseUrl = wandbBaseUrl(options.baseUrl);
  let base: URL;
  try {
    base = new URL(baseUrl);
    if (base.protocol !== 'https:' && base.protocol !== 'http:') throw new TypeError(base.protocol);
  } catch (err) {
    throw new ModelSourceError(API_ERROR, 'The W&B base URL (WANDB_BASE_URL) is not a valid http(s) URL.', { cause: err });
  }
  const { deadlineMs = WANDB_RESOLVE_DEADLINE_MS } = options;
  const { org, registry } = parsed.value;
  return withinDeadline(
    options.signal,
    deadlineMs,
    () =>
      new ModelSourceError(
        API_ERROR,
        `Resolving ${formatArtifactName(parsed.value)} in W&B's registry "${registry}" of "${org}" (${base.host}) took longer ` +
          `than ${deadlineMs / 1000} s; W&B is too slow, or keeps failing.`,
      ),
    (signal) => resolveWithin(parsed.value, base, baseUrl, { ...options, signal }),
  );
}

async function resolveWithin(
  parsed: ArtifactName,
  base: URL,
  baseUrl: string,
  options: WandbAccessOptions & { signal: AbortSignal },
): Promise<ResolvedArtifact> {
  const { org, registry, name, version } = parsed;
  const { signal } = options;
  const apiKey = wandbApiKey(options.apiKey);
  const label = formatArtifactName(parsed);
  const ctx: Context = { label, org, registry, keySent: Boolean(apiKey), host: base.host };
  const retry = wandbRetryOptions(options);
  const call = graphqlCaller(baseUrl, apiKey, ctx, retry);

  // The organization's entity owns its registries. A name W&B does not know as an organization is taken to be the
  // entity itself (the SDK accepts either).
  const orgAnswer = await call(FetchOrganizationDocument, { org }, 'looking up the organization of');
  const orgEntity = 'data' in orgAnswer ? orgAnswer.data.organization?.orgEntity?.name : undefined;
  if (orgEntity !== undefined && typeof orgEntity !== 'string') throw malformed(ctx, 'organization');
  const entity = orgEntity ?? org;
  const project = `${REGISTRY_PROJECT_PREFIX}${registry}`;

  const found = await call(ArtifactMembershipByNameDocument, { entity, project, name: `${name}:${version}` }, 'looking up');
  if ('graphqlError' in found) throw found.graphqlError;
  const projectData: unknown = found.data.project;
  if (projectData === null || projectData === undefined) {
    throw new ModelSourceError(
      NOT_FOUND,
      `Registry "${registry}" of organization "${org}" was not found, or the API key's user cannot read it (looking up ${label}).`,
    );
  }
  if (!isObject(projectData)) throw malformed(ctx, 'project');
  const membership: unknown = projectData.artifactCollectionMembership;
  if (membership === null || membership === undefined) {
    throw new ModelSourceError(
      NOT_FOUND,
      `${label} was not found: registry "${registry}" of "${org}" has no "${name}" with version or alias "${version}".`,
    );
  }
  if (!isObject(membership) || !Array.isArray(membership.aliases)) throw malformed(ctx, 'artifact version');
  const artifact: unknown = membership.artifact;
  if (artifact === null || artifact === undefined)
    throw new ModelSourceError(NOT_FOUND, `${label} was not found (the version has no artifact).`);
  if (
    !isObject(artifact) ||
    typeof artifact.id !== 'string' ||
    !artifact.id ||
    typeof artifact.digest !== 'string' ||
    !isObject(artifact.artifactType) ||
    typeof artifact.artifactType.name !== 'string' ||
    typeof artifact.state !== 'string'
  ) {
    throw malformed(ctx, 'artifact');
  }
  const aliases = membership.aliases.map((a: unknown) => (isObject(a) && typeof a.alias === 'string' ? a.alias : undefined));
  if (aliases.some((a) => a === undefined)) throw malformed(ctx, 'alias list');
  const versionIndex = isInt(membership.versionIndex)
    ? membership.versionIndex
    : isInt(artifact.versionIndex)
      ? artifact.versionIndex
      : undefined;
  if (versionIndex === undefined) throw malformed(ctx, 'version index');
  const collection = isObject(membership.artifactCollection) ? membership.artifactCollection : undefined;
  const collectionName = typeof collection?.name === 'string' ? collection.name : name;
  const collectionProject = isObject(collection?.project) ? collection.project : undefined;
  const projectName = typeof collectionProject?.name === 'string' ? collectionProject.name : project;
  const entityName =
    isObject(collectionProject?.entity) && typeof collectionProject.entity.name === 'string' ? collectionProject.entity.name : entity;
  const concrete = `v${versionIndex}`;
  const exact = formatArtifactName({ org, registry, name, version: concrete });
  const type = artifact.artifactType.name;
  const artifactId = artifact.id;
  const digest = artifact.digest.toLowerCase();

  if (artifact.state === 'DELETED') throw new ModelSourceError(NOT_FOUND, `${label} (${concrete}) has been deleted.`);
  if (artifact.state !== 'COMMITTED') {
    throw new ModelSourceError(
      NOT_FOUND,
      `${label} (${concrete}) is not committed yet (state ${serverText(artifact.state)}): its upload has not finished.`,
    );
  }
  if (type !== MODEL_ARTIFACT_TYPE) {
    throw new ModelSourceError(
      'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
      `${label} is an artifact of type "${serverText(type)}", not "${MODEL_ARTIFACT_TYPE}": only model artifacts can be served.`,
    );
  }

  const manifestAnswer = await call(FetchArtifactManifestDocument, { id: artifactId }, 'reading the manifest of');
  if ('graphqlError' in manifestAnswer) throw manifestAnswer.graphqlError;
  const manifestArtifact: unknown = manifestAnswer.data.artifact;
  const currentManifest = isObject(manifestArtifact) ? manifestArtifact.currentManifest : undefined;
  if (currentManifest === null || currentManifest === undefined || manifestArtifact === null) {
    throw new ModelSourceError(NOT_FOUND, `${exact} has no manifest, so its files are unknown.`);
  }
  const directUrl = isObject(currentManifest) && isObject(currentManifest.file) ? currentManifest.file.directUrl : undefined;
  if (typeof directUrl !== 'string') throw malformed(ctx, 'manifest location');
  const manifest = parseManifest(
    await withRetries(
      'W&B',
      `reading the manifest of ${exact}`,
      () => fetchManifest(directUrl, base, apiKey, { ...ctx, label: exact }, signal),
      retry,
    ),
    { ...ctx, label: exact },
  );

  const computed = manifestDigest(manifest.contents);
  if (computed !== digest) {
    throw new ModelSourceError(
      'WORKLOAD_INIT_DOWNLOAD_ERROR',
      `The manifest of ${exact} does not match the artifact's digest (expected ${digest}, got ${computed}); retry, or re-log the artifact.`,
    );
  }

  let withArtifactId = false;
  if (manifest.layout === 'V2') {
    const features = await call(ServerFeaturesQueryDocument, {}, 'reading the server features for');
    // Servers without the features field answer with a GraphQL error: no features, as the SDK reads it.
    const list: unknown = 'data' in features && isObject(features.data.serverInfo) ? features.data.serverInfo.features : [];
    withArtifactId =
      Array.isArray(list) && list.some((f: unknown) => isObject(f) && f.name === V2_URL_WITH_ARTIFACT_ID && f.isEnabled === true);
  }

  const files: ArtifactFile[] = [];
  for (const [path, entry] of Object.entries(manifest.contents)) {
    if (entry.ref !== undefined) continue; // stored elsewhere (s3://, gs://, https://...), not by W&B
    if (!MD5_BASE64.test(entry.digest) || entry.size === undefined) throw malformed({ ...ctx, label: exact }, `manifest entry for ${path}`);
    const md5hex = Buffer.from(entry.digest, 'base64').toString('hex');
    const fileName = path.split('/').pop() ?? path;
    const url =
      manifest.layout === 'V1'
        ? `${baseUrl}/artifacts/${quote(entityName)}/${md5hex}`
        : `${baseUrl}/artifactsV2/${quote(manifest.region)}/${quote(entityName)}/${quote(projectName)}/${quote(collectionName)}/` +
          `${withArtifactId ? `${quote(artifactId)}/` : ''}${quote(entry.birthArtifactID ?? '')}/${md5hex}/${quote(fileName)}`;
    files.push({ path, size: entry.size, md5: entry.digest, url });
  }

  return {
    org,
    registry,
    name,
    version: concrete,
    aliases: aliases as string[],
    type,
    artifactId,
    digest,
    entity: entityName,
    project: projectName,
    files,
  };
}
