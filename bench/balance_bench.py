"""zb-run with and without --balance: stage times, step time, bubble.

The GPT of bench/peer_torch.py (--size medium by default) imported with
``from_torch`` and trained with ``zb-run --np P`` twice per schedule, in one
run: once with the stages the cost model cuts by FLOPs (its pipe_cut markers
are placed per block, so with P x V markers' stages the FLOPs cut is the
model's own), once with ``--balance`` (a finer partition profiled round the
ranks first, the stages cut at the measured times and scheduled with
them). Each run writes ``--profile`` (measured F, B, W per stage) and
``--metrics``; printed side by side: every stage's F+B+W, every rank's total,
the slowest rank over the fastest, the median step time after the warm-up
steps, and the measured bubble rate next to the simulator's for the same
schedule with the measured stage times. Both runs must reach the same losses.

    python3 bench/balance_bench.py [--size small|medium|large]
        [--schedules zb-h1,zb-v] [--ranks 2] [--microbatches 8]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import zerobubble as zb  # noqa: E402
from peer_torch import SIZES, STEPS, make_data, make_model  # noqa: E402

CHUNKS = {"1f1b": 1, "zb-h1": 1, "zb-v": 2, "zb-auto": 1}


def zb_run():
    bin_dir = Path(os.environ.get(
        "ZB_BIN_DIR", Path(__file__).resolve().parents[1] / "build" / "bin"))
    return str(bin_dir / "zb-run")


def train(args, workdir, schedule, balance):
    chunks = CHUNKS[schedule]
    # Markers per block: the FLOPs cut is the one a user's markers give.
    model = make_model("gpt", args.ranks * chunks, args.seed, args.size)
    data = make_data(model, args.steps, args.microbatches, args.seed)
    program = zb.from_torch(model, data[0][0])
    tag = f"{schedule}-{'balanced' if balance else 'flops'}"
    model_path = workdir / f"{tag}.mlir"
    program.save(model_path)
    params, inputs = workdir / f"{tag}-params.npz", workdir / f"{tag}-in.npz"
    program.save_params(params)
    np.savez(inputs, **program.stack_inputs(data))
    profile, metrics = workdir / f"{tag}-profile.json", workdir / f"{tag}.json"
    cmd = [zb_run(), str(model_path), "--np", str(args.ranks), "--schedule",
           schedule, "--microbatches", str(args.microbatches), "--steps",
           str(args.steps), "--lr", str(args.lr), "--params", str(params),
           "--inputs", str(inputs), "--profile", str(profile), "--metrics",
           str(metrics)]
    if balance:
        cmd.append("--balance")
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        sys.exit(f"zb-run failed:\n{proc.stdout}\n{proc.stderr}")
    stages = json.loads(profile.read_text())["stages"]
    m = json.loads(metrics.read_text())
    times = [args.microbatches / r for r in m["microbatches_per_s"]]
    step_ms = 1e3 * statistics.median(times[args.warmup:] or times)
    per_stage = [s["f"] + s["b"] + s.get("w", 0.0)
                 for s in sorted(stages, key=lambda s: s["stage"])]
    return (per_stage, step_ms, m["bubble_rate"],
            m["simulated_bubble_rate"], m["loss"])


def rank_totals(per_stage, ranks, schedule):
    totals = [0.0] * ranks
    for s, t in enumerate(per_stage):
        r = s if s < ranks else (2 * ranks - 1 - s if schedule == "zb-v"
                                 else s % ranks)
        totals[r] += t
    return totals


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=sorted(SIZES), default="medium")
    p.add_argument("--schedules", default="zb-h1,zb-v")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    steps, args.warmup = STEPS[args.size]
    args.steps = args.steps or steps
    torch.set_num_threads(args.threads)

    print(f"balance benchmark: GPT --size {args.size}, P={args.ranks}, "
          f"M={args.microbatches}, {args.steps} steps (median after "
          f"{args.warmup}), {args.threads} thread(s) per rank")
    print(f"{'schedule':<8} {'cut by':<9} {'stage F+B+W ms':<36} "
          f"{'rank ms':<20} {'max/min':>7} {'step ms':>8} {'bubble':>7} "
          f"{'sim.':>7}")
    with tempfile.TemporaryDirectory(prefix="zb-balance-bench-") as tmp:
        workdir = Path(tmp)
        for schedule in args.schedules.split(","):
            losses = {}
            for balance in (False, True):
                per_stage, step_ms, bubble, simulated, loss = train(
                    args, workdir, schedule, balance)
                totals = rank_totals(per_stage, args.ranks, schedule)
                losses[balance] = loss
                print(f"{schedule:<8} {'measured' if balance else 'FLOPs':<9} "
                      f"{' '.join(f'{t:.1f}' for t in per_stage):<36} "
                      f"{' '.join(f'{t:.1f}' for t in totals):<20} "
                      f"{max(totals) / min(totals):>7.3f} {step_ms:>8.1f} "
                      f"{bubble:>7.3f} {simulated:>7.3f}")
            diff = max(abs(a - b) / abs(b)
                       for a, b in zip(losses[True], losses[False]))
            print(f"{'':<8} losses of the two runs agree to {diff:.1e}")


if __name__ == "__main__":
    main()
