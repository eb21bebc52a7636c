/**
 * Which GGUF file of a model source is served: the one whole GGUF file, or of several the first in the
 * quantization preference; split shards and other weight formats are refused with what to do instead. Shared by
 * every model source (the hub, W&B artifacts).
 */
import { ModelSourceError, serverText, someOf } from './errors.js';

/** Most to least preferred: good quality per byte first, full precision last. */
export const DEFAULT_QUANT_PREFERENCE: readonly string[] = [
  'Q4_K_M',
  'Q4_K_S',
  'Q5_K_M',
  'Q5_K_S',
  'Q6_K',
  'Q8_0',
  'Q4_0',
  'IQ4_XS',
  'F16',
  'BF16',
  'F32',
];

const SPLIT_SHARD = /-\d{5}-of-\d{5}\.gguf$/i;
const OTHER_WEIGHT_FORMATS: ReadonlyArray<[RegExp, string]> = [
  [/\.safetensors$/i, 'safetensors'],
  [/\.(bin|pt|pth|ckpt)$/i, 'PyTorch'],
  [/\.onnx$/i, 'ONNX'],
  [/\.(h5|msgpack)$/i, 'TensorFlow/Flax'],
];

function quantPattern(quant: string): RegExp {
  // The quant must be a whole name component: `Q4_K` must not match `…-Q4_K_M.gguf`.
  const escaped = quant.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(?:^|[-_.])${escaped}(?=[-.]|$)`, 'i');
}

/**
 * Chooses the GGUF file to serve, or explains why the repo has none the built-in engine can run. Generic over the
 * file type so that other model sources (W&B artifacts) share the rule; `repo` is the source's name in messages.
 */
export function pickGgufFile<F extends { path: string }>(files: readonly F[], quantPreference: readonly string[], repo: string): F {
  const ggufs = files.filter((f) => /\.gguf$/i.test(f.path) && !/(^|\/)mmproj[^/]*$/i.test(f.path));
  const whole = ggufs.filter((f) => !SPLIT_SHARD.test(f.path));
  const stem = (f: F) => (f.path.split('/').pop() ?? f.path).replace(/\.gguf$/i, '');

  if (whole.length === 1) return whole[0]!;
  if (whole.length > 1) {
    for (const quant of quantPreference) {
      const match = whole.find((f) => quantPattern(quant).test(stem(f)));
      if (match) return match;
    }
    throw new ModelSourceError(
      'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR',
      `${repo} has several GGUF files but none matches the preferred quantizations (${quantPreference.join(', ')}). ` +
        `Available: ${someOf(whole.map((f) => f.path))}.`,
    );
  }
  if (ggufs.length > 0) {
    throw new ModelSourceError(
      'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
      `${repo} only has split GGUF shards (e.g. ${serverText(ggufs[0]!.path)}), which are not supported yet. ` +
        'Use a single-file GGUF build, or merge the shards with llama-gguf-split --merge.',
    );
  }
  const format = OTHER_WEIGHT_FORMATS.find(([pattern]) => files.some((f) => pattern.test(f.path)))?.[1];
  if (format) {
    throw new ModelSourceError(
      'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
      `${repo} contains ${format} weights, but the built-in engine only runs GGUF files. ` +
        'Pick a GGUF build of this model, or configure an engine command template that can load it, ' +
        'e.g. "vllm serve {model} --port {port}".',
    );
  }
  throw new ModelSourceError('WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR', `${repo} contains no model files (.gguf).`);
}
