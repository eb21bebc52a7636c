/**
 * A stand-in for a replica's answer as the relays read it (src/router/relay.ts): a routed request whose upstream body
 * is a PassThrough the test writes the engine's bytes into, and a sink for what the relay sends its client.
 */
import { PassThrough, Writable } from 'node:stream';
import type { RoutedRequest } from '../../src/router/dispatch.js';

export type Outcome = Parameters<RoutedRequest['finish']>[0];

/** A streamed request routed to a stand-in upstream; `outcomes` collects what the relay records as it finishes. */
export function routedToStandIn(
  options: { includeUsage?: boolean; status?: number; maxAnswerBytes?: number; idleTimeoutMs?: number } = {},
) {
  const { includeUsage = false, status = 200, ...bounds } = options;
  const upstream = new PassThrough();
  const outcomes: Outcome[] = [];
  const request = {
    upstream: { status, contentType: 'text/event-stream', body: upstream },
    request: { stream: true, includeUsage },
    startedAt: performance.now(),
    queuedMs: 0,
    finish: (outcome: Outcome) => outcomes.push(outcome),
    ...bounds,
  } as unknown as RoutedRequest;
  return { upstream, request, outcomes };
}

/** A client's side of a relayed answer: everything written to `out`, read back as text. */
export function sink() {
  const chunks: Buffer[] = [];
  const out = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      callback();
    },
  });
  return { out, text: () => Buffer.concat(chunks).toString('utf8') };
}
