#!/usr/bin/env bash
# make demo: the compiler at work on the bundled GPT example.
set -euo pipefail
BUILD=${1:-build}
BIN=$BUILD/bin
OUT=$BUILD/demo
mkdir -p "$OUT"
export ZB_CACHE_DIR=${ZB_CACHE_DIR:-$BUILD/cache}
say() { printf '\n== %s\n' "$*"; }

say "1. Compile examples/gpt.mlir to native code and evaluate it (4 microbatches)"
"$BIN/zb-run" examples/gpt.mlir --eval --microbatches 4 --seed 1

say "2. Train it with zb-h1 on 2 ranks (mpirun), 30 AdamW steps on a fixed batch"
python3 - "$OUT/gpt-batch.npz" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(0)
tokens = rng.integers(0, 64, (4, 2, 16))
# Next-token targets of a repeating pattern: learnable, so the loss falls.
np.savez(sys.argv[1], tokens=tokens, targets=(tokens + 1) % 64)
PY
"$BIN/zb-run" examples/gpt.mlir --np 2 --schedule zb-h1 --microbatches 4 \
  --steps 30 --optimizer adamw --lr 0.01 --inputs "$OUT/gpt-batch.npz" \
  --metrics "$OUT/gpt-train.json" --dump-params "$OUT/gpt-params.npz" \
  --trace "$OUT/gpt-zb-h1.trace.json"
echo "per-step losses in $OUT/gpt-train.json, trained parameters in $OUT/gpt-params.npz"
echo "Chrome trace of every rank's actions (chrome://tracing, ui.perfetto.dev): $OUT/gpt-zb-h1.trace.json"

say "2b. Measured vs simulated bubble rate on 2 ranks, 8 microbatches, 8 steps"
printf '%-8s %10s %12s %11s %s\n' schedule "step ms" "bubble meas" "simulated" "peak stash per rank (measured / predicted bytes)"
for s in 1f1b zb-h1; do
  "$BIN/zb-run" examples/gpt.mlir --np 2 --schedule $s --microbatches 8 \
    --steps 8 --metrics "$OUT/gpt-$s-metrics.json" >/dev/null
  python3 - "$OUT/gpt-$s-metrics.json" $s <<'PY'
import json, statistics, sys
m = json.load(open(sys.argv[1]))
ms = statistics.median(8 / r * 1e3 for r in m["microbatches_per_s"][1:])
stash = ", ".join(f"{a} / {b}" for a, b in zip(m["peak_stash_bytes"], m["predicted_stash_bytes"]))
print(f"{sys.argv[2]:<8} {ms:10.2f} {m['bubble_rate']:12.3f} {m['simulated_bubble_rate']:11.3f} {stash}")
PY
done
echo "(simulated: the schedule that ran, with the measured F/B/W times and free transfers;"
echo " on tiny stages the measured rate is dominated by the cost of each transfer)"

say "3. Partition into 4 stages at its pipe.cut markers, differentiate, split B/W"
"$BIN/zb-opt" examples/gpt.mlir \
  --zb-partition-stages="stages=4" --zb-autodiff --zb-split-backward \
  -o "$OUT/gpt-stages.mlir"
python3 - "$OUT/gpt-stages.mlir" <<'PY'
import re, struct, sys
text = open(sys.argv[1]).read()
print(f"{'stage':>5} {'rank':>4} {'F MFLOP':>8} {'B MFLOP':>8} {'W MFLOP':>8} {'M_B KiB':>8} {'M_W KiB':>8}")
for m in re.finditer(r"pipe\.stage (\d+) on rank (\d+).*?attributes \{([^}]*)\}", text):
    attrs = dict(re.findall(r"(\w+) = ([^,:]+)", m.group(3)))
    def num(k):
        # MLIR prints an f64 that has no short decimal form as its bit pattern.
        v = attrs[k].strip()
        if v.startswith("0x"):
            return struct.unpack(">d", bytes.fromhex(v[2:]))[0]
        return float(v)
    print(f"{m.group(1):>5} {m.group(2):>4} {num('cost_f')/1e6:8.2f} {num('cost_b')/1e6:8.2f} "
          f"{num('cost_w')/1e6:8.2f} {num('mem_b')/1024:8.1f} {num('mem_w')/1024:8.1f}")
PY

say "4. Schedules for 4 ranks, 16 microbatches (T_F=T_B=2, T_W=1, T_comm=0.05)"
printf '%-10s %8s %8s %8s %s\n' schedule makespan bubble "lower bd" "peak memory per rank"
for s in 1f1b zb-h1 zb-h2 zb-auto zb-v; do
  "$BIN/zb-sched" --schedule=$s --stages=4 --microbatches=16 \
    --cost-f=2 --cost-b=2 --cost-w=1 --cost-comm=0.05 --format=json |
  python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"{d['schedule']:<10} {d['makespan']:8.2f} {100*d['bubble_rate']:7.2f}% {d['lower_bound']:8.2f} {d['peak_memory']}\")"
done
"$BIN/zb-sched" --schedule=zb-h1 --stages=4 --microbatches=8 \
  --cost-f=2 --cost-b=2 --cost-w=1 --format=text
"$BIN/zb-sched" --schedule=zb-h1 --stages=4 --microbatches=16 \
  --cost-f=2 --cost-b=2 --cost-w=1 --cost-comm=0.05 --format=svg -o "$OUT/zb-h1.svg"
echo "timeline picture written to $OUT/zb-h1.svg"
