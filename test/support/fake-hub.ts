/**
 * A stand-in for the Hugging Face Hub: a real HTTP server answering the routes `huggingface_hub` uses with the
 * hub's statuses, headers and JSON shapes, plus fault injection for the failure paths.
 *
 *   GET  /api/models/{org}/{name}[/revision/{rev}]      model info ({ _id, id, sha, private, gated, siblings, ... })
 *   GET  /api/models/{org}/{name}/tree/{rev}[/{path}]   [{ type, oid, size, path, lfs? }], paged via Link rel="next"
 *   HEAD|GET /{org}/{name}/resolve/{rev}/{path}         plain git files: 200; LFS files: 302 to /cdn-lfs/... with
 *                                                        X-Repo-Commit, X-Linked-Size, X-Linked-Etag
 *   HEAD|GET /cdn-lfs/repos/{org}/{name}/{sha256}       the "CDN": signed-URL style, no auth, Range -> 206
 *
 * Faults (setFault) answer as the hub does when it fails that way: the X-Error-Code / X-Error-Message of a missing
 * repo, revision or file, a gated or disabled repo, a rejected token; a 5xx or a 429 with Retry-After; a connection
 * reset before any answer; a transfer cut, corrupted or slowed.
 *
 * Access rules mirror the hub: an unknown token gets 401 "Invalid credentials in Authorization header" everywhere;
 * private or missing repos get 401 RepoNotFound anonymously and 404 RepoNotFound with a token; gated repos show
 * metadata to all but refuse /resolve/ with 401 GatedRepo (anonymous) or 403 GatedRepo (not granted).
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serveBytes } from './serve-bytes.js';

export const FAKE_HUB_TOKEN = 'hf_fake_valid_token';

export interface FakeRepo {
  id: string;
  /** Buffers are stored as LFS objects (redirected to the CDN), strings as plain git files. */
  files: Record<string, Buffer | string>;
  private?: boolean;
  gated?: boolean | 'auto' | 'manual';
  /** revision name -> commit sha; defaults to a `main` branch with a sha derived from the id */
  commits?: Record<string, string>;
  /** tokens that may read a private repo or download from a gated one; defaults to every valid hub token */
  allowedTokens?: string[];
}

export type HubFault =
  | { type: 'invalid-token' }
  | { type: 'gated' }
  | { type: 'repo-not-found'; status?: 401 | 404 }
  | { type: 'revision-not-found' }
  | { type: 'entry-not-found' }
  /** 403 with `X-Error-Message: Access to this resource is disabled.` (a repo disabled by the hub) */
  | { type: 'disabled' }
  /** a 5xx (500 unless told), with `Retry-After: <seconds>` when given */
  | { type: 'server-error'; status?: number; retryAfter?: number }
  /** 429 Too Many Requests with `Retry-After: <seconds>` (default 1) */
  | { type: 'rate-limit'; retryAfter?: number }
  /** the connection is reset before any answer is sent */
  | { type: 'reset' }
  /** the answer cut after `afterBytes` (test/support/serve-bytes.ts, TransferFault) */
  | { type: 'truncate'; afterBytes: number; heldUntilFile?: string }
  | { type: 'corrupt' }
  | { type: 'slow'; chunkBytes: number; delayMs: number };

export type HubRoute = 'api' | 'resolve' | 'cdn';

export interface FaultOptions {
  /** only this repo (default: every repo) */
  repo?: string;
  /** routes the fault applies to (default depends on the fault: where the real hub would fail that way) */
  on?: HubRoute[];
  /** applies to this many matching requests, then clears itself (default: until cleared) */
  times?: number;
}

export interface HubRequestLog {
  method: string;
  route: HubRoute | 'other';
  path: string;
  query: string;
  range?: string;
  authorization?: string;
  /** filled in once the answer's head is sent; 0 for a connection reset without an answer */
  status?: number;
  /** when the request arrived (Date.now()) */
  at: number;
  /** when its connection closed (Date.now()), and whether the whole answer had been sent by then */
  closedAt?: number;
  complete?: boolean;
}

