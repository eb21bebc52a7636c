/**
 * `dedicated`: the endpoint CLI for users, over the typed SDK (GraphQL), the
 * subscriptions, and the chat and tokenize routes; never the database. Human output by
 * default, `--json` for scripts. The key and base URL come from flags,
 * DEDICATED_API_KEY / DEDICATED_BASE_URL, or the file `login` writes.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { EndpointCommands, type SpecFlags } from './commands.js';
import { CliError } from './errors.js';
import { streamChat, tokenize, watchStatus } from './live.js';
import { ReplicaCommands } from './replica-commands.js';
import { describeStatus, forHumans, oneLine, stderrColors, textBody, type Print } from './render.js';
import { checkBaseUrl, DEFAULT_BASE_URL, resolveSettings, saveSettings } from './settings.js';

interface GlobalFlags {
  json?: boolean;
  baseUrl?: string;
  apiKey?: string;
}

/** A whole number at least `min`; a spec flag's range is the API's rule, which answers by the flag's name (see errors.ts). */
function integer(name: string, min = 0) {
  return (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < min)
      throw new InvalidArgumentError(`${name} must be an integer ${min === 0 ? '(0 or more)' : `of at least ${min}`}`);
    return Number(value);
  };
}

interface ChatFlags {
  system?: string;
  maxTokens?: number;
  temperature?: number;
  /** false with --no-think. */
  think: boolean;
  hideReasoning?: boolean;
}

/** Why an answer cut at the token limit is empty, and what to change. */
function emptyAnswer(thought: boolean, flags: ChatFlags, used: number | undefined): string {
  const limit = flags.maxTokens !== undefined ? `--max-tokens ${flags.maxTokens}` : 'the token limit';
  const spent = used !== undefined ? `all ${used} tokens (${limit})` : limit;
  if (!thought) return `the answer is empty: the model reached ${limit} before answering; raise --max-tokens`;
  return `the answer is empty: the model spent ${spent} thinking and stopped before answering; raise --max-tokens, or pass --no-think to answer without thinking`;
}

function specOptions(command: Command): Command {
  return command
    .option('--name <name>', 'endpoint name')
    .option('--model <repo>', 'Hugging Face model repository (owner/name)')
    .option('--revision <rev>', 'branch, tag or commit of the model')
    .option('--instance <id>', 'instance option id, such as TwD5AqnBSVN0 (1 × H100 80 GB); create without it lists them')
    .option('--gpu <kind>', 'instead of --instance: the GPU kind (A100, H100, H200 or B200)')
    .option('--gpus <n>', 'with --gpu: how many (1, 2, 4 or 8; default 1)', integer('--gpus'))
    .option('--max-batch-size <n>', 'sequences one replica decodes at once', integer('--max-batch-size'))
    .option('--max-token-count <n>', 'most tokens, prompt plus completion', integer('--max-token-count'))
    .option('--max-input-length <n>', 'most prompt tokens', integer('--max-input-length'))
    .option('--min-replica <n>', 'replicas kept when idle (0 lets it sleep)', integer('--min-replica'))
    .option('--max-replica <n>', 'most replicas under load', integer('--max-replica'))
    .option('--cooldown <s>', 'seconds of low demand before scaling in', integer('--cooldown'))
    .option('--comment <text>', 'comment of the new version');
}

