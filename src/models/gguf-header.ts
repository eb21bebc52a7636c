/**
 * Reads the metadata of a GGUF file (magic, version, key/value pairs) without
 * loading the model, to check an endpoint's settings against the model before
 * an engine starts. Values are read through a small sliding buffer, so a
 * multi-megabyte vocabulary array is skipped, not held.
 *
 * Why not node-llama-cpp's `readGgufFileInfo` (which the engine uses, src/engine/model-file.ts): as of 3.21.1 it
 * yields the same keys and values for a whole file, but (1) it does not notice a file that ends inside its metadata
 * (an interrupted download): reads past the end come back as zero bytes and it returns made-up keys, e.g.
 * `{ "voca\0\0\0\0\0\0": 0 }`, without an error, so the settings check would silently see no context length;
 * (2) it reads a GGUF version it does not know (say 9) as version 3 with only a console warning, where this check
 * must refuse it; (3) it reads every array (the tokenizer's vocabulary and merges) into memory: `ignoreKeys` drops
 * keys only after they were read. test/models/gguf-header.test.ts pins these cases.
 */
import { open, type FileHandle } from 'node:fs/promises';

export class GgufFormatError extends Error {}

type Scalar = number | bigint | boolean | string;

const SCALAR_SIZES: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const STRING = 8;
const ARRAY = 9;
/**
 * What a hostile file cannot make this reader hold or do (it runs in the gateway): more than 65,536
 * keys, a key longer than 1 KiB or an array nested deeper than 4 levels is refused (real files have
 * tens of short keys and nest arrays one level); a string value longer than 4 KiB (a chat template,
 * a license) is skipped, not kept: the checks read only numbers and short names (general.architecture).
 */
const LIMITS = { entries: 65_536, keyBytes: 1 << 10, keptStringBytes: 4 << 10, stringBytes: 64 << 20, arrayDepth: 4 } as const;

class Reader {
  private buffer = Buffer.alloc(0);
  private start = 0; // file offset of buffer[0]
  private pos = 0; // file offset of the next byte to read

  constructor(private readonly file: FileHandle) {}

  private async ensure(n: number): Promise<void> {
    const have = this.start + this.buffer.length - this.pos;
    if (have >= n) return;
    const size = Math.max(n, 1 << 20);
    const chunk = Buffer.alloc(size);
    const { bytesRead } = await this.file.read(chunk, 0, size, this.pos);
    if (bytesRead < n) throw new GgufFormatError('the file ends inside its metadata');
    this.buffer = chunk.subarray(0, bytesRead);
    this.start = this.pos;
  }

  async bytes(n: number): Promise<Buffer> {
    await this.ensure(n);
    const at = this.pos - this.start;
    this.pos += n;
    return this.buffer.subarray(at, at + n);
  }

  skip(n: number): void {
    this.pos += n;
  }

  async u32(): Promise<number> {
    return (await this.bytes(4)).readUInt32LE(0);
  }

  async u64(): Promise<number> {
    const value = (await this.bytes(8)).readBigUInt64LE(0);
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new GgufFormatError('a length in the metadata is implausible');
    return Number(value);
  }

  /** A string of at most `max` bytes; a longer one is refused (`max` = 0: skipped, and undefined). */
  async string(max: number): Promise<string | undefined> {
    const length = await this.u64();
    if (length > LIMITS.stringBytes || (max > 0 && length > max)) throw new GgufFormatError('a string in the metadata is implausibly long');
    if (max === 0 && length > LIMITS.keptStringBytes) {
      this.skip(length);
      return undefined;
    }
    return (await this.bytes(length)).toString('utf8');
  }

  async scalar(type: number): Promise<Scalar> {
    const b = await this.bytes(SCALAR_SIZES[type]!);
    switch (type) {
      case 0:
        return b.readUInt8(0);
      case 1:
        return b.readInt8(0);
      case 2:
        return b.readUInt16LE(0);
      case 3:
        return b.readInt16LE(0);
      case 4:
        return b.readUInt32LE(0);
      case 5:
        return b.readInt32LE(0);
      case 6:
        return b.readFloatLE(0);
      case 7:
        return b.readUInt8(0) !== 0;
      case 10:
        return b.readBigUInt64LE(0);
      case 11:
        return b.readBigInt64LE(0);
      default:
        return b.readDoubleLE(0);
    }
  }
}

export interface GgufHeader {
  version: number;
  /** Scalar and string values; arrays, and strings longer than 4 KiB, are skipped. */
  metadata: Map<string, Scalar>;
}

export async function readGgufHeader(path: string): Promise<GgufHeader> {
  const file = await open(path, 'r');
  try {
    const reader = new Reader(file);
    if ((await reader.bytes(4)).toString('latin1') !== 'GGUF') throw new GgufFormatError('the file is not in GGUF format');
    const version = await reader.u32();
    if (version < 2 || version > 3) throw new GgufFormatError(`GGUF version ${version} is not supported`);
    await reader.u64(); // tensor count
    const count = await reader.u64();
    if (count > LIMITS.entries) throw new GgufFormatError(`the metadata has implausibly many keys (${count})`);
    const metadata = new Map<string, Scalar>();
    for (let i = 0; i < count; i++) {
      const key = (await reader.string(LIMITS.keyBytes))!;
      const type = await reader.u32();
      if (type === STRING) {
        const value = await reader.string(0);
        if (value !== undefined) metadata.set(key, value);
      } else if (type in SCALAR_SIZES) metadata.set(key, await reader.scalar(type));
      else if (type === ARRAY) await skipArray(reader);
      else throw new GgufFormatError(`unknown metadata type ${type} for ${key}`);
    }
    return { version, metadata };
  } finally {
    await file.close();
  }
}

async function skipArray(reader: Reader, depth = 1): Promise<void> {
  if (depth > LIMITS.arrayDepth) throw new GgufFormatError(`an array in the metadata nests more than ${LIMITS.arrayDepth} levels deep`);
  const type = await reader.u32();
  const length = await reader.u64();
  if (type === STRING) {
    for (let i = 0; i < length; i++) reader.skip(await reader.u64());
  } else if (type === ARRAY) {
    for (let i = 0; i < length; i++) await skipArray(reader, depth + 1);
  } else if (type in SCALAR_SIZES) {
    reader.skip(SCALAR_SIZES[type]! * length);
  } else {
    throw new GgufFormatError(`unknown array element type ${type}`);
  }
}

/** The context length the model was trained with (`<architecture>.context_length`), when recorded. */
export function trainedContextLength(header: GgufHeader): number | undefined {
  const architecture = header.metadata.get('general.architecture');
  const value = typeof architecture === 'string' ? header.metadata.get(`${architecture}.context_length`) : undefined;
  return typeof value === 'number' ? value : typeof value === 'bigint' ? Number(value) : undefined;
}
