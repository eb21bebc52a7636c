/**
 * The model fetcher a replica's pod runs before its engine (its init
 * container, on the Kubernetes runtime): downloads one resolved hub file into
 * the model cache volume, verified against its digest, and links it where the
 * engine's --model points. A second replica on the same node finds the file
 * in the cache and downloads nothing; two at once share one download (the
 * cache's lock). The gateway resolved the repository before creating the pod,
 * so this program never chooses a file or a revision.
 *
 *   node --import tsx src/models/fetch-main.ts --repo ORG/NAME --commit SHA --file PATH --size BYTES \
 *     [--sha256 HEX] --cache-dir /models --link /models/links/SHA/PATH
 *
 * HF_ENDPOINT and HF_TOKEN come from the environment. A failure ends with an
 * `ENGINE_ERROR {"code","message"}` line and exit code 1: the pod's
 * termination message, which the runtime turns into the endpoint's error code.
 */
import { mkdir, rename, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ModelSourceError } from './errors.js';
import { ModelCache } from './model-cache.js';

const REPORT_EVERY_MS = 5000;

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

async function main(): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        repo: { type: 'string' },
        commit: { type: 'string' },
        file: { type: 'string' },
        size: { type: 'string' },
        sha256: { type: 'string' },
        'cache-dir': { type: 'string' },
        link: { type: 'string' },
      },
      strict: true,
    }));
  } catch (error) {
    fail('WORKLOAD_INIT_SETTINGS_ERROR', `the model fetcher was started wrongly: ${(error as Error).message}`);
  }
  const { repo, commit, file, sha256, link } = values;
  const size = Number(values.size);
  const dir = values['cache-dir'];
  if (!repo || !commit || !file || !dir || !link || !Number.isSafeInteger(size) || size < 0) {
    fail('WORKLOAD_INIT_SETTINGS_ERROR', 'the model fetcher needs --repo, --commit, --file, --size, --cache-dir and --link');
  }
  if (file.split('/').includes('..') || path.isAbsolute(file))
    fail('WORKLOAD_INIT_SETTINGS_ERROR', 'the model file must be a path within its repository');
  const cache = new ModelCache({ dir });
  let lastReport = 0;
  process.stdout.write(`fetching ${file} from ${repo} at ${commit} (${size} bytes)\n`);
  const fetched = await cache.ensureHubFile(
    { repo, revision: commit, commitSha: commit, file: { path: file, size, ...(sha256 ? { sha256 } : {}) } },
    {
      ...(process.env.HF_ENDPOINT ? { endpoint: process.env.HF_ENDPOINT } : {}),
      ...(process.env.HF_TOKEN ? { token: process.env.HF_TOKEN } : {}),
      onProgress: ({ bytesDone, bytesTotal }) => {
        const now = Date.now();
        if (now - lastReport < REPORT_EVERY_MS && bytesDone < bytesTotal) return;
        lastReport = now;
        process.stdout.write(`downloaded ${bytesDone} of ${bytesTotal} bytes\n`);
      },
    },
  );
  await linkAtomically(fetched.path, link);
  process.stdout.write(`${fetched.cached ? 'found in the cache' : 'downloaded'}: ${fetched.path}\n`);
}

main().catch((error: unknown) => {
  if (error instanceof ModelSourceError) fail(error.code, error.message);
  fail('WORKLOAD_INIT_DOWNLOAD_ERROR', `the model could not be fetched: ${error instanceof Error ? error.message : String(error)}`);
});
