/**
 * Generators for the fuzz suite (test/security/fuzz.test.ts): hostile
 * strings and numbers, JSON values of the wrong type or depth, request bodies
 * that mix valid-shaped and hostile fields, GraphQL operations built from the
 * printed schema, and compact printing of whatever failed.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import {
  buildSchema,
  getNamedType,
  GraphQLEnumType,
  GraphQLInputObjectType,
  GraphQLList,
  GraphQLNonNull,
  type GraphQLObjectType,
  GraphQLScalarType,
  GraphQLUnionType,
  type GraphQLInterfaceType,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLOutputType,
  type GraphQLSchema,
} from 'graphql';
import { GPU_TYPES, INSTANCE_OPTIONS } from '../../src/domain/instance-catalog.js';

// ---------------------------------------------------------------------------
// JSON text with values JSON.stringify cannot write (1e999, -0, deep nesting).

/** A fragment written into the JSON text as it is. */
export class RawJson {
  constructor(readonly text: string) {}
}

export const raw = (text: string) => new RawJson(text);

/** JSON text of a value that may hold RawJson leaves; own keys (`__proto__` included) are written as they are. */
export function toJsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value)) return `[${value.map(toJsonText).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${toJsonText((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  if (value === undefined) return 'null';
  return JSON.stringify(value);
}

/** An object from entries, keeping a `__proto__` key as an own property (as JSON.parse would). */
export function objectOf(entries: [string, unknown][]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of entries) Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  return out;
}

// ---------------------------------------------------------------------------
// Leaves.

export const SPECIAL_STRINGS = [
  '',
  ' ',
  '   ',
  '\u0000',
  'a\u0000b',
  '\u0000\u0000',
  '\uD800',
  '\uDC00',
  'x\uDBFFy',
  '\uDFFF\uD800',
  '\uFFFF',
  '\uFFFE',
  '\uFEFF',
  '\u202E',
  '\u2028',
  '\r\n',
  '\n',
  '\t',
  '\u0007',
  '\u007f',
  '\u0085',
  '%',
  '%00',
  '%zz',
  '%E0%A4%A',
  '%C0%80',
  '%ED%A0%80',
  '../',
  '..%2f',
  '/',
  '//',
  '\\',
  "'",
  '"',
  '`',
  "'; DROP TABLE endpoints; --",
  '$1',
  '${x}',
  '{{x}}',
  '<script>alert(1)</script>',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  'NaN',
  'Infinity',
  '-Infinity',
  '-1',
  '0',
  '-0',
  '1e309',
  '0x10',
  'null',
  'true',
  'undefined',
  '[]',
  '{}',
  'ep_',
  'ep_00000000000000',
  'ep_zzzzzzzzzzzzzz',
  'prj_00000000000000',
  'team_00000000000000',
  'usr_00000000000000',
  'key_00000000000000',
  '🙂',
  'é',
  'e\u0301',
  '𝕏',
  '\u{10FFFF}',
  'A'.repeat(129),
  'a'.repeat(1001),
  'org/model',
  'a/b/c',
  'acme/model/llama:v3',
  'a:b',
  '*',
  '?',
  '#',
  '&',
  '=',
  '+',
  ';',
  ',',
  '|',
  'Bearer',
  "b'ZXA6MA'",
  'ZXA6MA',
  'dmVyOjA',
  'dmVyOjk5OTk5OTk5OTk5OTk5OQ',
  'dmVyOi05OTk5OTk5OTk5OTk5OQ',
  'ZXA6OTk5OTk5OTk5OTk5OTk5',
  'dmVyOjIxNDc0ODM2NDg',
  'ZXA6LTE',
  'dmVyOjE6Mg',
  'dmVyOg',
  'OjE',
  '====',
  '\u0000ep',
  'ep\u0000',
] as const;

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
const controlChar = fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c));

/** Text around a NUL, a lone surrogate or another character that storage or encoders choke on. */
export const dangerousString: fc.Arbitrary<string> = fc
  .tuple(
    fc.string({ maxLength: 6 }),
    fc.constantFrom('\u0000', '\u0000', '\u0000', '\uD800', '\uDFFF', '\uDBFF\uDBFF', '\u0000\uD800', '\uFFFF', '\u001b', '\u2028'),
    fc.string({ maxLength: 6 }),
  )
  .map(([a, b, c]) => a + b + c);

