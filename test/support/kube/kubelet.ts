/**
 * The stand-in's kubelet (one for all simulated nodes): runs each bound pod's init containers one after another and
 * then its containers as real local processes (or, with `processes: false`, only pretends they run), gives the pod
 * its own IP (in 127/8), probes readiness, keeps each container's output for the log endpoint, writes the pod's
 * status as the real kubelet does, and carries out graceful deletion: SIGTERM, SIGKILL after the grace period, then
 * removal of the object once every process is gone.
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { ConfigError, ContainerOutput, ContainerProcess, containerEnv, expand, type Exit } from './containers.js';
import type { EventRecorder } from './events.js';
import { timestamp, type KubeObject } from './objects.js';
import { containerID, podPhase, writeStatus, type ContainerState } from './pod-status.js';
import { ReadinessProber } from './probes.js';
import { PodIps } from './pod-ips.js';
import { nonRootViolation, rootTakenAsDone } from './security-context.js';
import type { ObjectStore } from './store.js';

export interface KubeletOptions {
  processes: boolean;
  cwd: string;
  env: Record<string, string>;
  probePeriodMs: number;
  imagePullBackoffMs: number;
  retryMs: number;
  imagePullFails: (image: string) => boolean;
  /** How long the next pull of an image takes before it succeeds or fails (once: the node has the image then). */
  imagePullMs: (image: string) => number;
  entrypoint: (image: string) => string[] | undefined;
  /** Scripts a container's command runs, by absolute path, and the local builds of them run instead (stand-in.ts). */
  programs: Readonly<Record<string, string>>;
  apiServer: () => { host: string; port: number };
}

export interface ContainerRun extends ContainerState {
  spec: any;
  output: ContainerOutput;
  process?: ContainerProcess;
  prober?: ReadinessProber;
  fault?: { reason?: string; exitCode?: number };
  exit?: Promise<void>;
}

interface PodRun {
  ns: string;
  name: string;
  uid: string;
  ip: string;
  init: ContainerRun[];
  main: ContainerRun[];
  sandbox: boolean;
  terminating: boolean;
  finalized: boolean;
  ended: boolean;
  killTimer?: NodeJS.Timeout;
  killAt?: number;
  wakers: Set<() => void>;
}

export class Kubelet {
  private readonly runs = new Map<string, PodRun>();
  /** runs with a sleep in progress (waiting on a Secret, a ConfigMap, a hostPath or an image pull back-off) */
  private readonly sleeping = new Set<PodRun>();
  private readonly ips = new PodIps();
  private closed = false;

  constructor(
    private readonly store: ObjectStore,
    private readonly events: EventRecorder,
    private readonly options: KubeletOptions,
    /** a pod reached a terminal phase or was removed: room for pending pods */
    private readonly freed: () => void,
  ) {}

  /** Starts a pod the scheduler just bound. */
  start(pod: KubeObject): void {
    if (this.closed || this.runs.has(pod.metadata.uid)) return;
    const waiting = pod.spec.initContainers?.length ? 'PodInitializing' : 'ContainerCreating';
    const container = (spec: any, init: boolean): ContainerRun => ({
      name: spec.name,
      image: spec.image,
      init,
      spec,
      waiting: { reason: waiting },
      ready: false,
      output: new ContainerOutput(),
    });
    const run: PodRun = {
      ns: pod.metadata.namespace,
      name: pod.metadata.name,
      uid: pod.metadata.uid,
      ip: this.ips.allocate(),
      init: (pod.spec.initContainers ?? []).map((c: any) => container(c, true)),
      main: pod.spec.containers.map((c: any) => container(c, false)),
      sandbox: false,
      terminating: false,
      finalized: false,
      ended: false,
      wakers: new Set(),
    };
    this.runs.set(run.uid, run);
    const now = timestamp();
    this.store.update('pods', run.ns, run.name, (draft) => {
      Object.assign(draft.status, {
        hostIP: '127.0.0.1',
        hostIPs: [{ ip: '127.0.0.1' }],
        podIP: run.ip,
        podIPs: [{ ip: run.ip }],
        startTime: now,
      });
      writeStatus(draft, run.init, run.main, false);
    });
    void this.run(run, pod);
  }

