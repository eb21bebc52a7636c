/** What a failed start shows: each error a start can throw maps to an endpoint error code and a message safe to show. */
import net from 'node:net';
import { describe, expect, test } from 'vitest';
import { StaleError } from '../../src/controller/endpoint-writes.js';
import { interruptionMessage, startErrorCode, startErrorMessage, WarmupError } from '../../src/controller/start-errors.js';
import { ModelSourceError } from '../../src/models/errors.js';
import { SettingsError } from '../../src/models/model-store.js';
import { EngineCommandError } from '../../src/runtime/engine-command.js';
import { ReplicaStartError, RuntimeUnavailableError } from '../../src/runtime/runtime.js';
import { connectDatabase } from '../../src/storage/database.js';

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

test("a start interrupted by the database's loss records our words as the replica's last error, never the driver's", async () => {
  // A real driver error: a database that cannot be reached (a port nothing listens on).
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  const sql = connectDatabase(`postgres://u:p@127.0.0.1:${port}/db`, { max: 1, connectTimeoutSeconds: 2 });
  const error = await sql`SELECT 1`.then(
    () => undefined,
    (e: unknown) => e,
  );
  await sql.end({ timeout: 1 });
  expect(String((error as Error).message)).toContain(String(port));
  const shown = interruptionMessage(error);
  expect(shown).toBe('interrupted: the gateway lost its database connection for a moment; another replica is started');
  expect(shown).not.toContain(String(port));
  // Our own interruptions keep their words.
  expect(interruptionMessage(new StaleError('the endpoint changed meanwhile'))).toBe('the endpoint changed meanwhile');
  expect(interruptionMessage(new RuntimeUnavailableError('the Kubernetes API server answered HTTP 503'))).toBe(
    'the Kubernetes API server answered HTTP 503',
  );
});
