/**
 * The README's examples, run as a new user copies them (issue 19): the curl
 * commands of "### REST", "### GraphQL" and "## Chat completions", and every
 * operation of the GraphQL section's `graphql` blocks, against a real gateway
 * serving the tiny model from the stand-in hub (under the README's repository
 * name, Qwen/Qwen3-0.6B-GGUF).
 *
 * Extraction rules, so that an edited README is still found or fails clearly:
 * a section runs from its heading to the next heading of the same or a higher
 * level (headings inside fenced blocks do not count); in its ```sh blocks,
 * every `curl` command is read the way a POSIX shell reads it (quotes,
 * `$VAR` expansion, `\` line continuations, `#` comments) with KEY, PROJECT,
 * BASE and EP set as the README's `export` lines say; in its ```graphql blocks,
 * each line starting with `query` or `mutation` starts an operation, and a
 * `# variables:` comment gives that operation's variables.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { standardRepos, startTestApp, waitForStatus, type SeededUser, type TestApp } from '../support/app.js';
import { startFakeHub, type FakeHub } from '../support/fake-hub.js';
import { buildTinyGguf } from '../support/tiny-gguf.js';
import type { EndpointStatus } from '../../src/domain/lifecycle.js';

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
/** The model the README's examples name, served by the stand-in hub with the tiny model's bytes. */
const README_REPO = 'Qwen/Qwen3-0.6B-GGUF';

// ---------------------------------------------------------------- extraction

/** The text of the section under `heading` (a whole heading line, e.g. '### REST'), up to the next heading of its level or higher. */
export function section(markdown: string, heading: string): string {
  const level = /^#+/.exec(heading)![0].length;
  const lines = markdown.split('\n');
  let inFence = false;
  let start = -1;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('```')) inFence = !inFence;
    if (inFence) continue;
    const match = /^(#+) /.exec(line);
    if (start === -1) {
      if (line.trim() === heading) start = i + 1;
    } else if (match && match[1]!.length <= level) {
      return lines.slice(start, i).join('\n');
    }
  }
  if (start === -1) throw new Error(`README.md has no section "${heading}": the examples test reads its examples from there`);
  return lines.slice(start).join('\n');
}

/** The bodies of the fenced blocks of one language in `text`, with the line of prose just before each. */
export function fencedBlocks(text: string, language: string): { before: string; body: string }[] {
  const blocks: { before: string; body: string }[] = [];
  const re = new RegExp('(?:^|\\n)([^\\n]*)\\n*```' + language + '\\n([\\s\\S]*?)\\n```', 'g');
  for (const match of text.matchAll(re)) blocks.push({ before: match[1]!, body: match[2]! });
  return blocks;
}

/**
 * Shell words of each command in a `sh` block, as a POSIX shell splits them:
 * single quotes literal, double quotes with `$VAR` expanded, unquoted `$VAR`
 * expanded, `\` + newline joins lines, `#` at a word's start comments out the
 * rest of the line, and a newline outside quotes ends a command.
 */
export function shellCommands(script: string, vars: Record<string, string>): string[][] {
  const commands: string[][] = [];
  let words: string[] = [];
  let word: string | null = null;
  const expand = (i: number): [string, number] => {
    const match = /^\$(?:\{(\w+)\}|(\w+))/.exec(script.slice(i));
    if (!match) return ['$', i + 1];
    const name = match[1] ?? match[2]!;
    if (!(name in vars)) throw new Error(`a README example uses $${name}, which the examples test does not set`);
    return [vars[name]!, i + match[0].length];
  };
  const endWord = () => {
    if (word !== null) words.push(word);
    word = null;
  };
  const endCommand = () => {
    endWord();
    if (words.length > 0) commands.push(words);
    words = [];
  };
  let i = 0;
  while (i < script.length) {
    const c = script[i]!;
    if (c === '\\' && script[i + 1] === '\n') {
      endWord();
      i += 2;
    } else if (c === '\n') {
      endCommand();
      i++;
    } else if (c === ' ' || c === '\t') {
      endWord();
      i++;
    } else if (c === '#' && word === null) {
      while (i < script.length && script[i] !== '\n') i++;
    } else if (c === "'") {
      const end = script.indexOf("'", i + 1);
      if (end === -1) throw new Error(`unterminated single quote in a README example:\n${script.slice(i, i + 200)}`);
      word = (word ?? '') + script.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      word = word ?? '';
      i++;
      while (i < script.length && script[i] !== '"') {
        if (script[i] === '$') {
          const [value, next] = expand(i);
          word += value;
          i = next;
        } else if (script[i] === '\\' && i + 1 < script.length) {
          word += script[i + 1];
          i += 2;
        } else word += script[i++];
      }
      if (i >= script.length) throw new Error(`unterminated double quote in a README example`);
      i++;
    } else if (c === '$') {
      const [value, next] = expand(i);
      word = (word ?? '') + value;
      i = next;
    } else {
      word = (word ?? '') + c;
      i++;
    }
  }
  endCommand();
  return commands;
}

