/**
 * Client for a Hugging Face-compatible hub, speaking the same wire protocol as `huggingface_hub`:
 *   GET  /api/models/{repo}/revision/{rev}           -> { sha, ... }   (model_info with a revision)
 *   GET  /api/models/{repo}/tree/{sha}?recursive=true -> [{ type, path, size, oid, lfs? }], paged by `Link: rel="next"`
 *   HEAD /{repo}/resolve/{sha}/{path}                 -> 200, or 302 to a CDN with X-Linked-Size / X-Linked-Etag
 * Failures are told apart by status plus the `X-Error-Code` / `X-Error-Message` headers, as `hf_raise_for_status` does
 * (see hub-errors.ts); the GGUF file to serve is chosen by gguf-choice.ts.
 */
import { LRUCache } from 'lru-cache';
import { ANSWER_LIMITS, BodyTimeoutError, readTextWithin } from './bounded-text.js';
import { ModelSourceError, serverText } from './errors.js';
import { DEFAULT_QUANT_PREFERENCE, pickGgufFile } from './gguf-choice.js';
import { API_ERROR, hubResponseError, NO_ACCESS, unparseable, type HubContext } from './hub-errors.js';
import { TransientError, withinDeadline, withRetries, type RetryOptions, type RetryPolicy, type RetryReporter } from './retry.js';

export const DEFAULT_HUB_ENDPOINT = 'https://huggingface.co';

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
  /** Commits' file listings read before (treeListings()): a commit listed there is not listed again. */
  listings?: TreeListings;
  /** How long the whole resolution may take, retries included. @default RESOLVE_DEADLINE_MS */
  deadlineMs?: number;
}

interface TreeEntry {
  type: 'file' | 'directory';
  path: string;
  size: number;
  lfs?: { oid: string; size: number };
}

const REPO_ID = /^(?:[\w.-]+\/)?[\w.-]+$/;
const SHA256 = /^[0-9a-f]{64}$/;
const COMMIT_SHA = /^[0-9a-f]{40}$/;
/** Files a repository may list (a model repo has its weights and tens of files beside them). */
const MAX_TREE_ENTRIES = 100_000;
/**
 * Pages a file listing may take, and their text all together: the hub lists a thousand files a page in a few hundred
 * bytes each, so MAX_TREE_ENTRIES fit in a hundred pages and about 30 MiB. A hub that pages on (a new link each time)
 * or sends entries padded with junk is stopped here rather than by the gateway's memory.
 */
const MAX_TREE_PAGES = 1_000;
const MAX_TREE_BYTES = 64 << 20;
/** The longest path a listing may name (a repository's paths are tens of characters); each is kept in memory. */
const MAX_PATH_CHARS = 1_024;
/** The longest LFS oid a listing may give (a sha256 is 64). */
const MAX_OID_CHARS = 128;
/**
 * How long one resolution may take in all (model info, every page of the listing, the file's HEAD, and their retries):
 * each answer is bounded, but a hub slow at each step would hold the endpoint's preparation for hours.
 */
export const RESOLVE_DEADLINE_MS = 5 * 60_000;

/**
 * Whether a file path leaves its repository (a `..` segment, or absolute): the hub's URLs and the model fetcher's
 * arguments are built from listed paths, so such a path is refused wherever one is met.
 */
export function leavesRepository(path: string): boolean {
  return path.startsWith('/') || path.split('/').includes('..');
}

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

/**
 * A JSON answer, read within ANSWER_LIMITS, or within `maxBytes` when that is less (then `tooLarge` is the message
 * for an answer past it); `bytes` is the size of its text.
 */
function hubJson(
  url: string,
  ctx: HubContext,
  call: HubCall,
  operation: string,
  maxBytes: number = ANSWER_LIMITS.maxBytes,
  tooLarge?: string,
): Promise<{ res: Response; body: unknown; bytes: number }> {
  const signal = call.retry.signal;
  const limits = { ...ANSWER_LIMITS, maxBytes: Math.min(maxBytes, ANSWER_LIMITS.maxBytes) };
  return hubRequest(url, { headers: hubHeaders(call.token, { accept: 'application/json' }) }, ctx, call, operation, async (res) => {
    if (!res.ok) throw hubResponseError(res, ctx);
    let text: string | undefined;
    try {
      text = await readTextWithin(res, limits);
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
      throw new ModelSourceError(
        API_ERROR,
        maxBytes < ANSWER_LIMITS.maxBytes && tooLarge
          ? tooLarge
          : `The hub's answer for ${ctx.repo} is larger than ${ANSWER_LIMITS.maxBytes >> 20} MiB.`,
      );
    try {
      return { res, body: JSON.parse(text) as unknown, bytes: Buffer.byteLength(text) };
    } catch (err) {
      throw new ModelSourceError(API_ERROR, `The hub sent an unreadable answer for ${ctx.repo}.`, { cause: err });
    }
  });
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
    (entry.lfs === undefined ||
      entry.lfs === null ||
      (typeof entry.lfs.oid === 'string' && entry.lfs.oid.length <= MAX_OID_CHARS && isSize(entry.lfs.size)))
  );
}

/**
 * Commits' file listings, by hub, repository and commit. A commit's files never change, so a process that resolves
 * many endpoints of one model (a fleet created at once, each replica's version) lists its commit once; the model info
 * (which revision is the commit now, and whether this token may read the repository) and the file's HEAD (whether
 * this token may download it) are still asked for every resolution. Bounded by the entries held, not the commits.
 */
