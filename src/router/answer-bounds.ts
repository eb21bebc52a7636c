/**
 * The bounds on a replica's answer that the relay enforces, so that an engine
 * gone wrong (an engine of one's own, a wedged GPU) cannot hold a gateway's
 * memory or a request's slot: how many bytes an answer read whole, or one
 * event of a stream, may take, and how long the replica may send nothing.
 */
import type { GenerationRequest } from '../domain/chat-request.js';
import type { Sampling } from '../domain/sampling.js';

/** What any answer may take besides its tokens: its JSON, ids, a tool call's structure, the usage. */
const ANSWER_BASE_BYTES = 1024 * 1024;
/** A token's text in JSON, escapes included, with room to spare (a token is a few characters). */
const TOKEN_BYTES = 64;
/** One logprobs entry (its token, logprob and bytes), for the token and each of its alternatives. */
const LOGPROB_ENTRY_BYTES = 192;
/** The ceiling whatever the limits: an answer larger than this is to be streamed. */
export const ANSWER_MAX_BYTES = 64 * 1024 * 1024;

/**
 * The most bytes a well-formed answer to `request` can take (read whole, or as
 * one event of a stream, which is never larger than the whole answer): 1 MiB,
 * and 64 bytes per token it may generate (its max_tokens, at most the version's
 * max_token_count), with 192 more per token and alternative when it asks for
 * logprobs; at most 64 MiB. 1.25 MiB for the default 4096 tokens.
 */
export function answerBytesLimit(
  request: Pick<GenerationRequest, 'maxTokens'> & { sampling: Pick<Sampling, 'logprobs' | 'topLogprobs'> },
  maxTokenCount: number,
): number {
  const tokens = Math.min(request.maxTokens ?? maxTokenCount, maxTokenCount);
  const { logprobs, topLogprobs } = request.sampling;
  const perToken = TOKEN_BYTES + (logprobs ? LOGPROB_ENTRY_BYTES * (1 + topLogprobs) : 0);
  return Math.min(ANSWER_MAX_BYTES, ANSWER_BASE_BYTES + tokens * perToken);
}

/** The replica sent nothing of an answer for the idle bound (ENGINE_IDLE_TIMEOUT_MS): the relay ends it as cut. */
export class UpstreamIdleError extends Error {
  constructor(readonly idleMs: number) {
    super(`the replica sent nothing for ${idleMs} ms`);
    this.name = 'UpstreamIdleError';
  }
}

/**
 * Calls `onIdle` once when the replica has sent nothing for `idleMs` while
 * the relay waited on it. The wait counts only between `resume` and the next
 * `pause`: the relay pauses while it works and while its client holds it back
 * (that is the stall guard's), and resumes when it waits for the replica
 * again. One timer per answer, moved lazily: `resume` for every chunk only
 * notes the time. `idleMs` 0: no bound.
 */
export class IdleBound {
  private timer: NodeJS.Timeout | undefined;
  private since = 0;
  private paused = true;
  private stopped = false;

  constructor(
    private readonly idleMs: number,
    private readonly onIdle: () => void,
  ) {}

  /** The relay waits for the replica from now. */
  resume(): void {
    if (this.idleMs <= 0 || this.stopped) return;
    this.since = performance.now();
    this.paused = false;
    if (!this.timer) this.schedule(this.idleMs);
  }

  /** The relay is not waiting on the replica (it works, or its client is behind). */
  pause(): void {
    this.paused = true;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.stopped) return;
      if (this.paused) return; // the next resume schedules again
      const waited = performance.now() - this.since;
      if (waited < this.idleMs) return this.schedule(this.idleMs - waited);
      this.stop();
      this.onIdle();
    }, delayMs);
  }
}
