#!/usr/bin/env python3
"""A GPT at size on one GPU: zb-run against PyTorch eager and torch.compile.

The model (``--size gpu``, the default): ``zerobubble.models.GPT`` of width
1024, 12 pre-LayerNorm blocks (16 heads, a 4096-wide GELU MLP), context
512, vocabulary 8192, batch 8 (one microbatch per step by default). From
the same initial parameters and on the same microbatch every step, SGD:

- ``zb-run --backend nccl`` (P=1, one GPU) on the model imported by
  ``zerobubble.from_torch``, in f32 and with ``--dtype bf16`` (bf16 gemm
  products and stashes, f32 parameters and accumulation);
- PyTorch eager and ``torch.compile`` on the same GPU, in f32 (TF32 off)
  and under bf16 autocast.

Per row: the median step time after the warm-up steps, the achieved
TFLOP/s (the step's FLOPs, counted by torch's FLOP counter on the meta
device, over the step time), the time against PyTorch eager's in the same
precision, the last loss and the largest relative difference of the loss
curve from PyTorch eager f32's (the ground truth: the goal is 1e-4 for f32
rows, 1e-2 for bf16 rows; the script exits 1 when a row misses it), the
peak memory (PyTorch: ``max_memory_allocated``; zb-run: the memory its
compiled code holds) and zb-run's peak stash, measured and predicted.

``--only-zb`` runs zb-run's rows alone (under a profiler: see
bench/gpu_check.sh); the losses are then printed, not compared.

``--device cpu`` runs the same on the CPU (a smoke run of the script, at
``--size small``: zb-run's CPU backend in f32 only, since bf16 stashes need
a pipeline of two or more ranks there). Used by bench/gpu_check.sh.
"""

import argparse
import copy
import json
import sys
import time

# peer_torch puts python/ on the path and points ZB_BIN_DIR at build/bin.
from peer_torch import make_data, median_after_warmup

import torch

import zerobubble as zb
from zerobubble.models import GPT

SIZES = {
    "gpu": dict(vocab=8192, context=512, width=1024, heads=16, layers=12,
                hidden=4096, batch=8),
    "small": dict(vocab=512, context=64, width=128, heads=4, layers=2,
                  hidden=512, batch=4),
}
TOLERANCE = {"f32": 1e-4, "bf16": 1e-2}


