/**
 * What the gateway's GGUF header reader must do beyond reading a whole file's metadata (which
 * test/runtime/runtime-parts.test.ts checks): refuse a file that ends inside its metadata and a version it does not
 * know. node-llama-cpp's readGgufFileInfo does neither (see src/models/gguf-header.ts), which is why it is not used.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { GgufFormatError, readGgufHeader, trainedContextLength } from '../../src/models/gguf-header.js';
import { buildTinyGguf } from '../support/tiny-gguf.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'gguf-header-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

test('reads the whole header; refuses a file cut inside its metadata, and an unknown version', async () => {
  const tiny = buildTinyGguf({ contextLength: 777 });
  const whole = path.join(dir, 'whole.gguf');
  await writeFile(whole, tiny);
  const header = await readGgufHeader(whole);
  expect(header.version).toBe(3);
  expect(header.metadata.get('general.architecture')).toBe('llama');
  expect(trainedContextLength(header)).toBe(777);

  const cut = path.join(dir, 'cut.gguf');
  await writeFile(cut, tiny.subarray(0, 200));
  await expect(readGgufHeader(cut)).rejects.toThrow(new GgufFormatError('the file ends inside its metadata'));

  const future = Buffer.from(tiny);
  future.writeUInt32LE(9, 4);
  const v9 = path.join(dir, 'v9.gguf');
  await writeFile(v9, future);
  await expect(readGgufHeader(v9)).rejects.toThrow(new GgufFormatError('GGUF version 9 is not supported'));
});

/** A GGUF file of metadata only (version 3, no tensors), from encoded key/value entries. */
function ggufOf(entries: Buffer[], count = entries.length): Buffer {
  const head = Buffer.alloc(24);
  head.write('GGUF', 0, 'latin1');
  head.writeUInt32LE(3, 4);
  head.writeBigUInt64LE(0n, 8);
  head.writeBigUInt64LE(BigInt(count), 16);
  return Buffer.concat([head, ...entries]);
}
const u32 = (n: number) => Buffer.from(new Uint32Array([n]).buffer);
const u64 = (n: number) => Buffer.from(new BigUint64Array([BigInt(n)]).buffer);
const text = (s: string) => Buffer.concat([u64(Buffer.byteLength(s)), Buffer.from(s)]);
const stringEntry = (key: string, value: string) => Buffer.concat([text(key), u32(8), text(value)]);
const u32Entry = (key: string, value: number) => Buffer.concat([text(key), u32(4), u32(value)]);
/** An array of one array of one array … (`depth` levels), the innermost empty. */
const nestedArrayEntry = (key: string, depth: number) =>
  Buffer.concat([text(key), u32(9), ...Array.from({ length: depth - 1 }, () => Buffer.concat([u32(9), u64(1)])), u32(4), u64(0)]);

test('a hostile header cannot make the gateway hold or walk more than a real one needs', async () => {
  const read = async (name: string, bytes: Buffer) => {
    const file = path.join(dir, name);
    await writeFile(file, bytes);
    return readGgufHeader(file);
  };
  // A long string (a chat template, a license) is skipped, not kept; what follows it is read.
  const header = await read(
    'long-string.gguf',
    ggufOf([
      stringEntry('general.architecture', 'llama'),
      stringEntry('tokenizer.chat_template', 'x'.repeat(1 << 20)),
      u32Entry('llama.context_length', 777),
    ]),
  );
  expect(header.metadata.has('tokenizer.chat_template')).toBe(false);
  expect(trainedContextLength(header)).toBe(777);
  // Arrays nest one level in real files: four are read past, five refused (millions of levels once exhausted the heap).
  await expect(read('nested-4.gguf', ggufOf([nestedArrayEntry('a', 4), u32Entry('b', 1)]))).resolves.toMatchObject({ version: 3 });
  await expect(read('nested-5.gguf', ggufOf([nestedArrayEntry('a', 5)]))).rejects.toThrow(/nests more than 4 levels/);
  // Keys: tens of short ones in real files.
  await expect(read('many-keys.gguf', ggufOf([u32Entry('a', 1)], 1_000_000))).rejects.toThrow(/implausibly many keys/);
  await expect(read('long-key.gguf', ggufOf([u32Entry('k'.repeat(2000), 1)]))).rejects.toThrow(/implausibly long/);
});
