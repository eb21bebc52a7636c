/**
 * What one GraphQL operation may ask, checked before anything runs: its size
 * in tokens (while parsing), its depth, aliases and directives (GraphQL Armor's
 * validation rules), and its cost, where a list multiplies what it selects by
 * its page size (`@pothos/plugin-complexity`, see `builder.ts`). Introspection
 * can be turned off here too.
 *
 * Every transport runs operations through `yoga.getEnveloped`, so one envelop
 * plugin covers HTTP, SSE and WebSocket alike. An operation over a limit is
 * answered as a validation error: status 400 over HTTP, an `error` message
 * over WebSocket, and no context (so no authentication, no SQL) is built for it.
 *
 * Introspection fields (`__schema`, `__type`) count for neither depth nor
 * cost, so that GraphiQL's and codegen's 15-deep introspection query passes;
 * graphql-js's own MaxIntrospectionDepthRule (a specified rule) caps how
 * deeply their lists nest, and GRAPHQL_INTROSPECTION turns them off.
 */
import { maxAliasesRule } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import { maxDirectivesRule } from '@escape.tech/graphql-armor-max-directives';
import { MaxTokensParserWLexer } from '@escape.tech/graphql-armor-max-tokens';
import { createComplexityRule } from '@pothos/plugin-complexity';
import {
  GraphQLError,
  Kind,
  NoSchemaIntrospectionCustomRule,
  validate,
  type DocumentNode,
  type GraphQLSchema,
  type ParseOptions,
  type Source,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';

export interface GraphQLLimits {
  /** Deepest field nesting (fragments do not add levels). */
  maxDepth: number;
  /** Aliased fields in one operation. */
  maxAliases: number;
  /** Directives in one operation. */
  maxDirectives: number;
  /** Lexical tokens in one document. */
  maxTokens: number;
  /** Estimated cost: every field 1, what a list selects times its page size (see `builder.ts`). */
  maxCost: number;
}

export interface GraphQLSecurityOptions {
  limits: GraphQLLimits;
  /** Introspection (`__schema`, `__type`) and GraphiQL. */
  introspection: boolean;
}

/** Every operation in `src/sdk/operations` fits well inside these. */
export const DEFAULT_GRAPHQL_LIMITS: Readonly<GraphQLLimits> = {
  maxDepth: 10,
  maxAliases: 15,
  maxDirectives: 20,
  maxTokens: 1000,
  maxCost: 10_000,
};

/** The variable that sets each limit, named in its error. */
export const LIMIT_VARIABLES: Readonly<Record<keyof GraphQLLimits, string>> = {
  maxDepth: 'GRAPHQL_MAX_DEPTH',
  maxAliases: 'GRAPHQL_MAX_ALIASES',
  maxDirectives: 'GRAPHQL_MAX_DIRECTIVES',
  maxTokens: 'GRAPHQL_MAX_TOKENS',
  maxCost: 'GRAPHQL_MAX_COST',
};

/**
 * The `http` extension of a refused operation: 400 whatever the Accept
 * header. yoga answers errors it marks `spec: true` with 200 to
 * `application/json` clients (the GraphQL-over-HTTP legacy rule), and marks
 * every parse and validation error so (`spec ||= true`); but a refused
 * operation should not look like a served one, so `spec` stays false here.
 */
function badRequest(): { status: number; spec: boolean } {
  return {
    status: 400,
    get spec() {
      return false;
    },
    set spec(_ignored: boolean) {},
  };
}

/** The error of an operation over a limit: a 400 whose message and extensions name the limit. */
export function limitError(limit: keyof GraphQLLimits, message: string, max: number, actual?: number): GraphQLError {
  return new GraphQLError(`${message} (${LIMIT_VARIABLES[limit]})`, {
    extensions: {
      code: 'QUERY_LIMIT_EXCEEDED',
      limit: LIMIT_VARIABLES[limit],
      max,
      ...(actual !== undefined ? { actual } : {}),
      http: badRequest(),
    },
  });
}

function tooDeeplyNested(): GraphQLError {
  return new GraphQLError(`The document nests too deeply to be read (${LIMIT_VARIABLES.maxDepth}).`, {
    extensions: { code: 'QUERY_LIMIT_EXCEEDED', limit: LIMIT_VARIABLES.maxDepth, http: badRequest() },
  });
}

/** graphql-js's rule against `__schema` and `__type`, its errors a 400 that names GRAPHQL_INTROSPECTION. */
const noIntrospection: ValidationRule = (context) =>
  NoSchemaIntrospectionCustomRule(
    Object.create(context, {
      reportError: {
        value: (error: GraphQLError) =>
          context.reportError(
            new GraphQLError(`${error.message} (GRAPHQL_INTROSPECTION)`, {
              nodes: error.nodes ?? null,
              extensions: { code: 'INTROSPECTION_DISABLED', http: badRequest() },
            }),
          ),
      },
    }) as ValidationContext,
  );

/** `found N` of a GraphQL Armor message, which it does not hand over otherwise. */
function foundIn(error: GraphQLError): number | undefined {
  const match = /found (\d+)/.exec(error.message);
  return match ? Number(match[1]) : undefined;
}

type ArmorRule = (options: {
  n: number;
  propagateOnRejection: boolean;
  onReject: ((context: ValidationContext | null, error: GraphQLError) => void)[];
  flattenFragments?: boolean;
  ignoreIntrospection?: boolean;
}) => ValidationRule;

/** A GraphQL Armor rule that reports (rather than throws) an error naming our limit. */
function armorRule(
  rule: ArmorRule,
  limit: keyof GraphQLLimits,
  what: string,
  max: number,
  extra: { flattenFragments?: boolean } = {},
): ValidationRule {
  return rule({
    n: max,
    ...extra,
    propagateOnRejection: false,
    onReject: [
      (context, error) => {
        const actual = foundIn(error);
        context?.reportError(limitError(limit, `${what} ${actual ?? 'over the limit'} exceeds the limit of ${max}.`, max, actual));
      },
    ],
  });
}

/** parse with a token budget; a document nested past the stack is an error like any other, not a crash. */
function parseWithin(maxTokens: number) {
  return (source: string | Source, options?: ParseOptions): DocumentNode => {
    const parser = new MaxTokensParserWLexer(source, { ...options, n: maxTokens, propagateOnRejection: true } as never);
    try {
      return parser.parseDocument();
    } catch (error) {
      if (parser.tokenCount > maxTokens) throw limitError('maxTokens', `The document has more than ${maxTokens} tokens.`, maxTokens);
      if (error instanceof RangeError) throw tooDeeplyNested();
      throw error;
    }
  };
}

interface OperationParams {
  variables?: Record<string, unknown>;
  operationName?: string | null;
}

/**
 * Costs measured before, by document (yoga's parser cache hands back the same document for the same text), then by
 * what else a cost depends on: the operation's name and the values of the Int variables (a page size, `first: $n`;
 * no other variable can reach what is counted) and, should the measure ever follow `@include`/`@skip` (it counts
 * both branches today), the Boolean ones. Only a measured cost is kept (a null, "variables that do not coerce", is
 * measured again on the next request), at most MEASURED_PER_DOCUMENT per document.
 */
const measured = new WeakMap<DocumentNode, Map<string, number>>();
const MEASURED_PER_DOCUMENT = 32;

function costKey(document: DocumentNode, params: OperationParams | undefined): string {
  const parts = [params?.operationName ?? ''];
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    for (const variable of definition.variableDefinitions ?? []) {
      const type = variable.type.kind === Kind.NON_NULL_TYPE ? variable.type.type : variable.type;
      if (type.kind !== Kind.NAMED_TYPE || (type.name.value !== 'Int' && type.name.value !== 'Boolean')) continue;
      const value = params?.variables?.[variable.variable.name.value];
      // A value of another kind does not coerce to Int or Boolean, whatever it is: its kind is enough.
      parts.push(typeof value === 'number' || typeof value === 'boolean' ? String(value) : value === null ? 'null' : typeof value);
    }
  }
  return parts.join('\0');
}

