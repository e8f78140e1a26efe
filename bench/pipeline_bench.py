#!/usr/bin/env python3
"""Pipelined training on this machine: 1F1B vs ZB-H1 vs ZB-H2 side by side.

Trains a GPT-style model with `zb-run --np P` once per schedule (default:
examples/gpt.mlir, P=2, M=8, 12 steps, one BLAS thread per rank) and prints,
from the metrics each run writes:

- step ms: the median step time over the steps after the first (zb-run's
  microbatches_per_s, the slowest rank's step with its opening barrier);
- measured bubble: (max rank span - max rank busy time) / max rank span,
  from the runtime's action records, mean over the steps after the first;
- simulated bubble: the schedule library's simulator on the schedule that
  ran, with the measured mean F/B/W times per stage and no transfer latency,
  so measured - simulated is what transfers and the runtime cost;
- peak stash per rank, measured (bytes compiled code holds between actions
  beyond the step's start: stashes, received values, gradient sums) and
  predicted by the simulator from the stages' mem_b/mem_w;
- the paper's memory bound: under 1F1B and ZB-H1 a rank holds at most P
  microbatches' stash (P * its stages' mem_b).

    python3 bench/pipeline_bench.py [--layers L] [--ranks P] [--microbatches M]
                                    [--steps K] [--schedules 1f1b,zb-h1,zb-h2]
                                    [--threads T] [--quick]

--layers L generates a GPT with L blocks (bench/gen_gpt.py, the example's
shapes) instead of the 4-block example, so that compute grows against the
fixed cost of each transfer. zb-run is looked up in --bin-dir ($ZB_BIN_DIR,
default: build/bin next to this directory); compiled models are cached as
usual.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def zb_run(bin_dir):
    path = os.path.join(bin_dir, "zb-run")
    if not os.path.isfile(path):
        sys.exit(f"pipeline_bench: error: {path} not found (build first, or "
                 "pass --bin-dir / set ZB_BIN_DIR)")
    return path


def run(model, schedule, args, work):
    metrics = os.path.join(work, f"{schedule}.json")
    cmd = [zb_run(args.bin_dir), model, "--np", str(args.ranks),
           "--schedule", schedule, "--microbatches", str(args.microbatches),
           "--steps",
           str(args.steps), "--metrics", metrics, "--trace",
           os.path.join(work, f"{schedule}.trace.json")]
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          timeout=3600)
    if proc.returncode != 0:
        sys.exit(f"pipeline_bench: error: {' '.join(cmd)} failed:\n"
                 f"{proc.stdout}{proc.stderr}")
    with open(metrics) as f:
        m = json.load(f)
    rates = m["microbatches_per_s"][1:] or m["microbatches_per_s"]
    m["step_ms"] = statistics.median(args.microbatches / r * 1e3
                                     for r in rates)
    return m


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", default=os.environ.get(
        "ZB_BIN_DIR", os.path.join(ROOT, "build", "bin")),
        help="where zb-run is (default: $ZB_BIN_DIR or build/bin)")
    parser.add_argument("--layers", type=int, default=0,
                        help="generate a GPT with L blocks (default: the "
                             "4-block examples/gpt.mlir)")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--schedules", default="1f1b,zb-h1,zb-h2")
    parser.add_argument("--threads", type=int, default=1,
                        help="OPENBLAS_NUM_THREADS per rank (default 1)")
    parser.add_argument("--quick", action="store_true",
                        help="3 steps (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.steps = 3

    with tempfile.TemporaryDirectory(prefix="zb-pipeline-bench-") as work:
        model = os.path.join(ROOT, "examples", "gpt.mlir")
        name = "examples/gpt.mlir"
        if args.layers:
            import gen_gpt
            model = os.path.join(work, f"gpt{args.layers}.mlir")
            with open(model, "w") as f:
                f.write(gen_gpt.generate(args.layers, cuts=0))
            name = f"gen_gpt.py --layers {args.layers}"
        schedules = args.schedules.split(",")
        results = {s: run(model, s, args, work) for s in schedules}

    print(f"model {name}; P={args.ranks} ranks, M={args.microbatches} "
          f"microbatches, {args.steps} steps (figures: steps 2..{args.steps}),"
          f" OPENBLAS_NUM_THREADS={args.threads}; all runs in this process")
    base = results[schedules[0]]["step_ms"]
    print()
    print(f"{'schedule':10} {'step ms':>9} {'vs ' + schedules[0]:>9} "
          f"{'bubble measured':>16} {'simulated':>10}")
    for s in schedules:
        m = results[s]
        print(f"{s:10} {m['step_ms']:9.2f} {m['step_ms'] / base:9.2f} "
              f"{m['bubble_rate']:16.3f} {m['simulated_bubble_rate']:10.3f}")
    print()
    print(f"{'schedule':10} {'rank':>4} {'stash measured':>15} "
          f"{'predicted':>10} {'P*mem_b':>10} {'peak memory':>12}")
    for s in schedules:
        m = results[s]
        for r in range(args.ranks):
            print(f"{s:10} {r:4} {m['peak_stash_bytes'][r]:15} "
                  f"{m['predicted_stash_bytes'][r]:10} "
                  f"{args.ranks * m['microbatch_stash_bytes'][r]:10} "
                  f"{m['peak_memory_bytes'][r]:12}")
    print()
    for s in ("1f1b", "zb-h1"):
        if s not in results:
            continue
        m = results[s]
        ok = all(p <= args.ranks * b for p, b in
                 zip(m["predicted_stash_bytes"], m["microbatch_stash_bytes"]))
        print(f"{s}: predicted stash within P * mem_b on every rank: "
              f"{'yes' if ok else 'NO'}")
    if "1f1b" in results and "zb-h1" in results:
        a = max(results["1f1b"]["peak_stash_bytes"])
        b = max(results["zb-h1"]["peak_stash_bytes"])
        print(f"largest measured stash of any rank: 1f1b {a}, zb-h1 {b} "
              f"(zb-h1/1f1b {b / a:.3f})")


if __name__ == "__main__":
    main()
