/**
 * The sandbox (`npm run sandbox`), run as the README's walk-through runs it
 * (issue 32): started with npm in a process group of its own, as a terminal
 * starts it; the README's walk-through commands run with the CLI against what
 * it printed (the shown output must be what it prints); then a Ctrl-C to the
 * whole group, as a terminal sends it, after which its data directory and
 * every process that used it (PostgreSQL, the engines) are gone.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { removeLeftovers, SANDBOX_DIR_PREFIX } from '../../scripts/sandbox.js';
import { fencedBlocks, pageSection, shellCommands } from '../support/docs.js';

const WALK_THROUGH = 'Try it offline in five commands';

/** Ids, keys, ports, paths and times replaced by their kind, so that a shown output and a real one compare. */
function shape(text: string, dataDir: string): string[] {
  return text
    .replaceAll(dataDir, '<dir>')
    .replace(/\/tmp\/console-sandbox-\w+/g, '<dir>')
    .replace(/http:\/\/127\.0\.0\.1:\d+/g, '<url>')
    .replace(/dek_[\w-]+/g, '<key>')
    .replace(/\b(prj|ep|team|usr|rep)_[a-z0-9]+/g, '<$1>')
    .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, '<time>')
    .replace(/\d\d:\d\d:\d\d/g, '<clock>')
    .split('\n')
    .map((line) => line.trimEnd())
    .filter((line) => line !== '');
}

/** The processes whose command line names `text` (PostgreSQL's data directory, an engine's model file). */
async function processesUsing(text: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of (await readdir('/proc')).filter((name) => /^\d+$/.test(name))) {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    if (cmdline.includes(text) && !/^\d+ \(.*\) [ZX]/s.test(stat)) found.push(`${pid}: ${cmdline.replaceAll('\0', ' ')}`);
  }
  return found;
}

