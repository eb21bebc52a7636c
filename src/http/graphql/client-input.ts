/**
 * The GraphQL surface's input boundary, as a yoga plugin: requests that yoga
 * would answer with an empty 415 or a 500 (a content type it cannot read, a
 * GET whose `variables` is not JSON, a body that breaks its parser) answer a
 * 400 or 415 naming the field and the rule; and no operation runs with a
 * string that holds NUL (in its variables or its literals), which no field may
 * hold (TEXT_RULES). Errors take the GraphQL table's shape (./errors.ts).
 */
import { BREAK, GraphQLError, Kind, visit, type DocumentNode, type ValueNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { findNul, TEXT_RULES } from '../../domain/field-checker.js';
import { graphqlInvalidArgument } from './errors.js';

type RequestParser = Parameters<NonNullable<Plugin['onRequestParse']>>[0]['setRequestParser'] extends (parser: infer P) => void ? P : never;

type Params = { query?: string; variables?: Record<string, unknown>; operationName?: string; extensions?: Record<string, unknown> };

const READABLE_TYPES =
  'application/json (or application/graphql+json, application/graphql, application/x-www-form-urlencoded, multipart/form-data)';

function invalid(field: string, message: string, status: 400 | 415 = 400): GraphQLError {
  return graphqlInvalidArgument(`invalid request: ${field}: ${message}`, [{ field, message }], status);
}

/** The GraphQL parameters of a query string (GET) or form body, each JSON one parsed with a 400 naming it. */
function paramsOf(search: URLSearchParams): Params {
  const json = (name: string): Record<string, unknown> | undefined => {
    const text = search.get(name);
    if (!text) return undefined;
    try {
      return JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw invalid(name, 'must be a JSON object');
    }
  };
  return {
    query: search.get('query') || undefined,
    operationName: search.get('operationName') || undefined,
    variables: json('variables'),
    extensions: json('extensions'),
  };
}

/** Where a literal holds NUL, as an argument path (`input.name`), if anywhere. Iterative: literals may nest deep. */
function literalNul(root: ValueNode, rootPath: string): string | undefined {
  const stack: { node: ValueNode; path: string }[] = [{ node: root, path: rootPath }];
  while (stack.length > 0) {
    const { node, path } = stack.pop()!;
    if (node.kind === Kind.STRING) {
      if (node.value.includes('\u0000')) return path;
    } else if (node.kind === Kind.LIST) {
      for (let i = node.values.length - 1; i >= 0; i--) stack.push({ node: node.values[i]!, path: `${path}[${i}]` });
    } else if (node.kind === Kind.OBJECT) {
      for (let i = node.fields.length - 1; i >= 0; i--)
        stack.push({ node: node.fields[i]!.value, path: `${path}.${node.fields[i]!.name.value}` });
    }
  }
  return undefined;
}

/** Documents already looked at (yoga caches parsed documents, so the same object comes back). */
const documentNul = new WeakMap<DocumentNode, string | null>();

function nulInDocument(document: DocumentNode): string | undefined {
  let found = documentNul.get(document);
  if (found === undefined) {
    found = null;
    visit(document, {
      Argument(node) {
        found = literalNul(node.value, node.name.value) ?? null;
        return found ? BREAK : false;
      },
      VariableDefinition(node) {
        found = (node.defaultValue && literalNul(node.defaultValue, `$${node.variable.name.value}`)) ?? null;
        return found ? BREAK : false;
      },
    });
    documentNul.set(document, found);
  }
  return found ?? undefined;
}

function nulError(document: DocumentNode, variables: unknown): GraphQLError | undefined {
  const inVariables = variables && typeof variables === 'object' ? findNul(variables, '') : undefined;
  const field = inVariables !== undefined ? `$${inVariables}` : nulInDocument(document);
  return field === undefined ? undefined : invalid(field, TEXT_RULES.nul);
}

export function useClientInputRules(): Plugin {
  return {
    onRequestParse({ request, requestParser, setRequestParser }) {
      const type = request.headers.get('content-type');
      if (request.method === 'GET') {
        setRequestParser((req) => paramsOf(new URLSearchParams(req.url.slice(req.url.indexOf('?') + 1))));
        return;
      }
      if (request.method !== 'POST') return; // yoga answers 405
      if (type?.split(',')[0]?.split(';')[0]?.trim().toLowerCase() === 'application/x-www-form-urlencoded') {
        setRequestParser(async (req) => paramsOf(new URLSearchParams(await req.text())));
        return;
      }
      if (!requestParser) {
        const got = type === null ? 'none' : JSON.stringify(type.slice(0, 100));
        setRequestParser(() => {
          throw invalid('Content-Type', `must be ${READABLE_TYPES} (got ${got})`, 415);
        });
        return;
      }
      const parse = requestParser;
      setRequestParser((async (req: Request) => {
        try {
          return await parse(req);
        } catch (error) {
          const status = (error as GraphQLError).extensions?.http as { status?: number } | undefined;
          // Its own 413 (a multipart part too large) stands; anything else the parser refused is the body's fault.
          if (error instanceof GraphQLError && status?.status !== undefined && status.status !== 400) throw error;
          const why = error instanceof Error ? error.message : String(error);
          throw invalid(
            'body',
            `must be a readable ${type?.split(';')[0] ?? 'request'} body holding a GraphQL request (${why.slice(0, 200)})`,
          );
        }
      }) as RequestParser);
    },
    onExecute({ args, setResultAndStopExecution }) {
      const error = nulError(args.document, args.variableValues);
      if (error) setResultAndStopExecution({ errors: [error] });
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      const error = nulError(args.document, args.variableValues);
      if (error) setResultAndStopExecution({ errors: [error] });
    },
  };
}
