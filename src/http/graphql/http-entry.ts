/**
 * GraphQL over HTTP, before yoga: every GET and POST to /graphql comes here.
 *
 * - A POST's key is checked before its body is read: without a valid one the
 *   answer (401, 403) comes at once and the connection closes, so an
 *   anonymous client cannot make the gateway read or parse anything. The
 *   body is then read with the gateway's limit (413 past 1 MiB).
 * - Subscriptions are served here, as SSE (sse.ts), whatever the client's
 *   Accept allows it (`text/event-stream`, a wildcard, none): their streams
 *   are counted per user and watched, so a revoked key or lost access ends
 *   them. yoga itself refuses any subscription that reaches it (see yoga.ts).
 *   They run through yoga's own envelop pipeline (`yoga.getEnveloped`: parser
 *   cache, validation, context, masked errors, shared execution).
 *
 * Anything that is not a well-formed, authenticated, valid subscription
 * (queries, parse or validation errors) is handed to yoga with the body
 * already read, so every error keeps yoga's exact answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { getOperationAST, type DocumentNode, type ExecutionResult } from 'graphql';
import type { AccessWatch } from '../../live/access-watch.js';
import type { SubscriptionQuota } from '../../live/subscription-quota.js';
import type { Services } from '../../services/index.js';
import type { Principal } from '../../services/principal.js';
import { authenticate, credentialsOfRequest, header } from '../authenticate.js';
import { BODY_TOO_LARGE_MESSAGE, readBodyText, sendJson, unsupportedEncoding } from '../body.js';
import { failureOfDomainError } from '../../domain/errors.js';
import { requestIdOf, type Log } from '../request-id.js';
import type { GatewayYoga } from './context.js';
import { sendGraphQLFailure } from './errors.js';
import { SseNextEvents, writeSseResponse } from './sse.js';
import { endsByItself } from './finite-operations.js';

interface Params {
  query: string;
  variables?: Record<string, unknown>;
  operationName?: string;
  extensions?: Record<string, unknown>;
}

/** Whether the client takes an event stream: it names it, or takes anything (no Accept, or a wildcard). */
function allowsEventStream(req: IncomingMessage): boolean {
  const accept = req.headers.accept;
  return accept === undefined || /text\/event-stream|\*\/\*|text\/\*/.test(accept);
}

const GRAPHIQL_OFF =
  'GraphiQL is off on this gateway (GRAPHQL_INTROSPECTION is false, the default with NODE_ENV=production): POST GraphQL operations here with an API key, or start the gateway with GRAPHQL_INTROSPECTION=true';

/** A document without this word holds no subscription: it goes to yoga without being parsed here. */
const SUBSCRIPTION_KEYWORD = /\bsubscription\b/;

/** Answers that leave a request's body unread close its connection (Node would otherwise read the rest to reuse it). */
const CLOSE = { connection: 'close' };

function paramsOf(value: unknown): Params | null {
  if (typeof value !== 'object' || value === null) return null;
  const { query, variables, operationName, extensions } = value as Record<string, unknown>;
  if (typeof query !== 'string') return null;
  const isObject = (v: unknown) => v == null || (typeof v === 'object' && !Array.isArray(v));
  if (!isObject(variables) || !isObject(extensions) || (operationName != null && typeof operationName !== 'string')) return null;
  return {
    query,
    ...(variables ? { variables: variables as Record<string, unknown> } : {}),
    ...(operationName ? { operationName: operationName as string } : {}),
    ...(extensions ? { extensions: extensions as Record<string, unknown> } : {}),
  };
}

function paramsFromUrl(url: URL): Params | null {
  const json = (name: string): unknown => {
    const raw = url.searchParams.get(name);
    if (raw === null) return undefined;
    try {
      return JSON.parse(raw);
    } catch {
      return null; // present but not JSON: not ours to answer
    }
  };
  const variables = json('variables');
  const extensions = json('extensions');
  if (variables === null || extensions === null) return null;
  return paramsOf({ query: url.searchParams.get('query'), variables, operationName: url.searchParams.get('operationName'), extensions });
}

