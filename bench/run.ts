/**
 * `npm run bench` runs every benchmark; `npm run bench -- streaming writes`
 * runs the named ones. `--cpu-prof` (or BENCH_CPU_PROF=1) also writes V8 CPU
 * profiles of the gateway under load into bench/results/profiles and
 * summarizes them. `npm run bench -- --report` only rebuilds BENCHMARKS.md.
 *
 * Each benchmark writes bench/results/<name>.json; then the generated part of
 * BENCHMARKS.md is rebuilt from every result file present. The exit status is
 * non-zero only when a run was invalid (errors, dropped streams, lost
 * versions): targets are reported, never asserted.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { cleanupAll, describeMachine, hookSignals, machine, PROFILES_DIR, REPO_ROOT, RESULTS_DIR, type Machine } from './lib/env.js';
import { describeProfile, summarizeProfile, type ProfileSummary } from './lib/profile.js';
import type { Bench, BenchResult } from './lib/result.js';
import { markdownTable } from './lib/stats.js';

/** In the order `npm run bench` runs them; loaded only when selected. */
const BENCHES: Record<string, () => Promise<Bench>> = {
  streaming: async () => (await import('./streaming.js')).streaming,
  'graphql-read': async () => (await import('./graphql-read.js')).graphqlRead,
  writes: async () => (await import('./writes.js')).writes,
  fanout: async () => (await import('./fanout.js')).fanout,
  'cold-start': async () => (await import('./cold-start.js')).coldStart,
  batching: async () => (await import('./batching.js')).batching,
  threads: async () => (await import('./threads.js')).threads,
  overload: async () => (await import('./overload.js')).overload,
  recording: async () => (await import('./recording-overhead.js')).recording,
  'kubernetes-sim': async () => (await import('./kubernetes-sim.js')).kubernetesSim,
};

const BENCHMARKS_MD = path.join(REPO_ROOT, 'BENCHMARKS.md');
const BEGIN = '<!-- BEGIN GENERATED RESULTS (bench/run.ts rewrites this part) -->';
const END = '<!-- END GENERATED RESULTS -->';

async function runOne(name: string, cpuProf: boolean): Promise<BenchResult> {
  const bench = await BENCHES[name]!();
  const startedAt = new Date();
  const t0 = performance.now();
  const m = machine();
  console.log(`\n=== ${bench.name}: ${bench.title}`);
  let result: BenchResult;
  try {
    const outcome = await bench.run({ cpuProf });
    result = { name: bench.name, title: bench.title, startedAt: startedAt.toISOString(), durationS: 0, machine: m, ...outcome };
  } catch (error) {
    console.error(error);
    result = {
      name: bench.name,
      title: bench.title,
      method: '',
      startedAt: startedAt.toISOString(),
      durationS: 0,
      machine: m,
      valid: false,
      problems: [`the run failed: ${error instanceof Error ? error.message : String(error)}`.slice(0, 2000)],
      table: { columns: [], rows: [] },
      targets: [],
      notes: [],
      data: {},
    };
  } finally {
    await cleanupAll();
  }
  result.durationS = Math.round((performance.now() - t0) / 100) / 10;
  if (cpuProf) {
    // One directory per profiled process (bench/results/profiles/<bench>-<process>/); its main thread wrote the largest file.
    const dirs = existsSync(PROFILES_DIR)
      ? (await readdir(PROFILES_DIR, { withFileTypes: true })).filter((d) => d.isDirectory() && d.name.startsWith(`${name}-`))
      : [];
    const summaries: ProfileSummary[] = [];
    for (const dir of dirs) {
      try {
        const files = await Promise.all(
          (await readdir(path.join(PROFILES_DIR, dir.name)))
            .filter((f) => f.endsWith('.cpuprofile'))
            .map(async (f) => ({ f, size: (await stat(path.join(PROFILES_DIR, dir.name, f))).size })),
        );
        const main = files.sort((a, b) => b.size - a.size)[0];
        if (!main) continue;
        const summary = await summarizeProfile(path.join(PROFILES_DIR, dir.name, main.f), 25);
        summaries.push(summary);
        await writeFile(path.join(PROFILES_DIR, `${dir.name}.summary.json`), `${JSON.stringify(summary, null, 2)}\n`);
        // The raw profiles are large; BENCH_KEEP_PROFILES=1 keeps them (open them in Chrome DevTools).
        if (process.env.BENCH_KEEP_PROFILES !== '1') await rm(path.join(PROFILES_DIR, dir.name), { recursive: true, force: true });
      } catch (error) {
        console.error(`summarizing ${dir.name} failed:`, error);
      }
    }
    if (summaries.length > 0) result.data.profiles = summaries;
  }
  await writeFile(path.join(RESULTS_DIR, `${name}.json`), `${JSON.stringify(result, null, 2)}\n`);
  printResult(result);
  return result;
}

