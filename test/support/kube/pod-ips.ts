/**
 * Pod IPs for the stand-in's kubelet: addresses of 127/8 from a block drawn per stand-in (4,096 addresses, at a
 * random place), since test files run in parallel, each with its own stand-in, and two kubelets handing out the same
 * IP and port would cross their pods. A released address is handed out again, lowest first.
 */
import { randomInt } from 'node:crypto';

export class PodIps {
  private readonly free: number[] = [];
  private next = randomInt(1, 4096) * 4096 + 2;

  allocate(): string {
    const n = this.free.length > 0 ? this.free.shift()! : this.next++;
    return `127.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
  }

  release(ip: string): void {
    const [, a, b, c] = ip.split('.').map(Number);
    const n = (a! << 16) + (b! << 8) + c!;
    let i = this.free.findIndex((x) => x > n);
    if (i < 0) i = this.free.length;
    this.free.splice(i, 0, n);
  }
}
