/**
 * Reading configuration from the environment: each reader names the variable
 * and the rule a malformed value breaks (ConfigError), so that start-up stops
 * with a message a person can act on. config.ts and the runtimes' own
 * settings read their variables through these.
 */

export class ConfigError extends Error {
  constructor(variable: string, rule: string, value: string) {
    super(`${variable} ${rule} (got ${JSON.stringify(value)})`);
    this.name = 'ConfigError';
  }
}

export type Env = Record<string, string | undefined>;

export function readPort(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value > 65535) throw new ConfigError(name, 'must be an integer from 0 to 65535', raw);
  return value;
}

/** An integer from `min` to `max`; `why`, when given, says where the bounds come from (in the error's rule). */
export function readInteger(env: Env, name: string, fallback: number, min: number, max: number, why?: string): number;
export function readInteger(env: Env, name: string, fallback: undefined, min: number, max: number, why?: string): number | undefined;
export function readInteger(
  env: Env,
  name: string,
  fallback: number | undefined,
  min: number,
  max: number,
  why?: string,
): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value < min || value > max) {
    throw new ConfigError(name, `must be an integer from ${min} to ${max}${why ? ` (${why})` : ''}`, raw);
  }
  return value;
}

export const SIZE_UNITS: Record<string, number> = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 };

export function readSize(env: Env, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const match = /^(\d+)\s*([KMGT]?)i?B?$/i.exec(raw.trim());
  if (!match) throw new ConfigError(name, 'must be a size in bytes, optionally with K, M, G or T (e.g. 20G)', raw);
  return Number(match[1]) * SIZE_UNITS[match[2]!.toUpperCase()]!;
}

export function readUrl(env: Env, name: string, fallback: string): string {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  try {
    const url = new URL(raw);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error();
  } catch {
    throw new ConfigError(name, 'must be an http(s) URL', raw);
  }
  return raw.replace(/\/+$/, '');
}

export function readChoice<T extends string>(env: Env, name: string, choices: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = raw.trim().toLowerCase();
  if (!(choices as readonly string[]).includes(value)) throw new ConfigError(name, `must be one of ${choices.join(', ')}`, raw);
  return value as T;
}

export function optional(env: Env, name: string): string | undefined {
  const raw = env[name];
  return raw === undefined || raw.trim() === '' ? undefined : raw;
}

export function readBoolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = raw.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(value)) return true;
  if (['false', '0', 'no', 'off'].includes(value)) return false;
  throw new ConfigError(name, 'must be true or false', raw);
}

/** Comma-separated origins (`https://app.example.com`, scheme, host and port only), or `*`. */
