/**
 * The field names in the text of a GraphQL error. The shared validators
 * (src/domain) write their messages with the REST names (`max_tokens must be
 * at least 1`, `advanced.max_batch_size: must be from 1 to 256`); a GraphQL
 * client sent `maxTokens` and `advanced.maxBatchSize`, and reads those in the
 * message as in the error's field path (errors.ts `graphqlFieldName`).
 */
import type { Failure } from '../../domain/errors.js';
import { graphqlFieldName } from './errors.js';

/** A quoted value (a client's value, an allowed one), never a field name to rename. */
const QUOTED = /("(?:[^"\\]|\\.)*")/;
/** A field path as the validators write it: a name, then `[i]` indexes and `.member`s, not inside another word or path. */
const PATH = /(?<![\w.\]])([a-z][a-z0-9_]*)((?:\[\d+\])*(?:\.[\w-]+(?:\[\d+\])*)*)/g;

/** Which paths to rename (by their first name, or the whole path): those that name what the client sent, in REST's names. */
export type Renamed = (head: string, path: string) => boolean;

/**
 * `text` with each field path whose first name is `renamed` (a REST name, `max_tokens`) in GraphQL's names
 * (`maxTokens`; below a field of type JSON, `jsonFields`, the client's own keys are kept:
 * `chatTemplateKwargs.enable_thinking`). Quoted text is left as it is.
 */
export function inGraphqlNames(text: string, renamed: Renamed, jsonFields?: ReadonlySet<string>): string {
  return text
    .split(QUOTED)
    .map((part, i) =>
      i % 2 === 1 ? part : part.replace(PATH, (path, head: string) => (renamed(head, path) ? graphqlFieldName(path, jsonFields) : path)),
    )
    .join('');
}

/** A failure whose message (and its fields' messages) are in GraphQL's names; any other failure as it is. */
export function failureInGraphqlNames(failure: Failure, renamed: Renamed, jsonFields?: ReadonlySet<string>): Failure {
  if (failure.kind !== 'invalid') return failure;
  const rename = (text: string) => inGraphqlNames(text, renamed, jsonFields);
  return { ...failure, message: rename(failure.message), fields: failure.fields.map((f) => ({ ...f, message: rename(f.message) })) };
}

/** Every path with a snake_case name: for inputs whose validators write no other (no field of type JSON, no template variable). */
export const snakeCase: Renamed = (_head, path) => path.includes('_');
