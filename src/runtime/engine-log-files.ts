/**
 * The local runtime's engine logs: one file per replica under
 * DATA_DIR/replicas (`<replica>.log`, the engine's stdout and stderr, opened
 * for appending), so they survive a gateway restart. This module reads a
 * log's last lines, follows it as it grows, and keeps the files bounded:
 * a file past its cap is rotated by copy and truncate (the engine keeps its
 * descriptor, opened with O_APPEND, so it writes on at the start of the
 * emptied file) into `<replica>.log.1`, and the logs of replicas that no
 * longer run are removed once they are older than the retention. It also
 * watches a starting engine's log for its ENGINE_READY or ENGINE_ERROR line.
 */
import { watch, type FSWatcher } from 'node:fs';
import { copyFile, open, readdir, rm, stat, truncate } from 'node:fs/promises';
import path from 'node:path';
import type { LocalRuntime } from './local-runtime.js';
import { EngineLogUnavailable } from './runtime.js';
import type { Nudge } from '../util/nudge.js';

/** The most bytes a tail reads, whatever the lines asked. */
const TAIL_MAX_BYTES = 4 << 20;

/** A replica's log file on this machine (`node`); another machine's replica keeps its log there. */
export function localLogFile(dir: string, ref: { replicaId: string; node: string }, node: string): string {
  if (ref.node !== node) throw new EngineLogUnavailable(`the replica ran on ${ref.node}: its log is kept there`);
  return path.join(dir, `${ref.replicaId}.log`);
}

/** The previous part of a rotated log. */
/** The last `maxBytes` of a log file, as text ('' when it cannot be read). */
export async function readLogTail(file: string, maxBytes = 8192): Promise<string> {
  try {
    const handle = await open(file, 'r');
    try {
      const { size } = await handle.stat();
      const length = Math.min(size, maxBytes);
      const buffer = Buffer.alloc(length);
      await handle.read(buffer, 0, length, size - length);
      return buffer.toString('utf8');
    } finally {
      await handle.close();
    }
  } catch {
    return '';
  }
}

export const rotatedPath = (file: string): string => `${file}.1`;

/** Up to `maxBytes` of the file ending at `end` (its size when not given), and that end. */
async function readEnd(file: string, maxBytes: number, end?: number): Promise<{ bytes: Buffer; end: number }> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch {
    return { bytes: Buffer.alloc(0), end: 0 };
  }
  try {
    const last = Math.min(end ?? Infinity, (await handle.stat()).size);
    const length = Math.min(last, maxBytes);
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, last - length);
    return { bytes: buffer.subarray(0, bytesRead), end: last };
  } finally {
    await handle.close();
  }
}

/** The last `tailLines` lines of a log up to `end` (its rotated part first), as text ending without a newline. */
export async function readLogFile(file: string, options: { tailLines: number }, end?: number): Promise<string> {
  if (options.tailLines <= 0) return '';
  const current = (await readEnd(file, TAIL_MAX_BYTES, end)).bytes;
  const lines = splitLines(current.toString('utf8'));
  if (lines.length < options.tailLines && current.length < TAIL_MAX_BYTES) {
    const older = (await readEnd(rotatedPath(file), TAIL_MAX_BYTES - current.length)).bytes;
    lines.unshift(...splitLines(older.toString('utf8')));
  }
  return lines.slice(-options.tailLines).join('\n');
}

