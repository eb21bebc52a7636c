/**
 * Readiness probes of the stand-in's kubelet: `httpGet` against the pod IP (port by number or by the name of one of
 * the container's ports, path, httpHeaders, timeoutSeconds), `tcpSocket` and `exec` likewise, every `periodMs`, with
 * the probe's successThreshold/failureThreshold. A 2xx or 3xx answer is a success, as for the real kubelet.
 */
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { connect } from 'node:net';

export class ReadinessProber {
  private timer: NodeJS.Timeout | undefined;
  private successes = 0;
  private failures = 0;
  private inFlight = false;
  ready = false;

  constructor(
    private readonly probe: any,
    private readonly container: any,
    private readonly ip: string,
    private readonly periodMs: number,
    private readonly changed: (ready: boolean) => void,
    private readonly env: Record<string, string>,
  ) {
    const delay = (probe.initialDelaySeconds ?? 0) * 1000;
    this.timer = setTimeout(() => this.tick(), delay);
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    if (!this.timer) return;
    this.timer = setTimeout(() => this.tick(), this.periodMs);
    if (this.inFlight) return;
    this.inFlight = true;
    void this.check().then((ok) => {
      this.inFlight = false;
      if (!this.timer) return;
      if (ok) {
        this.failures = 0;
        if (++this.successes >= (this.probe.successThreshold ?? 1) && !this.ready) this.set(true);
      } else {
        this.successes = 0;
        if (++this.failures >= (this.probe.failureThreshold ?? 3) && this.ready) this.set(false);
      }
    });
  }

  private set(ready: boolean): void {
    this.ready = ready;
    this.changed(ready);
  }

  private port(value: number | string): number | undefined {
    if (typeof value === 'number') return value;
    if (/^\d+$/.test(value)) return Number(value);
    return (this.container.ports ?? []).find((p: any) => p.name === value)?.containerPort;
  }

  private check(): Promise<boolean> {
    const timeoutMs = (this.probe.timeoutSeconds ?? 1) * 1000;
    const p = this.probe;
    if (p.exec) {
      return new Promise((resolve) => {
        const [command, ...args] = p.exec.command ?? [];
        const child = spawn(command, args, { env: this.env, stdio: 'ignore', timeout: timeoutMs });
        child.once('error', () => resolve(false));
        child.once('close', (code) => resolve(code === 0));
      });
    }
    const handler = p.httpGet ?? p.tcpSocket;
    const port = this.port(handler?.port);
    if (port === undefined) return Promise.resolve(false);
    const host = handler.host || this.ip;
    if (p.tcpSocket) {
      return new Promise((resolve) => {
        const socket = connect({ host, port, timeout: timeoutMs });
        socket.once('connect', () => resolve(true));
        socket.once('error', () => resolve(false));
        socket.once('timeout', () => resolve(false));
        socket.once('close', () => socket.destroy());
        socket.once('connect', () => socket.end());
      });
    }
    return new Promise((resolve) => {
      const headers: Record<string, string> = { 'User-Agent': 'kube-probe/1.31', Accept: '*/*' };
      for (const h of p.httpGet.httpHeaders ?? []) headers[h.name] = h.value;
      const req = request({ host, port, path: p.httpGet.path ?? '/', method: 'GET', headers, timeout: timeoutMs }, (res) => {
        res.resume();
        resolve(res.statusCode! >= 200 && res.statusCode! < 400);
      });
      req.once('timeout', () => req.destroy());
      req.once('error', () => resolve(false));
      req.end();
    });
  }
}
