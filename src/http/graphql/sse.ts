/**
 * GraphQL subscriptions written as Server-Sent Events, in graphql-yoga's
 * format: a `:` ping first and every 12 s, `event: next` with the result as
 * `data:`, and `event: complete` at the end. A result shared by many
 * subscribers (see `shared-execution.ts`) is serialized once, and written
 * straight to each subscriber's response while it keeps up.
 *
 * graphql-yoga serves SSE through the fetch API (a Request, a Response and a
 * ReadableStream per subscriber), which costs about 25 KB of heap for each
 * idle live-status subscriber; http-entry.ts runs the operation through yoga's
 * envelop pipeline and hands the stream here instead.
 */
import type { ServerResponse } from 'node:http';
import type { ExecutionResult, GraphQLError } from 'graphql';
import { stallGuard } from '../../util/stall-guard.js';
import type { Log } from '../request-id.js';
import { exposedGraphQLError, publicErrorJson, reportGraphQLErrors } from './errors.js';
import { resultJson, type ResultSink } from './shared-execution.js';

const PING_MS = 12_000;

/** The serialized `next` event of each shared result. */
const frames = new WeakMap<ExecutionResult, string>();

function frameOf(result: ExecutionResult): string {
  let frame = frames.get(result);
  if (frame === undefined) {
    frame = `event: next\ndata: ${serialize(result)}\n\n`;
    frames.set(result, frame);
  }
  return frame;
}

/** A subscriber's shared results, written straight to its response while it keeps up (see `shared-execution.ts`). */
export class SseNextEvents implements ResultSink {
  constructor(private readonly res: ServerResponse) {}

  write(result: ExecutionResult): boolean {
    const { res } = this;
    if (res.writableEnded || res.destroyed || res.writableNeedDrain) return false;
    res.write(frameOf(result));
    return true;
  }
}

/** JSON of a result without the error extensions that are yoga's internals (`http`, `unexpected`), as yoga writes it. */
function serialize(result: ExecutionResult): string {
  if (!result.errors?.length && !(result.extensions as { http?: unknown } | undefined)?.http) return resultJson(result);
  const { http: _http, ...extensions } = (result.extensions ?? {}) as Record<string, unknown>;
  return JSON.stringify({
    ...result,
    errors: result.errors?.map((error: GraphQLError) => publicErrorJson(error)),
    extensions: Object.keys(extensions).length > 0 ? extensions : undefined,
  });
}

/**
 * Answers a started subscription: the SSE head, then its events until it completes or the client
 * goes away. A single result (errors before the stream: variables that do not coerce) is one
 * `next` with it, then `complete`, as yoga streams a single result.
 */
export function writeSseResponse(
  res: ServerResponse,
  stream: ExecutionResult | AsyncIterable<ExecutionResult>,
  requestId: string,
  log: Log,
  /** How long the stream waits for a client that takes nothing of it (then it is cut). */
  stallMs: number,
): Promise<void> | undefined {
  // CORS headers, if any, are already set by the server (../cors.ts).
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    connection: 'keep-alive',
    'cache-control': 'no-cache',
    'content-encoding': 'none',
  });
  if (!(Symbol.asyncIterator in stream)) return void res.end(`${frameOf(stream)}event: complete\ndata:\n\n`);
  return pump(res, stream[Symbol.asyncIterator](), requestId, log, stallMs);
}

/** Writes what a started subscription yields (results its sink refused, and errors) until it completes or the client goes away. */
async function pump(
  res: ServerResponse,
  events: AsyncIterator<ExecutionResult>,
  requestId: string,
  log: Log,
  stallMs: number,
): Promise<void> {
  // Gone while the subscription started: its close has passed, so end the stream here.
  if (res.destroyed) return void events.return?.();
  res.write(':\n\n');
  const ping = setInterval(() => res.write(':\n\n'), PING_MS);
  let closed = false;
  let drained: (() => void) | undefined;
  res.once('close', () => {
    closed = true;
    clearInterval(ping);
    drained?.();
    void events.return?.();
  });
  res.on('drain', () => drained?.());
  // A client that takes nothing for stallMs is cut (its 'close' ends the subscription, and what it holds goes back).
  const stall = stallGuard(res, stallMs);
  try {
    for (;;) {
      const step = await events.next();
      if (closed) return;
      if (step.done) break;
      reportGraphQLErrors(step.value.errors, requestId, log, 'an SSE subscription');
      const accepted = res.write(frameOf(step.value));
      stall.wrote(accepted);
      if (!accepted) {
        await new Promise<void>((resolve) => (drained = resolve));
        drained = undefined;
      }
    }
    res.end('event: complete\ndata:\n\n');
  } catch (error) {
    // The stream failed (NOT_FOUND, SUBSCRIPTION_OVERFLOW, or a bug): its last event says why, as yoga reports it.
    if (closed) return;
    const exposed = exposedGraphQLError(error);
    reportGraphQLErrors([exposed], requestId, log, 'an SSE subscription');
    res.write(`event: next\ndata: ${serialize({ errors: [exposed] })}\n\n`);
    res.end('event: complete\ndata:\n\n');
  } finally {
    clearInterval(ping);
    stall.stop();
  }
}
