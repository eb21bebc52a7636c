/**
 * The operations of one graphql-ws socket, as the adapter (`websocket.ts`) tracks them, from their `subscribe`
 * message to their end. graphql-ws keys its own by id alone, and an id is free again as soon as the client sends
 * `complete`: an operation completed while it was still starting (in `onSubscribe`) kept running under an id a
 * new operation had taken, out of the reach of a later `complete`, of the socket's cap and of the socket's close.
 * Here each operation is its own entry (keyed by its subscribe message's payload, one object per message), with
 * its own cancellation, so that:
 *
 * - `complete` aborts every operation of that id, however far it got;
 * - the socket's close aborts all of them;
 * - the socket's cap counts every operation the client has not completed, and is applied as each message arrives;
 * - a subscribe that reuses the id of an operation still ending waits for that end before graphql-ws sees it, so
 *   that graphql-ws never holds two operations under one id (the old one's end would otherwise send `complete`
 *   for the new one, and drop graphql-ws's record of it).
 */

interface Operation {
  readonly id: string;
  readonly cancel: AbortController;
  /** The client completed it, or it was refused, or it ended: it no longer counts against the cap. */
  completed: boolean;
  /** Within the socket's cap when its message arrived. */
  readonly admitted: boolean;
  readonly ended: Promise<void>;
  readonly end: () => void;
}

export interface Opened {
  readonly signal: AbortSignal;
  /** Within the socket's cap; an operation past it is answered with an error by `onSubscribe`. */
  readonly admitted: boolean;
  /** Where the id's earlier operations are still ending: the message goes to graphql-ws once this settles. */
  readonly after?: Promise<void>;
}

export class SocketOperations {
  private readonly operations = new Map<object, Operation>();
  /**
   * The same operations by id (several while earlier ones of an id end): a message looks up its id's alone, so that a
   * flood of messages (each refused, say, while the gateway drains) costs no scan of all those still being answered.
   */
  private readonly byId = new Map<string, Set<Operation>>();
  /** Operations admitted that the client has not completed, running or about to start: what the cap counts. */
  private counted = 0;

  constructor(private readonly maxOperations: number) {}

  /**
   * A `subscribe` message arrived: its operation is registered (counted and cancellable) before anything awaits,
   * and admitted if the socket's cap has room for it now (not when it starts: it may wait for an earlier one). Undefined when an operation the client has not completed holds the id (graphql-ws's 4409).
   */
  open(id: string, payload: object): Opened | undefined {
    const earlier: Promise<void>[] = [];
    for (const operation of this.byId.get(id) ?? []) {
      if (!operation.completed) return undefined;
      earlier.push(operation.ended);
    }
    let end!: () => void;
    const ended = new Promise<void>((resolve) => (end = resolve));
    const admitted = this.counted < this.maxOperations;
    const operation: Operation = { id, cancel: new AbortController(), completed: !admitted, admitted, ended, end };
    this.operations.set(payload, operation);
    let sameId = this.byId.get(id);
    if (!sameId) this.byId.set(id, (sameId = new Set()));
    sameId.add(operation);
    if (admitted) this.counted++;
    return {
      signal: operation.cancel.signal,
      admitted,
      ...(earlier.length > 0 ? { after: Promise.all(earlier).then(() => {}) } : {}),
    };
  }

  /** The operation registered for a subscribe message's payload. */
  get(payload: object): Opened | undefined {
    const operation = this.operations.get(payload);
    return operation && { signal: operation.cancel.signal, admitted: operation.admitted };
  }

  /** The client sent `complete`: every operation under the id so far is aborted and leaves the count at once. */
  complete(id: string): void {
    for (const operation of this.byId.get(id) ?? []) this.stop(operation);
  }

  /** The operation is over (ran to its end, refused, or never started): it is forgotten. */
  ended(payload: object): void {
    const operation = this.operations.get(payload);
    if (!operation) return;
    if (!operation.completed) this.counted--;
    operation.completed = true;
    this.operations.delete(payload);
    const sameId = this.byId.get(operation.id);
    sameId?.delete(operation);
    if (sameId?.size === 0) this.byId.delete(operation.id);
    operation.end();
  }

  /** The socket closed: every operation is aborted. */
  close(): void {
    for (const operation of this.operations.values()) this.stop(operation);
  }

  private stop(operation: Operation): void {
    if (!operation.completed) {
      operation.completed = true;
      this.counted--;
    }
    operation.cancel.abort();
  }
}
