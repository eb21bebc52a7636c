/**
 * The endpoint CLI, run as a process (bin/dedicated.mjs, or its bundle: see `cli`) against a real
 * gateway serving the tiny model: login, the endpoint commands, a live
 * `status --watch`, a streamed `chat`, --json output, and its errors.
 *
 * Most of the file's time is processes starting (every call is one) and engines starting. After the login and the
 * first endpoint, the tests run in two lines side by side, each in order: the first endpoint's steps (then two tests that
 * need no engine), and the tests of endpoints of their own (the reasoning model's, whose engine starts while the first
 * endpoint is read and updated, then the failed one's). Two lines, not one per test: the tests are mostly CLI processes,
 * whose starts only share the same two cores (every test at once, 18 processes, left the gateway's database
 * connections waiting past their timeout under a load of 25).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { startTestApp, TINY_REPO, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { H100_X1 } from '../support/gateway.js';

let t: TestApp;
let alice: SeededUser;
let projectId: string;
let configDir: string;

beforeAll(async () => {
  t = await startTestApp({ env: { WAKE_TIMEOUT_MS: '60000' } });
  alice = await t.seed.user();
  projectId = (await alice.project('cli')).id;
  configDir = await mkdtemp(path.join(os.tmpdir(), 'dedicated-cli-'));
}, 120_000);

afterAll(async () => {
  if (configDir) await rm(configDir, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * The binary: bin/dedicated.mjs runs the source through tsx, as installed. Most calls here run the run's bundle of
 * the same source instead, which does what the binary does 0.7 s sooner per call (test/support/global-setup.ts); the
 * login test and TEST_ENGINE=tsx run the binary itself.
 */
const BIN = 'bin/dedicated.mjs';
const bundled = () => (process.env.TEST_ENGINE === 'tsx' ? BIN : inject('cliBundle'));

/**
 * Runs the CLI with only the config file's settings (no key in the environment, unless given); `onStdout` sees its
 * output as it comes.
 */
function cli(args: string[], env: Record<string, string> = {}, input?: string, entry = bundled(), onStdout?: () => void): Promise<Run> {
  const { DEDICATED_API_KEY: _key, DEDICATED_BASE_URL: _url, ...inherited } = process.env;
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [entry, ...args],
      { env: { ...inherited, DEDICATED_CONFIG: path.join(configDir, 'config.json'), NO_COLOR: '1', ...env }, timeout: 90_000 },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    if (input !== undefined) child.stdin!.end(input);
    if (onStdout) child.stdout!.on('data', onStdout);
  });
}

/** Calls and engine starts beside the other tests' on a loaded machine: a wider bound than each test had alone. */
const CONCURRENT_TIMEOUT_MS = 150_000;

