import { ApiException } from '@kubernetes/client-node';
import { ReplicaStartError, RuntimeUnavailableError } from '../runtime.js';

/**
 * What a failed call to the API server means for a start: unreachable, or answering 5xx or 429, it is an outage
 * (RuntimeUnavailableError: not the endpoint's failure, the next pass tries again); any other refusal (403 for
 * missing RBAC, 422 for a pod the cluster will not take) is the settings'. Anything else passes unchanged.
 */
export function apiFailure(error: unknown): unknown {
  if (error instanceof ApiException) {
    if (error.code >= 500 || error.code === 429) {
      return new RuntimeUnavailableError(`the Kubernetes API server answered HTTP ${error.code}`, { cause: error });
    }
    return new ReplicaStartError('WORKLOAD_INIT_SETTINGS_ERROR', `the cluster refused the replica's pod (HTTP ${error.code})`);
  }
  if (error instanceof Error && error.name === 'FetchError') {
    return new RuntimeUnavailableError('the Kubernetes API server could not be reached', { cause: error });
  }
  return error;
}
