/**
 * What the gateway's RBAC must grant, derived from what the Kubernetes runtime (src/runtime/kubernetes/) calls, so that
 * deploy/base/rbac.yaml can be checked against the code rather than against a list kept by hand:
 *
 * - `runtimeGrants` reads the runtime's sources: every method of the client's CoreV1Api they call, run against a
 *   recording HTTP library to learn the request it makes (method and path); the informers' watches (their list method,
 *   asked with `watch=true`); the requests the runtime builds itself (`makeRequestContext`: api-client.ts's pod
 *   create); the client's `Log` (a pod's log). A value imported from the client that this module does not know fails:
 *   a new kind of call must be taught here, not silently left out.
 * - `requestGrant` maps one HTTP request to the RBAC verb and resource it needs, as the API server's authorizer does;
 *   runtime-rbac.test.ts applies it to the requests a runtime makes against the stand-in API server.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { CoreV1Api, createConfiguration, ServerConfiguration, wrapHttpLibrary } from '@kubernetes/client-node';

export interface Grant {
  /** `namespace`: a Role in the runtime's namespace can grant it; `cluster`: only a ClusterRole. */
  scope: 'namespace' | 'cluster';
  /** `pods`, `pods/log`, `nodes`: the core API group's resources (and subresources). */
  resource: string;
  verb: string;
}

/** resource → its verbs, sorted: the shape the tests compare. */
export type GrantTable = Record<string, string[]>;

const VERBS: Record<string, string> = { POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' };

/**
 * The verb and resource one request needs (the API server's request info): GET of a collection is `list`, or `watch`
 * with `watch=true`; GET of a named object `get`; POST `create`; PUT `update`; PATCH `patch`; DELETE `delete`, of a
 * collection `deletecollection`. A subresource (`pods/NAME/log`) is its own resource, `pods/log`.
 */
export function requestGrant(method: string, url: string): Grant & { namespace?: string } {
  const parsed = new URL(url, 'http://api.invalid');
  const parts = parsed.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] !== 'api' || parts[1] !== 'v1') {
    throw new Error(`${method} ${parsed.pathname}: not the core API; teach test/deploy/rbac.ts its group before granting it`);
  }
  let rest = parts.slice(2);
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [resource, name, sub, ...more] = rest;
  if (!resource || more.length > 0) throw new Error(`${method} ${parsed.pathname}: not a resource path`);
  const watch = ['true', '1'].includes(parsed.searchParams.get('watch') ?? '');
  let verb: string | undefined;
  if (method === 'GET') verb = name ? (watch ? 'watch' : 'get') : watch ? 'watch' : 'list';
  else if (method === 'DELETE' && !name) verb = 'deletecollection';
  else verb = VERBS[method];
  if (!verb) throw new Error(`${method} ${parsed.pathname}: no RBAC verb known for ${method}`);
  return {
    scope: namespace === undefined ? 'cluster' : 'namespace',
    resource: sub ? `${resource}/${sub}` : resource,
    verb,
    ...(namespace !== undefined ? { namespace } : {}),
  };
}

/** Grants as resource → sorted verbs, for one scope. */
export function grantTable(grants: readonly Grant[], scope: Grant['scope']): GrantTable {
  const table: GrantTable = {};
  for (const grant of grants) {
    if (grant.scope !== scope) continue;
    table[grant.resource] = [...new Set([...(table[grant.resource] ?? []), grant.verb])].sort();
  }
  return Object.fromEntries(Object.entries(table).sort(([a], [b]) => a.localeCompare(b)));
}

/** Whether `table` (a Role's or ClusterRole's rules, as a GrantTable) allows `grant`. */
export const allows = (table: GrantTable, grant: Grant) => table[grant.resource]?.includes(grant.verb) ?? false;

const CLIENT_IMPORT = /import\s*\{([^}]*)\}\s*from\s*'@kubernetes\/client-node'/g;

/** Values the runtime imports from the client that make no request by themselves (CoreV1Api's methods are scanned). */
const NO_REQUESTS = new Set(['ApiException', 'CoreV1Api', 'HttpMethod', 'KubeConfig', 'ServerConfiguration', 'createConfiguration']);
/** Values that make requests other than CoreV1Api's methods, with the requests (`makeInformer`: its list, as a watch). */
const HELPERS: Record<string, { method: string; url: string }[]> = {
  Log: [{ method: 'GET', url: '/api/v1/namespaces/ns/pods/name/log?follow=true' }],
  makeInformer: [],
};

/** CoreV1Api's methods, each of which makes one request. */
const coreMethods = () => Object.getOwnPropertyNames(CoreV1Api.prototype).filter((name) => name !== 'constructor');