describe('dedicated (the endpoint CLI)', () => {
  test('login checks the key and saves it, readable by its owner only; a bad key is one line and exit 1', async () => {
    // The refused key writes nothing: both logins run together.
    const [bad, ok] = await Promise.all([
      cli(['--base-url', t.url, 'login', '--key', 'dek_not-a-real-key'], {}, undefined, BIN),
      cli(['--base-url', t.url, 'login', '--key', alice.key], {}, undefined, BIN),
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toMatch(/^error: the API key was refused/);

    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain(`logged in to ${t.url} as ${alice.user.email}`);
    const file = path.join(configDir, 'config.json');
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ baseUrl: t.url, apiKey: alice.key });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });

  let endpointId: string;
  /** `endpoints create` in the project, answering JSON, with the flags given after the required ones. */
  const createArgs = (name: string, model: string, ...flags: string[]) => [
    '--json',
    'endpoints',
    'create',
    '--project',
    projectId,
    '--name',
    name,
    '--model',
    model,
    '--instance',
    H100_X1,
    ...flags,
  ];

  test('create, watch it to RUNNING live, list and get, human and --json', async () => {
    // The hub sends the model slowly (8 KiB every 250 ms: 14 s for all of it) until the watch, a process that starts
    // meanwhile, has printed the status it starts with: it sees the start before RUNNING, however busy the machine.
    // Then the rest comes at once (the hub reads the fault's delay before each chunk).
    const slow = { type: 'slow' as const, chunkBytes: 8 * 1024, delayMs: 250 };
    t.hub.setFault(slow, { repo: TINY_REPO, on: ['cdn'], times: 1 });
    const created = await cli(createArgs('cli-tiny', TINY_REPO, '--max-token-count', '1024', '--comment', 'from the CLI'));
    expect(created.code, created.stderr).toBe(0);
    const endpoint = JSON.parse(created.stdout) as { id: string; name: string; spec: { maxTokenCount: number } };
    expect(endpoint).toMatchObject({ name: 'cli-tiny', spec: { maxTokenCount: 1024 } });
    endpointId = endpoint.id;

    const watched = await cli(['status', endpointId, '--watch', '--until', 'RUNNING'], {}, undefined, bundled(), () => (slow.delayMs = 0));
    expect(watched.code, watched.stderr).toBe(0);
    const lines = watched.stdout.trim().split('\n');
    expect(lines.length).toBeGreaterThanOrEqual(2); // the status at start, then changes
    expect(lines.at(-1)).toMatch(/RUNNING\s+replicas 1\/1/);
    // The download was followed live: the phase, then bytes.
    expect(watched.stdout).toMatch(/DOWNLOADING_MODEL|ENGINE_INITIALIZING|RUNNING/);

    // The reads after it run together (each call is a process that starts in a second or so).
    const [listed, listedJsonRun, got] = await Promise.all([
      cli(['endpoints', 'list']),
      cli(['--json', 'ep', 'list', '--project', projectId]),
      cli(['endpoints', 'get', endpointId]),
    ]);
    expect(listed.stdout).toMatch(new RegExp(`^ID\\s+NAME\\s+STATUS\\s+PROJECT\\n${endpointId}\\s+cli-tiny\\s+RUNNING\\s+cli`, 'm'));
    const listedJson = JSON.parse(listedJsonRun.stdout) as { id: string }[];
    expect(listedJson.map((e) => e.id)).toEqual([endpointId]);

    expect(got.stdout).toMatch(/status\s+RUNNING/);
    expect(got.stdout).toContain(`model        ${TINY_REPO}`);
  }, 120_000);

  // The first endpoint's steps, in order (the reads first, together), then two tests that need no engine, one at a time,
  // beside the tests below.
  describe.concurrent('the first endpoint, step by step, then the rest', { timeout: CONCURRENT_TIMEOUT_MS }, () => {
    describe.concurrent('reads, which change nothing', () => {
      test('chat streams the answer to the terminal; the message may come on stdin', async () => {
        // Nothing here compares one answer with another: the four calls run together.
        const [answered, piped, unknown, typo] = await Promise.all([
          cli(['chat', endpointId, 'Say', 'something.', '--max-tokens', '8', '--temperature', '0']),
          cli(['--json', 'chat', endpointId, '--max-tokens', '4'], {}, 'Hello from stdin'),
          cli(['chat', 'ep_doesnotexist', 'hi']),
          // A typo in the endpoint says what the argument takes and where to find the values (issue 32).
          cli(['chat', 'cli-tnyi', 'hi']),
        ]);
        expect(answered.code, answered.stderr).toBe(0);
        expect(answered.stdout.trim().length).toBeGreaterThan(0);

        expect(piped.code, piped.stderr).toBe(0);
        const result = JSON.parse(piped.stdout) as { content: string; finishReason: string; usage: { completion_tokens: number } };
        expect(result.finishReason).toMatch(/^(length|stop)$/);
        expect(result.usage.completion_tokens).toBeGreaterThan(0);
        expect(result.usage.completion_tokens).toBeLessThanOrEqual(4);

        expect(unknown.code).toBe(1);
        expect(unknown.stderr).toMatch(/^error: HTTP 404: The model 'ep_doesnotexist' does not exist/);
        expect(typo.code).toBe(1);
        expect(typo.stderr).toContain("model is one of your endpoints' ids or names: GET /dedicated/v1/models lists them.");
      });

      test("tokenize counts a text's tokens with the endpoint's tokenizer, human and --json", async () => {
        const [human, json, unknown] = await Promise.all([
          cli(['tokenize', endpointId, 'Hello', 'world']),
          cli(['--json', 'tokenize', endpointId], {}, 'Hello world'),
          cli(['tokenize', 'ep_doesnotexist', 'hi']),
        ]);
        expect(human.code, human.stderr).toBe(0);
        const match = /^(\d+) tokens?: ([\d ]+)$/.exec(human.stdout.trim());
        expect(match).not.toBeNull();
        expect(json.code, json.stderr).toBe(0);
        const parsed = JSON.parse(json.stdout) as { count: number; tokens: number[] };
        expect(parsed.count).toBe(Number(match![1]));
        expect(parsed.tokens.join(' ')).toBe(match![2]);
        expect(unknown.code).toBe(1);
        expect(unknown.stderr).toMatch(/^error: HTTP 404: /);
      });
    });

    test.sequential('update makes a version, versions lists them, rollback returns to one', async () => {
      // The refused updates change nothing: they run with the one that succeeds.
      const [updated, nothing, invalid, badFlag] = await Promise.all([
        cli(['endpoints', 'update', endpointId, '--max-batch-size', '2', '--comment', 'smaller batch']),
        cli(['endpoints', 'update', endpointId]),
        cli(['endpoints', 'update', endpointId, '--max-replica', '99']),
        cli(['endpoints', 'update', endpointId, '--max-batch-size', 'lots']),
      ]);
      expect(updated.code, updated.stderr).toBe(0);
      const versions = await cli(['endpoints', 'versions', endpointId]);
      expect(versions.stdout).toMatch(/^VERSION\s+ROLLOUT\s+MODEL/m);
      expect(versions.stdout).toMatch(/^0\s+\S+\s+test-org\/tiny-llama-GGUF\s+8\s+1024.*from the CLI$/m);
      expect(versions.stdout).toMatch(/^1\s+\S+\s+test-org\/tiny-llama-GGUF\s+2\s+1024.*smaller batch$/m);

      expect(nothing.code).toBe(1);
      expect(nothing.stderr).toContain('update needs at least one setting');
      expect(invalid.code).toBe(1);
      expect(invalid.stderr.trim()).toBe('error: invalid request: --max-replica: must be from 0 to 10');
      expect(badFlag.code).toBe(1);
      expect(badFlag.stderr).toContain('--max-batch-size must be an integer');

      const rolledBack = await cli(['--json', 'endpoints', 'rollback', endpointId, '--version', '0']);
      expect(rolledBack.code, rolledBack.stderr).toBe(0);
      expect(JSON.parse(rolledBack.stdout)).toMatchObject({ spec: { maxBatchSize: 8 }, currentVersion: { versionIndex: 2 } });
    });

    test.sequential('sleep, wake, terminate and delete; acting on what is gone is one line and exit 1', async () => {
      await waitForStatus(t.sql, endpointId, 'RUNNING');
      const slept = await cli(['endpoints', 'sleep', endpointId]);
      expect(slept.code, slept.stderr).toBe(0);
      expect(slept.stdout).toMatch(new RegExp(`^${endpointId}: (STOPPING|SLEEPING)`));
      await waitForStatus(t.sql, endpointId, 'SLEEPING');
      const again = await cli(['endpoints', 'sleep', endpointId]);
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/^error: cannot sleep an endpoint whose status is SLEEPING/);

      expect((await cli(['endpoints', 'terminate', endpointId])).code).toBe(0);
      const deleted = await cli(['endpoints', 'delete', endpointId]);
      expect(deleted.stdout.trim()).toBe(`deleted ${endpointId}`);
      const gone = await cli(['endpoints', 'get', endpointId]);
      expect(gone.code).toBe(1);
      expect(gone.stderr.trim()).toBe(`error: endpoint '${endpointId}' not found`);
    });

    test.sequential("create's and update's errors name the flags: the ones missing, and the API's fields by their flags", async () => {
      // Each call is a process that starts in a second or so: the ones that change nothing run together.
      const [noInstance, two, named, byGpu, badCount, both, none] = await Promise.all([
        cli(['endpoints', 'create', '--project', projectId, '--name', 'x', '--model', TINY_REPO]),
        cli(['endpoints', 'create', '--project', projectId, '--model', TINY_REPO]),
        cli(['endpoints', 'create', '--project', projectId, '--instance', H100_X1]),
        // A GPU kind and count name the instance option as well as its id does.
        cli(['endpoints', 'create', '--project', projectId, '--gpu', 'h100', '--gpus', '2']),
        cli(['endpoints', 'create', '--project', projectId, '--gpu', 'H100', '--gpus', '3']),
        cli(['endpoints', 'create', '--project', projectId, '--gpu', 'A100', '--instance', H100_X1]),
        // 0 replicas at most is the API's rule too (the endpoint runs none until raised).
        cli(createArgs('cli-none', TINY_REPO, '--min-replica', '0', '--max-replica', '0')),
      ]);
      expect(noInstance.code).toBe(1);
      expect(noInstance.stderr).toMatch(/^error: create needs --instance \(--instance is one of: ShbPuOs4tfGb \(1 × A100 80 GB\), /);
      expect(two.stderr).toMatch(/^error: create needs --name and --instance /);
      expect(named.stderr.trim()).toBe('error: create needs --name and --model');
      expect(byGpu.stderr.trim()).toBe('error: create needs --name and --model');
      expect(badCount.stderr.trim()).toBe('error: --gpus must be one of 1, 2, 4, 8 (got 3)');
      expect(both.stderr.trim()).toBe('error: give --instance or --gpu (with --gpus), not both');
      expect(none.code, none.stderr).toBe(0);
      const endpoint = JSON.parse(none.stdout) as { id: string; spec: { autoscalingMin: number; autoscalingMax: number } };
      expect(endpoint.spec).toMatchObject({ autoscalingMin: 0, autoscalingMax: 0 });

      // The refused updates change nothing: they run together, and with the one update that succeeds.
      const [tooMany, crossed, moved, batch, instance] = await Promise.all([
        cli(['endpoints', 'update', endpoint.id, '--max-replica', '11']),
        cli(['endpoints', 'update', endpoint.id, '--min-replica', '2']),
        cli(['--json', 'endpoints', 'update', endpoint.id, '--gpu', 'A100', '--gpus', '4']),
        cli(['endpoints', 'update', endpoint.id, '--max-batch-size', '0']),
        cli(['endpoints', 'update', endpoint.id, '--instance', 'nope']),
      ]);
      expect(tooMany.code).toBe(1);
      expect(tooMany.stderr.trim()).toBe('error: invalid request: --max-replica: must be from 0 to 10');
      expect(crossed.stderr.trim()).toBe('error: invalid request: --min-replica: must not exceed --max-replica (2 > 0)');
      expect(moved.code, moved.stderr).toBe(0);
      expect((JSON.parse(moved.stdout) as { spec: { gpuType: string; numGpu: number } }).spec).toMatchObject({
        gpuType: 'A100',
        numGpu: 4,
      });
      expect(batch.stderr.trim()).toBe('error: invalid request: --max-batch-size: must be from 1 to 1024');
      expect(instance.stderr.trim()).toMatch(
        /^error: invalid request: --instance: must be one of the instance option ids: ShbPuOs4tfGb \(1 × A100 80 GB\), TwD5AqnBSVN0 \(1 × H100 80 GB\), .*drbc6G9FxJWZ \(8 × B200 192 GB\)$/,
      );
      expect((await cli(['endpoints', 'delete', endpoint.id])).code).toBe(0);
    });

    test.sequential('the key and base URL from the environment win over the login file', async () => {
      const other = await t.seed.user();
      const [run, unreachable] = await Promise.all([
        cli(['--json', 'endpoints', 'list'], { DEDICATED_API_KEY: other.key, DEDICATED_BASE_URL: t.url }),
        cli(['endpoints', 'list'], { DEDICATED_BASE_URL: 'http://127.0.0.1:9' }),
      ]);
      expect(run.code, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual([]);
      expect(unreachable.code).toBe(1);
      expect(unreachable.stderr).toMatch(/^error: cannot reach http:\/\/127.0.0.1:9/);
    });
  });

  // Endpoints of their own (none in the list the create test reads, which ran before), one at a time, beside the tests
  // above: the reasoning model's engine starts while the first endpoint is read and updated.
  describe.concurrent('beside them', { timeout: CONCURRENT_TIMEOUT_MS }, () => {
    test.sequential(
      "a reasoning model's thinking goes to stderr (stdout keeps the answer); --no-think; an answer the thinking used up says so",
      async () => {
        const created = await cli(createArgs('cli-thinking', 'test-org/tiny-thinking-GGUF', '--max-token-count', '1024'));
        expect(created.code, created.stderr).toBe(0);
        const id = (JSON.parse(created.stdout) as { id: string }).id;
        expect((await cli(['status', id, '--watch', '--until', 'RUNNING'])).code).toBe(0);

        // This template opens a think block that 8 tokens do not close: all of them are reasoning.
        const usedUp = await cli(['chat', id, 'Say', 'something.', '--max-tokens', '8', '--temperature', '0']);
        expect(usedUp.code).toBe(1);
        expect(usedUp.stdout).toBe('');
        const lines = usedUp.stderr.trimEnd().split('\n');
        expect(lines[0]).toMatch(/^thinking: \S/);
        expect(lines.at(-1)).toBe(
          'error: the answer is empty: the model spent all 8 tokens (--max-tokens 8) thinking and stopped before answering; raise --max-tokens, or pass --no-think to answer without thinking',
        );
        // Compared with the first answer, token for token: on its own, as the first was (another sequence decoded in the
        // same batch could change the arithmetic).
        const json = await cli(['--json', 'chat', id, 'Say', 'something.', '--max-tokens', '8', '--temperature', '0']);
        expect(json.code).toBe(1);
        const result = JSON.parse(json.stdout) as { content: string; reasoning: string; finishReason: string };
        expect(result).toMatchObject({ content: '', finishReason: 'length' });
        expect(result.reasoning.length).toBeGreaterThan(0);
        expect(usedUp.stderr.startsWith(`thinking: ${result.reasoning}\n`)).toBe(true);
        expect(json.stderr).toMatch(/^error: the answer is empty/);

        // These two compare with nothing: they run together.
        const [hidden, direct] = await Promise.all([
          cli(['chat', id, 'Say', 'something.', '--max-tokens', '8', '--temperature', '0', '--hide-reasoning']),
          // --no-think: chat_template_kwargs.enable_thinking false, so the tokens go to the answer.
          cli(['chat', id, 'Say', 'something.', '--max-tokens', '8', '--temperature', '0', '--no-think']),
        ]);
        expect(hidden.code).toBe(1);
        expect(hidden.stderr).not.toContain('thinking:');
        expect(hidden.stderr).toContain('error: the answer is empty');
        expect(direct.code, direct.stderr).toBe(0);
        expect(direct.stdout.trim().length).toBeGreaterThan(0);
        expect(direct.stderr).not.toContain('thinking:');
        expect(direct.stderr.trim()).toBe('(the answer stopped at the token limit: raise --max-tokens for a longer one)');
        expect((await cli(['endpoints', 'delete', id])).code).toBe(0);
      },
    );

    test.sequential('a FAILED endpoint says why: status --watch exits 1 with the message, get shows it', async () => {
      const created = await cli(createArgs('cli-missing', 'test-org/no-such-model-GGUF'));
      expect(created.code, created.stderr).toBe(0);
      const id = (JSON.parse(created.stdout) as { id: string }).id;
      const watched = await cli(['status', id, '--watch', '--until', 'RUNNING']);
      expect(watched.code).toBe(1);
      expect(watched.stderr.trim()).toMatch(new RegExp(`^error: endpoint ${id} FAILED: .*test-org/no-such-model-GGUF`));
      expect(watched.stderr.trim().split('\n')).toHaveLength(1);
      expect(watched.stdout).toMatch(/FAILED\s+WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR/);
      // The refused wake changes nothing: it runs with the read.
      const [got, woken] = await Promise.all([cli(['endpoints', 'get', id]), cli(['endpoints', 'wake', id])]);
      expect(got.stdout).toMatch(/^error\s+\S.*test-org\/no-such-model-GGUF/m);
      // Waking it says what runs it again (issue 32).
      expect(woken.code).toBe(1);
      expect(woken.stderr.trim()).toBe(
        'error: cannot wake an endpoint whose status is FAILED: restart it instead (restart runs a FAILED or TERMINATED endpoint again)',
      );
      expect((await cli(['endpoints', 'delete', id])).code).toBe(0);
    });
  });
});