/** Strings of many kinds; huge ones are rare and at most ~1.2 MB of UTF-8. */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: dangerousString, weight: 4 },
  { arbitrary: fc.string({ maxLength: 24 }), weight: 4 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 24 }), weight: 3 },
  { arbitrary: fc.constantFrom(...SPECIAL_STRINGS), weight: 6 },
  {
    arbitrary: fc
      .array(fc.oneof(fc.constantFrom(...SPECIAL_STRINGS), fc.string({ maxLength: 6 }), loneSurrogate, controlChar), {
        minLength: 1,
        maxLength: 5,
      })
      .map((parts) => parts.join('')),
    weight: 4,
  },
  {
    arbitrary: fc
      .tuple(fc.constantFrom('a', 'é', '\u0000', '\uD800', '🙂', '%', '{'), fc.constantFrom(200, 5_000, 70_000, 300_000))
      .map(([c, n]) => c.repeat(n)),
    weight: 1,
  },
);

/** Numbers a JSON body can carry: edges of every range, floats, and literals JSON.stringify cannot write. */
export const hostileNumber: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer({ min: -20, max: 20 }),
  fc.constantFrom(
    11,
    100,
    101,
    127,
    128,
    129,
    255,
    1000,
    1001,
    1024,
    1025,
    604_800,
    604_801,
    1 << 20,
    (1 << 20) + 1,
    2 ** 31 - 1,
    2 ** 31,
    -(2 ** 31),
    -(2 ** 31) - 1,
    2 ** 32,
    2 ** 53,
    2 ** 53 + 2,
    -(2 ** 53),
    1e21,
    1e308,
    -1e308,
    Number.MIN_VALUE,
    0.5,
    1.5,
    -0.5,
    2.0000001,
  ),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(
    raw('1e999'),
    raw('-1e999'),
    raw('1E+2'),
    raw('1.0'),
    raw('-0'),
    raw('0.0000001'),
    raw('123456789012345678901234567890'),
    raw('1e-400'),
    raw('10e0'),
  ),
);

/** Deeply nested arrays or objects, as JSON text (JSON.parse takes them; recursive code may not). */
export const deepJson: fc.Arbitrary<RawJson> = fc
  .tuple(fc.constantFrom('array', 'object', 'mixed'), fc.constantFrom(40, 500, 5_000, 50_000))
  .map(([kind, n]) => {
    if (kind === 'array') return raw('['.repeat(n) + ']'.repeat(n));
    if (kind === 'object') return raw('{"a":'.repeat(n) + '1' + '}'.repeat(n));
    return raw('[{"a":'.repeat(n) + 'null' + '}]'.repeat(n));
  });

const keyArb = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.constantFrom('__proto__', 'constructor', 'prototype', '', '\u0000', 'name', 'a.b', 'max_batch_size'),
);

/** Any JSON value, small, with hostile leaves. */
export const anyJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    hostileString,
    hostileNumber,
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.array(fc.tuple(keyArb, tie('value')), { maxLength: 4 }).map(objectOf),
  ),
})).value;

/** A wrong-typed value: anything but the type the field wants (or anything, deep nesting included). */
export const wrongValue: fc.Arbitrary<unknown> = fc.oneof({ arbitrary: anyJson, weight: 8 }, { arbitrary: deepJson, weight: 1 });

/** Mostly the valid arbitrary, often a hostile or wrong-typed value instead. */
export function field<T>(valid: fc.Arbitrary<T>, validWeight = 3): fc.Arbitrary<unknown> {
  return fc.oneof({ arbitrary: valid, weight: validWeight }, { arbitrary: wrongValue, weight: 2 });
}

// ---------------------------------------------------------------------------
// Valid-shaped parts of the REST bodies.

export const INSTANCE_IDS = INSTANCE_OPTIONS.map((o) => o.id);

