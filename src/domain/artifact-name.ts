/**
 * Names of W&B registry artifact versions: `<org>/<registry>/<name>:<version>`,
 * where the version is `v<N>` or an alias such as `latest`. The SDK's own
 * spelling of the registry (`wandb-registry-model`) is accepted too.
 */
import type { Result } from './result.js';
export const REGISTRY_PROJECT_PREFIX = 'wandb-registry-';

const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9_.-]*$/;
const MAX_SEGMENT = 128;
const NAME_SHAPE = 'expected "<org>/<registry>/<name>:<version>", e.g. "acme/model/llama-3-8b:v3" or "acme/model/llama-3-8b:latest"';

export interface ArtifactName {
  org: string;
  registry: string;
  name: string;
  /** `v<N>` or an alias such as `latest` */
  version: string;
}

/** The name's parts, or the message saying what is wrong with it. */
export type ParseArtifactNameResult = Result<ArtifactName, string>;

export function parseArtifactName(name: string): ParseArtifactNameResult {
  const fail = (why: string): ParseArtifactNameResult => ({
    type: 'error',
    error: `"${name}" is not a W&B registry artifact name: ${why}; ${NAME_SHAPE}.`,
  });
  if (typeof name !== 'string' || name.length === 0) return { type: 'error', error: `The artifact name is empty: ${NAME_SHAPE}.` };
  const colon = name.indexOf(':');
  if (colon < 0) return fail('the version is missing');
  const [path, version] = [name.slice(0, colon), name.slice(colon + 1)];
  const parts = path.split('/');
  if (parts.length !== 3)
    return fail(`it has ${parts.length} slash-separated part${parts.length === 1 ? '' : 's'} before the version, not 3`);
  const [org, rawRegistry, collection] = parts as [string, string, string];
  const registry = rawRegistry.startsWith(REGISTRY_PROJECT_PREFIX) ? rawRegistry.slice(REGISTRY_PROJECT_PREFIX.length) : rawRegistry;
  for (const [what, value] of [
    ['organization', org],
    ['registry', registry],
    ['name', collection],
    ['version', version],
  ] as const) {
    if (value.length === 0) return fail(`the ${what} is empty`);
    if (value.length > MAX_SEGMENT) return fail(`the ${what} is longer than ${MAX_SEGMENT} characters`);
    if (!SEGMENT.test(value)) return fail(`the ${what} may only contain letters, digits, "-", "_" and "." (and not start with ".")`);
  }
  return { type: 'ok', value: { org, registry, name: collection, version } };
}

/** `<org>/<registry>/<name>:<version>` */
export function formatArtifactName({ org, registry, name, version }: ArtifactName): string {
  return `${org}/${registry}/${name}:${version}`;
}
