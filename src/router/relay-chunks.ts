/**
 * A streamed answer's chunks read as JSON, for the surface that reads them
 * (GraphQL's chatCompletion subscription), over relay.ts's `relayStream`.
 */
import type { RoutedRequest } from './dispatch.js';
import { relayStream, UnreadableEventError } from './relay.js';

/**
 * The chunks of a streamed answer as JSON objects, until `[DONE]`. An event that is not a JSON object ends the
 * answer as the replica's invalid one (`UpstreamCutError`, `upstream_invalid`), recorded so with status 502 as an
 * event over the bound is; otherwise as `relayStream` (its bounds, its cuts, its record).
 */
export async function* relayChunks(routed: RoutedRequest): AsyncGenerator<Record<string, unknown>> {
  const events = relayStream(routed);
  for await (const data of events) {
    if (data === '[DONE]') return;
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch {
      // The text itself goes nowhere: JSON.parse's own message would quote it into the log.
    }
    if (typeof chunk !== 'object' || chunk === null || Array.isArray(chunk)) {
      // Thrown into the relay where it waits on this event: it records the answer as invalid, lets the replica go,
      // and throws the UpstreamCutError this rejects with.
      await events.throw(new UnreadableEventError());
    }
    yield chunk as Record<string, unknown>;
  }
}
