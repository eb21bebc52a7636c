/**
 * The endpoint lifecycle: statuses, phases, failure codes, which action is
 * allowed from which status and what it records (`transitionTarget`), and
 * what the controller records after each of its steps
 * (`controllerTransition`). Every surface (REST, GraphQL) and the controller
 * ask this module, then write what it answers; no other file decides a
 * transition.
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

/** The statuses in which an endpoint serves requests. */
export const SERVING_STATUSES = ['READY', 'RUNNING', 'UPDATING'] as const satisfies readonly EndpointStatus[];

export function isServing(status: EndpointStatus): boolean {
  return (SERVING_STATUSES as readonly EndpointStatus[]).includes(status);
}

/**
 * The statuses in which an endpoint serves no requests and will not until a
 * user restarts it: a request fails at once (a sleeping or starting endpoint,
 * by contrast, is waited for).
 */
export const UNAVAILABLE_STATUSES = ['FAILED', 'TERMINATING', 'TERMINATED'] as const satisfies readonly EndpointStatus[];

export function isUnavailable(status: EndpointStatus): boolean {
  return (UNAVAILABLE_STATUSES as readonly EndpointStatus[]).includes(status);
}

/**
 * An endpoint whose autoscaling maximum is 0 runs no replica ("replicas stay
 * between min and max"): the controller puts it to sleep from whatever it was
 * doing, a wake is refused, and a chat request is answered at once; an update
 * that raises the maximum lets it serve again.
 */
export function holdsNoReplicas(endpoint: { current: { spec: { autoscaling: { maxReplica: number } } } }): boolean {
  return endpoint.current.spec.autoscaling.maxReplica === 0;
}

export function noReplicasMessage(endpointId: string): string {
  return `endpoint '${endpointId}' has autoscalingPolicy.maxReplica 0, so it runs no replicas: raise maxReplica with an update, then it serves (a request wakes it)`;
}

