#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU (CI has none): builds what
# the GPU path needs (or unpacks a bundle made by bench/gpu_bundle.sh where
# the machine cannot build), runs the GPU lit tests (the e2e ones must run,
# not be UNSUPPORTED), trains the MLP, GPT and MoE examples a few steps on the GPU
# and on the CPU and compares the losses, prints the gemm path's TFLOP/s,
# trains a GPT of width 1024 on one GPU next to PyTorch eager and
# torch.compile, f32 and bf16 (bench/gpu_gpt_bench.py), and shows where its
# step's GPU time goes (ZB_GPU_PROFILE), checks the compiled
# optimizer update on the device against the host's
# (zb-gpu-optimizer-check), prints the gemm path's TFLOP/s and the example
# GPT's step time next to PyTorch eager; last, the GPU lit tests.
#
#   bench/gpu_check.sh     # BUILD_DIR=build-gpu, JOBS=$(nproc)
#   ZB_BUNDLE=.gpu-bundle.tar.xz bench/gpu_check.sh
#
# Budget: BUDGET seconds in all (default 450, so that a machine lent for 15
# minutes, its start included, has time left to rerun what failed); every
# step has its own timeout, cut to what is left of the budget, and a step
# that would start after it is reported as not run. The steps the issues'
# goals need come first. Every step runs even when an earlier one failed
# (a GPU machine is precious); the script ends with a summary and exits
# non-zero when any step failed or was not run. LOG_DIR, when set,
# receives every step's full output; PROFILE_DIR the launch times. CHECKS
# (a comma-separated list of examples, size, profile, optimizer, gemm,
# steptime, lit; default all) runs some of them: a rerun of what failed.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-gpu}"
JOBS="${JOBS:-$(nproc)}"
STEPS="${STEPS:-5}"
MICROBATCHES="${MICROBATCHES:-4}"
LLVM_BIN="${LLVM_BIN:-/usr/lib/llvm-22/bin}"
WORK="$(mktemp -d)"
LOG_DIR="${LOG_DIR:-$WORK/logs}"
mkdir -p "$LOG_DIR"
trap 'rm -rf "$WORK"' EXIT
START=$SECONDS
BUDGET="${BUDGET:-450}"
FAILED=()
# CHECKS: the parts to run (a rerun of what failed), comma-separated.
CHECKS="${CHECKS:-examples,size,profile,optimizer,gemm,steptime,lit}"
want() { [[ ",$CHECKS," == *",$1,"* ]]; }
export PYTHONUNBUFFERED=1

