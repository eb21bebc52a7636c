import { ApiException } from '@kubernetes/client-node';
import { ReplicaStartError, RuntimeUnavailableError } from '../runtime.js';
import { parseQuantity } from './quantity.js';

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
    const message = statusMessage(error);
    if (error.code === 403 && /exceeded quota/i.test(message)) {
      // A pod that asks more than the quota allows at all would wait forever: the settings' to change.
      if (neverFits(message)) {
        return new ReplicaStartError(
          'WORKLOAD_INIT_SETTINGS_ERROR',
          "the replica's pod asks for more than the namespace's ResourceQuota allows",
        );
      }
      return new RuntimeUnavailableError("the namespace's ResourceQuota has no room for the replica's pod", { cause: error });
    }
    return new ReplicaStartError('WORKLOAD_INIT_SETTINGS_ERROR', `the cluster refused the replica's pod (HTTP ${error.code})`);
  }
  if (error instanceof Error && error.name === 'FetchError') {
    return new RuntimeUnavailableError('the Kubernetes API server could not be reached', { cause: error });
  }
  return error;
}

/** `name=quantity` pairs after `label:` in a quota refusal (`requested: requests.nvidia.com/gpu=8, used: …`). */
function amounts(message: string, label: string): Map<string, number> {
  const list = new RegExp(`${label}: ((?:[\\w./-]+=[\\w.]+,?)+)`).exec(message)?.[1] ?? '';
  const found = new Map<string, number>();
  for (const pair of list.split(',')) {
    const [name, value] = pair.split('=');
    const amount = value === undefined ? undefined : parseQuantity(value);
    if (name && amount !== undefined) found.set(name, amount);
  }
  return found;
}

/** Whether the refusal's request alone exceeds the quota's limit for some resource (no other replica's stop frees it). */
function neverFits(message: string): boolean {
  const limited = amounts(message, 'limited');
  return [...amounts(message, 'requested')].some(([name, amount]) => limited.has(name) && amount > limited.get(name)!);
}
