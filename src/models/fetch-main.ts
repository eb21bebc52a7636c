/**
 * The model fetcher a replica's pod runs before its engine (its init
 * container, on the Kubernetes runtime): downloads one resolved model file
 * (a hub file, or a W&B registry artifact's file) into the model cache
 * volume, verified against its digest, and links it where the engine's
 * --model points. A second replica on the same node finds the file in the
 * cache and downloads nothing; two at once share one download (the cache's
 * lock). The gateway resolved the repository or artifact before creating
 * the pod, so this program never chooses a file or a revision.
 *
 *   node --import tsx src/models/fetch-main.ts --repo ORG/NAME --commit SHA \
 *     --file PATH --size BYTES [--sha256 HEX] --cache-dir /models --link /models/links/… [--lease NAME] [--max-bytes N]
 *   node --import tsx src/models/fetch-main.ts --artifact ORG/REGISTRY/NAME:vN \
 *     --file PATH --size BYTES --cache-dir /models --link /models/links/… [--lease NAME] [--max-bytes N]
 *
 * The cache volume is bounded (--max-bytes, from KUBERNETES_MODEL_CACHE_MAX_BYTES) and shared by the pods of
 * a node or a cluster: the file is leased to this pod (`--lease`, the pod's name; cache-bound.ts), and room
 * for a download is made by evicting the least recently used files no pod uses.
 *
 * HF_ENDPOINT and HF_TOKEN, WANDB_BASE_URL and WANDB_API_KEY come from the
 * environment. A failure ends with an `ENGINE_ERROR {"code","message"}` line
 * and exit code 1: the pod's termination message, which the runtime turns
 * into the endpoint's error code, the same codes as a local download's.
 */
import { mkdir, rename, rm, symlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { parseArtifactName } from '../domain/artifact-name.js';
import { CacheBound, LEASE_NAME } from './cache-bound.js';
import { ModelSourceError } from './errors.js';
import { leavesRepository } from './hf-hub.js';
import { ModelCache, type CachedModelFile, type DownloadProgress } from './model-cache.js';
import { resolveArtifact, wandbFileDownload } from './wandb/registry-client.js';

const REPORT_EVERY_MS = 5000;
const SETTINGS_ERROR = 'WORKLOAD_INIT_SETTINGS_ERROR';
/** The setting the bound comes from, for messages. */
const BOUND_SETTING = 'KUBERNETES_MODEL_CACHE_MAX_BYTES';

function fail(code: string, message: string): never {
  process.stderr.write(`ENGINE_ERROR ${JSON.stringify({ code, message })}\n`);
  process.exit(1);
}

/** Replaces `link` with a symbolic link to `target`, atomically (a reader sees the old link or the new one). */
async function linkAtomically(target: string, link: string): Promise<void> {
  await mkdir(path.dirname(link), { recursive: true });
  const temporary = `${link}.${process.pid}.tmp`;
  await rm(temporary, { force: true });
  await symlink(target, temporary);
  await rename(temporary, link);
}

/** Where the file comes from: how to find it in the cache without a download, and how to download it. */
interface Source {
  label: string;
  /** What is downloaded, the same for every pod that downloads it: its reservation is counted once. */
  key: string;
  find: () => Promise<CachedModelFile | undefined>;
  download: (onProgress: (progress: DownloadProgress) => void) => Promise<CachedModelFile>;
}

interface Wanted {
  file: string;
  size: number;
  sha256: string | undefined;
}

function hubSource(cache: ModelCache, repo: string, commit: string, { file, size, sha256 }: Wanted): Source {
  const resolved = { repo, revision: commit, commitSha: commit, file: { path: file, size, ...(sha256 ? { sha256 } : {}) } };
  return {
    label: `${file} from ${repo} at ${commit}`,
    key: sha256 ? `sha256:${sha256.toLowerCase()}` : `hub:${repo}@${commit}:${file}`,
    find: async () => (sha256 ? cache.lookup(sha256.toLowerCase(), size) : undefined),
    download: (onProgress) =>
      cache.ensureHubFile(resolved, {
        ...(process.env.HF_ENDPOINT ? { endpoint: process.env.HF_ENDPOINT } : {}),
        ...(process.env.HF_TOKEN ? { token: process.env.HF_TOKEN } : {}),
        onProgress,
      }),
  };
}

/** The artifact version is read again here (the same client as the gateway's): its manifest gives the file's md5 and URL. */
async function wandbSource(cache: ModelCache, artifact: string, { file, size, sha256 }: Wanted): Promise<Source> {
  const apiKey = process.env.WANDB_API_KEY || undefined;
  const found = await resolveArtifact(artifact, {
    ...(process.env.WANDB_BASE_URL ? { baseUrl: process.env.WANDB_BASE_URL } : {}),
    ...(apiKey ? { apiKey } : {}),
  });
  const entry = found.files.find((f) => f.path === file);
  if (!entry) throw new ModelSourceError('WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR', `${artifact} has no file ${file} any more.`);
  if (entry.size !== size) {
    throw new ModelSourceError(
      'WORKLOAD_INIT_DOWNLOAD_ERROR',
      `${file} of ${artifact} is ${entry.size} bytes, not the ${size} bytes the gateway resolved: the artifact version changed.`,
    );
  }
  return {
    label: `${file} from ${artifact}`,
    key: sha256 ? `sha256:${sha256.toLowerCase()}` : `md5:${entry.md5}`,
    find: async () => (sha256 ? await cache.lookup(sha256.toLowerCase(), size) : undefined) ?? (await cache.lookupMd5(entry.md5, size)),
    download: (onProgress) => cache.ensureUrlFile({ ...wandbFileDownload(found, entry, apiKey ? { apiKey } : {}), onProgress }),
  };
}

function readArgs() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        repo: { type: 'string' },
        commit: { type: 'string' },
        artifact: { type: 'string' },
        file: { type: 'string' },
        size: { type: 'string' },
        sha256: { type: 'string' },
        'cache-dir': { type: 'string' },
        link: { type: 'string' },
        lease: { type: 'string' },
        'max-bytes': { type: 'string' },
      },
      strict: true,
    }));
  } catch (error) {
    fail(SETTINGS_ERROR, `the model fetcher was started wrongly: ${(error as Error).message}`);
  }
  const { repo, commit, artifact, file, sha256, link } = values;
  const size = Number(values.size);
  const dir = values['cache-dir'];
  const fromHub = repo !== undefined && commit !== undefined && artifact === undefined;
  const fromWandb = artifact !== undefined && repo === undefined && commit === undefined;
  if ((!fromHub && !fromWandb) || !file || !dir || !link || !Number.isSafeInteger(size) || size < 0) {
    fail(SETTINGS_ERROR, 'the model fetcher needs --repo and --commit (or --artifact), --file, --size, --cache-dir and --link');
  }
  if (leavesRepository(file)) fail(SETTINGS_ERROR, 'the model file must be a path within its repository');
  if (artifact !== undefined) {
    const parsed = parseArtifactName(artifact);
    if (parsed.type === 'error') fail(SETTINGS_ERROR, parsed.error);
    if (!/^v\d+$/.test(parsed.value.version)) fail(SETTINGS_ERROR, `--artifact must name a pinned version (v<N>): ${artifact}`);
  }
  const maxBytes = values['max-bytes'] === undefined ? undefined : Number(values['max-bytes']);
  if (maxBytes !== undefined && (!Number.isSafeInteger(maxBytes) || maxBytes <= 0)) {
    fail(SETTINGS_ERROR, `--max-bytes (${BOUND_SETTING}) must be a positive number of bytes: ${values['max-bytes']}`);
  }
  const lease = values.lease ?? hostname();
  if (!LEASE_NAME.test(lease)) fail(SETTINGS_ERROR, `--lease must match ${LEASE_NAME.source}: ${lease}`);
  return { repo, commit, artifact, wanted: { file, size, sha256 }, dir, link, lease, maxBytes };
}

