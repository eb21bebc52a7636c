/**
 * The one error model on each surface: every failure kind, as the OpenAI-compatible
 * routes answer it (status, type, param, code, Retry-After), as GraphQL's chat answers
 * it (ChatCompletionError, and the subscription's error) and as any other GraphQL
 * field does (extensions.code, the status over HTTP). Then the inference core's own
 * refusals, each with the wire answer it has always had.
 */
import { describe, expect, test } from 'vitest';
import type { EndpointRecord } from '../../src/domain/endpoint.js';
import { clientClosed, type Failure, type FailureKind } from '../../src/domain/errors.js';
import { invalidRequest } from '../../src/domain/request-checks.js';
import { chatErrorOf, graphqlChatError, graphqlErrorOf } from '../../src/http/graphql/errors.js';
import { CUT_EVENTS, openAIErrorOfFailure } from '../../src/http/rest/chat-errors.js';
import { engineFailure, requestRefusal, upstreamInvalid } from '../../src/router/engine-call.js';
import {
  ambiguousModel,
  endpointHoldsNoReplicas,
  endpointNotReady,
  endpointUnavailable,
  modelNotFound,
  modelRequired,
  noReplicaAnswered,
  refused,
  waitedTooLong,
} from '../../src/router/route-errors.js';

type Row = {
  failure: Failure;
  openai: { status: number; type: string; param: string | null; code: string | null; retryAfter?: number };
  graphql: { code: string; status?: number };
};

