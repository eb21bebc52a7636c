/**
 * Where a text that JSON.parse refused goes wrong, in words a person can act
 * on: "unexpected '}' (expected a value) at line 3, column 12". Node 20's
 * parser names a position for some mistakes only (and quotes the text for
 * others), so this scanner finds the first one itself. It walks without
 * recursion: a body may nest thousands deep. It quotes one character of the
 * text at most.
 */

const WHITESPACE = new Set([' ', '\t', '\n', '\r']);
const SIMPLE_ESCAPES = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't']);
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const HEX4 = /^[0-9a-fA-F]{4}$/;

interface JsonSyntaxError {
  offset: number;
  problem: string;
}

/** One character as the message shows it: printable as itself, anything else as a JSON escape. */
function shown(text: string, offset: number): string {
  const char = String.fromCodePoint(text.codePointAt(offset)!);
  if (char === "'") return `"'"`;
  return /^[\p{L}\p{N}\p{P}\p{S}]$/u.test(char) ? `'${char}'` : JSON.stringify(char);
}

/** The first syntax error of `text`, or undefined when it is valid JSON. */
export function findJsonSyntaxError(text: string): JsonSyntaxError | undefined {
  const stack: ('{' | '[')[] = [];
  let i = 0;
  type State = 'value' | 'first-value' | 'key' | 'first-key' | 'after';
  let state: State = 'value';
  const unexpected = (expected?: string): JsonSyntaxError =>
    i >= text.length
      ? { offset: text.length, problem: `unexpected end of input${expected ? ` (expected ${expected})` : ''}` }
      : { offset: i, problem: `unexpected ${shown(text, i)}${expected ? ` (expected ${expected})` : ''}` };

  /** Reads the string at `i` (its opening quote), leaving `i` after it. */
  const string = (): JsonSyntaxError | undefined => {
    i++;
    for (;;) {
      if (i >= text.length) return { offset: text.length, problem: "unexpected end of input inside a string (a closing '\"' is missing)" };
      const char = text[i]!;
      if (char === '"') {
        i++;
        return undefined;
      }
      if (char === '\\') {
        const next = text[i + 1];
        if (next !== undefined && SIMPLE_ESCAPES.has(next)) i += 2;
        else if (next === 'u' && HEX4.test(text.slice(i + 2, i + 6))) i += 6;
        else return { offset: i, problem: `invalid escape ${next === undefined ? "'\\'" : JSON.stringify(`\\${next}`)} in a string` };
      } else if (char.charCodeAt(0) < 0x20) {
        return { offset: i, problem: `unescaped control character ${JSON.stringify(char)} in a string` };
      } else i++;
    }
  };

  for (;;) {
    while (i < text.length && WHITESPACE.has(text[i]!)) i++;
    const char = text[i];
    switch (state) {
      case 'first-value':
      case 'value': {
        if (state === 'first-value' && char === ']') {
          stack.pop();
          i++;
          state = 'after';
        } else if (char === '{' || char === '[') {
          stack.push(char);
          i++;
          state = char === '{' ? 'first-key' : 'first-value';
        } else if (char === '"') {
          const error = string();
          if (error) return error;
          state = 'after';
        } else if (char === '-' || (char !== undefined && char >= '0' && char <= '9')) {
          NUMBER.lastIndex = i;
          if (!NUMBER.test(text)) return { offset: i, problem: 'invalid number' };
          i = NUMBER.lastIndex;
          state = 'after';
        } else {
          const literal = ['true', 'false', 'null'].find((word) => text.startsWith(word, i));
          if (!literal) return unexpected('a value');
          i += literal.length;
          state = 'after';
        }
        break;
      }
      case 'first-key':
      case 'key': {
        if (state === 'first-key' && char === '}') {
          stack.pop();
          i++;
          state = 'after';
          break;
        }
        if (char !== '"') return unexpected('a member name in double quotes');
        const error = string();
        if (error) return error;
        while (i < text.length && WHITESPACE.has(text[i]!)) i++;
        if (text[i] !== ':') return unexpected("':'");
        i++;
        state = 'value';
        break;
      }
      case 'after': {
        const open = stack.at(-1);
        if (open === undefined)
          return i < text.length ? { offset: i, problem: `unexpected ${shown(text, i)} after the JSON value` } : undefined;
        const close = open === '{' ? '}' : ']';
        if (char === ',') {
          i++;
          state = open === '{' ? 'key' : 'value';
        } else if (char === close) {
          stack.pop();
          i++;
        } else return unexpected(`',' or '${close}'`);
        break;
      }
    }
  }
}

/** What is wrong with a text JSON.parse refused, and where: "unexpected '}' (expected a value) at line 1, column 7". */
export function describeJsonSyntaxError(text: string): string {
  const error = findJsonSyntaxError(text);
  if (!error) return 'it cannot be parsed';
  const before = text.slice(0, error.offset);
  const line = before.split('\n').length;
  const column = error.offset - before.lastIndexOf('\n');
  return `${error.problem} at line ${line}, column ${column}`;
}
