/**
 * A stand-in for W&B: two real HTTP servers, the API and the object storage its signed URLs point to, answering
 * what the `wandb` SDK uses to fetch a registry artifact, with W&B's shapes, plus fault injection.
 *
 * API server (`url`), HTTP basic auth `api:<key>` like W&B (a bad or missing key: 401 "user is not logged in"):
 *   POST /graphql                         graphql-yoga serving src/models/wandb/schema.graphql: organization,
 *                                         project.artifactCollectionMembership(name: "<name>:<vN|alias>"),
 *                                         artifact(id).currentManifest.file.directUrl, serverInfo.features
 *   GET  /artifactsV2/{region}/{entity}/{project}/{collection}/[{artifactId}/]{birthArtifactId}/{md5hex}/{name}
 *   GET  /artifacts/{entity}/{md5hex}     302 to a signed storage URL, as W&B redirects to its bucket
 * Storage server (`storageUrl`), no auth but a signature parameter (without one: 403 AccessDenied):
 *   GET  /manifests/{artifactId}?X-Goog-Signature=...   the manifest JSON
 *   GET  /objects/{md5hex}?X-Goog-Signature=...         file bytes, single Range -> 206
 *
 * Registries are projects `wandb-registry-<registry>` of the organization's entity (`orgEntities`, else the
 * organization's own name). Manifests and artifact digests are computed as the SDK computes them.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GraphQLError } from 'graphql';
import { createSchema, createYoga } from 'graphql-yoga';
import { serveBytes } from './serve-bytes.js';

export const FAKE_WANDB_KEY = 'local-fake0123456789abcdef0123456789abcdef';
export const V2_URL_WITH_ARTIFACT_ID = 'ARTIFACT_V2_DOWNLOAD_HANDLER_SUPPORTS_ARTIFACT_ID';

export interface FakeArtifactVersion {
  /** `v<N>` */
  version: string;
  aliases?: string[];
  /** default `model` */
  type?: string;
  /** Buffers and strings alike are stored files */
  files: Record<string, Buffer | string>;
  /** reference entries (path -> URI), tracked but not stored by W&B */
  references?: Record<string, string>;
  /** default COMMITTED */
  state?: 'COMMITTED' | 'PENDING' | 'DELETED';
  /** the manifest's storage layout (default V2) */
  layout?: 'V1' | 'V2';
}

export interface FakeArtifact {
  org: string;
  /** without the `wandb-registry-` prefix */
  registry: string;
  name: string;
  versions: FakeArtifactVersion[];
}

export type WandbFault =
  | { type: 'invalid-key' }
  | { type: 'forbidden' }
  | { type: 'server-error'; status?: number }
  /** HTTP 200 whose body carries `errors` (and null data), from the resolvers */
  | { type: 'graphql-error'; message?: string }
  /** HTTP 200 with this body (default: an HTML page) */
  | { type: 'malformed'; body?: string; contentType?: string }
  /** `currentManifest: null` */
  | { type: 'missing-manifest' }
  /** the storage answers 404 for the manifest */
  | { type: 'manifest-not-found' }
  | { type: 'truncate'; afterBytes: number }
  /** storage objects: the first byte flipped; manifests: one entry's digest changed */
  | { type: 'corrupt' }
  | { type: 'slow'; chunkBytes: number; delayMs: number }
  /** takes the request and never answers it (a registry that hangs) */
  | { type: 'stall' };

export type WandbRoute = 'graphql' | 'download' | 'manifest' | 'storage';

export interface WandbFaultOptions {
  /** routes the fault applies to (default: where W&B fails that way) */
  on?: WandbRoute[];
  /** only GraphQL requests of this operation (default: any; `missing-manifest`: FetchArtifactManifest) */
  operation?: string;
  /** applies to this many matching requests, then clears itself (default: until cleared) */
  times?: number;
}

export interface WandbRequestLog {
  method: string;
  route: WandbRoute | 'other';
  path: string;
  /** GraphQL operation name */
  operation?: string;
  range?: string;
  authorization?: string;
  /** filled in once the answer is sent */
  status?: number;
  /** true until the request is answered, or its client gives up on it (closes its connection) */
  open: boolean;
}

export interface FakeWandb {
  /** the API base URL (WANDB_BASE_URL) */
  url: string;
  storageUrl: string;
  requests: WandbRequestLog[];
  setFault(fault: WandbFault | null, options?: WandbFaultOptions): void;
  /** the artifact digest and manifest the fake serves for a version, as the SDK would compute them */
  manifestOf(org: string, registry: string, name: string, version: string): { digest: string; manifest: unknown; artifactId: string };
  close(): Promise<void>;
}