let sandbox: ChildProcess | undefined;
afterAll(() => {
  // Only if the test failed before its Ctrl-C: stop the group it started.
  if (sandbox?.pid && sandbox.exitCode === null && sandbox.signalCode === null) process.kill(-sandbox.pid, 'SIGTERM');
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: Record<string, string>): Promise<Run> {
  const { DEDICATED_API_KEY: _key, DEDICATED_BASE_URL: _url, ...inherited } = process.env;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['bin/dedicated.mjs', ...args],
      {
        env: { ...inherited, NO_COLOR: '1', DEDICATED_CONFIG: path.join(os.tmpdir(), 'no-such-dedicated-config.json'), ...env },
        timeout: 120_000,
      },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('the sandbox (npm run sandbox)', () => {
  test("runs the README's walk-through as shown, and a Ctrl-C stops it and removes its data directory", async () => {
    const walk = pageSection(WALK_THROUGH);
    expect(walk.file).toBe('README.md');
    const blocks = fencedBlocks(walk.text, 'sh');
    const shownOutputs = fencedBlocks(walk.text, '');

    // 1. npm run sandbox, in a process group of its own, as a terminal runs it.
    expect(blocks[0]!.body.trim()).toBe('npm run sandbox');
    const { PORT: _port, DEDICATED_API_KEY: _k, DEDICATED_BASE_URL: _u, ...env } = process.env;
    sandbox = spawn('npm', ['run', 'sandbox'], { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    sandbox.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    sandbox.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => sandbox!.once('exit', (code) => resolve(code)));
    const deadline = Date.now() + 120_000;
    while (!output.includes('Ctrl-C stops everything') && Date.now() < deadline && sandbox.exitCode === null) {
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(output, 'the sandbox did not print its banner').toContain('Ctrl-C stops everything');

    const dataDir = /^\s+data\s+(\S+) \(removed when the sandbox stops\)$/m.exec(output)?.[1];
    expect(dataDir, output).toMatch(new RegExp(`/${SANDBOX_DIR_PREFIX}\\w+$`));
    expect(existsSync(dataDir!)).toBe(true);
    const exported = /^\s+export (.+)$/m.exec(output)![1]!;
    const vars = Object.fromEntries(exported.split(' ').map((pair) => pair.split('=') as [string, string]));
    expect(Object.keys(vars)).toEqual(['DEDICATED_BASE_URL', 'DEDICATED_API_KEY', 'BASE', 'KEY', 'PROJECT']);

    // What the README shows the sandbox print is what it prints (ids, ports and paths aside).
    // The shown outputs, in order: the sandbox's, create's, status's, chat's, and the sandbox's as it stops.
    expect(shownOutputs, 'the walk-through shows five outputs in ``` blocks').toHaveLength(5);
    const real = shape(output, dataDir!);
    for (const line of shape(shownOutputs[0]!.body, dataDir!)) expect(real, 'a line the README shows the sandbox print').toContain(line);

    // 2–4. The walk-through's CLI commands, with the variables the sandbox's export line sets.
    const commands = blocks
      .slice(1)
      .flatMap((b) => shellCommands(b.body, vars))
      .filter((words) => words[0] !== 'export');
    expect(commands.map((w) => w.slice(0, 5).join(' '))).toEqual([
      'npm run dedicated -- endpoints',
      'npm run dedicated -- status',
      'npm run dedicated -- chat',
    ]);
    let endpointId = '';
    for (const [i, words] of commands.entries()) {
      const args = words.slice(4).map((w) => (/^ep_[a-z0-9]+$/.test(w) ? endpointId : w));
      const result = await cli(args, { DEDICATED_BASE_URL: vars.DEDICATED_BASE_URL!, DEDICATED_API_KEY: vars.DEDICATED_API_KEY! });
      expect(result.code, `${words.join(' ')}\n${result.stdout}${result.stderr}`).toBe(0);
      if (args[0] === 'endpoints') endpointId = /ep_[a-z0-9]+/.exec(result.stdout)![0];
      if (args[0] === 'chat') expect(result.stdout.trim().length).toBeGreaterThan(0);
      // What the README shows it print (ids and times aside) is what it prints: every line of create's, the last
      // of status's (the statuses on the way depend on timing), none of chat's (gibberish that differs every time).
      const printed = shape(result.stdout + result.stderr, dataDir!);
      const shown = shape(shownOutputs[i + 1]!.body, dataDir!);
      if (args[0] === 'endpoints') for (const line of shown) expect(printed, `${words.join(' ')}: a line the README shows`).toContain(line);
      if (args[0] === 'status') expect(printed.at(-1)).toBe(shown.at(-1));
    }

    // 5. The console the README sends you to.
    const page = await fetch(`${vars.BASE}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');

    // Ctrl-C: the terminal signals the whole group (npm, tsx, the sandbox, its PostgreSQL).
    process.kill(-sandbox.pid!, 'SIGINT');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 60_000))]);
    expect(sandbox.exitCode !== null || sandbox.signalCode !== null, `the sandbox did not exit:\n${output}`).toBe(true);
    for (const line of shape(shownOutputs[4]!.body, dataDir!)) expect(shape(output, dataDir!), 'a line the README shows').toContain(line);
    expect(existsSync(dataDir!), `${dataDir} is still there:\n${output}`).toBe(false);
    expect(await processesUsing(dataDir!)).toEqual([]);
  }, 300_000);

  test('removes the directories of sandboxes that were killed, and keeps those of running ones', async () => {
    const tmp = await mkdtemp(path.join(os.tmpdir(), 'sandbox-leftovers-'));
    try {
      const dead = spawn(process.execPath, ['-e', '']);
      await new Promise((r) => dead.once('exit', r));
      const make = async (name: string, owner?: number, ageMs = 0) => {
        const dir = path.join(tmp, `${SANDBOX_DIR_PREFIX}${name}`);
        await mkdir(path.join(dir, 'data'), { recursive: true });
        if (owner !== undefined) await writeFile(path.join(dir, 'sandbox.pid'), `${owner}\n`);
        const when = new Date(Date.now() - ageMs);
        await utimes(dir, when, when);
        return dir;
      };
      const killed = await make('killed', dead.pid!);
      const running = await make('running', process.pid);
      const starting = await make('starting');
      const old = await make('old', undefined, 2 * 3_600_000);
      expect((await removeLeftovers(tmp)).sort()).toEqual([killed, old].sort());
      expect([killed, running, starting, old].map((d) => existsSync(d))).toEqual([false, true, true, false]);
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  });
});
