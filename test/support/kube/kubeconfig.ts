/**
 * Writes a kubeconfig for the stand-in (cluster `server: http://127.0.0.1:PORT` with insecure-skip-tls-verify, a
 * bearer-token user, a context with the namespace) that `KubeConfig.loadFromFile` reads exactly as it reads a real one.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { onCleanup } from '../cleanup.js';

export interface KubeconfigOptions {
  server: string;
  token: string;
  namespace?: string;
  /** where to write it (default: a new temporary directory, removed at the end of the test file) */
  path?: string;
  /** context, cluster and user name (default "stand-in") */
  name?: string;
}

export function writeKubeconfig(options: KubeconfigOptions): string {
  const name = options.name ?? 'stand-in';
  const path = options.path ?? join(mkdtempSync(join(tmpdir(), 'kube-stand-in-')), 'kubeconfig');
  if (!options.path) onCleanup(() => rmSync(dirname(path), { recursive: true, force: true }));
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    // client-node 1.x refuses plain http unless the cluster skips TLS verification (there is no TLS to verify).
    clusters: [{ name, cluster: { server: options.server, 'insecure-skip-tls-verify': true } }],
    users: [{ name, user: { token: options.token } }],
    contexts: [{ name, context: { cluster: name, user: name, namespace: options.namespace ?? 'default' } }],
    'current-context': name,
    preferences: {},
  };
  writeFileSync(path, JSON.stringify(config, null, 2) + '\n', { mode: 0o600 });
  return path;
}
