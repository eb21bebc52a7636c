/**
 * Where the CLI finds its base URL and API key: flags, then
 * DEDICATED_BASE_URL / DEDICATED_API_KEY, then the config file that `login`
 * writes ($DEDICATED_CONFIG, or $XDG_CONFIG_HOME/dedicated/config.json, or
 * ~/.config/dedicated/config.json; readable by its owner only).
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CliError } from './errors.js';

export interface Settings {
  baseUrl: string;
  apiKey: string;
}

export const DEFAULT_BASE_URL = 'http://localhost:8080';

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.DEDICATED_CONFIG) return path.resolve(env.DEDICATED_CONFIG);
  const base = env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'dedicated', 'config.json');
}

async function readConfigFile(file: string): Promise<Partial<Settings>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return {};
  }
  try {
    const parsed = JSON.parse(text) as { baseUrl?: unknown; apiKey?: unknown };
    return {
      ...(typeof parsed.baseUrl === 'string' ? { baseUrl: parsed.baseUrl } : {}),
      ...(typeof parsed.apiKey === 'string' ? { apiKey: parsed.apiKey } : {}),
    };
  } catch {
    throw new CliError(`${file} is not valid JSON: run \`dedicated login\` again`);
  }
}

/** The settings in effect; `needKey` false for commands that can run without a key. */
export async function resolveSettings(
  flags: { baseUrl?: string; apiKey?: string },
  env: NodeJS.ProcessEnv = process.env,
): Promise<Settings> {
  const file = await readConfigFile(configPath(env));
  const baseUrl = flags.baseUrl ?? env.DEDICATED_BASE_URL ?? file.baseUrl ?? DEFAULT_BASE_URL;
  const apiKey = flags.apiKey ?? env.DEDICATED_API_KEY ?? file.apiKey;
  if (!apiKey) throw new CliError('no API key: run `dedicated login --key <key>`, or set DEDICATED_API_KEY');
  return { baseUrl: checkBaseUrl(baseUrl), apiKey };
}

export function checkBaseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(`the base URL '${value}' is not a URL (like ${DEFAULT_BASE_URL})`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(`the base URL must be http or https, not ${url.protocol}`);
  return url.origin;
}

/** Writes the config file atomically, readable by its owner only. */
export async function saveSettings(settings: Settings, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const file = configPath(env);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(settings, null, 2)}\n`, { mode: 0o600 });
  await rename(temporary, file);
  return file;
}
