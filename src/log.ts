/**
 * The gateway's one logger: structured JSON lines through pino (LOG_LEVEL,
 * and LOG_FORMAT=pretty for a terminal). The components keep their plain
 * `log(message, error?)` callbacks; `logFunction` turns each call into a
 * line: a message alone is a warning, a user's mistake (a wrong repository,
 * a refused request) one line with no stack (`error: { type, message }`), and
 * anything else an error with its stack (`err`, pino's error serializer). Request lines carry the request id the client got.
 */
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { PinoPretty } from 'pino-pretty';
import type { LogLevel } from './config.js';
import { isServerFailure } from './domain/errors.js';
import { failureOf } from './http/failures.js';

export type { Logger };

export interface LogSettings {
  level: LogLevel;
  format: 'json' | 'pretty';
}

/** A logger writing to `destination` (stdout by default); pretty when asked, for development. */
export function createLogger(settings: LogSettings = { level: 'info', format: 'json' }, destination?: DestinationStream): Logger {
  const options: LoggerOptions = {
    level: settings.level,
    base: { service: 'dedicated-gateway' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  };
  if (destination) return pino(options, destination);
  if (settings.format === 'pretty') {
    return pino(
      options,
      PinoPretty({ colorize: process.stdout.isTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service', sync: true }),
    );
  }
  return pino(options);
}

/** A logger that writes nothing (tests, tools). */
export const silentLogger: Logger = pino({ level: 'silent' });

/** An error as one line: its type and message, no stack. */
function brief(error: unknown): { type: string; message: string } {
  if (error instanceof Error) return { type: error.name, message: error.message };
  return { type: typeof error, message: String(error) };
}

/** Whether an error is the caller's mistake (a 4xx of the error model) rather than a fault of ours. */
export function isClientFailure(error: unknown): boolean {
  return !isServerFailure(failureOf(error));
}

/**
 * The `log(message, error?)` callback of a component, over `logger`.
 * `expected` says which errors are users' mistakes or outside faults that a
 * stack would not explain (they log as one warning line).
 */
export function logFunction(logger: Logger, expected: (error: unknown) => boolean = isClientFailure) {
  return (message: string, error?: unknown, fields: Record<string, unknown> = {}): void => {
    if (error === undefined) logger.warn(fields, message);
    else if (expected(error)) logger.warn({ ...fields, error: brief(error) }, message);
    else logger.error({ ...fields, err: error instanceof Error ? error : brief(error) }, message);
  };
}
