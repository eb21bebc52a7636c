/**
 * A llama-architecture GGUF of random weights, large enough for a GPU to matter (default: the shape
 * of TinyLlama-1.1B, Q8_0, about 1.2 GB), written on the machine that runs it: real weights cannot
 * be downloaded on the lent GPU machines, and 1 GB does not fit one 64 MiB transfer.
 *
 * It reuses the test fixture's GGUF (test/support/tiny-gguf.ts: byte-level BPE tokenizer, special
 * tokens, ChatML template) for everything but the tensors: that file's writer builds F32 weights
 * in memory with one PRNG call per weight, 4+ GB and minutes for a 1 B model, over Node's Buffer
 * limit. Here its metadata is read back, the shape keys are replaced, the vocabulary is padded with
 * plain tokens to a realistic size (so the output layer costs what a real model's does), and the
 * tensors are streamed to the file as Q8_0 or F16 from one repeated pseudo-random pattern
 * (throughput does not depend on the values; the file is written at disk speed). As in the fixture,
 * the output rows of the special tokens are zero, so a greedy or sampled answer practically never
 * ends early on EOS: answers run to max_tokens.
 */
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { buildTinyGguf, mulberry32, TINY_SPECIAL_TOKENS } from '../../test/support/tiny-gguf.js';

export type ModelShape = {
  embedding: number;
  layers: number;
  heads: number;
  kvHeads: number;
  feedForward: number;
  /** Tokens in the vocabulary (the fixture's ~290, padded). */
  vocab: number;
  contextLength: number;
};

/** TinyLlama-1.1B's shape (1.1 B parameters): public llama.cpp figures exist for it. */
export const SHAPE_1B: ModelShape = {
  embedding: 2048,
  layers: 22,
  heads: 32,
  kvHeads: 4,
  feedForward: 5632,
  vocab: 32000,
  contextLength: 4096,
};

/** Small enough to load and answer in a few seconds on two CPU cores (the check's quick mode). */
export const SHAPE_QUICK: ModelShape = {
  embedding: 256,
  layers: 4,
  heads: 4,
  kvHeads: 2,
  feedForward: 512,
  vocab: 4096,
  contextLength: 4096,
};

export type TensorType = 'q8_0' | 'f16';

export type GeneratedModel = {
  path: string;
  bytes: number;
  parameters: number;
  shape: ModelShape;
  type: TensorType;
  seconds: number;
};

// ----------------------------------------------------------------------------------- GGUF format

const GGUF_MAGIC = 0x46554747;
const ALIGNMENT = 32;
const T = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
};
const SCALAR_BYTES: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const GGML = { F32: 0, F16: 1, Q8_0: 8 } as const;
/** llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7. */
const FILE_TYPE: Record<TensorType, number> = { f16: 1, q8_0: 7 };
/** Token types (llama.cpp): normal 1. */
const TOKEN_TYPE_NORMAL = 1;

type Kv = { key: string; type: number; raw: Buffer };

/** The key/value section of a GGUF, each value kept as its raw bytes (type included). */
function readKvs(file: Buffer): Kv[] {
  if (file.readUInt32LE(0) !== GGUF_MAGIC) throw new Error('not a GGUF file');
  const kvCount = Number(file.readBigUInt64LE(16));
  let at = 24;
  const readString = () => {
    const length = Number(file.readBigUInt64LE(at));
    const text = file.toString('utf8', at + 8, at + 8 + length);
    at += 8 + length;
    return text;
  };
  const skipValue = (type: number) => {
    if (type === T.STRING) return void readString();
    if (type === T.ARRAY) {
      const itemType = file.readUInt32LE(at);
      const count = Number(file.readBigUInt64LE(at + 4));
      at += 12;
      for (let i = 0; i < count; i++) skipValue(itemType);
      return;
    }
    const size = SCALAR_BYTES[type];
    if (size === undefined) throw new Error(`unknown GGUF value type ${type}`);
    at += size;
  };
  const kvs: Kv[] = [];
  for (let i = 0; i < kvCount; i++) {
    const key = readString();
    const type = file.readUInt32LE(at);
    const start = at;
    at += 4;
    skipValue(type);
    kvs.push({ key, type, raw: file.subarray(start, at) });
  }
  return kvs;
}

