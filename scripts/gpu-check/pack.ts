/**
 * Packs what the GPU check needs on a lent GPU machine (no Node.js, no network, at most 64 MiB
 * carried per call, the tracked tree included) into call folders `.gpu-check/c1`, `c2`, …, each
 * carried by one device call (see README.md beside this file):
 *
 *   npx tsx scripts/gpu-check/pack.ts [--out DIR] [--only app,node,cuda[,vulkan]] [--chunk-mib N] [--xz-level N]
 *     [--no-ptx-patch] [--stage-only [--with-cuda]]
 *
 * Archives: `app.tar.xz` (the engine and the runner bundled by esbuild, node-llama-cpp with its
 * dependencies, the CPU binaries @node-llama-cpp/linux-x64), `node.xz` (this Node.js binary) and
 * `cuda.tar.xz` (@node-llama-cpp/linux-x64-cuda: CUDA 13 binaries, their compute_90 PTX made
 * JIT-able by a CUDA 13.0 driver: fatbin.ts); `vulkan.tar.xz` only when asked (a fall-back). Each is cut into parts; parts
 * go to calls in order, no call over the budget (64 MiB less what the tree carries, less a margin).
 * `manifest.txt` (JSON; .txt so that `prettier --check .` leaves it alone), in every call
 * folder, lists the parts and the archives' sha256; scripts/gpu-check/device.sh puts them back
 * together there.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { appendFile, copyFile, cp, mkdir, open, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { patchPtxVersion, verifyPatch, zstdCodec, type PatchReport } from './fatbin.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MiB = 2 ** 20;
/** What one device call may carry, the working tree included. */
const CALL_LIMIT = 64 * MiB;
/** Left free in each call: the tree grows between packing and the call (others' files). */
const MARGIN = 4 * MiB;

export type Archive = 'app' | 'node' | 'cuda' | 'vulkan';
const ARCHIVE_FILES: Record<Archive, string> = { app: 'app.tar.xz', node: 'node.xz', cuda: 'cuda.tar.xz', vulkan: 'vulkan.tar.xz' };

export type Manifest = {
  createdAt: string;
  nodeVersion: string;
  treeBytes: number;
  callBudgetBytes: number;
  /** What fatbin.ts changed in libggml-cuda.so (compute_90 PTX said 9.1, for a CUDA 13.0 driver to JIT it). */
  ptxPatch?: PatchReport;
  archives: { name: Archive; file: string; bytes: number; sha256: string; unpackedBytes: number; parts: string[] }[];
  calls: { folder: string; parts: string[]; bytes: number }[];
};

function sha256(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += (await stat(path.join(entry.parentPath, entry.name))).size;
  }
  return total;
}

/** Bytes of what a device call sends besides the carried paths: tracked and untracked-not-ignored files. */
export function treeBytes(repo = REPO): number {
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: repo, maxBuffer: 64 * MiB })
    .toString()
    .split('\0')
    .filter(Boolean);
  let total = 0;
  for (const f of new Set(files)) {
    const full = path.join(repo, f);
    if (existsSync(full)) total += readFileSync(full).length;
  }
  return total;
}

/** The directory of `name` as Node.js resolves it from `fromDir` (node_modules folders upwards). */
function packageDir(name: string, fromDir: string): string | undefined {
  for (let dir = fromDir; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (path.dirname(dir) === dir) return undefined;
  }
}

/**
 * node-llama-cpp and every package it depends on (dependencies, recursively; not the optional
 * @node-llama-cpp/* binaries), as directories under the repository's node_modules.
 */
function dependencyClosure(root: string): string[] {
  const seen = new Set<string>();
  const visit = (dir: string) => {
    if (seen.has(dir)) return;
    seen.add(dir);
    const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    for (const dep of Object.keys(pkg.dependencies ?? {})) {
      const found = packageDir(dep, dir);
      if (!found) throw new Error(`${dep} (needed by ${path.relative(REPO, dir)}) is not installed`);
      visit(found);
    }
  };
  visit(root);
  return [...seen];
}

/** Copies a package directory, leaving out what only building llama.cpp from source needs. */
async function copyPackage(from: string, to: string): Promise<void> {
  const skip = new Set([path.join(from, 'llama', 'gitRelease.bundle'), path.join(from, 'llama', 'xpack'), path.join(from, '.bin')]);
  await cp(from, to, { recursive: true, dereference: true, filter: (source) => !skip.has(source) });
}

