/**
 * Process configuration, read once from the environment. Every variable has a
 * default, so `npm start` works with none set; a malformed value stops start-up
 * with a message naming the variable and the rule it breaks.
 */
import path from 'node:path';

export interface Config {
  /** TCP port of the HTTP server. @default 8080 */
  port: number;
  /** Interface to listen on. @default '0.0.0.0' */
  host: string;
  /** External PostgreSQL; when unset, an embedded PostgreSQL runs with its data under `dataDir/pg`. */
  databaseUrl: string | undefined;
  /** Where the embedded database (and later the model cache) live. @default '.data' */
  dataDir: string;
  /** On the first start, the admin's API key is this value instead of a generated one. */
  adminApiKey: string | undefined;
}

export class ConfigError extends Error {
  constructor(variable: string, rule: string, value: string) {
    super(`${variable} ${rule} (got ${JSON.stringify(value)})`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function readPort(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value > 65535) throw new ConfigError(name, 'must be an integer from 0 to 65535', raw);
  return value;
}

function readDatabaseUrl(env: Env): string | undefined {
  const raw = env.DATABASE_URL;
  if (raw === undefined || raw === '') return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('DATABASE_URL', 'must be a URL such as postgres://user:password@host:5432/db', '<unparseable>');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ConfigError('DATABASE_URL', 'must use the postgres:// or postgresql:// scheme', url.protocol);
  }
  return raw;
}

export const API_KEY_PATTERN = /^[A-Za-z0-9_\-.]{20,200}$/;

function readAdminKey(env: Env): string | undefined {
  const raw = env.ADMIN_API_KEY;
  if (raw === undefined || raw === '') return undefined;
  if (!API_KEY_PATTERN.test(raw)) {
    throw new ConfigError('ADMIN_API_KEY', 'must be 20 to 200 characters of letters, digits, "_", "-" or "."', `${raw.slice(0, 4)}…`);
  }
  return raw;
}

export function loadConfig(env: Env = process.env): Config {
  const host = env.HOST === undefined || env.HOST === '' ? '0.0.0.0' : env.HOST;
  if (/\s/.test(host)) throw new ConfigError('HOST', 'must be a host name or IP address', host);
  return {
    port: readPort(env, 'PORT', 8080),
    host,
    databaseUrl: readDatabaseUrl(env),
    dataDir: path.resolve(env.DATA_DIR === undefined || env.DATA_DIR === '' ? '.data' : env.DATA_DIR),
    adminApiKey: readAdminKey(env),
  };
}
