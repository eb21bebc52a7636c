/**
 * The examples of the README and of every page of docs/, run as a new user
 * copies them (issues 19 and 32): every `curl` command against `$BASE` (the
 * REST, GraphQL, chat, live-status, W&B, replicas, engine logs and events
 * sections), and every operation of
 * the management GraphQL section's `graphql` blocks and of the chat section's,
 * against a real gateway serving the tiny model from the stand-in hub (under
 * the docs' repository name, Qwen/Qwen3-0.6B-GGUF) and the stand-in W&B
 * registry. Beside them: every GraphQL operation of every page is valid
 * against schema.graphql, every relative link and anchor leads somewhere, and
 * a `curl` example that this file neither runs nor names (with why) fails.
 * The README's walk-through is run by sandbox.test.ts, against the sandbox.
 *
 * Extraction rules, so that an edited page is still found or fails clearly:
 * a section is found by its heading's text, whatever its level, in whichever
 * page has it, and runs to the next heading of the same or a higher level
 * (headings inside fenced blocks do not count); in its ```sh blocks,
 * every `curl` command is read the way a POSIX shell reads it (quotes,
 * `$VAR` expansion, `\` line continuations, `#` comments) with KEY, PROJECT,
 * BASE and EP set as the README's `export` lines say; in its ```graphql blocks,
 * each line starting with `query`, `mutation` or `subscription` starts an
 * operation, and a `# variables:` comment gives that operation's variables.
 * The extraction lives in test/support/docs.ts.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { buildSchema, parse, validate } from 'graphql';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { standardRepos, startTestApp, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { FAKE_WANDB_KEY, startFakeWandb, type FakeWandb } from '../support/fake-wandb.js';
import { buildTinyGguf } from '../support/tiny-gguf.js';
import {
  anchor,
  curlRequest,
  fencedBlocks,
  graphqlExamples,
  headings,
  pageSection,
  PAGES,
  ROOT,
  section,
  shellCommands,
  type CurlRequest,
  type GraphQLExample,
} from '../support/docs.js';
import type { EndpointStatus } from '../../src/domain/lifecycle.js';

/** The model the examples name, served by the stand-in hub with the tiny model's bytes. */
const README_REPO = 'Qwen/Qwen3-0.6B-GGUF';

/** The curl commands of a text's sh blocks. */
function curlsIn(text: string, vars: Record<string, string>): CurlRequest[] {
  return fencedBlocks(text, 'sh')
    .flatMap((block) => shellCommands(block.body, vars))
    .filter((words) => words[0] === 'curl')
    .map(curlRequest);
}

/** The curl commands of a section's sh blocks. */
function curlCommands(title: string, vars: Record<string, string>): CurlRequest[] {
  return curlsIn(pageSection(title).text, vars);
}

/** The sections whose curl commands this file runs, each in its test below. */
const RUN_SECTIONS = [
  'REST',
  'Chat completions',
  'GraphQL',
  'Live status',
  'Endpoints from W&B registry artifacts',
  'Replicas',
  'Engine logs',
  'Events',
];
/** Curl examples that are not run here, by the start of the command as shown, and why. */
const NOT_RUN: { shown: string; why: string }[] = [
  {
    shown: 'curl -N localhost:8000/v1/chat/completions',
    why: 'the engine run alone (`npm run engine`), not the gateway: test/engine runs the engine',
  },
];

// ---------------------------------------------------------------- the run

let t: TestApp;
let hub: FakeHub;
let registry: FakeWandb;
let admin: SeededUser;
let vars: Record<string, string>;

beforeAll(async () => {
  hub = await startFakeHub({
    repos: [...standardRepos(), { id: README_REPO, files: { 'Qwen3-0.6B-Q4_K_M.gguf': buildTinyGguf({ seed: 11 }) } }],
  });
  // The registry artifact the W&B section names (acme/model/llama-3-8b-gguf:v3), with the tiny model's bytes.
  registry = await startFakeWandb({
    artifacts: [
      {
        org: 'acme',
        registry: 'model',
        name: 'llama-3-8b-gguf',
        versions: ['v0', 'v1', 'v2', 'v3'].map((version, i) => ({
          version,
          files: { 'llama-3-8b-Q4_K_M.gguf': buildTinyGguf({ seed: 20 + i }) },
        })),
      },
    ],
  });
  t = await startTestApp({ hub, env: { WANDB_BASE_URL: registry.url, WANDB_API_KEY: FAKE_WANDB_KEY } });
  admin = await t.seed.user({ admin: true });
  const project = await admin.project('readme');
  vars = { BASE: t.url, KEY: admin.key, PROJECT: project.id, EP: '' };
}, 120_000);