/** The statuses that report the steps of bringing up the first replica as their phase. */
export function isStarting(status: EndpointStatus): boolean {
  return status === 'INITIALIZING' || status === 'AWAKING';
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

/**
 * What to do instead of an action the status does not allow, where another
 * action does what the caller wanted: a FAILED or TERMINATED endpoint does not
 * wake, it restarts.
 */
export function transitionAdvice(action: LifecycleAction, status: EndpointStatus): string | undefined {
  if (action === 'wake' && isAllowed('restart', status)) {
    const from = ENDPOINT_STATUSES.filter((s) => isAllowed('restart', s)).join(' or ');
    return `restart it instead (restart runs a ${from} endpoint again)`;
  }
  return undefined;
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
      // A FAILED endpoint's code goes with its failure (errorCode is null unless FAILED or its last rollout failed).
      return { status: 'TERMINATING', phase: null, clearsError: status === 'FAILED', desiredState: 'TERMINATED' };
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

// ---------------------------------------------------------------- the controller's transitions

/**
 * What the controller saw or finished, which may change the endpoint's
 * status. The controller asks `controllerTransition` after each step and
 * writes what it answers.
 */
export type ControllerEvent =
  /** Bringing up the first replica: no GPU is free yet. */
  | { type: 'no-capacity' }
  /** Bringing up the first replica: the model's source is being resolved. */
  | { type: 'resolving-model' }
  /** Bringing up the first replica: the model's files are being downloaded. */
  | { type: 'downloading-model' }
  /** Bringing up the first replica: its engine is being started. */
  | { type: 'starting-engine' }
  /** The first replica's engine answers and runs its warm-up generation. */
  | { type: 'warming-up' }
  /** The first replica (or a replacement, when all had died) is ready and serves. */
  | { type: 'replica-ready' }
  /** The first replica could not be started. */
  | { type: 'start-failed'; errorCode: EndpointErrorCode }
  /** Replicas' engines died, and the crash policy says the endpoint fails. */
  | { type: 'crash-loop' }
  /** Every serving replica runs the current version. */
  | { type: 'all-replicas-current' }
  /** Serving replicas run an older version: replacing them begins. */
  | { type: 'rollout-started' }
  /** Every old replica was replaced. */
  | { type: 'rollout-finished' }
  /** A replica of the new version failed; the old ones keep serving. */
  | { type: 'rollout-failed'; errorCode: EndpointErrorCode }
  /** The autoscaler scaled an idle endpoint to zero: its replicas drain, then it sleeps. */
  | { type: 'scaled-to-zero' }
  /** The version in force allows no replica (maxReplica 0): whatever starts or serves stops, then it sleeps. */
  | { type: 'held-at-zero' }
  /** A sleeping endpoint's replicas are stopped. */
  | { type: 'sleep-done' }
  /** A terminated (or deleted) endpoint's replicas are stopped. */
  | { type: 'terminate-done' };

/** The part of an endpoint a transition reads. */
export interface LifecycleState {
  status: EndpointStatus;
  phase: EndpointPhase | null;
  errorCode: EndpointErrorCode | null;
}

/** What the controller writes after an event, and what must still hold for the write to apply. */
export interface ControllerTransition extends LifecycleState {
  /** Set when the transition changes the desired state too. */
  desiredState?: DesiredState;
  /**
   * What the endpoint must still be, under its row lock, when the change is
   * written: this desired state, and one of `statuses` when given (checked by
   * the statement that writes it: src/storage/endpoint-transitions.ts);
   * otherwise the step acted on a stale snapshot and is abandoned (an API
   * action came in between).
   */
  requires: { desiredState: DesiredState; statuses?: readonly EndpointStatus[] };
}

const STARTING_PHASES = {
  'no-capacity': 'REQUESTING_VIRTUAL_MACHINE',
  'resolving-model': 'DOWNLOADING_MODEL',
  'downloading-model': 'DOWNLOADING_MODEL',
  'starting-engine': 'ENGINE_INITIALIZING',
} as const satisfies Record<string, EndpointPhase>;

/**
 * The controller's transition table: the status, phase and error code to
 * write after `event`, given the endpoint as the controller last saw it (for
 * the steps of a start, as it last wrote it), or null when nothing changes.
 */
export function controllerTransition(event: ControllerEvent, current: LifecycleState): ControllerTransition | null {
  const { status, errorCode } = current;
  const running = { desiredState: 'RUNNING' } as const;
  switch (event.type) {
    case 'no-capacity':
    case 'resolving-model':
    case 'downloading-model':
    case 'starting-engine': {
      // Only a start asked for by a user shows its steps; a replacement for a serving endpoint keeps its status.
      if (!isStarting(status)) return null;
      // A wake resolves a model it ran before: its phase stays ENGINE_INITIALIZING (as the wake wrote it).
      if (event.type === 'resolving-model' && status !== 'INITIALIZING') return null;
      const phase = STARTING_PHASES[event.type];
      if (current.phase === phase && errorCode === null) return null;
      return { status, phase, errorCode: null, requires: { ...running, statuses: [status] } };
    }
    case 'warming-up':
      // READY: the replica is up; traffic is admitted once its warm-up generation succeeds.
      if (!isStarting(status)) return null;
      return { status: 'READY', phase: null, errorCode: null, requires: { ...running, statuses: [status] } };
    case 'replica-ready':
      return { status: 'RUNNING', phase: null, errorCode: null, requires: running };
    case 'start-failed':
      return { status: 'FAILED', phase: null, errorCode: event.errorCode, desiredState: 'TERMINATED', requires: running };
    case 'crash-loop':
      return { status: 'FAILED', phase: null, errorCode: 'INFERENCE_ENGINE_UNKNOWN_ERROR', desiredState: 'TERMINATED', requires: running };
    case 'all-replicas-current':
      // A finished rollout, a start whose last write was lost, or a taken-over endpoint: it serves.
      if (status !== 'UPDATING' && status !== 'READY' && status !== 'UNKNOWN') return null;
      return { status: 'RUNNING', phase: null, errorCode, requires: running };
    case 'rollout-started':
      if (status === 'UPDATING') return null;
      return { status: 'UPDATING', phase: null, errorCode: null, requires: running };
    case 'rollout-finished':
      return { status: 'RUNNING', phase: null, errorCode: null, requires: running };
    case 'rollout-failed':
      return { status: 'RUNNING', phase: null, errorCode: event.errorCode, requires: running };
    case 'scaled-to-zero':
      return { status: 'STOPPING', phase: null, errorCode, desiredState: 'SLEEPING', requires: { ...running, statuses: ['RUNNING'] } };
    case 'held-at-zero':
      return { status: 'STOPPING', phase: null, errorCode: null, desiredState: 'SLEEPING', requires: running };
    case 'sleep-done':
      return { status: 'SLEEPING', phase: null, errorCode, requires: { desiredState: 'SLEEPING' } };
    case 'terminate-done':
      // A failed endpoint stays FAILED (with its code) once its replicas are gone.
      if (status === 'FAILED') return null;
      return { status: 'TERMINATED', phase: null, errorCode, requires: { desiredState: 'TERMINATED' } };
    default:
      return assertNever(event);
  }
}
