#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU (CI has none): builds what
# the GPU path needs, runs the GPU lit tests (the e2e ones must run, not be
# UNSUPPORTED), trains examples/gpt.mlir a few steps on the GPU and on the
# CPU and compares the losses, and prints the gemm path's TFLOP/s and the
# GPT step time next to PyTorch eager (when PyTorch is importable).
#
#   bench/gpu_check.sh            # BUILD_DIR=build-gpu, JOBS=$(nproc)
#
# Budget: 8 minutes in all; every step has its own timeout. Exits non-zero
# on the first failure, saying which step failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-gpu}"
JOBS="${JOBS:-$(nproc)}"
STEPS="${STEPS:-5}"
MICROBATCHES="${MICROBATCHES:-4}"
LLVM_BIN="${LLVM_BIN:-/usr/lib/llvm-22/bin}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
START=$SECONDS

step() { printf '\n== [%3ds] %s\n' "$((SECONDS - START))" "$*"; }
fail() { printf 'gpu_check: FAIL: %s\n' "$*" >&2; exit 1; }
# run SECONDS CMD...: the command under a timeout, failing loudly.
run() {
  local limit=$1
  shift
  timeout --signal=TERM --kill-after=10 "$limit" "$@" ||
    fail "'$*' exited with $? (124: timed out after ${limit}s)"
}

step "GPU"
command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: no NVIDIA driver"
run 30 nvidia-smi -L
export ZB_CACHE_DIR="$WORK/cache"
export OPENBLAS_NUM_THREADS=1

step "build ($BUILD_DIR, $JOBS jobs)"
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  run 120 cmake -G Ninja -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
fi
grep -q "zbrt_cuda" "$BUILD_DIR/build.ninja" ||
  fail "CMake did not configure the GPU runtime (see 'GPU runtime:' in its output)"
run 300 ninja -C "$BUILD_DIR" -j "$JOBS" zb-opt zb-run zbrt_cuda \
  zb-gpu-gemm-bench FileCheck count not 2>&1 | tail -n 3 ||
  fail "build"
ZB_RUN="$BUILD_DIR/bin/zb-run"

step "lit: test/GPU"
LIT_OUT="$WORK/lit.txt"
run 180 "$LLVM_BIN/lit" -v "$BUILD_DIR/test" --filter 'GPU/' | tee "$LIT_OUT"
if grep -q '^UNSUPPORTED:' "$LIT_OUT"; then
  fail "GPU tests were UNSUPPORTED: lit did not detect the GPU (nvidia-smi -L, libzbrt_cuda.so)"
fi

step "GPT: $STEPS training steps, GPU (--backend nccl) against CPU"
GPT="$ROOT/examples/gpt.mlir"
COMMON=(--steps "$STEPS" --microbatches "$MICROBATCHES" --seed 7 --lr 0.01)
run 120 "$ZB_RUN" "$GPT" "${COMMON[@]}" --metrics "$WORK/cpu.json"
run 120 "$ZB_RUN" "$GPT" "${COMMON[@]}" --backend nccl --metrics "$WORK/gpu.json"
python3 - "$WORK/cpu.json" "$WORK/gpu.json" <<'EOF'
import json, sys
cpu = json.load(open(sys.argv[1]))["loss"]
gpu = json.load(open(sys.argv[2]))["loss"]
print(f"{'step':>4} {'cpu loss':>12} {'gpu loss':>12} {'rel diff':>10}")
worst = 0.0
for i, (c, g) in enumerate(zip(cpu, gpu)):
    rel = abs(c - g) / max(abs(c), 1e-12)
    worst = max(worst, rel)
    print(f"{i:>4} {c:>12.6f} {g:>12.6f} {rel:>10.2e}")
if len(cpu) != len(gpu) or not cpu:
    sys.exit(f"gpu_check: FAIL: {len(cpu)} CPU losses, {len(gpu)} GPU losses")
if worst > 1e-4:
    sys.exit(f"gpu_check: FAIL: losses differ by {worst:.2e} relative (> 1e-4)")
print(f"losses agree: worst relative difference {worst:.2e} (<= 1e-4)")
EOF

GPUS=$(nvidia-smi -L | grep -c '^GPU' || true)
if [[ "$GPUS" -ge 2 ]]; then
  step "GPT: 2 pipeline ranks on 2 GPUs (zb-h1) against CPU"
  run 180 "$ZB_RUN" "$GPT" "${COMMON[@]}" --np 2 --schedule zb-h1 \
    --backend nccl --metrics "$WORK/gpu2.json"
  python3 - "$WORK/cpu.json" "$WORK/gpu2.json" <<'EOF'
import json, sys
cpu = json.load(open(sys.argv[1]))["loss"]
gpu = json.load(open(sys.argv[2]))["loss"]
worst = max(abs(c - g) / max(abs(c), 1e-12) for c, g in zip(cpu, gpu))
if len(cpu) != len(gpu) or worst > 1e-4:
    sys.exit(f"gpu_check: FAIL: P=2 losses differ by {worst:.2e}")
print(f"P=2 losses agree: worst relative difference {worst:.2e}")
EOF
fi

step "gemm path (zbrt_gpu_sgemm_batched): correctness and TFLOP/s"
run 120 "$BUILD_DIR/bin/zb-gpu-gemm-bench"

step "GPT step time"
# The model is compiled and cached by the runs above; the difference of two
# runs removes start-up, parameter upload and the first step's warm-up.
time_run() {
  local t0 t1
  t0=$(date +%s.%N)
  run 120 "$ZB_RUN" "$GPT" --steps "$1" --microbatches "$MICROBATCHES" \
    --backend nccl >/dev/null
  t1=$(date +%s.%N)
  python3 -c "print($t1 - $t0)"
}
SHORT=$(time_run 2)
LONG=$(time_run 22)
ZB_MS=$(python3 -c "print(f'{($LONG - $SHORT) / 20 * 1e3:.3f}')")
printf '%-28s %10s ms\n' "zb (compiled, GPU)" "$ZB_MS"
if TORCH=$(timeout 120 python3 "$ROOT/bench/gpt_torch_eager.py" \
             --microbatches "$MICROBATCHES" 2>"$WORK/torch.err"); then
  TORCH_MS=$(echo "$TORCH" | awk '/torch-eager-step-ms/ {print $2}')
  printf '%-28s %10s ms\n' "PyTorch eager (GPU)" "$TORCH_MS"
  python3 -c "print(f'ratio zb / torch: {$ZB_MS / $TORCH_MS:.2f}')"
else
  echo "PyTorch eager: skipped ($(head -n 1 "$WORK/torch.err"))"
fi

step "done: the GPU check passed in $((SECONDS - START)) s"
