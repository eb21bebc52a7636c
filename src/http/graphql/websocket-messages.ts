/**
 * A graphql-ws client's messages, read before the protocol core (graphql-ws's `makeServer`) sees them: one that is
 * not JSON, not an object, or of a type a server never receives is refused with its reason (websocket.ts closes the
 * socket with 4400 and it), so that it never reaches the core as a fault.
 */
import { MessageType } from 'graphql-ws';

/** The message types a server receives; any other (well-formed) one is a protocol violation. */
const SERVER_BOUND = new Set<string>([
  MessageType.ConnectionInit,
  MessageType.Ping,
  MessageType.Pong,
  MessageType.Subscribe,
  MessageType.Complete,
]);

/** A client's message as read: the message, its type (one a server receives), id and payload; or why it is refused. */
export type ClientMessage = { message: object; type: string; id: unknown; payload: unknown } | { refused: string };

/** Reads one message's frame (its fields' own checks are graphql-ws's, which closes with 4400 too). */
export function readClientMessage(data: Buffer): ClientMessage {
  let message: unknown;
  try {
    message = JSON.parse(data.toString('utf8'));
  } catch {
    message = undefined;
  }
  const type =
    typeof message === 'object' && message !== null && !Array.isArray(message) ? (message as { type?: unknown }).type : undefined;
  if (typeof type !== 'string' || !SERVER_BOUND.has(type)) {
    return {
      refused: message === undefined ? 'Invalid message received: not JSON' : 'Invalid message received: not a message a server accepts',
    };
  }
  const { id, payload } = message as { id?: unknown; payload?: unknown };
  return { message: message as object, type, id, payload };
}
