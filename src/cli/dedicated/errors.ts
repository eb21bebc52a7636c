/** A failure the CLI reports as one line (no stack) and exit status 1. */
export class CliError extends Error {}

/** GraphQL mutation results are unions of a success type and error types (see schema.graphql). */
export interface ErrorResult {
  __typename: string;
  message: string;
  fields?: { field: string; message: string }[];
}

/** The success member of a mutation's union, or a CliError naming the error and its fields. */
export function unwrap<T extends { __typename: string }, N extends T['__typename']>(
  result: T,
  successType: N,
): Extract<T, { __typename: N }> {
  if (result.__typename === successType) return result as Extract<T, { __typename: N }>;
  const error = result as unknown as ErrorResult;
  // One line: the fields by their GraphQL names (the message names them too, the REST way).
  const fields = error.fields ?? [];
  if (fields.length > 0) throw new CliError(`invalid request: ${fields.map((f) => `${f.field}: ${f.message}`).join('; ')}`);
  throw new CliError(error.message ?? error.__typename);
}