export function buildProgram(print: Print, printError: Print): Command {
  const program = new Command('dedicated')
    .description('Manage dedicated model-serving endpoints and chat with them')
    .option('--json', 'print JSON for scripts')
    .option('--base-url <url>', `the service (default: DEDICATED_BASE_URL, the login file, or ${DEFAULT_BASE_URL})`)
    .addOption(new Option('--api-key <key>', 'API key (default: DEDICATED_API_KEY or the login file)').hideHelp())
    .showHelpAfterError('(--help for usage)')
    .configureOutput({ writeOut: (s) => print(s.trimEnd()), writeErr: (s) => printError(s.trimEnd()) });

  const globals = () => program.opts<GlobalFlags>();
  const commands = async () => {
    const settings = await resolveSettings(globals());
    return new EndpointCommands(settings, { print, json: Boolean(globals().json) });
  };

  program
    .command('login')
    .description('check a key against the service and save it (with the base URL) for later commands')
    .option('--key <key>', 'the API key (default: DEDICATED_API_KEY)')
    .action(async (flags: { key?: string }) => {
      const apiKey = flags.key ?? globals().apiKey ?? process.env.DEDICATED_API_KEY;
      if (!apiKey) throw new CliError('login needs --key <key> (or DEDICATED_API_KEY)');
      const baseUrl = checkBaseUrl(globals().baseUrl ?? process.env.DEDICATED_BASE_URL ?? DEFAULT_BASE_URL);
      const me = await new EndpointCommands({ baseUrl, apiKey }, { print, json: false }).whoami();
      const file = await saveSettings({ baseUrl, apiKey });
      if (globals().json) print(JSON.stringify({ baseUrl, email: me.email, config: file }));
      else print(`logged in to ${baseUrl} as ${oneLine(me.email)}; saved to ${file}`);
    });

  const endpoints = program.command('endpoints').alias('ep').description('list, create and manage endpoints');
  endpoints
    .command('list')
    .description("the endpoints of your teams' projects")
    .option('--project <id>', 'only this project')
    .action(async (flags: { project?: string }) => (await commands()).list(flags.project));
  endpoints
    .command('get <id>')
    .description('one endpoint: status, model, settings')
    .action(async (id: string) => void (await (await commands()).get(id)));
  specOptions(endpoints.command('create').description('create an endpoint (needs --project, --name, --model, --instance)'))
    .requiredOption('--project <id>', 'project to create it in')
    .action(async (flags: SpecFlags & { project: string }) => (await commands()).create(flags.project, flags));
  specOptions(endpoints.command('update <id>').description('change settings: every update is a new version')).action(
    async (id: string, flags: SpecFlags) => (await commands()).update(id, flags),
  );
  for (const action of ['sleep', 'wake', 'restart', 'terminate'] as const) {
    endpoints
      .command(`${action} <id>`)
      .description(`${action} the endpoint`)
      .action(async (id: string) => (await commands()).act(action, id));
  }
  endpoints
    .command('delete <id>')
    .description('delete the endpoint and stop its replicas')
    .action(async (id: string) => (await commands()).remove(id));
  endpoints
    .command('versions <id>')
    .description('the version history')
    .action(async (id: string) => (await commands()).versions(id));
  endpoints
    .command('rollback <id>')
    .description('make an earlier version current again (as a new version)')
    .requiredOption('--version <n>', 'the version index to return to', integer('--version'))
    .action(async (id: string, flags: { version: number }) => (await commands()).rollback(id, flags.version));

  program
    .command('status <id>')
    .description("the endpoint's status; --watch follows it live (with download progress) until Ctrl-C or deletion")
    .option('--watch', 'follow changes live')
    .option('--until <status>', 'with --watch: stop once the endpoint reaches this status (exit 1 if it FAILED instead)')
    .action(async (id: string, flags: { watch?: boolean; until?: string }) => {
      const cli = await commands();
      if (!flags.watch) {
        const endpoint = await cli.get(id);
        return void endpoint;
      }
      const json = Boolean(globals().json);
      const stop = new AbortController();
      process.once('SIGINT', () => stop.abort());
      let failed: string | undefined;
      let explained: string | null | undefined;
      await watchStatus(
        cli.settings,
        id,
        (update) => {
          if (json) return print(JSON.stringify(update));
          const shown = forHumans(update);
          print(`${new Date().toISOString().slice(11, 19)}  ${describeStatus(shown.status)}`);
          if (shown.event?.message) print(`          ${shown.event.message}`);
          // Why it failed, once per message: the first status of a FAILED endpoint carries no event.
          const why = shown.status.errorMessage;
          if (why && why !== explained && why !== shown.event?.message) print(`          ${why}`);
          explained = why;
        },
        {
          signal: stop.signal,
          until: (update) => {
            if (!flags.until) return false;
            const status = update.status;
            if (status.status === 'FAILED' && flags.until !== 'FAILED')
              failed = status.errorMessage ?? status.errorCode ?? 'no reason given';
            return status.status === flags.until || failed !== undefined;
          },
        },
      );
      if (failed !== undefined) throw new CliError(`endpoint ${id} FAILED: ${failed}`);
    });

  const replicaCommands = async () => new ReplicaCommands(await resolveSettings(globals()), { print, json: Boolean(globals().json) });
  program
    .command('replicas <id>')
    .description("the endpoint's replicas: state, version, where each runs, since when; and how many failed lately")
    .action(async (id: string) => (await replicaCommands()).replicas(id));
  program
    .command('logs <id>')
    .description("a replica's engine log (the newest replica's unless --replica); --follow prints new lines as they come")
    .option('--replica <id>', 'the replica (see `dedicated replicas`)')
    .option('--tail <n>', 'lines from the end (default 100)', integer('--tail'))
    .option('-f, --follow', 'keep printing new lines until Ctrl-C')
    .action(async (id: string, flags: { replica?: string; tail?: number; follow?: boolean }) => {
      const stop = new AbortController();
      process.once('SIGINT', () => stop.abort());
      await (await replicaCommands()).logs(id, flags, stop.signal);
    });
  program
    .command('events <id>')
    .description("the endpoint's event history: status changes, versions, replica counts, retries")
    .option('--newest-first', 'newest event first')
    .option('--limit <n>', 'at most this many events', integer('--limit', 1))
    .action(async (id: string, flags: { newestFirst?: boolean; limit?: number }) => (await replicaCommands()).events(id, flags));

  program
    .command('chat <id> [message...]')
    .description("send a message (or stdin) and stream the answer to stdout; a reasoning model's thinking goes to stderr, dimmed")
    .option('--system <text>', 'a system message first')
    .option('--max-tokens <n>', 'most tokens to generate, thinking included', integer('--max-tokens', 1))
    .option('--temperature <t>', 'sampling temperature', (v: string) => {
      const t = Number(v);
      if (!Number.isFinite(t) || t < 0 || t > 2) throw new InvalidArgumentError('--temperature must be a number from 0 to 2');
      return t;
    })
    .option('--no-think', 'ask a reasoning model to answer without thinking (chat_template_kwargs.enable_thinking: false)')
    .option('--hide-reasoning', 'do not print the thinking on stderr (it still counts toward --max-tokens)')
    .action(async (id: string, words: string[], flags: ChatFlags) => {
      const settings = await resolveSettings(globals());
      const content = words.length > 0 ? words.join(' ') : await readStdin();
      if (!content.trim()) throw new CliError('chat needs a message (as arguments or on stdin)');
      const json = Boolean(globals().json);
      const stop = new AbortController();
      process.once('SIGINT', () => stop.abort());
      let answer = '';
      let reasoning = '';
      // The thinking streams to stderr, dimmed and labelled, so that stdout carries the answer alone.
      const showThinking = !json && !flags.hideReasoning;
      let thinking = false;
      const endThinking = () => {
        if (thinking) process.stderr.write('\n');
        thinking = false;
      };
      const outcome = await streamChat(
        settings,
        id,
        {
          messages: [...(flags.system ? [{ role: 'system' as const, content: flags.system }] : []), { role: 'user' as const, content }],
          ...(flags.maxTokens !== undefined ? { maxTokens: flags.maxTokens } : {}),
          ...(flags.temperature !== undefined ? { temperature: flags.temperature } : {}),
          ...(flags.think === false ? { think: false } : {}),
        },
        (text, isReasoning) => {
          if (isReasoning) {
            reasoning += text;
            if (!showThinking) return;
            if (!thinking) process.stderr.write(stderrColors.dim('thinking: '));
            thinking = true;
            process.stderr.write(stderrColors.dim(textBody(text)));
            return;
          }
          endThinking();
          answer += text;
          if (!json) process.stdout.write(textBody(text));
        },
        stop.signal,
      );
      endThinking();
      if (json) print(JSON.stringify({ content: answer, reasoning, finishReason: outcome.finishReason, usage: outcome.usage }));
      else if (answer) process.stdout.write('\n');
      const cut = outcome.finishReason === 'length';
      if (cut && answer.trim() === '') throw new CliError(emptyAnswer(reasoning !== '', flags, outcome.usage?.completion_tokens));
      if (cut && !json) printError(stderrColors.dim('(the answer stopped at the token limit: raise --max-tokens for a longer one)'));
    });

  program
    .command('tokenize <id> [text...]')
    .description("count a text's tokens with the endpoint's tokenizer (or stdin)")
    .action(async (id: string, words: string[]) => {
      const settings = await resolveSettings(globals());
      const text = words.length > 0 ? words.join(' ') : await readStdin();
      if (!text) throw new CliError('tokenize needs a text (as arguments or on stdin)');
      const tokens = await tokenize(settings, id, text);
      if (globals().json) print(JSON.stringify({ count: tokens.length, tokens }));
      else print(`${tokens.length} token${tokens.length === 1 ? '' : 's'}: ${oneLine(tokens.join(' '))}`);
    });

  return program;
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) return '';
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram(
    (line) => console.log(line),
    (line) => console.error(line),
  );
  program.exitOverride();
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (error) {
    const code = (error as { code?: string; exitCode?: number }).code;
    if (typeof code === 'string' && code.startsWith('commander.')) {
      return code === 'commander.helpDisplayed' || code === 'commander.version' ? 0 : ((error as { exitCode?: number }).exitCode ?? 1);
    }
    // An error's text may be the server's (a GraphQL error, an error body): drawn as render.ts draws it.
    if (error instanceof CliError) {
      console.error(`error: ${oneLine(error.message)}`);
      return 1;
    }
    console.error(`error: ${textBody(error instanceof Error ? (error.stack ?? error.message) : String(error))}`);
    return 1;
  }
}