/** With `access`, a stream whose key is revoked or whose team access changes ends with an error event. */
export function createGraphQLHttp(
  yoga: GatewayYoga,
  services: Services,
  log: Log,
  options: {
    access?: AccessWatch;
    quota?: SubscriptionQuota;
    graphiql: boolean;
    stallMs: number;
    /** Marks a response that streams a subscription ending by itself (a chat completion), which a drain lets finish. */
    finite?: (res: ServerResponse) => void;
  },
) {
  const { access, quota } = options;
  /** Hands the request to yoga, with the body this path already read. */
  const toYoga = (req: IncomingMessage, res: ServerResponse, body: string | undefined, principal?: Principal) => {
    // whatwg-node reads a consumed request's body from `req.body` (as Express leaves it).
    if (body !== undefined) (req as IncomingMessage & { body?: string }).body = body === '' ? ' ' : body;
    // The caller this path already authenticated is yoga's too (its context does not look the key up again).
    void yoga(req, res, principal ? { principal } : {});
  };

  return async function handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    let body: string | undefined;
    let params: Params | null = null;
    const credentials = credentialsOfRequest(req);
    // Read before the key is looked up: an access change announced meanwhile is seen by the watch.
    const epoch = access?.epoch ?? 0;
    /** The caller, once authenticated (a POST's before its body is read; a GET's only for a subscription). */
    let caller: Principal | undefined;
    if (req.method === 'POST') {
      // The key before the body: a request without a valid one is answered unread, and its connection closed.
      const auth = await authenticate(services, credentials);
      if (auth.type === 'error') return sendGraphQLFailure(res, failureOfDomainError(auth.error), requestIdOf(req), CLOSE);
      const encoded = unsupportedEncoding(req);
      if (encoded) return sendGraphQLFailure(res, encoded.failure, requestIdOf(req), CLOSE);
      const text = await readBodyText(req, res);
      if (text === null)
        return sendGraphQLFailure(
          res,
          { kind: 'invalid', message: BODY_TOO_LARGE_MESSAGE, fields: [], reason: 'too_large' },
          requestIdOf(req),
          CLOSE,
        );
      body = text;
      // The key again, now that the body has arrived (from the cache the revocations clear): a key revoked, or a
      // member removed, while a slow client sent its body acts no more once that revocation has returned.
      const again = await authenticate(services, credentials);
      if (again.type === 'error') return sendGraphQLFailure(res, failureOfDomainError(again.error), requestIdOf(req), CLOSE);
      caller = again.value;
      // No subscription in it (most requests): yoga reads it, unparsed here.
      if (!SUBSCRIPTION_KEYWORD.test(text)) return toYoga(req, res, body, caller);
      if (header(req, 'content-type')?.includes('json')) {
        try {
          params = paramsOf(JSON.parse(text));
        } catch {
          params = null;
        }
      }
    } else if (req.method === 'GET') {
      params = paramsFromUrl(url);
      // A browser opening /graphql where GraphiQL is off: say so, instead of yoga's empty 406.
      if (!params && !options.graphiql && /text\/html/.test(req.headers.accept ?? '')) {
        return sendJson(res, 404, { errors: [{ message: GRAPHIQL_OFF, extensions: { code: 'NOT_FOUND' } }] });
      }
    }
    // Not a JSON operation, or an answer only yoga gives (GraphiQL, CORS preflights, errors): yoga answers it.
    if (!params || !allowsEventStream(req) || !SUBSCRIPTION_KEYWORD.test(params.query)) return toYoga(req, res, body);

    if (!caller) {
      const auth = await authenticate(services, credentials);
      if (auth.type === 'error') return toYoga(req, res, body);
      caller = auth.value;
    }
    // Gone while it was authenticated: nothing to open (its close has passed, so nothing opened now would be closed).
    if (res.destroyed) return;
    // Watched while the response is open: a change of access ends the stream with an error event.
    const connection = access?.open(credentials, caller, epoch, () => {});
    if (connection) res.once('close', () => connection.close());
    const watched = connection?.subscription();
    const sink = new SseNextEvents(res);
    const gone = new AbortController();
    res.once('close', () => gone.abort());
    const enveloped = yoga.getEnveloped({
      principal: watched?.principal ?? caller,
      transport: 'sse',
      signal: gone.signal,
      params,
      resultSink: watched ? watched.sink(sink) : sink,
    });
    let document: DocumentNode;
    try {
      document = enveloped.parse(params.query);
    } catch {
      return toYoga(req, res, body);
    }
    const operation = getOperationAST(document, params.operationName);
    if (operation?.operation !== 'subscription') return toYoga(req, res, body);
    try {
      if (enveloped.validate(enveloped.schema, document).length > 0) return toYoga(req, res, body);
    } catch {
      // An operation over a limit (limits.ts throws it): yoga answers it, with its status.
      return toYoga(req, res, body);
    }
    // One of the user's places for as long as the stream is open.
    const release = quota?.take(caller.user.id);
    if (quota && !release) return sendJson(res, 429, { errors: [{ message: quota.refusal, extensions: { code: 'RESOURCE_EXHAUSTED' } }] });
    if (release) res.once('close', release);
    // Before its head is written: a drain that started meanwhile sees, as the head goes, that it is not to be ended.
    if (endsByItself(document, params.operationName)) options.finite?.(res);

    const contextValue = await enveloped.contextFactory();
    const stream = (await enveloped.subscribe({
      schema: enveloped.schema,
      document,
      operationName: params.operationName,
      variableValues: params.variables,
      contextValue,
    })) as ExecutionResult | AsyncIterable<ExecutionResult>;
    // Events that the watch can end (an access change); a single result (errors before the stream) is written as it is.
    const events = watched && Symbol.asyncIterator in stream ? watched.watch(stream) : stream;
    // Handed over: this frame (the body, the document, the context) is not kept for the stream's life.
    return writeSseResponse(res, events, requestIdOf(req), log, options.stallMs);
  };
}