async function main(): Promise<void> {
  const args = readArgs();
  const cache = new ModelCache({ dir: args.dir });
  const bound = new CacheBound({ dir: args.dir, setting: BOUND_SETTING, ...(args.maxBytes ? { maxBytes: args.maxBytes } : {}) });
  const source = args.artifact
    ? await wandbSource(cache, args.artifact, args.wanted)
    : hubSource(cache, args.repo!, args.commit!, args.wanted);
  process.stdout.write(`fetching ${source.label} (${args.wanted.size} bytes)\n`);

  // Found and leased in one step, so that no other pod's fetcher evicts it in between.
  let fetched = await bound.claim(args.lease, source.find);
  if (!fetched) {
    const reservation = await bound.reserve(args.wanted.size, source.label, source.key);
    try {
      let lastReport = 0;
      const file = await source.download(({ bytesDone, bytesTotal }) => {
        const now = Date.now();
        if (now - lastReport < REPORT_EVERY_MS && bytesDone < bytesTotal) return;
        lastReport = now;
        process.stdout.write(`downloaded ${bytesDone} of ${bytesTotal} bytes\n`);
      });
      fetched = await bound.claim(args.lease, () => cache.lookup(file.sha256, file.size));
      if (!fetched) throw new Error(`${file.path} left the cache as soon as it was downloaded`);
      fetched = { ...fetched, cached: file.cached };
    } finally {
      await reservation.release();
    }
  }
  await linkAtomically(fetched.path, args.link);
  process.stdout.write(`${fetched.cached ? 'found in the cache' : 'downloaded'}: ${fetched.path}\n`);
}

main().catch((error: unknown) => {
  if (error instanceof ModelSourceError) fail(error.code, error.message);
  fail('WORKLOAD_INIT_DOWNLOAD_ERROR', `the model could not be fetched: ${error instanceof Error ? error.message : String(error)}`);
});