step() { printf '\n== [%3ds] %s\n' "$((SECONDS - START))" "$*"; }
failed() {
  printf 'gpu_check: FAIL: %s\n' "$*" >&2
  FAILED+=("$*")
}
# run NAME SECONDS CMD...: the command under a timeout (cut to what is left
# of the budget), its output shown and kept in $LOG_DIR/NAME.log; returns
# the command's status.
run() {
  local name=$1 limit=$2 rc left
  shift 2
  left=$((BUDGET - (SECONDS - START)))
  if ((left < 10)); then
    failed "$name: not run, the check's budget of ${BUDGET}s was spent"
    return 1
  fi
  ((limit > left)) && limit=$left
  timeout --signal=TERM --kill-after=10 "$limit" "$@" 2>&1 |
    tee "$LOG_DIR/$name.log"
  rc=${PIPESTATUS[0]}
  if [[ $rc -ne 0 ]]; then
    failed "$name: '$*' exited with $rc (124: timed out after ${limit}s)"
  fi
  return "$rc"
}
summary() {
  step "summary"
  if [[ ${#FAILED[@]} -eq 0 ]]; then
    echo "the GPU check passed in $((SECONDS - START)) s"
    exit 0
  fi
  printf 'failed: %s\n' "${FAILED[@]}"
  exit 1
}

step "GPU"
if ! command -v nvidia-smi >/dev/null; then
  failed "nvidia-smi not found: no NVIDIA driver"
  summary
fi
run nvidia-smi 30 nvidia-smi -L || summary
export OPENBLAS_NUM_THREADS=1

# The CUDA libraries the runtime loads (cuBLAS, NCCL) may live in the
# toolkit or in Python wheels (nvidia-*); put every folder that has one on
# the library path.
cuda_library_path() {
  local dirs=() d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib \
           /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -d $d ]] && dirs+=("$d")
  done
  while read -r d; do dirs+=("$d"); done < <(python3 - <<'EOF' 2>/dev/null
import glob, os, site
for base in site.getsitepackages():
    for lib in sorted(glob.glob(os.path.join(base, "nvidia", "*", "lib"))):
        if glob.glob(os.path.join(lib, "libnccl.so*")) or \
           glob.glob(os.path.join(lib, "libcublas*.so*")):
            print(lib)
EOF
  )
  local IFS=:
  echo "${dirs[*]}"
}
export LD_LIBRARY_PATH="$(cuda_library_path)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "library path: $LD_LIBRARY_PATH"

BUNDLE="${ZB_BUNDLE:-}"
if [[ -z $BUNDLE && -f $ROOT/.gpu-bundle.tar.xz &&
      ! -d /usr/lib/llvm-22/lib/cmake/mlir ]]; then
  BUNDLE="$ROOT/.gpu-bundle.tar.xz"
fi
if [[ -n $BUNDLE ]]; then
  step "unpack $BUNDLE (built elsewhere by bench/gpu_bundle.sh)"
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$BUNDLE" "$WORK" || { failed "unpacking $BUNDLE"; summary; }
  BUILD_DIR="$WORK/zb-bundle"
  LLVM_BIN="$BUILD_DIR/bin"
  export LD_LIBRARY_PATH="$BUILD_DIR/lib:$BUILD_DIR/deps:$LD_LIBRARY_PATH"
  export PYTHONPATH="$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}"
  export ZB_SRC_ROOT="$ROOT"
  # The CPU the bundle's cache was compiled for.
  export ZB_TARGET_CPU="$(cat "$BUILD_DIR/target-cpu")"
  LIT=(python3 -c 'from lit.main import main; main()')
else
  step "build ($BUILD_DIR, $JOBS jobs)"
  if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
    run configure 120 cmake -G Ninja -S "$ROOT" -B "$BUILD_DIR" \
      -DCMAKE_BUILD_TYPE=Release || summary
  fi
  if ! grep -q "zbrt_cuda" "$BUILD_DIR/build.ninja"; then
    failed "CMake did not configure the GPU runtime (see 'GPU runtime:' in its output)"
    summary
  fi
  run build 300 ninja -C "$BUILD_DIR" -j "$JOBS" zb-opt zb-run zbrt_cuda \
    zb-gpu-gemm-bench zb-gpu-optimizer-check || summary
  LIT=("$LLVM_BIN/lit")
fi
ZB_RUN="$BUILD_DIR/bin/zb-run"
export ZB_CACHE_DIR="$BUILD_DIR/cache"
# zb-run loads code only from a cache private to the user (an unpacked
# bundle's modes follow the umask).
mkdir -p "$ZB_CACHE_DIR" && chmod -R go-w "$ZB_CACHE_DIR"
COMPARE="$ROOT/test/GPU/Inputs/compare_losses.py"

# train NAME MODEL M [FLAGS...]: trains on the CPU and with --backend nccl
# and compares the losses; on a GPU failure, reruns it under
# compute-sanitizer (when there) for the log.
train() {
  local name=$1 model=$2 m=$3
  shift 3
  local common=(--steps "$STEPS" --microbatches "$m" --seed 7 --lr 0.01 "$@")
  step "$name: $STEPS steps of $model, GPU (--backend nccl) against CPU"
  run "$name-cpu" 90 "$ZB_RUN" "$ROOT/examples/$model.mlir" "${common[@]}" \
    --metrics "$WORK/$name-cpu.json" || return
  if ! run "$name-gpu" 90 "$ZB_RUN" "$ROOT/examples/$model.mlir" \
         "${common[@]}" --backend nccl --metrics "$WORK/$name-gpu.json"; then
    # For the log: the failing kernel (a wait after every launch), then
    # compute-sanitizer's view.
    run "$name-sync" 60 env ZB_GPU_SYNC=1 "$ZB_RUN" \
      "$ROOT/examples/$model.mlir" "${common[@]}" --steps 1 --backend nccl
    if command -v compute-sanitizer >/dev/null; then
      run "$name-sanitizer" 120 compute-sanitizer --tool memcheck \
        --print-limit 20 "$ZB_RUN" "$ROOT/examples/$model.mlir" \
        "${common[@]}" --steps 1 --backend nccl
    fi
    return
  fi
  run "$name-compare" 30 python3 "$COMPARE" "$WORK/$name-cpu.json" \
    "$WORK/$name-gpu.json"
}

if want examples; then
train mlp mlp 4
train gpt gpt "$MICROBATCHES"
# Mixture of experts: the grouped products expanded to batched gemms.
train moe moe 4
# AdamW with every step clipped: the device-resident update and its state,
# the norm from the device's sums of squares, the redo with the clip.
train gpt-adamw gpt "$MICROBATCHES" --optimizer adamw --clip-grad-norm 0.5

GPUS=$(nvidia-smi -L | grep -c '^GPU' || true)
if [[ "$GPUS" -ge 2 ]]; then
  train gpt-p2 gpt "$MICROBATCHES" --np 2 --schedule zb-h1
  # A V placement: NCCL links received in send order.
  train gpt-zbv gpt "$MICROBATCHES" --np 2 --schedule zb-v
fi
fi

if want size; then
step "GPT at size (width 1024, 12 blocks, context 512, batch 8): zb-run vs PyTorch"
# Its rows print as they finish: eager and zb-run (f32, bf16) first, then
# torch.compile's, left out once 200 s have gone.
run gpt-size 300 env ZB_BIN_DIR="$BUILD_DIR/bin" \
  python3 "$ROOT/bench/gpu_gpt_bench.py" --steps "${SIZE_STEPS:-8}" \
  --budget "${SIZE_BUDGET:-200}"
fi

if want profile; then
step "where the width-1024 GPT's zb-run step spends its GPU time (ZB_GPU_PROFILE)"
# Diagnostic: the runtime times every launch and gemm on the device (a few
# microseconds each) and bench/gpu_profile_summary.py sums them. The
# compilations are the size step's, from the cache.
for dtype in f32 bf16; do
  run "profile-$dtype" 150 env ZB_GPU_PROFILE="$WORK/launches-$dtype.tsv" \
    ZB_BIN_DIR="$BUILD_DIR/bin" python3 "$ROOT/bench/gpu_gpt_bench.py" \
    --only-zb --dtypes "$dtype" --steps 3 --warmup 1 >/dev/null &&
    run "profile-$dtype-summary" 30 python3 \
      "$ROOT/bench/gpu_profile_summary.py" "$WORK/launches-$dtype.tsv" \
      --steps 3 --top 30
  [[ -n ${PROFILE_DIR:-} && -f $WORK/launches-$dtype.tsv ]] &&
    cp "$WORK/launches-$dtype.tsv" "$PROFILE_DIR/"
done
fi

if want optimizer; then
step "the compiled optimizer update (--zb-emit-optimizer) on the GPU against the host's"
# A bundle brings the updates compiled (its GPU host may have no C compiler).
if [[ -d "$BUILD_DIR/optimizer-check" ]]; then
  run optimizer 120 "$BUILD_DIR/bin/zb-gpu-optimizer-check" \
    --objects "$BUILD_DIR/optimizer-check"
else
  run optimizer 120 "$BUILD_DIR/bin/zb-gpu-optimizer-check"
fi
fi

if want gemm; then
step "gemm path (zbrt_gpu_sgemm_batched): correctness and TFLOP/s"
run gemm 90 "$BUILD_DIR/bin/zb-gpu-gemm-bench"
fi

if want steptime; then
step "GPT step time"
# The difference of two runs removes start-up, parameter upload and the
# first step's warm-up.
time_run() {
  local t0 t1
  t0=$(date +%s.%N)
  run "time-$1" 90 "$ZB_RUN" "$ROOT/examples/gpt.mlir" --steps "$1" \
    --microbatches "$MICROBATCHES" --backend nccl >/dev/null || return
  t1=$(date +%s.%N)
  python3 -c "print($t1 - $t0)"
}
if SHORT=$(time_run 2) && LONG=$(time_run 22); then
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
else
  failed "GPT step time: a timed run failed"
fi
fi

if want lit; then
step "lit: test/GPU"
if run lit 180 "${LIT[@]}" -v "$BUILD_DIR/test" --filter 'GPU/'; then
  if grep -q '^UNSUPPORTED: .*GPU/run/' "$LOG_DIR/lit.log"; then
    failed "the GPU e2e tests were UNSUPPORTED: lit did not detect the GPU"
  fi
fi
fi

summary
