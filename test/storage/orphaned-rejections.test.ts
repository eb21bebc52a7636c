/**
 * The gateway's net for rejections nobody handled, in a real Node.js process: a database call that failed because
 * the database was away is logged and the process runs on; any other unhandled rejection still ends it.
 */
import { spawn } from 'node:child_process';
import { describe, expect, test } from 'vitest';

function run(reason: string): Promise<{ code: number | null; output: string }> {
  const script = `
    import { keepRunningOnOrphanedDatabaseFailures } from './src/storage/orphaned-rejections.ts';
    keepRunningOnOrphanedDatabaseFailures((message, error) => console.log('LOGGED', message, error.code ?? error.message));
    void Promise.reject(${reason});
    setTimeout(() => { console.log('STILL RUNNING'); process.exit(0); }, 300);
  `;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('exit', (code) => resolve({ code, output }));
  });
}

describe('rejections nobody handled', () => {
  test('a database connection refused (the database away): logged, and the process runs on', async () => {
    const { code, output } = await run(
      `Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED', syscall: 'connect' })`,
    );
    expect(output).toContain('LOGGED a database call failed while the database was away');
    expect(output).toContain('ECONNREFUSED');
    expect(output).toContain('STILL RUNNING');
    expect(code).toBe(0);
  }, 30_000);

  test('a statement the database gave up on while it answers (a deadlock) is no outage: nobody handled it, the process ends', async () => {
    const { code, output } = await run(
      `Object.assign(new Error('deadlock detected'), { name: 'PostgresError', code: '40P01', severity: 'ERROR' })`,
    );
    expect(output).not.toContain('STILL RUNNING');
    expect(output).toContain('deadlock detected');
    expect(code).not.toBe(0);
  }, 30_000);

  test('any other rejection nobody handled still ends the process', async () => {
    const { code, output } = await run(`new TypeError('a bug')`);
    expect(output).not.toContain('STILL RUNNING');
    expect(output).toContain('a bug');
    expect(code).not.toBe(0);
  }, 30_000);
});