export interface FakeWandbOptions {
  artifacts: FakeArtifact[];
  /** accepted API keys (default [FAKE_WANDB_KEY]) */
  keys?: string[];
  /** organization name -> the name of its entity; organizations not listed are unknown to `organization(name:)` */
  orgEntities?: Record<string, string>;
  /** enabled server features (default [ARTIFACT_V2_DOWNLOAD_HANDLER_SUPPORTS_ARTIFACT_ID]) */
  features?: string[];
}

interface StoredVersion {
  artifact: FakeArtifact;
  spec: FakeArtifactVersion;
  index: number;
  id: string;
  membershipId: string;
  entity: string;
  project: string;
  contents: Record<string, { digest: string; size: number; birthArtifactID?: string; ref?: string }>;
  digest: string;
  manifest: Record<string, unknown>;
  size: number;
}

interface ActiveFault {
  fault: WandbFault;
  routes: WandbRoute[];
  operation?: string;
  remaining: number;
}

interface ServerContext {
  origin: string;
  fault?: WandbFault;
}

const DEFAULT_ROUTES: Record<WandbFault['type'], WandbRoute[]> = {
  'invalid-key': ['graphql', 'download'],
  forbidden: ['graphql'],
  'server-error': ['graphql'],
  'graphql-error': ['graphql'],
  malformed: ['graphql'],
  'missing-manifest': ['graphql'],
  'manifest-not-found': ['manifest'],
  truncate: ['storage'],
  corrupt: ['storage'],
  slow: ['storage'],
  stall: ['graphql'],
};
/** Faults that spoil an answer that is otherwise served normally, rather than replacing it. */
const SPOILERS = new Set<WandbFault['type']>(['truncate', 'corrupt', 'slow', 'graphql-error', 'missing-manifest']);
const SCHEMA = readFileSync(new URL('../../src/models/wandb/schema.graphql', import.meta.url), 'utf8');
const md5 = (data: Buffer | string) => createHash('md5').update(data);
const gqlId = (type: string, n: number) => Buffer.from(`${type}:${n}`).toString('base64');

/** The SDK's artifact digest: md5 hex of the header and `path:digest\n` per entry, sorted by path. */
function artifactDigest(contents: Record<string, { digest: string }>): string {
  const hash = md5('wandb-artifact-manifest-v1\n');
  for (const path of Object.keys(contents).sort()) hash.update(`${path}:${contents[path]!.digest}\n`);
  return hash.digest('hex');
}

class HttpFailure {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly contentType = 'application/json',
  ) {}
}

