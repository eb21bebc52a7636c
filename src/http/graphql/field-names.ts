/**
 * The field names in the text of a GraphQL error. The shared validators
 * (src/domain) write their messages with the REST names (`max_tokens must be
 * at least 1`, `advanced.max_batch_size: must be from 1 to 256`); a GraphQL
 * client sent `maxTokens` and `advanced.maxBatchSize`, and reads those in the
 * message as in the error's field path (errors.ts `graphqlFieldName`).
 */
import type { Failure } from '../../domain/errors.js';
import { ADVANCED_KEYS } from '../../domain/endpoint-spec.js';
import { graphqlFieldName } from './errors.js';

/** A field path as the validators write it: a name, then `[i]` indexes and `.member`s, not inside another word or path. */
const PATH = /(?<![\w.\]])([a-z][a-z0-9_]*)((?:\[\d+\])*(?:\.[\w-]+(?:\[\d+\])*)*)/g;

/** Which paths to rename (by their first name, or the whole path): those that name what the client sent, in REST's names. */
export type Renamed = (head: string, path: string) => boolean;

/**
 * `text` with each field path whose first name is `renamed` (a REST name, `max_tokens`) in GraphQL's names
 * (`maxTokens`; below a field of type JSON, `jsonFields`, the client's own keys are kept:
 * `chatTemplateKwargs.enable_thinking`). Quoted text (a client's value, an allowed one) is left as it is; a
 * quote never closed runs to the end, so that text a client wrote is never renamed.
 *
 * One scan from left to right: a regular expression for the quoted parts (a split on it, before) tried again
 * from every quote to the end when one was never closed, which took over a second of the event loop on one
 * chat request (a JSON schema's property name `"\"\"…`, 64 KiB, in the message).
 */
export function inGraphqlNames(text: string, renamed: Renamed, jsonFields?: ReadonlySet<string>): string {
  const rename = (part: string) =>
    part.replace(PATH, (path, head: string) => (renamed(head, path) ? graphqlFieldName(path, jsonFields) : path));
  let out = '';
  let at = 0;
  for (let open = text.indexOf('"'); open !== -1; open = text.indexOf('"', at)) {
    const end = quotedEnd(text, open);
    out += rename(text.slice(at, open)) + text.slice(open, end);
    at = end;
  }
  return out + rename(text.slice(at));
}

/** Where the quoted text that opens at `open` ends: past its closing quote (one after a backslash is escaped), or the text's end. */
function quotedEnd(text: string, open: number): number {
  for (let i = open + 1; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '"') return i + 1;
  }
  return text.length;
}

/** A failure whose message (and its fields' messages) are in GraphQL's names; any other failure as it is. */
export function failureInGraphqlNames(failure: Failure, renamed: Renamed, jsonFields?: ReadonlySet<string>): Failure {
  if (failure.kind !== 'invalid') return failure;
  const rename = (text: string) => inGraphqlNames(text, renamed, jsonFields);
  return { ...failure, message: rename(failure.message), fields: failure.fields.map((f) => ({ ...f, message: rename(f.message) })) };
}

/**
 * The names the endpoint mutations' validators write in REST's snake_case: the `advanced` settings, under `advanced.`
 * or alone (`must not exceed max_token_count`). Only those: their messages also quote what the client or the hub
 * wrote (a repository `my_org/my_model`, a name), which is no field and stays as written.
 */
export const advancedNames: Renamed = (head) => head === 'advanced' || Object.hasOwn(ADVANCED_KEYS, head);
