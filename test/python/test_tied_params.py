"""Tied (shared) parameters: one tensor used by several modules stays one
parameter, whose gradient sums every use, on one process and pipelined.

The model ties its token embedding to its output projection (as GPT-2 ties
wte and lm_head) and puts the two uses in different pipeline stages, so
that each holding rank keeps a copy and the copies' gradients are summed
over those ranks (sched.allreduce). Checked against torch autograd and
torch's AdamW: the loss, every gradient, the loss curve and the trained
weights. zb-run refuses to write a parameter file from copies that differ
between ranks, so the dumped parameters also show the copies stayed
bitwise equal.
"""

import numpy as np
import pytest

from zb_testing import assert_close, require

torch = require("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import zerobubble as zb  # noqa: E402

RTOL = 1e-4
VOCAB, WIDTH, TOKENS = 32, 16, 8


class TiedLM(nn.Module):
    """Embedding -> [cut] -> MLP blocks -> [cut] -> projection through the
    embedding's weight; `cuts` markers make cuts + 1 stages."""

    def __init__(self, cuts=1, blocks=2):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(nn.Linear(WIDTH, WIDTH)
                                    for _ in range(blocks))
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.wte.weight
        self.cuts = cuts

    def forward(self, tokens, targets):
        h = self.wte(tokens)
        per_cut = max(1, len(self.blocks) // max(self.cuts, 1))
        made = 0
        for i, block in enumerate(self.blocks):
            if made < self.cuts and i % per_cut == 0:
                h = zb.pipe_cut(h)
                made += 1
            h = h + torch.tanh(block(h))
        while made < self.cuts:
            h = zb.pipe_cut(h)
            made += 1
        logits = self.head(h)
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def batches(count, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, VOCAB, (2, TOKENS), generator=gen),
             torch.randint(0, VOCAB, (2, TOKENS), generator=gen))
            for _ in range(count)]


def autograd(model, data):
    model.zero_grad()
    loss = sum(model(*b) / len(data) for b in data)
    loss.backward()
    return loss.item(), {n: p.grad.detach().numpy().copy()
                         for n, p in model.named_parameters()
                         if p.grad is not None}


def torch_adamw(reference, model, data, lr=0.01):
    """Trains `reference`, started from `model`'s weights, with torch's
    AdamW, one step per entry of `data`; returns the losses and the last
    step's gradients."""
    reference.load_state_dict(model.state_dict())
    opt = torch.optim.AdamW(reference.parameters(), lr=lr)
    losses = []
    for batch in data:
        loss, grads = autograd(reference, batch)
        losses.append(loss)
        opt.step()
    return losses, grads


def check_run(name, result, reference, ref_losses, ref_grads, rtol=RTOL):
    """A zb.run result against torch's: the loss curve, the last step's
    gradients and the trained weights of `reference`."""
    np.testing.assert_allclose(result.losses, ref_losses, rtol=rtol)
    check_grads(name, ref_losses[-1], result.grads, ref_losses[-1], ref_grads,
                rtol)
    for param_name, param in reference.named_parameters():
        assert_close(f"{name} param {param_name}", result.params[param_name],
                     param.detach().numpy(), rtol)


def check_grads(name, result_loss, grads, ref_loss, ref_grads, rtol=RTOL):
    assert result_loss == pytest.approx(ref_loss, rel=rtol), name
    assert sorted(grads) == sorted(ref_grads), (name, sorted(grads))
    for param, grad in ref_grads.items():
        assert_close(f"{name} grad {param}", grads[param], grad, rtol)


def test_tied_weight_is_one_parameter():
    torch.manual_seed(0)
    model = TiedLM()
    program = zb.from_torch(model, batches(1)[0])
    assert program.tied == {"head.weight": "wte.weight"}
    assert "head.weight" not in program.params
    assert program.mlir.count("zb.param") == len(list(model.parameters()))


def test_one_process_sums_both_uses():
    torch.manual_seed(0)
    model = TiedLM()
    data = batches(2)
    program = zb.from_torch(model, data[0])
    ref = autograd(model, data)
    result = zb.gradients(program, microbatches=2, inputs=data)
    check_grads("P=1", result.loss, result.grads, *ref)


