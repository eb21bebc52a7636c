/**
 * The endpoint lifecycle: statuses, phases, failure codes, and which action
 * is allowed from which status. Every surface (REST, GraphQL, controller)
 * asks this module; no other file decides a transition.
 */
export const ENDPOINT_STATUSES = [
  'UNKNOWN',
  'INITIALIZING',
  'READY',
  'RUNNING',
  'UPDATING',
  'STOPPING',
  'SLEEPING',
  'AWAKING',
  'FAILED',
  'TERMINATING',
  'TERMINATED',
] as const;
export type EndpointStatus = (typeof ENDPOINT_STATUSES)[number];

export const ENDPOINT_PHASES = ['REQUESTING_VIRTUAL_MACHINE', 'DOWNLOADING_MODEL', 'ENGINE_INITIALIZING'] as const;
export type EndpointPhase = (typeof ENDPOINT_PHASES)[number];

export const ENDPOINT_ERROR_CODES = [
  'WORKLOAD_INIT_UNKNOWN_ERROR',
  'WORKLOAD_INIT_SETTINGS_ERROR',
  'WORKLOAD_INIT_GRPC_ERROR',
  'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR',
  'WORKLOAD_INIT_MANIFEST_TYPE_ERROR',
  'WORKLOAD_INIT_DOWNLOAD_ERROR',
  'WORKLOAD_INIT_INVALID_TOKEN_ERROR',
  'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR',
  'WORKLOAD_INIT_HF_WANDB_API_ERROR',
  'WORKLOAD_INIT_INSUFFICIENT_DISK_ERROR',
  'INFERENCE_ENGINE_UNKNOWN_ERROR',
  'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR',
  'INFERENCE_ENGINE_MEMORY_ERROR',
  'INFERENCE_ENGINE_METERING_CLIENT_CONFIG_ERROR',
] as const;
export type EndpointErrorCode = (typeof ENDPOINT_ERROR_CODES)[number];

/** What the controller should converge the endpoint's replicas to. */
export type DesiredState = 'RUNNING' | 'SLEEPING' | 'TERMINATED' | 'DELETED';

export type LifecycleAction = 'sleep' | 'wake' | 'restart' | 'terminate' | 'update' | 'delete' | 'rollback';

export function assertNever(value: never): never {
  throw new Error(`unexpected value: ${String(value)}`);
}

export function isServing(status: EndpointStatus): boolean {
  return status === 'RUNNING' || status === 'READY' || status === 'UPDATING';
}

export function isStarting(status: EndpointStatus): boolean {
  return status === 'INITIALIZING' || status === 'AWAKING';
}

/** Statuses in which an endpoint has no replicas and none are wanted. */
export function isAtRest(status: EndpointStatus): boolean {
  return status === 'SLEEPING' || status === 'TERMINATED' || status === 'FAILED';
}

export function isAllowed(action: LifecycleAction, status: EndpointStatus): boolean {
  switch (action) {
    case 'sleep':
      return isServing(status);
    case 'wake':
      return status === 'SLEEPING';
    case 'restart':
      return status === 'FAILED' || status === 'TERMINATED';
    case 'terminate':
      return status !== 'TERMINATING' && status !== 'TERMINATED';
    case 'update':
    case 'rollback':
      return status !== 'TERMINATING';
    case 'delete':
      return true;
    default:
      return assertNever(action);
  }
}

/** The status, phase and desired state an allowed action records at once. */
export interface TransitionTarget {
  status: EndpointStatus;
  phase: EndpointPhase | null;
  /** Whether the action clears a previous failure code. */
  clearsError: boolean;
  desiredState: DesiredState;
}

export function transitionTarget(
  action: LifecycleAction,
  status: EndpointStatus,
  context: { hasReplicas: boolean } = { hasReplicas: false },
): TransitionTarget {
  switch (action) {
    case 'sleep':
      // Replicas drain their requests in flight (STOPPING) before the endpoint sleeps.
      return { status: context.hasReplicas ? 'STOPPING' : 'SLEEPING', phase: null, clearsError: false, desiredState: 'SLEEPING' };
    case 'wake':
      return { status: 'AWAKING', phase: 'ENGINE_INITIALIZING', clearsError: true, desiredState: 'RUNNING' };
    case 'restart':
      return { status: 'INITIALIZING', phase: 'REQUESTING_VIRTUAL_MACHINE', clearsError: true, desiredState: 'RUNNING' };
    case 'terminate':
      return { status: 'TERMINATING', phase: null, clearsError: false, desiredState: 'TERMINATED' };
    case 'update':
    case 'rollback':
      // A serving endpoint rolls the new version out; any other status keeps
      // itself, and the next start uses the newest version.
      return isServing(status)
        ? { status: 'UPDATING', phase: null, clearsError: true, desiredState: 'RUNNING' }
        : { status, phase: null, clearsError: false, desiredState: desiredStateOf(status) };
    case 'delete':
      return { status, phase: null, clearsError: false, desiredState: 'DELETED' };
    default:
      return assertNever(action);
  }
}

/** The desired state implied by a status, for actions that keep the status. */
export function desiredStateOf(status: EndpointStatus): DesiredState {
  switch (status) {
    case 'SLEEPING':
    case 'STOPPING':
      return 'SLEEPING';
    case 'TERMINATED':
    case 'TERMINATING':
    case 'FAILED':
      return 'TERMINATED';
    case 'UNKNOWN':
    case 'INITIALIZING':
    case 'READY':
    case 'RUNNING':
    case 'UPDATING':
    case 'AWAKING':
      return 'RUNNING';
    default:
      return assertNever(status);
  }
}

/**
 * The status a REST answer reports for an action. The documented sleep answer
 * is SLEEPING, the state the endpoint is headed to, while its replicas may
 * still be draining (STOPPING) for a moment; reads show the true status.
 */
export function reportedStatus(action: LifecycleAction | 'create' | 'status', status: EndpointStatus): EndpointStatus {
  return action === 'sleep' && status === 'STOPPING' ? 'SLEEPING' : status;
}

/** Whether the status object carries `phase` (the spec omits it from sleep and terminate answers). */
export function reportsPhase(action: LifecycleAction | 'create' | 'status'): boolean {
  return action !== 'sleep' && action !== 'terminate';
}