/** Repositories the stand-in hub does not serve, so that an accepted create never starts an engine. */
export const validRepo = fc.stringMatching(/^[a-z][a-z0-9-]{0,10}[a-z0-9]$/).map((n) => `fuzz-nohub/${n}`);
export const validName = fc.oneof(fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9 ._-]{0,30}$/), fc.constantFrom('demo', 'é🙂', 'x'.repeat(128)));
export const validRevision = fc.oneof(fc.constantFrom('main', 'v1.0', 'refs/pr/1'), fc.stringMatching(/^[0-9a-f]{40}$/));
export const validComment = fc.oneof(fc.string({ maxLength: 40 }), fc.constant('c'.repeat(1000)));
const replicaCount = fc.integer({ min: 0, max: 10 });
/** A policy that keeps minReplica <= maxReplica (with the default maxReplica of 1 when it is left out). */
export const validPolicy = fc
  .tuple(
    replicaCount,
    replicaCount,
    fc.option(fc.integer({ min: 0, max: 604_800 }), { nil: undefined }),
    fc.constantFrom('both', 'max', 'min', 'none'),
  )
  .map(([a, b, cooldownPeriod, which]) => {
    const [minReplica, maxReplica] = [Math.min(a, b), Math.max(a, b)];
    return {
      ...(which === 'both' || (which === 'min' && minReplica <= 1) ? { minReplica } : {}),
      ...(which === 'both' || which === 'max' ? { maxReplica } : {}),
      ...(cooldownPeriod !== undefined ? { cooldownPeriod } : {}),
    };
  });
export const validSimplescale = fc.record({ replicas: replicaCount });
/** Advanced settings that keep max_input_length <= max_token_count (whichever of the two is given). */
export const validAdvanced = fc
  .tuple(
    fc.record(
      {
        tokenizer_skip_special_tokens: fc.boolean(),
        tokenizer_add_special_tokens: fc.boolean(),
        enable_content_logging: fc.boolean(),
        max_batch_size: fc.integer({ min: 1, max: 1024 }),
      },
      { requiredKeys: [] },
    ),
    fc.integer({ min: 1, max: 1 << 20 }),
    fc.integer({ min: 1, max: 1 << 20 }),
    fc.constantFrom('both', 'total', 'input', 'none'),
  )
  .map(([flags, a, b, which]) => ({
    ...flags,
    ...(which === 'both' ? { max_input_length: Math.min(a, b), max_token_count: Math.max(a, b) } : {}),
    ...(which === 'total' ? { max_token_count: Math.max(a, b, 2048) } : {}),
    ...(which === 'input' ? { max_input_length: Math.min(a, b, 4096) } : {}),
  }));
/**
 * Fields valid one by one that break a rule across fields (minReplica above
 * maxReplica, max_input_length above max_token_count): refused only after
 * the per-field checks, where a write may already have happened.
 */
export const crossFieldViolation: fc.Arbitrary<Record<string, unknown>> = fc.oneof(
  fc
    .tuple(fc.integer({ min: 0, max: 9 }), fc.integer({ min: 1, max: 10 }))
    .map(([max, k]) => ({ autoscalingPolicy: { minReplica: Math.min(10, max + k), maxReplica: max } })),
  fc.integer({ min: 2, max: 10 }).map((min) => ({ autoscalingPolicy: { minReplica: min } })),
  fc
    .tuple(fc.integer({ min: 1, max: 4096 }), fc.integer({ min: 1, max: 4096 }))
    .map(([total, k]) => ({ advanced: { max_token_count: total, max_input_length: total + k } })),
  fc.integer({ min: 1, max: 2047 }).map((total) => ({ advanced: { max_token_count: total, max_input_length: 2048 } })),
);

export const validArtifactName = fc
  .tuple(
    fc.stringMatching(/^[a-z][a-z0-9_-]{0,8}$/),
    fc.constantFrom('model', 'wandb-registry-model'),
    fc.stringMatching(/^[a-z][a-z0-9._-]{0,10}$/),
    fc.oneof(
      fc.nat(50).map((n) => `v${n}`),
      fc.constant('latest'),
    ),
  )
  .map(([org, reg, name, version]) => `${org}/${reg}/${name}:${version}`);

