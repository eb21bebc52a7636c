/** The admin CLI and the first-start bootstrap, run as real processes against a real database. */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { createServices } from '../../src/services/index.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { restClient } from '../support/gateway.js';

const run = promisify(execFile);
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => db.close());

/** `npm run admin`'s own command: the CLI's source through tsx. */
const ADMIN_SOURCE = ['--import', 'tsx', 'src/cli/admin.ts'];

/**
 * Runs the admin CLI. Every call but the first test's first runs the run's bundle of the same source
 * (test/support/global-setup.ts), which starts with about a second less CPU than tsx's loader compiling it;
 * TEST_ENGINE=tsx runs the source for all of them.
 */
async function admin(...args: string[]) {
  return adminWith(process.env.TEST_ENGINE === 'tsx' ? ADMIN_SOURCE : [inject('adminBundle')], ...args);
}

/** What a call printed, and its exit code when it failed. */
type Ran = { stdout: string; stderr: string; code?: number };

async function adminWith(entry: string[], ...args: string[]): Promise<Ran> {
  return run(process.execPath, [...entry, ...args], {
    env: { ...process.env, DATABASE_URL: db.dbUrl },
  }).catch((error: { stdout: string; stderr: string; code: number }) => error);
}

// Each call starts a process: seconds each on a busy machine. Calls that do not depend on each other run together.
describe('npm run admin', { timeout: 120_000 }, () => {
  // This test and the next share nothing (the next one's calls are refused, and change nothing): they run together;
  // each asserts with its own context's `expect`, as concurrent tests must. The third reads what the first made.
  test.concurrent('creates a user, a key that authenticates, a team, a member and a project', async ({ expect }) => {
    // `npm run admin` itself: its command as package.json has it. The second user needs nothing of the first.
    const [user] = await Promise.all([
      adminWith(ADMIN_SOURCE, 'create-user', '--email', 'ops@example.com', '--name', 'Ops'),
      admin('create-user', '--email', 'dev@example.com', '--name', 'Dev'),
    ]);
    expect(user.stdout).toMatch(/^user usr_\w+ ops@example.com; personal team team_\w+/);
    const [key, team] = await Promise.all([
      admin('create-key', '--user', 'ops@example.com', '--name', 'deploy'),
      admin('create-team', '--name', 'Platform', '--owner', 'ops@example.com'),
    ]);
    const secret = key.stdout.trim().split('\n')[1]!;
    expect(secret).toMatch(/^dek_[\w-]{43}$/);

    const services = createServices(db.sql);
    const teamId = /team (team_\w+)/.exec(team.stdout)![1]!;
    const [listed, member, project] = await Promise.all([
      admin('list-keys', '--user', 'ops@example.com'),
      admin('add-member', '--team', teamId, '--user', 'dev@example.com'),
      admin('create-project', '--team', teamId, '--name', 'inference'),
    ]);
    expect(listed.stdout).toContain(secret.slice(0, 12));
    expect(listed.stdout).not.toContain(secret);
    expect(member.stdout).toContain(`is MEMBER of team ${teamId}`);
    expect(project.stdout).toMatch(/^project prj_\w+ inference in team team_\w+/);

    const user2 = await services.identity.findUser('dev@example.com');
    expect(user2).toBeDefined();
    const keyId = /key (key_\w+)/.exec(key.stdout)![1]!;
    expect((await admin('revoke-key', '--id', keyId)).stdout).toContain(`revoked ${keyId}`);
  });

  test.concurrent('bad usage exits 1 with a clear message', async ({ expect }) => {
    const [missing, unknown, invalid, help, none] = await Promise.all([
      admin('create-key'),
      admin('frobnicate'),
      admin('create-user', '--email', 'bad', '--name', 'X'),
      admin('--help'),
      admin(),
    ]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('--user is required');
    expect(unknown.stderr).toContain("unknown command 'frobnicate'");
    expect(invalid.stderr).toContain('email: must be an email address');
    // --help is help: the usage on stdout, exit 0, and no database opened for it.
    expect(help.code ?? 0).toBe(0);
    expect(help.stdout).toMatch(/^Usage: npm run admin -- <command>/);
    expect(help.stderr).not.toContain('using the database');
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^Usage: npm run admin/);
  });

  test('says which database it opened, and refuses to guess where DATA_DIR holds none', async () => {
    const empty = await mkdtemp(path.join(os.tmpdir(), 'admin-no-db-'));
    try {
      const { DATABASE_URL: _unset, ...inherited } = process.env;
      const env = { ...inherited, DATA_DIR: empty };
      const entry = process.env.TEST_ENGINE === 'tsx' ? ADMIN_SOURCE : [inject('adminBundle')];
      // The two calls share nothing: they run together.
      const [listed, refused] = await Promise.all([
        admin('list-keys', '--user', 'ops@example.com'),
        run(process.execPath, [...entry, 'list-keys', '--user', 'x'], { env }).catch(
          (error: { stdout: string; stderr: string; code: number }) => error,
        ),
      ]);
      const url = new URL(db.dbUrl);
      expect(listed.stderr).toContain(`using the database: ${url.hostname}:${url.port}${url.pathname}`);
      expect((refused as { code: number }).code).toBe(1);
      expect(refused.stderr).toContain(`no database in ${path.join(empty, 'pg')}`);
      expect(await readdir(empty)).toEqual([]); // nothing created
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });
});

/** `npm start`'s own command: the gateway's source through tsx. */
const GATEWAY_SOURCE = ['--import', 'tsx', 'src/main.ts'];

/**
 * The gateway's entry for a start whose subject is what the gateway does, not the command: the run's bundle of the
 * same source (test/support/global-setup.ts), which spends about a second less CPU starting than tsx's loader; on a
 * loaded machine a start through tsx took most of a 30 s timeout. TEST_ENGINE=tsx runs the source.
 */
const gatewayEntry = () => (process.env.TEST_ENGINE === 'tsx' ? GATEWAY_SOURCE : [inject('gatewayBundle')]);

// Its two tests share nothing (the first has a database of its own, the second opens none): they run together (each
// asserts with its own context's `expect`, as concurrent tests must). One start, the first, runs `npm start`'s own
// command, through tsx: the source serves as the image runs it. Each test starts processes, seconds each on a loaded
// machine: the timeout is the file's other suite's.
describe('npm start', { concurrent: true, timeout: 120_000 }, () => {
  test('first start creates the admin with ADMIN_API_KEY, prints ids once, and serves; a second start creates nothing', async ({
    expect,
  }) => {
    const fresh = await createTestDatabase();
    const adminKey = 'test_admin_key_0123456789abcdef';
    const start = (entry: string[]) =>
      new Promise<{ output: string; stop: () => Promise<void> }>((resolve, reject) => {
        const child = spawn(process.execPath, entry, {
          env: { ...process.env, DATABASE_URL: fresh.dbUrl, PORT: '0', HOST: '127.0.0.1', ADMIN_API_KEY: adminKey },
        });
        let output = '';
        child.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          if (output.includes('Serving on')) {
            resolve({
              output,
              stop: () =>
                new Promise((done) => {
                  child.once('exit', () => done());
                  child.kill('SIGTERM');
                }),
            });
          }
        });
        child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.once('exit', (code) => reject(new Error(`exited ${code}: ${output}`)));
      });
    const first = await start(GATEWAY_SOURCE);
    expect(first.output).toContain('First start: created the admin user');
    expect(first.output).toContain('(the value of ADMIN_API_KEY)');
    expect(first.output).not.toContain(adminKey);
    const url = /Serving on (http:\/\/[\d.:]+)/.exec(first.output)![1]!;
    const res = await restClient(url, adminKey)('GET', '/dedicated/beta/endpoint');
    expect(res.status).toBe(200);
    await first.stop();

    const second = await start(gatewayEntry());
    expect(second.output).not.toContain('First start');
    await second.stop();
    const users = await fresh.sql`SELECT count(*)::int AS n FROM users`;
    expect(users[0]!.n).toBe(1);
    await fresh.close();
  });

  test('a malformed variable stops start-up with a message naming it', async ({ expect }) => {
    const result = await run(process.execPath, gatewayEntry(), { env: { ...process.env, PORT: 'eighty' } }).catch(
      (e: { stderr: string; code: number }) => e,
    );
    expect((result as { code: number }).code).toBe(1);
    expect((result as { stderr: string }).stderr).toContain('Configuration error: PORT must be an integer from 0 to 65535 (got "eighty")');
  });
});