afterAll(async () => {
  await hub?.close();
  await registry?.close();
});

/** Runs an ES module's source with node from the repository root (so that its imports resolve to our node_modules). */
function runNode(source: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--input-type=module', '-e', source],
      { env: { ...process.env, ...env }, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

interface Answer {
  status: number;
  contentType: string;
  text: string;
}

async function run(request: CurlRequest): Promise<Answer> {
  const response = await fetch(request.url, {
    method: request.method,
    headers: request.headers,
    ...(request.body !== undefined ? { body: request.body } : {}),
  });
  return { status: response.status, contentType: response.headers.get('content-type') ?? '', text: await response.text() };
}

function json(answer: Answer, request: CurlRequest): any {
  expect(answer.contentType, request.shown).toContain('application/json');
  return JSON.parse(answer.text);
}

/** The lifecycle action a command or mutation asks for, and the status the endpoint must have first. */
const WAIT_BEFORE: Record<string, EndpointStatus> = { sleep: 'RUNNING', wake: 'SLEEPING', restart: 'TERMINATED' };

async function createFromReadme(): Promise<string> {
  const [create] = curlCommands('REST', vars).filter((c) => c.method === 'POST' && c.url.endsWith('/dedicated/beta/endpoint'));
  if (!create) throw new Error(`${pageSection('REST').file} "REST" has no create command (curl -X POST $BASE/dedicated/beta/endpoint)`);
  const answer = await run(create);
  expect(answer.status, `${create.shown}\n→ ${answer.text}`).toBe(200);
  const body = json(answer, create);
  // As the README's comment says: the status object, INITIALIZING.
  expect(body).toMatchObject({ status: 'INITIALIZING', phase: 'REQUESTING_VIRTUAL_MACHINE', errorCode: null });
  expect(body.endpointId).toMatch(/^ep_/);
  return body.endpointId as string;
}

describe('reading the examples', () => {
  test('a broken example fails with a message that says what and where', () => {
    expect(section('# A\n## B\ntext\n', 'REST')).toBeUndefined();
    expect(() => pageSection('REST', [{ file: 'a.md', text: '# A\n## B\n' }])).toThrow(
      'no page (README.md, docs/*.md) has a section "REST"',
    );
    expect(() =>
      pageSection('REST', [
        { file: 'a.md', text: '## REST\n' },
        { file: 'b.md', text: '### REST\n' },
      ]),
    ).toThrow('the section "REST" is in a.md and b.md');
    expect(() => shellCommands('curl -d \'{"a": 1}', {})).toThrow('unterminated single quote in a README example');
    expect(() => shellCommands('curl $BASE/x -H "Authorization: Bearer $TOKEN"', { BASE: 'http://h' })).toThrow(
      'a README example uses $TOKEN, which the examples test does not set',
    );
    expect(() => graphqlExamples('query { me }\n# variables: {"input": ')).toThrow(
      'the "# variables:" comment of the docs\' me example is not JSON',
    );
  });

  test('shell words as a shell reads them: quotes, splices, continuations, comments', () => {
    const [words] = shellCommands(`curl -s -X POST $BASE/e -H "Authorization: Bearer $KEY" \\\n  -d '{"p": "'$PROJECT'"}' # a comment`, {
      BASE: 'http://h',
      KEY: 'k',
      PROJECT: 'prj_1',
    });
    expect(curlRequest(words!)).toEqual({
      shown: expect.any(String),
      method: 'POST',
      url: 'http://h/e',
      headers: { authorization: 'Bearer k' },
      body: '{"p": "prj_1"}',
    });
  });

  test('a section runs to the next heading of its level or higher, whatever the level it is found at', () => {
    const page = '# T\n## A\na\n### A1\na1\n```sh\n# not a heading\n```\n## B\nb\n';
    expect(section(page, 'A')).toBe('a\n### A1\na1\n```sh\n# not a heading\n```');
    expect(section(page, 'A1')).toBe('a1\n```sh\n# not a heading\n```');
    expect(anchor('Metrics, activity and content logs')).toBe('metrics-activity-and-content-logs');
    expect(anchor('Endpoints from W&B registry artifacts')).toBe('endpoints-from-wb-registry-artifacts');
  });
});

describe('the pages themselves', () => {
  test('every curl example against $BASE, on every page, is in a section this file runs, or is named here with why not', () => {
    const dummy = { BASE: 'http://base', KEY: 'k', PROJECT: 'prj_1', EP: 'ep_1' };
    const run = new Set(RUN_SECTIONS.flatMap((title) => curlCommands(title, dummy).map((c) => c.shown)));
    const unrun = PAGES.flatMap((page) =>
      curlsIn(page.text, dummy)
        .filter((c) => !run.has(c.shown) && !NOT_RUN.some((n) => c.shown.startsWith(n.shown)))
        .map((c) => `${page.file}: ${c.shown}`),
    );
    expect(unrun, 'curl examples no test runs: put them in a section listed in RUN_SECTIONS, or name them in NOT_RUN').toEqual([]);
    for (const title of RUN_SECTIONS) expect(curlCommands(title, dummy).length, `curl examples in "${title}"`).toBeGreaterThan(0);
  });

  test('every GraphQL operation on every page is valid against schema.graphql', () => {
    const schema = buildSchema(readFileSync(new URL('schema.graphql', ROOT), 'utf8'));
    let count = 0;
    for (const page of PAGES) {
      for (const block of fencedBlocks(page.text, 'graphql')) {
        for (const example of graphqlExamples(block.body)) {
          count++;
          const errors = validate(schema, parse(example.document)).map((e) => e.message);
          expect(errors, `${page.file}:\n${example.document}`).toEqual([]);
        }
      }
    }
    expect(count).toBeGreaterThanOrEqual(25);
  });

  test('every relative link leads to a file that exists, and every #anchor to a heading of its page', () => {
    const anchors = new Map<string, Set<string>>();
    const anchorsOf = (file: string): Set<string> => {
      if (!anchors.has(file)) anchors.set(file, new Set(headings(readFileSync(new URL(file, ROOT), 'utf8')).map((h) => anchor(h.title))));
      return anchors.get(file)!;
    };
    const broken: string[] = [];
    for (const page of PAGES) {
      const prose = page.text.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
      for (const [, target] of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const [file, hash] = target!.split('#') as [string, string | undefined];
        const resolved = file === '' ? page.file : new URL(file, new URL(page.file, ROOT)).pathname.slice(ROOT.pathname.length);
        if (!existsSync(new URL(resolved, ROOT))) broken.push(`${page.file}: ${target} (no file ${resolved})`);
        else if (hash !== undefined && resolved.endsWith('.md') && !anchorsOf(resolved).has(hash)) {
          broken.push(`${page.file}: ${target} (no heading for #${hash} in ${resolved})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});

describe('the examples, run', () => {
  test('the REST section: create, list, read, update and every lifecycle action answer 200 as it says', async () => {
    vars.EP = await createFromReadme();
    const commands = curlCommands('REST', vars).filter((c) => !(c.method === 'POST' && c.url.endsWith('/dedicated/beta/endpoint')));
    expect(commands.length, 'REST examples found').toBeGreaterThanOrEqual(9);
    for (const command of commands) {
      const action = /\/(sleep|wake|restart|terminate)$/.exec(command.url)?.[1];
      // The page lists restart before terminate; restart is allowed only from TERMINATED (or FAILED), so it runs after.
      if (action === 'restart') continue;
      const before = action ? WAIT_BEFORE[action] : undefined;
      if (before) await waitForStatus(t.sql, vars.EP, before, 90_000);
      const answer = await run(command);
      expect(answer.status, `${command.shown}\n→ ${answer.text}`).toBe(200);
      const body = json(answer, command);
      if (command.url.includes('/version')) expect(body.data['0']).toMatchObject({ versionIndex: 0, hfModelRepo: README_REPO });
      if (action === 'sleep') expect(body.status).toBe('SLEEPING');
      if (action === 'terminate') {
        expect(body.status).toBe('TERMINATING');
        const restart = commands.find((c) => c.url.endsWith('/restart'))!;
        await waitForStatus(t.sql, vars.EP, 'TERMINATED', 60_000);
        const restarted = await run(restart);
        expect(restarted.status, `${restart.shown}\n→ ${restarted.text}`).toBe(200);
        expect(json(restarted, restart)).toMatchObject({ status: 'INITIALIZING' });
      }
    }
  }, 180_000);

  test('the chat section: a completion, a stream (ending with data: [DONE]), the SSE subscription and the mutation, from an endpoint the docs created', async () => {
    vars.EP = await createFromReadme();
    const commands = curlCommands('Chat completions', vars);
    expect(commands.length, 'chat curl examples found').toBeGreaterThanOrEqual(3);
    for (const command of commands) {
      const answer = await run(command);
      const shown = `${command.shown}\n→ ${answer.text}`;
      expect(answer.status, shown).toBe(200);
      if (command.url.endsWith('/graphql')) {
        // The subscription over SSE: `next` events with chunks, then `complete`.
        expect(answer.contentType, shown).toContain('text/event-stream');
        const events = answer.text.split(/\r?\n\r?\n/).filter((e) => e.trim() !== '' && !e.startsWith(':'));
        expect(events.at(-1), shown).toMatch(/^event: complete/);
        const next = events.filter((e) => e.startsWith('event: next'));
        expect(next.length, shown).toBeGreaterThan(0);
        for (const event of next) {
          const data = JSON.parse(/\ndata: (.*)/.exec(event)![1]!) as { data?: { chatCompletion: unknown }; errors?: unknown };
          expect(data.errors, shown).toBeUndefined();
          expect(data.data?.chatCompletion, shown).toBeTruthy();
        }
      } else if (JSON.parse(command.body ?? '{}').stream) {
        expect(answer.contentType, shown).toContain('text/event-stream');
        const events = answer.text.split(/\r?\n\r?\n/).filter(Boolean);
        expect(events.at(-1), shown).toBe('data: [DONE]');
        const chunks = events.slice(0, -1).map((e) => JSON.parse(e.replace(/^data: /, '')) as { object: string; usage?: unknown });
        expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
        // stream_options.include_usage: the last chunk carries the usage.
        expect(chunks.at(-1)!.usage).toMatchObject({ completion_tokens: expect.any(Number) });
      } else {
        const completion = json(answer, command);
        expect(completion, shown).toMatchObject({ object: 'chat.completion', model: vars.EP });
        expect(completion.choices[0].message.role).toBe('assistant');
      }
    }

    // The section's GraphQL mutation, with the input its prose describes.
    const [mutation, ...others] = fencedBlocks(pageSection('Chat completions').text, 'graphql').flatMap((b) => graphqlExamples(b.body));
    expect(others).toEqual([]);
    expect(mutation!.root).toBe('createChatCompletion');
    const response = await admin.rest('POST', '/graphql', {
      query: mutation!.document,
      variables: { input: { model: vars.EP, messages: [{ role: 'user', content: 'Hi' }], maxTokens: 8 } },
    });
    const shown = `${mutation!.document}\n→ ${JSON.stringify(response.body)}`;
    expect(response.body.errors, shown).toBeUndefined();
    expect(response.body.data.createChatCompletion.completion.choices[0].finishReason, shown).toBeTruthy();

    // The `openai` package example, run as a script (its TypeScript stripped by the compiler) with the docs' KEY.
    const example = fencedBlocks(pageSection('Chat completions').text, 'ts').find((b) => b.before.includes('`openai` package'));
    if (!example) {
      throw new Error(
        `${pageSection('Chat completions').file} "Chat completions" has no \`\`\`ts block after "With the official \`openai\` package:"`,
      );
    }
    for (const placeholder of ["'ep_…'", "'http://localhost:8080/dedicated/v1'"]) {
      if (!example.body.includes(placeholder))
        throw new Error(`the docs' openai example no longer has ${placeholder}, which this test replaces`);
    }
    const source = example.body
      .replace("'ep_…'", JSON.stringify(vars.EP))
      .replace("'http://localhost:8080/dedicated/v1'", JSON.stringify(`${t.url}/dedicated/v1`));
    const code = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    const script = await runNode(code, { KEY: admin.key });
    expect(script.code, `the docs' openai example failed:\n${script.stderr}`).toBe(0);
  }, 180_000);

  test("the GraphQL section: the curl example, every query and every mutation succeed with the docs' selections", async () => {
    const [curl] = curlCommands('GraphQL', vars);
    const answer = await run(curl!);
    expect(answer.status, curl!.shown).toBe(200);
    const body = json(answer, curl!);
    expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
    expect(body.data.me.user.email).toBe(admin.user.email);

    const examples = fencedBlocks(pageSection('GraphQL').text, 'graphql').flatMap((b) => graphqlExamples(b.body));
    const roots = examples.map((e) => e.root);
    expect(roots).toEqual(expect.arrayContaining(['me', 'endpoint', 'createEndpoint', 'deleteEndpoint', 'createApiKey', 'revokeApiKey']));

    // addTeamMember names ops@example.com: a user that must exist.
    const ops = await t.app.services.identity.createUser('system', { email: 'ops@example.com', name: 'Ops', isAdmin: false });
    if (ops.type === 'error') throw new Error(ops.error.message);
    // The queries come first and read an endpoint: one the README's REST create made; createEndpoint's then serves the mutations.
    const ids: Record<string, string> = {
      project: vars.PROJECT!,
      team: admin.teamId,
      user: ops.value.id,
      endpoint: await createFromReadme(),
      apiKey: '',
    };

    /** The variables an example declares, from the ids the earlier examples made. */
    const variablesFor = (example: GraphQLExample): Record<string, unknown> => {
      if (example.variables) {
        // The README's placeholders (prj_…) stand for the caller's own ids.
        return JSON.parse(JSON.stringify(example.variables).replaceAll('prj_…', ids.project!)) as Record<string, unknown>;
      }
      const declared = [...example.document.matchAll(/\$(\w+)\s*:/g)].map((m) => m[1]!);
      const id =
        example.root === 'team'
          ? ids.team
          : example.root === 'project'
            ? ids.project
            : example.root === 'revokeApiKey'
              ? ids.apiKey
              : ids.endpoint;
      const values: Record<string, unknown> = { id, projectId: ids.project, team: ids.createdTeam ?? ids.team, user: ids.user };
      return Object.fromEntries(declared.map((name) => [name, values[name]]));
    };

    // The page lists restartEndpoint before terminateEndpoint; restart is allowed only from TERMINATED, so it runs after.
    const ordered = [...examples.filter((e) => e.root !== 'restartEndpoint')];
    const restart = examples.find((e) => e.root === 'restartEndpoint');
    if (restart) ordered.splice(ordered.findIndex((e) => e.root === 'terminateEndpoint') + 1, 0, restart);

    for (const example of ordered) {
      const action = /^(sleep|wake|restart)Endpoint$/.exec(example.root)?.[1];
      if (action) await waitForStatus(t.sql, ids.endpoint!, WAIT_BEFORE[action]!, 90_000);
      const response = await admin.rest('POST', '/graphql', { query: example.document, variables: variablesFor(example) });
      const shown = `${pageSection('GraphQL').file} GraphQL example:\n${example.document}\n→ ${JSON.stringify(response.body)}`;
      expect(response.status, shown).toBe(200);
      expect(response.body.errors, shown).toBeUndefined();
      const result = response.body.data[example.root];
      expect(result, shown).not.toBeNull();
      if (example.kind === 'mutation') {
        expect(result.__typename, shown).toBe(`${example.root[0]!.toUpperCase()}${example.root.slice(1)}Success`);
      }
      if (example.root === 'createEndpoint') ids.endpoint = result.endpoint.id;
      if (example.root === 'createTeam') ids.createdTeam = result.team.id;
      if (example.root === 'createApiKey') ids.apiKey = result.apiKey.id;
    }
  }, 240_000);

  test("the live-status section: the endpointEvents subscription over SSE streams the project's events as they happen", async () => {
    const [curl, ...others] = curlCommands('Live status', vars);
    expect(others).toEqual([]);
    const abort = new AbortController();
    const response = await fetch(curl!.url, { method: curl!.method, headers: curl!.headers, body: curl!.body!, signal: abort.signal });
    expect(response.status, curl!.shown).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    // The stream opens with a comment; then every event of the project's endpoints is an `event: next`.
    while (!text.startsWith(':')) text += decoder.decode((await reader.read()).value, { stream: true });
    const endpointId = await createFromReadme();
    const deadline = Date.now() + 30_000;
    let next: RegExpExecArray | null;
    while (!(next = /event: next\r?\ndata: (.*)\r?\n/.exec(text)) && Date.now() < deadline) {
      const chunk = await Promise.race([reader.read(), new Promise<undefined>((r) => setTimeout(r, 2000))]);
      if (chunk?.value) text += decoder.decode(chunk.value, { stream: true });
      // Nothing yet (the create came before the subscription was in place): another event, a new version.
      else if (!chunk) await admin.rest('PUT', `/dedicated/beta/endpoint/${endpointId}`, { newVersionComment: 'an event' });
    }
    abort.abort();
    expect(next, `${curl!.shown}\n→ ${text}`).not.toBeNull();
    const data = JSON.parse(next![1]!) as { data?: { endpointEvents: Record<string, unknown> }; errors?: unknown };
    expect(data.errors).toBeUndefined();
    expect(data.data!.endpointEvents).toMatchObject({
      id: expect.any(String),
      type: expect.any(String),
      endpointId,
      cause: expect.any(String),
    });
    await admin.rest('DELETE', `/dedicated/beta/endpoint/${endpointId}`);
  }, 60_000);

  test('the W&B section: the create call answers as its comment says, and a second call with the key rolls the same endpoint out', async () => {
    const [create, ...others] = curlCommands('Endpoints from W&B registry artifacts', vars);
    expect(others).toEqual([]);
    const first = await run(create!);
    expect(first.status, `${create!.shown}\n→ ${first.text}`).toBe(200);
    const body = json(first, create!);
    expect(body).toMatchObject({ endpointName: 'llama-3-8b-gguf-v3', projectId: vars.PROJECT, teamId: admin.teamId });
    expect(body.endpointId).toMatch(/^ep_/);
    const again = await run(create!);
    expect(again.status, again.text).toBe(200);
    expect(json(again, create!).endpointId).toBe(body.endpointId);
    await admin.rest('DELETE', `/dedicated/beta/endpoint/${body.endpointId}`);
  }, 60_000);

  test('the replicas, engine logs and events sections: every curl command answers as its comment says, a follow streams', async () => {
    if (!vars.EP) vars.EP = await createFromReadme();
    await waitForStatus(t.sql, vars.EP, 'RUNNING', 90_000);
    const commands = ['Replicas', 'Engine logs', 'Events'].flatMap((title) => curlCommands(title, vars));
    expect(commands.length).toBeGreaterThanOrEqual(6);
    for (const command of commands) {
      const url = new URL(command.url);
      if (url.searchParams.get('cursor') === '…') {
        // The page's placeholder: a cursor an earlier page of the same list gave.
        const first = await admin.rest('GET', `/dedicated/beta/endpoint/${vars.EP}/events?limit=1&newestFirst=true`);
        url.searchParams.set('cursor', first.body.nextCursor);
      }
      if (url.searchParams.get('follow') === 'true') {
        // A follow streams until the client goes: its header and the first lines of `tail`, then disconnect.
        const abort = new AbortController();
        const response = await fetch(url, { headers: command.headers, signal: abort.signal });
        expect(response.status, command.shown).toBe(200);
        expect(response.headers.get('x-replica-id')).toMatch(/^rep_/);
        const sse = command.headers.accept === 'text/event-stream';
        expect(response.headers.get('content-type')).toContain(sse ? 'text/event-stream' : 'text/plain');
        if (url.searchParams.get('tail')) {
          const { value } = await response.body!.getReader().read();
          expect(new TextDecoder().decode(value), command.shown).toMatch(/\S/);
        }
        abort.abort();
        continue;
      }
      const answer = await run({ ...command, url: url.toString() });
      expect(answer.status, `${command.shown}\n→ ${answer.text}`).toBe(200);
      const body = json(answer, command);
      if (url.pathname.endsWith('/replicas')) {
        expect(body.data[0]).toMatchObject({ replicaId: expect.stringMatching(/^rep_/), state: 'READY', runtime: 'local' });
        expect(body.failures).toMatchObject({ windowSeconds: 600, count: 0 });
      } else if (url.pathname.endsWith('/logs')) {
        expect(body).toMatchObject({ endpointId: vars.EP, replicaId: expect.stringMatching(/^rep_/) });
        expect(body.lines.some((line: string) => line.startsWith('ENGINE_READY'))).toBe(true);
      } else {
        expect(body.data[0]).toMatchObject({ eventId: expect.any(String), type: expect.any(String), cause: expect.any(String) });
        if (!url.searchParams.has('cursor')) expect(body.data[0].type).toBe('CREATED');
      }
    }
  }, 120_000);
});
