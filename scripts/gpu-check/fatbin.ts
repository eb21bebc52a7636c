/**
 * Makes node-llama-cpp 3.21.1's prebuilt CUDA backend (libggml-cuda.so of @node-llama-cpp/linux-x64-cuda)
 * usable on the lent Hopper GPUs (H100/H200, sm_90) with their CUDA 13.0 driver (580.x).
 *
 * The library holds machine code for sm_86, sm_89, sm_120 and sm_121 only, and PTX for compute_75,
 * compute_80 and compute_90: on sm_90 the driver must JIT-compile the compute_90 PTX. That PTX says
 * `.version 9.1` (written by CUDA 13.1), and a 580 driver JIT-compiles PTX up to ISA 9.0 (CUDA 13.0):
 * the first kernel launch would fail with "the provided PTX was compiled with an unsupported
 * toolchain". The PTX uses nothing of 9.1 (CUDA 13.0's ptxas compiles the changed text for sm_90:
 * see README.md), so each compute_90 PTX entry is rewritten to say `.version 9.0`.
 *
 * In a fatbin (`.nv_fatbin`: one per compiled .cu file, each a 16-byte header and entries of a
 * header and a zstd-compressed payload) a PTX entry's header repeats the ISA version (bytes 24-27:
 * minor, major as two u16) and is changed too. The entry cannot grow in place (this zstd compresses a
 * little worse than nvcc's), so each fatbin is rewritten within its own size: the changed
 * compute_90 entry first, then the machine-code entries unchanged, leaving out the compute_75
 * and compute_80 PTX (which a Hopper GPU never uses and this driver could not JIT either). The
 * slack left goes to the last entry's padding. Nothing outside the fatbins changes, so the copy
 * still runs on sm_86/89/120/121 GPUs; it only loses PTX for GPUs older or other than those.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const FATBIN_MAGIC = 0xba55ed50;
const ZSTD_MAGIC = 0xfd2fb528;
/** Entry kinds. */
const PTX = 1;
const ELF = 2;

export type FatbinEntry = {
  /** Offset of the entry's header in its fatbin. */
  offset: number;
  kind: number;
  sm: number;
  /** A PTX entry's ISA version ("9.1"); an ELF entry's ELF version. */
  version: string;
  headerSize: number;
  /** Bytes from the end of the header to the next entry. */
  paddedSize: number;
  /** Bytes of payload (zstd frame or plain text/ELF). */
  payloadSize: number;
};

export type Fatbin = { offset: number; headerSize: number; fatSize: number; entries: FatbinEntry[] };

/** The file offset and size of the ELF64 section `name`. */
export function elfSection(file: Buffer, name: string): { offset: number; size: number } | undefined {
  if (file.readUInt32BE(0) !== 0x7f454c46 || file[4] !== 2) throw new Error('not an ELF64 file');
  const shoff = Number(file.readBigUInt64LE(0x28));
  const shentsize = file.readUInt16LE(0x3a);
  const shnum = file.readUInt16LE(0x3c);
  const shstrndx = file.readUInt16LE(0x3e);
  const header = (i: number) => shoff + i * shentsize;
  const strtab = Number(file.readBigUInt64LE(header(shstrndx) + 24));
  for (let i = 0; i < shnum; i++) {
    const h = header(i);
    const nameOffset = strtab + file.readUInt32LE(h);
    const end = file.indexOf(0, nameOffset);
    if (file.toString('latin1', nameOffset, end) === name) {
      return { offset: Number(file.readBigUInt64LE(h + 24)), size: Number(file.readBigUInt64LE(h + 32)) };
    }
  }
  return undefined;
}

/** The fatbins of a `.nv_fatbin` section (each starts 8-byte aligned). */
export function readFatbins(section: Buffer): Fatbin[] {
  const fatbins: Fatbin[] = [];
  for (let p = 0; p + 16 <= section.length;) {
    if (section.readUInt32LE(p) !== FATBIN_MAGIC) {
      p += 8;
      continue;
    }
    const headerSize = section.readUInt16LE(p + 6);
    const fatSize = Number(section.readBigUInt64LE(p + 8));
    const end = p + headerSize + fatSize;
    const entries: FatbinEntry[] = [];
    for (let q = p + headerSize; q < end;) {
      const entry = {
        offset: q - p,
        kind: section.readUInt16LE(q),
        headerSize: section.readUInt32LE(q + 4),
        paddedSize: section.readUInt32LE(q + 8),
        payloadSize: section.readUInt32LE(q + 16),
        sm: section.readUInt32LE(q + 28),
        version: `${section.readUInt16LE(q + 26)}.${section.readUInt16LE(q + 24)}`,
      };
      if (entry.headerSize < 32 || entry.payloadSize > entry.paddedSize) throw new Error(`malformed fatbin entry at ${q}`);
      entries.push(entry);
      q += entry.headerSize + entry.paddedSize;
      if (q > end) throw new Error(`fatbin entry at ${entry.offset} runs past its fatbin`);
    }
    fatbins.push({ offset: p, headerSize, fatSize, entries });
    p = Math.ceil(end / 8) * 8;
  }
  return fatbins;
}

