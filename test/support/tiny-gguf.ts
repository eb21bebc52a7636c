/**
 * Deterministic generator for a tiny GGUF (v3) llama-architecture language model, used as a
 * test fixture for the inference engine (node-llama-cpp / llama.cpp).
 *
 * - `general.architecture = "llama"`, 64-dim embedding, 2 layers, 4 heads (GQA 2 KV heads), FFN 128.
 * - Byte-level BPE tokenizer (`tokenizer.ggml.model = "gpt2"`): the 256 GPT-2 byte-to-unicode byte
 *   tokens, a handful of deterministic merges, and special tokens. Any UTF-8 text round-trips
 *   through tokenize/detokenize.
 * - Special tokens: `<|startoftext|>` (BOS, control), `<|endoftext|>` (padding, control),
 *   `<|im_start|>` (control), `<|im_end|>` (EOS/EOT, control), `<think>` / `</think>`
 *   (user-defined, like Qwen3: always tokenized as single tokens and kept by detokenize).
 * - Qwen3-style ChatML Jinja chat template with a think block toggled by `enable_thinking`.
 * - F32 tensors filled from a seeded integer PRNG (no Math.random, no timestamps), so the same
 *   options always produce byte-identical output.
 * - The output-projection rows of all special tokens are zero, so their logits are always 0 while
 *   regular tokens get random (mostly larger) logits: greedy decoding practically never emits EOS
 *   or a think tag on its own; generations run until max tokens / a stop string. Rows of
 *   non-printable / non-ASCII byte tokens are scaled down (x0.1) so greedy output is mostly ASCII.
 */
import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

export type TinyGgufOptions = {
  /** PRNG seed for the weights. Default 1. */
  seed?: number;
  /** `llama.context_length` (train context size). Default 4096. */
  contextLength?: number;
  /** Override the `tokenizer.chat_template`. Default: {@link tinyChatTemplate}(thinkingDefault). */
  chatTemplate?: string;
  /** What the default template does when `enable_thinking` is not passed. Default 'off'. */
  thinkingDefault?: 'on' | 'off';
  /** `general.name`. Default "tiny-test-llama". */
  name?: string;
  /** `tokenizer.ggml.add_bos_token` (whether BOS is prepended when adding special tokens). Default true. */
  addBosToken?: boolean;
  /** Larger shapes than {@link TINY_GGUF_DIMENSIONS}, for benchmarks where compute must dominate. */
  dimensions?: Partial<Record<keyof typeof TINY_GGUF_DIMENSIONS, number>>;
};

export type TinyGgufFile = { path: string; sha256: string; size: number };

export const TINY_GGUF_DIMENSIONS = {
  embedding: 64,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  feedForward: 128,
} as const;

export const TINY_SPECIAL_TOKENS = {
  bos: '<|startoftext|>',
  pad: '<|endoftext|>',
  imStart: '<|im_start|>',
  imEnd: '<|im_end|>',
  thinkStart: '<think>',
  thinkEnd: '</think>',
} as const;

/**
 * Qwen3-like ChatML template. With `thinkingDefault: 'on'` (Qwen3 behaviour) the empty think block is
 * only added when `enable_thinking` is explicitly false; with 'off' it is added unless
 * `enable_thinking` is explicitly true.
 */