function splitLines(text: string): string[] {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/**
 * A log's last `tailLines` lines, then what is appended to it, in chunks of whole lines (a partial
 * last line waits for its newline), until `signal` aborts. A file truncated
 * by rotation is read again from its start. It watches the file and, as
 * watching can miss changes, also looks every `pollMs`.
 */
export async function* followLogFile(
  file: string,
  signal: AbortSignal,
  options: { tailLines?: number; pollMs?: number } = {},
): AsyncGenerator<string> {
  const pollMs = options.pollMs ?? 500;
  // The tail ends at a line's end, where following starts: nothing twice, nothing missed.
  const { bytes, end } = await readEnd(file, TAIL_MAX_BYTES);
  let offset = end - (bytes.length - (bytes.lastIndexOf(10) + 1));
  const tail = await readLogFile(file, { tailLines: options.tailLines ?? 0 }, offset);
  if (tail !== '') yield tail;
  let partial = '';
  let wake: (() => void) | undefined;
  const poke = () => wake?.();
  signal.addEventListener('abort', poke, { once: true });
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(file, { persistent: false }, poke);
    watcher.on('error', () => watcher?.close());
  } catch {
    // not there yet, or not watchable: the polling finds what is written
  }
  try {
    while (!signal.aborted) {
      const size = (await stat(file).catch(() => undefined))?.size ?? 0;
      if (size < offset) offset = 0; // rotated: the engine writes on from the start
      if (size > offset) {
        const handle = await open(file, 'r');
        try {
          const buffer = Buffer.alloc(Math.min(size - offset, 1 << 20));
          const { bytesRead } = await handle.read(buffer, 0, buffer.length, offset);
          offset += bytesRead;
          const text = partial + buffer.toString('utf8', 0, bytesRead);
          const end = text.lastIndexOf('\n');
          partial = text.slice(end + 1);
          if (end >= 0) yield text.slice(0, end);
        } finally {
          await handle.close();
        }
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, pollMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
  } finally {
    signal.removeEventListener('abort', poke);
    watcher?.close();
  }
}

export interface LogRetention {
  /** A log past this size is rotated: the two parts together stay under twice it. @default 10 MiB */
  maxBytes: number;
  /** The log of a replica that no longer runs is removed this long after its last write. @default 7 days */
  maxAgeMs: number;
  /** How often the files are checked. @default 30000 */
  intervalMs?: number;
}

/** Keeps the engine logs under `dir` bounded in size and age (see the module's comment); best effort. */
export class EngineLogKeeper {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly dir: string,
    private readonly retention: LogRetention,
    /** Whether the replica's engine still runs (its log is never removed then). */
    private readonly running: (replicaId: string) => Promise<boolean>,
  ) {}

  start(): void {
    const tick = () => {
      this.sweep()
        .catch(() => {})
        .finally(() => {
          if (this.timer) this.timer = setTimeout(tick, this.retention.intervalMs ?? 30_000).unref();
        });
    };
    this.timer = setTimeout(tick, 0).unref();
  }

  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** One pass: rotates logs past the cap, removes old logs of replicas that no longer run. */
  async sweep(now = Date.now()): Promise<void> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return;
    }
    for (const name of names) {
      const match = /^(.+)\.log(\.1)?$/.exec(name);
      if (!match) continue;
      const file = path.join(this.dir, name);
      const info = await stat(file).catch(() => undefined);
      if (!info) continue;
      if (now - info.mtimeMs > this.retention.maxAgeMs && !(await this.running(match[1]!))) {
        await rm(file, { force: true });
        continue;
      }
      if (!match[2] && info.size > this.retention.maxBytes) await rotate(file);
    }
  }
}

/** Copies the log to its rotated part, then empties it (lines written in between are lost, as with copytruncate). */
async function rotate(file: string): Promise<void> {
  await copyFile(file, rotatedPath(file));
  await truncate(file, 0);
}

/** The retention of ENGINE_LOG_MAX_BYTES and ENGINE_LOG_RETENTION_DAYS. */
export function engineLogRetention(config: { engineLog: { maxBytes: number; retentionDays: number } }): LogRetention {
  return { maxBytes: config.engineLog.maxBytes, maxAgeMs: config.engineLog.retentionDays * 86_400_000 };
}

/** Whether a local replica's engine still runs: the runtime still records it (it has not been stopped). */
export function localEngineRuns(runtime: Pick<LocalRuntime, 'recorded'>): (replicaId: string) => Promise<boolean> {
  return async (replicaId) => (await runtime.recorded()).some((engine) => engine.replicaId === replicaId);
}

/** The start of a protocol line of the built-in engine (never the log's first line: the runtime's spawn line is). */
const ENGINE_PROTOCOL_LINE = /\nENGINE_(?:READY|ERROR) /;

/**
 * Watches a replica's log for the engine's ENGINE_READY or ENGINE_ERROR line
 * (reading only what was appended since the last look) and pokes `nudge`
 * when one appears. Best effort: where the file cannot be watched, the
 * health polling alone finds the engine ready.
 */
export function watchForProtocolLine(file: string, nudge: Nudge): { close(): void } {
  let offset = 0;
  let reading = false;
  let again = false;
  let tail = '';
  let watcher: FSWatcher | undefined;
  const look = async () => {
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    try {
      const handle = await open(file, 'r');
      try {
        do {
          again = false;
          const { size } = await handle.stat();
          if (size <= offset) continue;
          const buffer = Buffer.alloc(Math.min(size - offset, 1 << 16));
          const { bytesRead } = await handle.read(buffer, 0, buffer.length, offset);
          if (bytesRead === 0) break;
          offset += bytesRead;
          if (offset < size) again = true;
          // The last bytes are kept: a protocol line's start may be split over two reads.
          const text = tail + buffer.toString('latin1', 0, bytesRead);
          if (ENGINE_PROTOCOL_LINE.test(text)) nudge.poke();
          tail = text.slice(-16);
        } while (again && watcher);
      } finally {
        await handle.close();
      }
    } catch {
      // the log is gone or unreadable: the polling goes on
    } finally {
      reading = false;
    }
  };
  try {
    watcher = watch(file, { persistent: false }, () => void look());
    watcher.on('error', () => watcher?.close());
  } catch {
    return { close: () => {} };
  }
  void look();
  return {
    close: () => {
      watcher?.close();
      watcher = undefined;
    },
  };
}
