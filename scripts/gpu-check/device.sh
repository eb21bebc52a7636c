#!/usr/bin/env bash
# The GPU check on the GPU machine (see README.md beside this file). Each device call carries one
# call folder made by pack.ts (.gpu-check/cN) and runs, from the repository root:
#
#   bash scripts/gpu-check/device.sh receive cN     # calls 1..N-1: keep this call's parts in /tmp
#   bash scripts/gpu-check/device.sh run [FLAGS]    # call N: its parts, unpack, run, results to $OUT
#
# FLAGS go to run.mjs (e.g. --type f16, --modes gpu, --quick). Needs bash, coreutils, tar and xz or
# python3 (for lzma). What earlier calls left in /tmp survives only while the machine stays warm
# (about 30 s after a call): a missing part says so, and the calls must be made again from call 1.
#
# Environment: GPU_CHECK_PACK (default .gpu-check), GPU_CHECK_WORK (default /tmp/gpu-check),
# GPU_CHECK_NODE (a Node.js to use instead of the carried one: the CPU test here), OUT (results).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
pack=${GPU_CHECK_PACK:-$repo/.gpu-check}
work=${GPU_CHECK_WORK:-/tmp/gpu-check}
out=${OUT:-$work/out}
parts=$work/parts
app=$work/app
mkdir -p "$parts" "$out"

# Copies the parts of the call folders present here (the one this call carried) into $parts.
receive() {
  local found=0 dir
  for dir in "$pack"/c*/; do
    [ -d "$dir" ] || continue
    found=1
    cp -f "$dir"* "$parts"/
    echo "received $(basename "$dir"): $(cd "$dir" && ls | tr '\n' ' ')"
  done
  if [ "$found" = 0 ]; then
    echo "no call folder under $pack: carry one (.gpu-check/cN)" >&2
    exit 2
  fi
  echo "parts so far: $(cd "$parts" && ls | grep -c part) ($(du -sh "$parts" | cut -f1)); free in /tmp: $(df -h /tmp | awk 'NR==2 {print $4}')"
}

# Field of the manifest, through python3 (no jq there) or node (here).
manifest_lines() {
  local script='
import json, sys
m = json.load(open(sys.argv[1]))
for a in m["archives"]:
    print(a["name"], a["file"], a["sha256"], " ".join(a["parts"]))
'
  if command -v python3 >/dev/null; then
    python3 -c "$script" "$parts/manifest.txt"
  else
    node -e 'const m = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); for (const a of m.archives) console.log(a.name, a.file, a.sha256, a.parts.join(" "))' "$parts/manifest.txt"
  fi
}

# xz -d to stdout, or python3's lzma where xz is missing.
unxz_stdout() {
  if command -v xz >/dev/null; then
    xz -d -c -- "$1"
  else
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer, 1 << 20)' "$1"
  fi
}

assemble() {
  rm -rf "$app"
  mkdir -p "$app"
  local name file sha rest missing=0 part
  while read -r name file sha rest; do
    for part in $rest; do
      if [ ! -f "$parts/$part" ]; then
        echo "MISSING $part: the machine went cold between calls (or a call was skipped); make the calls again from call 1" >&2
        missing=1
      fi
    done
    [ "$missing" = 0 ] || continue
    (cd "$parts" && cat $rest) >"$work/$file"
    if [ "$(sha256sum "$work/$file" | cut -d' ' -f1)" != "$sha" ]; then  # a part from another packing
      echo "CORRUPT $file: its sha256 differs from the manifest's" >&2
      exit 3
    fi
    case "$name" in
      app) unxz_stdout "$work/$file" | tar -C "$app" -xf - ;;
      cuda | vulkan) mkdir -p "$app/node_modules/@node-llama-cpp" && unxz_stdout "$work/$file" | tar -C "$app/node_modules/@node-llama-cpp" -xf - ;;
      node) unxz_stdout "$work/$file" >"$work/node" && chmod +x "$work/node" ;;
    esac
    rm -f "$work/$file"
    echo "unpacked $file"
  done < <(manifest_lines)
  [ "$missing" = 0 ] || exit 3
}