export function tinyChatTemplate(thinkingDefault: 'on' | 'off' = 'off'): string {
  const emptyThinkCondition =
    thinkingDefault === 'on'
      ? 'enable_thinking is defined and enable_thinking is false'
      : 'not (enable_thinking is defined and enable_thinking is true)';
  // Mirrors Qwen3's template (minus tool calling): the last assistant turn after the last user
  // message gets a <think> block (from reasoning_content or an inline <think>...</think>), earlier
  // turns have their reasoning stripped.
  return [
    "{%- if messages[0].role == 'system' %}",
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}",
    '{%- endif %}',
    '{%- set ns = namespace(last_query_index=-1) %}',
    "{%- for message in messages %}{%- if message.role == 'user' %}{%- set ns.last_query_index = loop.index0 %}{%- endif %}{%- endfor %}",
    '{%- for message in messages %}',
    "{%- if message.content is string %}{%- set content = message.content %}{%- else %}{%- set content = '' %}{%- endif %}",
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}",
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}",
    "{%- elif message.role == 'assistant' %}",
    "{%- set reasoning_content = '' %}",
    '{%- if message.reasoning_content is string %}',
    '{%- set reasoning_content = message.reasoning_content %}',
    "{%- elif '</think>' in content %}",
    "{%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}",
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}",
    '{%- endif %}',
    '{%- if loop.index0 > ns.last_query_index and (loop.last or reasoning_content) %}',
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}",
    '{%- else %}',
    "{{- '<|im_start|>assistant\\n' + content }}",
    '{%- endif %}',
    "{{- '<|im_end|>\\n' }}",
    "{%- elif message.role == 'tool' %}",
    "{{- '<|im_start|>user\\n<tool_response>\\n' + content + '\\n</tool_response><|im_end|>\\n' }}",
    '{%- endif %}',
    '{%- endfor %}',
    '{%- if add_generation_prompt %}',
    "{{- '<|im_start|>assistant\\n' }}",
    `{%- if ${emptyThinkCondition} %}`,
    "{{- '<think>\\n\\n</think>\\n\\n' }}",
    '{%- endif %}',
    '{%- endif %}',
  ].join('\n');
}

/**
 * A ChatML template with Qwen2.5's tool calling: the tools listed in the system turn, calls
 * written as `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, results as
 * `<tool_response>` in a user turn.
 */
export function toolsChatTemplate(): string {
  return [
    '{%- if tools %}',
    "{{- '<|im_start|>system\\n' }}",
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}",
    '{{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}',
    '{%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}',
    '{{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}',
    "{%- elif messages[0].role == 'system' %}",
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}",
    '{%- endif %}',
    '{%- for message in messages %}',
    "{%- if message.content is string %}{%- set content = message.content %}{%- else %}{%- set content = '' %}{%- endif %}",
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}",
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}",
    "{%- elif message.role == 'assistant' %}",
    "{{- '<|im_start|>assistant\\n' + content }}",
    '{%- for tool_call in message.tool_calls or [] %}',
    "{%- if (loop.first and content) or (not loop.first) %}{{- '\\n' }}{%- endif %}",
    '{%- if tool_call.function %}{%- set tool_call = tool_call.function %}{%- endif %}',
    '{{- \'<tool_call>\\n{"name": "\' }}{{- tool_call.name }}{{- \'", "arguments": \' }}',
    '{%- if tool_call.arguments is string %}{{- tool_call.arguments }}{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}',
    "{{- '}\\n</tool_call>' }}",
    '{%- endfor %}',
    "{{- '<|im_end|>\\n' }}",
    "{%- elif message.role == 'tool' %}",
    "{%- if loop.first or (messages[loop.index0 - 1].role != 'tool') %}{{- '<|im_start|>user' }}{%- endif %}",
    "{{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' }}",
    "{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}{{- '<|im_end|>\\n' }}{%- endif %}",
    '{%- endif %}',
    '{%- endfor %}',
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
  ].join('\n');
}

/**
 * The tiny template, changed so that the generation prompt leaves a `<think>` block open when
 * thinking is on (like DeepSeek-R1 or Qwen3-Thinking templates) instead of letting the model open
 * it: the random tiny model never emits `<think>` itself.
 */
export function openThinkTemplate(thinkingDefault: 'on' | 'off'): string {
  const template = tinyChatTemplate(thinkingDefault);
  const closedBlock = "{{- '<think>\\n\\n</think>\\n\\n' }}\n{%- endif %}";
  if (!template.includes(closedBlock)) throw new Error('tinyChatTemplate changed: update openThinkTemplate');
  return template.replace(closedBlock, "{{- '<think>\\n\\n</think>\\n\\n' }}\n{%- else %}\n{{- '<think>\\n' }}\n{%- endif %}");
}

/**
 * A template of a family that reasons by default and opens the think block in
 * the generation prompt (as DeepSeek-R1-style templates do), so that even the
 * tiny model's random output is reasoning until `enable_thinking: false`.
 */
export const REASONING_TEMPLATE = openThinkTemplate('on');

// ---------------------------------------------------------------------------------------------
// Tokenizer

/** GPT-2 `bytes_to_unicode()`: byte value -> printable unicode char used in the vocabulary. */
function gpt2ByteToUnicode(): string[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const table: string[] = new Array<string>(256);
  const isPrintable = new Set(printable);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    table[b] = String.fromCodePoint(isPrintable.has(b) ? b : 256 + extra++);
  }
  return table;
}