export interface FakeHub {
  url: string;
  requests: HubRequestLog[];
  /** Sets (or with null, clears) the fault for `options.repo`, or the global fault. */
  setFault(fault: HubFault | null, options?: FaultOptions): void;
  close(): Promise<void>;
}

export interface FakeHubOptions {
  repos: FakeRepo[];
  /** tokens the hub accepts (default: [FAKE_HUB_TOKEN]) */
  tokens?: string[];
  /** tree entries per page; the real hub pages large listings too */
  treePageSize?: number;
}

interface StoredFile {
  path: string;
  content: Buffer;
  lfs: boolean;
  sha256: string;
  /** git object id: of the content for plain files, of the pointer file for LFS files */
  oid: string;
  pointerSize: number;
}

interface ActiveFault {
  fault: HubFault;
  routes: HubRoute[];
  remaining: number;
}

const DEFAULT_ROUTES: Record<HubFault['type'], HubRoute[]> = {
  'invalid-token': ['api', 'resolve', 'cdn'],
  gated: ['resolve'],
  'repo-not-found': ['api', 'resolve'],
  'revision-not-found': ['api', 'resolve'],
  'entry-not-found': ['resolve'],
  disabled: ['api', 'resolve'],
  'server-error': ['api'],
  'rate-limit': ['api'],
  reset: ['api'],
  truncate: ['resolve', 'cdn'],
  corrupt: ['resolve', 'cdn'],
  slow: ['resolve', 'cdn'],
};
const TRANSFER_FAULTS = new Set<HubFault['type']>(['truncate', 'corrupt', 'slow']);
const INVALID_CREDENTIALS = 'Invalid credentials in Authorization header';
const sha = (algo: 'sha1' | 'sha256', data: Buffer | string) => createHash(algo).update(data).digest('hex');
const gitOid = (content: Buffer) => sha('sha1', Buffer.concat([Buffer.from(`blob ${content.length}\0`), content]));

function storeFile(path: string, value: Buffer | string): StoredFile {
  const content = Buffer.isBuffer(value) ? value : Buffer.from(value);
  const sha256 = sha('sha256', content);
  if (!Buffer.isBuffer(value)) return { path, content, lfs: false, sha256, oid: gitOid(content), pointerSize: 0 };
  const pointer = Buffer.from(`version https://git-lfs.github.com/spec/v1\noid sha256:${sha256}\nsize ${content.length}\n`);
  return { path, content, lfs: true, sha256, oid: gitOid(pointer), pointerSize: pointer.length };
}

class HubError {
  constructor(
    readonly status: number,
    readonly message: string,
    readonly code?: string,
    readonly headers: Record<string, string> = {},
  ) {}
}

/** Ends the request by resetting its connection: no status line, no headers. */
class ConnectionReset {}

