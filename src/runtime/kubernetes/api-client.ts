/**
 * The API client the runtime calls through, with one keep-alive connection pool. `KubeConfig.makeApiClient`'s
 * clients (client-node 1.x) make a new http(s).Agent for every call, so each call opened a connection of its own
 * (on a real cluster, a TLS handshake on both sides) and closed it. Here the agent the KubeConfig makes for a call
 * only supplies the connection options (CA, client certificate and key, TLS verification, server name): calls share
 * one keep-alive agent made from them, and a new one is made only when they change (a client certificate an exec
 * plugin renewed). Credentials sent as headers (bearer tokens) are applied to every call as before; a proxy's agent
 * is used as it is made.
 */
import http from 'node:http';
import https from 'node:https';
import {
  CoreV1Api,
  createConfiguration,
  ServerConfiguration,
  type KubeConfig,
  type RequestContext,
  type SecurityAuthentication,
} from '@kubernetes/client-node';

const CONNECTION_OPTIONS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const;
type ConnectionOptions = Partial<Record<(typeof CONNECTION_OPTIONS)[number], unknown>>;

const same = (a: unknown, b: unknown) => (Buffer.isBuffer(a) && Buffer.isBuffer(b) ? a.equals(b) : a === b);

export interface PooledApi {
  api: CoreV1Api;
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
  return { api: new CoreV1Api(config), close: () => pool?.agent.destroy() };
}
