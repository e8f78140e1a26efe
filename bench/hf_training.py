"""What the benchmarks that train a transformers model on one process next
to PyTorch eager share (hf_bench.py, moe_bench.py): the program saved for
zb-run and its command line, and PyTorch eager's training loop, run in a
child process of one intra-op thread.

A benchmark module using it defines ``build_model(args)`` (the module
returning one microbatch's loss) and ``batches(args)`` (the microbatches,
each a tuple of the module's arguments); ``args`` holds ``steps`` and
``lr``.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def save_program(program, data, work, tag):
    """``program`` (a zerobubble Program), its parameters and the
    microbatches ``data`` in ``work``: the paths, keyed mlir, params.npz
    and inputs.npz."""
    paths = {k: os.path.join(work, f"{tag}.{k}")
             for k in ("mlir", "params.npz", "inputs.npz")}
    program.save(paths["mlir"])
    program.save_params(paths["params.npz"])
    program.save_inputs(paths["inputs.npz"], data)
    return paths


def zb_run_command(bench, bin_dir, paths, microbatches, lr):
    """zb-run training the saved program with SGD (exits naming ``bench``
    when zb-run is not built)."""
    zb_run = os.path.join(bin_dir, "zb-run")
    if not os.path.isfile(zb_run):
        sys.exit(f"{bench}: error: {zb_run} not found (build first, or "
                 "pass --bin-dir / set ZB_BIN_DIR)")
    return [zb_run, paths["mlir"], "--params", paths["params.npz"],
            "--inputs", paths["inputs.npz"], "--microbatches",
            str(microbatches), "--lr", str(lr)]


EAGER_CHILD = r"""
import argparse, importlib, json, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
bench = importlib.import_module(sys.argv[2])
args = argparse.Namespace(**json.loads(sys.argv[3]))
model = bench.build_model(args)
data = bench.batches(args)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
times, losses = [], []
for _ in range(args.steps):
    start = time.perf_counter()
    opt.zero_grad()
    total = 0.0
    for batch in data:
        loss = model(*batch) / len(data)
        loss.backward()
        total += loss.item()
    opt.step()
    times.append(time.perf_counter() - start)
    losses.append(total)
print(json.dumps({"times": times, "losses": losses}))
"""


def eager_command(module, args):
    """The command training ``module``'s model in PyTorch eager: it prints
    one JSON line last, each step's seconds (``times``, from zero_grad to
    the update) and loss (``losses``)."""
    spec = {k: v for k, v in vars(args).items() if k != "bin_dir"}
    return [sys.executable, "-c", EAGER_CHILD, HERE, module,
            json.dumps(spec)]


def eager_result(stdout):
    """The times and losses eager_command's child printed."""
    return json.loads(stdout.strip().splitlines()[-1])
