/**
 * Start-up failures of the engine, reduced to the three codes the controller understands
 * (INFERENCE_ENGINE_* in the API contract) and a message that is safe to show to the endpoint's
 * owner: no stack traces, no file paths, no raw native output.
 */
import { InsufficientMemoryError } from 'node-llama-cpp';

export type EngineErrorCode =
  'INFERENCE_ENGINE_MEMORY_ERROR' | 'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR' | 'INFERENCE_ENGINE_UNKNOWN_ERROR';

export type ClassifiedEngineError = { code: EngineErrorCode; message: string };

/** An error whose code and message were decided where it was thrown (our own argument checks). */
export class EngineStartError extends Error {
  readonly code: EngineErrorCode;
  constructor(code: EngineErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EngineStartError';
    this.code = code;
  }
}

// llama.cpp reports the reason for "Failed to load model" / "Failed to create context" only in its
// log, so the classifier also looks at the error-level log lines captured during start-up.
const MEMORY_PATTERNS = [
  /out of memory/i,
  /\bOOM\b/,
  /bad_alloc/i,
  /failed to allocate/i,
  /unable to allocate/i,
  /cannot allocate memory/i,
  /not enough (v?ram|memory)/i,
  /too large for the available/i,
  /cudaMalloc/i,
  /ENOMEM/,
];
const CORRUPT_MODEL_PATTERNS = [
  /not within the file bounds/i,
  /corrupted or incomplete/i,
  /failed to read (key-value pairs|tensor|header|magic)/i,
  /invalid (magic|gguf)/i,
  /unknown model architecture/i,
  /unsupported model architecture/i,
  /wrong number of tensors/i,
  /missing tensor/i,
  /tensor .* has wrong shape/i,
  /unknown (pre-tokenizer|tokenizer) type/i,
];

function fileErrorMessage(code: string): string | undefined {
  switch (code) {
    case 'ENOENT':
      return 'The model file does not exist.';
    case 'EISDIR':
      return 'The model path is a directory, not a GGUF file.';
    case 'EACCES':
    case 'EPERM':
      return 'The model file cannot be read (permission denied).';
    case 'ENOTDIR':
    case 'ENAMETOOLONG':
    case 'ELOOP':
      return 'The model path is not a valid file path.';
    default:
      return undefined;
  }
}

/**
 * Maps an error thrown while loading the model or creating its context to a controller error code.
 * `logLines` are the llama.cpp warning/error log lines seen during the attempt (most recent last).
 */
export function classifyEngineError(error: unknown, logLines: readonly string[] = []): ClassifiedEngineError {
  if (error instanceof EngineStartError) return { code: error.code, message: error.message };

  const message = error instanceof Error ? error.message : String(error);
  const errno = typeof error === 'object' && error != null && 'code' in error ? String((error as { code: unknown }).code) : '';

  if (error instanceof InsufficientMemoryError || MEMORY_PATTERNS.some((p) => p.test(message))) {
    // node-llama-cpp's own messages ("A context size of N with M sequences is too large for the
    // available RAM") are precise and contain nothing private.
    const safe = error instanceof InsufficientMemoryError ? message : 'Not enough memory to load the model or allocate its context.';
    return { code: 'INFERENCE_ENGINE_MEMORY_ERROR', message: safe };
  }
  if (errno === 'ENOMEM') return { code: 'INFERENCE_ENGINE_MEMORY_ERROR', message: 'Not enough memory to read the model file.' };

  const fileMessage = fileErrorMessage(errno);
  if (fileMessage != null) return { code: 'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR', message: fileMessage };

  if (/Invalid GGUF magic/i.test(message)) {
    return { code: 'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR', message: 'The model file is not a GGUF file.' };
  }
  if (
    /Unsupported GGUF|GGUF version|Failed to parse GGUF|unexpected end of file|out of bounds|RangeError/i.test(message) ||
    error instanceof RangeError
  ) {
    return {
      code: 'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR',
      message: 'The model file is not a readable GGUF file (corrupted or truncated).',
    };
  }

  const log = logLines.join('\n');
  const modelLoadFailed = /Failed to load model/i.test(message);
  const contextFailed = /Failed to create context/i.test(message);
  if (modelLoadFailed || contextFailed) {
    if (MEMORY_PATTERNS.some((p) => p.test(log))) {
      return {
        code: 'INFERENCE_ENGINE_MEMORY_ERROR',
        message: modelLoadFailed ? 'Not enough memory to load the model weights.' : 'Not enough memory to allocate the context (KV cache).',
      };
    }
    if (modelLoadFailed && CORRUPT_MODEL_PATTERNS.some((p) => p.test(log))) {
      const unsupported = /unknown model architecture|unsupported model architecture|unknown (pre-tokenizer|tokenizer) type/i.test(log);
      return {
        code: 'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR',
        message: unsupported
          ? 'The model file uses an architecture or tokenizer this engine does not support.'
          : 'The model file is corrupted or incomplete.',
      };
    }
    // A context that cannot be created is, in practice, an allocation failure (KV cache or compute
    // buffers); llama.cpp does not always log why.
    if (contextFailed) return { code: 'INFERENCE_ENGINE_MEMORY_ERROR', message: 'The context (KV cache) could not be allocated.' };
    return { code: 'INFERENCE_ENGINE_UNKNOWN_ERROR', message: 'The model could not be loaded.' };
  }
  if (/chat template/i.test(message)) {
    return { code: 'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR', message: "The model's chat template cannot be used." };
  }
  return { code: 'INFERENCE_ENGINE_UNKNOWN_ERROR', message: 'The inference engine failed to start.' };
}