/** An object holding some of `fields` (each maybe hostile), and sometimes unknown members. */
export function looseRecord(fields: Record<string, fc.Arbitrary<unknown>>, extra = true): fc.Arbitrary<Record<string, unknown>> {
  const entries = Object.entries(fields).map(([k, arb]) =>
    fc.option(
      arb.map((v) => [k, v] as [string, unknown]),
      { nil: undefined, freq: 3 },
    ),
  );
  return fc
    .tuple(fc.tuple(...entries), extra ? fc.array(fc.tuple(keyArb, anyJson), { maxLength: 2 }) : fc.constant([]))
    .map(([known, unknown]) => objectOf([...(known.filter(Boolean) as [string, unknown][]), ...(unknown as [string, unknown][])]));
}

/**
 * A body that starts valid and then, with 0 to 3 mutations, has fields
 * replaced by hostile values, removed, or unknown fields added.
 */
export function mutatedValid(valid: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<Record<string, unknown>> {
  const mutation = fc.oneof(
    fc.record({ kind: fc.constant('replace' as const), pick: fc.nat(), value: wrongValue }),
    fc.record({ kind: fc.constant('string' as const), pick: fc.nat(), value: fc.oneof(dangerousString, hostileString) }),
    fc.record({ kind: fc.constant('string' as const), pick: fc.nat(), value: dangerousString }),
    fc.record({ kind: fc.constant('delete' as const), pick: fc.nat(), value: fc.constant(null) }),
    fc.record({ kind: fc.constant('add' as const), pick: fc.constant(0), key: keyArb, value: anyJson }),
    fc.record({ kind: fc.constant('nested' as const), pick: fc.nat(), key: keyArb, value: wrongValue }),
  );
  const mutations = fc.oneof(
    { arbitrary: fc.constant([]), weight: 2 },
    { arbitrary: fc.array(mutation, { minLength: 1, maxLength: 3 }), weight: 3 },
  );
  const mutated = fc.tuple(valid, mutations).map(([body, mutations]) => {
    const entries = Object.entries(body);
    for (const m of mutations) {
      if (m.kind === 'add') entries.push([(m as { key: string }).key, m.value]);
      else if (m.kind === 'string') {
        // A hostile string where the body has a string: it passes the type check and meets the rules (and the database).
        const strings = entries.map(([, v], i) => (typeof v === 'string' ? i : -1)).filter((i) => i >= 0);
        if (strings.length > 0) {
          const i = strings[m.pick % strings.length]!;
          entries[i] = [entries[i]![0], m.value];
        }
      } else if (entries.length > 0) {
        const i = m.pick % entries.length;
        if (m.kind === 'replace') entries[i] = [entries[i]![0], m.value];
        else if (m.kind === 'delete') entries.splice(i, 1);
        else {
          const current = entries[i]![1];
          if (current && typeof current === 'object' && !Array.isArray(current)) {
            entries[i] = [entries[i]![0], objectOf([...Object.entries(current), [(m as { key: string }).key, m.value]])];
          } else entries[i] = [entries[i]![0], m.value];
        }
      }
    }
    return objectOf(entries);
  });
  // Or the valid body with exactly one string, at any depth, poisoned: everything else passes, so the string meets the rules and the database.
  const poisoned = fc
    .tuple(valid, fc.nat(), fc.oneof({ arbitrary: dangerousString, weight: 3 }, { arbitrary: hostileString, weight: 1 }))
    .map(([body, pick, text]) => poisonOneString(body, pick, text) as Record<string, unknown>);
  return fc.oneof({ arbitrary: mutated, weight: 5 }, { arbitrary: poisoned, weight: 2 });
}

/** The value with its (pick mod count)-th string leaf replaced by `text`. */
export function poisonOneString(value: unknown, pick: number, text: string): unknown {
  let count = 0;
  const countStrings = (v: unknown): void => {
    if (typeof v === 'string') count++;
    else if (Array.isArray(v)) v.forEach(countStrings);
    else if (v && typeof v === 'object' && !(v instanceof RawJson)) Object.values(v).forEach(countStrings);
  };
  countStrings(value);
  if (count === 0) return value;
  let index = pick % count;
  const replace = (v: unknown): unknown => {
    if (typeof v === 'string') return index-- === 0 ? text : v;
    if (Array.isArray(v)) return v.map(replace);
    if (v && typeof v === 'object' && !(v instanceof RawJson)) return objectOf(Object.entries(v).map(([k, x]) => [k, replace(x)]));
    return v;
  };
  return replace(value);
}

// ---------------------------------------------------------------------------
// How a body travels: JSON, broken JSON, bytes that are not UTF-8, odd content types.

export type BodyEncoding =
  | { kind: 'json' }
  | { kind: 'truncated'; at: number }
  | { kind: 'insert'; at: number; text: string }
  | { kind: 'wrap'; before: string; after: string }
  | { kind: 'bytes'; bytes: Uint8Array }
  | { kind: 'invalid-utf8'; bytes: number[] }
  | { kind: 'literal'; text: string };

export const bodyEncoding: fc.Arbitrary<BodyEncoding> = fc.oneof(
  { arbitrary: fc.constant({ kind: 'json' as const }), weight: 14 },
  { arbitrary: fc.record({ kind: fc.constant('truncated' as const), at: fc.nat() }), weight: 2 },
  {
    arbitrary: fc.record({
      kind: fc.constant('insert' as const),
      at: fc.nat(),
      text: fc.constantFrom(',', '}', '{', '"', '\\', ':', '\u0000', 'NaN', '/*', '\n', ']', "'"),
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('wrap' as const),
      before: fc.constantFrom('', '\uFEFF', ' \n', 'x', '['),
      after: fc.constantFrom('', ',', ' garbage', '}', '\u0000', '{}'),
    }),
    weight: 2,
  },
  { arbitrary: fc.record({ kind: fc.constant('bytes' as const), bytes: fc.uint8Array({ maxLength: 64 }) }), weight: 1 },
  {
    arbitrary: fc.record({
      kind: fc.constant('invalid-utf8' as const),
      bytes: fc.array(fc.constantFrom(0xff, 0xfe, 0xc0, 0x80, 0xed, 0xa0, 0xf8), { minLength: 1, maxLength: 4 }),
    }),
    weight: 1,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('literal' as const),
      text: fc.constantFrom('', ' ', 'null', '[]', '"x"', '0', 'true', '{}', '{"a":1,}', "{'a':1}", 'NaN', '\u0000'),
    }),
    weight: 2,
  },
);

