/**
 * Containers as real local processes, for the stand-in's kubelet: Kubernetes `$(VAR)` expansion, the environment a
 * container gets (value, fieldRef, secretKeyRef, configMapKeyRef, envFrom), the process itself (its own process group,
 * so a signal reaches everything it started) and its output, kept for the log endpoint and termination messages.
 *
 * Every process group still alive is killed with SIGKILL when the test file ends (index.ts registers that) or the
 * process exits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import { pathValue, type KubeObject } from './objects.js';
import type { ObjectStore } from './store.js';

const live = new Set<ChildProcess>();

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      // already gone
    }
  }
}

/** SIGKILLs the process group of every container process still running. */
export function killAllContainers(): void {
  for (const child of live) killGroup(child, 'SIGKILL');
}

process.once('exit', killAllContainers);

/** `$(VAR)` references resolved from `vars`; `$$` is a literal `$`; unknown references stay as written. */
export function expand(text: string, vars: ReadonlyMap<string, string>): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (ch !== '$' || i + 1 >= text.length) {
      out += ch;
      continue;
    }
    const next = text[i + 1]!;
    if (next === '$') {
      out += '$';
      i++;
    } else if (next === '(') {
      const end = text.indexOf(')', i + 2);
      if (end < 0) {
        out += '$(';
        i++;
        continue;
      }
      const name = text.slice(i + 2, end);
      out += vars.has(name) ? vars.get(name)! : `$(${name})`;
      i = end;
    } else {
      out += ch + next;
      i++;
    }
  }
  return out;
}

/** Why a container cannot be created yet (the kubelet's CreateContainerConfigError message). */
export class ConfigError extends Error {}

function refValue(store: ObjectStore, pod: KubeObject, kind: 'Secret' | 'ConfigMap', ref: any): string | undefined {
  const resource = kind === 'Secret' ? 'secrets' : 'configmaps';
  const ns: string = pod.metadata.namespace;
  const object = store.get(resource, ns, ref.name);
  if (!object) {
    if (ref.optional) return undefined;
    throw new ConfigError(`${kind === 'Secret' ? 'secret' : 'configmap'} "${ref.name}" not found`);
  }
  if (kind === 'Secret') {
    const value = object.data?.[ref.key];
    if (value !== undefined) return Buffer.from(value, 'base64').toString('utf8');
  } else {
    const value =
      object.data?.[ref.key] ??
      (object.binaryData?.[ref.key] !== undefined ? Buffer.from(object.binaryData[ref.key], 'base64').toString() : undefined);
    if (value !== undefined) return value;
  }
  if (ref.optional) return undefined;
  throw new ConfigError(`couldn't find key ${ref.key} in ${kind} ${ns}/${ref.name}`);
}

function fieldRefValue(pod: KubeObject, fieldPath: string): string {
  const label = /^metadata\.(labels|annotations)\['([^']+)'\]$/.exec(fieldPath);
  if (label) return pod.metadata[label[1]!]?.[label[2]!] ?? '';
  if (fieldPath === 'status.podIPs') return (pod.status.podIPs ?? []).map((p: any) => p.ip).join(',');
  if (fieldPath === 'status.hostIPs') return (pod.status.hostIPs ?? []).map((p: any) => p.ip).join(',');
  const value = pathValue(pod, fieldPath);
  return value == null ? '' : String(value);
}

