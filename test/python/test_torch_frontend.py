"""The PyTorch frontend: from_torch + zb-run against torch autograd.

For a torch MLP and a small GPT (one microbatch per step, then two), the
loss and every parameter gradient computed by the compiled program equal
torch autograd's to 1e-4 relative, on one process (zb-run --grads) and
pipelined over P = 2 ranks (one training step, which also checks the SGD
update).
"""

import warnings

import numpy as np
import pytest

from zb_testing import assert_close, require

torch = require("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import zerobubble as zb  # noqa: E402
from zerobubble.models import GPT, MLP  # noqa: E402
from real_models import torch_reference  # noqa: E402

RTOL = 1e-4
LR = 0.1


def make_model(kind, stages, seed=0, **kwargs):
    torch.manual_seed(seed)
    if kind == "mlp":
        return MLP(sizes=(16, 32, 10), stages=stages, batch=8)
    return GPT(vocab=64, context=16, width=32, heads=2, layers=2,
               hidden=128, stages=stages, batch=2, **kwargs)


def microbatches(model, count, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return [model.example_inputs(gen) for _ in range(count)]


def check(name, loss, grads, ref_loss, ref_grads):
    assert loss == pytest.approx(ref_loss, rel=RTOL), name
    assert sorted(grads) == sorted(ref_grads), name
    for param, grad in ref_grads.items():
        assert_close(f"{name} grad {param}", grads[param], grad, RTOL)


@pytest.mark.parametrize("kind", ["mlp", "gpt"])
def test_one_process_matches_autograd(kind):
    model = make_model(kind, stages=1)
    batches = microbatches(model, 2)
    program = zb.from_torch(model, batches[0])
    ref_loss, ref_grads = torch_reference(model, batches)
    result = zb.gradients(program, microbatches=2, inputs=batches)
    check(kind, result.loss, result.grads, ref_loss, ref_grads)


@pytest.mark.parametrize("kind,schedule", [("mlp", "zb-h1"),
                                           ("gpt", "1f1b")])
def test_two_stages_match_autograd(kind, schedule):
    """P = 2 at the model's pipe_cut marker: one SGD step."""
    model = make_model(kind, stages=2)
    batches = microbatches(model, 2)
    program = zb.from_torch(model, batches[0])
    assert program.cuts == 1 and "pipe.cut" in program.mlir
    ref_loss, ref_grads = torch_reference(model, batches)
    result = zb.run(program, ranks=2, schedule=schedule, microbatches=2,
                    steps=1, lr=LR, inputs=batches)
    check(f"{kind} P=2", result.losses[0], result.grads, ref_loss, ref_grads)
    for name, param in model.named_parameters():
        expected = param.detach().numpy() - LR * ref_grads[name]
        assert_close(f"{kind} P=2 param {name}", result.params[name],
                     expected, RTOL)


def test_attention_through_sdpa():
    """F.scaled_dot_product_attention(is_causal=True) in place of the
    explicit masked softmax."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(16, 48)
            self.out = nn.Linear(16, 8)

        def forward(self, x, target):
            q, k, v = self.qkv(x).view(2, 8, 3, 2, 8).permute(
                2, 0, 3, 1, 4).unbind(0)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = self.out(y.transpose(1, 2).flatten(2))
            return F.mse_loss(F.silu(y), target) + y.pow(2).mean() * 0.1

    torch.manual_seed(0)
    model = Model()
    batch = (torch.randn(2, 8, 16), torch.randn(2, 8, 8))
    program = zb.from_torch(model, batch)
    ref_loss, ref_grads = torch_reference(model, [batch])
    result = zb.gradients(program, inputs=[batch])
    check("sdpa", result.loss, result.grads, ref_loss, ref_grads)


def test_op_coverage_matches_autograd():
    """Many supported ops in one model: views, slices, concatenation,
    broadcasting, reductions, comparisons, activations, log_softmax +
    nll_loss."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(6, 8)
            self.b = nn.Parameter(torch.randn(8, 5))
            self.c = nn.Parameter(torch.randn(5))
            self.ln = nn.LayerNorm([2, 4])

        def forward(self, x, t):
            h = self.a(x)
            h = torch.tanh(h) * torch.sigmoid(h) + F.gelu(h,
                                                          approximate="tanh")
            h = self.ln(h.view(4, 3, 2, 4)).flatten(2)
            p, q = h.split([3, 5], dim=-1)
            h = torch.cat([q, p], dim=-1) - 0.5 * h
            h = torch.stack([h[:, 0], h[:, 1] + h[:, 2]], dim=1)
            h = h.unsqueeze(1).squeeze(1).transpose(0, 1).contiguous()
            y = torch.bmm(h, self.b.expand(2, 8, 5))
            y = y.tril() + torch.where(y > 0, y, y.pow(3) * 0.1) / (
                1.5 + y.abs())
            y = y - y.amax(dim=-1, keepdim=True) + y.mean(dim=(0, 1)) + (
                1 - self.c)
            y = y.sum(dim=0) + torch.maximum(y[0], y[1])
            loss = F.nll_loss(F.log_softmax(y, dim=-1), t)
            return loss + 0.01 * (self.b ** 2).sum() + torch.rsqrt(
                self.c.pow(2) + 1).mean()

    torch.manual_seed(0)
    model = Model()
    batch = (torch.randn(4, 3, 6), torch.randint(0, 5, (4,)))
    program = zb.from_torch(model, batch)
    ref_loss, ref_grads = torch_reference(model, [batch])
    result = zb.gradients(program, inputs=[batch])
    check("ops", result.loss, result.grads, ref_loss, ref_grads)


def test_signature_follows_pytorch(tmp_path):
    """Data arguments first with their dtypes, then parameters with their
    PyTorch names and shapes; .save writes the IR."""
    model = make_model("gpt", stages=1)
    tokens, targets = model.example_inputs()
    program = zb.from_torch(model, (tokens, targets))
    text = program.mlir
    signature = text[text.index("func.func"):text.index("{\n")]
    assert signature.index("%tokens: tensor<2x16xi64>") < signature.index(
        "%targets: tensor<2x16xi64>") < signature.index("zb.param")
    assert '{zb.param = "h.0.attn.q.weight"}' in signature
    assert 'tensor<128x32xf32> {zb.param = "h.1.mlp.fc.weight"}' in signature
    assert "zb.range = 64 : i64" in signature
    assert [a.key for a in program.data_args] == ["arg0", "arg1"]
    assert program.params["lm_head.weight"].shape == (64, 32)
    path = tmp_path / "gpt.mlir"
    program.save(path)
    assert path.read_text() == text
    stacked = program.stack_inputs([(tokens, targets)] * 3)
    assert stacked["arg0"].shape == (3, 2, 16)
    assert stacked["arg1"].dtype == np.int64


def test_frozen_parameters_are_constants():
    """Parameters with requires_grad=False (a frozen embedding, a frozen
    layer) are constants: not parameters of the program, no gradient, and
    two pipelined AdamW steps leave them as they were while the rest
    trains as in PyTorch."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.emb = nn.Embedding(10, 8)
            self.a = nn.Linear(8, 8)
            self.b = nn.Linear(8, 8)
            self.emb.weight.requires_grad_(False)
            self.b.weight.requires_grad_(False)

        def forward(self, ids, y):
            h = torch.tanh(self.a(self.emb(ids)))
            h = zb.pipe_cut(h)
            return F.mse_loss(self.b(h), y)

    model = Model()
    gen = torch.Generator().manual_seed(1)
    data = [(torch.randint(0, 10, (4,), generator=gen),
             torch.randn(4, 8, generator=gen)) for _ in range(2)]
    program = zb.from_torch(model, data[0])
    assert program.frozen == ["emb.weight", "b.weight"]
    assert sorted(program.params) == ["a.bias", "a.weight", "b.bias"]
    assert "zb.param = \"b.weight\"" not in program.mlir
    grads = zb.gradients(program, microbatches=2, inputs=data).grads
    ref_loss, ref_grads = torch_reference(model, data)
    assert sorted(grads) == sorted(program.params)
    for name, grad in grads.items():
        assert_close(f"frozen model grad {name}", grad, ref_grads[name],
                     1e-5)
    result = zb.run(program, ranks=2, schedule="zb-h1", microbatches=2,
                    steps=2, lr=0.1, optimizer="adamw", inputs=[data] * 2)
    opt = torch.optim.AdamW([p for p in model.parameters()
                             if p.requires_grad], lr=0.1)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters()
              if not p.requires_grad}
    for _ in range(2):
        torch_reference(model, data)
        opt.step()
    for name, p in model.named_parameters():
        if name in frozen:
            assert torch.equal(p, frozen[name]) and name not in result.params
        else:
            assert_close(f"frozen model trained {name}",
                         result.params[name], p.detach().numpy(), 1e-5)


@pytest.mark.parametrize("ranks", [1, 2])
def test_sgd_momentum_trains_as_pytorch(ranks):
    """--optimizer sgd-momentum (--momentum) on one process and pipelined:
    three steps against torch.optim.SGD(momentum=...)."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a = nn.Linear(6, 8)
            self.b = nn.Linear(8, 3)

        def forward(self, x, y):
            h = zb.pipe_cut(torch.tanh(self.a(x)))
            return F.mse_loss(self.b(h), y)

    model = Model()
    gen = torch.Generator().manual_seed(1)
    data = [(torch.randn(4, 6, generator=gen),
             torch.randn(4, 3, generator=gen)) for _ in range(2)]
    program = zb.from_torch(model, data[0])
    result = zb.run(program, ranks=ranks, microbatches=2, steps=3, lr=0.1,
                    optimizer="sgd-momentum", momentum=0.8,
                    inputs=[data] * 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.8)
    losses = []
    for _ in range(3):
        losses.append(torch_reference(model, data)[0])
        opt.step()
    np.testing.assert_allclose(result.losses, losses, rtol=1e-5)
    for name, p in model.named_parameters():
        assert_close(f"sgd-momentum {name}", result.params[name],
                     p.detach().numpy(), 1e-5)


def test_unsupported_op_names_op_and_module():
    class Inner(nn.Module):
        def forward(self, x):
            return torch.erfinv(x.tanh())

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.enc = Encoder()

        def forward(self, x):
            return self.enc(self.lin(x)).sum()

    with pytest.raises(zb.UnsupportedOpError) as info:
        zb.from_torch(Model(), (torch.randn(2, 4),))
    message = str(info.value)
    assert "aten.erfinv.default" in message and "'enc.inner'" in message
    assert info.value.op == "aten.erfinv.default"
    assert info.value.module_path == "enc.inner"


class _ReverseGradient(torch.autograd.Function):
    """Doubles x; its backward negates the gradient instead (a gradient
    reversal, not the forward's derivative)."""

    @staticmethod
    def forward(ctx, x):
        return 2.0 * x

    @staticmethod
    def backward(ctx, grad):
        return -grad


class _Double(torch.autograd.Function):
    """Doubles x, with the backward that is its derivative."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 2.0 * x

    @staticmethod
    def backward(ctx, grad):
        return 2.0 * grad


def test_custom_autograd_function_warns_that_its_backward_is_not_run():
    """torch.export keeps only what an autograd.Function's forward
    computes: where its backward is not that forward's derivative (checked
    at the arguments of its first call, in an eager run), from_torch says
    so with a FrontendWarning naming the class and where it is defined, and
    the compiled gradient is the forward's derivative (2 w, not PyTorch's
    -w). A Function whose backward is the derivative gives no warning, nor
    does a reentrant checkpoint (what transformers' gradient checkpointing
    uses), which compiles with its function's true gradient: its forward
    runs the function without gradients, which exported as it is would
    give a gradient of 0."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.tensor([1.0, -2.0, 3.0]))

        def forward(self, x):
            h = torch.utils.checkpoint.checkpoint(
                torch.sin, x * self.w, use_reentrant=True)
            return (_ReverseGradient.apply(self.w) * _Double.apply(h)).sum()

    model, data = Model(), [(torch.tensor([0.5, 1.0, 2.0]),)]
    with pytest.warns(zb.FrontendWarning) as caught:
        program = zb.from_torch(model, data[0])
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith("_ReverseGradient (")
    assert f"{__file__}:" in message and "_ReverseGradient.backward" in message
    assert caught[0].filename == __file__
    grads = zb.gradients(program, microbatches=1, inputs=data).grads
    w, x = model.w.detach(), data[0][0]
    derivative = 4.0 * torch.sin(x * w) + 4.0 * w * torch.cos(x * w) * x
    assert_close("w", grads["w"], derivative.numpy(), 1e-6)
    _, ref = torch_reference(model, data)
    assert not np.allclose(ref["w"], derivative.numpy())


