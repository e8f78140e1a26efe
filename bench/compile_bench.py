#!/usr/bin/env python3
"""Compile time of --zb-pipeline for a 48-layer GPT-style model, P=2..8.

Generates a GPT-style model with --layers blocks (default 48; the shapes of
examples/gpt.mlir, bench/gen_gpt.py) without pipe.cut markers, so the
partition cuts it by its cost model, then times

    zb-opt MODEL --zb-pipeline="stages=P microbatches=M schedule=S" -o /dev/null

for each configuration P x M, three times: with lower-to-cpu=false (the
pipeline's own passes: partition, autodiff, B/W split, schedule, send/recv,
lowering to runtime calls), with the default lower-to-cpu=true (the same,
then --zb-lower-to-cpu down to the LLVM dialect), and with unroll=true as
well (step functions with every action inline instead of a loop over the
action table: what grows with M, for comparison; --no-unrolled skips
it). Each figure is the wall clock of
the whole zb-opt process (parsing and printing included), the median of 3
runs, or of 1 when the first run takes more than 60 s. All figures come from
this one run; the table gives each one's ratio to the first configuration.

    python3 bench/compile_bench.py [--layers L] [--configs 2x8,4x16,8x64]
                                   [--schedule zb-h1] [--timeout S] [--quick]
                                   [--no-unrolled]

Every run passes --mlir-timing (its cost is a clock read per pass); the
report of the goal configuration's lowered run (P=8, M=64) gives the most
expensive passes. zb-opt is looked up in $ZB_BIN_DIR (default: build/bin
next to this directory). The goal (issue 6): the full pipeline for the
48-layer model at P=8, M=64 in under 10 s.
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import gen_gpt  # noqa: E402

GOAL_CONFIG = (8, 64)
GOAL_SECONDS = 10.0
SINGLE_RUN_ABOVE_S = 60.0


def parse_args():
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=48,
                   help="transformer blocks of the model (default 48)")
    p.add_argument("--configs", default="2x8,4x16,8x64",
                   help="comma-separated PxM (stages x microbatches); the "
                        "first is the baseline of the ratios "
                        "(default 2x8,4x16,8x64)")
    p.add_argument("--schedule", default="zb-h1",
                   help="pipeline schedule (default zb-h1)")
    p.add_argument("--repeats", type=int, default=3,
                   help="runs per figure, median reported, unless the first "
                        "run exceeds 60 s (default 3)")
    p.add_argument("--timeout", type=float, default=3600.0,
                   help="seconds one zb-opt run may take before it is "
                        "stopped and reported as '> timeout' (default 3600)")
    p.add_argument("--top", type=int, default=5,
                   help="passes listed from --mlir-timing (default 5)")
    p.add_argument("--no-unrolled", action="store_true",
                   help="skip the unroll=true runs")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 8 layers, 2x8 and 4x8, one repeat")
    p.add_argument("--keep", metavar="DIR",
                   help="write the model and the --mlir-timing reports here")
    p.add_argument("--bin-dir", default=os.environ.get(
        "ZB_BIN_DIR", os.path.join(ROOT, "build", "bin")),
        help="where zb-opt is (default: $ZB_BIN_DIR or build/bin)")
    args = p.parse_args()
    if args.quick:
        args.layers, args.configs, args.repeats = 8, "2x8,4x8", 1
    try:
        args.configs = [tuple(int(v) for v in c.lower().split("x"))
                        for c in args.configs.split(",")]
        assert all(len(c) == 2 for c in args.configs)
    except (ValueError, AssertionError):
        p.error("--configs: expected PxM[,PxM...], e.g. 2x8,8x64")
    return args


# One line of the --mlir-timing report: [user (pct)] wall (pct) name.
TIMING_LINE = re.compile(
    r"^\s*([\d.]+) \(\s*[\d.]+%\)(?:\s+([\d.]+) \(\s*[\d.]+%\))?  (\s*)(\S.*)$")


def parse_timing(stderr):
    """The report's entries as (name, wall s, depth), in report order."""
    entries = []
    for line in stderr.splitlines():
        m = TIMING_LINE.match(line)
        if not m:
            continue
        wall = float(m.group(2) if m.group(2) is not None else m.group(1))
        entries.append((m.group(4).strip(), wall, len(m.group(3)) // 2))
    return entries


NOT_PASSES = {"Parser", "Output", "Rest", "Total"}


def top_passes(entries, n):
    """The n most expensive pass runs: leaves only (no nested pipelines, no
    analyses, no parsing/printing), each run of a repeated pass on its own."""
    passes = [(name, wall) for name, wall, _ in entries
              if name not in NOT_PASSES and not name.startswith("(A)")
              and not name.endswith("Pipeline")]
    return sorted(passes, key=lambda e: -e[1])[:n]


class Run:
    def __init__(self, seconds, timed_out=False, error=None, timing=None,
                 report=""):
        self.seconds = seconds
        self.timed_out = timed_out
        self.error = error
        self.timing = timing or []
        self.report = report


def run_once(cmd, timeout):
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return Run(time.perf_counter() - start, timed_out=True)
    seconds = time.perf_counter() - start
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        return Run(seconds, error=f"killed by {name} after {seconds:.0f} s "
                   f"(not by this script)", report=proc.stderr)
    if proc.returncode != 0:
        return Run(seconds, error=f"exit {proc.returncode}: "
                   + proc.stderr.strip()[-2000:], report=proc.stderr)
    return Run(seconds, timing=parse_timing(proc.stderr), report=proc.stderr)


# What is timed per configuration: key, extra --zb-pipeline options, label.
KINDS = [("passes", " lower-to-cpu=false", "pipeline passes"),
         ("lower", "", "with CPU lowering"),
         ("unrolled", " unroll=true", "unrolled, with CPU lowering")]


def measure(zb_opt, model, stages, microbatches, schedule, kind, args):
    """Median wall clock over the repeats (one if the first is over 60 s).
    Returns (median s or None, number of runs, last Run)."""
    _, extra, what = next(k for k in KINDS if k[0] == kind)
    opts = (f"stages={stages} microbatches={microbatches} schedule={schedule}"
            + extra)
    cmd = [zb_opt, model, f"--zb-pipeline={opts}", "--mlir-timing",
           "-o", os.devnull]
    times, last = [], None
    for i in range(args.repeats):
        last = run_once(cmd, args.timeout)
        label = f"  P={stages} M={microbatches} {what} run {i + 1}: "
        if last.error or last.timed_out:
            print(label + ("timed out after %.0f s" % last.seconds
                           if last.timed_out else "FAILED after %.0f s"
                           % last.seconds), flush=True)
            return None, i + 1, last
        print(label + "%.2f s" % last.seconds, flush=True)
        times.append(last.seconds)
        if last.seconds > SINGLE_RUN_ABOVE_S:
            break
    return statistics.median(times), len(times), last


def fmt_seconds(value, run, timeout):
    if value is not None:
        return "%.2f" % value
    if run.timed_out:
        return "> %.0f (timeout)" % timeout
    return "FAILED after %.0f" % run.seconds


def fmt_ratio(value, base):
    if value is None or base is None:
        return "-"
    return "%.1fx" % (value / base)


def main():
    args = parse_args()
    zb_opt = os.path.join(args.bin_dir, "zb-opt")
    if not os.path.exists(zb_opt):
        sys.exit(f"compile_bench: {zb_opt} not found (build zb-opt, or set "
                 f"ZB_BIN_DIR)")
    workdir = args.keep or tempfile.mkdtemp(prefix="zb-compile-bench-")
    os.makedirs(workdir, exist_ok=True)
    model = os.path.join(workdir, f"gpt{args.layers}.mlir")
    with open(model, "w") as f:
        f.write(gen_gpt.generate(args.layers, 0))

    print(f"model: {args.layers}-layer GPT-style (B=2, T=16, d=32, H=2, "
          f"vocab 64; bench/gen_gpt.py), no pipe.cut markers: the partition "
          f"uses its cost model")
    print(f"command: zb-opt MODEL --zb-pipeline=\"stages=P microbatches=M "
          f"schedule={args.schedule} [lower-to-cpu=false | unroll=true]\" "
          f"--mlir-timing -o /dev/null")
    print(f"timing: wall clock of the zb-opt process, median of "
          f"{args.repeats} run(s), 1 when a run exceeds "
          f"{SINGLE_RUN_ABOVE_S:.0f} s; all figures from this run")
    print(flush=True)

    kinds = [k for k, _, _ in KINDS
             if not (k == "unrolled" and args.no_unrolled)]
    rows = []
    for stages, microbatches in args.configs:
        row = {"config": (stages, microbatches)}
        for kind in kinds:
            value, n, last = measure(zb_opt, model, stages, microbatches,
                                     args.schedule, kind, args)
            row[kind] = (value, n, last)
            if args.keep and last.report:
                name = f"timing_P{stages}_M{microbatches}_{kind}.txt"
                with open(os.path.join(workdir, name), "w") as f:
                    f.write(last.report)
        rows.append(row)

    base = rows[0]
    labels = {"passes": "pipeline passes s", "lower": "with CPU lowering s",
              "unrolled": "unrolled, with CPU lowering s"}
    header = (("config",) + tuple(labels[k] for k in kinds)
              + (f"ratio to P={base['config'][0]} M={base['config'][1]} "
                 f"(passes / with lowering)",))
    table = []
    for row in rows:
        p, m = row["config"]
        cells = [f"P={p} M={m}"]
        for kind in kinds:
            v, n, last = row[kind]
            cells.append(fmt_seconds(v, last, args.timeout) + f" (n={n})")
        cells.append(fmt_ratio(row["passes"][0], base["passes"][0]) + " / "
                     + fmt_ratio(row["lower"][0], base["lower"][0]))
        table.append(tuple(cells))
    widths = [max(len(r[i]) for r in table + [header])
              for i in range(len(header))]
    print()
    print(f"Compile time of --zb-pipeline, {args.layers}-layer GPT-style "
          f"model, schedule={args.schedule} (n = runs in the median)")
    for r in [header, tuple("-" * w for w in widths)] + table:
        sep = "-|-" if r[0].startswith("-") else " | "
        print(sep.join(c.ljust(w) for c, w in zip(r, widths)).rstrip())

    errors = [(row["config"], kind, row[kind][2]) for row in rows
              for kind in kinds if row[kind][2].error]
    for (p, m), kind, run in errors:
        what = next(k[2] for k in KINDS if k[0] == kind)
        print(f"\nP={p} M={m} ({what}) failed: {run.error}")

    goal = next((r for r in rows if r["config"] == GOAL_CONFIG), None)
    if goal is not None and args.layers == 48:
        print()
        for kind, what in (("lower", "full pipeline (with CPU lowering)"),
                           ("passes", "pipeline passes alone")):
            value, _, run = goal[kind]
            verdict = ("met" if value is not None and value < GOAL_SECONDS
                       else "NOT MET")
            shown = fmt_seconds(value, run, args.timeout) + " s"
            if value is None:
                verdict, shown = "NOT MET", shown.replace("FAILED", "failed")
            print(f"goal: {what} at P=8 M=64 under {GOAL_SECONDS:.0f} s: "
                  f"{verdict} ({shown})")
        if "unrolled" in kinds and goal["unrolled"][0] and goal["lower"][0]:
            print(f"unrolled / loop step functions at P=8 M=64, with CPU "
                  f"lowering: {goal['unrolled'][0] / goal['lower'][0]:.1f}x")

    report_row = goal or rows[-1]
    p, m = report_row["config"]
    for kind, what in (("lower", "with CPU lowering"),
                       ("passes", "pipeline passes")):
        run = report_row[kind][2]
        if not run.timing:
            continue
        total = next((w for n, w, _ in run.timing if n == "Total"), None)
        print(f"\nMost expensive passes, P={p} M={m}, {what} "
              f"(--mlir-timing of the last run; each run of a pass on its own)")
        for name, wall in top_passes(run.timing, args.top):
            share = f" ({100 * wall / total:4.1f}%)" if total else ""
            print(f"  {wall:9.2f} s{share}  {name}")
        extra = {n: w for n, w, _ in run.timing if n in ("Parser", "Output")}
        if extra or total:
            print("  parse %.2f s, print %.2f s, total %.2f s" % (
                extra.get("Parser", 0.0), extra.get("Output", 0.0),
                total or 0.0))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