export function encodeBody(value: unknown, encoding: BodyEncoding): Buffer {
  const json = toJsonText(value);
  switch (encoding.kind) {
    case 'json':
      return Buffer.from(json, 'utf8');
    case 'truncated':
      return Buffer.from(json.slice(0, json.length === 0 ? 0 : encoding.at % json.length), 'utf8');
    case 'insert': {
      const at = json.length === 0 ? 0 : encoding.at % json.length;
      return Buffer.from(json.slice(0, at) + encoding.text + json.slice(at), 'utf8');
    }
    case 'wrap':
      return Buffer.from(encoding.before + json + encoding.after, 'utf8');
    case 'bytes':
      return Buffer.from(encoding.bytes);
    case 'invalid-utf8': {
      // The bytes land inside the first string value, where a decoder meets them.
      const text = Buffer.from(json, 'utf8');
      const quote = text.indexOf(0x22);
      const at = quote < 0 ? text.length : quote + 1;
      return Buffer.concat([text.subarray(0, at), Buffer.from(encoding.bytes), text.subarray(at)]);
    }
    case 'literal':
      return Buffer.from(encoding.text, 'utf8');
  }
}

export const contentType: fc.Arbitrary<string | undefined> = fc.oneof(
  { arbitrary: fc.constant('application/json'), weight: 12 },
  {
    arbitrary: fc.constantFrom(
      undefined,
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=----fuzz',
      'multipart/form-data',
      'application/json; charset=utf-16le',
      'application/json; charset=latin1',
      'application/json; charset="x',
      'application/graphql',
      'application/graphql-response+json',
      'application/octet-stream',
      '*/*',
      'APPLICATION/JSON',
      ';;;',
      'application/json, text/plain',
      'json',
      'text/event-stream',
    ),
    weight: 3,
  },
);

/** Header values fetch lets through: visible ASCII, space and Latin-1 bytes. */
export const headerSafeString = fc.string({
  unit: fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0xa0, max: 0xff })).map((c) => String.fromCharCode(c)),
  maxLength: 40,
});

