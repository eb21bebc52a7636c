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