export type Codec = { compress(text: Buffer): Buffer; decompress(frame: Buffer): Buffer };

export type PatchReport = { fatbins: number; patched: number; alreadyOk: number; droppedPtx: number };

function payloadOf(fatbin: Buffer, e: FatbinEntry): Buffer {
  return fatbin.subarray(e.offset + e.headerSize, e.offset + e.headerSize + e.payloadSize);
}

/** The entry's text: zstd frames decompressed, plain payloads as they are. */
export function entryText(fatbin: Buffer, e: FatbinEntry, codec: Codec): Buffer {
  const payload = payloadOf(fatbin, e);
  return payload.length >= 4 && payload.readUInt32LE(0) === ZSTD_MAGIC ? codec.decompress(payload) : payload;
}

/**
 * Rewrites, in a copy of `lib`, every fatbin whose compute_`arch` PTX says `.version from` to say
 * `.version to` (see the file's comment). Throws when a rewritten fatbin would not fit its size.
 */
export function patchPtxVersion(
  lib: Buffer,
  codec: Codec,
  options: { arch?: number; from?: string; to?: string } = {},
): { patched: Buffer; report: PatchReport } {
  const arch = options.arch ?? 90;
  const fromVersion = options.from ?? '9.1';
  const toVersion = options.to ?? '9.0';
  const from = Buffer.from(`\n.version ${fromVersion}\n`);
  const to = Buffer.from(`\n.version ${toVersion}\n`);
  if (from.length !== to.length) throw new Error('the versions must have the same length');
  const [toMajor, toMinor] = toVersion.split('.').map(Number) as [number, number];
  const out = Buffer.from(lib);
  const section = elfSection(out, '.nv_fatbin');
  if (!section) throw new Error('no .nv_fatbin section');
  const view = out.subarray(section.offset, section.offset + section.size);
  const report: PatchReport = { fatbins: 0, patched: 0, alreadyOk: 0, droppedPtx: 0 };
  for (const fb of readFatbins(view)) {
    report.fatbins++;
    const fatbin = view.subarray(fb.offset, fb.offset + fb.headerSize + fb.fatSize);
    const target = fb.entries.find((e) => e.kind === PTX && e.sm === arch);
    if (!target) continue;
    const text = entryText(fatbin, target, codec);
    const at = text.indexOf(from);
    if (at < 0 && target.version !== fromVersion) {
      report.alreadyOk++;
      continue;
    }
    if (at < 0 || target.version !== fromVersion)
      throw new Error(`fatbin at ${fb.offset}: the PTX says ${at < 0 ? 'another version' : fromVersion} but its header ${target.version}`);
    const changed = Buffer.from(text);
    to.copy(changed, at);
    const compressed = payloadOf(fatbin, target).readUInt32LE(0) === ZSTD_MAGIC;
    const payload = compressed ? codec.compress(changed) : changed;

    // The changed PTX first, then the machine code; the other PTX entries are left out.
    const kept = fb.entries.filter((e) => e.kind === ELF);
    const parts: Buffer[] = [];
    const targetHeader = Buffer.from(fatbin.subarray(target.offset, target.offset + target.headerSize));
    const padded = Math.ceil(payload.length / 8) * 8;
    targetHeader.writeUInt32LE(padded, 8);
    targetHeader.writeUInt32LE(payload.length, 16);
    targetHeader.writeUInt16LE(toMinor, 24);
    targetHeader.writeUInt16LE(toMajor, 26);
    parts.push(targetHeader, payload, Buffer.alloc(padded - payload.length));
    const lastHeader =
      kept.length > 0 ? Buffer.from(fatbin.subarray(kept.at(-1)!.offset, kept.at(-1)!.offset + kept.at(-1)!.headerSize)) : targetHeader;
    for (const e of kept) {
      const header = e === kept.at(-1) ? lastHeader : fatbin.subarray(e.offset, e.offset + e.headerSize);
      parts.push(header, fatbin.subarray(e.offset + e.headerSize, e.offset + e.headerSize + e.paddedSize));
    }
    const used = parts.reduce((n, b) => n + b.length, 0);
    const slack = fb.fatSize - used;
    if (slack < 0) throw new Error(`fatbin at ${fb.offset}: the changed PTX does not fit (${-slack} bytes over)`);
    // The slack pads the last entry (a longer padding than its payload needs, as nvcc's own entries have).
    lastHeader.writeUInt32LE(lastHeader.readUInt32LE(8) + slack, 8);
    parts.push(Buffer.alloc(slack));
    Buffer.concat(parts).copy(fatbin, fb.headerSize);
    report.patched++;
    report.droppedPtx += fb.entries.filter((e) => e.kind === PTX && e !== target).length;
  }
  return { patched: out, report };
}