/** Percent-encodes every byte of the UTF-8 form except unreserved characters (lone surrogates become U+FFFD). */
export function pctEncode(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Path segments and query values as written on the wire: encoded hostile strings, and broken percent-encoding as it is. */
export const urlPiece: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: hostileString.filter((s) => s.length < 2_000).map(pctEncode), weight: 4 },
  {
    arbitrary: fc.constantFrom(
      '%',
      '%%',
      '%zz',
      '%E0%A4%A',
      '%C0%80',
      '%ED%A0%80',
      '%00',
      '%FF',
      '%2F',
      '%2e%2e',
      'a%',
      '%u0041',
      '%%41',
      '%F0%9F%98',
      '%0A%0D',
      '%25',
      '%C3%28',
      '%E2%82',
      '🙂',
      'é',
      "'",
      '"',
      '<',
      '>',
      '^',
      '`',
      '{',
      '}',
      '|',
    ),
    weight: 3,
  },
);

// ---------------------------------------------------------------------------
// GraphQL operations built from the printed schema.

const here = path.dirname(fileURLToPath(import.meta.url));
export const printedSchema: GraphQLSchema = buildSchema(readFileSync(path.join(here, '../../schema.graphql'), 'utf8'));

/** Values for arguments and input fields of a given name, from the seeded world (ids that exist, and so on). */
export type Contextual = Record<string, fc.Arbitrary<unknown>>;

function scalarValue(type: GraphQLScalarType | GraphQLEnumType): fc.Arbitrary<unknown> {
  if (type instanceof GraphQLEnumType) return fc.constantFrom(...type.getValues().map((v) => v.name));
  switch (type.name) {
    case 'Int':
      return fc.oneof(
        { arbitrary: fc.integer({ min: -3, max: 120 }), weight: 4 },
        { arbitrary: fc.constantFrom(2 ** 31 - 1, -(2 ** 31), 1024, 2 ** 31 - 2), weight: 1 },
      );
    case 'Float':
      return fc.oneof(fc.double({ min: -2, max: 2, noNaN: true }), fc.constantFrom(0, 1, 1e308, -1e-308));
    case 'Boolean':
      return fc.boolean();
    case 'JSON':
      return anyJson;
    case 'DateTime':
      return fc.constantFrom('2024-01-01T00:00:00.000Z', 'not a date', '');
    default:
      return hostileString;
  }
}

/**
 * A value for an input type: valid-shaped, except that any position may hold
 * a wrong-typed or hostile value, an out-of-range integer, or an unknown member.
 */
export function inputValue(type: GraphQLInputType, name: string, ctx: Contextual, depth = 0): fc.Arbitrary<unknown> {
  const hostile = fc.oneof(wrongValue, hostileString, fc.constantFrom(2 ** 31, -(2 ** 31) - 1, 2 ** 53, 1.5, -1, 'x', null));
  if (type instanceof GraphQLNonNull)
    return fc.oneof({ arbitrary: inputValue(type.ofType, name, ctx, depth), weight: 12 }, { arbitrary: fc.constant(null), weight: 1 });
  if (name in ctx) return fc.oneof({ arbitrary: ctx[name]!, weight: 5 }, { arbitrary: hostile, weight: 1 });
  if (type instanceof GraphQLList) {
    return fc.oneof(
      { arbitrary: fc.array(inputValue(type.ofType, name, ctx, depth + 1), { maxLength: 3 }), weight: 5 },
      { arbitrary: inputValue(type.ofType, name, ctx, depth + 1), weight: 1 },
      { arbitrary: hostile, weight: 1 },
    );
  }
  if (type instanceof GraphQLInputObjectType) {
    if (depth > 4) return fc.constant(null);
    const fields = Object.fromEntries(Object.values(type.getFields()).map((f) => [f.name, inputValue(f.type, f.name, ctx, depth + 1)]));
    const required = Object.values(type.getFields())
      .filter((f) => f.type instanceof GraphQLNonNull)
      .map((f) => f.name);
    const obj = fc
      .tuple(
        fc.record(fields, { requiredKeys: required }),
        fc.option(fc.array(fc.tuple(keyArb, anyJson), { minLength: 1, maxLength: 2 }), { freq: 8, nil: undefined }),
      )
      .map(([known, unknown]) => objectOf([...Object.entries(known), ...(unknown ?? [])]));
    return fc.oneof({ arbitrary: obj, weight: 8 }, { arbitrary: hostile, weight: 1 });
  }
  return fc.oneof({ arbitrary: scalarValue(type as GraphQLScalarType), weight: 5 }, { arbitrary: hostile, weight: 1 });
}

