/**
 * The sampling controls of a chat request beyond temperature and top_p: OpenAI's penalties,
 * `logit_bias` and `logprobs`/`top_logprobs`, and the documented API's `top_k`, `min_p` and
 * `repetition_penalty`. Checked here as far as the request alone allows; what depends on the
 * model (a token id within its vocabulary, top_k within its size) the engine checks
 * (src/engine/sampling-options.ts).
 */
import { isObject } from './field-checker.js';
import { describe, fail, isTokenId, MAX_TOKEN_ID } from './request-checks.js';

export type Sampling = {
  /** 0: no top-k filtering. */
  topK: number;
  /** 0: no min-p filtering. */
  minP: number;
  presencePenalty: number;
  frequencyPenalty: number;
  /** 1: none. */
  repetitionPenalty: number;
  /** Token id to the bias added to its logit; -100 bans the token. */
  logitBias: ReadonlyMap<number, number>;
  logprobs: boolean;
  /** Alternatives listed per token (0–20), with logprobs only. */
  topLogprobs: number;
};

const SAMPLING_LIMITS = {
  /** OpenAI's range for each penalty. */
  penalty: 2,
  /** repetition_penalty: above 0, at most this (1 is none). */
  maxRepetitionPenalty: 10,
  /** Entries of logit_bias. */
  logitBiasEntries: 300,
  /** A bias is within ±100; -100 bans the token. */
  bias: 100,
  /** top_logprobs, as OpenAI's. */
  topLogprobs: 20,
  /** top_k, before the engine checks it against the vocabulary. */
  topK: MAX_TOKEN_ID,
} as const;

/** A token id as logit_bias keys spell it: a decimal integer without sign or leading zeros. */
const TOKEN_ID = /^(0|[1-9][0-9]{0,9})$/;

function number(body: Record<string, unknown>, name: string, fallback: number, check: (v: number) => boolean, rule: string): number {
  const value = body[name];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || !check(value)) fail(`${name} ${rule} (got ${describe(value)})`, name);
  return value;
}

function parseLogitBias(value: unknown): Map<number, number> {
  const param = 'logit_bias';
  const out = new Map<number, number>();
  if (value === undefined || value === null) return out;
  if (!isObject(value)) fail(`${param} must be an object of token ids to biases (got ${describe(value)})`, param);
  const entries = Object.entries(value);
  if (entries.length > SAMPLING_LIMITS.logitBiasEntries)
    fail(`${param} may have at most ${SAMPLING_LIMITS.logitBiasEntries} entries (got ${entries.length})`, param);
  for (const [key, bias] of entries) {
    const id = TOKEN_ID.test(key) ? Number(key) : NaN;
    if (!isTokenId(id))
      fail(`${param} keys must be token ids (non-negative integers, as strings; got ${JSON.stringify(key.slice(0, 40))})`, param);
    const at = `${param}.${key}`;
    if (typeof bias !== 'number' || !Number.isFinite(bias) || Math.abs(bias) > SAMPLING_LIMITS.bias)
      fail(`${at} must be a number from -${SAMPLING_LIMITS.bias} to ${SAMPLING_LIMITS.bias} (got ${describe(bias)})`, at);
    if (bias !== 0) out.set(id, bias);
  }
  return out;
}

/** The sampling controls of a decoded body; the first field that breaks its rule is refused (`fail`). */
export function parseSampling(body: Record<string, unknown>): Sampling {
  const { penalty, maxRepetitionPenalty, topLogprobs: maxTop } = SAMPLING_LIMITS;
  const withinPenalty = (v: number) => v >= -penalty && v <= penalty;
  const topK = number(
    body,
    'top_k',
    0,
    (v) => Number.isInteger(v) && v >= 0 && v <= SAMPLING_LIMITS.topK,
    'must be an integer of 0 (no filtering) or more',
  );
  const minP = number(body, 'min_p', 0, (v) => v >= 0 && v <= 1, 'must be between 0 and 1');
  const presencePenalty = number(body, 'presence_penalty', 0, withinPenalty, `must be between -${penalty} and ${penalty}`);
  const frequencyPenalty = number(body, 'frequency_penalty', 0, withinPenalty, `must be between -${penalty} and ${penalty}`);
  const repetitionPenalty = number(
    body,
    'repetition_penalty',
    1,
    (v) => v > 0 && v <= maxRepetitionPenalty,
    `must be above 0 and at most ${maxRepetitionPenalty} (1 is no penalty)`,
  );
  const logitBias = parseLogitBias(body.logit_bias);
  const logprobs = body.logprobs ?? false;
  if (typeof logprobs !== 'boolean') fail(`logprobs must be a boolean (got ${describe(logprobs)})`, 'logprobs');
  const topLogprobs = number(
    body,
    'top_logprobs',
    0,
    (v) => Number.isInteger(v) && v >= 0 && v <= maxTop,
    `must be an integer from 0 to ${maxTop}`,
  );
  if (topLogprobs > 0 && !logprobs) fail('top_logprobs needs logprobs: true', 'top_logprobs');
  return { topK, minP, presencePenalty, frequencyPenalty, repetitionPenalty, logitBias, logprobs, topLogprobs };
}
