import { describe, expect, test } from 'vitest';
import {
  controllerTransition,
  ENDPOINT_STATUSES,
  isAllowed,
  isServing,
  isStarting,
  isUnavailable,
  SERVING_STATUSES,
  transitionTarget,
  UNAVAILABLE_STATUSES,
  type ControllerEvent,
  type EndpointStatus,
  type LifecycleAction,
  type LifecycleState,
} from '../../src/domain/lifecycle.js';

const allowedFrom = (action: LifecycleAction) => ENDPOINT_STATUSES.filter((s) => isAllowed(action, s));

describe('the transition table of the contract', () => {
  test('which statuses allow each action', () => {
    expect(allowedFrom('sleep')).toEqual(['READY', 'RUNNING', 'UPDATING']);
    expect(allowedFrom('wake')).toEqual(['SLEEPING']);
    expect(allowedFrom('restart')).toEqual(['FAILED', 'TERMINATED']);
    expect(allowedFrom('terminate')).toEqual(ENDPOINT_STATUSES.filter((s) => s !== 'TERMINATING' && s !== 'TERMINATED'));
    expect(allowedFrom('update')).toEqual(ENDPOINT_STATUSES.filter((s) => s !== 'TERMINATING'));
    expect(allowedFrom('delete')).toEqual([...ENDPOINT_STATUSES]);
  });

  test('targets: each action records its documented status and phase', () => {
    expect(transitionTarget('sleep', 'RUNNING')).toMatchObject({ status: 'SLEEPING', phase: null, desiredState: 'SLEEPING' });
    expect(transitionTarget('wake', 'SLEEPING')).toMatchObject({
      status: 'AWAKING',
      phase: 'ENGINE_INITIALIZING',
      desiredState: 'RUNNING',
    });
    expect(transitionTarget('restart', 'FAILED')).toMatchObject({
      status: 'INITIALIZING',
      phase: 'REQUESTING_VIRTUAL_MACHINE',
      clearsError: true,
    });
    expect(transitionTarget('terminate', 'RUNNING')).toMatchObject({ status: 'TERMINATING', phase: null, desiredState: 'TERMINATED' });
    // A failed rollout's code stays with a serving endpoint that terminates; a FAILED endpoint's goes with its failure.
    expect(transitionTarget('terminate', 'RUNNING').clearsError).toBe(false);
    expect(transitionTarget('terminate', 'FAILED').clearsError).toBe(true);
  });

  test('update rolls out only a serving endpoint; otherwise the status stays', () => {
    const serving: EndpointStatus[] = ['RUNNING', 'READY', 'UPDATING'];
    for (const status of serving) expect(transitionTarget('update', status).status).toBe('UPDATING');
    for (const status of ['SLEEPING', 'TERMINATED', 'FAILED', 'INITIALIZING'] as EndpointStatus[]) {
      expect(transitionTarget('update', status).status).toBe(status);
    }
    expect(transitionTarget('update', 'SLEEPING').desiredState).toBe('SLEEPING');
    expect(transitionTarget('update', 'FAILED').desiredState).toBe('TERMINATED');
  });
});

describe('status groups', () => {
  test('serving, unavailable and starting statuses', () => {
    expect(ENDPOINT_STATUSES.filter(isServing)).toEqual([...SERVING_STATUSES]);
    expect(ENDPOINT_STATUSES.filter(isServing)).toEqual(['READY', 'RUNNING', 'UPDATING']);
    expect(ENDPOINT_STATUSES.filter(isUnavailable)).toEqual(['FAILED', 'TERMINATING', 'TERMINATED']);
    expect([...UNAVAILABLE_STATUSES].sort()).toEqual(ENDPOINT_STATUSES.filter(isUnavailable).sort());
    expect(ENDPOINT_STATUSES.filter(isStarting)).toEqual(['INITIALIZING', 'AWAKING']);
    // A sleeping endpoint is neither: a request wakes it.
    expect(isServing('SLEEPING') || isUnavailable('SLEEPING')).toBe(false);
  });
});

