/**
 * What a user should do about an endpoint's failure, by its error code: the
 * endpoint's status message ends with it, and the chat route's 409 for a
 * FAILED endpoint says it. Never internals.
 */
import type { EndpointErrorCode } from './lifecycle.js';

const ADVICE: Record<EndpointErrorCode, string> = {
  WORKLOAD_INIT_SETTINGS_ERROR: "fix the endpoint's advanced settings with an update, then restart the endpoint",
  WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR:
    'update the endpoint to a repository or revision that holds GGUF model files, then restart the endpoint',
  WORKLOAD_INIT_MANIFEST_TYPE_ERROR:
    'update the endpoint to a GGUF model (or run the gateway with ENGINE_COMMAND), then restart the endpoint',
  WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR:
    "check the repository's name and that the gateway's HF_TOKEN may read it (update the endpoint if the name is wrong), then restart the endpoint",
  WORKLOAD_INIT_INVALID_TOKEN_ERROR:
    "the gateway's hub or registry token was refused: ask its operator to fix HF_TOKEN or WANDB_API_KEY, then restart the endpoint",
  WORKLOAD_INIT_HF_WANDB_API_ERROR: 'the hub or registry failed; restart the endpoint to try again',
  WORKLOAD_INIT_DOWNLOAD_ERROR: 'the download failed; restart the endpoint to try again',
  WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR:
    "the model does not fit the gateway's model cache: choose a smaller model with an update, then restart the endpoint",
  WORKLOAD_INIT_GRPC_ERROR: 'restart the endpoint to try again',
  WORKLOAD_INIT_UNKNOWN_ERROR: 'restart the endpoint to try again',
  INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR:
    'the engine could not load the model: update the endpoint to another model or revision, then restart the endpoint',
  INFERENCE_ENGINE_MEMORY_ERROR:
    'the model does not fit the instance: update the endpoint to a larger instance or lower max_token_count or max_batch_size, then restart the endpoint',
  INFERENCE_ENGINE_METERING_CLIENT_CONFIG_ERROR: 'restart the endpoint to try again',
  INFERENCE_ENGINE_UNKNOWN_ERROR: 'restart the endpoint to try again',
};

/**
 * A rollout that failed left the previous version serving (the endpoint is RUNNING, so restart does
 * not apply): the remedy is another update.
 */
export const ROLLOUT_FAILURE_ADVICE =
  'the previous version keeps serving; fix the cause with another update (a new version, which rolls out again)';

/** What to do about a failure with `code`; `restart the endpoint` when nothing better is known. */
export function failureAdvice(code: EndpointErrorCode | null): string {
  return code ? ADVICE[code] : 'restart the endpoint';
}

/** The message an endpoint's status shows beside its error code: the stored one, or the advice alone. */
export function statusMessage(endpoint: { errorCode: EndpointErrorCode | null; errorMessage?: string | null }): string | null {
  if (!endpoint.errorCode) return null;
  if (endpoint.errorMessage) return endpoint.errorMessage;
  const advice = failureAdvice(endpoint.errorCode);
  return `${advice.charAt(0).toUpperCase()}${advice.slice(1)}.`;
}

/** The chat route's 409 for an endpoint that serves no requests (FAILED, TERMINATING, TERMINATED): why, and what to do. */
export function unavailableMessage(endpoint: {
  id: string;
  status: string;
  errorCode: EndpointErrorCode | null;
  errorMessage?: string | null;
}): string {
  const head = `endpoint '${endpoint.id}' is ${endpoint.status}${endpoint.errorCode ? ` (${endpoint.errorCode})` : ''} and serves no requests`;
  if (endpoint.status === 'TERMINATING') return `${head}: wait until it is TERMINATED, then restart it`;
  if (endpoint.status !== 'FAILED' || !endpoint.errorCode) return `${head}: restart it`;
  return `${head}. ${statusMessage(endpoint)}`;
}
