/**
 * The errors of a replica's answer that went wrong after it began, as the relay (relay.ts) ends and records it: cut
 * (the replica stopped), too large, or not the JSON it should be. The surfaces answer their code and message
 * (src/http/failures.ts, src/http/rest/chat-errors.ts).
 */

/** The error of an answer whose replica stopped before it was complete (the engine died or its connection broke). */
export const UPSTREAM_CUT = {
  code: 'upstream_disconnected',
  message: 'The replica serving this request stopped before the answer was complete. Nothing more will come; retry the request.',
} as const;

/** The error of a replica's answer that is not what it should be: read whole or as one event, over its bound (answer-bounds.ts). */
export const UPSTREAM_TOO_LARGE = {
  code: 'upstream_invalid',
  message: 'The replica sent an answer larger than this request can produce. It was cut; retry the request.',
} as const;

/** The error of a replica's answer, or one event of its stream, that is not the JSON it should be (an engine of one's own gone wrong). */
export const UPSTREAM_NOT_JSON = {
  code: 'upstream_invalid',
  message: 'The replica sent an answer that is not valid JSON.',
} as const;

/**
 * Thrown by the relay's readers when the replica's answer broke off (`UPSTREAM_CUT`), or was cut here for what it
 * was (`UPSTREAM_TOO_LARGE`, `UPSTREAM_NOT_JSON`); the surfaces answer its code and message (src/http/failures.ts).
 */
export class UpstreamCutError extends Error {
  readonly code: string;
  constructor(cause?: unknown, error: { code: string; message: string } = UPSTREAM_CUT) {
    super(error.message, { cause });
    this.name = 'UpstreamCutError';
    this.code = error.code;
  }
}

/** The status a request ended by an error after its 200 is recorded with, as the same failure before it would have been. */
export const FAILED_ANSWER_STATUS = 502;