/** The request a CoreV1Api method makes, learned from the client itself (a recording HTTP library; nothing is sent). */
async function requestOf(method: string, params: Record<string, unknown>): Promise<{ method: string; url: string }> {
  let seen: { method: string; url: string } | undefined;
  const config = createConfiguration({
    baseServer: new ServerConfiguration('http://api.invalid', {}),
    httpApi: wrapHttpLibrary({
      send(request) {
        seen = { method: request.getHttpMethod(), url: request.getUrl() };
        return Promise.reject(new Error('recorded, not sent'));
      },
    }),
  });
  const api = new CoreV1Api(config) as unknown as Record<string, (params: Record<string, unknown>) => Promise<unknown>>;
  await api[method]!({ name: 'name', namespace: 'ns', body: {}, ...params }).catch(() => {});
  if (!seen) throw new Error(`CoreV1Api.${method} made no request`);
  return seen;
}

/** The runtime's sources, by file name. */
export function runtimeSources(dir: string): Map<string, string> {
  return new Map(
    readdirSync(dir)
      .filter((name) => name.endsWith('.ts'))
      .map((name) => [name, readFileSync(path.join(dir, name), 'utf8')]),
  );
}

/** Every grant the runtime's API calls need (see the header), each with where it was found. */
export async function runtimeGrants(dir: string): Promise<(Grant & { call: string })[]> {
  const methods = coreMethods();
  const callPattern = new RegExp(`\\.(${methods.join('|')})\\s*\\(`, 'g');
  const found: (Grant & { call: string })[] = [];
  const add = async (call: string, request: { method: string; url: string }) => {
    const { scope, resource, verb } = requestGrant(request.method, request.url);
    found.push({ scope, resource, verb, call });
  };
  for (const [file, source] of runtimeSources(dir)) {
    for (const [, names] of source.matchAll(CLIENT_IMPORT)) {
      // `import type { … }` is not matched (the pattern wants `import {`); `type X` inside the braces is a type only.
      for (const name of names!
        .split(',')
        .map((n) => n.trim())
        .filter((n) => n && !n.startsWith('type '))) {
        if (!NO_REQUESTS.has(name) && !HELPERS[name]) {
          throw new Error(`${file} imports ${name} from @kubernetes/client-node: say in test/deploy/rbac.ts which requests it makes`);
        }
        for (const request of HELPERS[name] ?? []) await add(`${file}: ${name}`, request);
      }
    }
    for (const [, method] of source.matchAll(callPattern)) await add(`${file}: ${method}`, await requestOf(method!, {}));
    // An informer lists with the method it is given, then watches the same collection.
    for (const match of source.matchAll(/\bmakeInformer\s*[<(]/g)) {
      const list = /\.(list\w+)\s*\(/.exec(source.slice(match.index, match.index + 400));
      if (!list || !methods.includes(list[1]!)) throw new Error(`${file}: an informer whose list method is not found near it`);
      await add(`${file}: makeInformer (${list[1]}, watch)`, await requestOf(list[1]!, { watch: true }));
    }
    // Requests the runtime builds itself: `makeRequestContext(\`/api/v1/…\`, HttpMethod.POST)`.
    for (const match of source.matchAll(/makeRequestContext\(/g)) {
      const request = /^makeRequestContext\(\s*`([^`]*)`\s*,\s*HttpMethod\.(\w+)\s*\)/.exec(source.slice(match.index));
      if (!request) throw new Error(`${file}: a makeRequestContext call whose path and method are not literal`);
      await add(`${file}: ${request[2]} ${request[1]}`, { method: request[2]!, url: request[1]!.replace(/\$\{[^}]*\}/g, 'ns') });
    }
  }
  return found;
}

/** A Role's or ClusterRole's rules as a GrantTable: the core group only, no resource names, no URLs. */
export function ruleTable(
  rules: { apiGroups?: string[]; resources?: string[]; verbs: string[]; resourceNames?: unknown; nonResourceURLs?: unknown }[],
): GrantTable {
  const grants: Grant[] = [];
  for (const rule of rules) {
    if (JSON.stringify(rule.apiGroups) !== '[""]') throw new Error(`a rule outside the core API group: ${JSON.stringify(rule)}`);
    if (rule.resourceNames !== undefined || rule.nonResourceURLs !== undefined)
      throw new Error(`an unexpected rule: ${JSON.stringify(rule)}`);
    for (const resource of rule.resources ?? []) for (const verb of rule.verbs) grants.push({ scope: 'namespace', resource, verb });
  }
  return grantTable(grants, 'namespace');
}
