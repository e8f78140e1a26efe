#!/usr/bin/env python3
"""Data parallel vs pipeline parallel on this machine: D x P = 1x1, 2x1, 1x2.

Trains the GPT example (or a generated one with --layers L) with the same
global batch of G microbatches per step three ways, one BLAS thread per
process: one process (1x1, M=G), two replicas of a one-rank pipeline (2x1,
`--dp 2`, M=G/2 each) and one two-rank pipeline (1x2, `--np 2`, M=G), and
prints per layout:

- step ms: the median step time over the steps after the first, and
  samples/s (every replica's samples);
- for the replicas: the milliseconds per step the gradient reduction added
  at the end of the step (the longest wait of any process for its
  reductions, measured) next to the simulator's figure for the schedule that
  ran, with the measured stage times and each stage's bucket timed alone
  (zb-run's reduction_wait_ms and simulated_reduction_ms).

    python3 bench/dp_bench.py [--layers L] [--global-microbatches G]
                              [--steps K] [--schedule S] [--threads T]

zb-run is looked up in --bin-dir ($ZB_BIN_DIR, default build/bin).
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


def run(args, model, work, ranks, replicas):
    zb_run = os.path.join(args.bin_dir, "zb-run")
    if not os.path.isfile(zb_run):
        sys.exit(f"dp_bench: error: {zb_run} not found (build first, or "
                 "pass --bin-dir / set ZB_BIN_DIR)")
    tag = f"{replicas}x{ranks}"
    metrics = os.path.join(work, f"{tag}.json")
    microbatches = args.global_microbatches // replicas
    cmd = [zb_run, model, "--np", str(ranks), "--dp", str(replicas),
           "--schedule", args.schedule, "--microbatches", str(microbatches),
           "--steps", str(args.steps), "--metrics", metrics]
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          timeout=3600)
    if proc.returncode != 0:
        sys.exit(f"dp_bench: error: {' '.join(cmd)} failed:\n"
                 f"{proc.stdout}{proc.stderr}")
    with open(metrics) as f:
        m = json.load(f)
    rates = m["microbatches_per_s"][1:] or m["microbatches_per_s"]
    samples = m["samples_per_s"][1:] or m["samples_per_s"]
    return {
        "layout": tag,
        "step_ms": statistics.median(args.global_microbatches / r * 1e3
                                     for r in rates),
        "samples_per_s": statistics.median(samples),
        "wait_ms": m.get("reduction_wait_ms"),
        "simulated_ms": m.get("simulated_reduction_ms"),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", default=os.environ.get(
        "ZB_BIN_DIR", os.path.join(ROOT, "build", "bin")))
    parser.add_argument("--layers", type=int, default=0,
                        help="generate a GPT with L blocks (bench/gen_gpt.py)"
                        " instead of examples/gpt.mlir")
    parser.add_argument("--global-microbatches", type=int, default=8)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--schedule", default="zb-h1")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.global_microbatches % 2:
        sys.exit("dp_bench: error: --global-microbatches must be even")

    with tempfile.TemporaryDirectory(prefix="dp-bench-") as work:
        model = os.path.join(ROOT, "examples", "gpt.mlir")
        if args.layers:
            import gen_gpt
            model = os.path.join(work, "gpt.mlir")
            with open(model, "w") as f:
                f.write(gen_gpt.generate(args.layers, cuts=0))
        rows = [run(args, model, work, 1, 1), run(args, model, work, 1, 2),
                run(args, model, work, 2, 1)]

    base = rows[0]["step_ms"]
    name = (f"gen_gpt.py --layers {args.layers}" if args.layers
            else "examples/gpt.mlir")
    print(f"{name}: {args.global_microbatches} microbatches per step, "
          f"{args.steps} steps, {args.threads} BLAS thread(s) per process, "
          f"schedule {args.schedule}")
    print(f"{'D x P':>6} {'step ms':>9} {'vs 1x1':>7} {'samples/s':>10} "
          f"{'reduce ms (measured)':>21} {'(simulated)':>12}")
    for row in rows:
        wait = "-" if row["wait_ms"] is None else f"{row['wait_ms']:.3f}"
        sim = ("-" if row["simulated_ms"] is None
               else f"{row['simulated_ms']:.3f}")
        print(f"{row['layout']:>6} {row['step_ms']:9.2f} "
              f"{row['step_ms'] / base:7.2f} {row['samples_per_s']:10.1f} "
              f"{wait:>21} {sim:>12}")


if __name__ == "__main__":
    main()
