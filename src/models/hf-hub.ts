/**
 * Client for a Hugging Face-compatible hub, speaking the same wire protocol as `huggingface_hub`:
 *   GET  /api/models/{repo}/revision/{rev}           -> { sha, ... }   (model_info with a revision)
 *   GET  /api/models/{repo}/tree/{sha}?recursive=true -> [{ type, path, size, oid, lfs? }], paged by `Link: rel="next"`
 *   HEAD /{repo}/resolve/{sha}/{path}                 -> 200, or 302 to a CDN with X-Linked-Size / X-Linked-Etag
 * Failures are told apart by status plus the `X-Error-Code` / `X-Error-Message` headers, as `hf_raise_for_status` does.
 */
import { BodyTimeoutError, readTextWithin } from './bounded-text.js';
import { ModelSourceError, serverText, someOf } from './errors.js';
import {
  isTransientStatus,
  retryAfterMs,
  TransientError,
  withRetries,
  type RetryOptions,
  type RetryPolicy,
  type RetryReporter,
} from './retry.js';

export const DEFAULT_HUB_ENDPOINT = 'https://huggingface.co';

/** Most to least preferred: good quality per byte first, full precision last. */
export const DEFAULT_QUANT_PREFERENCE: readonly string[] = [
  'Q4_K_M',
  'Q4_K_S',
  'Q5_K_M',
  'Q5_K_S',
  'Q6_K',
  'Q8_0',
  'Q4_0',
  'IQ4_XS',
  'F16',
  'BF16',
  'F32',
];

export interface HubFile {
  path: string;
  size: number;
  /** sha256 of the content; known for LFS files (tree `lfs.oid`), absent for plain git files. */
  sha256?: string;
}

export interface ResolvedHubModel {
  repo: string;
  revision: string;
  commitSha: string;
  file: HubFile;
}

export interface HubAccessOptions {
  /** Hub base URL; defaults to $HF_ENDPOINT, then https://huggingface.co. */
  endpoint?: string;
  /** Access token; defaults to $HF_TOKEN. */
  token?: string;
  signal?: AbortSignal;
  /** How 429, 5xx and failed connections are retried (see retry.ts); the default is DEFAULT_RETRY_POLICY. */
  retry?: Partial<RetryPolicy>;
  /** Told about each retry before it is waited for. */
  onRetry?: RetryReporter;
}

