#!/usr/bin/env python3
"""Hugging Face models trained on one process: ours against PyTorch eager.

transformers' GPT2LMHeadModel and LlamaForCausalLM (random initialisation,
nothing downloaded), imported with ``zb.from_torch`` with their own loss
(``labels=``), and torchvision's resnet18 (``--models resnet18``: cross
entropy over 10 classes, training-mode batch norm, B images of --image
pixels square), trained with ``zb-run`` on one process, next to PyTorch
eager training the same model on the same data: one BLAS / intra-op thread
each, SGD, M microbatches of B sequences a step. Per model and row: the
median step time over the steps after the first two (ours from zb-run's
metrics, PyTorch's around zero_grad, the microbatches' forward and
backward and the update), ours / PyTorch's, and the loss curves' largest
relative difference (exits 1 above 1e-3). With ``--repeat N`` the two sides
run N times each, alternating, and the row shows the medians and the range
of the pairs' ratios.

    python3 bench/hf_bench.py [--models gpt2,llama,resnet18] [--width 256]
                              [--layers 4] [--context 128] [--image 64]
                              [--batch 4]
                              [--microbatches 4] [--steps 6] [--repeat 1]

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

VOCAB = 1024
CLASSES = 10
# Steps left out of the medians: the first ones warm caches and allocators.
WARMUP = 2
# One BLAS and intra-op thread for both sides.
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def build_model(args):
    """``args.model`` (gpt2, llama or resnet18) returning its own loss of
    one microbatch."""
    import torch
    import transformers

    name = args.model
    torch.manual_seed(0)
    heads = max(1, args.width // 64)
    if name == "gpt2":
        config = transformers.GPT2Config(
            n_layer=args.layers, n_embd=args.width, n_head=heads,
            vocab_size=VOCAB, n_positions=args.context, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
        model = transformers.GPT2LMHeadModel(config)
    elif name == "llama":
        config = transformers.LlamaConfig(
            hidden_size=args.width,
            intermediate_size=args.width * 8 // 3 // 8 * 8,
            num_hidden_layers=args.layers, num_attention_heads=heads,
            num_key_value_heads=heads, vocab_size=VOCAB,
            max_position_embeddings=args.context, bos_token_id=0,
            eos_token_id=0)
        model = transformers.LlamaForCausalLM(config)
    elif name == "resnet18":
        import torchvision

        class Classify(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, images, labels):
                return torch.nn.functional.cross_entropy(self.inner(images),
                                                         labels)

        # Training mode: batch norm over the microbatch.
        return Classify(torchvision.models.resnet18(num_classes=CLASSES))
    else:
        sys.exit(f"hf_bench: error: unknown model '{name}' (gpt2, llama, "
                 "resnet18)")

    class Loss(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, ids):
            return self.inner(input_ids=ids, labels=ids).loss

    return Loss(model).eval()


def batches(args):
    import torch

    gen = torch.Generator().manual_seed(1)
    if args.model == "resnet18":
        shape = (args.batch, 3, args.image, args.image)
        return [(torch.randn(shape, generator=gen),
                 torch.randint(0, CLASSES, (args.batch,), generator=gen))
                for _ in range(args.microbatches)]
    return [(torch.randint(0, VOCAB, (args.batch, args.context),
                           generator=gen),)
            for _ in range(args.microbatches)]


def prepare_ours(args, work):
    """The zb-run command line training ``args.model``, compiled once."""
    import zerobubble as zb

    data = batches(args)
    program = zb.from_torch(build_model(args), data[0])
    paths = hf_training.save_program(program, data, work, args.model)
    command = hf_training.zb_run_command("hf_bench", args.bin_dir, paths,
                                         args.microbatches, args.lr)
    command += ["--cache-dir", os.path.join(work, "cache")]
    subprocess.run(command + ["--compile-only"], check=True,
                   env=ENV, capture_output=True)
    return command


def run_ours(command, args, work):
    metrics = os.path.join(work, "metrics.json")
    proc = subprocess.run(command + ["--steps", str(args.steps),
                                     "--metrics", metrics],
                          env=ENV, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"hf_bench: error: zb-run failed:\n{proc.stdout}"
                 f"{proc.stderr}")
    with open(metrics) as f:
        result = json.load(f)
    rates = result["microbatches_per_s"][WARMUP:]
    return (statistics.median(args.microbatches / r * 1e3 for r in rates),
            result["loss"])


def run_torch(args):
    proc = subprocess.run(hf_training.eager_command("hf_bench", args),
                          env=ENV, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"hf_bench: error: PyTorch eager failed:\n{proc.stderr}")
    result = hf_training.eager_result(proc.stdout)
    return (statistics.median(result["times"][WARMUP:]) * 1e3,
            result["losses"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="gpt2,llama")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--image", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--bin-dir",
                        default=os.environ.get("ZB_BIN_DIR", "build/bin"))
    args = parser.parse_args()
    if args.steps <= WARMUP:
        sys.exit(f"hf_bench: error: --steps must exceed {WARMUP}")

    print(f"width {args.width}, {args.layers} blocks, context "
          f"{args.context}, vocabulary {VOCAB}, {args.microbatches} "
          f"microbatches of {args.batch} sequences (resnet18: images of "
          f"{args.image}x{args.image}), {args.steps} steps "
          f"(medians of steps {WARMUP + 1}..{args.steps}), one thread "
          f"each, SGD lr {args.lr}")
    print(f"{'model':6} {'ours ms':>9} {'torch ms':>9} {'ours/torch':>10}"
          f"  {'pairs':>11}  {'loss first -> last':>20}  curves")
    disagree = False
    with tempfile.TemporaryDirectory(prefix="hf-bench-") as work:
        for name in args.models.split(","):
            args.model = name
            command = prepare_ours(args, work)
            ours, theirs, ratios = [], [], []
            for _ in range(args.repeat):
                ms, our_losses = run_ours(command, args, work)
                torch_ms, torch_losses = run_torch(args)
                ours.append(ms)
                theirs.append(torch_ms)
                ratios.append(ms / torch_ms)
            worst = max(abs(a - b) / abs(b)
                        for a, b in zip(our_losses, torch_losses))
            agree = worst <= 1e-3
            disagree |= not agree
            mine, other = statistics.median(ours), statistics.median(theirs)
            span = f"{min(ratios):.3f}-{max(ratios):.3f}"
            print(f"{name:6} {mine:9.1f} {other:9.1f} {mine / other:10.3f}"
                  f"  {span:>11}  {our_losses[0]:8.4f} -> "
                  f"{our_losses[-1]:8.4f}  "
                  f"{'agree' if agree else 'DIFFER'} (max rel diff "
                  f"{worst:.1e})", flush=True)
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
