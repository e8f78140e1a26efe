#!/usr/bin/env python3
"""zb-run against torch.distributed.pipelining on the same models.

The MLP and the GPT example, written once in PyTorch
(``zerobubble.models``), are trained for the same steps on the same data
from the same initial parameters on P CPU ranks:

- by ``torch.distributed.pipelining`` (gloo backend) with Schedule1F1B,
  ScheduleInterleavedZeroBubble (one stage per rank: ZB-H1) and
  ScheduleZBVZeroBubble (two stages per rank, V placement);
- by ``zb-run --np P`` with 1f1b, zb-h1 and zb-v, the model imported
  through ``zerobubble.from_torch`` with P x V stages marked by
  ``zerobubble.pipe_cut`` where PyTorch's stages are cut (at medium and
  large sizes ``zb-run --balance`` instead cuts them at times measured
  before training, the time it takes left out: ``--no-balance`` keeps the
  markers' cut); and with zb-auto (at its default memory limit
  of 2P microbatches' activations), which has no PyTorch counterpart: its
  row compares with the fastest PyTorch schedule of the same run.

Every step trains on the same M microbatches (so the loss falls) with
plain SGD. It prints the median step time of each side (the first steps
are warm-up) and the ratio ours/theirs per schedule (below 1: zb-run is
faster), and checks that the two loss curves agree (exit code 1 if not).

``--size`` picks the models: ``small`` (the default) the tiny MLP and GPT
above, where a step is mostly per-action overhead; ``medium`` a GPT of
width 256, 8 blocks, context 64, vocabulary 512, batch 4; ``large`` width
512, 8 blocks, context 128. Beside each row it prints each side's fraction
of the roofline: the step's FLOPs (counted from the model by
``torch.utils.flop_counter`` on one microbatch's forward and backward,
times M) / (P x threads x the single-thread sgemm rate measured in the
same run) / the step time: the rate of PyTorch's torch.mm ("roof"
columns) and, for ours, the fastest of that, OpenBLAS and zb-run's own
kernel with B packed once (zb-forward-bench's 512^3 gemm row;
"ours/faster"), the machine's limit where the libraries differ. A CPU
that raises the clock of one busy core runs each core slower while all P
ranks compute: "roof loaded" divides ours by P x threads x torch.mm's
rate per process with P processes measuring it at once.

A step's time moves by a few percent from run to run on a shared host.
``--repeat N`` runs each row N times, ours and theirs alternating, each
pair after a fresh reading of torch.mm's rate; the row then shows the
medians (the roofline at the row's median rate) and the range of the
pairs' ratios (zb-auto's runs against the fastest PyTorch row's median)
and of the rate.

    python3 bench/peer_torch.py [--size small|medium|large]
        [--models mlp,gpt] [--ranks 2] [--microbatches 8] [--steps N]
        [--threads 1] [--repeat N] [--quick]

Tools are found through $ZB_BIN_DIR (default build/bin); the package is
imported from python/ unless installed.
"""

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
os.environ.setdefault("ZB_BIN_DIR", str(ROOT / "build" / "bin"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed import pipelining  # noqa: E402

import zerobubble as zb  # noqa: E402
from zerobubble.models import GPT, MLP  # noqa: E402

# (ours, theirs, stages per rank); theirs None: compared with the fastest
# of theirs measured in the same run.
SCHEDULES = {"1f1b": ("Schedule1F1B", 1),
             "zb-h1": ("ScheduleInterleavedZeroBubble", 1),
             "zb-v": ("ScheduleZBVZeroBubble", 2),
             "zb-auto": (None, 1)}
LOSS_RTOL = 1e-3

# GPT configurations of --size medium and large; small is GPT()'s default.
SIZES = {
    "small": {},
    "medium": dict(vocab=512, context=64, width=256, heads=4, layers=8,
                   hidden=1024, batch=4),
    "large": dict(vocab=512, context=128, width=512, heads=8, layers=8,
                  hidden=2048, batch=4),
}
# Default steps and warm-up steps per size.
STEPS = {"small": (20, 3), "medium": (8, 2), "large": (5, 1)}


def make_model(kind, stages, seed, size="small"):
    torch.manual_seed(seed)
    if kind == "mlp":
        # examples/mlp.mlir with one more hidden layer, so that it splits
        # into the four stages zb-v needs on two ranks.
        return MLP(sizes=(16, 32, 32, 32, 10), stages=stages, batch=8)
    return GPT(stages=stages, **SIZES[size])


def step_flops(args, kind):
    """FLOPs of one training step: one microbatch's forward and backward,
    counted by torch's FLOP counter, times M."""
    import logging
    # It warns on import that it cannot count Triton kernels, which the CPU
    # never runs.
    logging.getLogger("torch.utils.flop_counter").setLevel(logging.ERROR)
    from torch.utils.flop_counter import FlopCounterMode
    model = make_model(kind, 1, args.seed, args.size)
    inputs = model.example_inputs(torch.Generator().manual_seed(0))
    counter = FlopCounterMode(display=False)
    with counter:
        model(*inputs).backward()
    return counter.get_total_flops() * args.microbatches


def sgemm_rate(threads=1, n=512, seconds=1.0):
    """FLOP/s of an n x n x n float32 matmul on `threads` threads."""
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        torch.mm(a, b)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        torch.mm(a, b)
        count += 1
    elapsed = time.perf_counter() - start
    torch.set_num_threads(saved)
    return 2.0 * n ** 3 * count / elapsed


def _loaded_rate_worker(barrier, results, threads, n, seconds):
    barrier.wait()
    results.put(sgemm_rate(threads, n, seconds))


def loaded_sgemm_rate(procs, threads=1, n=512, seconds=1.0):
    """sgemm_rate per process with `procs` processes measuring at once: a
    rank's rate while every rank computes (a CPU that raises one busy
    core's clock runs each core slower when all of them are busy)."""
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    workers = [ctx.Process(target=_loaded_rate_worker,
                           args=(barrier, results, threads, n, seconds))
               for _ in range(procs)]
    for w in workers:
        w.start()
    rates = [results.get() for _ in workers]
    for w in workers:
        w.join()
    return statistics.mean(rates)


def runtime_sgemm_rates(threads=1, n=512):
    """FLOP/s of an n x n x n float32 product by OpenBLAS (zb-forward-bench's
    cblas_sgemm column) and by zbrt_sgemm with B packed once (its "B packed"
    column: what a step's weight products run), as a dict; empty without the
    binary."""
    import subprocess
    binary = Path(os.environ["ZB_BIN_DIR"]) / "zb-forward-bench"
    if not binary.exists():
        return {}
    out = subprocess.run([str(binary), "--only", "gemm", "--tsv",
                          "--threads", str(threads)], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        fields = line.split("\t")
        if fields[0] == "gemm" and fields[1] == f"{n}x{n}x{n}":
            flops = 2.0 * n ** 3
            return {"OpenBLAS": flops / (float(fields[4]) * 1e-6),
                    "zbrt, B packed": flops / (float(fields[6]) * 1e-6)}
    return {}


def make_data(model, steps, microbatches, seed):
    """Every step trains on the same microbatches, so the loss falls."""
    gen = torch.Generator().manual_seed(seed + 1)
    batch = [model.example_inputs(gen) for _ in range(microbatches)]
    return [batch] * steps


def local_stages(schedule, rank, ranks):
    if SCHEDULES[schedule][1] == 2:
        return [rank, 2 * ranks - 1 - rank]
    return [rank]


def torch_worker(rank, args, kind, schedule, port, out_dir):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks,
                            init_method=f"tcp://127.0.0.1:{port}")
    chunks = SCHEDULES[schedule][1]
    total = args.ranks * chunks
    model = make_model(kind, 1, args.seed, args.size)
    data = make_data(model, args.steps, args.microbatches, args.seed)
    modules = model.split(total)
    mine = local_stages(schedule, rank, args.ranks)
    stages = [pipelining.PipelineStage(modules[i], i, total,
                                       torch.device("cpu"))
              for i in mine]
    cls = getattr(pipelining, SCHEDULES[schedule][0])
    if chunks == 1 and schedule == "1f1b":
        runner = cls(stages[0], args.microbatches, loss_fn=model.loss_fn)
    else:
        runner = cls(stages, args.microbatches, loss_fn=model.loss_fn)
    params = [p for i in mine for p in modules[i].parameters()]
    optimizer = torch.optim.SGD(params, lr=args.lr)
    first, last = 0 in mine, total - 1 in mine

    times, losses = [], []
    for step in data:
        inputs = torch.cat([mb[0] for mb in step])
        targets = torch.cat([mb[1] for mb in step])
        optimizer.zero_grad()
        mb_losses = [] if last else None
        dist.barrier()
        start = time.perf_counter()
        call_args = (inputs,) if first else ()
        kwargs = {"target": targets, "losses": mb_losses} if last else {}
        runner.step(*call_args, **kwargs)
        optimizer.step()
        times.append(time.perf_counter() - start)
        if last:
            losses.append(torch.stack(mb_losses).detach().mean().item())
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if last:
        (Path(out_dir) / "losses.json").write_text(json.dumps(losses))
    if rank == 0:
        (Path(out_dir) / "times.json").write_text(
            json.dumps(slowest.tolist()))
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torch(args, kind, schedule):
    with tempfile.TemporaryDirectory(prefix="peer-torch-") as out:
        torch.multiprocessing.spawn(
            torch_worker, args=(args, kind, schedule, free_port(), out),
            nprocs=args.ranks, join=True)
        times = json.loads((Path(out) / "times.json").read_text())
        losses = json.loads((Path(out) / "losses.json").read_text())
    return times, losses


def run_torch_ms(args, kind, schedule):
    """PyTorch's median step time (ms) and losses with `schedule`'s
    counterpart."""
    times, losses = run_torch(args, kind, schedule)
    return 1e3 * median_after_warmup(times, args.warmup), losses


def run_ours(args, kind, schedule):
    chunks = SCHEDULES[schedule][1]
    model = make_model(kind, args.ranks * chunks, args.seed, args.size)
    data = make_data(model, args.steps, args.microbatches, args.seed)
    program = zb.from_torch(model, data[0][0])
    result = zb.run(program, ranks=args.ranks, schedule=schedule,
                    microbatches=args.microbatches, steps=args.steps,
                    lr=args.lr, inputs=data, threads=args.threads,
                    balance=args.balance and args.size != "small")
    times = [args.microbatches / r for r in result.microbatches_per_s]
    return times, result.losses


def median_after_warmup(times, warmup):
    return statistics.median(times[warmup:] if len(times) > warmup
                             else times)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=sorted(SIZES), default="small",
                   help="small: the tiny models (default); medium, large: "
                   "GPTs where compute dominates")
    p.add_argument("--models", default=None,
                   help="comma-separated: mlp, gpt (default both for "
                   "small, gpt otherwise)")
    p.add_argument("--schedules", default=",".join(SCHEDULES),
                   help="comma-separated subset of " + ", ".join(SCHEDULES))
    p.add_argument("--ranks", type=int, default=2, help="pipeline ranks P")
    p.add_argument("--microbatches", type=int, default=8,
                   help="microbatches M per step")
    p.add_argument("--steps", type=int, default=None,
                   help="training steps (default 20 small, 8 medium, "
                   "5 large)")
    p.add_argument("--warmup", type=int, default=None,
                   help="first steps left out of the median (default 3, "
                   "2, 1)")
    p.add_argument("--threads", type=int, default=1,
                   help="threads per rank (torch.set_num_threads and "
                   "OPENBLAS_NUM_THREADS)")
    p.add_argument("--lr", type=float, default=0.1, help="SGD rate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1,
                   help="runs of each row, ours and theirs alternating, "
                   "each after a fresh torch.mm rate; the row shows the "
                   "medians and the range of the pairs' ratios (default 1)")
    p.add_argument("--no-balance", dest="balance", action="store_false",
                   help="at medium and large, cut our stages where "
                   "PyTorch's are (the markers) instead of at measured "
                   "times (zb-run --balance)")
    p.add_argument("--quick", action="store_true",
                   help="5 steps, 1 warm-up (a smoke run)")
    args = p.parse_args()
    steps, warmup = STEPS[args.size]
    args.steps = args.steps or steps
    args.warmup = warmup if args.warmup is None else args.warmup
    if args.quick:
        args.steps, args.warmup = min(args.steps, 5), 1
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if args.models is None:
        args.models = "mlp,gpt" if args.size == "small" else "gpt"
    if args.size != "small" and "mlp" in args.models.split(","):
        p.error("--size medium and large are GPTs; the MLP is small only")
    return args


def main():
    args = parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    print("peer benchmark: zb-run vs torch.distributed.pipelining "
          f"(torch {torch.__version__}, gloo), CPU")
    print(f"P={args.ranks} ranks, M={args.microbatches} microbatches/step, "
          f"{args.steps} steps (median over the last "
          f"{args.steps - args.warmup}), {args.threads} thread(s)/rank, "
          f"SGD lr {args.lr}, size {args.size}"
          + (", ours cut by zb-run --balance"
             if args.balance and args.size != "small" else "")
          + (", ours lending a waiting rank's core to the other's products"
             if os.environ.get("ZB_LEND_CORES", "1") in ("", "1")
             else ", ours not lending cores (ZB_LEND_CORES=0)"))
    rate = sgemm_rate()
    loaded = loaded_sgemm_rate(args.ranks, args.threads)
    others = runtime_sgemm_rates()
    peak = args.ranks * args.threads * rate
    # The machine's limit: the fastest sgemm measured.
    limit = args.ranks * args.threads * max([rate, *others.values()])
    print(f"single-thread sgemm: {rate / 1e9:.1f} GFLOP/s (torch.mm), "
          + (", ".join(f"{r / 1e9:.1f} GFLOP/s ({name})"
                       for name, r in others.items())
             if others else "zb-run's not measured (no zb-forward-bench)")
          + f"; roofline P x threads x torch's = {peak / 1e9:.1f} GFLOP/s, "
          f"x the fastest = {limit / 1e9:.1f} GFLOP/s")
    print(f"torch.mm with the {args.ranks} ranks' threads measuring at once: "
          f"{loaded / 1e9:.1f} GFLOP/s each ({loaded / rate:.0%} of one "
          f"alone); \"roof loaded\" divides by P x threads x that")
    flops = {kind: step_flops(args, kind)
             for kind in args.models.split(",")}
    for kind, f in flops.items():
        print(f"{kind}: {f / 1e9:.3f} GFLOP per step "
              f"(>= {1e3 * f / peak:.1f} ms at torch's roofline, "
              f"{1e3 * f / limit:.1f} ms at the fastest)")
    header = (f"{'model':<5} {'ours':<7} {'theirs':<40} {'ours ms':>9} "
              f"{'theirs ms':>10} {'ours/theirs':>12} {'roof ours':>10} "
              f"{'roof theirs':>12} {'ours/faster':>12} "
              f"{'roof loaded':>12}  loss first -> last   curves")
    print(header)
    print("-" * len(header))
    failures = 0
    for kind in args.models.split(","):
        # PyTorch's rows of this model: schedule -> (median ms, losses).
        measured = {}
        for schedule in args.schedules.split(","):
            # Ours and theirs alternate, each pair after a fresh reading of
            # torch.mm's rate: a host that speeds up or slows down during
            # the row moves both sides and the roofline together.
            ours_runs, theirs_runs, rates, loads = [], [], [], []
            own_counterpart = SCHEDULES[schedule][0] is not None
            for _ in range(args.repeat):
                rates.append(sgemm_rate() if args.repeat > 1 else rate)
                loads.append(loaded_sgemm_rate(args.ranks, args.threads)
                             if args.repeat > 1 else loaded)
                ours_t, ours_l = run_ours(args, kind, schedule)
                ours_runs.append(
                    1e3 * median_after_warmup(ours_t, args.warmup))
                if own_counterpart:
                    ms, theirs_l = run_torch_ms(args, kind, schedule)
                    theirs_runs.append(ms)
            ours_ms = statistics.median(ours_runs)
            row_rate = statistics.median(rates)
            row_peak = args.ranks * args.threads * row_rate
            row_limit = args.ranks * args.threads * max([row_rate,
                                                         *others.values()])
            if own_counterpart:
                theirs_ms = statistics.median(theirs_runs)
                measured[schedule] = (theirs_ms, theirs_l)
                theirs = SCHEDULES[schedule][0]
                ratios = [a / b for a, b in zip(ours_runs, theirs_runs)]
            else:
                if not measured:
                    measured["1f1b"] = run_torch_ms(args, kind, "1f1b")
                best = min(measured, key=lambda name: measured[name][0])
                theirs_ms, theirs_l = measured[best]
                theirs = "fastest: " + SCHEDULES[best][0]
                ratios = [a / theirs_ms for a in ours_runs]
            diff = max(abs(a - b) / max(abs(b), 1e-12)
                       for a, b in zip(ours_l, theirs_l))
            agree = len(ours_l) == len(theirs_l) and diff <= LOSS_RTOL
            failures += not agree
            roof_ours = flops[kind] / row_peak / (ours_ms / 1e3)
            roof_theirs = flops[kind] / row_peak / (theirs_ms / 1e3)
            roof_limit = flops[kind] / row_limit / (ours_ms / 1e3)
            roof_loaded = flops[kind] / (
                args.ranks * args.threads * statistics.median(loads)) / (
                    ours_ms / 1e3)
            spread = (f"   {len(ratios)} runs: ratio {min(ratios):.3f}-"
                      f"{max(ratios):.3f}, torch.mm "
                      f"{min(rates) / 1e9:.0f}-{max(rates) / 1e9:.0f} "
                      "GFLOP/s" if args.repeat > 1 else "")
            print(f"{kind:<5} {schedule:<7} {theirs:<40} "
                  f"{ours_ms:>9.3f} {theirs_ms:>10.3f} "
                  f"{ours_ms / theirs_ms:>12.3f} {roof_ours:>10.1%} "
                  f"{roof_theirs:>12.1%} {roof_limit:>12.1%} "
                  f"{roof_loaded:>12.1%}  "
                  f"{theirs_l[0]:.4f} -> {theirs_l[-1]:.4f}   "
                  f"{'agree' if agree else 'DIFFER'} "
                  f"(max rel diff {diff:.1e}){spread}", flush=True)
    if failures:
        print(f"{failures} loss curve(s) differ by more than {LOSS_RTOL}")
        sys.exit(1)


if __name__ == "__main__":
    main()
