/**
 * Summarizes a V8 `.cpuprofile` (from `node --cpu-prof`): self time by
 * function and by area (a file of src/, a package of node_modules, Node's
 * internals, GC), as shares of the busy (non-idle) time.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { REPO_ROOT } from './env.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  file: string;
  busyMs: number;
  idleMs: number;
  topFunctions: { name: string; selfMs: number; share: number }[];
  areas: { area: string; selfMs: number; share: number }[];
}

function shortUrl(url: string): string {
  if (!url) return '';
  let p = url.startsWith('file://') ? decodeURIComponent(new URL(url).pathname) : url;
  if (p.startsWith(REPO_ROOT)) p = path.relative(REPO_ROOT, p);
  return p;
}

function areaOf(frame: ProfileNode['callFrame']): string {
  const name = frame.functionName;
  if (name === '(idle)') return '(idle)';
  if (name === '(garbage collector)') return '(garbage collector)';
  if (name === '(program)' || name === '(root)') return '(program)';
  const url = shortUrl(frame.url);
  if (url === '') return '(native)';
  if (url.startsWith('node:'))
    return `node:${url.slice(5).split('/')[0] === 'internal' ? url.slice(5).split('/').slice(0, 2).join('/') : url.slice(5)}`;
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const parts = url.slice(nm + 'node_modules/'.length).split('/');
    return `node_modules/${parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]}`;
  }
  return url;
}

export async function summarizeProfile(file: string, top = 15): Promise<ProfileSummary> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
  }
  const functions = new Map<string, number>();
  const areas = new Map<string, number>();
  let idle = 0;
  let busy = 0;
  for (const [id, ms] of self) {
    const node = byId.get(id);
    if (!node) continue;
    const area = areaOf(node.callFrame);
    if (area === '(idle)') {
      idle += ms;
      continue;
    }
    busy += ms;
    areas.set(area, (areas.get(area) ?? 0) + ms);
    const url = shortUrl(node.callFrame.url);
    const key = `${node.callFrame.functionName || '(anonymous)'}${url ? ` ${url}:${node.callFrame.lineNumber + 1}` : ''}`;
    functions.set(key, (functions.get(key) ?? 0) + ms);
  }
  const ranked = (m: Map<string, number>) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, top);
  return {
    file: shortUrl(file),
    busyMs: Math.round(busy),
    idleMs: Math.round(idle),
    topFunctions: ranked(functions).map(([name, ms]) => ({ name, selfMs: Math.round(ms), share: Math.round((ms / busy) * 1000) / 10 })),
    areas: ranked(areas).map(([area, ms]) => ({ area, selfMs: Math.round(ms), share: Math.round((ms / busy) * 1000) / 10 })),
  };
}

/** A few lines of text for BENCHMARKS.md. */
export function describeProfile(summary: ProfileSummary, lines = 8): string {
  const areas = summary.areas
    .slice(0, lines)
    .map((a) => `${a.area} ${a.share}%`)
    .join(', ');
  const fns = summary.topFunctions
    .slice(0, lines)
    .map((f) => `\`${f.name}\` ${f.share}%`)
    .join(', ');
  return `busy ${(summary.busyMs / 1000).toFixed(1)} s (idle ${(summary.idleMs / 1000).toFixed(1)} s). By area: ${areas}. Top self time: ${fns}.`;
}
