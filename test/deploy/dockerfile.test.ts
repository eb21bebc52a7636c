/**
 * The Dockerfile, checked without a Docker engine: what it copies is in the build context, what it runs exists,
 * it installs only the scripts package.json approves, and it runs as the same non-root user the Deployment names.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { kustomize } from './kustomize.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

interface Instruction {
  keyword: string;
  args: string;
}

/** The instructions, with continued lines joined and comments left out. */
function parseDockerfile(text: string): Instruction[] {
  const instructions: Instruction[] = [];
  let current = '';
  for (const line of text.split('\n')) {
    if (/^\s*#/.test(line)) continue;
    current += line.replace(/\\\s*$/, ' ');
    if (/\\\s*$/.test(line)) continue;
    const match = /^\s*([A-Za-z]+)\s+(.*)$/.exec(current);
    if (match) instructions.push({ keyword: match[1]!.toUpperCase(), args: match[2]!.replace(/\s+/g, ' ').trim() });
    current = '';
  }
  return instructions;
}

/** One stage's instructions from its FROM on. */
function stages(instructions: Instruction[]): Instruction[][] {
  const result: Instruction[][] = [];
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') result.push([]);
    result.at(-1)?.push(instruction);
  }
  return result;
}

/** `.dockerignore` patterns, as tests on a path of the context (plain names and `*` globs at any depth). */
function ignored(file: string): (candidate: string) => boolean {
  const patterns = read(file)
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  expect(
    patterns.filter((p) => p.startsWith('!')),
    'no exceptions: this check does not follow them',
  ).toEqual([]);
  const regexes = patterns.map(
    (p) =>
      new RegExp(
        `^${p
          .replace(/^\/|\/$/g, '')
          .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
          .replace(/\*/g, '[^/]*')}(/|$)`,
      ),
  );
  return (candidate) => regexes.some((regex) => regex.test(candidate.replace(/^\.\//, '')));
}

const dockerfile = parseDockerfile(read('Dockerfile'));
const [build, runtime] = stages(dockerfile) as [Instruction[], Instruction[]];
const packageJson = JSON.parse(read('package.json'));

describe('Dockerfile', () => {
  it('builds on node:20-bookworm-slim, in a build stage and a runtime stage', () => {
    expect(stages(dockerfile)).toHaveLength(2);
    expect(build[0]!.args).toBe('node:20-bookworm-slim AS build');
    expect(runtime[0]!.args).toBe('node:20-bookworm-slim');
  });

  it('copies only what exists and what .dockerignore lets into the build context', () => {
    const isIgnored = ignored('.dockerignore');
    const copies = dockerfile.filter((i) => i.keyword === 'COPY' && !i.args.includes('--from='));
    expect(copies.length).toBeGreaterThan(0);
    for (const copy of copies) {
      const sources = copy.args
        .split(' ')
        .filter((word) => !word.startsWith('--'))
        .slice(0, -1);
      for (const source of sources) {
        expect(existsSync(path.join(ROOT, source)), `COPY ${source}`).toBe(true);
        expect(isIgnored(source), `${source} left out by .dockerignore`).toBe(false);
      }
    }
    // The runtime stage's stage-to-stage copies come from what the build stage made.
    for (const copy of runtime.filter((i) => i.keyword === 'COPY' && i.args.includes('--from=build'))) {
      expect(['/app/node_modules ./node_modules', '/app/dist ./dist']).toContain(copy.args.replace('--from=build ', ''));
    }
    // The large or private parts of a checkout stay out.
    for (const kept of ['.git', 'node_modules', '.data', 'dist']) expect(isIgnored(kept), kept).toBe(true);
  });

  it('runs no install script but those package.json allowScripts approves, then the project’s own', () => {
    const runs = build.filter((i) => i.keyword === 'RUN').map((i) => i.args);
    const install = runs.find((r) => r.includes('npm ci'));
    expect(install).toMatch(/npm ci --ignore-scripts/);
    expect(install).toContain(`npm rebuild $(node -p "Object.keys(require('./package.json').allowScripts).join(' ')")`);
    expect(Object.keys(packageJson.allowScripts).length).toBeGreaterThan(0);
    // postinstall (patch-package, needing patches/) and prepare (the console build), which --ignore-scripts skipped.
    expect(packageJson.scripts.postinstall).toBe('patch-package');
    expect(install).toContain('npx patch-package');
    expect(packageJson.scripts.prepare).toBe('npm run build');
    expect(runs.some((r) => r.startsWith('npm run build') && r.includes('npm prune --omit=dev'))).toBe(true);
    // Pruned: what the image runs must be a production dependency.
    expect(packageJson.dependencies.tsx).toBeDefined();
    expect(packageJson.dependencies['node-llama-cpp']).toBeDefined();
  });

  it('runs the gateway by default; the engine entry is in the image too', () => {
    const cmd = runtime.filter((i) => i.keyword === 'CMD').at(-1)!;
    const command = JSON.parse(cmd.args) as string[];
    expect(command).toEqual(['node', '--import', 'tsx', 'src/main.ts']);
    // npm's scripts run the same command: never tsx's own CLI, whose signal relay kills (SIGKILL) a child that is
    // slow to confirm a Ctrl-C or a SIGTERM, so a busy gateway would stop without draining.
    expect(packageJson.scripts.start).toMatch(/ node --import tsx src\/main\.ts$/);
    expect(packageJson.scripts.engine).toBe('node --import tsx src/engine/main.ts');
    for (const [name, script] of Object.entries(packageJson.scripts as Record<string, string>)) {
      expect(script.replaceAll('--import tsx ', ''), `npm run ${name}`).not.toMatch(/(^|[\s;&|])tsx\s/);
    }
    const copied = runtime.filter((i) => i.keyword === 'COPY').map((i) => i.args.split(' ').at(-2));
    for (const entry of ['src/main.ts', 'src/engine/main.ts']) {
      expect(existsSync(path.join(ROOT, entry)), entry).toBe(true);
      expect(copied, entry).toContain(entry.split('/')[0]);
    }
    // The gateway reads its migrations (db/) and serves the console (dist/) at run time.
    expect(copied).toEqual(expect.arrayContaining(['db', '/app/dist']));
    const kubernetes = kustomize(path.join(ROOT, 'deploy/base')).find((o) => o.kind === 'Deployment')!;
    expect(kubernetes.spec.template.spec.containers[0].command).toEqual(command);
    // The Kubernetes runtime runs the engine and the model fetcher from /app (its KUBERNETES_APP_DIR default).
    expect(runtime.filter((i) => i.keyword === 'WORKDIR').at(-1)?.args).toBe('/app');
  });

  it('runs as a non-root user, by number, the one the Deployment names', () => {
    const user = runtime.filter((i) => i.keyword === 'USER').at(-1)?.args;
    expect(user).toMatch(/^\d+(:\d+)?$/);
    const [uid, gid] = user!.split(':').map(Number);
    expect(uid).toBeGreaterThan(0);
    const podSecurity = kustomize(path.join(ROOT, 'deploy/base')).find((o) => o.kind === 'Deployment')!.spec.template.spec.securityContext;
    expect(podSecurity.runAsUser).toBe(uid);
    if (gid !== undefined) expect(podSecurity.runAsGroup).toBe(gid);
    // Nothing after USER switches back.
    expect(runtime.findIndex((i) => i.keyword === 'USER')).toBeGreaterThan(runtime.findLastIndex((i) => i.keyword === 'RUN'));
    // The user owns its data directory and the directory where the gateway writes the engine's bundle (engine-bundle.ts).
    const owned = runtime.filter((i) => i.keyword === 'RUN' && i.args.includes(`chown ${user}`)).map((i) => i.args);
    for (const dir of ['/data', 'node_modules/.cache/dedicated-endpoints'])
      expect(
        owned.some((args) => args.split(/\s+/).includes(dir)),
        dir,
      ).toBe(true);
  });

  it('sets only variables that src/config.ts reads, and exposes the port it listens on', () => {
    const config = read('src/config.ts');
    const env = runtime
      .filter((i) => i.keyword === 'ENV')
      .flatMap((i) => [...i.args.matchAll(/([A-Z_][A-Z0-9_]*)=(\S+)/g)].map((m) => [m[1]!, m[2]!] as const));
    expect(env.length).toBeGreaterThan(0);
    for (const [name] of env) expect(config, name).toMatch(new RegExp(`(['"\`])${name}\\1|\\benv\\.${name}\\b`));
    const port = Object.fromEntries(env).PORT;
    expect(runtime.find((i) => i.keyword === 'EXPOSE')?.args).toBe(port);
  });
});
