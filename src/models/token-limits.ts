/**
 * The token limits a replica runs with. Given limits are checked against the
 * model's trained context; limits that were left out follow the model:
 * max_token_count becomes its context, bounded by the KV cache that fits the
 * instance's memory beside the weights, and max_input_length min(2048,
 * max_token_count). A limit that cannot fit fails the start with a
 * SettingsError that says what to change.
 */
import { stat } from 'node:fs/promises';
import { DEFAULT_ADVANCED, LIMITS, type AdvancedConfig } from '../domain/endpoint-spec.js';
import type { GgufHeader } from './gguf-header.js';
import { SettingsError } from './model-store.js';

export interface TokenLimits {
  maxTokenCount: number;
  maxInputLength: number;
}

/** The share of the instance's memory the weights and KV cache may fill (the rest: compute buffers). */
const MEMORY_SHARE = 0.85;

const AFTER = 'with an update, then restart the endpoint';

function numberOf(header: GgufHeader, key: string): number | undefined {
  const value = header.metadata.get(key);
  return typeof value === 'number' ? value : typeof value === 'bigint' ? Number(value) : undefined;
}

/** Bytes of f16 KV cache one token of one sequence takes, when the header says. */
export function kvBytesPerToken(header: GgufHeader): number | undefined {
  const arch = header.metadata.get('general.architecture');
  if (typeof arch !== 'string') return undefined;
  const layers = numberOf(header, `${arch}.block_count`);
  const heads = numberOf(header, `${arch}.attention.head_count`);
  const kvHeads = numberOf(header, `${arch}.attention.head_count_kv`) ?? heads;
  const embedding = numberOf(header, `${arch}.embedding_length`);
  const headDim = heads && embedding ? embedding / heads : undefined;
  const keyLength = numberOf(header, `${arch}.attention.key_length`) ?? headDim;
  const valueLength = numberOf(header, `${arch}.attention.value_length`) ?? headDim;
  if (!layers || !kvHeads || !keyLength || !valueLength) return undefined;
  return layers * kvHeads * (keyLength + valueLength) * 2;
}

/** Tokens per sequence whose KV cache fits `memoryBytes` beside the weights, for `sequences` sequences. */
export async function tokensThatFit(
  header: GgufHeader,
  modelPath: string,
  memoryBytes: number,
  sequences: number,
): Promise<number | undefined> {
  const perToken = kvBytesPerToken(header);
  if (!perToken) return undefined;
  const weights = (await stat(modelPath)).size;
  const free = memoryBytes * MEMORY_SHARE - weights;
  // A model that does not fit at all is the engine's to report (INFERENCE_ENGINE_MEMORY_ERROR).
  if (free <= 0) return undefined;
  return Math.floor(free / (perToken * sequences));
}

/** The limits to run with, from the settings, the model's context and (for defaults) the tokens that fit memory. */
export function resolveTokenLimits(advanced: AdvancedConfig, context: number | undefined, fit: number | undefined): TokenLimits {
  const autoTotal = advanced.maxTokenCountAuto === true;
  const autoInput = advanced.maxInputLengthAuto === true;
  let maxTokenCount = advanced.maxTokenCount;
  if (autoTotal) {
    const bound = Math.min(context ?? DEFAULT_ADVANCED.maxTokenCount, fit ?? Infinity, LIMITS.maxTokens);
    maxTokenCount = Math.max(1, bound);
  }
  const maxInputLength = autoInput ? Math.min(DEFAULT_ADVANCED.maxInputLength, maxTokenCount) : advanced.maxInputLength;
  if (context !== undefined && !autoInput && maxInputLength > context) {
    throw new SettingsError(
      `max_input_length (${maxInputLength}) is larger than the model's context (${context} tokens)`,
      `lower max_input_length to at most ${Math.min(context, maxTokenCount)} ${AFTER}`,
    );
  }
  if (context !== undefined && !autoTotal && maxTokenCount > context) {
    throw new SettingsError(
      `max_token_count (${maxTokenCount}) is larger than the model's context (${context} tokens)`,
      `lower max_token_count to at most ${context} (or leave it out to use the model's context) ${AFTER}`,
    );
  }
  if (maxInputLength > maxTokenCount) {
    throw new SettingsError(
      `max_input_length (${maxInputLength}) is larger than max_token_count (${maxTokenCount}, from the model's context and the instance's memory)`,
      `lower max_input_length to at most ${maxTokenCount} ${AFTER}`,
    );
  }
  return { maxTokenCount, maxInputLength };
}

/**
 * The limits a replica runs with where the gateway does not read the model (an engine run through ENGINE_COMMAND, or
 * a model fetched where the replica runs, as on Kubernetes): the version's own. A max_token_count left to follow the
 * model is the placeholder there (DEFAULT_ADVANCED.maxTokenCount), which a larger max_input_length contradicts: the
 * start fails with what to change, before any download or engine start.
 */
export function givenTokenLimits(advanced: AdvancedConfig): TokenLimits {
  const { maxTokenCount, maxInputLength } = advanced;
  if (maxInputLength > maxTokenCount) {
    const why = advanced.maxTokenCountAuto ? ': max_token_count follows the model only where the gateway reads the model file' : '';
    throw new SettingsError(
      `max_input_length (${maxInputLength}) is larger than max_token_count (${maxTokenCount}${why})`,
      `lower max_input_length to at most ${maxTokenCount}, or give max_token_count, ${AFTER}`,
    );
  }
  return { maxTokenCount, maxInputLength };
}
