/**
 * `SafeInt`: an integer from −(2^53 − 1) to 2^53 − 1, the integers JSON
 * numbers carry exactly (JavaScript's safe integers). GraphQL's `Int` is 32-bit;
 * OpenAI's `seed` is any integer, and the REST route takes every safe integer,
 * so `ChatCompletionInput.seed` takes the same. It reads what an `Int` reads
 * (an integer literal, a JSON number), so a query that sent an Int still works.
 */
import { GraphQLError, Kind, type ValueNode } from 'graphql';
import { builder } from '../builder.js';

const RULE = `an integer from ${Number.MIN_SAFE_INTEGER} to ${Number.MAX_SAFE_INTEGER}`;

/** The most of a refused value the error shows: a literal may be any length (a 400-digit one was echoed whole). */
const SHOWN_CHARACTERS = 40;

const refused = (shown: string, node?: ValueNode) =>
  new GraphQLError(
    `SafeInt must be ${RULE} (got ${shown.length > SHOWN_CHARACTERS ? `${shown.slice(0, SHOWN_CHARACTERS)}…` : shown})`,
    node ? { nodes: node } : {},
  );

function safeInt(value: unknown, shown: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw refused(shown);
  return value;
}

const shownLiteral = (node: ValueNode) => ('value' in node && typeof node.value === 'string' ? node.value : node.kind);

// The builder's scalar names are declared with its types (builder.ts); this one is typed as Int's, which it extends.
export const SafeInt = builder.scalarType('SafeInt' as 'Int', {
  description: `${RULE[0]!.toUpperCase()}${RULE.slice(1)}, ±(2^53 − 1): every integer a JSON number carries exactly. Takes any Int.`,
  serialize: (value) => safeInt(value, String(value)),
  parseValue: (value) => safeInt(value, typeof value === 'number' ? String(value) : (JSON.stringify(value) ?? String(value))),
  // A literal past 2^53 − 1 reads as 2^53 or more, however it rounds: never a safe integer.
  parseLiteral: (node) => {
    if (node.kind !== Kind.INT) throw refused(shownLiteral(node), node);
    const value = Number(node.value);
    if (!Number.isSafeInteger(value)) throw refused(node.value, node);
    return value;
  },
});
