/** What a failed start shows: each error a start can throw maps to an endpoint error code and a message safe to show. */
import { describe, expect, test } from 'vitest';
import { startErrorCode, startErrorMessage, WarmupError } from '../../src/controller/start-errors.js';
import { ModelSourceError } from '../../src/models/errors.js';
import { SettingsError } from '../../src/models/model-store.js';
import { EngineCommandError } from '../../src/runtime/engine-command.js';
import { ReplicaStartError } from '../../src/runtime/runtime.js';

describe('start error classification', () => {
  test('our own errors carry their code and their message', () => {
    const cases: [Error, string][] = [
      [new ModelSourceError('WORKLOAD_INIT_DOWNLOAD_ERROR', 'checksum mismatch'), 'WORKLOAD_INIT_DOWNLOAD_ERROR'],
      [new SettingsError('max_token_count exceeds the model'), 'WORKLOAD_INIT_SETTINGS_ERROR'],
      [new ReplicaStartError('INFERENCE_ENGINE_MEMORY_ERROR', 'out of memory'), 'INFERENCE_ENGINE_MEMORY_ERROR'],
      [new EngineCommandError('ENGINE_COMMAND has no {model}'), 'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR'],
      [new WarmupError('the warm-up generation failed with HTTP 500'), 'INFERENCE_ENGINE_UNKNOWN_ERROR'],
    ];
    for (const [error, code] of cases) {
      expect(startErrorCode(error)).toBe(code);
      expect(startErrorMessage(error)).toBe(error.message);
    }
  });

  test('anything else is an unknown init error whose text is not shown', () => {
    const internal = new Error('connection to 10.0.0.3:5432 refused');
    expect(startErrorCode(internal)).toBe('WORKLOAD_INIT_UNKNOWN_ERROR');
    expect(startErrorMessage(internal)).toBe('the replica could not be started');
    expect(startErrorCode('thrown string')).toBe('WORKLOAD_INIT_UNKNOWN_ERROR');
    expect(startErrorMessage(undefined)).toBe('the replica could not be started');
  });
});