/** A selection set for an output type, a few levels deep; unions and interfaces get `__typename` and inline fragments. */
export function selectionFor(type: GraphQLOutputType, depth = 0, args: (f: GraphQLField<unknown, unknown>) => string = () => ''): string {
  const named = getNamedType(type);
  if (named instanceof GraphQLScalarType || named instanceof GraphQLEnumType) return '';
  if (depth > 2) return '{ __typename }';
  if (named instanceof GraphQLUnionType) {
    return `{ __typename ${named
      .getTypes()
      .map((t) => `... on ${t.name} ${selectionFor(t, depth + 1, args)}`)
      .join(' ')} }`;
  }
  const obj = named as GraphQLObjectType | GraphQLInterfaceType;
  const parts = ['__typename'];
  for (const f of Object.values(obj.getFields())) {
    const leaf = getNamedType(f.type) instanceof GraphQLScalarType || getNamedType(f.type) instanceof GraphQLEnumType;
    const requiredArgs = f.args.some((a) => a.type instanceof GraphQLNonNull);
    if (requiredArgs) continue;
    if (leaf) parts.push(f.name);
    else if (depth < 2) parts.push(`${f.name}${args(f)} ${selectionFor(f.type, depth + 1, args)}`);
  }
  return `{ ${parts.join(' ')} }`;
}

export interface GraphQLOperation {
  kind: 'query' | 'mutation' | 'subscription';
  field: string;
  query: string;
  variables: Record<string, unknown>;
  operationName?: string;
}

/**
 * An operation on one root field of the schema, with generated variables for
 * all of its arguments. `fieldCtx` overrides the values of one root field's
 * arguments (so that deleteEndpoint never gets a seeded id, for example).
 */
export function operation(
  kind: GraphQLOperation['kind'],
  ctx: Contextual,
  fieldCtx: Record<string, Contextual> = {},
): fc.Arbitrary<GraphQLOperation> {
  const root =
    kind === 'query'
      ? printedSchema.getQueryType()!
      : kind === 'mutation'
        ? printedSchema.getMutationType()!
        : printedSchema.getSubscriptionType()!;
  const fields = Object.values(root.getFields());
  return fc.constantFrom(...fields).chain((f) => {
    const context = { ...ctx, ...(fieldCtx[f.name] ?? {}) };
    const argValues = Object.fromEntries(
      f.args.map((a) => [
        a.name,
        fc.option(inputValue(a.type, a.name, context), { freq: a.type instanceof GraphQLNonNull ? 20 : 2, nil: undefined }),
      ]),
    );
    return fc
      .tuple(fc.record(argValues), fc.boolean(), fc.option(fc.constantFrom('Op', 'Other', ''), { nil: undefined }))
      .map(([values, alias, operationName]) => {
        const defs = f.args.map((a) => `$${a.name}: ${a.type.toString()}`).join(', ');
        const call = f.args.length > 0 ? `(${f.args.map((a) => `${a.name}: $${a.name}`).join(', ')})` : '';
        const nestedArgs = (g: GraphQLField<unknown, unknown>) => (g.args.some((a) => a.name === 'first') ? '(first: 2)' : '');
        const query = `${kind} Op${defs ? `(${defs})` : ''} { ${alias ? 'r: ' : ''}${f.name}${call} ${selectionFor(f.type, 0, nestedArgs)} }`;
        const variables = Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined));
        return { kind, field: f.name, query, variables, ...(operationName !== undefined ? { operationName } : {}) };
      });
  });
}