/** The retry options of an access: its policy, reporter and signal. */
export function hubRetryOptions(options: HubAccessOptions): RetryOptions {
  return {
    ...(options.retry ? { policy: options.retry } : {}),
    ...(options.onRetry ? { onRetry: options.onRetry } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  };
}

export interface ResolveHubModelOptions extends HubAccessOptions {
  repo: string;
  revision?: string;
  quantPreference?: readonly string[];
}

interface TreeEntry {
  type: 'file' | 'directory';
  path: string;
  size: number;
  lfs?: { oid: string; size: number };
}

interface HubContext {
  repo: string;
  revision?: string;
  file?: string;
  tokenSent: boolean;
}

const API_ERROR = 'WORKLOAD_INIT_HF_WANDB_API_ERROR';
const NO_ACCESS = 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR';
const INVALID_CREDENTIALS = 'Invalid credentials in Authorization header';
const REPO_ID = /^(?:[\w.-]+\/)?[\w.-]+$/;
const SHA256 = /^[0-9a-f]{64}$/;
const COMMIT_SHA = /^[0-9a-f]{40}$/;
const SPLIT_SHARD = /-\d{5}-of-\d{5}\.gguf$/i;
/** A JSON answer of the hub (model info, a page of a tree): at most this much text, within this time. */
const HUB_JSON_LIMITS = { maxBytes: 32 << 20, timeoutMs: 60_000 } as const;
/** Files a repository may list (a model repo has its weights and tens of files beside them). */
const MAX_TREE_ENTRIES = 100_000;
const OTHER_WEIGHT_FORMATS: ReadonlyArray<[RegExp, string]> = [
  [/\.safetensors$/i, 'safetensors'],
  [/\.(bin|pt|pth|ckpt)$/i, 'PyTorch'],
  [/\.onnx$/i, 'ONNX'],
  [/\.(h5|msgpack)$/i, 'TensorFlow/Flax'],
];

export function hubEndpoint(endpoint?: string): string {
  return (endpoint ?? process.env.HF_ENDPOINT ?? DEFAULT_HUB_ENDPOINT).replace(/\/+$/, '');
}

export function hubToken(token?: string): string | undefined {
  return token ?? (process.env.HF_TOKEN || undefined);
}

export function hubHeaders(token: string | undefined, extra: Record<string, string> = {}): Record<string, string> {
  return { 'user-agent': 'dedicated-endpoints', ...(token ? { authorization: `Bearer ${token}` } : {}), ...extra };
}

/** `/{repo}/resolve/{revision}/{path}`: the revision is one encoded segment, the path keeps its slashes. */
export function hubResolveUrl(endpoint: string, repo: string, revision: string, path: string): string {
  const encodedPath = path.split('/').map(encodeURIComponent).join('/');
  return `${endpoint}/${repo}/resolve/${encodeURIComponent(revision)}/${encodedPath}`;
}

/** The message the hub sends with a 401 for a token it does not know (`hf_raise_for_status` keys on it). */
export const HUB_INVALID_CREDENTIALS = INVALID_CREDENTIALS;
/** The message the hub sends for a repository disabled by its owners or the hub (`DisabledRepoError`). */
export const HUB_DISABLED_REPO = 'Access to this resource is disabled.';

/**
 * Maps a failed hub answer to a ModelSourceError in the order `huggingface_hub`'s `hf_raise_for_status` uses:
 * the `X-Error-Code` header first (RevisionNotFound, EntryNotFound, GatedRepo), then `X-Error-Message` (a disabled
 * repo), then RepoNotFound, or a 401 whose message is not "Invalid credentials in Authorization header" (the hub
 * answers 401 to anonymous callers for private, gated and missing repos alike), then the status: 400, 403, 429,
 * and the rest. So a 401 is the token's fault only when the hub says the credentials are invalid, and a 401 with
 * RepoNotFound is a repository that is missing or not readable with this token. 429 and 5xx come back as
 * TransientError (with the Retry-After), which the callers retry.
 */
export function hubResponseError(res: Response, ctx: HubContext): ModelSourceError {
  void res.body?.cancel().catch(() => {}); // free the connection; the body adds nothing the headers don't say
  const errorCode = res.headers.get('x-error-code');
  const hubMessage = serverText(res.headers.get('x-error-message'));
  const { repo, revision, file } = ctx;
  const status = res.status;

  if (errorCode === 'RevisionNotFound') {
    return new ModelSourceError(NO_ACCESS, `Revision "${revision ?? 'main'}" was not found in ${repo} (${status} RevisionNotFound).`);
  }
  if (errorCode === 'EntryNotFound') {
    return new ModelSourceError(
      'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR',
      `${file ?? 'The requested path'} was not found in ${repo} at revision ${revision ?? 'main'} (${status} EntryNotFound).`,
    );
  }
  if (errorCode === 'GatedRepo') {
    return new ModelSourceError(
      NO_ACCESS,
      ctx.tokenSent
        ? `${repo} is a gated repository and the token's account has not been granted access (${status} GatedRepo). Request access on the hub's page for ${repo}.`
        : `${repo} is a gated repository (${status} GatedRepo): provide an access token of an account that has been granted access.`,
    );
  }
  if (hubMessage === HUB_DISABLED_REPO) {
    return new ModelSourceError(NO_ACCESS, `Access to ${repo} is disabled on the hub (${status}).`);
  }
  if (errorCode === 'RepoNotFound' || (status === 401 && hubMessage !== INVALID_CREDENTIALS)) {
    return new ModelSourceError(
      NO_ACCESS,
      ctx.tokenSent
        ? `Repository ${repo} was not found, or it is private and the token has no access to it (${status}).`
        : `Repository ${repo} was not found, or it is private or gated (${status}) and no token was sent.`,
    );
  }
  if (status === 401) {
    return new ModelSourceError(
      'WORKLOAD_INIT_INVALID_TOKEN_ERROR',
      ctx.tokenSent
        ? `The hub rejected the access token (401: ${INVALID_CREDENTIALS}) while reading ${repo}. Check that the token is valid and not expired.`
        : `The hub rejected the request's credentials (401: ${INVALID_CREDENTIALS}) while reading ${repo}.`,
    );
  }
  if (status === 400) {
    return new ModelSourceError(
      API_ERROR,
      `The hub refused the request for ${repo} as malformed (400${hubMessage ? `: ${hubMessage}` : ''}).`,
    );
  }
  if (status === 403 || status === 404) {
    return new ModelSourceError(NO_ACCESS, `The hub denied access to ${repo} (${status}${hubMessage ? `: ${hubMessage}` : ''}).`);
  }
  if (status === 429) {
    return new TransientError(API_ERROR, `The hub is rate-limiting requests (429) for ${repo}.`, retryAfterMs(res));
  }
  const message = `The hub answered ${status} while reading ${repo}${file ? `/${file}` : ''}.`;
  return isTransientStatus(status) ? new TransientError(API_ERROR, message, retryAfterMs(res)) : new ModelSourceError(API_ERROR, message);
}

/** What every hub call of one resolution shares: where, with which token, and how failures are retried. */
interface HubCall {
  token: string | undefined;
  retry: RetryOptions;
}

/**
 * One request, retried while it fails transiently. `accept` reads the answer (and throws hubResponseError for a
 * failed one); a connection that fails or is cut while the answer is read is retried too. Cancellation passes
 * through untouched.
 */
function hubRequest<T>(
  url: string,
  init: RequestInit,
  ctx: HubContext,
  call: HubCall,
  operation: string,
  accept: (res: Response) => Promise<T>,
): Promise<T> {
  const signal = call.retry.signal;
  return withRetries(
    'the hub',
    operation,
    async () => {
      let res: Response;
      try {
        res = await fetch(url, { ...init, ...(signal ? { signal } : {}) });
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        throw new TransientError(API_ERROR, `Could not reach the hub at ${new URL(url).host} while reading ${ctx.repo}.`, undefined, {
          cause: err,
        });
      }
      return accept(res);
    },
    call.retry,
  );
}

function hubJson(url: string, ctx: HubContext, call: HubCall, operation: string): Promise<{ res: Response; body: unknown }> {
  const signal = call.retry.signal;
  return hubRequest(url, { headers: hubHeaders(call.token, { accept: 'application/json' }) }, ctx, call, operation, async (res) => {
    if (!res.ok) throw hubResponseError(res, ctx);
    let text: string | undefined;
    try {
      text = await readTextWithin(res, HUB_JSON_LIMITS);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (err instanceof BodyTimeoutError)
        throw new TransientError(API_ERROR, `The hub's answer for ${ctx.repo} came too slowly (${err.message}).`, undefined, {
          cause: err,
        });
      // The connection was cut mid-answer: worth another attempt.
      throw new TransientError(API_ERROR, `The hub's answer for ${ctx.repo} was cut off.`, undefined, { cause: err });
    }
    if (text === undefined)
      throw new ModelSourceError(API_ERROR, `The hub's answer for ${ctx.repo} is larger than ${HUB_JSON_LIMITS.maxBytes >> 20} MiB.`);
    try {
      return { res, body: JSON.parse(text) as unknown };
    } catch (err) {
      throw new ModelSourceError(API_ERROR, `The hub sent an unreadable answer for ${ctx.repo}.`, { cause: err });
    }
  });
}

function unparseable(ctx: HubContext, what: string): ModelSourceError {
  return new ModelSourceError(API_ERROR, `The hub sent an unexpected ${what} for ${ctx.repo}.`);
}

/** `Link: <url>; rel="next"`, the GitHub-style pagination the hub uses for trees. */
function nextPage(res: Response): string | undefined {
  return res.headers.get('link')?.match(/<([^>]+)>\s*;\s*rel="?next"?/)?.[1];
}

const isSize = (n: unknown) => Number.isSafeInteger(n) && (n as number) >= 0;

function isTreeEntry(value: unknown): value is TreeEntry {
  const entry = value as TreeEntry;
  return (
    typeof entry === 'object' &&
    entry !== null &&
    typeof entry.path === 'string' &&
    (entry.type === 'file' || entry.type === 'directory') &&
    isSize(entry.size) &&
    (entry.lfs === undefined || entry.lfs === null || (typeof entry.lfs.oid === 'string' && isSize(entry.lfs.size)))
  );
}

async function listTree(endpoint: string, commitSha: string, ctx: HubContext, call: HubCall): Promise<TreeEntry[]> {
  const entries: TreeEntry[] = [];
  const seen = new Set<string>();
  let url: string | undefined = `${endpoint}/api/models/${ctx.repo}/tree/${commitSha}?recursive=true&expand=false`;
  while (url) {
    seen.add(url);
    const { res, body } = await hubJson(url, ctx, call, `listing the files of ${ctx.repo}`);
    if (!Array.isArray(body) || !body.every(isTreeEntry)) throw unparseable(ctx, 'file listing');
    for (const entry of body) entries.push(entry);
    if (entries.length > MAX_TREE_ENTRIES)
      throw new ModelSourceError(
        'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
        `${ctx.repo} lists more than ${MAX_TREE_ENTRIES} files: a model repository for an endpoint holds its weights and a few files beside them.`,
      );
    url = nextPage(res);
    // A page that links back to one already read would page forever.
    if (url && seen.has(new URL(url, endpoint).href)) throw unparseable(ctx, 'pagination link');
    // The token goes with every page, so never follow a link off the hub.
    if (url && new URL(url, endpoint).origin !== new URL(endpoint).origin) throw unparseable(ctx, 'pagination link');
    if (url) url = new URL(url, endpoint).href;
  }
  return entries;
}

function quantPattern(quant: string): RegExp {
  // The quant must be a whole name component: `Q4_K` must not match `…-Q4_K_M.gguf`.
  const escaped = quant.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(?:^|[-_.])${escaped}(?=[-.]|$)`, 'i');
}

/**
 * Chooses the GGUF file to serve, or explains why the repo has none the built-in engine can run. Generic over the
 * file type so that other model sources (W&B artifacts) share the rule; `repo` is the source's name in messages.
 */
export function pickGgufFile<F extends { path: string }>(files: readonly F[], quantPreference: readonly string[], repo: string): F {
  const ggufs = files.filter((f) => /\.gguf$/i.test(f.path) && !/(^|\/)mmproj[^/]*$/i.test(f.path));
  const whole = ggufs.filter((f) => !SPLIT_SHARD.test(f.path));
  const stem = (f: F) => (f.path.split('/').pop() ?? f.path).replace(/\.gguf$/i, '');

  if (whole.length === 1) return whole[0]!;
  if (whole.length > 1) {
    for (const quant of quantPreference) {
      const match = whole.find((f) => quantPattern(quant).test(stem(f)));
      if (match) return match;
    }
    throw new ModelSourceError(
      'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR',
      `${repo} has several GGUF files but none matches the preferred quantizations (${quantPreference.join(', ')}). ` +
        `Available: ${someOf(whole.map((f) => f.path))}.`,
    );
  }
  if (ggufs.length > 0) {
    throw new ModelSourceError(
      'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
      `${repo} only has split GGUF shards (e.g. ${serverText(ggufs[0]!.path)}), which are not supported yet. ` +
        'Use a single-file GGUF build, or merge the shards with llama-gguf-split --merge.',
    );
  }
  const format = OTHER_WEIGHT_FORMATS.find(([pattern]) => files.some((f) => pattern.test(f.path)))?.[1];
  if (format) {
    throw new ModelSourceError(
      'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
      `${repo} contains ${format} weights, but the built-in engine only runs GGUF files. ` +
        'Pick a GGUF build of this model, or configure an engine command template that can load it, ' +
        'e.g. "vllm serve {model} --port {port}".',
    );
  }
  throw new ModelSourceError('WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR', `${repo} contains no model files (.gguf).`);
}

/**
 * Resolves `revision` to a commit, lists that commit's files, picks the GGUF to serve and checks with a HEAD on
 * `/resolve/` (as `get_hf_file_metadata` does) that it can actually be downloaded: gated repos expose their
 * metadata and tree to everyone and refuse only the file itself.
 */
export async function resolveHubModel(options: ResolveHubModelOptions): Promise<ResolvedHubModel> {
  const { repo, revision = 'main', quantPreference = DEFAULT_QUANT_PREFERENCE } = options;
  const endpoint = hubEndpoint(options.endpoint);
  const token = hubToken(options.token);
  const ctx: HubContext = { repo, revision, tokenSent: Boolean(token) };
  const call: HubCall = { token, retry: hubRetryOptions(options) };
  if (!REPO_ID.test(repo) || repo.split('/').some((part) => part === '.' || part === '..')) {
    throw new ModelSourceError(NO_ACCESS, `"${repo}" is not a valid repository id (expected "owner/name").`);
  }

  const info = await hubJson(
    `${endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}?expand=sha`,
    ctx,
    call,
    `reading the model info of ${repo}@${revision}`,
  );
  const commitSha = (info.body as { sha?: unknown } | null)?.sha;
  if (typeof commitSha !== 'string' || !COMMIT_SHA.test(commitSha)) throw unparseable(ctx, 'model info');

  // Pin the listing and the download to the commit so a push in between cannot mix two revisions.
  const tree = await listTree(endpoint, commitSha, ctx, call);
  const files = tree
    .filter((e) => e.type === 'file')
    .map((e): HubFile => ({ path: e.path, size: e.lfs?.size ?? e.size, ...(e.lfs?.oid ? { sha256: e.lfs.oid.toLowerCase() } : {}) }));
  const file = pickGgufFile(files, quantPreference, repo);

  const fileCtx = { ...ctx, file: file.path };
  const head = await hubRequest(
    hubResolveUrl(endpoint, repo, commitSha, file.path),
    { method: 'HEAD', redirect: 'manual', headers: hubHeaders(token, { 'accept-encoding': 'identity' }) },
    fileCtx,
    call,
    `reading the metadata of ${file.path} from ${repo}`,
    async (res) => {
      if (res.status >= 400) throw hubResponseError(res, fileCtx);
      return res;
    },
  );
  // X-Linked-Etag carries the LFS sha256; fill it in when the tree did not (non-LFS listing, older mirrors).
  const linkedEtag = head.headers.get('x-linked-etag')?.replace(/^W\//, '').replace(/"/g, '').toLowerCase();
  if (!file.sha256 && linkedEtag && SHA256.test(linkedEtag)) file.sha256 = linkedEtag;

  return { repo, revision, commitSha, file };
}