export async function startFakeHub({ repos, tokens = [FAKE_HUB_TOKEN], treePageSize = 1000 }: FakeHubOptions): Promise<FakeHub> {
  const stored = new Map(repos.map((repo) => [repo.id, { repo, files: Object.entries(repo.files).map(([p, v]) => storeFile(p, v)) }]));
  const faults = new Map<string, ActiveFault>();
  const requests: HubRequestLog[] = [];
  const created = new Date('2024-01-01T00:00:00.000Z').toISOString();

  const commitsOf = (repo: FakeRepo) => repo.commits ?? { main: sha('sha1', `${repo.id}@main`) };
  const commitFor = (repo: FakeRepo, rev: string): string => {
    const commits = commitsOf(repo);
    const found = commits[rev] ?? (/^[0-9a-f]{40}$/.test(rev) && Object.values(commits).includes(rev) ? rev : undefined);
    if (!found) throw new HubError(404, `Invalid rev id: ${rev}`, 'RevisionNotFound');
    return found;
  };

  /**
   * Finds the fault of the wanted kind (an error answer, or a spoiled transfer) for this request and uses up one
   * of its `times`; transfer faults wait for a GET that really carries bytes.
   */
  function takeFault(repoId: string, route: HubRoute, transfer: boolean): HubFault | undefined {
    for (const key of [repoId, '*']) {
      const active = faults.get(key);
      if (!active || !active.routes.includes(route) || TRANSFER_FAULTS.has(active.fault.type) !== transfer) continue;
      if (--active.remaining <= 0) faults.delete(key);
      return active.fault;
    }
    return undefined;
  }

  function throwFault(repoId: string, route: HubRoute, rev?: string): void {
    const fault = takeFault(repoId, route, false);
    const error = fault && errorForFault(fault, repoId, rev);
    if (error) throw error;
  }

  function errorForFault(fault: HubFault, repoId: string, rev: string | undefined): HubError | ConnectionReset | undefined {
    switch (fault.type) {
      case 'invalid-token':
        return new HubError(401, INVALID_CREDENTIALS);
      case 'gated':
        return new HubError(
          403,
          `Access to model ${repoId} is restricted and you are not in the authorized list. Visit https://huggingface.co/${repoId} to ask for access.`,
          'GatedRepo',
        );
      case 'repo-not-found':
        return new HubError(fault.status ?? 404, 'Repository not found', 'RepoNotFound');
      case 'disabled':
        return new HubError(403, 'Access to this resource is disabled.');
      case 'rate-limit':
        return new HubError(429, 'You have been rate-limited; retry later.', undefined, { 'Retry-After': String(fault.retryAfter ?? 1) });
      case 'reset':
        return new ConnectionReset();
      case 'revision-not-found':
        return new HubError(404, `Invalid rev id: ${rev ?? 'main'}`, 'RevisionNotFound');
      case 'entry-not-found':
        return new HubError(404, 'Entry not found', 'EntryNotFound');
      case 'server-error':
        return new HubError(
          fault.status ?? 500,
          "Internal Error - We're working hard to fix this as soon as possible!",
          undefined,
          fault.retryAfter !== undefined ? { 'Retry-After': String(fault.retryAfter) } : {},
        );
      default:
        return undefined;
    }
  }

  /** The hub's access rules; `route` matters because gating applies to file downloads only. */
  function authorize(req: IncomingMessage, repoId: string, route: HubRoute) {
    const token = req.headers.authorization?.match(/^Bearer\s+(.+)$/i)?.[1];
    if (req.headers.authorization !== undefined && (!token || !tokens.includes(token))) throw new HubError(401, INVALID_CREDENTIALS);
    const entry = stored.get(repoId);
    const granted = token !== undefined && (entry?.repo.allowedTokens ?? tokens).includes(token);
    if (!entry || (entry.repo.private && !granted)) throw new HubError(token ? 404 : 401, 'Repository not found', 'RepoNotFound');
    if (entry.repo.gated && route === 'resolve' && !granted) {
      throw token
        ? new HubError(
            403,
            `Access to model ${repoId} is restricted and you are not in the authorized list. Visit https://huggingface.co/${repoId} to ask for access.`,
            'GatedRepo',
          )
        : new HubError(
            401,
            `Access to model ${repoId} is restricted. You must have access to it and be authenticated to access it. Please log in.`,
            'GatedRepo',
          );
    }
    return entry;
  }

  function modelInfo(repo: FakeRepo, files: StoredFile[], commit: string, expand: string[]) {
    const info: Record<string, unknown> = {
      _id: sha('sha1', repo.id).slice(0, 24),
      id: repo.id,
      private: Boolean(repo.private),
      tags: files.some((f) => f.path.endsWith('.gguf')) ? ['gguf'] : [],
      downloads: 0,
      likes: 0,
      modelId: repo.id,
      author: repo.id.split('/')[0],
      sha: commit,
      lastModified: created,
      gated: repo.gated === true ? 'auto' : (repo.gated ?? false),
      disabled: false,
      siblings: files.map((f) => ({ rfilename: f.path })),
      createdAt: created,
      usedStorage: files.reduce((n, f) => n + f.content.length, 0),
    };
    // `expand` narrows the answer to the named properties, as on the hub.
    return expand.length === 0
      ? info
      : Object.fromEntries(Object.entries(info).filter(([k]) => k === '_id' || k === 'id' || expand.includes(k)));
  }

  function treeEntries(files: StoredFile[], commit: string, prefix: string, recursive: boolean, expand: boolean) {
    const base = prefix ? `${prefix}/` : '';
    const under = files.filter((f) => f.path.startsWith(base));
    const dirs = new Set<string>();
    for (const f of under) {
      const parts = f.path.slice(base.length).split('/').slice(0, -1);
      for (let i = 1; i <= (recursive ? parts.length : Math.min(1, parts.length)); i++) dirs.add(base + parts.slice(0, i).join('/'));
    }
    const shown = under.filter((f) => recursive || !f.path.slice(base.length).includes('/'));
    const lastCommit = expand ? { lastCommit: { id: commit, title: 'Upload folder using huggingface_hub', date: created } } : {};
    return [
      ...[...dirs].sort().map((path) => ({ type: 'directory', oid: sha('sha1', `${commit}:${path}`), size: 0, path, ...lastCommit })),
      ...shown
        .sort((a, b) => a.path.localeCompare(b.path))
        .map((f) => ({
          type: 'file',
          oid: f.oid,
          size: f.lfs ? f.pointerSize : f.content.length,
          path: f.path,
          ...(f.lfs ? { lfs: { oid: f.sha256, size: f.content.length, pointerSize: f.pointerSize } } : {}),
          ...lastCommit,
        })),
    ];
  }

  function sendError(res: ServerResponse, err: HubError, route: HubRoute | 'other') {
    if (err.code) res.setHeader('X-Error-Code', err.code);
    res.setHeader('X-Error-Message', err.message);
    for (const [name, value] of Object.entries(err.headers)) res.setHeader(name, value);
    if (route === 'api') sendJson(res, err.status, { error: err.message });
    else res.writeHead(err.status, { 'Content-Type': 'text/plain; charset=utf-8' }).end(err.message);
  }

  function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
    const text = JSON.stringify(body);
    res
      .writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text), ...headers })
      .end(text);
  }

  /** Serves a stored file, corrupted when asked, through the shared byte server. */
  async function sendBytes(req: IncomingMessage, res: ServerResponse, file: StoredFile, headers: Record<string, string>, fault?: HubFault) {
    const content = fault?.type === 'corrupt' ? Buffer.from(file.content.map((b, i) => (i === 0 ? b ^ 0xff : b))) : file.content;
    await serveBytes(req, res, content, { headers, fault: fault ?? null });
  }

  async function handle(req: IncomingMessage, res: ServerResponse, log: HubRequestLog) {
    const url = new URL(req.url ?? '/', 'http://fake-hub');
    const segments = url.pathname.split('/').slice(1).map(decodeURIComponent);
    const origin = `http://${req.headers.host}`;
    const method = req.method ?? 'GET';
    if (method !== 'GET' && method !== 'HEAD') throw new HubError(405, 'Method not allowed');

    if (segments[0] === 'api' && segments[1] === 'models') {
      log.route = 'api';
      const repoId = `${segments[2]}/${segments[3]}`;
      const [kind, rev, ...rest] = segments.slice(4);
      throwFault(repoId, 'api', rev);
      const { repo, files } = authorize(req, repoId, 'api');
      if (kind === undefined || kind === 'revision') {
        const commit = commitFor(repo, rev ?? 'main');
        const expand = [...url.searchParams.getAll('expand'), ...url.searchParams.getAll('expand[]')];
        return sendJson(res, 200, modelInfo(repo, files, commit, expand));
      }
      if (kind !== 'tree' || rev === undefined) throw new HubError(404, 'Not Found');
      const commit = commitFor(repo, rev);
      const prefix = rest.join('/');
      const entries = treeEntries(
        files,
        commit,
        prefix,
        url.searchParams.get('recursive') === 'true',
        url.searchParams.get('expand') === 'true',
      );
      if (prefix && entries.length === 0) throw new HubError(404, 'Entry not found', 'EntryNotFound');
      const offset = Number(Buffer.from(url.searchParams.get('cursor') ?? '', 'base64url').toString() || 0);
      const page = entries.slice(offset, offset + treePageSize);
      const headers: Record<string, string> = {};
      if (offset + treePageSize < entries.length) {
        const next = new URL(url.pathname + url.search, origin);
        next.searchParams.set('cursor', Buffer.from(String(offset + treePageSize)).toString('base64url'));
        headers.Link = `<${next.href}>; rel="next"`;
      }
      return sendJson(res, 200, page, headers);
    }

    if (segments[2] === 'resolve' && segments.length >= 5) {
      log.route = 'resolve';
      const repoId = `${segments[0]}/${segments[1]}`;
      const rev = segments[3]!;
      const path = segments.slice(4).join('/');
      throwFault(repoId, 'resolve', rev);
      const { files, repo } = authorize(req, repoId, 'resolve');
      const commit = commitFor(repo, rev);
      const file = files.find((f) => f.path === path);
      if (!file) throw new HubError(404, 'Entry not found', 'EntryNotFound');
      const headers = { 'X-Repo-Commit': commit, ETag: `"${file.oid}"` };
      if (!file.lfs) return sendBytes(req, res, file, headers, method === 'GET' ? takeFault(repoId, 'resolve', true) : undefined);
      const location = `${origin}/cdn-lfs/repos/${repoId}/${file.sha256}?Expires=${Math.floor(Date.now() / 1000) + 3600}&Signature=fake`;
      const text = `Found. Redirecting to ${location}`;
      res.writeHead(302, {
        ...headers,
        Location: location,
        'X-Linked-Size': String(file.content.length),
        'X-Linked-Etag': `"${file.sha256}"`,
        'Content-Type': 'text/plain; charset=utf-8',
        'Content-Length': Buffer.byteLength(text),
      });
      return void res.end(method === 'HEAD' ? undefined : text);
    }

    if (segments[0] === 'cdn-lfs' && segments[1] === 'repos' && segments.length === 5) {
      log.route = 'cdn';
      const repoId = `${segments[2]}/${segments[3]}`;
      throwFault(repoId, 'cdn');
      const file = stored.get(repoId)?.files.find((f) => f.lfs && f.sha256 === segments[4]);
      if (!file) throw new HubError(404, 'Not Found');
      return sendBytes(req, res, file, { ETag: `"${file.sha256}"` }, method === 'GET' ? takeFault(repoId, 'cdn', true) : undefined);
    }

    throw new HubError(404, 'Not Found');
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake-hub');
    const log: HubRequestLog = {
      method: req.method ?? 'GET',
      route: 'other',
      path: url.pathname,
      query: url.search,
      ...(req.headers.range ? { range: req.headers.range } : {}),
      ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      at: Date.now(),
    };
    requests.push(log);
    res.on('close', () => {
      log.status = res.headersSent ? res.statusCode : 0; // 0: reset, no answer
      log.closedAt = Date.now();
      log.complete = res.writableFinished;
    });
    handle(req, res, log).catch((err: unknown) => {
      if (err instanceof ConnectionReset) return void req.socket.resetAndDestroy();
      if (res.headersSent) return void res.destroy();
      sendError(res, err instanceof HubError ? err : new HubError(500, 'Internal Error'), log.route);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    setFault(fault, options = {}) {
      const key = options.repo ?? '*';
      if (fault === null) return void (options.repo === undefined ? faults.clear() : faults.delete(key));
      faults.set(key, { fault, routes: options.on ?? DEFAULT_ROUTES[fault.type], remaining: options.times ?? Infinity });
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}