/** Text surgery on a document: truncation, deletion, insertion of a token, duplication. */
export const documentCorruption = fc.oneof(
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), length: fc.integer({ min: 1, max: 8 }) }),
  fc.record({
    kind: fc.constant('insert' as const),
    at: fc.nat(),
    text: fc.oneof(
      fc.constantFrom(
        '{',
        '}',
        '(',
        ')',
        '[',
        ']',
        ':',
        '$',
        '!',
        '@',
        '...',
        '"',
        '"""',
        '#',
        ',',
        '=',
        '|',
        '&',
        'query',
        'mutation',
        'subscription',
        'fragment',
        'on',
        '\u0000',
        '\uD800',
        '\\u',
        '$$',
        '@skip',
        '1.5e',
        '0x1',
        '\n',
        '"\\u{110000}"',
        '"\\uD800"',
      ),
      hostileString.filter((s) => s.length < 50),
    ),
  }),
  fc.record({ kind: fc.constant('duplicate' as const), at: fc.nat(), length: fc.integer({ min: 1, max: 40 }) }),
);

export type DocumentCorruption = typeof documentCorruption extends fc.Arbitrary<infer T> ? T : never;

export function corrupt(doc: string, c: DocumentCorruption): string {
  const at = doc.length === 0 ? 0 : c.at % doc.length;
  switch (c.kind) {
    case 'truncate':
      return doc.slice(0, at);
    case 'delete':
      return doc.slice(0, at) + doc.slice(at + c.length);
    case 'insert':
      return doc.slice(0, at) + c.text + doc.slice(at);
    case 'duplicate':
      return doc.slice(0, at + c.length) + doc.slice(at, at + c.length) + doc.slice(at + c.length);
  }
}

const TOKENS = [
  '{',
  '}',
  '(',
  ')',
  '[',
  ']',
  ':',
  '$',
  '!',
  '@',
  '...',
  '=',
  '|',
  '&',
  ',',
  'query',
  'mutation',
  'subscription',
  'fragment',
  'on',
  'true',
  'null',
  'me',
  'endpoint',
  'endpoints',
  'id',
  '__typename',
  '__schema',
  '__type',
  'types',
  'name',
  'fields',
  'x',
  'Op',
  '1',
  '-1',
  '1.5',
  '"s"',
  '"""b"""',
  '#c\n',
  'Int',
  'String!',
  'ID',
  '[ID!]!',
  'input',
  'type',
  'schema',
  'directive',
  '@include(if: true)',
  '\u0000',
  '\uFEFF',
  '"\\u0000"',
  '2147483648',
  '1e999',
];

/** A random token soup, sometimes close to a document. */
export const tokenSoup: fc.Arbitrary<string> = fc.array(fc.constantFrom(...TOKENS), { maxLength: 40 }).map((t) => t.join(' '));

export const GPU_TYPE_NAMES = [...GPU_TYPES];

// ---------------------------------------------------------------------------
// Printing a failing case compactly.

function compact(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') {
    if (value.length <= 160) return value;
    const counts = new Set(value);
    return counts.size === 1 ? `<${JSON.stringify(value[0])} x ${value.length}>` : `${value.slice(0, 100)}… <${value.length} chars>`;
  }
  if (value instanceof RawJson) return `<raw JSON ${String(compact(value.text))}>`;
  if (value instanceof Uint8Array)
    return `<${value.length} bytes: ${Buffer.from(value.subarray(0, 48)).toString('hex')}${value.length > 48 ? '…' : ''}>`;
  if (depth > 6) return '<…>';
  if (Array.isArray(value)) return value.slice(0, 20).map((v) => compact(v, depth + 1));
  if (value && typeof value === 'object') return objectOf(Object.entries(value).map(([k, v]) => [k, compact(v, depth + 1)]));
  return value;
}

/** A short, readable text of a case (long strings abbreviated, bytes in hex), for counterexamples. */
export function describeCase(value: unknown): string {
  return JSON.stringify(compact(value), (_k, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v));
}

/** Attaches the compact printing to every generated case. */
export function printable<T extends object>(arb: fc.Arbitrary<T>): fc.Arbitrary<T> {
  return arb.map((value) => {
    const copy = { ...value };
    return Object.defineProperty(copy, fc.toStringMethod, { value: () => describeCase(copy), enumerable: false });
  });
}