/** Merges are given as byte strings (ASCII); each produces a new token (left + right). */
const MERGE_SOURCES: ReadonlyArray<readonly [string, string]> = [
  [' ', 't'],
  ['h', 'e'],
  ['i', 'n'],
  ['e', 'r'],
  ['a', 'n'],
  [' ', 'a'],
  ['o', 'n'],
  ['r', 'e'],
  [' t', 'he'],
  [' ', 's'],
  ['o', 'r'],
  ['e', 'n'],
  [' ', 'w'],
  ['a', 't'],
  [' ', 'o'],
  ['e', 's'],
  ['l', 'l'],
  ['i', 's'],
  ['in', 'g'],
  [' ', 'c'],
  ['e', 'd'],
  [' ', 'h'],
  ['o', 'u'],
  [' ', 'i'],
  ['l', 'o'],
  ['he', 'll'],
  ['hell', 'o'],
  [' w', 'or'],
  [' wor', 'l'],
  [' worl', 'd'],
];

type VocabEntry = { text: string; type: number };

// llama.cpp token types
const TOKEN_TYPE_NORMAL = 1;
const TOKEN_TYPE_CONTROL = 3;
const TOKEN_TYPE_USER_DEFINED = 4;

function buildVocab(): { tokens: VocabEntry[]; merges: string[]; special: Record<keyof typeof TINY_SPECIAL_TOKENS, number> } {
  const byteToUnicode = gpt2ByteToUnicode();
  const encode = (s: string) => Array.from(Buffer.from(s, 'utf8'), (b) => byteToUnicode[b]!).join('');
  const tokens: VocabEntry[] = [];
  for (let b = 0; b < 256; b++) tokens.push({ text: byteToUnicode[b]!, type: TOKEN_TYPE_NORMAL });
  const merges: string[] = [];
  for (const [left, right] of MERGE_SOURCES) {
    merges.push(`${encode(left)} ${encode(right)}`);
    tokens.push({ text: encode(left + right), type: TOKEN_TYPE_NORMAL });
  }
  const special = {} as Record<keyof typeof TINY_SPECIAL_TOKENS, number>;
  for (const [key, text] of Object.entries(TINY_SPECIAL_TOKENS) as Array<[keyof typeof TINY_SPECIAL_TOKENS, string]>) {
    special[key] = tokens.length;
    const userDefined = key === 'thinkStart' || key === 'thinkEnd';
    tokens.push({ text, type: userDefined ? TOKEN_TYPE_USER_DEFINED : TOKEN_TYPE_CONTROL });
  }
  return { tokens, merges, special };
}

// ---------------------------------------------------------------------------------------------
// GGUF writer

const GGUF_MAGIC = 0x46554747; // "GGUF" little-endian
const GGUF_VERSION = 3;
const ALIGNMENT = 32;

enum GgufType {
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
}

type KvValue =
  | { type: GgufType.UINT32 | GgufType.INT32 | GgufType.FLOAT32; value: number }
  | { type: GgufType.BOOL; value: boolean }
  | { type: GgufType.STRING; value: string }
  | { type: GgufType.ARRAY; itemType: GgufType.STRING; value: string[] }
  | { type: GgufType.ARRAY; itemType: GgufType.INT32 | GgufType.FLOAT32; value: number[] };

const u32 = (value: number): KvValue => ({ type: GgufType.UINT32, value });
const f32 = (value: number): KvValue => ({ type: GgufType.FLOAT32, value });
const str = (value: string): KvValue => ({ type: GgufType.STRING, value });
const bool = (value: boolean): KvValue => ({ type: GgufType.BOOL, value });

class ByteWriter {
  private chunks: Buffer[] = [];
  length = 0;
  push(buf: Buffer): void {
    this.chunks.push(buf);
    this.length += buf.length;
  }
  u32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v >>> 0);
    this.push(b);
  }
  i32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.push(b);
  }
  u64(v: number | bigint): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  f32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.push(b);
  }
  u8(v: number): void {
    this.push(Buffer.from([v & 0xff]));
  }
  string(s: string): void {
    const bytes = Buffer.from(s, 'utf8');
    this.u64(bytes.length);
    this.push(bytes);
  }
  padTo(alignment: number): void {
    const rem = this.length % alignment;
    if (rem !== 0) this.push(Buffer.alloc(alignment - rem));
  }
  toBuffer(): Buffer {
    return Buffer.concat(this.chunks, this.length);
  }
}

