import { createHash, randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/** A random id such as `ep_4kq9z1m0c7xw2b`: a readable kind prefix and 14 base-36 characters (72 bits). */
export function newId(prefix: 'usr' | 'team' | 'prj' | 'ep' | 'key' | 'rep' | 'inv'): string {
  const bytes = randomBytes(14);
  let out = '';
  for (const byte of bytes) out += ALPHABET[byte % 36];
  return `${prefix}_${out}`;
}

/** A new API key; its holder sees it once, and only its hash is stored. */
export function newApiKey(): string {
  return `dek_${randomBytes(32).toString('base64url')}`;
}

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}