/** Stages the app (bundles, node_modules) under `stage`; with `withCuda`, also the CUDA package. */
export async function stage(stageDir: string, options: { withCuda?: boolean } = {}): Promise<void> {
  await rm(stageDir, { recursive: true, force: true });
  await mkdir(stageDir, { recursive: true });
  const common = {
    bundle: true,
    platform: 'node' as const,
    format: 'esm' as const,
    target: 'node20',
    external: ['node-llama-cpp', '@node-llama-cpp/*'],
    // CommonJS dependencies bundled into ESM may call require() for Node's own modules.
    banner: { js: "import { createRequire as __gpuCheckRequire } from 'node:module'; const require = __gpuCheckRequire(import.meta.url);" },
    logLevel: 'warning' as const,
    legalComments: 'none' as const,
  };
  await build({ ...common, entryPoints: [path.join(REPO, 'src/engine/main.ts')], outfile: path.join(stageDir, 'engine.mjs') });
  await build({ ...common, entryPoints: [path.join(REPO, 'scripts/gpu-check/run.ts')], outfile: path.join(stageDir, 'run.mjs') });
  await writeFile(
    path.join(stageDir, 'package.json'),
    `${JSON.stringify({ name: 'gpu-check', private: true, type: 'module' }, null, 2)}\n`,
  );

  const modules = path.join(REPO, 'node_modules');
  const llamaDir = path.join(modules, 'node-llama-cpp');
  const dirs = [...dependencyClosure(llamaDir), path.join(modules, '@node-llama-cpp', 'linux-x64')];
  if (options.withCuda) dirs.push(path.join(modules, '@node-llama-cpp', 'linux-x64-cuda'));
  for (const dir of dirs) await copyPackage(dir, path.join(stageDir, path.relative(REPO, dir)));
}

function xz(level: number, input: string, output: string): void {
  execFileSync('sh', ['-c', `xz -${level} -T0 -c -- "$1" > "$2"`, 'xz', input, output], { stdio: 'inherit' });
}

/** `tar` of `entries` (relative to `cwd`, links followed) piped through xz. */
function tarXz(level: number, cwd: string, entries: string[], output: string): void {
  const script = `dir=$1; out=$2; shift 2; tar -C "$dir" -chf - "$@" | xz -${level} -T0 -c > "$out"`;
  execFileSync('sh', ['-c', script, 'tar', cwd, output, ...entries], { stdio: 'inherit' });
}

/** Cuts `file` into parts of at most `chunk` bytes named FILE.partNN; answers their paths. */
async function split(file: string, chunk: number): Promise<string[]> {
  const size = (await stat(file)).size;
  const handle = await open(file, 'r');
  const parts: string[] = [];
  try {
    for (let offset = 0, n = 0; offset < size || n === 0; offset += chunk, n++) {
      const length = Math.min(chunk, size - offset);
      const buffer = Buffer.alloc(length);
      await handle.read(buffer, 0, length, offset);
      const part = `${file}.part${String(n).padStart(2, '0')}`;
      await writeFile(part, buffer);
      parts.push(part);
    }
  } finally {
    await handle.close();
  }
  return parts;
}

export type PackOptions = { out: string; only: Archive[]; chunkBytes?: number; xzLevel: number; treeBytes?: number; ptxPatch?: boolean };

/** The CUDA package, its libggml-cuda.so changed for the CUDA 13.0 driver of the lent Hopper GPUs (fatbin.ts). */
async function stageCuda(work: string, patch: boolean): Promise<{ dir: string; report?: PatchReport }> {
  const from = path.join(REPO, 'node_modules', '@node-llama-cpp', 'linux-x64-cuda');
  const dir = path.join(work, 'cuda', 'linux-x64-cuda');
  await cp(from, dir, { recursive: true, dereference: true });
  if (!patch) return { dir };
  const lib = path.join(dir, 'bins', 'linux-x64-cuda', 'libggml-cuda.so');
  const original = await readFile(lib);
  const codec = zstdCodec(work);
  const { patched, report } = patchPtxVersion(original, codec);
  const problems = verifyPatch(original, patched, codec);
  if (problems.length > 0) throw new Error(`the patched libggml-cuda.so is wrong: ${problems.slice(0, 5).join('; ')}`);
  await writeFile(lib, patched);
  console.log(
    `libggml-cuda.so: compute_90 PTX of ${report.patched}/${report.fatbins} fatbins now says 9.0 (${report.droppedPtx} other PTX entries left out)`,
  );
  return { dir, report };
}