function writeKvValue(w: ByteWriter, v: KvValue): void {
  w.u32(v.type);
  switch (v.type) {
    case GgufType.UINT32:
      return w.u32(v.value);
    case GgufType.INT32:
      return w.i32(v.value);
    case GgufType.FLOAT32:
      return w.f32(v.value);
    case GgufType.BOOL:
      return w.u8(v.value ? 1 : 0);
    case GgufType.STRING:
      return w.string(v.value);
    case GgufType.ARRAY: {
      w.u32(v.itemType);
      w.u64(v.value.length);
      if (v.itemType === GgufType.STRING) for (const s of v.value as string[]) w.string(s);
      else if (v.itemType === GgufType.INT32) for (const n of v.value as number[]) w.i32(n);
      else for (const n of v.value as number[]) w.f32(n);
      return;
    }
  }
}

/** mulberry32: small, fast, fully deterministic 32-bit PRNG (integer ops only); the GPU check's model uses it too. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

type Tensor = { name: string; dims: number[]; data: Float32Array };

/**
 * Build the GGUF file in memory. Same options => byte-identical buffer.
 */
export function buildTinyGguf(options: TinyGgufOptions = {}): Buffer {
  const seed = options.seed ?? 1;
  const contextLength = options.contextLength ?? 4096;
  const thinkingDefault = options.thinkingDefault ?? 'off';
  const chatTemplate = options.chatTemplate ?? tinyChatTemplate(thinkingDefault);
  const name = options.name ?? 'tiny-test-llama';
  const addBosToken = options.addBosToken ?? true;
  const {
    embedding: nEmbd,
    layers: nLayer,
    heads: nHead,
    kvHeads: nHeadKv,
    feedForward: nFf,
  } = { ...TINY_GGUF_DIMENSIONS, ...options.dimensions };
  const headDim = nEmbd / nHead;

  const { tokens, merges, special } = buildVocab();
  const nVocab = tokens.length;

  // --- tensors (ggml dims order: ne[0] = row length / input dim)
  const rand = mulberry32(seed);
  const uniform = (count: number, scale: number): Float32Array => {
    const out = new Float32Array(count);
    for (let i = 0; i < count; i++) out[i] = ((rand() / 4294967296) * 2 - 1) * scale; // exact in f64
    return out;
  };
  const ones = (count: number) => new Float32Array(count).fill(1);

  const tensors: Tensor[] = [];
  tensors.push({ name: 'token_embd.weight', dims: [nEmbd, nVocab], data: uniform(nEmbd * nVocab, 1) });
  for (let l = 0; l < nLayer; l++) {
    const p = `blk.${l}.`;
    tensors.push({ name: `${p}attn_norm.weight`, dims: [nEmbd], data: ones(nEmbd) });
    tensors.push({ name: `${p}attn_q.weight`, dims: [nEmbd, nEmbd], data: uniform(nEmbd * nEmbd, 0.25) });
    tensors.push({ name: `${p}attn_k.weight`, dims: [nEmbd, headDim * nHeadKv], data: uniform(nEmbd * headDim * nHeadKv, 0.25) });
    tensors.push({ name: `${p}attn_v.weight`, dims: [nEmbd, headDim * nHeadKv], data: uniform(nEmbd * headDim * nHeadKv, 0.25) });
    tensors.push({ name: `${p}attn_output.weight`, dims: [nEmbd, nEmbd], data: uniform(nEmbd * nEmbd, 0.2) });
    tensors.push({ name: `${p}ffn_norm.weight`, dims: [nEmbd], data: ones(nEmbd) });
    tensors.push({ name: `${p}ffn_gate.weight`, dims: [nEmbd, nFf], data: uniform(nEmbd * nFf, 0.25) });
    tensors.push({ name: `${p}ffn_up.weight`, dims: [nEmbd, nFf], data: uniform(nEmbd * nFf, 0.25) });
    tensors.push({ name: `${p}ffn_down.weight`, dims: [nFf, nEmbd], data: uniform(nFf * nEmbd, 0.15) });
  }
  tensors.push({ name: 'output_norm.weight', dims: [nEmbd], data: ones(nEmbd) });
  const output = uniform(nEmbd * nVocab, 0.5);
  // Shrink the output rows of non-printable / non-ASCII byte tokens so greedy output is mostly readable
  // ASCII (they remain reachable by sampling), and zero the rows of all special tokens (logit 0).
  for (let b = 0; b < 256; b++) {
    const printable = b === 0x0a || (b >= 0x20 && b <= 0x7e);
    if (!printable) for (let i = b * nEmbd; i < (b + 1) * nEmbd; i++) output[i] = output[i]! * 0.1;
  }
  for (const id of Object.values(special)) output.fill(0, id * nEmbd, (id + 1) * nEmbd);
  tensors.push({ name: 'output.weight', dims: [nEmbd, nVocab], data: output });

  // --- metadata
  const kv: Array<[string, KvValue]> = [
    ['general.architecture', str('llama')],
    ['general.name', str(name)],
    ['general.alignment', u32(ALIGNMENT)],
    ['general.file_type', u32(0)], // ALL_F32
    ['llama.vocab_size', u32(nVocab)],
    ['llama.context_length', u32(contextLength)],
    ['llama.embedding_length', u32(nEmbd)],
    ['llama.block_count', u32(nLayer)],
    ['llama.feed_forward_length', u32(nFf)],
    ['llama.rope.dimension_count', u32(headDim)],
    ['llama.rope.freq_base', f32(10000)],
    ['llama.attention.head_count', u32(nHead)],
    ['llama.attention.head_count_kv', u32(nHeadKv)],
    ['llama.attention.layer_norm_rms_epsilon', f32(1e-6)],
    ['tokenizer.ggml.model', str('gpt2')],
    ['tokenizer.ggml.pre', str('default')],
    ['tokenizer.ggml.tokens', { type: GgufType.ARRAY, itemType: GgufType.STRING, value: tokens.map((t) => t.text) }],
    ['tokenizer.ggml.token_type', { type: GgufType.ARRAY, itemType: GgufType.INT32, value: tokens.map((t) => t.type) }],
    ['tokenizer.ggml.merges', { type: GgufType.ARRAY, itemType: GgufType.STRING, value: merges }],
    ['tokenizer.ggml.bos_token_id', u32(special.bos)],
    ['tokenizer.ggml.eos_token_id', u32(special.imEnd)],
    ['tokenizer.ggml.eot_token_id', u32(special.imEnd)],
    ['tokenizer.ggml.padding_token_id', u32(special.pad)],
    ['tokenizer.ggml.add_bos_token', bool(addBosToken)],
    ['tokenizer.ggml.add_eos_token', bool(false)],
    ['tokenizer.chat_template', str(chatTemplate)],
  ];

  // --- layout
  const w = new ByteWriter();
  w.u32(GGUF_MAGIC);
  w.u32(GGUF_VERSION);
  w.u64(tensors.length);
  w.u64(kv.length);
  for (const [key, value] of kv) {
    w.string(key);
    writeKvValue(w, value);
  }
  let offset = 0;
  const offsets: number[] = [];
  for (const t of tensors) {
    w.string(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(0); // GGML_TYPE_F32
    w.u64(offset);
    offsets.push(offset);
    offset += Math.ceil(t.data.byteLength / ALIGNMENT) * ALIGNMENT;
  }
  w.padTo(ALIGNMENT);
  const dataStart = w.length;
  for (let i = 0; i < tensors.length; i++) {
    const t = tensors[i]!;
    if (w.length - dataStart !== offsets[i]) throw new Error('tiny-gguf: tensor offset mismatch');
    const bytes = Buffer.alloc(t.data.length * 4);
    for (let j = 0; j < t.data.length; j++) bytes.writeFloatLE(t.data[j]!, j * 4);
    w.push(bytes);
    w.padTo(ALIGNMENT);
  }
  return w.toBuffer();
}

/** Write the model to `path` (creating parent directories) and return its sha256 and size. */
export async function writeTinyGguf(path: string, options: TinyGgufOptions = {}): Promise<TinyGgufFile> {
  const buffer = buildTinyGguf(options);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, buffer);
  return { path, sha256: createHash('sha256').update(buffer).digest('hex'), size: buffer.length };
}
