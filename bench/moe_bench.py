#!/usr/bin/env python3
"""A mixture-of-experts model trained three ways on this machine.

transformers' Mixtral (default: one layer of width 256, 8 experts of 512,
2 chosen per token, vocabulary 256, 4 sequences of 64 tokens a microbatch,
random initialisation), one process, one BLAS thread, SGD:

- ours, grouped: `zb.from_torch` as it exports experts (each expert's rows
  in one gemm, the chosen experts' FLOPs) and `zb-run`;
- ours, batched_mm: the same model exported through transformers' own
  static implementation, which gathers each row's expert weights (a
  [rows, out, in] copy) and multiplies row by row;
- PyTorch eager with transformers' default experts (grouped_mm), the same
  steps and learning rate.

Prints per row the median step time over the steps after the first,
samples/s, the ratio to ours grouped, the peak resident memory of the
process and the first step's loss (the three agree to float32 rounding).

    python3 bench/moe_bench.py [--layers L] [--width D] [--experts E]
                               [--top-k K] [--steps S] [--microbatches M]

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
sys.path.insert(0, os.path.join(ROOT, "python"))

import hf_training  # noqa: E402


def build_model(args):
    import torch
    import transformers

    config = transformers.MixtralConfig(
        hidden_size=args.width, intermediate_size=2 * args.width,
        num_hidden_layers=args.layers, num_attention_heads=4,
        num_key_value_heads=1, num_local_experts=args.experts,
        num_experts_per_tok=args.top_k, vocab_size=args.vocab,
        max_position_embeddings=args.context, bos_token_id=0,
        eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.MixtralForCausalLM(config)

    class Loss(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, ids, labels):
            return self.inner(input_ids=ids, labels=labels).loss

    return Loss(model)


def batches(args):
    import torch

    gen = torch.Generator().manual_seed(1)
    shape = (args.batch, args.context)
    return [(torch.randint(0, args.vocab, shape, generator=gen),
             torch.randint(0, args.vocab, shape, generator=gen))
            for _ in range(args.microbatches)]


# Runs argv[1:] and prints its peak resident KiB last on stderr. A child
# forked from this process would start its peak at this process's size
# (PyTorch included); one forked from this small one does not.
MEASURE = r"""
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"peak-rss-kib {peak}", file=sys.stderr)
sys.exit(code)
"""


def run_measured(cmd, env):
    """(return code, stdout, stderr, peak resident MiB) of `cmd`."""
    proc = subprocess.run([sys.executable, "-c", MEASURE, *map(str, cmd)],
                          env=env, capture_output=True, text=True)
    lines = proc.stderr.rstrip().splitlines()
    peak = float(lines[-1].split()[1]) / 1024 if lines else float("nan")
    return proc.returncode, proc.stdout, "\n".join(lines[:-1]), peak


def ours(args, model, data, work, implementation):
    import zerobubble as zb
    from zerobubble import frontend

    tag = implementation or "grouped"
    if implementation:
        # from_torch switches experts to its own while it exports: make it
        # switch to `implementation` instead.
        switch = frontend._static_experts
        frontend._static_experts = lambda module: switch(module,
                                                         implementation)
        try:
            program = zb.from_torch(model, data[0])
        finally:
            frontend._static_experts = switch
    else:
        program = zb.from_torch(model, data[0])
    paths = hf_training.save_program(program, data, work, tag)
    paths["json"] = os.path.join(work, f"{tag}.json")
    common = hf_training.zb_run_command("moe_bench", args.bin_dir, paths,
                                        args.microbatches, args.lr)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1",
               ZB_CACHE_DIR=os.path.join(work, "cache"))
    # Compiled first, so that the timed run's memory is the training's.
    subprocess.run(common + ["--compile-only"], check=True, env=env,
                   capture_output=True)
    code, out, err, rss = run_measured(
        common + ["--steps", str(args.steps), "--metrics", paths["json"]],
        env)
    if code != 0:
        sys.exit(f"moe_bench: error: zb-run ({tag}) failed:\n{out}{err}")
    with open(paths["json"]) as f:
        metrics = json.load(f)
    samples = metrics["samples_per_s"][1:] or metrics["samples_per_s"]
    per_step = args.microbatches * args.batch
    return {"row": f"ours, {tag}",
            "step_ms": statistics.median(per_step / s * 1e3 for s in samples),
            "rss": rss, "loss": metrics["loss"][0]}


def torch_eager(args):
    code, out, err, rss = run_measured(
        hf_training.eager_command("moe_bench", args),
        dict(os.environ, OMP_NUM_THREADS="1"))
    if code != 0:
        sys.exit(f"moe_bench: error: PyTorch eager failed:\n{err}")
    result = hf_training.eager_result(out)
    times = result["times"][1:] or result["times"]
    return {"row": "PyTorch eager (grouped_mm)",
            "step_ms": statistics.median(times) * 1e3, "rss": rss,
            "loss": result["losses"][0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=1)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--bin-dir",
                        default=os.environ.get("ZB_BIN_DIR", "build/bin"))
    args = parser.parse_args()

    model = build_model(args)
    data = batches(args)
    rows = []
    with tempfile.TemporaryDirectory(prefix="moe_bench.") as work:
        rows.append(ours(args, model, data, work, None))
        rows.append(ours(args, model, data, work, "batched_mm"))
    rows.append(torch_eager(args))

    tokens = args.batch * args.context
    print(f"Mixtral: {args.layers} layer(s), width {args.width}, "
          f"{args.experts} experts of {2 * args.width}, top {args.top_k}, "
          f"{tokens} tokens x {args.microbatches} microbatch(es) per step, "
          f"{args.steps} steps, one thread")
    print(f"{'':30} {'step ms':>9} {'samples/s':>10} {'vs grouped':>10} "
          f"{'peak MiB':>9} {'first loss':>11}")
    base = rows[0]["step_ms"]
    per_step = args.microbatches * args.batch
    for row in rows:
        print(f"{row['row']:30} {row['step_ms']:9.1f} "
              f"{per_step / row['step_ms'] * 1e3:10.1f} "
              f"{row['step_ms'] / base:10.2f} {row['rss']:9.0f} "
              f"{row['loss']:11.6f}")


if __name__ == "__main__":
    main()
