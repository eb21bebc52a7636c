/** The CLI's human output: aligned tables and key/value blocks, coloured only on a terminal (NO_COLOR respected). */
import { createColors } from 'picocolors';
import type { EndpointFieldsFragment, StatusFieldsFragment } from '../../sdk/client.js';

export type Print = (line: string) => void;

const colors = createColors(Boolean(process.stdout.isTTY) && !process.env.NO_COLOR);
/** For what goes to stderr (a reasoning model's thinking), coloured when stderr is a terminal. */
export const stderrColors = createColors(Boolean(process.stderr.isTTY) && !process.env.NO_COLOR);

export function statusColor(status: string): string {
  if (status === 'RUNNING' || status === 'READY') return colors.green(status);
  if (status === 'FAILED') return colors.red(status);
  if (status === 'SLEEPING' || status === 'TERMINATED') return colors.dim(status);
  return colors.yellow(status);
}

/** Rows as columns padded to their widest cell (colour codes excluded from the width). */
export function table(print: Print, header: string[], rows: string[][]): void {
  const visible = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, ''); // eslint-disable-line no-control-regex
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => visible(r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c + ' '.repeat(widths[i]! - visible(c).length)))
      .join('  ')
      .trimEnd();
  print(colors.bold(line(header)));
  for (const row of rows) print(line(row));
}

export function describeStatus(
  status: StatusFieldsFragment & { downloadProgress?: { bytesDone: number; bytesTotal: number } | null },
): string {
  const parts = [statusColor(status.status)];
  if (status.phase) parts.push(status.phase);
  if (status.errorCode) parts.push(colors.red(status.errorCode));
  parts.push(`replicas ${status.currReplicaCnt}/${status.desiredReplicaCnt}`);
  const progress = status.downloadProgress;
  if (progress && progress.bytesTotal > 0) {
    parts.push(
      `downloaded ${megabytes(progress.bytesDone)} of ${megabytes(progress.bytesTotal)} (${Math.floor((100 * progress.bytesDone) / progress.bytesTotal)}%)`,
    );
  }
  return parts.join('  ');
}

function megabytes(bytes: number): string {
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

export function printEndpoint(print: Print, endpoint: EndpointFieldsFragment): void {
  const { spec, status } = endpoint;
  const rows: [string, string][] = [
    ['id', endpoint.id],
    ['name', endpoint.name],
    ['status', describeStatus(status)],
    ...(status.errorMessage ? [['error', status.errorMessage] as [string, string]] : []),
    ...(status.waitReason ? [['waiting', status.waitReason] as [string, string]] : []),
    ['model', `${spec.hfModelRepo ?? ''}${spec.hfModelRepoRevision ? `@${spec.hfModelRepoRevision}` : ''}`],
    ['instance', `${spec.instanceId} (${spec.numGpu} × ${spec.gpuType})`],
    ['project', spec.projectId],
    ['version', `${endpoint.currentVersion?.versionIndex ?? '-'} ${endpoint.currentVersion?.rolloutState ?? ''}`.trim()],
    ['autoscaling', `${spec.autoscalingMin}–${spec.autoscalingMax} replicas, cooldown ${spec.autoscalingCooldown} s`],
    ['limits', `batch ${spec.maxBatchSize}, max_token_count ${spec.maxTokenCount}, max_input_length ${spec.maxInputLength}`],
    ['created', endpoint.createdAt],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  for (const [key, value] of rows) print(`${colors.dim(key.padEnd(width))}  ${value}`);
}