/** The container's environment, in the kubelet's order: base, envFrom, then env (each may reference earlier ones). */
export function containerEnv(store: ObjectStore, pod: KubeObject, container: any, base: Record<string, string>): Map<string, string> {
  const vars = new Map(Object.entries(base));
  for (const source of container.envFrom ?? []) {
    const ref = source.secretRef ?? source.configMapRef;
    const resource = source.secretRef ? 'secrets' : 'configmaps';
    const object = store.get(resource, pod.metadata.namespace, ref.name);
    if (!object) {
      if (ref.optional) continue;
      throw new ConfigError(`${source.secretRef ? 'secret' : 'configmap'} "${ref.name}" not found`);
    }
    for (const [key, value] of Object.entries<string>(object.data ?? {})) {
      const name = `${source.prefix ?? ''}${key}`;
      if (/^[-._a-zA-Z][-._a-zA-Z0-9]*$/.test(name))
        vars.set(name, source.secretRef ? Buffer.from(value, 'base64').toString('utf8') : value);
    }
  }
  for (const env of container.env ?? []) {
    const from = env.valueFrom;
    let value: string | undefined;
    if (!from) value = expand(env.value ?? '', vars);
    else if (from.fieldRef) value = fieldRefValue(pod, from.fieldRef.fieldPath);
    else if (from.secretKeyRef) value = refValue(store, pod, 'Secret', from.secretKeyRef);
    else if (from.configMapKeyRef) value = refValue(store, pod, 'ConfigMap', from.configMapKeyRef);
    else value = '';
    if (value !== undefined) vars.set(env.name, value);
  }
  return vars;
}

/** A container's output (stdout and stderr interleaved as they arrive), bounded to its last `limit` bytes. */
export class ContainerOutput {
  private chunks: Buffer[] = [];
  private size = 0;
  private readonly followers = new Set<{ data: (chunk: Buffer) => void; end: () => void }>();
  ended = false;

  constructor(private readonly limit = 8 * 1024 * 1024) {}

  write(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.limit && this.chunks.length > 1) this.size -= this.chunks.shift()!.length;
    for (const f of this.followers) f.data(chunk);
  }

  end(): void {
    this.ended = true;
    for (const f of this.followers) f.end();
    this.followers.clear();
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }

  /** The last `lines` lines (all when undefined), as `tailLines` selects them. */
  tail(lines?: number): string {
    const text = this.text();
    if (lines === undefined) return text;
    if (lines <= 0) return '';
    const parts = text.split('\n');
    const trailing = parts[parts.length - 1] === '' ? parts.pop() : undefined;
    return parts.slice(-lines).join('\n') + (trailing === '' ? '\n' : '');
  }

  follow(data: (chunk: Buffer) => void, end: () => void): () => void {
    if (this.ended) {
      end();
      return () => {};
    }
    const follower = { data, end };
    this.followers.add(follower);
    return () => this.followers.delete(follower);
  }
}

export interface Exit {
  exitCode: number;
  /** set when the process could not be started (the runtime's StartError) */
  startError?: string;
}

/** One container's process, started in its own process group. */
export class ContainerProcess {
  readonly exited: Promise<Exit>;
  private readonly child: ChildProcess;

  constructor(argv: string[], env: Map<string, string>, cwd: string, output: ContainerOutput) {
    this.child = spawn(argv[0]!, argv.slice(1), { cwd, env: Object.fromEntries(env), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(this.child);
    this.child.stdout!.on('data', (chunk: Buffer) => output.write(chunk));
    this.child.stderr!.on('data', (chunk: Buffer) => output.write(chunk));
    this.exited = new Promise((resolve) => {
      let startError: string | undefined;
      this.child.once('error', (error: NodeJS.ErrnoException) => {
        startError =
          error.code === 'ENOENT'
            ? `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "${argv[0]}": executable file not found in $PATH: unknown`
            : `failed to start container: ${error.message}`;
      });
      // PID 1 ending ends the container: whatever it left running in its group goes with it.
      this.child.once('exit', () => killGroup(this.child, 'SIGKILL'));
      this.child.once('close', (code, signal) => {
        live.delete(this.child);
        const exitCode = startError ? 128 : (code ?? 128 + (signal ? (constants.signals[signal] ?? 9) : 9));
        resolve(startError ? { exitCode, startError } : { exitCode });
      });
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  signal(signal: NodeJS.Signals): void {
    if (this.child.exitCode === null && this.child.signalCode === null && this.child.pid) killGroup(this.child, signal);
  }
}