export async function pack(options: PackOptions): Promise<Manifest> {
  const out = path.resolve(options.out);
  const work = path.join(out, 'work');
  await rm(out, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  const tree = options.treeBytes ?? treeBytes();
  const budget = CALL_LIMIT - tree - MARGIN;
  if (budget < 1 * MiB) throw new Error(`the working tree (${(tree / MiB).toFixed(1)} MiB) leaves too little of a call's 64 MiB`);
  const chunk = Math.min(options.chunkBytes ?? budget, budget);
  const manifest: Manifest = {
    createdAt: new Date().toISOString(),
    nodeVersion: process.version,
    treeBytes: tree,
    callBudgetBytes: budget,
    archives: [],
    calls: [],
  };

  // Smallest first: the app, then Node.js, then the GPU binaries (the final call carries the tail).
  for (const name of (['app', 'node', 'cuda', 'vulkan'] as const).filter((a) => options.only.includes(a))) {
    const file = path.join(work, ARCHIVE_FILES[name]);
    let unpacked: number;
    console.log(`packing ${name}…`);
    if (name === 'app') {
      const stageDir = path.join(work, 'app');
      await stage(stageDir);
      unpacked = await dirBytes(stageDir);
      tarXz(options.xzLevel, stageDir, ['.'], file);
      await rm(stageDir, { recursive: true, force: true });
    } else if (name === 'node') {
      unpacked = (await stat(process.execPath)).size;
      xz(options.xzLevel, process.execPath, file);
    } else if (name === 'cuda') {
      const { dir, report } = await stageCuda(work, options.ptxPatch !== false);
      if (report) manifest.ptxPatch = report;
      unpacked = await dirBytes(dir);
      // Unpacks into the app's node_modules/@node-llama-cpp/.
      tarXz(options.xzLevel, path.dirname(dir), ['linux-x64-cuda'], file);
      await rm(path.dirname(dir), { recursive: true, force: true });
    } else {
      const vulkanDir = path.join(REPO, 'node_modules', '@node-llama-cpp', 'linux-x64-vulkan');
      unpacked = await dirBytes(vulkanDir);
      tarXz(options.xzLevel, path.dirname(vulkanDir), ['linux-x64-vulkan'], file);
    }
    const parts = await split(file, chunk);
    manifest.archives.push({
      name,
      file: ARCHIVE_FILES[name],
      bytes: (await stat(file)).size,
      sha256: sha256(file),
      unpackedBytes: unpacked,
      parts: parts.map((p) => path.basename(p)),
    });
    await rm(file);
  }

  // Parts to calls, in order, first fit.
  let current: Manifest['calls'][number] | undefined;
  for (const archive of manifest.archives) {
    for (const part of archive.parts) {
      const bytes = (await stat(path.join(work, part))).size;
      if (!current || current.bytes + bytes > budget) {
        current = { folder: `c${manifest.calls.length + 1}`, parts: [], bytes: 0 };
        manifest.calls.push(current);
      }
      current.parts.push(part);
      current.bytes += bytes;
    }
  }
  for (const call of manifest.calls) {
    const dir = path.join(out, call.folder);
    await mkdir(dir, { recursive: true });
    for (const part of call.parts) await copyFile(path.join(work, part), path.join(dir, part));
  }
  for (const call of manifest.calls) await writeFile(path.join(out, call.folder, 'manifest.txt'), `${JSON.stringify(manifest, null, 2)}\n`);
  await writeFile(path.join(out, 'manifest.txt'), `${JSON.stringify(manifest, null, 2)}\n`);
  await rm(work, { recursive: true, force: true });
  return manifest;
}

/** The calls to make, as a person reads them. */
export function plan(manifest: Manifest): string {
  const mib = (n: number) => `${(n / MiB).toFixed(1)} MiB`;
  const lines = [
    `tree ${mib(manifest.treeBytes)} + at most ${mib(manifest.callBudgetBytes)} carried per call`,
    ...manifest.archives.map((a) => `  ${a.file}: ${mib(a.bytes)} (${mib(a.unpackedBytes)} unpacked) in ${a.parts.length} part(s)`),
  ];
  manifest.calls.forEach((call, i) => {
    const last = i === manifest.calls.length - 1;
    lines.push(
      `call ${i + 1}/${manifest.calls.length}: carry [".gpu-check/${call.folder}"] (${mib(call.bytes)}), command: ` +
        (last ? `bash scripts/gpu-check/device.sh run` : `bash scripts/gpu-check/device.sh receive ${call.folder}`),
    );
  });
  return lines.join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      out: { type: 'string' },
      only: { type: 'string' },
      'chunk-mib': { type: 'string' },
      'xz-level': { type: 'string' },
      'stage-only': { type: 'boolean' },
      'with-cuda': { type: 'boolean' },
      'no-ptx-patch': { type: 'boolean' },
    },
  });
  const out = path.resolve(values.out ?? path.join(REPO, '.gpu-check'));
  if (values['stage-only']) {
    await stage(out, { withCuda: values['with-cuda'] === true });
    console.log(`staged in ${out} (${((await dirBytes(out)) / MiB).toFixed(1)} MiB)`);
    return;
  }
  // The call folders must be ignored (a carried path is an ignored one), in this checkout only.
  if (out.startsWith(`${REPO}${path.sep}`)) {
    const exclude = path.join(REPO, '.git', 'info', 'exclude');
    const entry = `/${path.relative(REPO, out)}/`;
    const current = existsSync(exclude) ? await readFile(exclude, 'utf8') : '';
    if (!current.split('\n').includes(entry))
      await appendFile(exclude, `${current.endsWith('\n') || current === '' ? '' : '\n'}${entry}\n`);
  }
  const manifest = await pack({
    out,
    only: (values.only ?? 'app,node,cuda').split(',').map((s) => s.trim()) as Archive[],
    ...(values['chunk-mib'] ? { chunkBytes: Number(values['chunk-mib']) * MiB } : {}),
    xzLevel: Number(values['xz-level'] ?? 9),
    ptxPatch: values['no-ptx-patch'] !== true,
  });
  console.log(plan(manifest));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
