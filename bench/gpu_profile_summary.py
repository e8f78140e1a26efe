#!/usr/bin/env python3
"""Where a zb-run GPU step's time goes: sums the launch times that
``ZB_GPU_PROFILE=FILE zb-run ...`` writes (the runtime times every kernel
launch and cuBLAS call of compiled code on the device; bench/gpu_check.sh's
profile step), or an Nsight Compute run's (``ncu --csv --metrics
gpu__time_duration.sum``, each kernel timed alone).

Prints the total, the time per kind of launch (the cuBLAS gemms, the
compiled kernels), the launches that took longest in all (a compiled
kernel is ``name@N``: the N-th kernel module to run, as outlined kernels
share their step function's name) with their grid and block, and, given
``--steps``, the times per step.

    python3 bench/gpu_profile_summary.py FILE [--steps N] [--top 40]
"""

import argparse
import collections
import csv
import sys

UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3,
         "msecond": 1e3, "s": 1e6, "second": 1e6}


def runtime_launches(lines):
    """(label, grid, block, us) from ZB_GPU_PROFILE's table."""
    out = []
    for n, line in enumerate(lines[1:], 2):
        fields = line.rstrip("\n").split("\t")
        if len(fields) != 5:
            sys.exit(f"gpu_profile_summary: line {n}: expected 5 fields, "
                     f"got {len(fields)}")
        out.append((fields[1], fields[2], fields[3], float(fields[4])))
    return out


def ncu_launches(lines, path):
    """(label, grid, block, us) from ncu's CSV, in launch order; a kernel
    without a name of its own is labelled by its position."""
    rows = list(csv.reader(line for line in lines if line.startswith('"')))
    header = next((r for r in rows if "Kernel Name" in r and
                   "Metric Value" in r), None)
    if header is None:
        sys.exit(f"gpu_profile_summary: {path} is neither a ZB_GPU_PROFILE "
                 "table nor ncu CSV output")
    col = {name: i for i, name in enumerate(header)}
    out = []
    for r in rows:
        if len(r) != len(header) or r == header or \
                r[col["Metric Name"]] != "gpu__time_duration.sum":
            continue
        unit = r[col["Metric Unit"]]
        if unit not in UNITS:
            sys.exit(f"gpu_profile_summary: unknown unit {unit!r} in {path}")
        us = float(r[col["Metric Value"]].replace(",", "")) * UNITS[unit]
        out.append((r[col["Kernel Name"]], r[col["Grid Size"]],
                    r[col["Block Size"]], us))
    return out


def kind(label):
    if label.startswith("gemm "):
        return "cuBLAS (zbrt_gpu_sgemm_batched)"
    if label.startswith("zb_"):
        return "compiled kernels"
    return "other kernels (cuBLAS's own with ncu)"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("--steps", type=int, default=0,
                   help="steps the run made: times are also given per step")
    p.add_argument("--top", type=int, default=40)
    args = p.parse_args()
    with open(args.file, errors="replace") as f:
        lines = f.readlines()
    if lines and lines[0].startswith("wait\tlaunch"):
        rows = runtime_launches(lines)
    else:
        rows = ncu_launches(lines, args.file)
    if not rows:
        sys.exit(f"gpu_profile_summary: {args.file} has no launches")
    per = f" (per step: / {args.steps})" if args.steps else ""
    scale = 1 / args.steps if args.steps else 1
    total = sum(r[3] for r in rows)
    print(f"{len(rows)} launches, {total * scale / 1e3:.2f} ms{per}")
    kinds = collections.defaultdict(lambda: [0, 0.0])
    for r in rows:
        kinds[kind(r[0])][0] += 1
        kinds[kind(r[0])][1] += r[3]
    for name, (n, us) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name:40} {n * scale:8.1f} launches {us * scale / 1e3:9.3f}"
              f" ms {us / total:6.1%}")
    same = collections.defaultdict(lambda: [0, 0.0])
    for label, grid, block, us in rows:
        same[(label, grid, block)][0] += 1
        same[(label, grid, block)][1] += us
    print(f"\nthe {args.top} launches that took longest in all{per}")
    print(f"{'launch':44} {'grid':>16} {'block':>12} {'count':>6} "
          f"{'us each':>9} {'ms':>8} {'share':>6}")
    for (label, grid, block), (n, us) in sorted(
            same.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"{label[:44]:44} {grid:>16} {block:>12} {n * scale:6.1f} "
              f"{us / n:9.1f} {us * scale / 1e3:8.3f} {us / total:6.1%}")


if __name__ == "__main__":
    main()
