/**
 * The GPU check's rewrite of the prebuilt CUDA backend's fatbins (scripts/gpu-check/fatbin.ts), on a
 * synthetic ELF64 library laid out as libggml-cuda.so is: each fatbin's compute_90 PTX goes from
 * ISA 9.1 to 9.0 (text and entry header), grows a little when re-compressed, and the fatbin is
 * rewritten within its size without the other PTX entries; nothing else moves.
 */
import { expect, test } from 'vitest';
import { elfSection, patchPtxVersion, readFatbins, verifyPatch, type Codec } from '../../scripts/gpu-check/fatbin.js';

const ZSTD_MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);

/** Stands in for zstd: a "frame" is the magic, the text, and `growth` bytes (re-compression is worse). */
function fakeCodec(growth: number): Codec {
  return {
    compress: (text) => Buffer.concat([ZSTD_MAGIC, text, Buffer.alloc(growth, 0xee)]),
    decompress: (frame) => {
      const body = frame.subarray(4);
      const end = body.indexOf(0xee);
      return end < 0 ? Buffer.from(body) : Buffer.from(body.subarray(0, end));
    },
  };
}

type EntrySpec = { kind: 1 | 2; sm: number; payload: Buffer; version?: [number, number]; padding?: number };

function entry(e: EntrySpec): Buffer {
  const headerSize = e.kind === 1 ? 0x50 : 0x40;
  const padded = e.payload.length + (e.padding ?? 0);
  const header = Buffer.alloc(headerSize);
  header.writeUInt16LE(e.kind, 0);
  header.writeUInt16LE(0x101, 2);
  header.writeUInt32LE(headerSize, 4);
  header.writeUInt32LE(padded, 8);
  header.writeUInt32LE(e.payload.length, 16);
  const [major, minor] = e.version ?? (e.kind === 1 ? [9, 1] : [1, 8]);
  header.writeUInt16LE(minor, 24);
  header.writeUInt16LE(major, 26);
  header.writeUInt32LE(e.sm, 28);
  header.writeUInt32LE(0x8011, 40);
  return Buffer.concat([header, e.payload, Buffer.alloc(padded - e.payload.length)]);
}

function fatbin(entries: EntrySpec[]): Buffer {
  const body = Buffer.concat(entries.map(entry));
  const header = Buffer.alloc(16);
  header.writeUInt32LE(0xba55ed50, 0);
  header.writeUInt16LE(1, 4);
  header.writeUInt16LE(16, 6);
  header.writeBigUInt64LE(BigInt(body.length), 8);
  const fb = Buffer.concat([header, body]);
  return Buffer.concat([fb, Buffer.alloc((8 - (fb.length % 8)) % 8)]);
}

/** An ELF64 file: header, some code, the .nv_fatbin section, more bytes, .shstrtab, section headers. */
function elf(section: Buffer): Buffer {
  const code = Buffer.alloc(64, 0x90);
  const trailer = Buffer.from('after the fatbins');
  const names = Buffer.from('\0.nv_fatbin\0.shstrtab\0');
  const sectionOffset = 64 + code.length;
  const namesOffset = sectionOffset + section.length + trailer.length;
  const shoff = namesOffset + names.length;
  const header = Buffer.alloc(64);
  header.writeUInt32BE(0x7f454c46, 0);
  header[4] = 2;
  header[5] = 1;
  header.writeBigUInt64LE(BigInt(shoff), 0x28);
  header.writeUInt16LE(64, 0x3a);
  header.writeUInt16LE(3, 0x3c);
  header.writeUInt16LE(2, 0x3e);
  const sh = (name: number, offset: number, size: number) => {
    const h = Buffer.alloc(64);
    h.writeUInt32LE(name, 0);
    h.writeBigUInt64LE(BigInt(offset), 24);
    h.writeBigUInt64LE(BigInt(size), 32);
    return h;
  };
  return Buffer.concat([
    header,
    code,
    section,
    trailer,
    names,
    sh(0, 0, 0),
    sh(1, sectionOffset, section.length),
    sh(11, namesOffset, names.length),
  ]);
}