def test_program_inputs_are_checked():
    """Float values for an integer argument (class labels) are refused,
    not truncated; no microbatch at all is refused."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x, y):
            return F.cross_entropy(self.lin(x), y)

    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    program = zb.from_torch(Model(), (x, y))
    arrays = program.stack_inputs([(x, y), (x, y)])
    assert arrays["arg1"].dtype == np.int64
    with pytest.raises(ValueError, match="pass integers"):
        program.stack_inputs([(x, y.float() + 0.9)])
    with pytest.raises(ValueError, match="no microbatches given"):
        program.stack_inputs([])
    with pytest.raises(TypeError, match="needs a torch.nn.Module"):
        zb.from_torch(None, (x, y))
    with pytest.raises(TypeError, match=r"one tensor x: \(x,\)"):
        zb.from_torch(Model(), x)


class _Tracker(nn.Module):
    """A layer keeping a running mean of its outputs in a buffer (changed
    in place under no_grad) and counting its calls (changed in place
    outside it); with ``centred`` the loss reads the running mean."""

    def __init__(self, centred):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.centred = centred
        self.register_buffer("mean", torch.zeros(4))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        y = self.lin(x)
        with torch.no_grad():
            self.mean.mul_(0.9).add_(0.1 * y.mean(0))
            scale = y.abs().mean()
        self.calls += 1
        return ((y - self.mean if self.centred else y) ** 2).sum() * scale


def test_buffer_changed_in_the_forward():
    """A buffer changed in place in the forward (other than batch norm's):
    refused where the loss depends on it (each microbatch of PyTorch reads
    its predecessors' changes; the compiled ones all read the buffer as it
    was), a warning naming it where the loss does not (the change is not
    kept), the gradient then PyTorch's."""
    model = nn.Sequential(_Tracker(centred=True))
    with pytest.raises(zb.FrontendError,
                       match=r"buffer '0.mean' is changed in place in the "
                       r"forward \(in module '0' \(_Tracker\)\) and the loss "
                       r"depends on it"):
        zb.from_torch(model, (torch.randn(2, 4),))

    model = _Tracker(centred=False)
    data = [(torch.randn(2, 4, generator=torch.Generator().manual_seed(s)),)
            for s in (1, 2)]
    with pytest.warns(zb.FrontendWarning) as caught:
        program = zb.from_torch(model, data[0])
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2, messages
    assert messages[0].startswith("buffer 'calls' is changed in place")
    assert messages[1].startswith("buffer 'mean' is changed in place")
    assert all(w.filename == __file__ for w in caught)
    result = zb.gradients(program, microbatches=2, inputs=data)
    ref_loss, ref = torch_reference(model, data)
    assert result.loss == pytest.approx(ref_loss, rel=1e-5)
    for name, grad in ref.items():
        assert_close(name, result.grads[name], grad, 1e-5)


def test_a_generator_and_a_cumulative_batch_norm_say_what_to_do():
    """A forward drawing with its own torch.Generator, and a batch norm
    with momentum=None (a cumulative average): refused naming the op and
    the way out (they were an exported input of kind CUSTOM_OBJ, and a
    value-dependent branch blamed on the calling line)."""
    class Drawn(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.gen = torch.Generator().manual_seed(0)

        def forward(self, x):
            return (self.lin(x) * torch.rand(4, generator=self.gen)).sum()

    with pytest.raises(zb.UnsupportedOpError,
                       match=r"'aten.rand.generator' in the root module "
                       r"\(Drawn\): the forward draws with a torch.Generator"
                       r".* leave out generator="):
        zb.from_torch(Drawn(), (torch.randn(2, 4),))

    class Normed(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.BatchNorm1d(4, momentum=None)

        def forward(self, x):
            return self.norm(x).sum()

    with pytest.raises(zb.UnsupportedOpError,
                       match=r"in module 'norm' \(BatchNorm1d\): "
                       r"momentum=None .* give the batch norm a momentum"):
        zb.from_torch(Normed(), (torch.randn(3, 4),))
    zb.from_torch(Normed().eval(), (torch.randn(3, 4),))


@pytest.mark.parametrize("draw", ["multinomial", "exponential_", "rrelu"])
def test_random_ops_say_what_to_do(draw):
    """Random ops without a rule for their draws (multinomial, exponential_
    into a fresh tensor, which must not be drawn once at export and kept
    as a constant, RReLU in training mode; dropout, bernoulli, rand, randn, uniform_, normal_,
    randint and randperm have one) are refused with the ways out; without
    them the same module exports."""
    draws = {"multinomial": lambda x: torch.multinomial(
                 x.softmax(-1), 1).to(x.dtype),
             "exponential_": lambda x: torch.empty_like(x).exponential_(),
             "rrelu": lambda x: F.rrelu(x, training=True)}

    class Model(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.scale = scale

        def forward(self, x):
            x = self.lin(x)
            if self.scale:
                x = x + self.scale * draws[draw](x)
            return x.sum()

    with pytest.raises(zb.UnsupportedOpError) as info:
        zb.from_torch(Model(0.5).train(), (torch.randn(2, 4),))
    message = str(info.value)
    assert draw.replace("_like", "") in message, message
    assert "export in eval mode" in message, message
    zb.from_torch(Model(0.0).train(), (torch.randn(2, 4),))


@pytest.mark.parametrize("strict", [False, True])
def test_value_dependent_branch_names_the_line(strict, capsys):
    """A branch on a tensor's values (as transformers' DeBERTa loss has)
    cannot be one traced program: the error names the model's line and
    the way out, not torch.export's internals (nor does the graph torch
    traced up to there reach stderr)."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x, labels):
            kept = (labels >= 0).nonzero()
            if kept.size(0) > 0:  # the value-dependent line
                return F.cross_entropy(self.lin(x), labels)
            return self.lin(x).sum() * 0

    import inspect
    lines, first = inspect.getsourcelines(Model.forward)
    line = first + next(i for i, text in enumerate(lines)
                        if "value-dependent line" in text)
    with pytest.raises(zb.FrontendError) as info:
        zb.from_torch(Model(), (torch.randn(2, 4), torch.tensor([0, 2])),
                      strict=strict)
    message = str(info.value)
    assert f"test_torch_frontend.py:{line} branches on" in message, message
    assert "cannot export Model" in message
    assert "return the logits" in message
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "def forward(" not in capsys.readouterr().err


class _Grid(nn.Module):
    """Images of t x h x w patches, their rows of ``x`` one after another:
    the split and each image's position ids follow the grid's values."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.pos = nn.Embedding(16, 4)

    def forward(self, x, grid=None):
        loss = 0
        parts = torch.split(x, grid.prod(-1).tolist())
        for part, (t, h, w) in zip(parts, grid.tolist()):
            ids = torch.arange(h * w).repeat(t)
            loss = loss + (self.proj(part) + self.pos(ids)).square().mean()
        return loss


def test_constants_compile_in_the_values_that_decide_shapes():
    """from_torch(constants=...): a keyword argument whose values decide
    shapes (an image grid) is compiled in; the program's gradients equal
    autograd's with those values, its data arguments leave it out, and the
    module's forward is its own again afterwards. Passed as data it is
    refused with the way out; the same values built in forward from a
    Python list are constants as well."""
    torch.manual_seed(0)
    model = _Grid()
    grid = torch.tensor([[1, 2, 3], [2, 2, 2]])
    batches = [(torch.randn(14, 4),), (torch.randn(14, 4),)]

    class Reference(nn.Module):
        def __init__(self, inner, values):
            super().__init__()
            self.inner = inner
            self.values = values

        def forward(self, x):
            return self.inner(x, torch.tensor(self.values))

    ref_loss, ref_grads = torch_reference(
        Reference(model, grid.tolist()), batches)
    program = zb.from_torch(model, batches[0], constants={"grid": grid})
    assert "forward" not in model.__dict__
    assert [a.name for a in program.data_args] == ["x"]
    result = zb.gradients(program, microbatches=2, inputs=batches)
    check("constants", result.loss, result.grads, ref_loss,
          {k.removeprefix("inner."): v for k, v in ref_grads.items()})
    # Built in forward from a Python list: the same program.
    built = zb.from_torch(Reference(model, grid.tolist()), batches[0])
    assert built.mlir.count("tensor.extract_slice") == \
        program.mlir.count("tensor.extract_slice") > 0

    import inspect
    lines, first = inspect.getsourcelines(_Grid.forward)
    line = first + next(i for i, text in enumerate(lines)
                        if ".tolist()" in text)
    with pytest.raises(zb.FrontendError) as info:
        zb.from_torch(model, batches[0] + (grid,))
    message = str(info.value)
    assert f"test_torch_frontend.py:{line} branches on" in message, message
    assert "from_torch(constants=" in message, message
    with pytest.raises(zb.FrontendError, match="has no argument 'grids'"):
        zb.from_torch(model, batches[0], constants={"grids": grid})
    with pytest.raises(zb.FrontendError, match="'grid' is a list"):
        zb.from_torch(model, batches[0], constants={"grid": grid.tolist()})


def test_loss_must_be_a_scalar():
    with pytest.raises(zb.FrontendError, match="scalar loss"):
        zb.from_torch(nn.Linear(4, 3), (torch.randn(2, 4),))


class _Recomputed(torch.autograd.Function):
    """Reformer's reversible layers in small: the forward runs the layer
    under no_grad, the backward runs it again with gradients."""

    @staticmethod
    def forward(ctx, x, layer):
        with torch.no_grad():
            y = layer(x)
        ctx.save_for_backward(x.detach())
        ctx.layer = layer
        return y

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            x = x.requires_grad_(True)
            torch.autograd.backward(ctx.layer(x), g)
        return x.grad, None


@pytest.mark.parametrize("how", ["no_grad", "recomputing function"])
def test_a_loss_without_gradient_is_refused(how):
    """A loss the exported program computes under torch.no_grad() (written
    so, or as torch.export records what follows an autograd.Function whose
    forward runs its layer under no_grad) is refused: every gradient would
    be zero, where PyTorch refuses the backward (or, for the Function, runs
    its recomputing backward)."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = nn.Linear(4, 4)
            self.last = nn.Linear(4, 1)

        def forward(self, x):
            if how == "no_grad":
                with torch.no_grad():
                    return self.last(self.first(x)).square().mean()
            h = _Recomputed.apply(x, self.first)
            return self.last(h).square().mean()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", zb.FrontendWarning)
        with pytest.raises(zb.FrontendError,
                           match=r"computes the loss under torch\.no_grad"):
            zb.from_torch(Model(), (torch.randn(3, 4),))


def test_a_0d_data_argument_is_refused_with_the_way_out():
    """zb-run splits data into microbatches along the first dimension: a
    0-d one was accepted here and refused by zb-run, naming IR."""
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, x, t):
            return (x * self.w * t).sum()

    with pytest.raises(zb.FrontendError,
                       match=r"data argument 1 \('t'\) is a 0-d tensor: "
                       r".* \(constants=\{'t': \.\.\.\}\)"):
        zb.from_torch(Scaled(), (torch.ones(2, 3), torch.tensor(2.0)))


def test_bf16_model_is_refused_with_the_way_out():
    """Model code computes in f32 or f64: a bf16 or f16 model is refused,
    and the message says how to train it with bf16 activations; so is a
    boolean data argument (zb-run reads float and integer .npz data)."""
    class Masked(nn.Module):
        def forward(self, x, keep):
            return x.masked_fill(~keep, 0.0).sum()

    class Embedded(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(4, 3)

        def forward(self, ids):
            return self.emb(ids).float().sum()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x):
            return self.lin(x).sum()

    for half in (torch.bfloat16, torch.float16):
        with pytest.raises(zb.FrontendError,
                           match=rf"data argument 0 \('x'\) is {half}.*"
                           r"model.float\(\).*dtype='bf16'"):
            zb.from_torch(Model().to(half), (torch.randn(2, 4).to(half),))
    with pytest.raises(zb.FrontendError,
                       match=r"parameter 'emb.weight' is torch.float16"):
        zb.from_torch(Embedded().half(), (torch.zeros(2, dtype=torch.long),))
    # Data zb-run cannot read is named, with the conversion to make.
    with pytest.raises(zb.FrontendError,
                       match=r"data argument 1 \('\w+'\) is torch.bool.*"
                       r"int64.*\.long\(\)"):
        zb.from_torch(Masked(), (torch.randn(2, 4),
                                 torch.ones(2, 4, dtype=torch.bool)))


def test_pipe_cut_is_an_identity_in_eager_mode():
    x = torch.randn(3, 4, requires_grad=True)
    y = zb.pipe_cut(x)
    assert torch.equal(y, x)
    (y * 2).sum().backward()
    assert torch.equal(x.grad, torch.full((3, 4), 2.0))


def test_compiler_errors_surface_from_a_program():
    """A model the compiler rejects: the exception carries zb-run's
    diagnostic text."""
    model = make_model("mlp", stages=1)
    program = zb.from_torch(model, model.example_inputs())
    with pytest.raises(zb.CompilerError, match="error"):
        zb.gradients(program, params={"layers.0.weight": np.zeros(
            (1, 1), np.float32)})
