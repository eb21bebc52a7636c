/**
 * The API client the runtime calls through, with one keep-alive connection pool. `KubeConfig.makeApiClient`'s
 * clients (client-node 1.x) make a new http(s).Agent for every call, so each call opened a connection of its own
 * (on a real cluster, a TLS handshake on both sides) and closed it. Here the agent the KubeConfig makes for a call
 * only supplies the connection options (CA, client certificate and key, TLS verification, server name): calls share
 * one keep-alive agent made from them, and a new one is made only when they change (a client certificate an exec
 * plugin renewed). Credentials sent as headers (bearer tokens) are applied to every call as before; a proxy's agent
 * is used as it is made.
 *
 * Pods are created through `createPod`, which sends the pod as JSON where the generated client walks its model
 * (ObjectSerializer) both ways: a pod we build is already the wire form (the models' names are the JSON's), and
 * nothing in the answer is read. The same request otherwise (URL, headers, credentials, pool, errors as ApiException).
 */
import http from 'node:http';
import https from 'node:https';
import {
  ApiException,
  CoreV1Api,
  HttpMethod,
  createConfiguration,
  ServerConfiguration,
  type KubeConfig,
  type RequestContext,
  type SecurityAuthentication,
  type V1Pod,
} from '@kubernetes/client-node';

const CONNECTION_OPTIONS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const;
type ConnectionOptions = Partial<Record<(typeof CONNECTION_OPTIONS)[number], unknown>>;

const same = (a: unknown, b: unknown) => (Buffer.isBuffer(a) && Buffer.isBuffer(b) ? a.equals(b) : a === b);

export interface PooledApi {
  api: CoreV1Api;
  /** Creates the pod in the namespace (a refusal: ApiException with the server's status code and Status body). */
  createPod(namespace: string, pod: V1Pod): Promise<void>;
  /** Closes the pool's idle connections. */
  close(): void;
}

/**
 * How long an idle pooled connection is kept: less than the keep-alive timeout of the servers in front of an API
 * server (Node's and many proxies' 5 s), so that the pool closes it first. A call never goes out on a connection the
 * server is closing at that moment (an ECONNRESET, read as the API server being down).
 */
export const IDLE_CONNECTION_MS = 4000;

export function pooledCoreApi(kc: KubeConfig, options: { idleMs?: number } = {}): PooledApi {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('No active cluster!');
  const idleMs = options.idleMs ?? IDLE_CONNECTION_MS;
  let pool: { agent: http.Agent; options: ConnectionOptions } | undefined;
  const auth: SecurityAuthentication = {
    getName: () => 'kubeconfig, pooled connections',
    async applySecurityAuthentication(context: RequestContext) {
      await kc.applySecurityAuthentication(context);
      const made = context.getAgent();
      if (!made || (made.constructor !== http.Agent && made.constructor !== https.Agent)) return;
      const options = (made as http.Agent & { options: ConnectionOptions }).options;
      if (!pool || !CONNECTION_OPTIONS.every((key) => same(pool!.options[key], options[key]))) {
        // The previous pool's connections close once idle (keep-alive sockets do not hold the process).
        const Agent = made.constructor as typeof http.Agent;
        pool = { agent: new Agent({ ...options, keepAlive: true, timeout: idleMs }), options };
      }
      context.setAgent(pool.agent);
    },
  };
  const config = createConfiguration({ baseServer: new ServerConfiguration(cluster.server, {}), authMethods: { default: auth } });
  async function createPod(namespace: string, pod: V1Pod): Promise<void> {
    const request = config.baseServer.makeRequestContext(`/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`, HttpMethod.POST);
    request.setHeaderParam('Accept', 'application/json');
    request.setHeaderParam('Content-Type', 'application/json');
    request.setBody(JSON.stringify(pod));
    await auth.applySecurityAuthentication(request);
    const response = await config.httpApi.send(request).toPromise();
    if (response.httpStatusCode >= 200 && response.httpStatusCode <= 299) {
      await response.body.binary(); // read to its end: the connection goes back to the pool
      return;
    }
    const message = response.httpStatusCode === 401 ? 'Unauthorized' : 'Unknown API Status Code!';
    throw new ApiException(response.httpStatusCode, message, await response.getBodyAsAny(), response.headers);
  }
  return { api: new CoreV1Api(config), createPod, close: () => pool?.agent.destroy() };
}