export type TreeListings = LRUCache<string, readonly TreeEntry[]>;

export const treeListings = (maxEntries = 200_000): TreeListings =>
  new LRUCache<string, readonly TreeEntry[]>({ maxSize: maxEntries, sizeCalculation: (entries) => Math.max(1, entries.length) });

/** The message for a file listing past its bounds. */
const tooLong = (ctx: HubContext, what: string) =>
  `The hub's file listing of ${ctx.repo} runs to ${what}; a model repository's takes a few.`;

/** A listed path the resolution must not use, and why; undefined for a path within bounds and within the repository. */
function pathProblem(path: string): string | undefined {
  if (path.length > MAX_PATH_CHARS) return `longer than ${MAX_PATH_CHARS} characters`;
  if (leavesRepository(path)) return 'outside the repository';
  return undefined;
}

async function listTree(endpoint: string, commitSha: string, ctx: HubContext, call: HubCall): Promise<TreeEntry[]> {
  const entries: TreeEntry[] = [];
  const seen = new Set<string>();
  let bytes = 0;
  let url: string | undefined = `${endpoint}/api/models/${ctx.repo}/tree/${commitSha}?recursive=true&expand=false`;
  while (url) {
    if (seen.size === MAX_TREE_PAGES) throw new ModelSourceError(API_ERROR, tooLong(ctx, `more than ${MAX_TREE_PAGES} pages`));
    seen.add(url);
    const page = await hubJson(
      url,
      ctx,
      call,
      `listing the files of ${ctx.repo}`,
      MAX_TREE_BYTES - bytes,
      tooLong(ctx, `more than ${MAX_TREE_BYTES >> 20} MiB`),
    );
    bytes += page.bytes;
    const body = page.body;
    if (!Array.isArray(body) || !body.every(isTreeEntry)) throw unparseable(ctx, 'file listing');
    for (const { type, path, size, lfs } of body) {
      const problem = pathProblem(path);
      if (problem) throw new ModelSourceError(API_ERROR, `The hub listed a path ${problem} in ${ctx.repo}: "${serverText(path)}".`);
      // Only what is used is kept (the listing may be cached): not whatever else the hub sent with each entry.
      entries.push({ type, path, size, ...(lfs ? { lfs: { oid: lfs.oid, size: lfs.size } } : {}) });
    }
    if (entries.length > MAX_TREE_ENTRIES)
      throw new ModelSourceError(
        'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
        `${ctx.repo} lists more than ${MAX_TREE_ENTRIES} files: a model repository for an endpoint holds its weights and a few files beside them.`,
      );
    url = nextPage(page.res);
    // A page that links back to one already read would page forever.
    if (url && seen.has(new URL(url, endpoint).href)) throw unparseable(ctx, 'pagination link');
    // The token goes with every page, so never follow a link off the hub.
    if (url && new URL(url, endpoint).origin !== new URL(endpoint).origin) throw unparseable(ctx, 'pagination link');
    if (url) url = new URL(url, endpoint).href;
  }
  return entries;
}

/**
 * Resolves `revision` to a commit, lists that commit's files, picks the GGUF to serve and checks with a HEAD on
 * `/resolve/` (as `get_hf_file_metadata` does) that it can actually be downloaded: gated repos expose their
 * metadata and tree to everyone and refuse only the file itself. All of it, retries included, ends by its deadline
 * (`deadlineMs`, RESOLVE_DEADLINE_MS by default).
 */
export async function resolveHubModel(options: ResolveHubModelOptions): Promise<ResolvedHubModel> {
  const { repo, revision = 'main', deadlineMs = RESOLVE_DEADLINE_MS } = options;
  if (!REPO_ID.test(repo) || repo.split('/').some((part) => part === '.' || part === '..')) {
    throw new ModelSourceError(NO_ACCESS, `"${repo}" is not a valid repository id (expected "owner/name").`);
  }
  return withinDeadline(
    options.signal,
    deadlineMs,
    () =>
      new ModelSourceError(
        API_ERROR,
        `Resolving ${repo}@${revision} on the hub took longer than ${deadlineMs / 1000} s; the hub is too slow.`,
      ),
    (signal) => resolveWithin({ ...options, signal }),
  );
}

async function resolveWithin(options: ResolveHubModelOptions): Promise<ResolvedHubModel> {
  const { repo, revision = 'main', quantPreference = DEFAULT_QUANT_PREFERENCE } = options;
  const endpoint = hubEndpoint(options.endpoint);
  const token = hubToken(options.token);
  const ctx: HubContext = { repo, revision, tokenSent: Boolean(token) };
  const call: HubCall = { token, retry: hubRetryOptions(options) };

  const info = await hubJson(
    `${endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}?expand=sha`,
    ctx,
    call,
    `reading the model info of ${repo}@${revision}`,
  );
  const commitSha = (info.body as { sha?: unknown } | null)?.sha;
  if (typeof commitSha !== 'string' || !COMMIT_SHA.test(commitSha)) throw unparseable(ctx, 'model info');

  // Pin the listing and the download to the commit so a push in between cannot mix two revisions.
  const listingKey = `${endpoint}\n${repo}\n${commitSha}`;
  let tree = options.listings?.get(listingKey);
  if (!tree) {
    tree = await listTree(endpoint, commitSha, ctx, call);
    options.listings?.set(listingKey, tree);
  }
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
