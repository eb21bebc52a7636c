/**
 * How an API transaction ends: its events and its final read are sent with its commit (see commitWith), so that the
 * fleet-wide event order lock is held for no round trip of ours.
 */
import type { EndpointEventInput, EndpointRecord } from '../domain/endpoint.js';
import { ok, type Result } from '../domain/result.js';
import type { TransactionSql } from '../storage/database.js';
import { findEndpoints, refreshCountsLocked } from '../storage/endpoints-repository.js';
import { insertEvent } from '../storage/events-repository.js';

/** A transaction's last statements, sent with its commit: the endpoint as it left it, once committed. */
export interface Committing {
  done: Promise<EndpointRecord>;
}

/**
 * Ends an API transaction: its events appended (with the replica counts refreshed, when `refresh` names the cause)
 * and the endpoint read, in statements sent at once and not awaited inside it, so that its commit goes right after
 * them. The append takes the event order lock that every event writer of every gateway takes: held this way for no
 * round trip of ours, so that a gateway frozen mid-request (a pause, a partition) cannot hold the others' writes.
 * The rows written earlier in the transaction (locked, but only this endpoint's) come first. A failed statement
 * fails the commit, and `done` with it.
 */
export function commitWith(
  tx: TransactionSql,
  id: string,
  events: readonly EndpointEventInput[],
  options: { refresh?: string; includeDeleted?: boolean } = {},
): Committing {
  const sent: Promise<unknown>[] = events.map((event) => insertEvent(tx, event));
  if (options.refresh) sent.push(refreshCountsLocked(tx, id, options.refresh));
  const read = findEndpoints(tx, [id], { includeDeleted: options.includeDeleted ?? false });
  const done = Promise.all([read, ...sent]).then(([[endpoint]]) => endpoint!);
  done.catch(() => undefined);
  return { done };
}

/** The outcome of a transaction ended by commitWith, once committed. */
export async function committed(outcome: Result<Committing>): Promise<Result<EndpointRecord>> {
  return outcome.type === 'ok' ? ok(await outcome.value.done) : outcome;
}