export interface CurlRequest {
  /** The command as the README shows it, for failure messages. */
  shown: string;
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

/** A curl command's request (the options the README uses: -s, -N, -X, -H, -d). */
export function curlRequest(words: string[]): CurlRequest {
  const shown = words.join(' ');
  let method: string | undefined;
  let url: string | undefined;
  let body: string | undefined;
  const headers: Record<string, string> = {};
  for (let i = 1; i < words.length; i++) {
    const w = words[i]!;
    if (w === '-s' || w === '-N') continue;
    if (w === '-X') method = words[++i];
    else if (w === '-H') {
      const header = words[++i] ?? '';
      const colon = header.indexOf(':');
      headers[header.slice(0, colon).trim().toLowerCase()] = header.slice(colon + 1).trim();
    } else if (w === '-d') body = words[++i];
    else if (w.startsWith('-')) throw new Error(`the examples test does not know curl's ${w} (in: ${shown})`);
    else if (url === undefined) url = w;
    else throw new Error(`two URLs in one README curl command: ${shown}`);
  }
  if (!url) throw new Error(`a README curl command without a URL: ${shown}`);
  return { shown, method: method ?? (body !== undefined ? 'POST' : 'GET'), url, headers, ...(body !== undefined ? { body } : {}) };
}

/** The curl commands of a section's sh blocks. */
function curlCommands(heading: string, vars: Record<string, string>): CurlRequest[] {
  return fencedBlocks(section(README, heading), 'sh')
    .flatMap((block) => shellCommands(block.body, vars))
    .filter((words) => words[0] === 'curl')
    .map(curlRequest);
}

export interface GraphQLExample {
  /** The operation as the README shows it. */
  document: string;
  /** Its first root field, e.g. `createEndpoint`. */
  root: string;
  kind: 'query' | 'mutation';
  /** From a `# variables:` comment after it, when there is one. */
  variables?: Record<string, unknown>;
}

/** The operations of a graphql block: each starts on a line beginning with `query` or `mutation`. */
export function graphqlExamples(block: string): GraphQLExample[] {
  const examples: GraphQLExample[] = [];
  let current: { lines: string[]; comments: string[] } | undefined;
  const finish = () => {
    if (!current) return;
    const document = current.lines.join('\n').trim();
    const kind = document.startsWith('mutation') ? 'mutation' : 'query';
    const root = /\{\s*(\w+)/.exec(document)?.[1];
    if (!root) throw new Error(`a README GraphQL example without a root field:\n${document}`);
    const comment = current.comments.join(' ');
    let variables: Record<string, unknown> | undefined;
    if (comment) {
      const json = comment.replace(/^\s*variables:\s*/, '');
      try {
        variables = JSON.parse(json) as Record<string, unknown>;
      } catch (error) {
        throw new Error(`the "# variables:" comment of the README's ${root} example is not JSON (${(error as Error).message}):\n${json}`, {
          cause: error,
        });
      }
    }
    examples.push({ document, root, kind, ...(variables ? { variables } : {}) });
    current = undefined;
  };
  for (const line of block.split('\n')) {
    if (/^(query|mutation)\b/.test(line)) {
      finish();
      current = { lines: [line], comments: [] };
    } else if (line.startsWith('#')) {
      current?.comments.push(line.replace(/^#\s?/, ''));
    } else if (line.trim() !== '') {
      if (!current) throw new Error(`a README GraphQL line outside any operation: ${line}`);
      if (current.comments.length > 0) throw new Error(`a README GraphQL operation continues after its comment: ${line}`);
      current.lines.push(line);
    }
  }
  finish();
  return examples;
}

// ---------------------------------------------------------------- the run

let t: TestApp;
let hub: FakeHub;
let admin: SeededUser;
let vars: Record<string, string>;

beforeAll(async () => {
  hub = await startFakeHub({
    repos: [...standardRepos(), { id: README_REPO, files: { 'Qwen3-0.6B-Q4_K_M.gguf': buildTinyGguf({ seed: 11 }) } }],
  });
  t = await startTestApp({ hub });
  admin = await t.seed.user({ admin: true });
  const project = await admin.project('readme');
  vars = { BASE: t.url, KEY: admin.key, PROJECT: project.id, EP: '' };
}, 120_000);

afterAll(async () => {
  await hub?.close();
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
  const [create] = curlCommands('### REST', vars).filter((c) => c.method === 'POST' && c.url.endsWith('/dedicated/beta/endpoint'));
  if (!create) throw new Error('README.md "### REST" has no create command (curl -X POST $BASE/dedicated/beta/endpoint)');
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
    expect(() => section('# A\n## B\ntext\n', '## REST')).toThrow('README.md has no section "## REST"');
    expect(() => shellCommands('curl -d \'{"a": 1}', {})).toThrow('unterminated single quote in a README example');
    expect(() => shellCommands('curl $BASE/x -H "Authorization: Bearer $TOKEN"', { BASE: 'http://h' })).toThrow(
      'a README example uses $TOKEN, which the examples test does not set',
    );
    expect(() => graphqlExamples('query { me }\n# variables: {"input": ')).toThrow(
      'the "# variables:" comment of the README\'s me example is not JSON',
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
});

describe('README examples', () => {
  test('the REST section: create, list, read, update and every lifecycle action answer 200 as it says', async () => {
    vars.EP = await createFromReadme();
    const commands = curlCommands('### REST', vars).filter((c) => !(c.method === 'POST' && c.url.endsWith('/dedicated/beta/endpoint')));
    expect(commands.length, 'REST examples found').toBeGreaterThanOrEqual(9);
    for (const command of commands) {
      const action = /\/(sleep|wake|restart|terminate)$/.exec(command.url)?.[1];
      // The README lists restart before terminate; restart is allowed only from TERMINATED (or FAILED), so it runs after.
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

  test('the chat section: a completion, a stream (ending with data: [DONE]), the SSE subscription and the mutation, from an endpoint the README created', async () => {
    vars.EP = await createFromReadme();
    const commands = curlCommands('## Chat completions', vars);
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
    const [mutation, ...others] = fencedBlocks(section(README, '## Chat completions'), 'graphql').flatMap((b) => graphqlExamples(b.body));
    expect(others).toEqual([]);
    expect(mutation!.root).toBe('createChatCompletion');
    const response = await admin.rest('POST', '/graphql', {
      query: mutation!.document,
      variables: { input: { model: vars.EP, messages: [{ role: 'user', content: 'Hi' }], maxTokens: 8 } },
    });
    const shown = `${mutation!.document}\n→ ${JSON.stringify(response.body)}`;
    expect(response.body.errors, shown).toBeUndefined();
    expect(response.body.data.createChatCompletion.completion.choices[0].finishReason, shown).toBeTruthy();

    // The `openai` package example, run as a script (its TypeScript stripped by the compiler) with the README's KEY.
    const example = fencedBlocks(section(README, '## Chat completions'), 'ts').find((b) => b.before.includes('`openai` package'));
    if (!example) throw new Error('README.md "## Chat completions" has no ```ts block after "With the official `openai` package:"');
    for (const placeholder of ["'ep_…'", "'http://localhost:8080/dedicated/v1'"]) {
      if (!example.body.includes(placeholder))
        throw new Error(`the README's openai example no longer has ${placeholder}, which this test replaces`);
    }
    const source = example.body
      .replace("'ep_…'", JSON.stringify(vars.EP))
      .replace("'http://localhost:8080/dedicated/v1'", JSON.stringify(`${t.url}/dedicated/v1`));
    const code = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    const script = await runNode(code, { KEY: admin.key });
    expect(script.code, `the README's openai example failed:\n${script.stderr}`).toBe(0);
  }, 180_000);

  test("the GraphQL section: the curl example, every query and every mutation succeed with the README's selections", async () => {
    const [curl] = curlCommands('### GraphQL', vars);
    const answer = await run(curl!);
    expect(answer.status, curl!.shown).toBe(200);
    const body = json(answer, curl!);
    expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
    expect(body.data.me.user.email).toBe(admin.user.email);

    const examples = fencedBlocks(section(README, '### GraphQL'), 'graphql').flatMap((b) => graphqlExamples(b.body));
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

    // The README lists restartEndpoint before terminateEndpoint; restart is allowed only from TERMINATED, so it runs after.
    const ordered = [...examples.filter((e) => e.root !== 'restartEndpoint')];
    const restart = examples.find((e) => e.root === 'restartEndpoint');
    if (restart) ordered.splice(ordered.findIndex((e) => e.root === 'terminateEndpoint') + 1, 0, restart);

    for (const example of ordered) {
      const action = /^(sleep|wake|restart)Endpoint$/.exec(example.root)?.[1];
      if (action) await waitForStatus(t.sql, ids.endpoint!, WAIT_BEFORE[action]!, 90_000);
      const response = await admin.rest('POST', '/graphql', { query: example.document, variables: variablesFor(example) });
      const shown = `README GraphQL example:\n${example.document}\n→ ${JSON.stringify(response.body)}`;
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
});
