/**
 * The documentation as a new user reads it (README.md and docs/*.md), and its
 * examples as a shell and a GraphQL client read them: the helpers the tests
 * that run the docs' examples share (test/user-path/readme-examples.test.ts,
 * test/user-path/sandbox.test.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';

export const ROOT = new URL('../../', import.meta.url);
/** A page of the documentation: its path from the repository root, and its text. */
export interface Page {
  file: string;
  text: string;
}
/** The README and every page of docs/, as a new user reads them. */
export const PAGES: Page[] = [
  'README.md',
  ...readdirSync(new URL('docs/', ROOT))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`),
].map((file) => ({ file, text: readFileSync(new URL(file, ROOT), 'utf8') }));

/** The headings of a page outside fenced blocks: their level, their text, and their line. */
export function headings(markdown: string): { level: number; title: string; line: number }[] {
  const found: { level: number; title: string; line: number }[] = [];
  let inFence = false;
  markdown.split('\n').forEach((line, i) => {
    if (line.startsWith('```')) inFence = !inFence;
    const match = !inFence && /^(#+) (.*)$/.exec(line);
    if (match) found.push({ level: match[1]!.length, title: match[2]!.trim(), line: i });
  });
  return found;
}

/**
 * The text of the section headed `title` (the heading's text, e.g. 'REST', at any level), up to the next heading
 * of its level or higher, or undefined when the page has no such heading.
 */
export function section(markdown: string, title: string): string | undefined {
  const all = headings(markdown);
  const index = all.findIndex((h) => h.title === title);
  if (index === -1) return undefined;
  const end = all.slice(index + 1).find((h) => h.level <= all[index]!.level);
  return markdown
    .split('\n')
    .slice(all[index]!.line + 1, end?.line)
    .join('\n');
}

/** The section headed `title` in whichever page has it: exactly one must. */
export function pageSection(title: string, pages: Page[] = PAGES): Page {
  const found = pages.flatMap((page) => {
    const text = section(page.text, title);
    return text === undefined ? [] : [{ file: page.file, text }];
  });
  if (found.length === 0) {
    throw new Error(`no page (README.md, docs/*.md) has a section "${title}": the examples test reads its examples from there`);
  }
  if (found.length > 1)
    throw new Error(`the section "${title}" is in ${found.map((p) => p.file).join(' and ')}: the examples test needs one`);
  return found[0]!;
}

/** GitHub's anchor for a heading: lower-cased, punctuation but `-` and `_` dropped, spaces to `-`. */
export function anchor(title: string): string {
  return title
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The fenced blocks of a page: each with its language (`''` for none), its body, and the last line of prose before it. */
export function fences(text: string): { language: string; before: string; body: string }[] {
  const blocks: { language: string; before: string; body: string }[] = [];
  let open: { language: string; before: string; lines: string[] } | undefined;
  let before = '';
  for (const line of text.split('\n')) {
    if (open) {
      if (line.trimEnd() === '```') {
        blocks.push({ language: open.language, before: open.before, body: open.lines.join('\n') });
        open = undefined;
      } else open.lines.push(line);
    } else if (line.startsWith('```')) open = { language: line.slice(3).trim(), before, lines: [] };
    else if (line.trim() !== '') before = line;
  }
  return blocks;
}

/** The bodies of the fenced blocks of one language in `text` (`''`: those without one), with the line of prose before each. */
export function fencedBlocks(text: string, language: string): { before: string; body: string }[] {
  return fences(text)
    .filter((block) => block.language === language)
    .map(({ before, body }) => ({ before, body }));
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

export interface GraphQLExample {
  /** The operation as the README shows it. */
  document: string;
  /** Its first root field, e.g. `createEndpoint`. */
  root: string;
  kind: 'query' | 'mutation' | 'subscription';
  /** From a `# variables:` comment after it (and the comment lines that continue it), when there is one. */
  variables?: Record<string, unknown>;
}

/**
 * The operations of a graphql block: each starts on a line beginning with `query`, `mutation` or `subscription`.
 * A comment after one that starts with `variables:` gives its variables, as JSON that may run on over the next
 * comment lines; any other comment is prose for the reader.
 */
export function graphqlExamples(block: string): GraphQLExample[] {
  const examples: GraphQLExample[] = [];
  let current: { lines: string[]; comments: string[] } | undefined;
  const finish = () => {
    if (!current) return;
    const document = current.lines.join('\n').trim();
    const kind = document.startsWith('mutation') ? 'mutation' : document.startsWith('subscription') ? 'subscription' : 'query';
    const root = /\{\s*(\w+)/.exec(document)?.[1];
    if (!root) throw new Error(`a GraphQL example in the docs without a root field:\n${document}`);
    const from = current.comments.findIndex((c) => /^\s*variables:/.test(c));
    const comment = from === -1 ? '' : current.comments.slice(from).join(' ');
    let variables: Record<string, unknown> | undefined;
    if (comment) {
      const json = comment.replace(/^\s*variables:\s*/, '');
      try {
        variables = JSON.parse(json) as Record<string, unknown>;
      } catch (error) {
        throw new Error(`the "# variables:" comment of the docs' ${root} example is not JSON (${(error as Error).message}):\n${json}`, {
          cause: error,
        });
      }
    }
    examples.push({ document, root, kind, ...(variables ? { variables } : {}) });
    current = undefined;
  };
  for (const line of block.split('\n')) {
    if (/^(query|mutation|subscription)\b/.test(line)) {
      finish();
      current = { lines: [line], comments: [] };
    } else if (line.startsWith('#')) {
      current?.comments.push(line.replace(/^#\s?/, ''));
    } else if (line.trim() !== '') {
      if (!current) throw new Error(`a GraphQL line in the docs outside any operation: ${line}`);
      if (current.comments.some((c) => /^\s*variables:/.test(c))) {
        throw new Error(`a GraphQL operation in the docs continues after its "# variables:" comment: ${line}`);
      }
      current.lines.push(line);
    }
  }
  finish();
  return examples;
}