/** The strings or int32s of an array value read by readKvs. */
function arrayItems(kv: Kv): { itemType: number; items: (string | number)[] } {
  const raw = kv.raw;
  const itemType = raw.readUInt32LE(4);
  const count = Number(raw.readBigUInt64LE(8));
  const items: (string | number)[] = [];
  let at = 16;
  for (let i = 0; i < count; i++) {
    if (itemType === T.STRING) {
      const length = Number(raw.readBigUInt64LE(at));
      items.push(raw.toString('utf8', at + 8, at + 8 + length));
      at += 8 + length;
    } else if (itemType === T.INT32) {
      items.push(raw.readInt32LE(at));
      at += 4;
    } else throw new Error(`unexpected array item type ${itemType} in ${kv.key}`);
  }
  return { itemType, items };
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
}
function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
}
function ggufString(s: string): Buffer {
  const bytes = Buffer.from(s, 'utf8');
  return Buffer.concat([u64(bytes.length), bytes]);
}
const kvU32 = (key: string, value: number): Kv => ({ key, type: T.UINT32, raw: Buffer.concat([u32(T.UINT32), u32(value)]) });
const kvString = (key: string, value: string): Kv => ({ key, type: T.STRING, raw: Buffer.concat([u32(T.STRING), ggufString(value)]) });
function kvArray(key: string, itemType: number, items: (string | number)[]): Kv {
  const parts = [u32(T.ARRAY), u32(itemType), u64(items.length)];
  for (const item of items) {
    if (itemType === T.STRING) parts.push(ggufString(item as string));
    else {
      const b = Buffer.alloc(4);
      b.writeInt32LE(item as number);
      parts.push(b);
    }
  }
  return { key, type: T.ARRAY, raw: Buffer.concat(parts) };
}

// ----------------------------------------------------------------------------------- weights

