import { describe, expect, test } from 'vitest';
import { ENDPOINT_STATUSES, isAllowed, transitionTarget, type EndpointStatus, type LifecycleAction } from '../../src/domain/lifecycle.js';

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