/**
 * Checks a patched library against its original: outside `.nv_fatbin` byte for byte; in each
 * fatbin, the same machine-code entries, and the compute_`arch` PTX equal to the original's but
 * for the version line. Answers the problems found (none: an empty list).
 */
export function verifyPatch(
  original: Buffer,
  patched: Buffer,
  codec: Codec,
  options: { arch?: number; from?: string; to?: string } = {},
): string[] {
  const arch = options.arch ?? 90;
  const problems: string[] = [];
  if (original.length !== patched.length) return ['the sizes differ'];
  const section = elfSection(original, '.nv_fatbin')!;
  const end = section.offset + section.size;
  if (
    !original.subarray(0, section.offset).equals(patched.subarray(0, section.offset)) ||
    !original.subarray(end).equals(patched.subarray(end))
  )
    problems.push('bytes outside .nv_fatbin differ');
  const before = readFatbins(original.subarray(section.offset, end));
  const after = readFatbins(patched.subarray(section.offset, end));
  if (before.length !== after.length) return [...problems, `${before.length} fatbins before, ${after.length} after`];
  const from = `\n.version ${options.from ?? '9.1'}\n`;
  const to = `\n.version ${options.to ?? '9.0'}\n`;
  before.forEach((b, i) => {
    const a = after[i]!;
    if (a.offset !== b.offset || a.fatSize !== b.fatSize) problems.push(`fatbin ${i}: moved or resized`);
    const fbBefore = original.subarray(section.offset + b.offset, section.offset + b.offset + b.headerSize + b.fatSize);
    const fbAfter = patched.subarray(section.offset + a.offset, section.offset + a.offset + a.headerSize + a.fatSize);
    const elf = (fb: Buffer, list: FatbinEntry[]) =>
      list.filter((e) => e.kind === ELF).map((e) => `${e.sm}:${payloadOf(fb, e).toString('base64')}`);
    if (elf(fbBefore, b.entries).join() !== elf(fbAfter, a.entries).join()) problems.push(`fatbin ${i}: machine code differs`);
    const ptxBefore = b.entries.find((e) => e.kind === PTX && e.sm === arch);
    const ptxAfter = a.entries.find((e) => e.kind === PTX && e.sm === arch);
    if (!ptxBefore) return;
    if (!ptxAfter) return void problems.push(`fatbin ${i}: compute_${arch} PTX missing`);
    if (ptxAfter.version !== (options.to ?? '9.0')) problems.push(`fatbin ${i}: the PTX entry's header says ${ptxAfter.version}`);
    const expected = entryText(fbBefore, ptxBefore, codec).toString('latin1').replace(from, to);
    if (entryText(fbAfter, ptxAfter, codec).toString('latin1') !== expected)
      problems.push(`fatbin ${i}: compute_${arch} PTX differs beyond its version`);
  });
  return problems;
}

/** zstd through its command (fatbin payloads are zstd frames; Node.js 20 has no zstd). */
export function zstdCodec(dir: string): Codec {
  const scratch = path.join(dir, 'zstd-input');
  return {
    decompress: (frame) => execFileSync('zstd', ['-d', '-q', '-c'], { input: frame, maxBuffer: 1 << 30 }),
    compress: (text) => {
      // From a file, so that the frame states its content size, as nvcc's do.
      writeFileSync(scratch, text);
      return execFileSync('zstd', ['-12', '-q', '--no-check', '-c', scratch], { maxBuffer: 1 << 30 });
    },
  };
}

/**
 * `npx tsx scripts/gpu-check/fatbin.ts LIB`: patches LIB (a libggml-cuda.so) in place, keeping
 * LIB.orig, for a Hopper GPU whose driver is CUDA 13.0's (nvidia-smi says "CUDA Version: 13.0").
 */
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const lib = process.argv[2];
  if (!lib) {
    console.error(
      'usage: npx tsx scripts/gpu-check/fatbin.ts node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/libggml-cuda.so',
    );
    process.exit(2);
  }
  const scratch = mkdtempSync(path.join(tmpdir(), 'fatbin-'));
  try {
    const codec = zstdCodec(scratch);
    const original = readFileSync(existsSync(`${lib}.orig`) ? `${lib}.orig` : lib);
    const { patched, report } = patchPtxVersion(original, codec);
    const problems = verifyPatch(original, patched, codec);
    if (problems.length > 0) throw new Error(problems.slice(0, 5).join('; '));
    if (!existsSync(`${lib}.orig`)) copyFileSync(lib, `${lib}.orig`);
    writeFileSync(lib, patched);
    console.log(`${lib}: ${report.patched} of ${report.fatbins} fatbins now carry compute_90 PTX 9.0 (the original kept as ${lib}.orig)`);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