def step_flops(size, microbatches):
    """One step's FLOPs: a microbatch's forward and backward, counted on
    the meta device (nothing is computed), times M."""
    import logging
    logging.getLogger("torch.utils.flop_counter").setLevel(logging.ERROR)
    from torch.utils.flop_counter import FlopCounterMode
    with torch.device("meta"):
        model = GPT(**SIZES[size])
        shape = (model.batch, model.context)
        tokens = torch.zeros(shape, dtype=torch.long)
        counter = FlopCounterMode(display=False)
        with counter:
            model(tokens, tokens).backward()
    return counter.get_total_flops() * microbatches


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def run_torch(model, data, device, dtype, compiled, lr):
    """PyTorch's step times (s), losses and peak memory (bytes, or None on
    the CPU) for `model` trained on `data` ([steps][M] microbatches)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # The model makes its masks and positions on its inputs' device, so
    # no default device is set (Dynamo traced such a setting badly).
    model = copy.deepcopy(model).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    forward = torch.compile(model) if compiled else model
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    for step in data:
        sync(device)
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=device)
        for tokens, targets in step:
            with torch.autocast(device.type, dtype=torch.bfloat16,
                                enabled=dtype == "bf16"):
                loss = forward(tokens.to(device), targets.to(device))
            (loss / len(step)).backward()
            total += loss.detach().float()
        optimizer.step()
        losses.append(float(total) / len(step))
        sync(device)
        times.append(time.perf_counter() - start)
    peak = (torch.cuda.max_memory_allocated()
            if device.type == "cuda" else None)
    return times, losses, peak


def run_ours(program, data, device, dtype, lr, microbatches, timeout):
    result = zb.run(program, microbatches=microbatches, steps=len(data),
                    lr=lr, inputs=data, timeout=timeout, dtype=dtype,
                    backend="nccl" if device.type == "cuda" else "mpi")
    times = [microbatches / r for r in result.microbatches_per_s]
    m = result.metrics
    memory = {k: max(m[k]) for k in ("peak_memory_bytes",
                                     "peak_stash_bytes",
                                     "predicted_stash_bytes") if m.get(k)}
    return times, result.losses, memory


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=sorted(SIZES), default="gpu")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--dtypes", default="f32,bf16",
                   help="comma-separated: f32, bf16")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3,
                   help="first steps left out of the median")
    p.add_argument("--microbatches", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-compile", action="store_true",
                   help="leave out the torch.compile rows")
    p.add_argument("--only-zb", action="store_true",
                   help="run only zb-run's rows (for a profiler: the "
                   "losses are then not compared, and the script says so)")
    p.add_argument("--timeout", type=float, default=240,
                   help="seconds for each zb-run")
    p.add_argument("--budget", type=float, default=0,
                   help="seconds for the whole benchmark: a row that "
                   "would start after them is left out (reported); "
                   "0: no limit")
    return p.parse_args()


def main():
    args = parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_gpt_bench: PyTorch sees no CUDA device")
    torch.manual_seed(args.seed)
    model = GPT(**SIZES[args.size])
    data = make_data(model, args.steps, args.microbatches, args.seed)
    program = zb.from_torch(model, data[0][0])
    flops = step_flops(args.size, args.microbatches)
    dtypes = args.dtypes.split(",")
    name = (torch.cuda.get_device_name() if device.type == "cuda"
            else "CPU")
    print(f"GPT {SIZES[args.size]} on {name}: M={args.microbatches}, "
          f"{args.steps} steps (median after {args.warmup}), SGD lr "
          f"{args.lr}; {flops / 1e12:.3f} TFLOP per step")

    rows, failed = [], []
    started = time.monotonic()

    def attempt(label, dtype, run):
        """Runs one row and prints its step time at once (a run cut short
        keeps the rows done); a failure (a missing Triton for
        torch.compile, a GPU error) is reported and the other rows still
        run."""
        elapsed = time.monotonic() - started
        if args.budget and elapsed > args.budget:
            failed.append(f"{label} {dtype}: not run, the budget of "
                          f"{args.budget:.0f} s was spent")
            return
        try:
            times, losses, memory = run()
        except Exception as e:  # noqa: BLE001 - reported, then exit 1
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            failed.append(f"{label} {dtype}: {type(e).__name__}: {first}")
            print(f"row {label} {dtype}: failed", flush=True)
            return
        rows.append(dict(impl=label, dtype=dtype, times=times,
                         losses=losses, memory=memory))
        ms = 1e3 * median_after_warmup(times, args.warmup)
        print(f"row {label} {dtype}: {ms:.2f} ms per step, last loss "
              f"{losses[-1]:.5f} ({time.monotonic() - started:.0f} s in)",
              flush=True)

    def torch_row(dtype, compiled):
        times, losses, peak = run_torch(model, data, device, dtype,
                                        compiled, args.lr)
        return times, losses, {"peak_memory_bytes": peak}

    # The rows the goals need first (eager f32 is the ground truth), then
    # torch.compile's, whose compiles take longest.
    for dtype in dtypes:
        if not args.only_zb:
            attempt("torch eager", dtype,
                    lambda dtype=dtype: torch_row(dtype, False))
        if device.type == "cpu" and dtype != "f32":
            print(f"zb-run {dtype}: skipped (on the CPU bf16 stashes need "
                  "a pipeline of two or more ranks)")
            continue
        attempt("zb-run", dtype,
                lambda dtype=dtype: run_ours(program, data, device, dtype,
                                             args.lr, args.microbatches,
                                             args.timeout))
    for dtype in [] if args.no_compile or args.only_zb else dtypes:
        attempt("torch.compile", dtype,
                lambda dtype=dtype: torch_row(dtype, True))

    def report_failures():
        for f in failed:
            print("gpu_gpt_bench: FAIL:", f, file=sys.stderr)

    if args.only_zb:
        for r in rows:
            print(f"{r['impl']} {r['dtype']}: "
                  f"{1e3 * median_after_warmup(r['times'], args.warmup):.2f}"
                  f" ms per step; losses {r['losses']} (--only-zb: not "
                  "compared with PyTorch)")
        report_failures()
        return 1 if failed or not rows else 0
    truth = next((r["losses"] for r in rows
                  if r["impl"] == "torch eager" and r["dtype"] == "f32"),
                 None)
    if truth is None:
        report_failures()
        sys.exit("gpu_gpt_bench: no PyTorch eager f32 run to compare with")
    eager = {r["dtype"]: median_after_warmup(r["times"], args.warmup)
             for r in rows if r["impl"] == "torch eager"}
    header = (f"{'impl':14} {'dtype':5} {'step ms':>9} {'TFLOP/s':>8} "
              f"{'x eager':>8} {'last loss':>10} {'max rel':>9} "
              f"{'peak MB':>9} {'stash MB (pred.)':>17}")
    print(header)
    print("-" * len(header))
    for r in rows:
        ms = 1e3 * median_after_warmup(r["times"], args.warmup)
        diff = max(abs(a - b) / abs(b) for a, b in zip(r["losses"], truth))
        mem = r["memory"]

        def mb(key):
            value = mem.get(key)
            return "-" if value is None else f"{value / 2**20:.0f}"

        stash = (f"{mb('peak_stash_bytes')} ({mb('predicted_stash_bytes')})"
                 if "peak_stash_bytes" in mem else "-")
        base = eager.get(r["dtype"])
        ratio = f"{ms / (1e3 * base):8.3f}" if base else f"{'-':>8}"
        print(f"{r['impl']:14} {r['dtype']:5} {ms:9.2f} "
              f"{flops / (ms * 1e-3) / 1e12:8.2f} {ratio} "
              f"{r['losses'][-1]:10.5f} {diff:9.1e} "
              f"{mb('peak_memory_bytes'):>9} {stash:>17}")
        if diff > TOLERANCE[r["dtype"]]:
            failed.append(f"{r['impl']} {r['dtype']}: the loss curve is "
                          f"{diff:.1e} from PyTorch eager f32's (goal "
                          f"{TOLERANCE[r['dtype']]:.0e})")
    print(json.dumps({"rows": [{k: r[k] for k in ("impl", "dtype", "times",
                                                  "losses")} for r in rows],
                      "flops_per_step": flops}))
    report_failures()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