const ptx = (sm: number, version = '9.1') => Buffer.from(`//\n.version ${version}\n.target sm_${sm}\n.entry k_${sm}() { ret; }\n\0`);
const zstd = (text: Buffer) => Buffer.concat([ZSTD_MAGIC, text]);

function library() {
  const one = fatbin([
    { kind: 1, sm: 75, payload: zstd(ptx(75)) },
    { kind: 1, sm: 80, payload: zstd(ptx(80)), padding: 4 },
    { kind: 2, sm: 86, payload: Buffer.from('machine code for sm_86'), padding: 2 },
    { kind: 1, sm: 90, payload: zstd(ptx(90)) },
    { kind: 2, sm: 120, payload: Buffer.from('machine code for sm_120') },
  ]);
  const two = fatbin([
    { kind: 1, sm: 80, payload: zstd(ptx(80)) },
    { kind: 1, sm: 90, payload: zstd(ptx(90)) },
    { kind: 2, sm: 89, payload: Buffer.from('sm_89 code') },
  ]);
  return elf(Buffer.concat([one, two]));
}

test('every compute_90 PTX says 9.0 afterwards, in its text and header; machine code and the rest of the file are untouched', () => {
  const lib = library();
  const codec = fakeCodec(24);
  const { patched, report } = patchPtxVersion(lib, codec);
  expect(report).toEqual({ fatbins: 2, patched: 2, alreadyOk: 0, droppedPtx: 3 });
  expect(patched.length).toBe(lib.length);
  expect(verifyPatch(lib, patched, codec)).toEqual([]);

  const section = elfSection(patched, '.nv_fatbin')!;
  const before = readFatbins(lib.subarray(section.offset, section.offset + section.size));
  const after = readFatbins(patched.subarray(section.offset, section.offset + section.size));
  expect(after.map((f) => [f.offset, f.fatSize])).toEqual(before.map((f) => [f.offset, f.fatSize]));
  expect(after[0]!.entries.map((e) => `${e.kind === 1 ? 'PTX' : 'ELF'} ${e.sm} ${e.version}`)).toEqual([
    'PTX 90 9.0',
    'ELF 86 1.8',
    'ELF 120 1.8',
  ]);
  expect(after[1]!.entries.map((e) => `${e.kind === 1 ? 'PTX' : 'ELF'} ${e.sm}`)).toEqual(['PTX 90', 'ELF 89']);
  // The PTX text itself.
  const fb = patched.subarray(section.offset + after[0]!.offset);
  const e = after[0]!.entries[0]!;
  const text = codec.decompress(fb.subarray(e.offset + e.headerSize, e.offset + e.headerSize + e.payloadSize)).toString();
  expect(text).toContain('\n.version 9.0\n.target sm_90\n');
});

test('a patched library is left as it is; one whose PTX no longer fits is refused', () => {
  const codec = fakeCodec(24);
  const { patched } = patchPtxVersion(library(), codec);
  expect(patchPtxVersion(patched, codec).report).toMatchObject({ patched: 0, alreadyOk: 2 });
  // Re-compression worse by more than the dropped PTX entries free.
  expect(() => patchPtxVersion(library(), fakeCodec(4096))).toThrow(/does not fit/);
});

test('the check finds a change beyond the version line', () => {
  const lib = library();
  const codec = fakeCodec(8);
  const { patched } = patchPtxVersion(lib, codec);
  const section = elfSection(patched, '.nv_fatbin')!;
  const tampered = Buffer.from(patched);
  const at = tampered.indexOf('.target sm_90', section.offset);
  tampered.write('.target sm_91', at);
  expect(verifyPatch(lib, tampered, codec)).toEqual([expect.stringMatching(/differs beyond its version/)]);
});
