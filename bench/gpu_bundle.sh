#!/usr/bin/env bash
# Packs what bench/gpu_check.sh needs on a GPU machine that has the NVIDIA
# driver, the CUDA toolkit, cuBLAS and NCCL but nothing to build the project
# with (no LLVM/MLIR 22): the built tools and runtime libraries, every shared
# library they load that is neither glibc, libstdc++ nor CUDA's own, LLVM's
# FileCheck/not/count, the lit package, a lit site configuration that finds
# all of these relative to itself, and a compile cache warmed with the models
# gpu_check.sh runs (zb-run --compile-only; running them there then needs no
# C compiler).
#
#   bench/gpu_bundle.sh [OUT.tar.xz]   # default: .gpu-bundle.tar.xz (ignored)
#
# gpu_check.sh unpacks it when it finds it (or ZB_BUNDLE names it) and the
# machine cannot configure the build itself.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
LLVM_BIN="${LLVM_BIN:-/usr/lib/llvm-22/bin}"
OUT="${1:-$ROOT/.gpu-bundle.tar.xz}"
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
B="$STAGE/zb-bundle"

ninja -C "$BUILD_DIR" zb-opt zb-run zb-sched zbrt_cuda zb-gpu-gemm-bench \
  zb-gpu-optimizer-check >/dev/null
[[ -f "$BUILD_DIR/lib/libzbrt_cuda.so" ]] ||
  { echo "gpu_bundle: $BUILD_DIR has no libzbrt_cuda.so (no CUDA/NCCL at configure time)" >&2; exit 1; }

mkdir -p "$B/bin" "$B/lib" "$B/deps" "$B/python" "$B/test" "$B/cache"
cp "$BUILD_DIR"/bin/{zb-opt,zb-run,zb-sched,zb-gpu-gemm-bench,zb-gpu-optimizer-check} "$B/bin/"
cp "$BUILD_DIR"/lib/libzbrt.so "$BUILD_DIR"/lib/libzbrt_cuda.so "$B/lib/"
cp "$LLVM_BIN"/{FileCheck,not,count} "$B/bin/"

# Shared libraries: everything ldd resolves, but the C library, the C++
# runtime (the GPU machine's own is newer) and CUDA's libraries (the GPU
# machine's match its driver).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libnccl|libzbrt)'
for elf in "$B"/bin/* "$B"/lib/*.so; do
  ldd "$elf" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] || cp -L "$path" "$B/deps/$name"
done

# Two libraries LLVM loads but never calls in what the tools do are most of
# the bundle's size: Z3 (the SMT solver for clang's analyzer) and ICU's data
# (for libxml2's encoding conversions, which only llvm-mt's manifests use).
# Each becomes a small stub with the same soname that defines the symbols
# its users import: a stub function aborts, stub data is empty.
stub() {
  local soname=$1 kind=$2 user=$3 pattern=$4 src="$STAGE/stub.c"
  [[ -f "$B/deps/$soname" ]] || return 0
  {
    echo '#include <stdlib.h>'
    nm -D --undefined-only "$B/deps/$user" | awk -v p="$pattern" '$2 ~ p {print $2}' |
      sed 's/@.*//' | sort -u | while read -r sym; do
        if [[ $kind == function ]]; then
          echo "void $sym(void) { abort(); }"
        else
          echo "const char $sym[4096];"
        fi
      done
  } >"$src"
  cc -shared -fPIC -O1 -Wl,-soname,"$soname" -o "$B/deps/$soname" "$src"
}
stub libz3.so.4 function libLLVM.so.22.1 '^Z3_'
stub libicudata.so.72 data libicuuc.so.72 '^icudt'

# lit: the one LLVM_BIN/lit runs (as ctest does), else the Python package.
LIT_DIR="$(dirname "$LLVM_BIN")/utils/lit/lit"
[[ -d $LIT_DIR ]] ||
  LIT_DIR="$(python3 -c 'import lit, os; print(os.path.dirname(lit.__file__))')"
cp -r "$LIT_DIR" "$B/python/lit"
find "$B/python" -name __pycache__ -prune -exec rm -rf {} +

# The bundle sits beside the source tree it was made from: .../ROOT/<dir>.
cat >"$B/test/lit.site.cfg.py" <<'EOF'
# lit site configuration of a GPU bundle (bench/gpu_bundle.sh): paths are
# found relative to this file; ZB_SRC_ROOT names the source tree.
import os
import sys

obj_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
config.llvm_tools_dir = os.path.join(obj_root, "bin")
config.llvm_shlib_ext = ".so"
config.zb_obj_root = obj_root
config.zb_src_root = os.environ["ZB_SRC_ROOT"]
config.python_executable = sys.executable

import lit.llvm

lit.llvm.initialize(lit_config, config)
lit_config.load_config(config, os.path.join(config.zb_src_root, "test", "lit.cfg.py"))
EOF

# Warm the cache with the compilations gpu_check.sh and test/GPU/run need,
# for a CPU any x86-64 GPU host has (the bundle's target-cpu file tells
# gpu_check.sh which).
export ZB_CACHE_DIR="$B/cache"
export ZB_TARGET_CPU="${ZB_TARGET_CPU:-x86-64-v3}"
echo "$ZB_TARGET_CPU" >"$B/target-cpu"
# The bundle's own libraries (the stubs too) serve these runs.
warm() {
  LD_LIBRARY_PATH="$B/deps" "$B/bin/zb-run" --compile-only "$@" >/dev/null
}
warm "$ROOT/examples/mlp.mlir"
warm "$ROOT/examples/gpt.mlir"
warm "$ROOT/examples/mlp.mlir" --microbatches 4 --backend nccl
warm "$ROOT/examples/gpt.mlir" --microbatches 2 --backend nccl
warm "$ROOT/examples/gpt.mlir" --microbatches 4 --backend nccl
warm "$ROOT/examples/gpt.mlir" --microbatches 4 --backend nccl --optimizer adamw
# The optimizer check's updates, compiled here for the same CPU.
LD_LIBRARY_PATH="$B/deps" "$B/bin/zb-gpu-optimizer-check" \
  --compile-to "$B/optimizer-check"
ls "$B/cache"/*.so >/dev/null 2>&1 ||
  { echo "gpu_bundle: warming the compile cache produced nothing" >&2; exit 1; }

python3 - "$STAGE" "$OUT" <<'EOF'
import sys, tarfile
stage, out = sys.argv[1:]
with tarfile.open(out + ".part", "w:xz", preset=9) as tar:
    tar.add(stage + "/zb-bundle", arcname="zb-bundle")
import os
os.replace(out + ".part", out)
EOF
echo "gpu_bundle: $OUT ($(du -h "$OUT" | cut -f1)), $(ls "$B/cache" | wc -l) cached objects"