# Folders holding the CUDA 13 runtime and cuBLAS that libggml-cuda.so needs (libcudart.so.13,
# libcublas.so.13, libcublasLt.so.13): the toolkit's, else the nvidia-* Python wheels of PyTorch.
cuda_library_path() {
  local dirs=() d lib
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib; do
    [ -d "$d" ] && dirs+=("$d")
  done
  # The driver's libcuda.so.1, where the loader's cache does not list it (a mounted driver folder).
  if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib64 /usr/lib/x86_64-linux-gnu; do
      [ -e "$d/libcuda.so.1" ] && dirs+=("$d")
    done
  fi
  if command -v python3 >/dev/null; then
    local site
    site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)
    if [ -n "$site" ] && [ -d "$site/nvidia" ]; then
      while IFS= read -r lib; do dirs+=("$(dirname "$lib")"); done < <(find "$site/nvidia" -name 'libcudart.so.13*' -o -name 'libcublas.so.13*' -o -name 'libcublasLt.so.13*' 2>/dev/null)
    fi
  fi
  printf '%s\n' "${dirs[@]}" | awk 'NF && !seen[$0]++' | paste -sd: -
}

run() {
  receive
  assemble
  local node=${GPU_CHECK_NODE:-$work/node}
  [ -x "$node" ] || { echo "no Node.js at $node: was node.xz carried?" >&2; exit 3; }
  local libs
  libs=$(cuda_library_path)
  export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The prebuilt kernels reach sm_90 as PTX, JIT-compiled at first use (minutes): lazily, into a
  # cache big enough to keep them all, which a rerun may carry back (.gpu-check/jit, see README.md).
  export CUDA_MODULE_LOADING=LAZY CUDA_CACHE_PATH=$work/nv-cache CUDA_CACHE_MAXSIZE=4294967296
  if [ -f "$pack/jit/jit-cache.tar.xz" ] && [ ! -d "$CUDA_CACHE_PATH" ]; then
    mkdir -p "$CUDA_CACHE_PATH" && unxz_stdout "$pack/jit/jit-cache.tar.xz" | tar -C "$CUDA_CACHE_PATH" -xf - && echo "JIT cache carried in: $(du -sh "$CUDA_CACHE_PATH" | cut -f1)"
  fi
  {
    echo "node: $("$node" --version)"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    if command -v nvidia-smi >/dev/null; then nvidia-smi 2>&1 | head -15; else echo "nvidia-smi: not found"; fi
    local cuda_lib=$app/node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/libggml-cuda.so
    if [ -f "$cuda_lib" ]; then
      echo "libggml-cuda.so needs:"
      ldd "$cuda_lib" | grep -E 'cuda|cublas|not found' || true
    else
      echo "no CUDA binaries carried (cuda.tar.xz): the engine can only use the CPU"
    fi
  } 2>&1 | tee "$out/setup.log"
  set +e
  "$node" "$app/run.mjs" --engine "$app/engine.mjs" --out "$out/gpu.json" --model-dir "$work" "$@" 2>&1 | tee "$out/run.log"
  local status=${PIPESTATUS[0]}
  set -e
  rm -f "$work"/gpu-check-*.gguf
  if [ -d "$CUDA_CACHE_PATH" ] && command -v xz >/dev/null; then
    tar -C "$CUDA_CACHE_PATH" -cf - . | xz -3 -T0 >"$work/jit-cache.tar.xz"
    if [ "$(stat -c %s "$work/jit-cache.tar.xz")" -le $((15 * 1024 * 1024)) ]; then
      mv "$work/jit-cache.tar.xz" "$out/" && echo "JIT cache: $out/jit-cache.tar.xz ($(du -sh "$CUDA_CACHE_PATH" | cut -f1) unpacked)"
    else
      echo "JIT cache over 15 MiB compressed: not returned"
    fi
  fi
  echo "run.mjs exited $status; results in $out/gpu.json"
  return "$status"
}

case "${1:-}" in
  receive) receive ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 receive cN | run [run.mjs flags]" >&2; exit 2 ;;
esac
