"""Compares the "loss" lists of two zb-run --metrics files.

usage: compare_losses.py A.json B.json [--rtol R]
Prints one line per step; exits 1 when the lists differ in length or any
loss differs by more than R relative (default 1e-4).
"""

import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rtol", type=float, default=1e-4)
    args = parser.parse_args()
    a = json.load(open(args.a))["loss"]
    b = json.load(open(args.b))["loss"]
    if len(a) != len(b) or not a:
        print(f"loss counts differ: {len(a)} and {len(b)}")
        return 1
    worst = 0.0
    for step, (x, y) in enumerate(zip(a, b)):
        rel = abs(x - y) / max(abs(x), 1e-12)
        worst = max(worst, rel)
        print(f"step {step}: {x:.7g} {y:.7g} rel {rel:.2e}")
    if worst > args.rtol:
        print(f"MISMATCH: worst relative difference {worst:.2e} > {args.rtol:g}")
        return 1
    print(f"MATCH: worst relative difference {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