  private current(run: PodRun): KubeObject | undefined {
    const pod = this.store.get('pods', run.ns, run.name);
    return pod?.metadata.uid === run.uid ? pod : undefined;
  }

  private publish(run: PodRun): void {
    if (!this.current(run)) return;
    const updated = this.store.update('pods', run.ns, run.name, (draft) => writeStatus(draft, run.init, run.main, run.sandbox));
    const phase = updated?.status.phase;
    if (!run.ended && (phase === 'Succeeded' || phase === 'Failed')) {
      run.ended = true;
      this.freed();
    }
  }

  private event(run: PodRun, type: 'Normal' | 'Warning', reason: string, message: string): void {
    const pod = this.current(run);
    if (pod && this.options.processes) this.events.record(pod, type, reason, message, 'kubelet', pod.spec.nodeName);
  }

  private sleep(run: PodRun, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        run.wakers.delete(done);
        if (run.wakers.size === 0) this.sleeping.delete(run);
        resolve();
      };
      const timer = setTimeout(done, ms);
      run.wakers.add(done);
      this.sleeping.add(run);
    });
  }

  /** Retries pods waiting on a Secret or ConfigMap (one was just created or changed). */
  wake(): void {
    for (const run of [...this.sleeping]) this.wakeRun(run);
  }

  private async run(run: PodRun, pod: KubeObject): Promise<void> {
    while (!run.terminating) {
      const problem = this.mountVolumes(pod);
      if (!problem) break;
      this.event(run, 'Warning', 'FailedMount', problem);
      await this.sleep(run, this.options.retryMs);
    }
    if (run.terminating) return;
    run.sandbox = true;
    if (this.options.processes) this.publish(run);
    for (const c of run.init) {
      if (!(await this.startContainer(run, pod, c))) return;
      await c.exit;
      if (run.terminating || c.terminated?.exitCode !== 0) return;
    }
    for (const c of run.main) c.waiting = c.waiting?.reason === 'PodInitializing' ? { reason: 'ContainerCreating' } : c.waiting;
    await Promise.all(run.main.map((c) => this.startContainer(run, pod, c)));
    // Simulated containers start together: one status update for the whole pod.
    if (!this.options.processes) this.publish(run);
  }

  /** hostPath volumes: DirectoryOrCreate/FileOrCreate are created, Directory/File must exist. Returns a mount failure. */
  private mountVolumes(pod: KubeObject): string | undefined {
    for (const volume of pod.spec.volumes ?? []) {
      const hostPath = volume.hostPath;
      if (!hostPath) continue;
      const path: string = hostPath.path;
      const type: string = hostPath.type ?? '';
      try {
        if (type === 'DirectoryOrCreate') mkdirSync(path, { recursive: true, mode: 0o755 });
        else if (type === 'FileOrCreate') writeFileSync(path, '', { flag: 'a' });
        else if (type === 'Directory' && !statSync(path).isDirectory()) throw new Error();
        else if (type === 'File' && !statSync(path).isFile()) throw new Error();
      } catch {
        const what = type.startsWith('Directory') ? 'directory' : 'file';
        return `MountVolume.SetUp failed for volume "${volume.name}" : hostPath type check failed: ${path} is not a ${what}`;
      }
    }
    return undefined;
  }

  private async startContainer(run: PodRun, pod: KubeObject, c: ContainerRun): Promise<boolean> {
    let backoff = this.options.imagePullBackoffMs;
    // A large image's first pull takes a while before it succeeds or fails (a plain timer: a change of the pull rules,
    // which wakes the kubelet's retries, does not end a pull under way).
    const pullMs = this.options.imagePullMs(c.image);
    if (pullMs > 0) await new Promise((resolve) => setTimeout(resolve, pullMs));
    while (!run.terminating) {
      if (this.options.imagePullFails(c.image)) {
        const message = `rpc error: code = NotFound desc = failed to pull and unpack image "${c.image}": failed to resolve reference "${c.image}": ${c.image}: not found`;
        c.waiting = { reason: 'ErrImagePull', message };
        this.publish(run);
        this.event(run, 'Warning', 'Failed', `Failed to pull image "${c.image}": ${message}`);
        await this.sleep(run, backoff);
        if (run.terminating || !this.options.imagePullFails(c.image)) continue;
        c.waiting = { reason: 'ImagePullBackOff', message: `Back-off pulling image "${c.image}"` };
        this.publish(run);
        this.event(run, 'Normal', 'BackOff', `Back-off pulling image "${c.image}"`);
        await this.sleep(run, backoff);
        backoff = Math.min(backoff * 2, this.options.imagePullBackoffMs * 16);
        continue;
      }
      let env: Map<string, string>;
      try {
        const { host, port } = this.options.apiServer();
        const base = { ...this.options.env, HOSTNAME: run.name, KUBERNETES_SERVICE_HOST: host, KUBERNETES_SERVICE_PORT: String(port) };
        const refused = nonRootViolation(pod, c.spec);
        if (refused) throw new ConfigError(refused);
        env = containerEnv(this.store, this.current(run) ?? pod, c.spec, base);
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        if (c.waiting?.reason !== 'CreateContainerConfigError' || c.waiting.message !== error.message) {
          c.waiting = { reason: 'CreateContainerConfigError', message: error.message };
          this.publish(run);
          this.event(run, 'Warning', 'Failed', `Error: ${error.message}`);
        }
        await this.sleep(run, this.options.retryMs);
        continue;
      }
      this.launch(run, c, env);
      return true;
    }
    return false;
  }

  private launch(run: PodRun, c: ContainerRun, env: Map<string, string>): void {
    const startedAt = timestamp();
    c.containerID = containerID(run.uid, c.name);
    c.waiting = undefined;
    if (!this.options.processes || (c.init && rootTakenAsDone(this.current(run) ?? {}, c.spec))) {
      if (c.init) c.terminated = { exitCode: 0, reason: 'Completed', startedAt, finishedAt: startedAt };
      else c.running = { startedAt };
      c.ready = true;
      c.exit = Promise.resolve();
      return;
    }
    const argv = withPrograms(
      [...(c.spec.command ?? this.options.entrypoint(c.image) ?? []), ...(c.spec.args ?? [])].map((a: string) => expand(a, env)),
      this.options.programs,
    );
    if (argv.length === 0) {
      c.terminated = {
        exitCode: 128,
        reason: 'StartError',
        message: 'failed to create containerd task: no command specified: unknown',
        finishedAt: startedAt,
      };
      c.exit = Promise.resolve();
      this.publish(run);
      return;
    }
    const process = new ContainerProcess(argv, env, this.options.cwd, c.output);
    c.process = process;
    c.running = { startedAt };
    c.ready = !c.init && !c.spec.readinessProbe;
    this.event(run, 'Normal', 'Started', `Started container ${c.name}`);
    if (!c.init && c.spec.readinessProbe) {
      c.prober = new ReadinessProber(
        c.spec.readinessProbe,
        c.spec,
        run.ip,
        this.options.probePeriodMs,
        (ready) => {
          if (!c.running) return;
          c.ready = ready;
          this.publish(run);
        },
        Object.fromEntries(env),
      );
    }
    this.publish(run);
    c.exit = process.exited.then((exit) => this.exited(run, c, exit));
  }

  private exited(run: PodRun, c: ContainerRun, exit: Exit): void {
    c.prober?.stop();
    const exitCode = c.fault?.exitCode ?? exit.exitCode;
    const reason = exit.startError ? 'StartError' : (c.fault?.reason ?? (exitCode === 0 ? 'Completed' : 'Error'));
    const message = exit.startError ?? this.terminationMessage(c, exitCode);
    c.terminated = { exitCode, reason, ...(message ? { message } : {}), startedAt: c.running?.startedAt, finishedAt: timestamp() };
    c.running = undefined;
    c.process = undefined;
    c.ready = c.init && exitCode === 0;
    c.output.end();
    if (run.finalized) return;
    this.publish(run);
    if (run.terminating && this.liveContainers(run).length === 0) this.finalize(run);
  }

  /** The termination message file (a real path), else for FallbackToLogsOnError the tail of a failed container's log. */
  private terminationMessage(c: ContainerRun, exitCode: number): string | undefined {
    try {
      const text = readFileSync(c.spec.terminationMessagePath, 'utf8').slice(0, 4096);
      if (text) return text;
    } catch {
      // no message file
    }
    if (c.spec.terminationMessagePolicy !== 'FallbackToLogsOnError' || exitCode === 0) return undefined;
    const tail = Buffer.from(c.output.tail(80));
    return tail.subarray(Math.max(0, tail.length - 2048)).toString('utf8') || undefined;
  }

  private liveContainers(run: PodRun): ContainerRun[] {
    return [...run.init, ...run.main].filter((c) => c.process);
  }

  /** Graceful deletion: SIGTERM now, SIGKILL after `graceSeconds`, removal once no process is left. */
  terminate(pod: KubeObject, graceSeconds: number): void {
    const run = this.runs.get(pod.metadata.uid);
    if (!run || run.finalized) return;
    const killAt = Date.now() + graceSeconds * 1000;
    if (run.terminating && run.killAt! <= killAt) return;
    const first = !run.terminating;
    run.terminating = true;
    run.killAt = killAt;
    this.wakeRun(run);
    const live = this.liveContainers(run);
    if (live.length === 0) {
      setImmediate(() => this.finalize(run));
      return;
    }
    if (first) {
      for (const c of live) {
        c.prober?.stop();
        this.event(run, 'Normal', 'Killing', `Stopping container ${c.name}`);
        c.process!.signal('SIGTERM');
      }
    }
    clearTimeout(run.killTimer);
    run.killTimer = setTimeout(() => {
      for (const c of this.liveContainers(run)) c.process!.signal('SIGKILL');
    }, graceSeconds * 1000);
  }

  private wakeRun(run: PodRun): void {
    for (const waker of [...run.wakers]) waker();
  }

  private finalize(run: PodRun): void {
    if (run.finalized) return;
    this.publish(run);
    run.finalized = true;
    clearTimeout(run.killTimer);
    if (this.current(run)) this.store.remove('pods', run.ns, run.name);
    this.forget(run);
  }

  private forget(run: PodRun): void {
    this.runs.delete(run.uid);
    this.ips.release(run.ip);
    this.events.forget(run.uid);
    this.freed();
  }

  /** The object is already gone (deleted with grace 0, or its node removed): SIGKILL whatever still runs. */
  kill(uid: string): void {
    const run = this.runs.get(uid);
    if (!run || run.finalized) return;
    run.terminating = true;
    run.finalized = true;
    clearTimeout(run.killTimer);
    this.wakeRun(run);
    for (const c of [...run.init, ...run.main]) {
      c.prober?.stop();
      c.process?.signal('SIGKILL');
    }
    this.forget(run);
  }

  /** A container of a running pod, for the log endpoint and fault injection. */
  container(uid: string, name: string): ContainerRun | undefined {
    const run = this.runs.get(uid);
    return run ? [...run.init, ...run.main].find((c) => c.name === name) : undefined;
  }

  /** Ends a running container as a fault would: its process gets SIGKILL and the status shows `reason`/`exitCode`. */
  fault(uid: string, name: string, fault: { reason?: string; exitCode: number }): void {
    const run = this.runs.get(uid);
    const c = run ? [...run.init, ...run.main].find((x) => x.name === name) : undefined;
    if (!run || !c?.running) throw new Error(`container ${name} of pod ${uid} is not running`);
    c.fault = fault;
    if (c.process) c.process.signal('SIGKILL');
    else this.exited(run, c, { exitCode: fault.exitCode });
  }

  phaseOf(uid: string): string | undefined {
    const run = this.runs.get(uid);
    return run ? podPhase(run.init, run.main) : undefined;
  }

  close(): void {
    this.closed = true;
    for (const run of [...this.runs.values()]) this.kill(run.uid);
  }
}

/**
 * The command with the interpreter and script (`node --import tsx /repo/src/engine/main.ts`) replaced by plain Node.js
 * running the script's local build, when `programs` has one; its arguments as they were.
 */
export function withPrograms(argv: string[], programs: Readonly<Record<string, string>>): string[] {
  const at = argv.findIndex((arg) => Object.hasOwn(programs, arg));
  return at < 0 ? argv : [process.execPath, '--enable-source-maps', programs[argv[at]!]!, ...argv.slice(at + 1)];
}
