/** A failure the CLI reports as one line (no stack) and exit status 1. */
export class CliError extends Error {}

/** GraphQL mutation results are unions of a success type and error types (see schema.graphql). */
export interface ErrorResult {
  __typename: string;
  message: string;
  fields?: { field: string; message: string }[];
}

/**
 * The API's field names (GraphQL paths, as the errors give them) and the flag
 * of the CLI that sets each, so that an error names what the user typed.
 */
export const FLAG_OF_FIELD: Readonly<Record<string, string>> = {
  projectId: '--project',
  name: '--name',
  hfModelRepo: '--model',
  hfModelRepoRevision: '--revision',
  instanceOptionId: '--instance',
  'advanced.maxBatchSize': '--max-batch-size',
  'advanced.maxTokenCount': '--max-token-count',
  'advanced.maxInputLength': '--max-input-length',
  'autoscalingPolicy.minReplica': '--min-replica',
  'autoscalingPolicy.maxReplica': '--max-replica',
  'autoscalingPolicy.cooldownPeriod': '--cooldown',
  initialVersionComment: '--comment',
  newVersionComment: '--comment',
  versionIndex: '--version',
};

const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const escape = (name: string) => name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The names a rule's text may use for a field (its path, and its last part in
 * camelCase or snake_case: "must not exceed maxReplica", "max_token_count"),
 * longest first, each with its flag. Plain words ("name") are left alone.
 */
const NAMES_IN_TEXT: [RegExp, string][] = Object.entries(FLAG_OF_FIELD)
  .flatMap(([field, flag]) => {
    const last = field.split('.').at(-1)!;
    return [field, snake(field), last, snake(last)].filter((name) => /[A-Z_.]/.test(name)).map((name) => [name, flag] as const);
  })
  .sort(([a], [b]) => b.length - a.length)
  .map(([name, flag]) => [new RegExp(`(?<![\\w.-])${escape(name)}(?![\\w])`, 'g'), flag]);

/** A field of an API error as the CLI's flag (the field itself when no flag sets it). */
export function flagOf(field: string): string {
  return FLAG_OF_FIELD[field] ?? field;
}

/** A rule's text with the API's field names in it written as the flags. */
export function withFlagNames(text: string): string {
  return NAMES_IN_TEXT.reduce((out, [pattern, flag]) => out.replace(pattern, flag), text);
}

/** The success member of a mutation's union, or a CliError naming the error and its fields (by the flags that set them). */
export function unwrap<T extends { __typename: string }, N extends T['__typename']>(
  result: T,
  successType: N,
): Extract<T, { __typename: N }> {
  if (result.__typename === successType) return result as Extract<T, { __typename: N }>;
  const error = result as unknown as ErrorResult;
  // One line: each field by the flag that sets it.
  const fields = error.fields ?? [];
  if (fields.length > 0)
    throw new CliError(`invalid request: ${fields.map((f) => `${flagOf(f.field)}: ${withFlagNames(f.message)}`).join('; ')}`);
  throw new CliError(error.message ?? error.__typename);
}
