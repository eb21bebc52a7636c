import { createHash } from 'node:crypto';

/** Deterministic pseudo-random bytes (xorshift), for file contents in the model-source tests. */
export function bytes(size: number, seed: number): Buffer {
  const out = Buffer.alloc(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

export const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