function printResult(r: BenchResult): void {
  console.log(`\n${r.title} — ${r.valid ? 'valid run' : 'INVALID RUN'} (${r.durationS} s)`);
  if (r.table.columns.length > 0) console.log(markdownTable(r.table.columns, r.table.rows));
  for (const t of r.targets)
    console.log(
      `  target ${t.what}: ${t.value} (target ${t.target}) ${t.met === null ? 'not measured' : t.met ? 'met' : `MISSED: ${t.miss}`}`,
    );
  for (const n of r.notes) console.log(`  note: ${n}`);
  for (const p of r.problems) console.log(`  PROBLEM: ${p}`);
}

/** Profile summaries left by a `--cpu-prof` run of this benchmark (possibly an earlier run than the table's). */
async function profileSummaries(name: string): Promise<ProfileSummary[]> {
  if (!existsSync(PROFILES_DIR)) return [];
  const files = (await readdir(PROFILES_DIR)).filter((f) => f.startsWith(`${name}-`) && f.endsWith('.summary.json')).sort();
  return Promise.all(files.map(async (f) => JSON.parse(await readFile(path.join(PROFILES_DIR, f), 'utf8')) as ProfileSummary));
}

function sectionOf(r: BenchResult, profiles: ProfileSummary[]): string {
  const out: string[] = [];
  out.push(`### \`${r.name}\` — ${r.title}`);
  out.push('');
  out.push(
    `Run ${r.startedAt.replace('T', ' ').slice(0, 19)} UTC, ${r.durationS} s, ${r.valid ? 'valid' : '**INVALID**'}; machine load average then ${r.machine.loadAverage.join(' / ')}.`,
  );
  out.push('');
  if (r.method) {
    out.push(`*Method.* ${r.method}`);
    out.push('');
  }
  if (r.table.columns.length > 0) {
    out.push(markdownTable(r.table.columns, r.table.rows));
    out.push('');
  }
  if (r.targets.length > 0) {
    out.push(
      markdownTable(
        ['target', 'wanted', 'measured', 'verdict'],
        r.targets.map((t) => [t.what, t.target, t.value, t.met === null ? 'not measured' : t.met ? 'met' : `**missed**: ${t.miss ?? ''}`]),
      ),
    );
    out.push('');
  }
  for (const n of r.notes) out.push(`- ${n}`);
  for (const p of r.problems) out.push(`- **Problem:** ${p}`);
  for (const p of profiles)
    out.push(
      `- CPU profile (\`npm run bench -- ${r.name} --cpu-prof\`, summary in \`bench/results/profiles/\`) of \`${p.file.split('/').slice(-2, -1)[0] ?? p.file}\`: ${describeProfile(p)}`,
    );
  if (r.notes.length + r.problems.length + profiles.length > 0) out.push('');
  return out.join('\n');
}

