/** The rollout's step decisions, without processes (the rollout itself runs in lifecycle.test.ts and takeover.test.ts). */
import { describe, expect, test } from 'vitest';
import { needsRollout, outdatedReplicas, rolloutStep } from '../../src/controller/rollout.js';
import type { VersionRecord } from '../../src/domain/endpoint.js';
import type { ReplicaRecord } from '../../src/domain/replica.js';
import { DEFAULT_ADVANCED, servesAlike, type EndpointSpec } from '../../src/domain/endpoint-spec.js';

const replica = (id: string, versionIndex: number) => ({ id, versionIndex }) as ReplicaRecord;
const version = (versionIndex: number, rolloutState: VersionRecord['rolloutState'] = 'RECORDED') =>
  ({ versionIndex, rolloutState }) as VersionRecord;

describe('rollout decisions', () => {
  test('replicas of another version than the newest are outdated', () => {
    const serving = [replica('a', 1), replica('b', 2), replica('c', 1)];
    expect(outdatedReplicas(serving, version(2)).map((r) => r.id)).toEqual(['a', 'c']);
    expect(outdatedReplicas(serving, version(3)).map((r) => r.id)).toEqual(['a', 'b', 'c']);
  });

  test('a rollout is needed while old replicas serve, unless the new version failed', () => {
    expect(needsRollout([replica('a', 1)], version(2))).toBe(true);
    expect(needsRollout([replica('a', 2)], version(2))).toBe(false);
    expect(needsRollout([], version(2))).toBe(false);
    expect(needsRollout([replica('a', 1)], version(2, 'FAILED'))).toBe(false);
    expect(needsRollout([replica('a', 1)], version(2, 'ROLLED_OUT'))).toBe(true);
  });

  test('each old replica is replaced (start, then drain), or retired alone when more serve than wanted', () => {
    expect(rolloutStep(2, 2)).toBe('replace');
    expect(rolloutStep(1, 1)).toBe('replace');
    expect(rolloutStep(3, 2)).toBe('retire');
    // A scale-to-zero endpoint still keeps one replica while it rolls out.
    expect(rolloutStep(1, 0)).toBe('replace');
    expect(rolloutStep(2, 0)).toBe('retire');
  });
});

describe('which versions the serving replicas serve as they are', () => {
  const spec: EndpointSpec = {
    name: 'a',
    instanceId: 'i1',
    model: { source: 'hf', repo: 'org/m', revision: null },
    autoscaling: { minReplica: 0, maxReplica: 1, cooldownPeriod: 300 },
    advanced: { ...DEFAULT_ADVANCED },
  };
  test("name, autoscaling and content logging are not the replica's business", () => {
    expect(servesAlike(spec, { ...spec, name: 'b', autoscaling: { minReplica: 1, maxReplica: 3, cooldownPeriod: 5 } })).toBe(true);
    expect(servesAlike(spec, { ...spec, advanced: { ...spec.advanced, enableContentLogging: !spec.advanced.enableContentLogging } })).toBe(
      true,
    );
  });
  test('the model, its revision, the instance and every engine setting are', () => {
    expect(servesAlike(spec, { ...spec, model: { source: 'hf', repo: 'org/m', revision: 'v2' } })).toBe(false);
    expect(servesAlike(spec, { ...spec, model: { source: 'wandb', artifact: 'e/p/a:v1' } })).toBe(false);
    expect(servesAlike(spec, { ...spec, instanceId: 'i2' })).toBe(false);
    expect(servesAlike(spec, { ...spec, advanced: { ...spec.advanced, maxBatchSize: spec.advanced.maxBatchSize + 1 } })).toBe(false);
    expect(servesAlike(spec, { ...spec, advanced: { ...spec.advanced, maxTokenCountAuto: true } })).toBe(false);
  });
});
