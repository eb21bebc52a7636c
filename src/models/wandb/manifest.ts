/**
 * The artifact manifest: its digest (which the artifact's own digest must
 * match), its parsing, and its download from the signed URL W&B gives.
 */
import { createHash } from 'node:crypto';
import { ModelSourceError, serverText } from '../errors.js';
import { ANSWER_LIMITS, BodyTimeoutError, readTextWithin } from '../bounded-text.js';
import { TransientError } from '../retry.js';
import { API_ERROR, httpError, isInt, isObject, malformed, NOT_FOUND, wandbAuthHeaders, type Context } from './wandb-http.js';

const MANIFEST_DIGEST_HEADER = 'wandb-artifact-manifest-v1\n';
const STORAGE_POLICY = 'wandb-storage-policy-v1';

/** The manifest digest: md5 over the header and `<path>:<digest>\n` of each entry, sorted by path (code points). */
export function manifestDigest(contents: Record<string, { digest: string }>): string {
  const hash = createHash('md5').update(MANIFEST_DIGEST_HEADER);
  // Each path's code points computed once (not per comparison: 300,000 entries took seconds).
  const keyed = Object.keys(contents).map((path) => ({ path, points: Array.from(path, (c) => c.codePointAt(0)!) }));
  const byCodePoint = ({ points: x }: { points: number[] }, { points: y }: { points: number[] }) => {
    for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
    return x.length - y.length;
  };
  for (const { path } of keyed.sort(byCodePoint)) hash.update(`${path}:${contents[path]!.digest}\n`);
  return hash.digest('hex');
}

/** Files a manifest may list (a model artifact has its weights and a few files beside them). */
const MAX_MANIFEST_ENTRIES = 100_000;

export interface ManifestEntry {
  digest: string;
  size?: number;
  ref?: string;
  birthArtifactID?: string;
}

export interface Manifest {
  layout: 'V1' | 'V2';
  region: string;
  contents: Record<string, ManifestEntry>;
}

export function parseManifest(body: unknown, ctx: Context): Manifest {
  if (!isObject(body) || body.version !== 1 || !isObject(body.contents)) throw malformed(ctx, 'manifest');
  if (body.storagePolicy !== STORAGE_POLICY) {
    throw new ModelSourceError(
      API_ERROR,
      `${ctx.label} uses the storage policy "${serverText(body.storagePolicy) ?? '?'}", which is not supported (only ${STORAGE_POLICY}).`,
    );
  }
  const config = isObject(body.storagePolicyConfig) ? body.storagePolicyConfig : {};
  const layout = config.storageLayout ?? 'V1';
  const region = config.storageRegion ?? 'default';
  if ((layout !== 'V1' && layout !== 'V2') || typeof region !== 'string' || !region) throw malformed(ctx, 'manifest storage configuration');
  const entries = Object.entries(body.contents);
  if (entries.length > MAX_MANIFEST_ENTRIES)
    throw new ModelSourceError(
      'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
      `${ctx.label} lists more than ${MAX_MANIFEST_ENTRIES} files: a model artifact for an endpoint holds its weights and a few files beside them.`,
    );
  // No prototype: a file may be named `__proto__`.
  const contents: Record<string, ManifestEntry> = Object.create(null) as Record<string, ManifestEntry>;
  for (const [path, entry] of entries) {
    if (!isObject(entry) || typeof entry.digest !== 'string') throw malformed(ctx, 'manifest entry');
    if (entry.ref !== undefined && entry.ref !== null && typeof entry.ref !== 'string') throw malformed(ctx, 'manifest entry');
    if (entry.size !== undefined && entry.size !== null && !isInt(entry.size)) throw malformed(ctx, 'manifest entry');
    if (entry.birthArtifactID !== undefined && entry.birthArtifactID !== null && typeof entry.birthArtifactID !== 'string')
      throw malformed(ctx, 'manifest entry');
    contents[path] = {
      digest: entry.digest,
      ...(isInt(entry.size) ? { size: entry.size } : {}),
      ...(typeof entry.ref === 'string' ? { ref: entry.ref } : {}),
      ...(typeof entry.birthArtifactID === 'string' ? { birthArtifactID: entry.birthArtifactID } : {}),
    };
  }
  return { layout, region, contents };
}

/**
 * GETs the manifest JSON from its signed URL. The API key goes only to W&B's own origin, never to object storage.
 * A cut transfer is a download error; an unreadable body is an API error.
 */
export async function fetchManifest(
  directUrl: string,
  base: URL,
  apiKey: string | undefined,
  ctx: Context,
  signal?: AbortSignal,
): Promise<unknown> {
  let url: URL;
  try {
    url = new URL(directUrl, base);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new TypeError(url.protocol);
  } catch {
    throw malformed(ctx, 'manifest location');
  }
  const sameOrigin = url.origin === base.origin;
  const headers = sameOrigin ? wandbAuthHeaders(apiKey) : wandbAuthHeaders(undefined);
  let res: Response;
  try {
    res = await fetch(url, { headers: { ...headers, accept: 'application/json' }, ...(signal ? { signal } : {}) });
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    throw new TransientError(
      'WORKLOAD_INIT_DOWNLOAD_ERROR',
      `Could not download the manifest of ${ctx.label}: the connection failed.`,
      undefined,
      { cause: err },
    );
  }
  if (res.status === 404 || res.status === 410) {
    void res.body?.cancel().catch(() => {});
    throw new ModelSourceError(NOT_FOUND, `The manifest of ${ctx.label} was not found (${res.status}).`);
  }
  if (!res.ok) throw httpError(res.status, { label: ctx.label, keySent: sameOrigin && ctx.keySent, what: 'reading the manifest of' }, res);
  let text: string | undefined;
  try {
    text = await readTextWithin(res, ANSWER_LIMITS);
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    const why = err instanceof BodyTimeoutError ? `came too slowly (${err.message})` : 'was interrupted';
    throw new TransientError('WORKLOAD_INIT_DOWNLOAD_ERROR', `Download of the manifest of ${ctx.label} ${why}.`, undefined, {
      cause: err,
    });
  }
  if (text === undefined)
    throw new ModelSourceError(API_ERROR, `The manifest of ${ctx.label} is larger than ${ANSWER_LIMITS.maxBytes >> 20} MiB.`);
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ModelSourceError(API_ERROR, `W&B sent an unreadable manifest for ${ctx.label}.`, { cause: err });
  }
}
