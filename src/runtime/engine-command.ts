/**
 * The command that starts one replica's engine. The built-in engine is our
 * node-llama-cpp server; ENGINE_COMMAND replaces it with any OpenAI-compatible
 * server, e.g. `vllm serve {model} --port {port} --tensor-parallel-size {numGpu}`
 * or `llama-server -m {model} --port {port} -np {maxBatchSize}`.
 */
import { SOURCE_ENTRY } from './engine-bundle.js';
import type { ReplicaLaunch } from './runtime.js';

export const PLACEHOLDERS = ['model', 'port', 'numGpu', 'maxBatchSize', 'contextSize', 'modelRepo', 'revision'] as const;

export class EngineCommandError extends Error {}

/** Splits a command line into words, honouring single and double quotes (no other shell syntax). */
export function splitWords(command: string): string[] {
  const words: string[] = [];
  let current = '';
  let quote: '"' | "'" | null = null;
  let started = false;
  for (const ch of command) {
    if (quote) {
      if (ch === quote) quote = null;
      else current += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      started = true;
    } else if (/\s/.test(ch)) {
      if (started) words.push(current);
      current = '';
      started = false;
    } else {
      current += ch;
      started = true;
    }
  }
  if (quote) throw new EngineCommandError(`ENGINE_COMMAND has an unclosed ${quote} quote`);
  if (started) words.push(current);
  return words;
}

/** Checks a template once at start-up: known placeholders only, and {port} present. */
export function validateTemplate(template: string): void {
  const words = splitWords(template);
  if (words.length === 0) throw new EngineCommandError('ENGINE_COMMAND is empty');
  for (const [, name] of template.matchAll(/\{(\w+)\}/g)) {
    if (!(PLACEHOLDERS as readonly string[]).includes(name!)) {
      throw new EngineCommandError(
        `ENGINE_COMMAND has an unknown placeholder {${name}}; known: ${PLACEHOLDERS.map((p) => `{${p}}`).join(' ')}`,
      );
    }
  }
  if (!template.includes('{port}')) throw new EngineCommandError('ENGINE_COMMAND must contain {port}: the gateway picks the port');
}

export interface EngineCommand {
  file: string;
  args: string[];
}

export function engineCommand(
  launch: ReplicaLaunch,
  port: number,
  options: {
    template?: string;
    threads?: number;
    cpuOnly: boolean;
    /** The address the built-in engine listens on. @default 127.0.0.1 */
    host?: string;
    /** How the built-in engine is run: the program and its first arguments (engine-bundle.ts). @default its source through tsx */
    entry?: readonly string[];
    /**
     * How a value the operator did not write (a model's path, repository or revision; the endpoint's id) is written
     * into an argument, where the runtime reads arguments as more than text (Kubernetes expands `$(NAME)`: see
     * pod-spec.ts, `literal`). The template's own words and `host` are kept as written. @default as it is
     */
    literal?: (value: string) => string;
  },
): EngineCommand {
  const literal = options.literal ?? ((value: string) => value);
  if (options.template) {
    const values: Record<(typeof PLACEHOLDERS)[number], string> = {
      model: literal(launch.modelPath ?? launch.modelRepo),
      port: String(port),
      numGpu: String(launch.numGpu),
      maxBatchSize: String(launch.maxBatchSize),
      contextSize: String(launch.contextSize),
      modelRepo: literal(launch.modelRepo),
      revision: literal(launch.modelRevision ?? 'main'),
    };
    const [file, ...args] = splitWords(options.template).map((word) =>
      word.replace(/\{(\w+)\}/g, (_, name: string) => values[name as keyof typeof values] ?? `{${name}}`),
    );
    return { file: file!, args };
  }
  if (!launch.modelPath) throw new EngineCommandError('the built-in engine needs a local GGUF file');
  const [file, ...entry] = options.entry ?? SOURCE_ENTRY;
  return {
    file: file!,
    args: [
      ...entry,
      '--model',
      literal(launch.modelPath),
      '--host',
      options.host ?? '127.0.0.1',
      '--port',
      String(port),
      '--max-batch-size',
      String(launch.maxBatchSize),
      '--context-size',
      String(launch.contextSize),
      '--max-input-length',
      String(launch.maxInputLength),
      '--model-name',
      literal(launch.endpointId),
      ...(launch.addSpecialTokens ? ['--add-special-tokens'] : []),
      ...(launch.skipSpecialTokens ? [] : ['--no-skip-special-tokens']),
      ...(options.threads ? ['--threads', String(options.threads)] : []),
      ...(options.cpuOnly ? ['--cpu'] : []),
    ],
  };
}
