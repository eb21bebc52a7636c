/**
 * Which GraphQL operations end by themselves, for a stopping gateway's drain (src/http/drain.ts): queries, mutations
 * and the chat completion's subscription (its stream ends with the answer) finish, up to the drain's bound, as a REST
 * chat completion does; every other subscription (live status, logs, metrics) only ends when its client goes, and is
 * ended at once so that the client subscribes again, to another gateway.
 */
import { getOperationAST, Kind, type DocumentNode, type SelectionSetNode } from 'graphql';

/** The subscription fields whose stream ends by itself. */
const FINITE_SUBSCRIPTIONS: ReadonlySet<string> = new Set(['chatCompletion']);

/** The root fields a selection set asks for, through its fragments. */
function rootFields(document: DocumentNode, selectionSet: SelectionSetNode, seen = new Set<string>()): string[] {
  return selectionSet.selections.flatMap((selection) => {
    if (selection.kind === Kind.FIELD) return [selection.name.value];
    if (selection.kind === Kind.INLINE_FRAGMENT) return rootFields(document, selection.selectionSet, seen);
    const name = selection.name.value;
    if (seen.has(name)) return [];
    seen.add(name);
    const fragment = document.definitions.find((d) => d.kind === Kind.FRAGMENT_DEFINITION && d.name.value === name);
    return fragment?.kind === Kind.FRAGMENT_DEFINITION ? rootFields(document, fragment.selectionSet, seen) : [];
  });
}

/** Whether the operation (a validated document) ends by itself: anything but a subscription to a stream without end. */
export function endsByItself(document: DocumentNode, operationName?: string | null): boolean {
  const operation = getOperationAST(document, operationName);
  if (operation?.operation !== 'subscription') return true;
  const fields = rootFields(document, operation.selectionSet).filter((name) => name !== '__typename');
  return fields.length > 0 && fields.every((name) => FINITE_SUBSCRIPTIONS.has(name));
}
