/**
 * The HTTP front of the stand-in's API server: bearer-token authentication (401 Status otherwise), JSON bodies only,
 * routing of the core/v1 paths the runtime uses to the resource handlers, watch streams and the log endpoint, and a
 * count of every request by method and path template (`GET /api/v1/namespaces/{ns}/pods`, `WATCH pods`).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { ContainerRun } from './kubelet.js';
import { serveLogs } from './logs.js';
import { ApiError, badRequest, failure, type KubeObject } from './objects.js';
import { KINDS, NAMESPACED, type ResourceApi } from './api.js';
import type { WatchHub } from './watch.js';

export interface HttpOptions {
  token: string;
  api: ResourceApi;
  watches: WatchHub;
  container: (uid: string, name: string) => ContainerRun | undefined;
}

interface Route {
  template: string;
  resource: string;
  namespace?: string;
  name?: string;
  sub?: string;
}

/** Maps a path to its resource and template, or undefined for paths the stand-in does not serve. */
function route(path: string): Route | undefined {
  const parts = path.split('/').filter(Boolean);
  if (parts[0] !== 'api' || parts[1] !== 'v1') return undefined;
  const rest = parts.slice(2).map(decodeURIComponent);
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    const [, namespace, resource, name, sub] = rest;
    if (!NAMESPACED.has(resource!) || rest.length > 5) return undefined;
    if (sub && !(resource === 'pods' && (sub === 'log' || sub === 'status' || sub === 'eviction'))) return undefined;
    const template = `/api/v1/namespaces/{ns}/${resource}${name ? '/{name}' : ''}${sub ? `/${sub}` : ''}`;
    return { template, resource: resource!, namespace, name, sub };
  }
  const [resource, name] = rest;
  if (!resource || !KINDS[resource] || rest.length > 2) return undefined;
  if (name && NAMESPACED.has(resource)) return undefined;
  return { template: `/api/v1/${resource}${name ? '/{name}' : ''}`, resource, name };
}

function readBody(req: IncomingMessage): Promise<any> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.once('error', reject);
    req.once('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') return resolve(undefined);
      const type = req.headers['content-type'] ?? '';
      if (!/^application\/(json|merge-patch\+json|strategic-merge-patch\+json)\b/.test(type))
        return reject(
          new ApiError(
            failure(
              415,
              'UnsupportedMediaType',
              `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf`,
            ),
          ),
        );
      try {
        resolve(JSON.parse(text));
      } catch (error) {
        reject(badRequest(`error decoding request body: ${(error as Error).message}`));
      }
    });
  });
}

export class ApiHttpServer {
  readonly server: Server;
  private counts = new Map<string, number>();

  constructor(private readonly options: HttpOptions) {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((error) => this.fail(res, error));
    });
  }

  requests(): Record<string, number> {
    return Object.fromEntries([...this.counts].sort(([a], [b]) => (a < b ? -1 : 1)));
  }

  resetCounts(): void {
    this.counts.clear();
  }

  private count(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  private send(res: ServerResponse, code: number, body: unknown): void {
    if (res.headersSent) {
      res.end();
      return;
    }
    res.writeHead(code, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' }).end(JSON.stringify(body));
  }

  private fail(res: ServerResponse, error: unknown): void {
    const status =
      error instanceof ApiError
        ? error.status
        : failure(500, 'InternalError', `Internal error occurred: ${(error as Error)?.message ?? error}`);
    this.send(res, status.code, status);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const query = url.searchParams;
    const method = req.method ?? 'GET';
    const target = route(url.pathname);
    const isWatch = method === 'GET' && query.get('watch') === 'true' && target !== undefined && !target.name;
    this.count(isWatch ? `WATCH ${target!.resource}` : `${method} ${target?.template ?? url.pathname}`);
    if (req.headers.authorization !== `Bearer ${this.options.token}`) {
      req.resume();
      return this.send(res, 401, failure(401, 'Unauthorized', 'Unauthorized'));
    }
    if (!target) {
      req.resume();
      return this.send(res, 404, failure(404, 'NotFound', 'the server could not find the requested resource', {}));
    }
    const body = await readBody(req);
    const { api } = this.options;
    const { resource, namespace, name, sub } = target;
    const allNamespaces = NAMESPACED.has(resource) && namespace === undefined;
    const notAllowed = () =>
      this.send(res, 405, failure(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
    if (isWatch) {
      this.options.watches.serve(req, res, {
        resource,
        kind: KINDS[resource]!,
        namespace,
        selector: api.selectors(resource, query),
        query,
      });
      return;
    }
    if (!name) {
      if (method === 'GET') return this.send(res, 200, api.list(resource, namespace, query));
      if (method === 'POST' && !allNamespaces && resource !== 'nodes') return this.send(res, 201, api.create(resource, namespace, body));
      return notAllowed();
    }
    if (sub === 'log') {
      if (method !== 'GET') return notAllowed();
      const pod: KubeObject = api.get('pods', namespace, name);
      serveLogs(res, pod, query, this.options.container);
      return;
    }
    if (sub === 'eviction') return method === 'POST' ? this.send(res, 201, api.evict(namespace!, name, body)) : notAllowed();
    if (method === 'GET') return this.send(res, 200, api.get(resource, namespace, name));
    if (method === 'PUT' && !sub && namespace !== undefined && (resource === 'secrets' || resource === 'configmaps'))
      return this.send(res, 200, api.replace(resource, namespace, name, body));
    if (method === 'DELETE' && !sub && resource !== 'nodes' && resource !== 'namespaces')
      return this.send(res, 200, api.delete(resource, namespace, name, query, body));
    return notAllowed();
  }

  listen(): Promise<number> {
    return new Promise((resolve) => this.server.listen(0, '127.0.0.1', () => resolve((this.server.address() as { port: number }).port)));
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
