/** For the metrics tests: chat requests read to their end and timed, GraphQL calls, and sentinel searches. */
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'vitest';
import type { SeededUser, TestApp } from '../support/app.js';

export function chat(t: TestApp, key: string, body: Record<string, unknown>) {
  return fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

export interface Answer {
  status: number;
  promptTokens: number;
  completionTokens: number;
  content: string;
  reasoning: string;
  ms: number;
}

/** One request with the sentinel in its message, read to its end, timed as the client sees it. */
export async function ask(t: TestApp, key: string, model: string, sentinel: string, stream: boolean, i: number): Promise<Answer> {
  const started = performance.now();
  const response = await chat(t, key, {
    model,
    messages: [{ role: 'user', content: `${sentinel} tell me a story number ${i}` }],
    max_tokens: 6 + i,
    temperature: 0,
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  });
  const text = await response.text();
  const ms = performance.now() - started;
  if (!stream) {
    const body = JSON.parse(text) as {
      usage: { prompt_tokens: number; completion_tokens: number };
      choices: { message: { content: string | null; reasoning_content?: string } }[];
    };
    const m = body.choices[0]!.message;
    return { status: response.status, ...tokens(body.usage), content: m.content ?? '', reasoning: m.reasoning_content ?? '', ms };
  }
  let content = '';
  let reasoning = '';
  let usage = { prompt_tokens: 0, completion_tokens: 0 };
  for (const event of text.split('\n\n')) {
    const data = event.replace(/^data: /, '');
    if (!data || data === '[DONE]') continue;
    const chunk = JSON.parse(data) as { usage?: typeof usage; choices: { delta: { content?: string; reasoning_content?: string } }[] };
    if (chunk.usage) usage = chunk.usage;
    content += chunk.choices[0]?.delta.content ?? '';
    reasoning += chunk.choices[0]?.delta.reasoning_content ?? '';
  }
  return { status: response.status, ...tokens(usage), content, reasoning, ms };
}

function tokens(usage: { prompt_tokens: number; completion_tokens: number }) {
  return { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens };
}

export async function graphql<T = any>(
  user: SeededUser,
  query: string,
  variables: Record<string, unknown> = {},
): Promise<{ data: T; errors?: { message: string; extensions?: { code?: string } }[] }> {
  const response = await user.rest('POST', '/graphql', { query, variables });
  return response.body;
}

/** Every text, varchar, json and array column of every table that holds `needle`, as `table.column`. */
export async function tablesHolding(t: TestApp, needle: string): Promise<string[]> {
  const columns = await t.sql<{ table_name: string; column_name: string }[]>`
    SELECT c.table_name, c.column_name FROM information_schema.columns c
    JOIN information_schema.tables tb ON tb.table_schema = c.table_schema AND tb.table_name = c.table_name AND tb.table_type = 'BASE TABLE'
    WHERE c.table_schema = 'public' AND c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'ARRAY', 'bytea')`;
  expect(columns.length).toBeGreaterThan(10);
  const found = new Set<string>();
  for (const { table_name, column_name } of columns) {
    const [row] = await t.sql.unsafe<{ n: number }[]>(
      `SELECT count(*)::int AS n FROM "${table_name}" WHERE position($1 in "${column_name}"::text) > 0`,
      [needle],
    );
    if (row!.n > 0) found.add(`${table_name}.${column_name}`);
  }
  return [...found].sort();
}

/** Files under a directory (engine logs, replica state) that hold `needle`; model files are skipped. */
export async function filesHolding(dir: string, needle: string): Promise<string[]> {
  const found: string[] = [];
  for (const name of await readdir(dir, { recursive: true })) {
    const file = path.join(dir, name);
    const info = await stat(file).catch(() => undefined);
    if (!info?.isFile() || info.size > 20_000_000 || /\.(gguf|safetensors)$/.test(name)) continue;
    if ((await readFile(file)).includes(needle)) found.push(name);
  }
  return found;
}
