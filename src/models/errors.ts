/** Failure codes the model-source layer can report; a subset of the workload-init failure codes. */
export const MODEL_SOURCE_ERROR_CODES = [
  'WORKLOAD_INIT_INVALID_TOKEN_ERROR',
  'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR',
  'WORKLOAD_INIT_HF_WANDB_API_ERROR',
  'WORKLOAD_INIT_DOWNLOAD_ERROR',
  'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR',
  'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
  'WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR',
  'WORKLOAD_INIT_UNKNOWN_ERROR',
] as const;

export type ModelSourceErrorCode = (typeof MODEL_SOURCE_ERROR_CODES)[number];

/**
 * A model-source failure whose `message` is safe to show to the endpoint's owner: it names the repo,
 * revision or file involved but never local paths or stack traces. The underlying error, if any,
 * is kept in `cause` for server-side logs only.
 */
export class ModelSourceError extends Error {
  override readonly name = 'ModelSourceError';

  constructor(
    readonly code: ModelSourceErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** Serialises only what a user may see. */
  toJSON(): { code: ModelSourceErrorCode; message: string } {
    return { code: this.code, message: this.message };
  }
}

export function isModelSourceError(err: unknown): err is ModelSourceError {
  return err instanceof ModelSourceError;
}

/** Wraps anything thrown into a ModelSourceError, hiding unexpected internals behind UNKNOWN. */
export function toModelSourceError(err: unknown): ModelSourceError {
  if (err instanceof ModelSourceError) return err;
  return new ModelSourceError('WORKLOAD_INIT_UNKNOWN_ERROR', 'Preparing the model failed unexpectedly.', { cause: err });
}

/** A server-chosen message, cut to something safe to show: one line, bounded. */
export function serverText(message: unknown): string | undefined {
  if (typeof message !== 'string') return undefined;
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is removed
  const line = message.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return line ? (line.length > 200 ? `${line.slice(0, 200)}…` : line) : undefined;
}

/** At most `max` names, then how many more: a list chosen by a server (a repo's files) shown in a message. */
export function someOf(names: readonly string[], max = 20): string {
  const shown = names.slice(0, max).map((n) => serverText(n) ?? '?');
  return names.length > max ? `${shown.join(', ')} and ${names.length - max} more` : shown.join(', ');
}