async function regenerateMarkdown(): Promise<void> {
  const files = existsSync(RESULTS_DIR) ? (await readdir(RESULTS_DIR)).filter((f) => f.endsWith('.json')) : [];
  const order = Object.keys(BENCHES);
  const results = (await Promise.all(files.map(async (f) => JSON.parse(await readFile(path.join(RESULTS_DIR, f), 'utf8')) as BenchResult)))
    .filter((r) => order.includes(r.name))
    .sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name));
  const machines = new Map<string, Machine>();
  for (const r of results) machines.set(describeMachine(r.machine), r.machine);
  const lines: string[] = [BEGIN, ''];
  lines.push('## Results');
  lines.push('');
  lines.push(`Machine${machines.size > 1 ? 's' : ''}: ${[...machines.keys()].join('; ') || '–'}.`);
  lines.push('');
  lines.push(
    markdownTable(
      ['benchmark', 'run', 'target', 'wanted', 'measured', 'verdict'],
      results.flatMap((r) =>
        r.targets.length > 0
          ? r.targets.map((t) => [
              `\`${r.name}\``,
              r.valid ? 'valid' : '**invalid**',
              t.what,
              t.target,
              t.value,
              t.met === null ? 'not measured' : t.met ? 'met' : `**missed** (${t.miss ?? ''})`,
            ])
          : [[`\`${r.name}\``, r.valid ? 'valid' : '**invalid**', '–', '–', '–', r.problems[0]?.slice(0, 120) ?? '–']],
      ),
    ),
  );
  lines.push('');
  for (const r of results) lines.push(sectionOf(r, await profileSummaries(r.name)));
  lines.push(END);
  const generated = lines.join('\n');
  let markdown = existsSync(BENCHMARKS_MD)
    ? await readFile(BENCHMARKS_MD, 'utf8')
    : `# Benchmarks\n\nRun \`npm run bench\` (all) or \`npm run bench -- <name>\`.\n\n`;
  const begin = markdown.indexOf(BEGIN);
  const end = markdown.indexOf(END);
  if (begin >= 0 && end > begin) markdown = markdown.slice(0, begin) + generated + markdown.slice(end + END.length);
  else markdown = `${markdown.trimEnd()}\n\n${generated}\n`;
  await writeFile(BENCHMARKS_MD, markdown);
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const cpuProf = args.includes('--cpu-prof') || process.env.BENCH_CPU_PROF === '1';
  const names = args.filter((a) => !a.startsWith('--'));
  const unknown = names.filter((n) => !(n in BENCHES));
  if (unknown.length > 0) {
    console.error(`unknown benchmark ${unknown.join(', ')}; known: ${Object.keys(BENCHES).join(', ')}`);
    process.exit(2);
  }
  if (args.includes('--report')) {
    // Only rebuild BENCHMARKS.md from the result files present.
    await regenerateMarkdown();
    console.log('BENCHMARKS.md rebuilt from bench/results/.');
    return;
  }
  const selected = names.length > 0 ? names : Object.keys(BENCHES);
  hookSignals();
  await mkdir(RESULTS_DIR, { recursive: true });
  if (cpuProf) {
    for (const name of selected) {
      for (const f of existsSync(PROFILES_DIR) ? await readdir(PROFILES_DIR) : [])
        if (f.startsWith(`${name}-`)) await rm(path.join(PROFILES_DIR, f), { recursive: true, force: true });
    }
  }
  console.log(`Machine: ${describeMachine(machine())}`);
  const t0 = performance.now();
  const results: BenchResult[] = [];
  for (const name of selected) results.push(await runOne(name, cpuProf));
  await regenerateMarkdown();
  const invalid = results.filter((r) => !r.valid).map((r) => r.name);
  console.log(
    `\n${results.length} benchmark(s) in ${((performance.now() - t0) / 1000).toFixed(0)} s; results in bench/results/, summary in BENCHMARKS.md.${invalid.length > 0 ? ` INVALID: ${invalid.join(', ')}` : ''}`,
  );
  process.exit(invalid.length > 0 ? 1 : 0);
}

main().catch(async (error: unknown) => {
  console.error(error);
  await cleanupAll();
  process.exit(1);
});
