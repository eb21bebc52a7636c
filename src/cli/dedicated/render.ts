/** The CLI's human output: aligned tables and key/value blocks, coloured only on a terminal (NO_COLOR respected). */
import { createColors } from 'picocolors';
import type { EndpointFieldsFragment, StatusFieldsFragment } from '../../sdk/client.js';

export type Print = (line: string) => void;

/*
 * Text from the server (a version's comment, an event's message, a log line, an error) is anyone's: a teammate's
 * comment of "\x1b]0;…\x07\x1b[2J" would set the reader's terminal title and clear the screen, a newline would add a
 * fake row to a table. Human output draws every C0 control, DEL and C1 control instead of sending it: C0 and DEL as
 * their Unicode control pictures (ESC as ␛, a newline as ␊: one column each, so tables stay aligned), C1, which has
 * none, as \x9b. The bidirectional embeddings, overrides and isolates (U+202A to U+202E, U+2066 to U+2069), which
 * reorder what follows them so that one name reads as another, are drawn as their escapes (\u202e). --json prints the
 * server's text exactly (JSON.stringify writes C0 controls as \u escapes).
 */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

function drawn(control: string): string {
  const code = control.charCodeAt(0);
  if (code < 0x20) return String.fromCharCode(0x2400 + code);
  if (code === 0x7f) return '\u2421';
  if (code > 0xff) return `\\u${code.toString(16)}`;
  return `\\x${code.toString(16)}`;
}

/** Server text as one line of human output (a table cell, a field, a message): each control drawn, a tab a space. */
export function oneLine(text: string): string {
  return text.replace(CONTROL, (c) => (c === '\t' ? ' ' : drawn(c)));
}

/** Server text printed as a body of its own (a log line, a chat answer): newlines and tabs kept, other controls drawn. */
export function textBody(text: string): string {
  return text.replace(CONTROL, (c) => (c === '\n' || c === '\t' ? c : drawn(c)));
}

/** A value from the server with each of its strings as oneLine makes it: what the human printers render. */
export function forHumans<T>(value: T): T {
  if (typeof value === 'string') return oneLine(value) as T;
  if (Array.isArray(value)) return value.map((item: unknown) => forHumans(item)) as T;
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, forHumans(item as unknown)])) as T;
  return value;
}

const colors = createColors(Boolean(process.stdout.isTTY) && !process.env.NO_COLOR);
/** For what goes to stderr (a reasoning model's thinking), coloured when stderr is a terminal. */
export const stderrColors = createColors(Boolean(process.stderr.isTTY) && !process.env.NO_COLOR);

export function statusColor(status: string): string {
  if (status === 'RUNNING' || status === 'READY') return colors.green(status);
  if (status === 'FAILED') return colors.red(status);
  if (status === 'SLEEPING' || status === 'TERMINATED') return colors.dim(status);
  return colors.yellow(status);
}

/** Rows as columns padded to their widest cell (colour codes excluded from the width); server text in them already through forHumans. */
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

/** `endpoint` as forHumans gives it. */
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