const ROWS: Record<FailureKind, Row[]> = {
  invalid: [
    {
      failure: invalidRequest('top_p must be at most 1', 'top_p'),
      openai: { status: 400, type: 'invalid_request_error', param: 'top_p', code: 'invalid_value' },
      graphql: { code: 'INVALID_ARGUMENT', status: 400 },
    },
    {
      failure: { kind: 'invalid', message: 'too large', fields: [], reason: 'too_large' },
      openai: { status: 413, type: 'invalid_request_error', param: null, code: 'request_too_large' },
      graphql: { code: 'INVALID_ARGUMENT', status: 413 },
    },
    {
      failure: { kind: 'invalid', message: 'not JSON', fields: [{ field: 'body', message: 'not JSON' }], reason: 'invalid_json' },
      openai: { status: 400, type: 'invalid_request_error', param: 'body', code: 'invalid_json' },
      graphql: { code: 'INVALID_ARGUMENT', status: 400 },
    },
  ],
  unauthenticated: [
    {
      failure: { kind: 'unauthenticated', message: 'no key' },
      openai: { status: 401, type: 'authentication_error', param: null, code: 'invalid_api_key' },
      graphql: { code: 'UNAUTHENTICATED' },
    },
  ],
  forbidden: [
    {
      failure: { kind: 'forbidden', message: 'not yours' },
      openai: { status: 403, type: 'permission_error', param: null, code: 'forbidden' },
      graphql: { code: 'FORBIDDEN' },
    },
  ],
  'not-found': [
    {
      failure: { kind: 'not-found', message: 'none' },
      openai: { status: 404, type: 'not_found_error', param: null, code: 'not_found' },
      graphql: { code: 'NOT_FOUND' },
    },
    {
      failure: modelNotFound('ep_x'),
      openai: { status: 404, type: 'not_found_error', param: 'model', code: 'model_not_found' },
      graphql: { code: 'NOT_FOUND' },
    },
  ],
  conflict: [
    {
      failure: { kind: 'conflict', message: 'taken' },
      openai: { status: 409, type: 'invalid_request_error', param: null, code: 'conflict' },
      graphql: { code: 'CONFLICT' },
    },
  ],
  'invalid-transition': [
    {
      failure: { kind: 'invalid-transition', message: 'no', status: 'TERMINATED', action: 'sleep' },
      openai: { status: 409, type: 'invalid_request_error', param: null, code: 'invalid_transition' },
      graphql: { code: 'INVALID_TRANSITION' },
    },
  ],
  overloaded: [
    {
      failure: { kind: 'overloaded', message: 'slow down', retryAfter: 3 },
      openai: { status: 429, type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded', retryAfter: 3 },
      graphql: { code: 'RESOURCE_EXHAUSTED', status: 429 },
    },
  ],
  unavailable: [
    {
      failure: { kind: 'unavailable', message: 'down', retryAfter: 5, code: 'database_unavailable' },
      openai: { status: 503, type: 'server_error', param: null, code: 'database_unavailable', retryAfter: 5 },
      graphql: { code: 'RESOURCE_EXHAUSTED', status: 503 },
    },
  ],
  upstream: [
    {
      failure: upstreamInvalid(),
      openai: { status: 502, type: 'server_error', param: null, code: 'upstream_invalid' },
      graphql: { code: 'UPSTREAM_DISCONNECTED', status: 502 },
    },
    {
      failure: { kind: 'upstream', message: 'The engine is shutting down', code: 'engine_shutting_down', status: 503 },
      openai: { status: 503, type: 'server_error', param: null, code: 'engine_shutting_down' },
      graphql: { code: 'UPSTREAM_DISCONNECTED', status: 503 },
    },
  ],
  cancelled: [
    {
      failure: clientClosed(),
      openai: { status: 499, type: 'invalid_request_error', param: null, code: 'client_closed' },
      graphql: { code: 'CANCELLED' },
    },
  ],
  internal: [
    {
      failure: { kind: 'internal', message: 'internal error' },
      openai: { status: 500, type: 'server_error', param: null, code: 'internal_error' },
      graphql: { code: 'INTERNAL_SERVER_ERROR' },
    },
  ],
};

describe('every failure kind on every surface', () => {
  const rows = Object.values(ROWS).flat();

  test.each(rows.map((row) => [`${row.failure.kind}: ${row.openai.code}`, row] as const))('%s', (_, { failure, openai, graphql }) => {
    const { retryAfter, ...shape } = openai;
    expect(openAIErrorOfFailure(failure)).toEqual({ message: failure.message, ...shape, ...(retryAfter ? { retryAfter } : {}) });
    // GraphQL's chat error is the OpenAI route's, its field in GraphQL's names.
    expect(chatErrorOf(failure)).toEqual({
      message: failure.message,
      errorType: openai.type,
      code: openai.code,
      param: openai.param === 'top_p' ? 'topP' : openai.param,
      status: openai.status,
      retryAfter: retryAfter ?? null,
    });
    expect(graphqlChatError(failure).extensions).toEqual({
      code: openai.code,
      status: openai.status,
      ...(openai.param ? { param: openai.param === 'top_p' ? 'topP' : openai.param } : {}),
      ...(retryAfter ? { retryAfter } : {}),
    });
    // Any other GraphQL field: the kind's code, and its status over HTTP where a field's failure sets one.
    const error = graphqlErrorOf(failure);
    if (failure.kind === 'internal') return expect(error).toBeUndefined();
    expect(error?.extensions.code).toBe(graphql.code);
    expect((error?.extensions.http as { status?: number } | undefined)?.status).toBe(graphql.status);
  });

  test('the table covers each kind', () => {
    for (const [kind, kindRows] of Object.entries(ROWS)) {
      expect(kindRows.length, kind).toBeGreaterThan(0);
      for (const row of kindRows) expect(row.failure.kind).toBe(kind);
    }
  });
});

describe("the inference core's refusals keep their wire answers", () => {
  const endpoint = { id: 'ep_a', status: 'TERMINATED' } as EndpointRecord;
  test.each([
    [modelRequired(), { status: 400, type: 'invalid_request_error', param: 'model', code: 'missing_required_parameter' }],
    [ambiguousModel('m', ['ep_a', 'ep_b']), { status: 400, type: 'invalid_request_error', param: 'model', code: 'model_ambiguous' }],
    [modelNotFound('m'), { status: 404, type: 'not_found_error', param: 'model', code: 'model_not_found' }],
    [endpointUnavailable(endpoint), { status: 409, type: 'invalid_request_error', param: 'model', code: 'endpoint_not_running' }],
    [endpointHoldsNoReplicas('ep_a'), { status: 409, type: 'invalid_request_error', param: 'model', code: 'endpoint_not_running' }],
    [endpointNotReady('not yet', 30), { status: 503, type: 'server_error', param: null, code: 'endpoint_not_ready', retryAfter: 30 }],
    [noReplicaAnswered('ep_a'), { status: 503, type: 'server_error', param: null, code: 'replica_unavailable', retryAfter: 2 }],
    [
      refused('ep_a', { message: 'too many queued', code: 'queue_full', retryAfterS: 4 }),
      { status: 429, type: 'rate_limit_error', param: null, code: 'queue_full', retryAfter: 4 },
    ],
    [waitedTooLong('ep_a', 30_000, 1), { status: 429, type: 'rate_limit_error', param: null, code: 'queue_full', retryAfter: 1 }],
    [clientClosed(), { status: 499, type: 'invalid_request_error', param: null, code: 'client_closed' }],
  ])('%#: %o', (failure, wire) => {
    expect(openAIErrorOfFailure(failure)).toEqual({ message: failure.message, ...wire });
  });

  test('the messages are the ones clients have always read', () => {
    expect(waitedTooLong('ep_a', 30_000, 1).message).toBe("endpoint 'ep_a' is at capacity: the request waited 30 s for a free slot");
    expect(refused('ep_a', { message: 'too many queued', code: 'queue_full', retryAfterS: 4 }).message).toBe(
      "endpoint 'ep_a': too many queued; retry in 4 s",
    );
    expect(noReplicaAnswered('ep_a').message).toBe("no replica of endpoint 'ep_a' answered; try again");
  });

  test("an engine's answers are read back into the model, and answered as the engine put them", () => {
    const tooLong = {
      error: { message: 'The prompt has 9 tokens', type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' },
    };
    expect(openAIErrorOfFailure(requestRefusal({ status: 400, body: tooLong })!)).toEqual({ status: 400, ...tooLong.error });
    expect(requestRefusal({ status: 503, body: tooLong })).toBeUndefined();
    const shuttingDown = {
      error: { message: 'The engine is shutting down', type: 'server_error', param: null, code: 'engine_shutting_down' },
    };
    expect(openAIErrorOfFailure(engineFailure({ status: 503, body: shuttingDown }))).toEqual({ status: 503, ...shuttingDown.error });
    expect(
      chatErrorOf(engineFailure({ status: 400, body: { error: { ...tooLong.error, param: 'messages[0].tool_call_id' } } })),
    ).toMatchObject({
      status: 400,
      param: 'messages[0].toolCallId',
    });
  });

  test('a streamed answer cut short ends with an OpenAI error event, then [DONE]', () => {
    expect(CUT_EVENTS).toBe(
      'data: {"error":{"message":"The replica serving this request stopped before the answer was complete. Nothing more will come; retry the request.",' +
        '"type":"server_error","param":null,"code":"upstream_disconnected"}}\n\ndata: [DONE]\n\n',
    );
  });
});