/** IEEE half precision bits of a float of normal range (|x| in [6.1e-5, 65504]) or 0. */
function f16Bits(x: number): number {
  if (x === 0) return 0;
  const f32 = new Float32Array([x]);
  const bits = new Uint32Array(f32.buffer)[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = ((bits >>> 23) & 0xff) - 127 + 15;
  if (exponent <= 0) return sign;
  const mantissa = (bits >>> 13) & 0x3ff;
  return sign | (exponent << 10) | mantissa;
}

/** Bytes per row of `n` weights. */
function rowBytes(type: TensorType | 'f32', n: number): number {
  if (type === 'f32') return n * 4;
  if (type === 'f16') return n * 2;
  if (n % 32 !== 0) throw new Error(`Q8_0 rows must be a multiple of 32 weights (got ${n})`);
  return (n / 32) * 34;
}

/**
 * A pattern of pseudo-random weights of standard deviation about 1/sqrt(fanIn), `blocks` units
 * long (a unit: 32 weights, 34 bytes in Q8_0 or 64 in F16), repeated to fill a tensor.
 */
function pattern(type: TensorType, fanIn: number, seed: number, blocks = 7919): Buffer {
  const rand = mulberry32(seed);
  const std = 1 / Math.sqrt(fanIn);
  if (type === 'q8_0') {
    const out = Buffer.alloc(blocks * 34);
    // q uniform in [-127, 127] has standard deviation ~73.3: d scales it to std.
    const d = f16Bits(std / 73.3);
    for (let b = 0; b < blocks; b++) {
      out.writeUInt16LE(d, b * 34);
      for (let i = 0; i < 32; i++) out.writeInt8((rand() % 255) - 127, b * 34 + 2 + i);
    }
    return out;
  }
  const out = Buffer.alloc(blocks * 64);
  const amplitude = std * Math.sqrt(3);
  for (let i = 0; i < blocks * 32; i++) out.writeUInt16LE(f16Bits(((rand() / 4294967296) * 2 - 1) * amplitude), i * 2);
  return out;
}

type TensorSpec = {
  name: string;
  dims: number[];
  type: TensorType | 'f32';
  /** Weights: repeated from a pattern of this fan-in; norms: ones. */
  fanIn?: number;
  /** Rows (of dims[0] weights) written as zeros. */
  zeroRows?: ReadonlySet<number>;
};

// ----------------------------------------------------------------------------------- writer

/** Writes the model to `path`; the same options always give the same bytes. */
export async function writeRandomGguf(
  path: string,
  options: { shape?: ModelShape; type?: TensorType; seed?: number } = {},
): Promise<GeneratedModel> {
  const started = performance.now();
  const shape = options.shape ?? SHAPE_1B;
  const type = options.type ?? 'q8_0';
  const seed = options.seed ?? 1;
  const { embedding: nEmbd, layers, heads, kvHeads, feedForward: nFf, vocab } = shape;
  if (nEmbd % heads !== 0 || heads % kvHeads !== 0) throw new Error('embedding must divide into heads, heads into kvHeads');
  const headDim = nEmbd / heads;

  // The fixture's metadata: tokenizer, special tokens, chat template.
  const fixture = readKvs(buildTinyGguf({ dimensions: { embedding: 64, layers: 1, heads: 4, kvHeads: 2, feedForward: 128 } }));
  const byKey = new Map(fixture.map((kv) => [kv.key, kv]));
  const tokens = arrayItems(byKey.get('tokenizer.ggml.tokens')!).items as string[];
  const tokenTypes = arrayItems(byKey.get('tokenizer.ggml.token_type')!).items as number[];
  if (vocab < tokens.length) throw new Error(`vocab must be at least ${tokens.length}`);
  const specialIds = new Set(Object.values(TINY_SPECIAL_TOKENS).map((text) => tokens.indexOf(text)));
  // Plain tokens no merge produces: never the tokenizer's choice, but the model may answer with them.
  for (let i = tokens.length; i < vocab; i++) {
    tokens.push(`<pad${i}>`);
    tokenTypes.push(TOKEN_TYPE_NORMAL);
  }
  const overrides: Kv[] = [
    kvString('general.name', `random-${type}-${layers}x${nEmbd}`),
    kvU32('general.file_type', FILE_TYPE[type]),
    kvU32('llama.vocab_size', vocab),
    kvU32('llama.context_length', shape.contextLength),
    kvU32('llama.embedding_length', nEmbd),
    kvU32('llama.block_count', layers),
    kvU32('llama.feed_forward_length', nFf),
    kvU32('llama.rope.dimension_count', headDim),
    kvU32('llama.attention.head_count', heads),
    kvU32('llama.attention.head_count_kv', kvHeads),
    kvArray('tokenizer.ggml.tokens', T.STRING, tokens),
    kvArray('tokenizer.ggml.token_type', T.INT32, tokenTypes),
  ];
  const replaced = new Map(overrides.map((kv) => [kv.key, kv]));
  const kvs = fixture.map((kv) => replaced.get(kv.key) ?? kv);
  for (const kv of overrides) if (!byKey.has(kv.key)) kvs.push(kv);

  const tensors: TensorSpec[] = [{ name: 'token_embd.weight', dims: [nEmbd, vocab], type, fanIn: nEmbd }];
  for (let l = 0; l < layers; l++) {
    const p = `blk.${l}.`;
    tensors.push(
      { name: `${p}attn_norm.weight`, dims: [nEmbd], type: 'f32' },
      { name: `${p}attn_q.weight`, dims: [nEmbd, nEmbd], type, fanIn: nEmbd },
      { name: `${p}attn_k.weight`, dims: [nEmbd, headDim * kvHeads], type, fanIn: nEmbd },
      { name: `${p}attn_v.weight`, dims: [nEmbd, headDim * kvHeads], type, fanIn: nEmbd },
      { name: `${p}attn_output.weight`, dims: [nEmbd, nEmbd], type, fanIn: nEmbd },
      { name: `${p}ffn_norm.weight`, dims: [nEmbd], type: 'f32' },
      { name: `${p}ffn_gate.weight`, dims: [nEmbd, nFf], type, fanIn: nEmbd },
      { name: `${p}ffn_up.weight`, dims: [nEmbd, nFf], type, fanIn: nEmbd },
      { name: `${p}ffn_down.weight`, dims: [nFf, nEmbd], type, fanIn: nFf },
    );
  }
  tensors.push(
    { name: 'output_norm.weight', dims: [nEmbd], type: 'f32' },
    { name: 'output.weight', dims: [nEmbd, vocab], type, fanIn: nEmbd, zeroRows: specialIds },
  );

  // Header: magic, version, counts, key/values, tensor infos, padding.
  const header: Buffer[] = [u32(GGUF_MAGIC), u32(3), u64(tensors.length), u64(kvs.length)];
  for (const kv of kvs) header.push(ggufString(kv.key), kv.raw);
  let offset = 0;
  let parameters = 0;
  const sizes: number[] = [];
  for (const t of tensors) {
    const rows = t.dims.slice(1).reduce((a, b) => a * b, 1);
    const size = rowBytes(t.type, t.dims[0]!) * rows;
    sizes.push(size);
    parameters += t.dims.reduce((a, b) => a * b, 1);
    header.push(
      ggufString(t.name),
      u32(t.dims.length),
      ...t.dims.map(u64),
      u32(t.type === 'f32' ? GGML.F32 : t.type === 'f16' ? GGML.F16 : GGML.Q8_0),
      u64(offset),
    );
    offset += Math.ceil(size / ALIGNMENT) * ALIGNMENT;
  }
  let head = Buffer.concat(header);
  head = Buffer.concat([head, Buffer.alloc((ALIGNMENT - (head.length % ALIGNMENT)) % ALIGNMENT)]);

  await mkdir(dirname(path), { recursive: true });
  const out = createWriteStream(path);
  const write = (chunk: Buffer) =>
    out.write(chunk) ? Promise.resolve() : new Promise<void>((resolve) => out.once('drain', () => resolve()));
  let bytes = 0;
  const emit = async (chunk: Buffer) => {
    bytes += chunk.length;
    await write(chunk);
  };
  await emit(head);
  const patterns = new Map<number, Buffer>();
  const CHUNK = 4 << 20;
  for (let i = 0; i < tensors.length; i++) {
    const t = tensors[i]!;
    const size = sizes[i]!;
    if (t.type === 'f32') {
      const ones = Buffer.alloc(size);
      for (let j = 0; j < size; j += 4) ones.writeFloatLE(1, j);
      await emit(ones);
    } else {
      let source = patterns.get(t.fanIn!);
      if (!source) patterns.set(t.fanIn!, (source = pattern(type, t.fanIn!, seed + patterns.size)));
      // A pattern several MiB long, so that a chunk is one copy.
      const unit = Buffer.concat(Array.from({ length: Math.ceil(CHUNK / source.length) + 1 }, () => source));
      const row = rowBytes(t.type, t.dims[0]!);
      let written = 0;
      let phase = 0;
      while (written < size) {
        const length = Math.min(CHUNK, size - written);
        const chunk = Buffer.from(unit.subarray(phase, phase + length));
        if (t.zeroRows) {
          for (const r of t.zeroRows) {
            const start = r * row - written;
            const end = start + row;
            if (end > 0 && start < length) chunk.fill(0, Math.max(0, start), Math.min(length, end));
          }
        }
        await emit(chunk);
        written += length;
        phase = (phase + length) % source.length;
      }
    }
    const pad = (ALIGNMENT - (size % ALIGNMENT)) % ALIGNMENT;
    if (pad > 0) await emit(Buffer.alloc(pad));
  }
  await new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())));
  return { path, bytes, parameters, shape, type, seconds: (performance.now() - started) / 1000 };
}