@pytest.mark.parametrize("ranks,cuts,schedule,chunks", [
    (2, 1, "zb-h1", None),   # stages 0, 1 on ranks 0, 1: a group sum
    (3, 2, "1f1b", None),    # ranks 0 and 2 sum; rank 1 does not hold it
    (2, 3, "zb-v", 2),       # V: stages 0 and 3 both on rank 0
])
def test_pipelined_adamw_matches_torch(ranks, cuts, schedule, chunks):
    """Five AdamW steps pipelined: torch's loss curve, gradients of the
    last step and trained weights."""
    steps, microbatches = 5, 2
    torch.manual_seed(0)
    model = TiedLM(cuts=cuts, blocks=max(2, cuts))
    data = [batches(microbatches, seed=10 + s) for s in range(steps)]
    program = zb.from_torch(model, data[0][0])
    assert program.cuts == cuts

    reference = TiedLM(cuts=cuts, blocks=max(2, cuts))
    ref_losses, ref_grads = torch_adamw(reference, model, data)

    result = zb.run(program, ranks=ranks, schedule=schedule, chunks=chunks,
                    microbatches=microbatches, steps=steps,
                    optimizer="adamw", lr=0.01, inputs=data)
    check_run(f"P={ranks} {schedule}", result, reference, ref_losses,
              ref_grads)


@pytest.mark.parametrize("ranks,replicas", [(2, 2), (1, 2)])
def test_replicas_of_a_tied_pipeline_match_torch(ranks, replicas):
    """Data parallel x pipeline: D replicas each run M of the step's D * M
    microbatches, the tied weight's gradient summed over its holders in
    every replica and averaged over the replicas; three AdamW steps equal
    torch's over all D * M microbatches (and zb-run's parameter dump shows
    every copy on every replica bitwise equal)."""
    steps, microbatches = 3, 2
    torch.manual_seed(0)
    model = TiedLM(cuts=1)
    data = [batches(microbatches * replicas, seed=20 + s)
            for s in range(steps)]
    program = zb.from_torch(model, data[0][0])

    reference = TiedLM(cuts=1)
    ref_losses, ref_grads = torch_adamw(reference, model, data)

    result = zb.run(program, ranks=ranks, replicas=replicas,
                    schedule="zb-h1", microbatches=microbatches, steps=steps,
                    optimizer="adamw", lr=0.01, inputs=data)
    assert result.metrics["replicas"] == replicas
    check_run(f"P={ranks} D={replicas}", result, reference, ref_losses,
              ref_grads)


@pytest.mark.parametrize("replicas", [1, 2])
def test_float64_copies_are_summed(replicas):
    """A float64 model's tied weight on two ranks: its gradient summed in
    float64 between the holders (zbrt_group_sum_f64), and with two replicas
    averaged over them as well (zbrt_replica_mean_f64). Three AdamW steps
    equal torch's in float64 to 1e-9: the losses, the gradients and the
    weights."""
    steps, microbatches = 3, 2
    torch.manual_seed(0)
    model = TiedLM(cuts=1).double()
    data = [batches(microbatches * replicas, seed=30 + s)
            for s in range(steps)]
    program = zb.from_torch(model, data[0][0])
    assert "tensor<32x16xf64> {zb.param" in program.mlir

    reference = TiedLM(cuts=1).double()
    ref_losses, ref_grads = torch_adamw(reference, model, data)

    result = zb.run(program, ranks=2, replicas=replicas, schedule="zb-h1",
                    microbatches=microbatches, steps=steps,
                    optimizer="adamw", lr=0.01, inputs=data)
    assert result.params["wte.weight"].dtype == np.float64
    check_run(f"float64 D={replicas}", result, reference, ref_losses,
              ref_grads, rtol=1e-9)


