/**
 * CPU profiles of this very process (for gateways built in-process), through
 * the inspector: written like `--cpu-prof` does, into
 * bench/results/profiles/<name>/, where bench/run.ts summarizes them.
 */
import { Session } from 'node:inspector/promises';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { cpuProfArgs, PROFILES_DIR } from './env.js';

export async function startInProcessProfile(name: string): Promise<() => Promise<void>> {
  await cpuProfArgs(name); // prepares an empty directory
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 1000 });
  await session.post('Profiler.start');
  let stopped = false;
  return async () => {
    if (stopped) return;
    stopped = true;
    const { profile } = await session.post('Profiler.stop');
    await writeFile(path.join(PROFILES_DIR, name, 'main.cpuprofile'), JSON.stringify(profile));
    session.disconnect();
  };
}