describe("the controller's transitions", () => {
  const at = (status: EndpointStatus, more: Partial<LifecycleState> = {}): LifecycleState => ({
    status,
    phase: null,
    errorCode: null,
    ...more,
  });
  const next = (event: ControllerEvent, current: LifecycleState) => controllerTransition(event, current);

  test('a start asked for by a user reports each step as its phase', () => {
    expect(next({ type: 'no-capacity' }, at('INITIALIZING', { phase: 'DOWNLOADING_MODEL' }))).toEqual({
      status: 'INITIALIZING',
      phase: 'REQUESTING_VIRTUAL_MACHINE',
      errorCode: null,
      requires: { desiredState: 'RUNNING', statuses: ['INITIALIZING'] },
    });
    expect(next({ type: 'resolving-model' }, at('INITIALIZING'))).toMatchObject({ status: 'INITIALIZING', phase: 'DOWNLOADING_MODEL' });
    expect(next({ type: 'downloading-model' }, at('AWAKING'))).toMatchObject({ status: 'AWAKING', phase: 'DOWNLOADING_MODEL' });
    expect(next({ type: 'starting-engine' }, at('AWAKING'))).toMatchObject({ status: 'AWAKING', phase: 'ENGINE_INITIALIZING' });
  });

  test('a wake does not show the model being resolved; a phase already shown is not written again', () => {
    expect(next({ type: 'resolving-model' }, at('AWAKING', { phase: 'ENGINE_INITIALIZING' }))).toBeNull();
    expect(next({ type: 'starting-engine' }, at('AWAKING', { phase: 'ENGINE_INITIALIZING' }))).toBeNull();
    // The same phase with an old failure code is written, clearing the code.
    expect(
      next({ type: 'starting-engine' }, at('AWAKING', { phase: 'ENGINE_INITIALIZING', errorCode: 'INFERENCE_ENGINE_UNKNOWN_ERROR' })),
    ).toMatchObject({ phase: 'ENGINE_INITIALIZING', errorCode: null });
  });

  test("a replacement for a serving endpoint's dead replicas changes no status until it serves", () => {
    for (const status of ['RUNNING', 'UPDATING'] as const) {
      for (const type of ['no-capacity', 'resolving-model', 'downloading-model', 'starting-engine', 'warming-up'] as const) {
        expect(next({ type }, at(status))).toBeNull();
      }
    }
  });

  test('warming up is READY; the first replica ready is RUNNING, clearing the failure code', () => {
    expect(next({ type: 'warming-up' }, at('INITIALIZING', { phase: 'ENGINE_INITIALIZING' }))).toEqual({
      status: 'READY',
      phase: null,
      errorCode: null,
      requires: { desiredState: 'RUNNING', statuses: ['INITIALIZING'] },
    });
    expect(next({ type: 'replica-ready' }, at('RUNNING', { errorCode: 'INFERENCE_ENGINE_UNKNOWN_ERROR' }))).toEqual({
      status: 'RUNNING',
      phase: null,
      errorCode: null,
      requires: { desiredState: 'RUNNING' },
    });
  });

  test('a failed start and a crash loop fail the endpoint and terminate it', () => {
    expect(next({ type: 'start-failed', errorCode: 'WORKLOAD_INIT_DOWNLOAD_ERROR' }, at('INITIALIZING'))).toEqual({
      status: 'FAILED',
      phase: null,
      errorCode: 'WORKLOAD_INIT_DOWNLOAD_ERROR',
      desiredState: 'TERMINATED',
      requires: { desiredState: 'RUNNING' },
    });
    expect(next({ type: 'crash-loop' }, at('RUNNING'))).toMatchObject({
      status: 'FAILED',
      errorCode: 'INFERENCE_ENGINE_UNKNOWN_ERROR',
      desiredState: 'TERMINATED',
    });
  });

  test('serving replicas of the current version: RUNNING, keeping a rollout failure code', () => {
    for (const status of ['UPDATING', 'READY', 'UNKNOWN'] as const) {
      expect(next({ type: 'all-replicas-current' }, at(status, { errorCode: 'INFERENCE_ENGINE_MEMORY_ERROR' }))).toMatchObject({
        status: 'RUNNING',
        errorCode: 'INFERENCE_ENGINE_MEMORY_ERROR',
      });
    }
    for (const status of ['RUNNING', 'INITIALIZING', 'AWAKING'] as const)
      expect(next({ type: 'all-replicas-current' }, at(status))).toBeNull();
  });

  test('a rollout: UPDATING, then RUNNING, or RUNNING with the failure code', () => {
    expect(next({ type: 'rollout-started' }, at('RUNNING', { errorCode: 'INFERENCE_ENGINE_MEMORY_ERROR' }))).toMatchObject({
      status: 'UPDATING',
      errorCode: null,
    });
    expect(next({ type: 'rollout-started' }, at('UPDATING'))).toBeNull();
    expect(next({ type: 'rollout-finished' }, at('UPDATING'))).toMatchObject({ status: 'RUNNING', errorCode: null });
    expect(next({ type: 'rollout-failed', errorCode: 'WORKLOAD_INIT_SETTINGS_ERROR' }, at('UPDATING'))).toMatchObject({
      status: 'RUNNING',
      errorCode: 'WORKLOAD_INIT_SETTINGS_ERROR',
    });
  });

  test('scaled to zero: a RUNNING endpoint drains, then sleeps; terminate done: TERMINATED unless FAILED', () => {
    expect(next({ type: 'scaled-to-zero' }, at('RUNNING'))).toEqual({
      status: 'STOPPING',
      phase: null,
      errorCode: null,
      desiredState: 'SLEEPING',
      requires: { desiredState: 'RUNNING', statuses: ['RUNNING'] },
    });
    expect(next({ type: 'sleep-done' }, at('STOPPING'))).toMatchObject({ status: 'SLEEPING', requires: { desiredState: 'SLEEPING' } });
    expect(next({ type: 'terminate-done' }, at('TERMINATING'))).toMatchObject({
      status: 'TERMINATED',
      requires: { desiredState: 'TERMINATED' },
    });
    expect(next({ type: 'terminate-done' }, at('FAILED', { errorCode: 'WORKLOAD_INIT_DOWNLOAD_ERROR' }))).toBeNull();
  });

  test('the controller answers only with known statuses, and READY only after a start', () => {
    const events: ControllerEvent[] = [
      { type: 'no-capacity' },
      { type: 'resolving-model' },
      { type: 'downloading-model' },
      { type: 'starting-engine' },
      { type: 'warming-up' },
      { type: 'replica-ready' },
      { type: 'start-failed', errorCode: 'WORKLOAD_INIT_UNKNOWN_ERROR' },
      { type: 'crash-loop' },
      { type: 'all-replicas-current' },
      { type: 'rollout-started' },
      { type: 'rollout-finished' },
      { type: 'rollout-failed', errorCode: 'INFERENCE_ENGINE_UNKNOWN_ERROR' },
      { type: 'scaled-to-zero' },
      { type: 'sleep-done' },
      { type: 'terminate-done' },
    ];
    for (const event of events) {
      for (const status of ENDPOINT_STATUSES) {
        const t = next(event, at(status));
        if (!t) continue;
        expect(ENDPOINT_STATUSES).toContain(t.status);
        if (t.status === 'READY') expect(isStarting(status)).toBe(true);
      }
    }
  });

  test('a transition requires the desired state it was decided under, and a phase its own status', () => {
    // Terminated meanwhile, or restarted into another status: the step is stale (endpoint-writes.test.ts writes them).
    expect(next({ type: 'starting-engine' }, at('INITIALIZING'))!.requires).toEqual({
      desiredState: 'RUNNING',
      statuses: ['INITIALIZING'],
    });
    // A replica ready while desired RUNNING serves whatever the status became meanwhile (an update's rollout).
    expect(next({ type: 'replica-ready' }, at('READY'))!.requires).toEqual({ desiredState: 'RUNNING' });
    expect(next({ type: 'terminate-done' }, at('TERMINATING'))!.requires).toEqual({ desiredState: 'TERMINATED' });
  });
});
