/** Formatting shared by the endpoint page's sections (times: src/console/format.ts). */
import type { EndpointPageReplicaFragment, EndpointPageSpecFragment } from '../../api/generated.js';

export function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

export function formatNumber(value: number | null | undefined, digits = 2): string {
  if (value === null || value === undefined) return '—';
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

/** `repo@revision` for a hub model, `artifact (version)` for a registry artifact. */
export function describeModel(spec: Pick<EndpointPageSpecFragment, 'hfModelRepo' | 'hfModelRepoRevision' | 'wandbArtifact'>): string {
  if (spec.wandbArtifact) {
    const { name, version } = spec.wandbArtifact;
    return version ? `${name} (${version})` : name;
  }
  if (!spec.hfModelRepo) return '—';
  return spec.hfModelRepoRevision ? `${spec.hfModelRepo}@${spec.hfModelRepoRevision}` : spec.hfModelRepo;
}

export function describeInstance(spec: Pick<EndpointPageSpecFragment, 'instanceOption'>): string {
  const { id, numGpu, gpuType, gpuMemoryGb } = spec.instanceOption;
  return `${numGpu} × ${gpuType} (${gpuMemoryGb} GB) · ${id}`;
}

export function humanize(value: string): string {
  const text = value.toLowerCase().replace(/_/g, ' ');
  return text.charAt(0).toUpperCase() + text.slice(1);
}

export type Replica = EndpointPageReplicaFragment;

/** `1 × H100 (80 GB)`, as the spec and the list show instances: a replica's GPUs, with their memory when they are the endpoint's instance option's. */
export function replicaInstance(replica: Pick<Replica, 'numGpu' | 'gpuType'>, option: EndpointPageSpecFragment['instanceOption']): string {
  const memory = option.gpuType === replica.gpuType && option.numGpu === replica.numGpu ? ` (${option.gpuMemoryGb} GB)` : '';
  return `${replica.numGpu} × ${replica.gpuType}${memory}`;
}

/** Whether a replica still runs (or starts, or drains): STOPPED and FAILED ones have ended. */
export const isLive = (replica: Pick<Replica, 'state'>) => replica.state !== 'STOPPED' && replica.state !== 'FAILED';
