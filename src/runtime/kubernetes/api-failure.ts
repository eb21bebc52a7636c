import { ApiException } from '@kubernetes/client-node';
import { ReplicaStartError, RuntimeUnavailableError } from '../runtime.js';

/** The message of the API server's Status in a failed call's body (a string of JSON, or parsed), if any. */
function statusMessage(error: ApiException<unknown>): string {
  let body: unknown = error.body;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body);
    } catch {
      return body as string;
    }
  }
  const message = (body as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : '';
}

/**
 * What a failed call to the API server means for a start: unreachable, or answering 5xx or 429, it is an outage
 * (RuntimeUnavailableError: not the endpoint's failure, a later pass tries again, after a back-off); so is a
 * namespace's ResourceQuota that has no room left (403 "exceeded quota": room comes back as other replicas stop);
 * any other refusal (403 for missing RBAC, 422 for a pod the cluster will not take) is the settings'. Anything else
 * passes unchanged.
 */
export function apiFailure(error: unknown): unknown {
  if (error instanceof ApiException) {
    if (error.code >= 500 || error.code === 429) {
      return new RuntimeUnavailableError(`the Kubernetes API server answered HTTP ${error.code}`, { cause: error });
    }
    if (error.code === 403 && /exceeded quota/i.test(statusMessage(error))) {
      return new RuntimeUnavailableError("the namespace's ResourceQuota has no room for the replica's pod", { cause: error });
    }
    return new ReplicaStartError('WORKLOAD_INIT_SETTINGS_ERROR', `the cluster refused the replica's pod (HTTP ${error.code})`);
  }
  if (error instanceof Error && error.name === 'FetchError') {
    return new RuntimeUnavailableError('the Kubernetes API server could not be reached', { cause: error });
  }
  return error;
}