def test_checkpoint_and_resume_keep_the_copies(tmp_path):
    """A checkpoint of a pipelined run holds the tied weight once (zb-run
    checks that the copies agree when it gathers them) and its optimizer
    state; resuming from it continues the same loss curve."""
    import json

    from zerobubble._tools import run_tool

    torch.manual_seed(0)
    program = zb.from_torch(TiedLM(), batches(1)[0])
    model, params = tmp_path / "tied.mlir", tmp_path / "params.npz"
    program.save(model)
    program.save_params(params)
    common = [model, "--params", params, "--np", 2, "--schedule", "zb-h1",
              "--microbatches", 2, "--optimizer", "adamw", "--lr", 0.01,
              "--seed", 3]

    def losses(*args):
        metrics = tmp_path / "metrics.json"
        run_tool("zb-run", [*common, *args, "--metrics", metrics])
        return json.loads(metrics.read_text())["loss"]

    full = losses("--steps", 4)
    first = losses("--steps", 2, "--checkpoint", tmp_path / "ckpt")
    rest = losses("--steps", 4, "--resume", tmp_path / "ckpt")
    assert first == full[:2]
    assert rest == full[2:]


class WithUnused(TiedLM):
    """TiedLM with a parameter the loss never reads (XLNet's mask_emb
    without masked inputs) and a second name tied to it."""

    def __init__(self):
        super().__init__()
        self.unused = nn.Parameter(torch.randn(3, WIDTH))
        self.alias = nn.Linear(WIDTH, 3, bias=False)
        self.alias.weight = self.unused


def test_unused_parameters_are_left_out(tmp_path):
    """A parameter the loss does not read is left out of the program
    (PyTorch gives it no gradient and AdamW leaves it as it is): listed in
    Program.unused with its tied names, and a pipelined run, checkpointed
    and resumed, trains the rest as torch does. A pipelined run used to
    drop it from its parameter files and checkpoints (no rank holds it),
    whose resumption then refused the checkpoint."""
    from zerobubble._tools import run_tool

    torch.manual_seed(0)
    model = WithUnused()
    data = batches(3)
    program = zb.from_torch(model, data[0])
    assert program.unused == ["unused", "alias.weight"]
    assert "unused" not in program.params and program.tied == {
        "head.weight": "wte.weight"}
    assert "zb.param = \"unused\"" not in program.mlir

    path, params = tmp_path / "m.mlir", tmp_path / "params.npz"
    program.save(path)
    program.save_params(params)
    inputs = tmp_path / "inputs.npz"
    program.save_inputs(inputs, [[b] for b in data])
    common = [path, "--params", params, "--inputs", inputs, "--np", 2,
              "--schedule", "zb-h1", "--microbatches", 1, "--optimizer",
              "adamw", "--lr", 0.01]
    run_tool("zb-run", [*common, "--steps", 2, "--checkpoint",
                        tmp_path / "ckpt"])
    run_tool("zb-run", [*common, "--steps", 3, "--resume", tmp_path / "ckpt",
                        "--dump-params", tmp_path / "trained.npz"])
    trained = np.load(tmp_path / "trained.npz")
    reference = WithUnused()
    torch_adamw(reference, model, [[b] for b in data])
    assert sorted(trained.files) == sorted(program.params)
    for name, param in reference.named_parameters():
        if name in program.params:
            assert_close(f"param {name}", trained[name],
                         param.detach().numpy(), RTOL)
    assert torch.equal(reference.unused, model.unused)


def test_a_parameter_read_through_an_in_place_update_is_used():
    """A parameter the loss reads only through an in-place update of a
    view of another tensor (torchvision MViT's relative positions,
    ``attn[:, 1:, 1:] += rel``) is used: its value and gradient as
    autograd's. It was taken for unused (the graph's output reaches the
    updated tensor, not the update) and left uninitialised."""
    class RelativeBias(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.rel = nn.Parameter(torch.randn(3, 3))

        def forward(self, x):
            attn = self.lin(x) @ x.transpose(1, 2)
            attn[:, 1:, 1:] += self.rel
            return attn.softmax(-1).pow(2).sum()

    torch.manual_seed(0)
    model = RelativeBias().double()
    x = torch.randn(2, 4, 4, dtype=torch.float64)
    program = zb.from_torch(model, (x,))
    assert program.unused == []
    result = zb.gradients(program, microbatches=1, inputs=[(x,)])
    check_grads("in-place", result.loss, result.grads,
                *autograd(model, [(x,)]), rtol=1e-9)