export async function startFakeWandb({
  artifacts,
  keys = [FAKE_WANDB_KEY],
  orgEntities = {},
  features = [V2_URL_WITH_ARTIFACT_ID],
}: FakeWandbOptions): Promise<FakeWandb> {
  const requests: WandbRequestLog[] = [];
  const faults: ActiveFault[] = [];
  const versions: StoredVersion[] = [];
  const objects = new Map<string, Buffer>(); // md5 hex -> content
  let counter = 0;

  for (const artifact of artifacts) {
    const entity = orgEntities[artifact.org] ?? artifact.org;
    for (const spec of artifact.versions) {
      const index = Number(/^v(\d+)$/.exec(spec.version)?.[1] ?? NaN);
      if (!Number.isInteger(index)) throw new Error(`fake-wandb: version must be v<N>, got ${spec.version}`);
      const n = ++counter;
      const id = gqlId('Artifact', n);
      const contents: StoredVersion['contents'] = {};
      let size = 0;
      for (const [path, value] of Object.entries(spec.files)) {
        const content = Buffer.isBuffer(value) ? value : Buffer.from(value);
        const digest = md5(content).digest('base64');
        objects.set(Buffer.from(digest, 'base64').toString('hex'), content);
        contents[path] = { digest, size: content.length, birthArtifactID: id };
        size += content.length;
      }
      for (const [path, ref] of Object.entries(spec.references ?? {})) {
        contents[path] = { digest: md5(ref).digest('hex'), size: 0, ref };
      }
      const manifest = {
        version: 1,
        storagePolicy: 'wandb-storage-policy-v1',
        storagePolicyConfig: spec.layout === 'V1' ? {} : { storageLayout: spec.layout ?? 'V2' },
        contents,
      };
      versions.push({
        artifact,
        spec,
        index,
        id,
        membershipId: gqlId('ArtifactCollectionMembership', n),
        entity,
        project: `wandb-registry-${artifact.registry}`,
        contents,
        digest: artifactDigest(contents),
        manifest,
        size,
      });
    }
  }

  const findVersion = (predicate: (v: StoredVersion) => boolean) => versions.find(predicate);

  /** Uses up one application of the fault matching this request, if any. */
  function takeFault(route: WandbRoute, operation: string | undefined, spoiler: boolean): WandbFault | undefined {
    for (const [i, active] of faults.entries()) {
      if (!active.routes.includes(route) || SPOILERS.has(active.fault.type) !== spoiler) continue;
      if (active.operation !== undefined && active.operation !== operation) continue;
      if (--active.remaining <= 0) faults.splice(i, 1);
      return active.fault;
    }
    return undefined;
  }

  function failureFor(fault: WandbFault): HttpFailure | undefined {
    switch (fault.type) {
      case 'invalid-key':
        return new HttpFailure(401, { errors: [{ message: 'user is not logged in' }] });
      case 'forbidden':
        return new HttpFailure(403, { errors: [{ message: 'permission denied' }] });
      case 'server-error':
        return new HttpFailure(fault.status ?? 500, { errors: [{ message: 'An internal error occurred. Please contact support.' }] });
      case 'malformed':
        return new HttpFailure(
          200,
          fault.body ?? '<html><body><h1>Service Unavailable</h1></body></html>',
          fault.contentType ?? 'text/html',
        );
      case 'manifest-not-found':
        return new HttpFailure(404, '<?xml version="1.0"?><Error><Code>NoSuchKey</Code></Error>', 'application/xml');
      default:
        return undefined;
    }
  }

  /** Answers a request with the fault's failure; a stalled one is left unanswered until its client closes it. */
  async function refuse(req: IncomingMessage, fault: WandbFault): Promise<void> {
    if (fault.type !== 'stall') throw failureFor(fault) ?? new HttpFailure(500, {});
    if (!req.socket.destroyed) await new Promise((resolve) => req.socket.once('close', resolve));
  }

  function authorize(req: IncomingMessage): void {
    const match = /^Basic\s+(.+)$/i.exec(req.headers.authorization ?? '');
    const decoded = match ? Buffer.from(match[1]!, 'base64').toString() : '';
    const key = decoded.startsWith('api:') ? decoded.slice(4) : undefined;
    if (!key || !keys.includes(key)) throw new HttpFailure(401, { errors: [{ message: 'user is not logged in' }] });
  }

  const projectId = (v: { entity: string; project: string }) => Buffer.from(`Project:${v.entity}/${v.project}`).toString('base64');
  const projectOf = (v: StoredVersion) => ({
    id: projectId(v),
    internalId: projectId(v),
    name: v.project,
    entity: { id: gqlId('Entity', 1), name: v.entity },
  });
  const collectionOf = (v: StoredVersion) => ({
    __typename: 'ArtifactPortfolio',
    id: gqlId('ArtifactPortfolio', 1),
    name: v.artifact.name,
    project: projectOf(v),
  });
  const artifactOf = (v: StoredVersion) => ({
    id: v.id,
    versionIndex: v.index,
    artifactType: { id: gqlId('ArtifactType', 1), name: v.spec.type ?? 'model' },
    artifactSequence: { ...collectionOf(v), __typename: 'ArtifactSequence' },
    state: v.spec.state ?? 'COMMITTED',
    size: v.size,
    digest: v.digest,
    fileCount: Object.keys(v.spec.files).length,
    stored: v,
  });

  const spoil = (ctx: ServerContext) => {
    if (ctx.fault?.type === 'graphql-error')
      throw new GraphQLError(ctx.fault.message ?? 'Something went wrong while resolving this field.');
  };

  const yoga = createYoga<ServerContext>({
    graphqlEndpoint: '/graphql',
    landingPage: false,
    logging: false,
    schema: createSchema<ServerContext>({
      typeDefs: SCHEMA,
      resolvers: {
        Query: {
          organization: (_: unknown, { name }: { name?: string }, ctx: ServerContext) => {
            spoil(ctx);
            const entity = name === undefined ? undefined : orgEntities[name];
            return entity ? { id: gqlId('Organization', 1), name, orgEntity: { id: gqlId('Entity', 2), name: entity } } : null;
          },
          project: (_: unknown, { name, entityName }: { name?: string; entityName?: string }, ctx: ServerContext) => {
            spoil(ctx);
            const v = findVersion((s) => s.project === name && s.entity === entityName);
            return v ? { ...projectOf(v), key: { entity: v.entity, project: v.project } } : null;
          },
          artifact: (_: unknown, { id }: { id: string }, ctx: ServerContext) => {
            spoil(ctx);
            const v = findVersion((s) => s.id === id);
            return v ? artifactOf(v) : null;
          },
          serverInfo: (_: unknown, __: unknown, ctx: ServerContext) => {
            spoil(ctx);
            return { features: features.map((name) => ({ name, isEnabled: true })) };
          },
        },
        Project: {
          artifactCollectionMembership: (project: { key: { entity: string; project: string } }, { name }: { name: string }) => {
            const colon = name.lastIndexOf(':');
            const [collection, wanted] = colon < 0 ? [name, 'latest'] : [name.slice(0, colon), name.slice(colon + 1)];
            const index = /^v(\d+)$/.exec(wanted)?.[1];
            const v = findVersion(
              (s) =>
                s.entity === project.key.entity &&
                s.project === project.key.project &&
                s.artifact.name === collection &&
                (index !== undefined ? s.index === Number(index) : (s.spec.aliases ?? []).includes(wanted)),
            );
            if (!v) return null;
            return {
              id: v.membershipId,
              versionIndex: v.index,
              aliases: (v.spec.aliases ?? []).map((alias, i) => ({
                id: gqlId('ArtifactAlias', v.index * 100 + i),
                alias,
                artifactCollection: collectionOf(v),
              })),
              artifactCollection: collectionOf(v),
              artifact: artifactOf(v),
            };
          },
        },
        ArtifactCollection: {
          __resolveType: (c: { __typename: string }) => c.__typename,
        },
        Artifact: {
          currentManifest: (a: { stored: StoredVersion }, _: unknown, ctx: ServerContext) => {
            if (ctx.fault?.type === 'missing-manifest') return null;
            return {
              id: gqlId('ArtifactManifest', a.stored.index),
              file: {
                id: gqlId('File', a.stored.index),
                name: 'wandb_manifest.json',
                directUrl: `${storageUrl}/manifests/${encodeURIComponent(a.stored.id)}?X-Goog-Signature=${md5(a.stored.id).digest('hex')}`,
              },
            };
          },
        },
      },
    }),
  });

  function send(
    res: ServerResponse,
    status: number,
    body: unknown,
    contentType = 'application/json',
    headers: Record<string, string> = {},
  ): void {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(text), ...headers }).end(text);
  }

  /** Serves bytes through the shared byte server (ranges, HEAD, transfer faults). */
  async function sendBytes(req: IncomingMessage, res: ServerResponse, content: Buffer, contentType: string, fault?: WandbFault) {
    await serveBytes(req, res, content, { contentType, fault: fault ?? null });
  }

  const readBody = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  };

  async function handleApi(req: IncomingMessage, res: ServerResponse, log: WandbRequestLog): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake-wandb');
    const segments = url.pathname.split('/').slice(1).map(decodeURIComponent);

    if (url.pathname === '/graphql') {
      log.route = 'graphql';
      const body = await readBody(req);
      let operation: string | undefined;
      try {
        operation = (JSON.parse(body.toString()) as { operationName?: string }).operationName ?? undefined;
      } catch {
        // yoga answers the bad request itself
      }
      if (operation) log.operation = operation;
      const failure = takeFault('graphql', operation, false);
      if (failure) return refuse(req, failure);
      authorize(req);
      const spoiler = takeFault('graphql', operation, true);
      const response = await yoga.fetch(
        `http://${req.headers.host}${req.url}`,
        { method: req.method ?? 'POST', headers: req.headers as Record<string, string>, ...(req.method === 'GET' ? {} : { body }) },
        { origin: `http://${req.headers.host}`, ...(spoiler ? { fault: spoiler } : {}) },
      );
      const text = await response.text();
      return send(res, response.status, text, response.headers.get('content-type') ?? 'application/json');
    }

    const isV2 = segments[0] === 'artifactsV2' && (segments.length === 8 || segments.length === 9);
    const isV1 = segments[0] === 'artifacts' && segments.length === 3;
    if ((isV1 || isV2) && req.method === 'GET') {
      log.route = 'download';
      const failure = takeFault('download', undefined, false);
      if (failure) return refuse(req, failure);
      authorize(req);
      const md5hex = isV1 ? segments[2]! : segments[segments.length - 2]!;
      // V2 names the artifact: the file must belong to it, as W&B checks.
      if (isV2) {
        const [entity, project, collection] = [segments[2], segments[3], segments[4]];
        const owner = findVersion(
          (v) =>
            v.entity === entity &&
            v.project === project &&
            v.artifact.name === collection &&
            Object.values(v.contents).some((c) => !c.ref && Buffer.from(c.digest, 'base64').toString('hex') === md5hex) &&
            (segments.length === 8 || segments[5] === v.id),
        );
        if (!owner) throw new HttpFailure(404, { error: 'artifact file not found' });
      }
      if (!objects.has(md5hex)) throw new HttpFailure(404, { error: 'artifact file not found' });
      const location = `${storageUrl}/objects/${md5hex}?X-Goog-Signature=${md5(md5hex).digest('hex')}`;
      return void res.writeHead(302, { Location: location, 'Content-Length': 0 }).end();
    }
    throw new HttpFailure(404, { error: 'not found' });
  }

  async function handleStorage(req: IncomingMessage, res: ServerResponse, log: WandbRequestLog): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake-storage');
    const segments = url.pathname.split('/').slice(1).map(decodeURIComponent);
    const denied = new HttpFailure(403, '<?xml version="1.0"?><Error><Code>AccessDenied</Code></Error>', 'application/xml');
    const notFound = new HttpFailure(404, '<?xml version="1.0"?><Error><Code>NoSuchKey</Code></Error>', 'application/xml');
    if (segments[0] === 'manifests' && segments.length === 2) {
      log.route = 'manifest';
      const failure = takeFault('manifest', undefined, false);
      if (failure) return refuse(req, failure);
      if (!url.searchParams.get('X-Goog-Signature')) throw denied;
      const v = findVersion((s) => s.id === segments[1]);
      if (!v) throw notFound;
      const spoiler = takeFault('manifest', undefined, true);
      let manifest = v.manifest;
      if (spoiler?.type === 'corrupt') {
        const [first] = Object.keys(v.contents);
        manifest = {
          ...manifest,
          contents: { ...v.contents, [first!]: { ...v.contents[first!]!, digest: md5('other').digest('base64') } },
        };
      }
      return sendBytes(
        req,
        res,
        Buffer.from(JSON.stringify(manifest)),
        'application/json',
        spoiler?.type === 'corrupt' ? undefined : spoiler,
      );
    }
    if (segments[0] === 'objects' && segments.length === 2) {
      log.route = 'storage';
      const failure = takeFault('storage', undefined, false);
      if (failure) return refuse(req, failure);
      if (!url.searchParams.get('X-Goog-Signature')) throw denied;
      const content = objects.get(segments[1]!);
      if (!content) throw notFound;
      const spoiler = takeFault('storage', undefined, true);
      const bytes = spoiler?.type === 'corrupt' ? Buffer.from(content.map((b, i) => (i === 0 ? b ^ 0xff : b))) : content;
      return sendBytes(req, res, bytes, 'application/octet-stream', spoiler);
    }
    throw notFound;
  }

  const listen = (handler: (req: IncomingMessage, res: ServerResponse, log: WandbRequestLog) => Promise<void>): Server =>
    createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const log: WandbRequestLog = {
        method: req.method ?? 'GET',
        route: 'other',
        path: url.pathname,
        open: true,
        ...(req.headers.range ? { range: req.headers.range } : {}),
        ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      };
      requests.push(log);
      res.on('close', () => {
        log.status = res.statusCode;
        log.open = false;
      });
      handler(req, res, log).catch((err: unknown) => {
        if (res.headersSent) return void res.destroy();
        const failure = err instanceof HttpFailure ? err : new HttpFailure(500, { errors: [{ message: 'internal error' }] });
        send(res, failure.status, failure.body, failure.contentType);
      });
    });

  const api = listen(handleApi);
  const storage = listen(handleStorage);
  const port = async (server: Server) => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  };
  const url = `http://127.0.0.1:${await port(api)}`;
  const storageUrl = `http://127.0.0.1:${await port(storage)}`;

  return {
    url,
    storageUrl,
    requests,
    setFault(fault, options = {}) {
      if (fault === null) return void faults.splice(0);
      const operation = options.operation ?? (fault.type === 'missing-manifest' ? 'FetchArtifactManifest' : undefined);
      faults.unshift({
        fault,
        routes: options.on ?? DEFAULT_ROUTES[fault.type],
        ...(operation ? { operation } : {}),
        remaining: options.times ?? Infinity,
      });
    },
    manifestOf(org, registry, name, version) {
      const v = findVersion(
        (s) => s.artifact.org === org && s.artifact.registry === registry && s.artifact.name === name && s.spec.version === version,
      );
      if (!v) throw new Error(`fake-wandb: no ${org}/${registry}/${name}:${version}`);
      return { digest: v.digest, manifest: v.manifest, artifactId: v.id };
    },
    async close() {
      for (const server of [api, storage]) {
        server.closeAllConnections();
        await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
      }
    },
  };
}