/** The largest cost among the document's operations that can be measured (null: none could, e.g. variables that do not coerce). */
function costOf(schema: GraphQLSchema, document: DocumentNode, context: object, params: OperationParams | undefined): number | null {
  const key = costKey(document, params);
  const known = measured.get(document);
  const hit = known?.get(key);
  if (hit !== undefined) return hit;
  const cost = measureCost(schema, document, context, params);
  if (cost !== null) {
    const costs = known ?? new Map<string, number>();
    if (!known) measured.set(document, costs);
    if (costs.size < MEASURED_PER_DOCUMENT) costs.set(key, cost);
  }
  return cost;
}

function measureCost(schema: GraphQLSchema, document: DocumentNode, context: object, params: OperationParams | undefined): number | null {
  let cost: number | null = null;
  const rule = createComplexityRule({
    context,
    variableValues: params?.variables ?? {},
    ...(params?.operationName ? { operationName: params.operationName } : {}),
    // Only the measure: unknown operations and bad variables are reported by execution, as before.
    validate: () => {},
    onResult: (state) => {
      cost = Math.max(cost ?? 0, state.complexity);
    },
  });
  validate(schema, document, [rule]);
  return cost;
}

/**
 * The envelop plugin. The token budget replaces the parser; depth, aliases,
 * directives and introspection are validation rules, whose verdict yoga caches
 * per document. Cost depends on the variables (`first: $n`), so it is measured
 * on every request after validation, and an operation over budget is thrown
 * rather than returned, so that the cache never keeps it as the document's
 * verdict.
 */
export function useOperationLimits(options: GraphQLSecurityOptions): Plugin {
  const { limits } = options;
  const rules: ValidationRule[] = [
    armorRule(maxDepthRule as ArmorRule, 'maxDepth', 'Query depth', limits.maxDepth, { flattenFragments: true }),
    armorRule(maxAliasesRule as ArmorRule, 'maxAliases', 'Aliases count', limits.maxAliases),
    armorRule(maxDirectivesRule as ArmorRule, 'maxDirectives', 'Directives count', limits.maxDirectives),
    ...(options.introspection ? [] : [noIntrospection]),
  ];
  const parse = parseWithin(limits.maxTokens);
  return {
    onParse({ setParseFn }) {
      setParseFn(parse);
    },
    onValidate({ addValidationRule, setValidationFn, validateFn, params, context }) {
      for (const rule of rules) addValidationRule(rule);
      setValidationFn((...args: Parameters<typeof validate>) => {
        try {
          return validateFn(...args);
        } catch (error) {
          if (error instanceof RangeError) return [tooDeeplyNested()];
          throw error;
        }
      });
      return ({ valid }) => {
        if (!valid) return;
        let cost: number | null;
        try {
          cost = costOf(params.schema, params.documentAST, context, (context as { params?: OperationParams }).params);
        } catch (error) {
          if (error instanceof RangeError) throw tooDeeplyNested();
          throw error;
        }
        if (cost !== null && cost > limits.maxCost) {
          throw limitError('maxCost', `Query cost ${cost} exceeds the limit of ${limits.maxCost}.`, limits.maxCost, cost);
        }
      };
    },
  };
}
