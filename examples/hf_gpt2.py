"""Train a Hugging Face GPT-2 pipelined with ZeroBubble MLIR, next to
PyTorch training the same model on the same data.

A small GPT-2 (transformers.GPT2LMHeadModel, random weights, nothing
downloaded) is imported with ``zerobubble.from_torch`` using the model's own
loss (``labels=``); its tied token embedding and output projection stay one
parameter. ``zb.run`` then trains it on two pipeline ranks with ZB-H1: the
embedding lives on the first stage and the projection on the last, so each
rank holds a copy of the tied weight and the step sums its gradient over
both. PyTorch trains the same model with ``torch.optim.AdamW``; the two loss
curves are printed side by side.

    PYTHONPATH=python python3 examples/hf_gpt2.py [--steps 10] [--ranks 2]

Needs the built tools (build/bin, or $ZB_BIN_DIR), torch and transformers.
"""

import argparse
import sys
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import zerobubble as zb  # noqa: E402

VOCAB, CONTEXT, BATCH = 128, 16, 2


class CausalLMLoss(torch.nn.Module):
    """The model's own training loss for one microbatch of token ids."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, labels=ids).loss


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--schedule", default="zb-h1")
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=4, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=CONTEXT,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        bos_token_id=0, eos_token_id=0)
    model = CausalLMLoss(transformers.GPT2LMHeadModel(config).eval())

    # A task the model can learn: count up from a random start (mod the
    # vocabulary). M microbatches of BATCH sequences per step.
    gen = torch.Generator().manual_seed(1)

    def sequences():
        start = torch.randint(0, VOCAB, (BATCH, 1), generator=gen)
        return ((start + torch.arange(CONTEXT)) % VOCAB,)

    data = [[sequences() for _ in range(args.microbatches)]
            for _ in range(args.steps)]

    program = zb.from_torch(model, data[0][0])
    print(f"{program}; tied: {program.tied}")

    result = zb.run(program, ranks=args.ranks, schedule=args.schedule,
                    microbatches=args.microbatches, steps=args.steps,
                    optimizer="adamw", lr=args.lr, inputs=data)

    reference = CausalLMLoss(transformers.GPT2LMHeadModel(config).eval())
    reference.load_state_dict(model.state_dict())
    optimizer = torch.optim.AdamW(reference.parameters(), lr=args.lr)
    torch_losses = []
    for step in data:
        optimizer.zero_grad()
        loss = sum(reference(*mb) for mb in step) / len(step)
        loss.backward()
        optimizer.step()
        torch_losses.append(loss.item())

    ours_title = f"zerobubble ({args.schedule}, P={args.ranks})"
    print(f"\n{'step':>4}  {ours_title:>26}  {'PyTorch':>10}  "
          f"{'rel. diff':>9}")
    for step, (ours, theirs) in enumerate(zip(result.losses, torch_losses)):
        print(f"{step:>4}  {ours:>26.6f}  {theirs:>10.6f}  "
              f"{abs(ours - theirs) / abs(theirs):>9.1e}")
    tied = reference.model.transformer.wte.weight.detach().numpy()
    ours = result.params["model.transformer.wte.weight"]
    print(f"\ntied weight after training: max |ours - PyTorch| = "
          f"{abs(ours - tied).max():.2e}")


if __name__ == "__main__":
    main()
