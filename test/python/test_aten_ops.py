"""The PyTorch frontend's ATen coverage: ops and whole models.

Each op test is a tiny float64 module using the op, ending in a loss that
weights the op's output non-uniformly; its input first goes through a
parameter of the input's shape (``x + shift``), so the gradient of ``shift``
is the gradient with respect to the op's input. ``from_torch`` translates
it and ``zb-run --grads --check-grad`` computes the loss and every gradient
(and compares a sample with central finite differences); both must equal
torch autograd's to 1e-9 relative.

The model tests translate GPT-2 (tied weights), Llama, BLOOM, DeBERTa,
Mamba, DeepSeek-V3, Whisper and Wav2Vec2 from real_models.py (tiny and
randomly initialised), each with its own loss (DeBERTa's applied by a
wrapper to its logits: its own cannot be exported, and the error says
where), and compare the loss and every
parameter gradient with torch autograd at float32 (1e-4 relative) over two
microbatches on one process. The other
real models are compared with autograd pipelined only
(test_real_models.py), where two ranks compile their halves at once: a
whole model compiled by one process takes 2-2.5 times that wall time.
"""

import math
import re

import numpy as np
import pytest

from zb_testing import assert_close, require

torch = require("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import zerobubble as zb  # noqa: E402
from real_models import (MODELS, ONE_PROCESS_MODELS,  # noqa: E402
                         assert_grads_close, deberta, torch_reference)
from zerobubble._tools import run_tool  # noqa: E402

F64_RTOL = 1e-9
F32_RTOL = 1e-4
# Central differences of a float64 loss (zb-run --check-grad): a few 1e-7
# of rounding noise relative to small gradient entries.
FD_TOL = 1e-5
WORST_RE = re.compile(r"check-grad: worst relative error (\S+)")


def compiled_gradients(program, batches, tmp_path, check_grad=True):
    """(loss, grads) from zb-run --grads on ``batches``; with
    ``check_grad``, also a finite-difference check of every parameter."""
    model_path = tmp_path / "model.mlir"
    params, inputs = tmp_path / "params.npz", tmp_path / "inputs.npz"
    grads_path = tmp_path / "grads.npz"
    program.save(model_path)
    program.save_params(params)
    program.save_inputs(inputs, batches)
    args = [model_path, "--grads", "--microbatches", len(batches),
            "--params", params, "--inputs", inputs,
            "--dump-grads", grads_path]
    if check_grad:
        args += ["--check-grad", "--grad-samples", 6, "--grad-tol", FD_TOL]
    proc = run_tool("zb-run", args)
    if check_grad:
        match = WORST_RE.search(proc.stdout)
        assert match, proc.stdout
        assert float(match.group(1)) <= FD_TOL, proc.stdout
    with np.load(grads_path) as data:
        grads = {k: data[k] for k in data.files}
    return float(grads.pop("loss")), grads


def check_op(name, model, batch, tmp_path, rtol=F64_RTOL, check_grad=True):
    """from_torch + zb-run (with a finite-difference check unless the
    gradient is not the loss's derivative by design) against torch
    autograd, in float64."""
    model = model.double()
    batch = tuple(b.double() if b.is_floating_point() else b for b in batch)
    program = zb.from_torch(model, batch)
    ref_loss, ref_grads = torch_reference(model, [batch])
    loss, grads = compiled_gradients(program, [batch], tmp_path,
                                     check_grad=check_grad)
    assert loss == pytest.approx(ref_loss, rel=rtol), name
    assert sorted(grads) == sorted(ref_grads), name
    for param, grad in ref_grads.items():
        assert_close(f"{name} grad {param}", grads[param], grad, rtol)
    return program


def weighted(y):
    """A loss reading every element of ``y`` with a different weight."""
    w = torch.linspace(-1.0, 2.0, y.numel(), dtype=y.dtype).view(y.shape)
    return (y * w).sum() + 0.5 * (y * y).sum()


class OnInput(nn.Module):
    """``fn(x + shift, *rest)`` then :func:`weighted`, with a learnable
    ``shift`` of x's shape (so its gradient is the gradient with respect to
    fn's input) and the parameters of ``modules``."""

    def __init__(self, shape, fn, **modules):
        super().__init__()
        gen = torch.Generator().manual_seed(3)
        self.shift = nn.Parameter(0.1 * torch.randn(shape, generator=gen))
        self.fn = fn
        for key, module in modules.items():
            setattr(self, key, module)

    def forward(self, x, *rest):
        return weighted(self.fn(self, x + self.shift, *rest))


def randn(*shape, seed=1, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed),
                       dtype=dtype)


# -- padding, indexing, scans -------------------------------------------


def test_constant_pad(tmp_path):
    def fn(m, h):
        a = F.pad(h, (1, 2, -1, 1), value=0.5)
        b = torch.constant_pad_nd(h, [0, -2, 2, 0])
        return torch.cat([a.flatten(), b.flatten()])

    model = OnInput((2, 3, 4, 5), fn)
    program = check_op("pad", model, (randn(2, 3, 4, 5),), tmp_path)
    assert "tensor.insert_slice" in program.mlir


def test_pad_on_integer_labels(tmp_path):
    """GPT-2's label shift: pad integer targets with -100 (ignored)."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 6)

        def forward(self, x, labels):
            shifted = F.pad(labels, (0, 1), value=-100)[:, 1:]
            return F.cross_entropy(self.lin(x).transpose(1, 2), shifted)

    torch.manual_seed(0)
    check_op("pad labels", Model(), (randn(2, 5, 4),
                                     torch.randint(0, 6, (2, 5))), tmp_path)


def test_products_powers_and_turns(tmp_path):
    """dot, vdot, addcmul, addcdiv (RWKV-style mixing), addr, x ** y and
    2 ** x with tensor exponents, rot90 by each quarter turn."""
    def fn(m, h):
        a, b = h[0], h[1]
        base = h.abs() + 0.5
        outs = [torch.dot(a, b).reshape(1), torch.vdot(a, b * 2).reshape(1),
                torch.addcmul(h, a, b, value=0.5),
                torch.addcdiv(h, a, base[2], value=-2.0),
                torch.addr(h[:, :3], a[:4], b[:3], beta=0.5, alpha=2.0),
                torch.addr(h[:, :3], a[:4], b[:3], beta=0),
                base ** h, 2 ** h, torch.pow(3.0, h)]
        outs += [torch.rot90(h, k, (0, 1)) for k in (1, 2, 3, -1)]
        return torch.cat([o.flatten() for o in outs])

    check_op("products, powers, turns", OnInput((4, 5), fn), (randn(4, 5),),
             tmp_path)


def test_scalar_powers(tmp_path):
    """x ** c for constant c: products, roots and reciprocals where
    PyTorch's CPU kernel computes so (GPT-2's GELU cubes), so the compiled
    code calls no pow for them; math.powf for the others."""
    def fn(m, h):
        base = h.abs() + 0.5
        return torch.cat([o.flatten() for o in (
            h ** 2, torch.pow(h, 3.0), base ** -2, base ** -1, base ** 0.5,
            base ** -0.5, base ** 2.5, h ** 1, h ** 0)])

    program = check_op("scalar powers", OnInput((4, 5), fn),
                       (randn(4, 5),), tmp_path)
    assert program.mlir.count("math.powf") == 1, program.mlir


def test_bilinear(tmp_path):
    """nn.Bilinear with and without a bias, over extra leading dims."""
    def fn(m, h):
        return torch.cat([m.bi(h, h[..., :3] * 2).flatten(),
                          m.plain(h[0], h[1, :, :3]).flatten()])

    model = OnInput((2, 3, 4), fn, bi=nn.Bilinear(4, 3, 5),
                    plain=nn.Bilinear(4, 3, 2, bias=False))
    check_op("bilinear", model, (randn(2, 3, 4),), tmp_path)


def test_power_gradients_at_zero_are_pytorchs(tmp_path):
    """x ** y where x or y is 0: PyTorch's gradients are 0 for x where
    y = 0 and for y where x = 0 and y >= 0 (the formulas would be NaN);
    for y = 0 at x = 0 too."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.x = nn.Parameter(torch.tensor([0.0, 0.0, 0.0, 2.0, 1.5]))
            self.y = nn.Parameter(torch.tensor([0.0, 2.0, 3.0, 0.0, -1.0]))

        def forward(self, scale):
            return weighted(self.x ** self.y * scale)

    check_op("pow at 0", Model(), (torch.ones(5),), tmp_path,
             check_grad=False)


def test_reflect_replicate_circular_pads(tmp_path):
    """F.pad's other modes (and the nn modules) over 1, 2 and 3 dims,
    uneven and up to the size each allows, circular padding negative on a
    side; the gradient adds up where positions repeat."""
    def fn(m, h):
        outs = [F.pad(h, (2, 1), mode="reflect"),
                F.pad(h, (3, 0, 1, 2), mode="reflect"),
                F.pad(h, (2, 4, 0, 1), mode="replicate"),
                F.pad(h, (4, 1, 1, 1), mode="circular"),
                # Negative sides crop first (then the rest wraps the crop).
                F.pad(h, (-1, 3), mode="circular"),
                F.pad(h, (2, -2, -1, 1), mode="circular"),
                F.pad(h.reshape(1, 2, 4, 5), (1, 1, 1, 0, 1, 1),
                      mode="reflect"),
                nn.ReflectionPad2d((1, 0, 2, 1))(h),
                nn.ReplicationPad1d(3)(h[0])]
        return torch.cat([o.flatten() for o in outs])

    check_op("pad modes", OnInput((2, 4, 5), fn), (randn(2, 4, 5),),
             tmp_path)


def test_embedding_padding_idx(tmp_path):
    """The padding row is looked up (here it is not zero) but gets no
    gradient, as in PyTorch."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4, padding_idx=2)
            with torch.no_grad():
                self.emb.weight[2] = torch.tensor([0.5, -1.0, 2.0, 0.25])

        def forward(self, ids):
            return weighted(self.emb(ids))

    torch.manual_seed(0)
    ids = torch.tensor([[1, 2, 3, 2], [9, 0, 2, 1]])
    # No finite-difference check: the padding row changes the loss, but by
    # definition gets no gradient.
    program = check_op("embedding padding_idx", Model(), (ids,), tmp_path,
                       check_grad=False)
    assert "zb.range = 10" in program.mlir


def test_padding_row_behind_a_nan_adjoint(tmp_path):
    """Gemma 3n's pattern: the padding row is zero, so the root mean square
    of its embedding is sqrt(0), whose adjoint is 0 * inf = NaN there; the
    padding row takes no gradient from the lookup (PyTorch's where), so
    only the tied head's finite one reaches it."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4, padding_idx=0)

        def forward(self, ids):
            x = self.emb(ids)
            x = x * torch.mean(x * x, -1, keepdim=True).sqrt()
            return F.cross_entropy((x @ self.emb.weight.t()).flatten(0, 1),
                                   ids.flatten())

    torch.manual_seed(0)
    ids = torch.tensor([[1, 0, 3, 2, 0, 9]])
    check_op("padding row behind NaN", Model(), (ids,), tmp_path,
             check_grad=False)


def test_embedding_bags(tmp_path):
    """nn.EmbeddingBag (DLRM's sparse features): fixed-size bags of a 2-d
    input in mean mode, and bags by offsets in sum mode with per-sample
    weights, an empty bag, the last offset included or not, padding
    left out."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.mean = nn.EmbeddingBag(10, 3, mode="mean")
            self.sum = nn.EmbeddingBag(10, 3, mode="sum", padding_idx=4)
            self.last = nn.EmbeddingBag(10, 3, mode="mean",
                                        include_last_offset=True)

        def forward(self, ids, flat, offsets, w):
            outs = [self.mean(ids), self.sum(flat, offsets,
                                             per_sample_weights=w),
                    self.last(flat, torch.tensor([0, 3, 3, 5, 6]))]
            return weighted(torch.cat([o.flatten() for o in outs]))

    gen = torch.Generator().manual_seed(5)
    batch = (torch.randint(0, 10, (3, 4), generator=gen),
             torch.tensor([1, 2, 4, 5, 4, 7]), torch.tensor([0, 2, 2, 5]),
             torch.rand(6, generator=gen, dtype=torch.float64))
    check_op("embedding bags", Model(), batch, tmp_path)


def test_gather_index_select_take_along_dim_index(tmp_path):
    def fn(m, h, i):
        a = torch.gather(h, 1, i)
        b = torch.index_select(h, 2, i[0, 0, :3] % 5)
        c = torch.take_along_dim(h, i[:, :2], dim=1)
        d = h[:, i[1] % 3]
        e = h[i[0, :2] % 2, :, i[1, :2] % 5 - 5]
        f = torch.take_along_dim(h, i[:, :1] + 2)
        return torch.cat([a.flatten(), b.flatten(), c.flatten(), d.flatten(),
                          e.flatten(), f.flatten()])

    model = OnInput((2, 3, 5), fn)
    gen = torch.Generator().manual_seed(5)
    index = torch.randint(0, 3, (2, 3, 5), generator=gen)
    check_op("gather", model, (randn(2, 3, 5), index), tmp_path)


def test_integer_sums_and_broadcast_to(tmp_path):
    """Sums of booleans and integers are int64, as in PyTorch (MBart's
    label shift counts the tokens that are not padding, then gathers at
    that count), one of them with keepdim and one over every element;
    broadcast_to is expand."""
    def fn(m, h, ids):
        count = ids.ne(0).sum(dim=1)                    # bool -> i64
        total = (ids * 3).sum(dim=(0, 1), keepdim=True)  # i64 -> i64
        every = (ids > 4).sum() + ids.max() - ids.amin(dim=1).sum()
        last = torch.gather(h, 1, (count - 1).view(2, 1, 1).expand(2, 1, 5))
        scale = (total % 7 + every).to(h.dtype)
        wide = torch.broadcast_to(h[:, :1], (2, 3, 5))
        return torch.cat([(last * scale).flatten(), (wide * h).flatten()])

    model = OnInput((2, 3, 5), fn)
    ids = torch.tensor([[3, 0, 5], [6, 7, 0]])
    program = check_op("integer sums", model, (randn(2, 3, 5), ids),
                       tmp_path)
    assert "arith.addi" in program.mlir


def test_computed_indices_outside_their_dimension(tmp_path):
    """Indices computed in the model (ids - 1, counted from the end) that
    no check of the data bounds: inside, reads as PyTorch's (against
    autograd); outside, where PyTorch raises, each read gives NaN instead
    of reading (and its gradient writing) outside the table. A constant
    index outside its dimension is refused."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(6, 3)
            self.p = nn.Parameter(randn(6, 3, seed=2))

        def forward(self, ids):
            at = ids - 1
            flat = at.flatten()
            picked = torch.gather(self.p, 0, flat.view(-1, 1).expand(-1, 3))
            return weighted(torch.cat([
                self.emb(at).flatten(), picked.flatten(),
                self.p[-flat - 1].flatten(),
                torch.index_select(self.p, 0, flat).flatten()]))

    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    program = check_op("computed indices", Model(), (ids,), tmp_path)
    for bad in (0, 7):
        loss, _ = compiled_gradients(
            program, [(torch.tensor([[1, 2, bad], [4, 5, 6]]),)], tmp_path,
            check_grad=False)
        assert math.isnan(loss), bad

    class Constant(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(randn(6, 3, seed=2))

        def forward(self, x):
            return (self.p[torch.tensor([0, 9])] * x).sum()

    with pytest.raises(zb.FrontendError, match=r"constant index holds 9, "
                       r"outside \[-6, 6\)"):
        zb.from_torch(Constant(), (randn(2, 3),))


_COMPUTED_WRITES = {
    "scatter": lambda p, at: p.scatter(
        0, at.view(-1, 1).expand(-1, 3), p[:3] * 2),
    "scatter_add": lambda p, at: p.scatter_add(
        0, at.view(-1, 1).expand(-1, 3), p[:3] * 2),
    "scatter_reduce": lambda p, at: p.scatter_reduce(
        0, at.view(-1, 1).expand(-1, 3), p[:3] * 2, "mean"),
    "index_put": lambda p, at: p.index_put((at,), p[:3] * 2),
    "index_put accumulate": lambda p, at: p.index_put(
        (at,), p[:3] * 2, accumulate=True),
    "index_fill": lambda p, at: p.index_fill(0, at, 0.5),
    "embedding_bag": lambda p, at: F.embedding_bag(
        at, p, torch.tensor([0, 1])),
}


@pytest.mark.parametrize("name", sorted(_COMPUTED_WRITES))
def test_computed_indices_outside_their_dimension_in_writes(name,
                                                            tmp_path):
    """A write (and embedding_bag's read) through indices computed in the
    model (ids - 1): inside its dimension as PyTorch (against autograd);
    where PyTorch raises (index 6 of 6 rows, or -1 where it does not count
    from the end), the written tensor is NaN, so the loss is, instead of
    the write being left out; -1 where PyTorch counts from the end writes
    the last row, as in PyTorch."""
    fn = _COMPUTED_WRITES[name]

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(randn(6, 3, seed=2))

        def forward(self, ids):
            return weighted(fn(self.p, ids - 1))

    model = Model()
    program = check_op(name, model, (torch.tensor([1, 3, 5]),), tmp_path)
    for bad in (0, 7):
        ids = torch.tensor([1, 3, bad])
        loss, _ = compiled_gradients(program, [(ids,)], tmp_path,
                                     check_grad=False)
        try:
            expected = model(ids).item()
        except (IndexError, RuntimeError):
            assert math.isnan(loss), (name, bad)
        else:
            assert loss == pytest.approx(expected, rel=F64_RTOL), (name, bad)


def test_integer_division_and_abs(tmp_path):
    """Integer // and torch.div(rounding_mode="trunc"), % and abs of data,
    with negative operands (floor and trunc differ) and a divisor of -1,
    against PyTorch; a divisor of 0, which PyTorch refuses, gives 0 where
    the CPU's division would stop the process."""
    def fn(m, h, a, b):
        q = torch.stack([a // b, torch.div(a, b, rounding_mode="trunc"),
                         a % b, torch.abs(a - 7), (a * 3) // 4])
        return h * q.to(h.dtype)

    a = torch.tensor([7, -7, 9, -3, 0, 5])
    b = torch.tensor([2, 2, -4, -2, 3, -1])
    model = OnInput((5, 6), fn)
    program = check_op("integer division", model, (randn(5, 6), a, b),
                       tmp_path, check_grad=False)
    assert "arith.floordivsi" in program.mlir

    zero = torch.tensor([2, 0, -4, 0, 3, -1])
    safe = torch.where(zero == 0, 1, zero)
    q = torch.stack([torch.where(zero == 0, 0, a // safe),
                     torch.where(zero == 0, 0, torch.div(
                         a, safe, rounding_mode="trunc")),
                     torch.where(zero == 0, 0, a % safe), torch.abs(a - 7),
                     (a * 3) // 4])
    x = randn(5, 6).double()
    h = x + model.shift.detach()
    loss, _ = compiled_gradients(program, [(x, a, zero)],
                                 tmp_path, check_grad=False)
    assert loss == pytest.approx(weighted(h * q.double()).item(), rel=1e-12)


def test_unfold_and_glu(tmp_path):
    """Tensor.unfold, overlapping (the gradient adds up), in steps that
    skip elements, along an inner dim; glu along either dim."""
    def fn(m, h):
        outs = [h.unfold(2, 3, 1), h.unfold(1, 2, 2), h.unfold(-1, 5, 2),
                F.glu(h, dim=-1 if h.shape[-1] % 2 == 0 else 0),
                F.glu(h[:, :2], dim=1)]
        return torch.cat([o.flatten() for o in outs])

    check_op("unfold", OnInput((2, 3, 6), fn), (randn(2, 3, 6),), tmp_path)


def test_pixel_shuffle_and_unshuffle(tmp_path):
    def fn(m, h):
        up = F.pixel_shuffle(h, 2)
        return torch.cat([up.flatten(), F.pixel_unshuffle(h, 3).flatten(),
                          F.pixel_shuffle(h.reshape(2, 3, 4, 6, 6), 2)
                          .flatten()])

    check_op("pixel shuffle", OnInput((2, 12, 6, 6), fn),
             (randn(2, 12, 6, 6),), tmp_path)


def test_item_beyond_an_assertion_is_unsupported():
    """An item() that scales the loss is refused, naming what it does (one
    that feeds only an assertion, XLM's ``assert lengths.max().item() <=
    slen``, is left out: test_model_matches_autograd[xlm])."""
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 1)

        def forward(self, x, ids):
            return self.lin(x).sum() * (ids != 0).sum().item()

    ids = torch.tensor([[3, 1, 0], [2, 0, 0]])
    with pytest.raises(zb.UnsupportedOpError, match=r"\.item\(\)"):
        zb.from_torch(Scaled(), (randn(2, 3, 4), ids))


def test_roll(tmp_path):
    """torch.roll over one dim, several (Swin's shifted windows), negative
    and wrapping shifts, and the flattened tensor."""
    def fn(m, h):
        outs = [torch.roll(h, 1, 2), torch.roll(h, (-2, 5), (1, 2)),
                torch.roll(h, shifts=(2, 1), dims=(-1, 0)),
                torch.roll(h, 7), torch.roll(h, 0, 1)]
        return torch.cat([o.flatten() for o in outs])

    check_op("roll", OnInput((2, 3, 4), fn), (randn(2, 3, 4),), tmp_path)


def test_chunk_cumsum_sin_cos(tmp_path):
    def fn(m, h):
        a, b = h.chunk(2, dim=-1)
        c = torch.cumsum(a, dim=1) * torch.sin(b) + torch.cos(h[..., :3])
        return torch.cat([c.flatten(), torch.cumsum(h, 0).flatten()])

    model = OnInput((2, 4, 6), fn)
    check_op("cumsum", model, (randn(2, 4, 6),), tmp_path)


def test_rounding(tmp_path):
    """floor, ceil, trunc and round (halves to even, as PyTorch) of values
    that scale and shift them (their derivative is 0, the product's
    gradient flows through the other factor)."""
    def fn(m, h):
        x = torch.cat([h * 3, torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5])
                       .to(h.dtype)])
        outs = [torch.floor(x), torch.ceil(x), torch.trunc(x),
                torch.round(x)]
        return torch.cat([(o * (x + 1)).flatten() for o in outs])

    check_op("rounding", OnInput((12,), fn), (randn(12),), tmp_path)


def test_special_functions(tmp_path):
    """lgamma (Stirling's series, shifted up to 8, reflected below 1/2:
    values on both sides of each switch, negative ones, large ones) with
    its derivative, digamma, and digamma itself (the same shift and
    reflection) with its derivative; erfc, in its tail too; log1p and expm1 near 0, where the plain forms
    cancel, and far from it; log2, log10, exp2. torch.distributions'
    Student's t log-density (transformers' time-series heads) is built of
    them."""
    points = torch.tensor([0.01, 0.3, 0.4999, 0.5001, 0.9, 1.0, 1.5, 2.0,
                           3.3, 7.9, 8.0, 8.1, 20.5, 150.0, 1e4, -0.3,
                           -1.7, -5.5, 1e-9, -1e-9, 0.49, -0.49, 3.0, -3.0])

    def values(x, tiny):
        # log1p and expm1 of values near 1e-9 (the plain forms lose 7
        # digits there), scaled up to weigh as the others.
        return [torch.lgamma(x), torch.log1p(x.abs() - 0.5),
                torch.log1p(tiny) * 1e9, torch.expm1(x.clamp(-30.0, 30.0)),
                torch.expm1(tiny) * 1e9, torch.log2(x.abs()),
                torch.log10(x.abs()), torch.exp2(x.clamp(max=40.0)),
                torch.digamma(x), torch.erfc(x),
                # erfc's tail to its relative precision (1 - erf(x) is 0
                # from x = 6 on).
                torch.erfc(x.clamp(-3.0, 9.0)) * torch.exp(
                    x.clamp(-3.0, 9.0) ** 2)]

    # Each value divided by its size at the points (fixed), so that small
    # and large values weigh alike in the comparison; at a pole (digamma's
    # NaN at -3) as the values 1e-4 from it.
    sizes = [1.0 / (1.0 + v.double().nan_to_num(1e4).abs())
             for v in values(points.double(), 1e-9 * points.double())]

    def fn(m, h):
        x = h + points.to(h.dtype)
        return torch.cat([v * w.to(h.dtype)
                          for v, w in zip(values(x, 1e-9 * x), sizes)])

    model = OnInput((points.numel(),), fn)
    h = 1e-4 * randn(points.numel())
    check_op("special functions", model, (h,), tmp_path)


def test_student_t_log_density(tmp_path):
    """The negative log-likelihood of torch.distributions.StudentT, whose
    validation (``_is_all_true`` of its constraints) is an all-reduce."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x, y):
            df, loc, scale = self.lin(x).unbind(-1)
            dist = torch.distributions.StudentT(
                2.0 + F.softplus(df), loc, F.softplus(scale) + 0.1)
            return -dist.log_prob(y).mean()

    torch.manual_seed(0)
    check_op("student t", Model(), (randn(6, 4), randn(6, seed=2)), tmp_path)


def test_all_and_any(tmp_path):
    """all/any over every element, a dim, several dims, kept dims; on
    floats (not zero) and booleans."""
    def fn(m, h):
        big = h > 0.3
        picks = [big.all(), big.any(dim=1), big.all(dim=(0, 2)),
                 h.any(dim=-1, keepdim=True), (h > -5).all(dim=0)]
        return torch.cat([h.flatten()] + [
            (p.to(h.dtype) * 2).flatten() * h.sum() for p in picks])

    check_op("all and any", OnInput((2, 3, 4), fn), (randn(2, 3, 4),),
             tmp_path)


# -- convolution and pooling --------------------------------------------


def test_conv2d_stride_padding_bias(tmp_path):
    model = OnInput((2, 3, 7, 6), lambda m, h: m.conv(h),
                    conv=nn.Conv2d(3, 4, 3, stride=2, padding=1))
    program = check_op("conv2d", model, (randn(2, 3, 7, 6),), tmp_path)
    assert "linalg.matmul" in program.mlir


def test_conv2d_groups_dilation(tmp_path):
    model = OnInput((2, 4, 8, 7), lambda m, h: m.conv(h),
                    conv=nn.Conv2d(4, 6, (3, 2), stride=(1, 2), padding=(2, 1),
                                   dilation=(2, 1), groups=2, bias=False))
    check_op("grouped conv2d", model, (randn(2, 4, 8, 7),), tmp_path)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_conv1d_same_padding(tmp_path):
    model = OnInput((2, 3, 9), lambda m, h: m.conv(h),
                    conv=nn.Conv1d(3, 2, 4, padding="same"))
    check_op("conv1d", model, (randn(2, 3, 9),), tmp_path)


def test_transposed_convolutions(tmp_path):
    """ConvTranspose1d/2d/3d (DPT's and SAM's upsampling): strides, uneven
    output padding, padding beyond the kernel's reach (a crop), dilation,
    groups, no bias; an unbatched input; torch.flip."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.up1 = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1,
                                          output_padding=1, groups=2)
            self.up2 = nn.ConvTranspose2d(4, 3, (3, 2), stride=(2, 3),
                                          padding=(2, 0), dilation=(1, 2),
                                          output_padding=(1, 2))
            self.up2b = nn.ConvTranspose2d(4, 2, 2, stride=2, bias=False)
            self.up3 = nn.ConvTranspose3d(4, 2, 2, stride=(1, 2, 1),
                                          padding=(0, 1, 1))

        def forward(self, x):
            plane = x.reshape(2, 4, 3, 4)
            outs = [self.up1(x[:, :, :5]), self.up2(plane),
                    self.up2b(plane), self.up2b(plane[0]),
                    self.up3(x.reshape(2, 4, 3, 2, 2)),
                    torch.flip(plane, (1, -1))]
            return weighted(torch.cat([o.flatten() for o in outs]))

    check_op("conv transpose", Model(), (randn(2, 4, 12),), tmp_path)


def test_pooling(tmp_path):
    def fn(m, h):
        a = F.max_pool2d(h, 3, stride=2, padding=1)
        b, _ = F.max_pool2d(h, 2, return_indices=True)
        c = F.avg_pool2d(h, 3, stride=2, padding=1)
        d = F.avg_pool2d(h, (2, 3), stride=(2, 1), padding=(1, 1),
                         count_include_pad=False, ceil_mode=True)
        e = F.adaptive_avg_pool2d(h, (2, 3))
        f = F.adaptive_avg_pool2d(h, (4, 5))
        g = F.adaptive_avg_pool2d(h, 1)
        k = F.max_pool2d(h, 2, stride=2, ceil_mode=True, dilation=1)
        return torch.cat([t.flatten() for t in (a, b, c, d, e, f, g, k)])

    model = OnInput((2, 2, 6, 9), fn)
    check_op("pooling", model, (randn(2, 2, 6, 9),), tmp_path)


# -- normalisation --------------------------------------------------------


def test_interpolate(tmp_path):
    """F.interpolate: nearest (by size and by scale, 2x and not),
    nearest-exact, linear, bilinear, trilinear and bicubic with and without
    align_corners, downsampling too."""
    def fn(m, h):
        outs = [F.interpolate(h, scale_factor=2, mode="nearest"),
                F.interpolate(h, size=(5, 7), mode="nearest"),
                F.interpolate(h, size=(2, 3), mode="nearest-exact"),
                F.interpolate(h, size=(5, 7), mode="bilinear"),
                F.interpolate(h, scale_factor=1.5, mode="bilinear",
                              align_corners=True),
                F.interpolate(h, size=(2, 3), mode="bilinear"),
                F.interpolate(h.flatten(2), scale_factor=2.5,
                              mode="linear"),
                F.interpolate(h.unsqueeze(2), size=(2, 4, 5),
                              mode="trilinear", align_corners=False),
                F.interpolate(h, size=(7, 9), mode="bicubic"),
                F.interpolate(h, scale_factor=0.75, mode="bicubic",
                              align_corners=True)]
        return torch.cat([o.flatten() for o in outs])

    check_op("interpolate", OnInput((2, 2, 3, 4), fn), (randn(2, 2, 3, 4),),
             tmp_path)


def test_interpolate_antialiased(tmp_path):
    """F.interpolate(antialias=True), bilinear and bicubic (SigLIP 2's
    position embeddings): shrinking (filters widened by the scale, over
    several input rows), growing, one dimension each way, by size and by
    scale factor, with and without align_corners."""
    def fn(m, h):
        outs = [F.interpolate(h, size=(4, 3), mode="bilinear",
                              antialias=True),
                F.interpolate(h, size=(12, 5), mode="bilinear",
                              antialias=True, align_corners=True),
                F.interpolate(h, scale_factor=0.45, mode="bilinear",
                              antialias=True),
                F.interpolate(h, size=(5, 11), mode="bicubic",
                              antialias=True),
                F.interpolate(h, scale_factor=(0.4, 1.5), mode="bicubic",
                              antialias=True, align_corners=True)]
        return torch.cat([o.flatten() for o in outs])

    check_op("interpolate antialiased", OnInput((2, 2, 9, 8), fn),
             (randn(2, 2, 9, 8),), tmp_path)


@pytest.mark.filterwarnings("ignore:The tensor attributes")
def test_recurrent_layers(tmp_path):
    """nn.LSTM (two bidirectional layers, batch first, given states),
    nn.GRU (sequence first, no bias), nn.RNN (tanh and ReLU, unbatched),
    their outputs and final states, unrolled over the sequence."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lstm = nn.LSTM(4, 3, num_layers=2, batch_first=True,
                                bidirectional=True)
            self.gru = nn.GRU(6, 5, bias=False)
            self.rnn = nn.RNN(5, 2, nonlinearity="relu", num_layers=2)
            self.tanh = nn.RNN(4, 3, bidirectional=True)
            self.h0 = nn.Parameter(0.1 * torch.randn(4, 2, 3))

        def forward(self, x):
            y, (h, c) = self.lstm(x, (self.h0, torch.tanh(self.h0)))
            z, hz = self.gru(y)
            r, hr = self.rnn(z[:, 0])
            u, hu = self.tanh(x[0])
            return weighted(torch.cat([v.flatten() for v in
                                       (y, h, c, z, hz, r, hr, u, hu)]))

    check_op("recurrent", Model(), (randn(2, 5, 4),), tmp_path)


def test_grid_sample_and_affine_grid(tmp_path):
    """A spatial transformer: affine_grid of a learnt theta (both corner
    conventions), then grid_sample bilinear, nearest and bicubic, zeros
    and border padding, points inside, on the edges and outside the image;
    the gradient reaches the image and theta (through the bilinear and
    bicubic weights)."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.theta = nn.Parameter(torch.tensor(
                [[[0.9, -0.3, 0.1], [0.2, 1.2, -0.15]],
                 [[1.3, 0.1, 0.4], [-0.2, 0.8, 0.05]]]))

        def forward(self, x):
            outs = []
            for corners in (False, True):
                grid = F.affine_grid(self.theta, [2, 3, 5, 6],
                                     align_corners=corners)
                for mode, padding in self.modes:
                    outs.append(F.grid_sample(
                        x, grid, mode=mode, padding_mode=padding,
                        align_corners=corners))
            return weighted(torch.cat([o.flatten() for o in outs]))

    model = Model()
    model.modes = [("bilinear", "zeros"), ("bilinear", "border"),
                   ("nearest", "zeros"), ("nearest", "border"),
                   ("bicubic", "zeros"), ("bicubic", "border")]
    # Against autograd alone: sampling is piecewise linear (nearest:
    # constant) in theta, and with hundreds of sampled points some cross a
    # pixel boundary within a finite-difference step.
    check_op("grid sample", model, (randn(2, 3, 4, 5),), tmp_path,
             check_grad=False)


def test_max_pool_ties_go_to_the_first(tmp_path):
    """Windows holding their maximum more than once (integer-valued input;
    a stride-2 pool's output pooled again with stride 1, as GoogLeNet
    does): PyTorch gives each window's gradient to the first maximal
    element of its scan, not to every one. ``bias`` (zero, so the ties
    stay exact) has the gradient of each input element."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.tensor(1.0))
            self.bias = nn.Parameter(torch.zeros(2, 3, 9, 9))

        def forward(self, x):
            y = x * self.scale + self.bias
            once = F.max_pool2d(y, 3, 2, ceil_mode=True)
            outs = [F.max_pool2d(once, 3, 1, 1, ceil_mode=True), once,
                    F.adaptive_max_pool2d(y, (2, 3)),
                    F.max_pool1d(y.flatten(2), 4, 3)]
            return weighted(torch.cat([o.flatten() for o in outs]))

    x = torch.randint(-2, 3, (2, 3, 9, 9),
                      generator=torch.Generator().manual_seed(5)).float()
    # Finite differences would break the ties.
    check_op("max pool ties", Model(), (x,), tmp_path, check_grad=False)


def test_extrema_with_ties(tmp_path):
    """amax/amin and max/min of a whole tensor share the gradient evenly
    among tied elements; max/min along a dim give it to the first, whose
    index they return; logsumexp. PyTorch's rules, on integer-valued input
    full of ties (``bias`` zero, so they stay exact)."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = nn.Parameter(torch.zeros(3, 4, 5))

        def forward(self, x):
            y = x + self.bias
            values, indices = torch.max(y, 1)
            low, where = torch.min(y, -1, keepdim=True)
            outs = [torch.amax(y, (0, 2)), torch.amin(y, 1, keepdim=True),
                    torch.max(y).reshape(1), torch.min(y).reshape(1),
                    values, low, torch.logsumexp(y, 2),
                    indices.to(y.dtype), where.to(y.dtype)]
            return weighted(torch.cat([o.flatten() for o in outs]))

    x = torch.randint(-2, 3, (3, 4, 5),
                      generator=torch.Generator().manual_seed(6)).float()
    # Finite differences would break the ties.
    check_op("extrema", Model(), (x,), tmp_path, check_grad=False)


def test_batch_norm_train_and_eval(tmp_path):
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            gen = torch.Generator().manual_seed(3)
            self.shift = nn.Parameter(0.1 * torch.randn(4, 3, 5, 2,
                                                        generator=gen))
            self.train_bn = nn.BatchNorm2d(3)
            self.eval_bn = nn.BatchNorm2d(3).eval()
            self.bn1d = nn.BatchNorm1d(3, affine=False)
            with torch.no_grad():
                for bn in (self.train_bn, self.eval_bn):
                    bn.weight.copy_(torch.tensor([1.5, -0.5, 0.8]))
                    bn.bias.copy_(torch.tensor([0.1, 0.2, -0.3]))
                    bn.running_mean.copy_(torch.tensor([0.2, -0.1, 0.3]))
                    bn.running_var.copy_(torch.tensor([0.5, 2.0, 1.2]))

        def forward(self, x):
            h = x + self.shift
            a = self.train_bn(h)
            b = self.eval_bn(h)
            c = self.bn1d(h.flatten(2))
            d = F.batch_norm(h, None, None, training=True)
            return weighted(torch.cat([a.flatten(), b.flatten(), c.flatten(),
                                       d.flatten()]))

    model = Model()
    model.train_bn.train()
    model.bn1d.train()
    check_op("batch_norm", model, (randn(4, 3, 5, 2),), tmp_path)


def test_group_norm_and_rms_norm(tmp_path):
    def fn(m, h):
        a = m.gn(h)
        b = m.rms(h)
        c = F.rms_norm(h, (5,), eps=1e-3)
        d = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return torch.cat([a.flatten(), b.flatten(), c.flatten(), d.flatten()])

    torch.manual_seed(0)
    gn, rms = nn.GroupNorm(2, 4), nn.RMSNorm((3, 5))
    with torch.no_grad():
        gn.weight.uniform_(0.5, 1.5)
        gn.bias.uniform_(-0.5, 0.5)
        rms.weight.uniform_(0.5, 1.5)
    model = OnInput((2, 4, 3, 5), fn, gn=gn, rms=rms)
    check_op("group_norm rms_norm", model, (randn(2, 4, 3, 5),), tmp_path)


def test_native_normalisation_forms(tmp_path):
    """The ATen forms after decomposition, with their statistics outputs
    (batch norm's carry no gradient in PyTorch; group norm's do)."""
    aten = torch.ops.aten

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            gen = torch.Generator().manual_seed(3)
            self.shift = nn.Parameter(0.1 * torch.randn(2, 3, 2, 2,
                                                        generator=gen))
            self.w = nn.Parameter(torch.tensor([1.5, -0.5, 0.8]))
            self.b = nn.Parameter(torch.tensor([0.1, 0.2, -0.3]))
            self.conv = nn.Parameter(0.3 * torch.randn(4, 3, 2, 2,
                                                       generator=gen))
            self.register_buffer("rm", torch.tensor([0.2, -0.1, 0.3]))
            self.register_buffer("rv", torch.tensor([0.5, 2.0, 1.2]))

        def forward(self, x):
            h = x + self.shift
            w, b, rm, rv = self.w, self.b, self.rm, self.rv
            a, m1, r1 = aten.native_batch_norm(h, w, b, rm, rv, True, 0.1,
                                               1e-5)
            e1 = aten._native_batch_norm_legit_no_training(h, w, b, rm, rv,
                                                           0.1, 1e-5)[0]
            c, m2, r2 = aten._native_batch_norm_legit(
                h, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
            d = aten._native_batch_norm_legit_functional(h, w, b, rm, rv,
                                                         True, 0.1, 1e-5)
            g, gm, gr = aten.native_group_norm(h, w, b, 2, 3, 4, 1, 1e-5)
            f, fr = aten._fused_rms_norm(h, [2], w[:2], 1e-5)
            k = aten.convolution(h, self.conv, b[:2].repeat(2), [1, 1],
                                 [1, 0], [1, 1], False, [0, 0], 1)
            parts = (a, e1, c, d[0], g, f, k, m1 * r1, m2 + r2, d[1], d[2],
                     d[3], d[4], gm, gr, fr)
            return weighted(torch.cat([p.flatten() for p in parts]))

    # No finite differences: batch norm's statistics outputs change with
    # the input but carry no gradient.
    check_op("native norms", Model(), (randn(2, 3, 2, 2),), tmp_path,
             check_grad=False)


# -- in-place ops, clamps, detach ----------------------------------------


def test_in_place_ops_and_clamps(tmp_path):
    def fn(m, h):
        y = h.clone()
        y.add_(0.5)
        y.mul_(h)
        y.sub_(h, alpha=0.5)
        y.div_(1.5)
        z = F.relu(y.clone(), inplace=True)
        z = z + F.hardtanh(y.clone(), -0.3, 0.4)
        z.add_(F.relu6(y * 8))
        w = torch.clamp(y, -0.2, 0.3) + y.clamp_min(0.1) + y.clamp_max(-0.1)
        w.clamp_(-1.0, 0.9)
        v = torch.clamp(y, min=h[0])
        # torch.max/min of two tensors: aten.max.other, XGLM's attention.
        u = torch.max(y, 0.7 * h) + torch.min(y, -0.3 * h) + \
            torch.maximum(y, h[1]) + torch.minimum(y, h)
        return torch.cat([z.flatten(), w.flatten(), v.flatten(),
                          u.flatten()])

    model = OnInput((2, 3, 4), fn)
    check_op("in-place", model, (randn(2, 3, 4),), tmp_path)


def test_derivatives_at_zero_and_at_ties(tmp_path):
    """PyTorch's gradients where the inputs sit exactly at 0 or tie (a
    zero-initialised gate or head gives exact zeros: sigmoid(0) has the
    derivative 1/4, not the 0 a stable form built on |x| would give):
    sigmoid, softplus, log-sigmoid and BCE with logits at 0; logaddexp,
    maximum, minimum, fmax, fmin and a clamp to tensor bounds at ties
    (half the gradient to each side), a clamp to a scalar bound (none to
    x), also at a tie of numbers so large that their sum overflows; the
    standard deviation and the norm of zeros (0, where sqrt's derivative
    is infinite); atan2 on the vertical axis, acos and asin at 0; x^0 at 0.
    Against autograd only: finite differences at a tie or a kink give the
    mean of the two sides' slopes, not PyTorch's conventions."""
    x0 = [0.0, 0.0, 1.0, -1.0, 2.0, -0.5, 1.5e308, 0.0]
    y0 = [0.0, 1.0, 1.0, -1.0, 0.5, -0.5, 1.5e308, 0.0]

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.x = nn.Parameter(torch.tensor(x0))
            self.y = nn.Parameter(torch.tensor(y0))

        def forward(self, w):
            x, y = self.x, self.y
            small, ys = x[:6], y[:6]
            outs = [torch.sigmoid(small), F.softplus(small),
                    F.softplus(small, 2.0), F.logsigmoid(small),
                    F.binary_cross_entropy_with_logits(
                        small, torch.sigmoid(ys), reduction="none"),
                    torch.logaddexp(small, ys), torch.maximum(x, y),
                    torch.minimum(x, y), torch.fmax(x, y), torch.fmin(x, y),
                    torch.max(x, y), torch.clamp(x, min=y),
                    torch.clamp(x, max=y), torch.clamp(small, 0.0, 1.0),
                    torch.clamp(small, ys - 1.0, ys), torch.std(small[:2]),
                    torch.linalg.vector_norm(small[:2]),
                    torch.atan2(ys + 1.0, small), torch.acos(0.4 * small),
                    torch.asin(0.4 * small), small.pow(0.0)]
            return (torch.cat([o.flatten() for o in outs]) * w).sum()

    w = torch.linspace(0.5, 1.5, 6 * 6 + 7 * 8 + 2 * 6 + 2 + 4 * 6)
    check_op("ties", Model(), (w,), tmp_path, check_grad=False)


def test_activations(tmp_path):
    """The piecewise and smooth activations of torch.nn beyond ReLU and
    GELU (MobileNetV3's hard swish and sigmoid, leaky ReLU, the ELU family,
    softplus and mish, log-sigmoid, PReLU, RReLU in eval mode), in and out
    of place; inputs spread over [-6, 6] so that each side of every kink
    is taken."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            gen = torch.Generator().manual_seed(4)
            self.shift = nn.Parameter(0.1 * torch.randn(2, 3, 8,
                                                        generator=gen))
            self.prelu = nn.PReLU(3, init=0.2)
            self.prelu1 = nn.PReLU(init=0.3)

        def forward(self, x):
            h = 3.0 * (x + self.shift)
            outs = [F.hardswish(h), F.hardsigmoid(h),
                    F.hardswish(h.clone(), inplace=True),
                    F.leaky_relu(h, 0.2), F.leaky_relu(h.clone(), 0.1,
                                                       inplace=True),
                    F.elu(h, 0.7), F.selu(h), F.celu(h, 0.5),
                    F.softplus(h), F.softplus(h, 2.0, 5.0), F.mish(h),
                    F.logsigmoid(h), self.prelu(h), self.prelu1(h),
                    F.rrelu(h, 0.1, 0.3, training=False)]
            return weighted(torch.cat([o.flatten() for o in outs]))

    check_op("activations", Model(), (randn(2, 3, 8),), tmp_path)


@pytest.mark.parametrize("shape", [(2, 2, 256, 256), (1, 262147)],
                         ids=["image", "prime-row"])
def test_long_sums_in_float32(tmp_path, shape):
    """The mean of 2^18 alike squared errors in float32 (an image loss; or
    of one row of a prime length, 262147, cut into blocks with a shorter
    last one), and its gradient, a sum as long, within 1e-6 of the exact
    (float64) values: one accumulator adding every term would round each
    addition the same way (about 1e-4 off here, either shape)."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(1))

        def forward(self, x, y):
            return F.mse_loss(self.scale * x, y)

    x = 0.83 + 0.01 * torch.rand(
        *shape, generator=torch.Generator().manual_seed(0))
    y = torch.zeros_like(x)
    program = zb.from_torch(Model(), (x, y))
    loss, grads = compiled_gradients(program, [(x, y)], tmp_path,
                                     check_grad=False)
    exact = x.double().square().mean().item()
    assert loss == pytest.approx(exact, rel=1e-6)
    assert float(grads["scale"][0]) == pytest.approx(2 * exact, rel=1e-6)


def test_softplus_far_below_zero(tmp_path):
    """softplus(x) = log1p(exp(x)) for x far below 0 is exp(x) to float32's
    digits (2e-9 at -20), not the 0 of log(1 + exp(x)); log-sigmoid
    alike."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(1))

        def forward(self, x):
            y = self.scale * x
            return (F.softplus(y) - 1e-3 * F.logsigmoid(-y)).sum()

    x = torch.linspace(-30.0, -16.0, 64)
    model = Model()
    program = zb.from_torch(model, (x,))
    loss, grads = compiled_gradients(program, [(x,)], tmp_path,
                                     check_grad=False)
    ref_loss, ref_grads = torch_reference(model, [(x,)])
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    assert_close("softplus grad scale", grads["scale"], ref_grads["scale"],
                 1e-5)


def test_pointwise_losses(tmp_path):
    """l1, smooth L1 (beta 1, 0.5 and 0, which is L1) and Huber losses,
    each reduction; differences on both sides of each kink."""
    def fn(m, h, target):
        outs = [F.l1_loss(h, target), F.l1_loss(h, target, reduction="sum"),
                F.smooth_l1_loss(h, target),
                F.smooth_l1_loss(h, target, beta=0.5, reduction="none"),
                F.smooth_l1_loss(h, target, beta=0.0),
                F.huber_loss(h, target, delta=2.0, reduction="none"),
                F.huber_loss(h, target, reduction="sum"),
                F.mse_loss(h, target)]
        return torch.cat([o.flatten() for o in outs])

    check_op("pointwise losses", OnInput((3, 8), fn),
             (3.0 * randn(3, 8), randn(3, 8, seed=2)), tmp_path)


def test_more_elementwise_ops(tmp_path):
    """Hyperbolic functions (sinh and asinh near 0 too), tan, atan, atan2
    (every quadrant), asin, acos, sign, sinc,
    degrees, frac, fmod and the float remainder (their signs), rounded
    division, hypot, logaddexp (with -inf) and logaddexp2, copysign (of
    -0 too), logit, xlogy and xlog1py (at 0), entr, shrinks, threshold,
    nan_to_num."""
    def fn(m, h):
        small = h * 1e-3
        unit = torch.tanh(h) * 0.9
        outs = [torch.sinh(h), torch.sinh(small) * 1e3, torch.cosh(h),
                torch.tan(unit), torch.asinh(h * 3), torch.asinh(small) * 1e3,
                torch.acosh(h.abs() + 1.5), torch.atanh(unit),
                torch.atan(h * 3), torch.atan(small), torch.asin(unit),
                torch.acos(unit), torch.atan2(h, h.flip(0)),
                torch.atan2(h * 2, -h.abs() - 0.1),
                torch.atan2(h.new_zeros(1), h.new_ones(1)),
                torch.sign(h) * h, torch.sinc(h), torch.deg2rad(h),
                torch.rad2deg(h), torch.frac(h * 3), torch.fmod(h * 3, 0.7),
                torch.fmod(h * 3, -0.7), torch.remainder(h * 3, 0.7),
                torch.remainder(h * 3, -0.7),
                torch.div(h * 3, 0.7, rounding_mode="floor") * h,
                torch.div(h * 3, 0.7, rounding_mode="trunc") * h,
                torch.hypot(h, h.flip(0) + 1),
                torch.logaddexp(h, h.flip(0) * 2),
                torch.logaddexp2(h * 3, h.flip(0)),
                torch.copysign(h, h.flip(0)), torch.copysign(h, -0.0),
                torch.logaddexp(h.new_full((3,), float("-inf")),
                                h.new_full((3,), float("-inf"))).exp(),
                torch.logit(torch.sigmoid(h)), torch.logit(unit.abs(), 0.1),
                torch.xlogy(h, h.abs() + 1),
                torch.xlogy(torch.zeros_like(h), h.abs()),
                torch.special.xlog1py(h, h.abs() * 0.5),
                torch.special.xlog1py(torch.zeros_like(h), h),
                torch.special.entr(h.abs()), F.hardshrink(h, 0.3),
                F.softshrink(h, 0.3), F.threshold(h, 0.1, -2.0),
                torch.nan_to_num(torch.log(h)), torch.nan_to_num(
                    torch.log(h.abs()) / h.sign(), 1.0, 9.0, -9.0)]
        return torch.cat([o.flatten() for o in outs])

    check_op("more elementwise", OnInput((4, 5), fn), (randn(4, 5),),
             tmp_path)


def test_decomposed_losses_and_distances(tmp_path):
    """Ops without a handler of their own, taken through PyTorch's
    decompositions: the binary cross-entropies (with logits, class
    weights, pos_weight), KL divergence, margin, hinge, soft margin,
    multi-label and multi-class margin, Poisson NLL, triplet and cosine
    embedding losses, cosine similarity, pairwise distance, normalize."""
    def fn(m, h, target, labels):
        p = torch.sigmoid(h)
        outs = [F.binary_cross_entropy(p, target),
                F.binary_cross_entropy(p, target, weight=target + 0.5),
                F.binary_cross_entropy_with_logits(h, target),
                F.binary_cross_entropy_with_logits(
                    h, target, pos_weight=torch.linspace(
                        0.5, 2.0, 5, dtype=h.dtype)),
                F.kl_div(F.log_softmax(h, 1), F.softmax(h.flip(0), 1),
                         reduction="batchmean"),
                F.margin_ranking_loss(h[0], h[1], target[2] * 2 - 1),
                F.hinge_embedding_loss(h, target * 2 - 1),
                F.soft_margin_loss(h, target * 2 - 1),
                F.multilabel_soft_margin_loss(h, target),
                F.multi_margin_loss(h, labels),
                F.poisson_nll_loss(h, target),
                F.triplet_margin_loss(h, h.flip(0), h.roll(1, 0)),
                F.cosine_embedding_loss(h, h.flip(0), target[:, 0] * 2 - 1),
                F.cosine_similarity(h, h.flip(0)),
                F.pairwise_distance(h, h.flip(0)), F.normalize(h, dim=1)]
        return torch.cat([o.flatten() for o in outs])

    gen = torch.Generator().manual_seed(3)
    target = (torch.rand(4, 5, generator=gen) > 0.5).double()
    labels = torch.tensor([0, 3, 4, 1])
    check_op("decomposed losses", OnInput((4, 5), fn),
             (randn(4, 5), target, labels), tmp_path)


def test_statistics_and_logic(tmp_path):
    """var/std (corrections, dims, with the mean), p-norms, trace,
    diagonal, count_nonzero, channel_shuffle; isnan/isinf/isfinite and
    logical and bitwise operations feeding where."""
    def fn(m, h):
        x = h.reshape(2, 3, 4)
        var_mean = torch.var_mean(x, dim=(0, 2))
        std_mean = torch.std_mean(x, 1, correction=0, keepdim=True)
        bad = torch.log(h) * torch.exp(h * 100)
        keep = torch.isfinite(bad) & ~torch.isnan(bad) | torch.isinf(bad)
        mixed = torch.logical_xor(h > 0, h > 0.5) ^ (h < -1)
        outs = [x.var(), x.std(1), x.var(2, unbiased=False), *var_mean,
                *std_mean, h.norm(p=3, dim=1), torch.linalg.vector_norm(
                    h, 0.5), torch.trace(h), torch.diagonal(x, 1, 1, 2),
                torch.diagonal(x, -1, 0, 2), torch.count_nonzero(
                    h > 0.2, 1) * h[:, 0],
                F.channel_shuffle(x.reshape(1, 6, 4), 3),
                torch.where(keep, h, -h), torch.where(mixed, h, 2 * h),
                torch.where(torch.logical_or(h > 1, h < -1), h, 0 * h)]
        return torch.cat([o.flatten() for o in outs])

    check_op("statistics", OnInput((4, 6), fn), (randn(4, 6),), tmp_path)


def test_distances_diagonals_buckets(tmp_path):
    """cdist (p = 2 and 1, batched, broadcast batch), diag_embed (offsets
    both ways, other dims), the cross product (broadcast), logcumsumexp,
    aminmax, index_fill, and bucketize/searchsorted (either side) scaling
    values by their bucket."""
    def fn(m, h):
        x = h.reshape(2, 3, 4)
        bounds = torch.tensor([-1.0, 0.0, 0.5], dtype=h.dtype)
        low, high = torch.aminmax(h, dim=1)
        outs = [torch.cdist(x, x.flip(1) + 0.5), torch.cdist(x[0], x, p=1),
                torch.diag_embed(x), torch.diag_embed(x, 1, 0, 2),
                torch.diag_embed(x[0], -2),
                torch.linalg.cross(x[..., :3], h[:1, :3].reshape(1, 1, 3)),
                torch.logcumsumexp(x, 1), torch.logcumsumexp(x * 50, 2),
                low, high, torch.aminmax(h).max,
                h.index_fill(1, torch.tensor([0, -2]), -1.5),
                torch.bucketize(h, bounds) * h,
                torch.bucketize(h, bounds, right=True) * h,
                torch.searchsorted(bounds, h, side="right") * h,
                # Values on the boundaries: the sides differ.
                torch.bucketize(torch.round(h * 2) / 2, bounds) * h,
                torch.bucketize(torch.round(h * 2) / 2, bounds,
                                right=True) * h]
        return torch.cat([o.flatten() for o in outs])

    check_op("distances", OnInput((2, 12), fn), (randn(2, 12),), tmp_path)


def test_sigmoid_and_silu_of_masked_scores(tmp_path):
    """Llama 4's router: the top scores scattered into -inf, then sigmoid
    (0 there, with a derivative of 0, not NaN); sigmoid and SiLU over a
    wide range (their tails saturate without overflow)."""
    def fn(m, h):
        top, where = torch.topk(h, 2, dim=-1)
        scores = torch.full_like(h, float("-inf")).scatter(-1, where, top)
        wide = torch.cat([h * 40.0, h - 90.0, h + 90.0], dim=-1)
        return torch.cat([torch.sigmoid(scores).flatten(),
                          torch.sigmoid(wide).flatten(),
                          F.silu(wide).flatten() * 1e-2])

    check_op("masked sigmoid", OnInput((3, 5), fn), (randn(3, 5),),
             tmp_path)


def test_baddbmm_and_addmm(tmp_path):
    """beta * input + alpha * (a @ b), batched and not; with beta = 0 the
    input is not read, NaN there included (as in PyTorch)."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            gen = torch.Generator().manual_seed(4)
            self.a = nn.Parameter(torch.randn(2, 3, 4, generator=gen))
            self.b = nn.Parameter(torch.randn(2, 4, 5, generator=gen))
            self.bias = nn.Parameter(torch.randn(3, 5, generator=gen))

        def forward(self, x):
            nan = torch.full((2, 3, 5), float("nan"), dtype=x.dtype)
            y = torch.baddbmm(x, self.a, self.b, beta=0.5, alpha=2.0)
            y = y + torch.baddbmm(self.bias, self.a, self.b)
            y = y + torch.baddbmm(nan, self.a, self.b, beta=0.0)
            z = torch.addmm(self.bias, self.a[0], self.b[1], alpha=0.5)
            return weighted(y) + weighted(z)

    check_op("baddbmm", Model(), (randn(2, 3, 5),), tmp_path)


def test_topk_and_repeat_interleave(tmp_path):
    """topk along either dim, largest and smallest, a mixture-of-experts
    router (softmax, top-2, renormalised weights, each token repeated per
    pick: transformers' batched experts), and repeat_interleave with and
    without a dim; no ties, so the indices are PyTorch's."""
    def fn(m, h):
        v, i = torch.topk(h, 3, dim=-1)
        w, j = torch.topk(h, 2, dim=0, largest=False)
        top, idx = h.softmax(-1).topk(2, dim=-1)
        top = top / top.sum(-1, keepdim=True)
        routed = h.repeat_interleave(2, dim=0) * top.reshape(-1, 1)
        picked = h[torch.arange(3).repeat_interleave(2), idx.reshape(-1)]
        return torch.cat([v.flatten(), w.flatten(), routed.flatten(),
                          picked, h.repeat_interleave(3),
                          i.double().flatten(), j.double().flatten()])

    check_op("topk", OnInput((3, 5), fn), (randn(3, 5),), tmp_path)


def test_sort_and_argsort(tmp_path):
    """sort (values and indices) and argsort along either dim, ascending
    and descending, stable among ties (ties made by repeating columns:
    torch.sort with stable=True is the reference); argsort of integers;
    MAE's random masking (argsort of noise, argsort again to restore,
    gathers by both)."""
    def fn(m, h):
        h = torch.cat([h, h[:, :2]], dim=1)  # columns 5-6 tie with 0-1
        v, i = torch.sort(h, dim=-1, stable=True)
        w, j = torch.sort(h, dim=0, descending=True, stable=True)
        k = torch.argsort(h, dim=-1, descending=True, stable=True)
        n = torch.argsort((h * 4).long(), dim=0, stable=True)
        noise = h[:, 1:].detach() * 0.7 + 0.1
        shuffle = torch.argsort(noise, dim=1)
        restore = torch.argsort(shuffle, dim=1)
        kept = torch.gather(h, 1, shuffle[:, :3])
        mask = torch.ones(3, 6, dtype=h.dtype)
        mask[:, :3] = 0
        mask = torch.gather(mask, 1, restore)
        return torch.cat([v.flatten(), w.flatten(), kept.flatten(),
                          (mask * h[:, :6]).flatten()] + [
                              a.to(h.dtype).flatten() for a in (i, j, k, n)])

    check_op("sort", OnInput((3, 5), fn), (randn(3, 5),), tmp_path)


def test_products(tmp_path):
    """prod along a dim (kept or not) and of all elements, and cumprod,
    also over exact zeros: one zero in a row (the gradient there is the
    others' product), two (all 0), none; negative factors."""
    mask = torch.tensor([[1.0, 0, 1, 1, 1], [1, 1, 1, 1, 1],
                         [0, 1, 0, 1, 1], [1, 1, 1, 1, 1]])

    def fn(m, h):
        return torch.cat([h.prod(1), h.prod(0, keepdim=True).flatten(),
                          h.prod().reshape(1), torch.cumprod(h, 1).flatten(),
                          torch.cumprod(h, 0).flatten()])

    def zeros(m, h):
        # Zeros in value whose derivative is 1 (h - h.detach()); a finite
        # difference sees the detached part move too, so against autograd
        # alone.
        k = mask.to(h.dtype)
        z = h * k + (1 - k) * (h - h.detach())
        return torch.cat([z.prod(1), z.prod(0), torch.cumprod(z, 1).flatten(),
                          torch.cumprod(z, 0).flatten()])

    check_op("products", OnInput((4, 5), fn), (randn(4, 5),), tmp_path)
    check_op("products of zeros", OnInput((4, 5), zeros), (randn(4, 5),),
             tmp_path, check_grad=False)


def test_running_extrema(tmp_path):
    """cummax and cummin along either dim, of floats (ties included: the
    last position of the extremum, as PyTorch) and integers."""
    def fn(m, h):
        x = h.reshape(3, 4)
        tied = torch.round(x * 2) / 2
        values, indices = torch.cummax(x, 1)
        outs = [values, indices * x, torch.cummin(x, 0).values,
                torch.cummax(tied, 1).indices * x,
                torch.cummin(tied, 0).indices * x,
                torch.cummax((x * 3).long(), 1).values * x]
        return torch.cat([o.flatten() for o in outs])

    check_op("running extrema", OnInput((12,), fn), (randn(12),), tmp_path)


def test_medians_and_quantiles(tmp_path):
    """median (the lower one of an even count; along a dim with indices,
    kept dims, of all elements), kthvalue, quantile (interpolated, through
    PyTorch's decomposition) and lerp."""
    def fn(m, h):
        x = h.reshape(3, 4)
        values, indices = x.median(1)
        outs = [values, indices * x[:, 0], x.median(0, keepdim=True).values,
                x.median().reshape(1), x.kthvalue(3, 1).values,
                x.kthvalue(1, 0, keepdim=True).values,
                torch.quantile(x, 0.3, dim=1),
                torch.quantile(x, torch.tensor([0.25, 0.9], dtype=h.dtype),
                               dim=0, keepdim=True),
                torch.lerp(x, x.flip(1), 0.3),
                torch.lerp(x, x.flip(0), torch.sigmoid(x))]
        return torch.cat([o.flatten() for o in outs])

    check_op("medians", OnInput((12,), fn), (randn(12),), tmp_path)


def test_topk_ties_go_to_the_lower_index(tmp_path):
    """Among equal values topk picks the lower index first (PyTorch's
    order among ties is unspecified): the loss weighs the indices, and
    equals that of a stable descending sort in PyTorch."""
    def top4(m, h, stable):
        h = torch.cat([h, h[:, :3]], dim=1)  # columns 5-7 tie with 0-2
        if stable:
            v, i = torch.sort(h, dim=-1, descending=True, stable=True)
            v, i = v[:, :4], i[:, :4]
        else:
            v, i = torch.topk(h, 4, dim=-1)
        return v * (1.0 + i.to(v.dtype))

    x = randn(3, 5, seed=4).double()
    model = OnInput((3, 5), lambda m, h: top4(m, h, False)).double()
    reference = OnInput((3, 5), lambda m, h: top4(m, h, True)).double()
    ref_loss, ref_grads = torch_reference(reference, [(x,)])
    loss, grads = compiled_gradients(zb.from_torch(model, (x,)), [(x,)],
                                     tmp_path, check_grad=False)
    assert loss == pytest.approx(ref_loss, rel=F64_RTOL)
    for param, grad in ref_grads.items():
        assert_close(f"topk ties grad {param}", grads[param], grad, F64_RTOL)


def test_scatter(tmp_path):
    """scatter of a value (DeepSeek-V3's group mask, a repeated index
    included) and of a tensor (no repeats: PyTorch leaves the winner
    open) along either dim; the gradient reaches the input where nothing
    is written and the source where it is."""
    def fn(m, h, index):
        marks = torch.zeros_like(h).scatter(1, index, 1.0)
        placed = h.scatter(1, torch.tensor([[4, 0], [1, 3], [2, 4]]),
                           h[:, :2] * 3)
        down = h.scatter(0, torch.tensor([[2, 0, 1, 0, 2]]), h[1:2] ** 2)
        h2 = h.clone()
        h2.scatter_(1, index, -1.0)
        return torch.cat([(marks * h).flatten(), placed.flatten(),
                          down.flatten(), h2.flatten()])

    index = torch.tensor([[0, 2], [3, 3], [4, 1]])
    check_op("scatter", OnInput((3, 5), fn), (randn(3, 5), index), tmp_path)


def test_index_put_and_index_add(tmp_path):
    """Writes at index tensors: x[i] = v, x[i] += v, two index tensors
    broadcast together, an index after a full slice (x[:, i]), indices at
    non-adjacent dims, negative indices, a broadcast value; index_add
    (repeated indices: every add counts; with alpha), index_copy. The
    gradient reaches x where nothing is written and the values that are
    kept."""
    rows = torch.tensor([2, 0, 2])
    unique = torch.tensor([2, 0, 3])

    def fn(m, h):
        a = h * 1.0
        a[torch.tensor([2, 0, -1])] = h[:3] * 2
        b = h * 1.0
        b[unique] += h[1:4] * 3
        c = h * 1.0
        c[unique, torch.tensor([[1], [4]])] += h[0, :3] * h[1, 0]
        d = h * 1.0
        d[:, torch.tensor([-1, 1])] = h[:, :1]
        e = h.reshape(2, 2, 5) * 1.0
        e[torch.tensor([1, 0]), :, torch.tensor([3, 3])] = 7.0 * h[0, :2]
        outs = [a, b, c, d, e, h.index_add(0, rows, h[:3] * h[3]),
                torch.index_add(h, 1, torch.tensor([4, 4]), h[:, :2],
                                alpha=0.5),
                h.index_copy(0, torch.tensor([3, 1]), h[:2] * 3)]
        return torch.cat([o.flatten() for o in outs])

    check_op("index put", OnInput((4, 5), fn), (randn(4, 5),), tmp_path)


def test_negative_indices_as_data(tmp_path):
    """Index tensors given as data may count from the end, as PyTorch's do
    (x[i], x[i] = v): their zb.range_from lets [-n, n) through zb-run's
    check, which still refuses a value past either end. An embedding's ids
    (a table read as they are) stay in [0, n)."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(randn(5, 3, seed=2))
            self.emb = nn.Embedding(5, 3)

        def forward(self, i, ids):
            x = self.p * 1.0
            x[i[:2]] = self.p[i[2:]] * 2
            return weighted(torch.cat([self.p[i], x, self.emb(ids)]))

    i = torch.tensor([0, -1, 2, -5])
    ids = torch.tensor([4, 0])
    program = check_op("negative indices", Model(), (i, ids), tmp_path,
                       check_grad=False)
    assert "zb.range = 5 : i64, zb.range_from = -5 : i64" in program.mlir
    assert program.mlir.count("zb.range_from") == 1
    with pytest.raises(zb.CompilerError, match=r"holds -6 at \[0, 1\], "
                       r"outside the model's range \[-5, 5\)"):
        compiled_gradients(program, [(torch.tensor([0, -6, 2, 1]), ids)],
                           tmp_path, check_grad=False)
    with pytest.raises(zb.CompilerError, match=r"holds -1 at \[0, 0\], "
                       r"outside the model's range \[0, 5\)"):
        compiled_gradients(program, [(i, torch.tensor([-1, 0]))], tmp_path,
                           check_grad=False)


def test_index_put_with_repeated_indices(tmp_path):
    """x[i] = v and x[i] += v with an index repeated, and scatter with a
    repeated index: the last write wins (PyTorch leaves the order open;
    here the value against PyTorch's), and the gradients are PyTorch's:
    every written value gets the output's gradient at its place, one that
    a later value overwrote too (grad[i], grad.gather(dim, index)). With
    only the kept values' gradient (the derivative of this order) the
    overwritten values' differ."""
    def fn(m, h):
        a = h * 1.0
        a[torch.tensor([2, 0, 2])] = h[1:4] * 2
        b = h * 1.0
        b[torch.tensor([1, 3, 1])] += h[:3] * 3
        # 3 and -1 name one row of four.
        d = h * 1.0
        d[torch.tensor([3, -1])] = h[:2] * 4
        c = h.scatter(1, torch.tensor([[0, 0], [1, 2], [4, 4], [3, 1]]),
                      h[:, 2:4] ** 2)
        return torch.cat([a.flatten(), b.flatten(), c.flatten(),
                          d.flatten()])

    model = OnInput((4, 5), fn).double()
    batch = (randn(4, 5).double(),)
    program = zb.from_torch(model, batch)
    loss, grads = compiled_gradients(program, [batch], tmp_path,
                                     check_grad=False)
    ref_loss, ref_grads = torch_reference(model, [batch])
    assert loss == pytest.approx(ref_loss, rel=F64_RTOL)
    assert_close("repeated writes grad", grads["shift"], ref_grads["shift"],
                 F64_RTOL)


def test_masked_scatter(tmp_path):
    """masked_scatter: the masked elements take the source's leading
    elements in order, the mask broadcast (LLaVA's [batch, tokens, 1] over
    the embeddings); 5040 elements run the blocked running count two
    levels deep, each with a partial last block. The gradient reaches the
    input where the mask is false and the source elements taken."""
    gen = torch.Generator().manual_seed(5)
    rows = torch.rand(4, 7, 1, generator=gen) < 0.5
    flat = torch.rand(5040, generator=gen) < 0.3

    def fn(m, h, g):
        merged = h.masked_scatter(rows, g * 2)
        wide = h.reshape(5040).masked_scatter(flat, (h * g).reshape(5040))
        return torch.cat([merged.flatten(), wide])

    check_op("masked scatter", OnInput((4, 7, 180), fn),
             (randn(4, 7, 180), randn(4, 7, 180, seed=2)), tmp_path)


def test_boolean_index_put(tmp_path):
    """x[mask] = v and index_put with accumulate for a boolean mask (a
    data argument, as Kosmos-2's image positions, or a constant): one row
    of v per masked element taken in order, over the leading dims or all
    of them; a value shared by the masked elements, also after a full
    slice. (x[mask] += v reads x[mask] first, a value-dependent shape.)"""
    def fn(m, h, rows):
        rows = rows.bool()
        a = h * 1.0
        a[rows] = h[:2] * 2
        b = h * 1.0
        b.index_put_((rows,), h[2:] ** 2, accumulate=True)
        grid = torch.tensor([[1, 0, 0, 1, 1], [0, 0, 1, 0, 0],
                             [0, 1, 0, 0, 0], [1, 0, 0, 0, 1]]).bool()
        c = h * 1.0
        c[grid] = h.flatten()[5:12] * h[1, 0]
        d = h * 1.0
        d[:, grid[0]] = h[:, :1] * 3
        e = h * 1.0
        e.index_put_((grid,), h[3, 4], accumulate=True)
        return torch.cat([o.flatten() for o in (a, b, c, d, e)])

    rows = torch.tensor([0, 1, 0, 1])
    check_op("boolean index put", OnInput((4, 5), fn), (randn(4, 5), rows),
             tmp_path)


def test_boolean_index_read(tmp_path):
    """x[mask] where a runtime assertion fixes how many elements the mask
    selects (transformers checks that the image tokens match the image
    features; Qwen3-VL adds its deepstack features at hidden[mask]): the
    selected rows in order, over the leading dim or an inner one (a
    constant mask), and x[mask] = x[mask] + v through it. Without the
    assertion the count sizes a tensor by the values: refused, naming the
    line."""
    def fn(m, h, rows):
        rows = rows.bool()
        torch._check(rows.sum().item() == 2)
        picked = h[rows] * h[rows].flip(0)
        a = h * 1.0
        a[rows] = a[rows] + h[:2] ** 2
        columns = torch.tensor([1, 0, 1, 1, 0]).bool()
        return torch.cat([o.flatten() for o in (picked, a, h[:, columns])])

    rows = torch.tensor([0, 1, 0, 1])
    check_op("boolean index read", OnInput((4, 5), fn), (randn(4, 5), rows),
             tmp_path)

    class Unchecked(nn.Module):
        def forward(self, h, rows):
            return h[rows.bool()].square().sum()  # the line named

    import inspect
    first = inspect.getsourcelines(Unchecked.forward)[1]
    with pytest.raises(zb.FrontendError) as info:
        zb.from_torch(Unchecked(), (randn(4, 5), rows))
    assert f"test_aten_ops.py:{first + 1} branches on" in str(info.value)


def test_scatter_add(tmp_path):
    """scatter_add along either dim, repeated indices summing (the
    routing weights of a mixture of experts: each token's chosen experts'
    weights placed among all experts), in place too; the gradient reaches
    the input whole and the source as what each position added to."""
    def fn(m, h, index):
        routing = h.new_zeros(3, 5).scatter_add(1, index, h[:, :2] * 2)
        down = h.scatter_add(0, torch.tensor([[2, 0, 2, 0, 2]]), h[1:2] ** 2)
        h2 = h.clone()
        h2.scatter_add_(1, index, h[:, 3:] * h[:, 3:])
        return torch.cat([(routing * h).flatten(), down.flatten(),
                          h2.flatten()])

    index = torch.tensor([[0, 2], [3, 3], [4, 1]])
    check_op("scatter_add", OnInput((3, 5), fn), (randn(3, 5), index),
             tmp_path)


def test_scatter_reduce_sum_and_mean(tmp_path):
    """scatter_reduce's sum and mean (message passing's aggregations), with
    and without the destination's own value; a destination nothing lands
    on keeps its value."""
    index = torch.tensor([[0, 2, 0, 2, 2], [1, 1, 0, 2, 0],
                          [0, 0, 0, 0, 2]])

    def fn(m, h):
        x = h[:, :4] * 0.5
        outs = [x.scatter_reduce(1, index, h, reduce)
                for reduce in ("sum", "mean")]
        outs += [x.scatter_reduce(1, index, h, reduce, include_self=False)
                 for reduce in ("sum", "mean")]
        return torch.cat([o.flatten() for o in outs])

    check_op("scatter reduce", OnInput((3, 5), fn), (randn(3, 5),),
             tmp_path)


def test_grouped_products(tmp_path):
    """Rows times their group's matrix (a mixture of experts' products,
    ``zerobubble::grouped_mm``), the weight [G, K, N] and [G, N, K]: groups
    in no order, one empty, one of a single row, one of consecutive rows;
    loss and gradients against autograd and finite differences. The
    compiled object calls the runtime's grouped products (rows and, for
    the weights' gradients, sums over each group's rows) instead of the
    loops over every group."""
    from zerobubble.frontend import _grouped_mm_op

    group = torch.tensor([3, 0, 3, 1, 1, 3])

    def fn(m, h, g):
        y = torch.tanh(_grouped_mm_op(h, m.up, g, False))
        return _grouped_mm_op(y, m.down, g, True)

    model = OnInput((6, 5), fn)
    model.up = nn.Parameter(randn(4, 5, 7, seed=2))
    model.down = nn.Parameter(randn(4, 3, 7, seed=3))
    program = check_op("grouped_mm", model, (randn(6, 5), group), tmp_path)

    path = tmp_path / "model.mlir"
    out = run_tool("zb-run", [path, "--grads", "--params",
                              tmp_path / "params.npz", "--inputs",
                              tmp_path / "inputs.npz", "--compile-only"])
    code = open(out.stdout.strip(), "rb").read()
    for name in (b"zbrt_dgemm_grouped_rows", b"zbrt_dgemm_grouped_reduce"):
        assert name in code, name
    assert program.mlir.count("linalg.index 2") >= 2

    # The GPU's form (--zb-expand-grouped-products: every group's batched
    # product, then each row's pick), run here: the same gradients.
    expanded = tmp_path / "expanded.mlir"
    run_tool("zb-opt", [path, "--zb-expand-grouped-products", "-o",
                        expanded])
    dumped = tmp_path / "expanded-grads.npz"
    run_tool("zb-run", [expanded, "--grads", "--params",
                        tmp_path / "params.npz", "--inputs",
                        tmp_path / "inputs.npz", "--dump-grads", dumped])
    ref_loss, ref_grads = torch_reference(
        model.double(), [(randn(6, 5).double(), group)])
    with np.load(dumped) as data:
        assert float(data["loss"]) == pytest.approx(ref_loss, rel=F64_RTOL)
        for param, grad in ref_grads.items():
            assert_close(f"expanded grad {param}", data[param], grad,
                         F64_RTOL)
    code = open(run_tool("zb-run", [
        expanded, "--grads", "--params", tmp_path / "params.npz",
        "--inputs", tmp_path / "inputs.npz",
        "--compile-only"]).stdout.strip(), "rb").read()
    assert b"grouped" not in code


def test_histc(tmp_path):
    """torch.histc against PyTorch: the edges (min in the first bin, max in
    the last), values outside the range and NaN not counted; and of each
    row's top 2 as floats, as a mixture of experts' load-balancing loss
    counts tokens per expert. The counts scale the loss's terms."""
    def fn(m, h, v):
        edges = torch.histc(v, bins=4, min=-2, max=2)
        chosen = h.topk(2, dim=-1).indices.reshape(-1).to(h.dtype)
        experts = torch.histc(chosen, bins=4, min=0, max=4)
        return torch.cat([(h * edges).flatten(), (h * experts).flatten()])

    values = torch.tensor([-2.0, -1.9, -1.0, -0.5, 0.0, 0.5, 1.99, 2.0, 2.5,
                           -3.0, float("nan")])
    check_op("histc", OnInput((3, 4), fn), (randn(3, 4), values), tmp_path)


def test_casts_to_bool(tmp_path):
    """.bool() of floats and integers is "not zero" (0.3 and 2 are true),
    and ~ negates it (DeepSeek-V3 masks its expert groups that way)."""
    def fn(m, h, labels):
        keep = ~torch.relu(h).bool()  # 0.3 is true, 0 false
        chosen = labels.bool().unsqueeze(-1)
        return torch.cat([torch.where(chosen, h, -h).flatten(),
                          h.masked_fill(keep, 0.0).flatten(),
                          labels.bool().to(h.dtype)])

    labels = torch.tensor([2, 0, -3])
    check_op("bool casts", OnInput((3, 5), fn), (randn(3, 5), labels),
             tmp_path)


def test_linalg_norm(tmp_path):
    """torch.linalg.norm (OWL-ViT normalises its embeddings with it): the
    2-norm by default, Frobenius over two dims, a vector ord along one."""
    def fn(m, h):
        outs = [torch.linalg.norm(h, dim=-1, keepdim=True),
                torch.linalg.norm(h), torch.linalg.norm(h, "fro", (0, 2)),
                torch.linalg.norm(h, 1, dim=1),
                torch.linalg.norm(h, float("inf"), dim=0)]
        return torch.cat([o.flatten() for o in outs])

    check_op("linalg norm", OnInput((2, 3, 4), fn), (randn(2, 3, 4),),
             tmp_path)


def test_norms_weight_norm_unfold_argmax(tmp_path):
    """linalg.vector_norm (2, 1 and max; a zero row's 2-norm gradient is
    0, as PyTorch's), a weight-normalised convolution (wav2vec2's), unfold
    (ConvBERT's), argmax/argmin of floats and integers (CLIP's end-token
    lookup), |x| at 0 (gradient 0), torch.multiply and torch.concat."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(2)
            self.conv = nn.utils.parametrizations.weight_norm(
                nn.Conv1d(3, 4, 3, padding=1), dim=2)

        def forward(self, h, ids):
            rows = torch.cat([h, torch.zeros_like(h[:1])])
            norms = [torch.linalg.vector_norm(rows, dim=-1),
                     torch.linalg.vector_norm(h, ord=1, dim=0, keepdim=True),
                     torch.linalg.vector_norm(h, ord=float("inf")).reshape(1),
                     torch.linalg.vector_norm(h).reshape(1)]
            conv = self.conv(h.unsqueeze(0))
            cols = F.unfold(h.reshape(1, 1, 3, 5), (2, 3), dilation=(1, 2),
                            padding=1, stride=(1, 2))
            last = h[torch.arange(3), ids.argmax(dim=-1)]
            least = h.reshape(-1).gather(0, h.argmin().reshape(1))
            zero = torch.abs(rows - rows.detach() + rows[-1:])
            return torch.concat([*(n.flatten() for n in norms),
                              conv.flatten(), cols.flatten(), last, least,
                              torch.multiply(h, 2.0).flatten(),
                              zero.flatten()])

    ids = torch.tensor([[1, 7, 3, 7, 0], [4, 2, 2, 9, 9], [0, 0, 0, 0, 1]])
    check_op("norms", OnInput((3, 5), lambda m, h, i: m.inner(h, i),
                              inner=Model()), (randn(3, 5), ids), tmp_path)


def test_fft_real_and_imaginary_parts(tmp_path):
    """torch.fft.fftn over two dims (FNet's token mixing: its real part),
    fft.fft along one with each normalisation, and the imaginary parts."""
    def fn(m, h):
        x = h.reshape(2, 3, 5)
        mixed = torch.fft.fftn(x, dim=(1, 2))
        line = torch.fft.fft(h, norm="ortho")
        other = torch.fft.fft(h.t(), dim=0, norm="forward")
        return torch.cat([mixed.real.flatten(), mixed.imag.flatten(),
                          line.real.flatten(), line.imag.flatten(),
                          other.real.flatten(), other.imag.flatten()])

    check_op("fft", OnInput((6, 5), fn), (randn(6, 5),), tmp_path)


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
def test_complex_rotary_embedding(tmp_path):
    """Rotary embeddings the way Meta's Llama code (and transformers'
    Llama 4) writes them: view_as_complex of pairs, a product with
    polar(1, angle) of a learnt frequency (so polar is not folded) and
    with a folded complex constant, view_as_real; complex sums,
    differences, a division by a scalar and by a real tensor, views and
    cat of complex tensors, the FFT of a complex one, real and imag."""

    class Rotary(nn.Module):
        def __init__(self):
            super().__init__()
            self.freq = nn.Parameter(torch.tensor([0.3, -1.1, 0.7]))
            angles = torch.outer(torch.arange(4.0), torch.tensor(
                [1.0, 0.1, 0.01]))
            self.register_buffer("fixed", torch.polar(torch.ones_like(
                angles), angles), persistent=False)

        def forward(self, x):
            pairs = torch.view_as_complex(x.reshape(2, 4, 3, 2))
            turn = torch.polar(torch.ones(4, 3, dtype=x.dtype),
                               torch.arange(4.0, dtype=x.dtype)[:, None]
                               * self.freq)
            rotated = pairs * turn * self.fixed.to(pairs.dtype)
            mixed = (rotated + pairs) / 2.0 - pairs * 0.25
            scaled = mixed / (1.0 + x[..., :3] ** 2)
            joined = torch.cat([scaled, rotated.transpose(1, 2)
                                .reshape(2, 4, 3)], dim=1)
            spectrum = torch.fft.fft(joined, dim=1)
            return torch.cat([torch.view_as_real(joined).flatten(),
                              spectrum.real.flatten(),
                              spectrum.imag.flatten(),
                              # To a real type: the real part.
                              spectrum.to(x.dtype).flatten()])

    torch.manual_seed(0)
    model = Rotary()
    check_op("complex rotary", OnInput((2, 4, 6), lambda m, h: m.rot(h),
                                       rot=model), (randn(2, 4, 6),),
             tmp_path)


def test_complex_operand_of_other_ops_is_unsupported():
    def fn(m, h):
        return torch.view_as_complex(h.reshape(3, 2)).exp().real

    with pytest.raises(zb.UnsupportedOpError, match="complex operands"):
        zb.from_torch(OnInput((6,), fn), (randn(6),))


def test_einsum(tmp_path):
    """torch.einsum: XLNet's attention terms, a projection contracting two
    labels, a broadcast ellipsis, the implicit output, three operands, an
    outer product, a label summed within one operand, a transpose and a
    full sum."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            gen = torch.Generator().manual_seed(5)
            self.k = nn.Parameter(torch.randn(5, 2, 3, 4, generator=gen))
            self.w = nn.Parameter(torch.randn(6, 3, 4, generator=gen))
            self.m = nn.Parameter(torch.randn(1, 6, 5, generator=gen))
            self.v = nn.Parameter(torch.randn(6, generator=gen))

        def forward(self, q):  # q: i b n d = 4 2 3 4
            scores = torch.einsum("ibnd,jbnd->bnij", q, self.k)
            mixed = torch.einsum("bnij,jbnd->ibnd", scores, self.k)
            out = torch.einsum("ibnd,hnd->ibh", mixed, self.w)
            back = torch.einsum("ibh,hnd->ibnd", out, self.w)
            flat = q.reshape(4, 4, 6)
            ys = [scores, back,
                  torch.einsum("...ij,...jk->...ik", flat, self.m),
                  torch.einsum("ij,jk", flat[0], self.m[0]),
                  torch.einsum("ab,bc,c->a", flat[1], self.m[0], self.v[:5]),
                  torch.einsum("i,j->ij", self.v, flat[0, 0]),
                  torch.einsum("abc,cd->ad", self.k[0], self.w[0].t()),
                  torch.einsum("ij->ji", flat[1]),
                  torch.einsum("ij->", flat[0]).reshape(1)]
            return weighted(torch.cat([y.flatten() for y in ys]))

    check_op("einsum", Model(), (randn(4, 2, 3, 4),), tmp_path)


def test_empty_slice(tmp_path):
    """x[..., n:] of a dimension of n (Phi-3's rotary split at full width):
    an empty tensor, which cat leaves out."""
    def fn(m, h):
        rot, rest = h[..., :4], h[..., 4:]
        return torch.cat([rot * 2.0, rest * 3.0], dim=-1)

    check_op("empty slice", OnInput((2, 4), fn), (randn(2, 4),), tmp_path)


def test_precision_casts(tmp_path):
    """A float64 model computing a part in float32 (Mixtral's router
    calls .float()): each gradient comes back through the cast in its
    tensor's type. float32 rounding, so a float32 tolerance."""
    def fn(m, h):
        return (h.float().softmax(-1) * 2).to(h.dtype) * h

    check_op("casts", OnInput((3, 5), fn), (randn(3, 5),), tmp_path,
             rtol=1e-6, check_grad=False)


def test_bfloat16_buffer(tmp_path):
    """A bfloat16 buffer (RecurrentGemma's normaliser, sqrt(width) in
    bfloat16) converted to the model's type where it is used: a constant
    folded in PyTorch (NumPy has no bfloat16). Not through check_op, whose
    .double() would convert the buffer."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(randn(3, 5).double())
            self.register_buffer("normaliser", torch.tensor(
                5 ** 0.5, dtype=torch.bfloat16))

        def forward(self, h):
            return weighted(h * self.w * self.normaliser.to(h.dtype))

    model, batch = Model(), (randn(3, 5, seed=2).double(),)
    ref_loss, ref_grads = torch_reference(model, [batch])
    loss, grads = compiled_gradients(zb.from_torch(model, batch), [batch],
                                     tmp_path)
    assert loss == pytest.approx(ref_loss, rel=F64_RTOL)
    assert_close("bf16 buffer grad w", grads["w"], ref_grads["w"], F64_RTOL)


def test_detach_stops_the_gradient(tmp_path):
    def fn(m, h):
        scale = (h * h).sum().detach()
        return h * scale + h.detach() ** 3

    model = OnInput((3, 4), fn)
    check_op("detach", model, (randn(3, 4),), tmp_path, check_grad=False)


def test_no_grad_region_stops_the_gradient(tmp_path):
    """torch.no_grad() in forward: export makes it a higher-order op whose
    submodule is a get_attr node; no gradient flows out of it."""
    def fn(m, h):
        with torch.no_grad():
            scale = torch.tanh(h).sum()
        return h * scale

    model = OnInput((3, 4), fn)
    check_op("no_grad", model, (randn(3, 4),), tmp_path, check_grad=False)


def test_no_grad_in_place_change_keeps_the_gradient(tmp_path):
    """A tensor changed in place under torch.no_grad() (clamp_, an indexed
    write of -0): later reads see the new values, and its gradient passes
    through as if unchanged, as PyTorch's (autograd records no change);
    what the region computes gets none. A tensor with infinities too."""
    def fn(m, h):
        y = h * 2
        z = torch.where(h > 0.5, float("inf"), h)
        with torch.no_grad():
            y.clamp_(-1.0, 1.0)
            y[:, 0] = -0.0
            z.clamp_(max=1.0)
            scale = y.abs().sum()
        return torch.cat([(y * 3).flatten(), (y * h * scale).flatten(),
                          torch.copysign(h, y).flatten(), (z * h).flatten()])

    # No finite-difference check: the gradient is not the derivative.
    check_op("no_grad in place", OnInput((3, 4), fn), (randn(3, 4),),
             tmp_path, check_grad=False)


def _views_before_a_write():
    """(name, fn) pairs: a view of y (or of y's view) taken before an
    in-place write to y or to another view of it, read after the write."""
    def cat(*ts):
        return torch.cat([t.flatten() for t in ts])

    def sibling_views(y, h):
        a, b = y[:, :3], y[:, 2:]
        a.mul_(h[:, :3])
        return cat(b, y)

    def same_view_twice(y, h):
        a, b = y[0], y[0]
        a.add_(h[0])
        return cat(b, y)

    def view_of_a_view_written(y, h):
        w = y.view(6, 4)
        a, b = w[0], y[0]
        a.add_(h[0, :4])
        return cat(b, w, y)

    def sibling_read_alone(y, h):
        # Only the other view is read afterwards, not y.
        a, b = y[0], y[0:2]
        a.mul_(h[0])
        return b

    def view_of_a_view_read_alone(y, h):
        w = y.view(24)
        a, b = w[:8], y[0]
        a.add_(1.0)
        return b

    def reshaped_in_place(y, h):
        # What unsqueeze_ returns is v, re-shaped.
        v = y[0]
        u = v.unsqueeze_(0)
        y.mul_(h)
        return u

    def in_place_result(y, h):
        r = y[1:].add_(1.0)
        y.mul_(h)
        return r

    def setitem(y, h):
        v = y.view(24)
        y[1] = h[0] * 2
        return cat(v, y)

    def plus_equals(y, h):
        v = y.reshape(6, 4)
        y += h
        return cat(v, y)

    return [
        ("view", lambda y, h: (v := y.view(6, 4), y.add_(h * h),
                               cat(v, y))[-1]),
        ("select", lambda y, h: (v := y[1], y.mul_(h), cat(v, y))[-1]),
        ("slice relu_", lambda y, h: (v := y[:, 0:2], y.relu_(),
                                      cat(v, y))[-1]),
        ("transpose", lambda y, h: (v := y.t(), y.mul_(0.5),
                                    cat(v, y))[-1]),
        ("unsqueeze", lambda y, h: (v := y.unsqueeze(0), y.add_(1.0),
                                    cat(v, y))[-1]),
        ("view of a slice", lambda y, h: (v := y.view(6, 4)[1:],
                                          y.add_(h), cat(v, y))[-1]),
        ("reshape +=", plus_equals),
        ("setitem", setitem),
        ("sibling views", sibling_views),
        ("same view twice", same_view_twice),
        ("sibling read alone", sibling_read_alone),
        ("reshaped in place", reshaped_in_place),
        ("an in-place op's result", in_place_result),
        ("view of a view read alone", view_of_a_view_read_alone),
        ("view of a view written", view_of_a_view_written),
        # A copy (contiguous() of a transpose) keeps its values.
        ("contiguous copy", lambda y, h: (c := y.t().contiguous(),
                                          y.add_(h), cat(c, y))[-1]),
    ]


@pytest.mark.parametrize("name,body", _views_before_a_write(),
                         ids=[n for n, _ in _views_before_a_write()])
def test_a_view_sees_later_in_place_writes(name, body, tmp_path):
    """Views share their base's storage: a view taken before an in-place
    write to the base or to another view of it reads the new values
    (ReLU(inplace=True) after a slice was kept for a skip connection).
    Each case fails where the view keeps the old ones."""
    check_op(name, OnInput((4, 6), lambda m, h: body(h * 1.5, h)),
             (randn(4, 6),), tmp_path)


def test_a_view_of_a_data_argument_sees_its_change(tmp_path):
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(randn(4, 6, seed=2))

        def forward(self, x):
            v = x[0]
            x.mul_(self.p)
            return weighted(torch.cat([v, x.flatten()]))

    # The forward changes x: the reference and the compiled run each get
    # their own.
    x = randn(4, 6, dtype=torch.float64)
    model = Model().double()
    program = zb.from_torch(model, (x.clone(),))
    ref_loss, ref_grads = torch_reference(model, [(x.clone(),)])
    loss, grads = compiled_gradients(program, [(x.clone(),)], tmp_path)
    assert loss == pytest.approx(ref_loss, rel=F64_RTOL)
    assert_close("data view grad p", grads["p"], ref_grads["p"], F64_RTOL)


@pytest.mark.parametrize("how", ["no_grad", "detach"])
def test_parameter_changed_in_place_is_refused(how):
    """PyTorch keeps the change in the parameter; the compiled step
    changes parameters only in its optimizer update."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(4, 4))

        def forward(self, x):
            if how == "no_grad":
                with torch.no_grad():
                    self.weight.clamp_(-1.0, 1.0)
            else:
                self.weight.detach()[0].zero_()
            return (x @ self.weight).sum()

    with pytest.raises(zb.UnsupportedOpError,
                       match="parameter 'weight' is changed in place"):
        zb.from_torch(Model(), (torch.randn(2, 4),))


def test_in_place_update_through_slices_and_indices(tmp_path):
    """Writes through x[i] and x[a:b] views (nested too) reach the base
    tensor, which is read afterwards: T5's shift of the labels to the
    right (new_zeros, copy_ into [..., 1:], fill_ of [..., 0])."""
    def fn(m, h):
        h = h * 2
        h[:, 0].add_(1.0)
        h[1:, 2:].mul_(h[:2, :2].clone())
        g = h.new_zeros(h.shape)
        g[..., 1:] = h[..., :-1]
        g[..., 0] = 0.5
        g[-1][1:3].sub_(h[0, :2])
        return torch.cat([h.flatten(), g.flatten()])

    check_op("view writes", OnInput((3, 4), fn), (randn(3, 4),), tmp_path)


def test_in_place_update_through_reshapes_and_transposes(tmp_path):
    """Writes through x.t(), x.view(...), permute and a contiguous() that
    aliases reach the base; contiguous() of a transposed tensor is a copy,
    and writes into it stay there."""
    def fn(m, h):
        h = h * 2
        h.t()[1].mul_(3.0)
        h.view(2, 6)[1, :2].add_(h[0, :2].clone())
        c = h.t().contiguous()
        c[0].fill_(0.5)
        h.contiguous()[2].sub_(1.0)
        h.unsqueeze(0).permute(0, 2, 1)[0, 3].add_(h[:, 1].clone())
        return torch.cat([h.flatten(), c.flatten()])

    check_op("reshaped and transposed view writes", OnInput((3, 4), fn),
             (randn(3, 4),), tmp_path)


def test_axis_moving_views_and_zero(tmp_path):
    """swapaxes, swapdims, movedim and moveaxis (one dim and lists, negative
    too) as values and as views written through, zero_() of a slice
    (MaxViT's partition swap; Swin V2's q/k/v bias with k's part zeroed),
    and the in-place re-shapes transpose_, unsqueeze_, squeeze_,
    swapaxes_."""
    def fn(m, h):
        h = h * 2
        a = torch.swapaxes(h, 0, 2) * torch.movedim(h, -1, 0).transpose(1, 2)
        b = torch.moveaxis(h, [0, -1], [2, 0]) + torch.swapdims(h, 1, 2)\
            .permute(1, 2, 0)
        g = h.clone()
        g.swapaxes(0, 1)[1].add_(h[:, 0].clone())
        g.movedim(2, 0)[1:3].mul_(3.0)
        g.moveaxis([0, 1], [1, 2])[:, 0].zero_()
        g[1, 1:].zero_()
        # In-place re-shapes: the tensor is re-shaped, its elements kept.
        c = h * 1.0
        c.transpose_(0, 2)
        c.unsqueeze_(1)
        c.mul_(torch.arange(24.0, dtype=h.dtype).reshape(4, 1, 3, 2))
        c.squeeze_(1)
        c.t_() if c.dim() == 2 else c.swapaxes_(0, 1)
        return torch.cat([a.flatten(), b.flatten(), g.flatten(),
                          c.flatten(), h.flatten()])

    check_op("axis-moving views", OnInput((2, 3, 4), fn),
             (randn(2, 3, 4),), tmp_path)


def test_constant_built_by_in_place_writes(tmp_path):
    """An index table built by in-place writes into views of constants
    (BEiT's relative position index: a permuted, contiguous() copy, then
    slices of it) folds with its writes."""
    def fn(m, h):
        grid = torch.meshgrid(torch.arange(3), torch.arange(4),
                              indexing="ij")
        coords = torch.stack(grid).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(
            1, 2, 0).contiguous()
        rel[:, :, 0] += 2
        rel[:, :, 0] *= 7
        index = torch.zeros(13, 13, dtype=rel.dtype)
        index[1:, 1:] = rel.sum(-1)
        index[0, :] = 30
        return torch.cat([h.flatten()] * 3)[index.view(-1)]

    check_op("constant built in place", OnInput((3, 4), fn),
             (randn(3, 4),), tmp_path)


@pytest.mark.parametrize("write", ["expand", "strided slice"])
def test_in_place_update_of_other_read_views_is_unsupported(write):
    def fn(m, h):
        h = h * 2
        if write == "expand":
            h.expand(2, 3, 4)[0].add_(1.0)
        else:
            h[::2].add_(1.0)
        return h

    with pytest.raises(zb.UnsupportedOpError, match="slices and indices"):
        zb.from_torch(OnInput((3, 4), fn), (randn(3, 4),))


def test_embedding_max_norm_is_refused_by_name():
    """nn.Embedding(max_norm=...) rescales its weight in place in the
    forward: refused, naming the module and the argument to drop."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = nn.Embedding(10, 4, max_norm=1.0)

        def forward(self, ids):
            return self.table(ids).square().sum()

    with pytest.raises(zb.UnsupportedOpError,
                       match=r"'table' \(Embedding\).*max_norm"):
        zb.from_torch(Model(), (torch.tensor([[1, 2, 3]]),))


def test_spectral_norm_in_eval_mode_and_refused_in_training(tmp_path):
    """spectral_norm's parametrization: in eval mode (fixed u and v) the
    weight over its estimated largest singular value, against autograd; in
    training mode its power iteration writes its buffers through out=,
    refused naming the module and the way out."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.utils.parametrizations.spectral_norm(
                nn.Linear(4, 3))

        def forward(self, x):
            return weighted(self.lin(x))

    torch.manual_seed(0)
    model = Model()
    with pytest.raises(zb.UnsupportedOpError,
                       match=r"\(_SpectralNorm\): it writes its result into "
                       r"a tensor given as out=.*eval mode"):
        zb.from_torch(model, (randn(3, 4),))
    model.lin.parametrizations.weight[0].eval()
    check_op("spectral_norm eval", model, (randn(3, 4),), tmp_path)


# -- attention and losses -----------------------------------------------


def test_grouped_query_attention(tmp_path):
    """scaled_dot_product_attention(enable_gqa=True): 4 query heads on 2
    key/value heads."""

    def fn(m, h):
        q = h[:, :4]
        k, v = h[:, 4:6], h[:, 6:]
        return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                              enable_gqa=True)

    model = OnInput((2, 8, 5, 3), fn)
    check_op("gqa", model, (randn(2, 8, 5, 3),), tmp_path)


@pytest.mark.parametrize("mask", ["constant bool", "data bool",
                                  "data float"])
def test_attention_rows_that_mask_every_key(mask, tmp_path):
    """PyTorch's attention gives 0 to a query whose mask leaves no key
    (a microbatch padded with an empty sample), and no gradient flows
    there; a softmax over -inf everywhere would be NaN, and NaN would
    reach every gradient through the products. Fails with the plain
    softmax."""
    keep = torch.tensor([[False] * 4, [True, True, False, False],
                         [True] * 4, [False, False, False, True]])

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(6, 18)

        def forward(self, x, pad=None):
            q, k, v = self.proj(x).view(2, 4, 3, 6).transpose(1, 2).chunk(
                3, -1)
            if mask == "constant bool":
                m = keep
            elif mask == "data bool":
                m = pad > 0
            else:
                m = torch.where(pad > 0, 0.0, float("-inf")).to(x.dtype)
            return weighted(F.scaled_dot_product_attention(
                q, k, v, attn_mask=m[:, None] if m.dim() == 3 else m))

    batch = (randn(2, 4, 6),)
    if mask != "constant bool":
        batch += (torch.stack([keep, keep.flip(0)]).long(),)
    check_op(mask, Model(), batch, tmp_path)


def test_dtype_arguments_cast_first(tmp_path):
    """softmax, log_softmax and vector_norm with a dtype= other than their
    input's (PyTorch casts first): an internal error, or IR zb-run could
    not read, before."""
    def fn(m, h):
        f = h.float()
        return torch.cat([
            torch.softmax(f, -1, dtype=torch.float64).flatten(),
            torch.log_softmax(f, 0, dtype=torch.float64).flatten(),
            torch.linalg.vector_norm(f, dim=-1, dtype=torch.float64),
            torch.linalg.vector_norm(f, ord=1, dim=0, dtype=torch.float64)])

    check_op("dtype=", OnInput((4, 6), fn), (randn(4, 6),), tmp_path,
             rtol=F32_RTOL, check_grad=False)


def test_cross_entropy_with_weights_and_label_smoothing(tmp_path):
    """Class weights (cross-entropy and NLL) and label smoothing, alone and
    together, each reduction, with ignored labels and over extra dims: a
    weighted mean divides by the counted rows' weights, smoothing adds
    e / C of -sum_c w_c log p[c], as PyTorch's."""
    classes = 5

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, classes)
            self.register_buffer("weight",
                                 torch.tensor([0.5, 2.0, 1.0, 0.25, 3.0]))

        def forward(self, x, target):
            weight = self.weight
            logits = self.lin(x)
            flat, labels = logits.reshape(-1, classes), target.reshape(-1)
            terms = [F.cross_entropy(flat, labels, weight=weight),
                     F.cross_entropy(flat, labels, label_smoothing=0.1),
                     F.cross_entropy(flat, labels, weight=weight,
                                     label_smoothing=0.2, ignore_index=1),
                     F.cross_entropy(flat, labels, weight=weight,
                                     label_smoothing=0.3, reduction="sum"),
                     F.cross_entropy(logits.permute(0, 2, 1), target,
                                     label_smoothing=0.05,
                                     reduction="none").sum() * 0.1,
                     F.nll_loss(flat.log_softmax(-1), labels, weight=weight)]
            return sum(w * term for w, term in zip(
                [1.0, 0.7, 1.3, 0.2, 1.1, 0.9], terms))

    x = randn(3, 4, 4)
    target = torch.tensor([[0, 1, 4, 3], [2, 3, 1, 0], [4, 4, 2, 1]])
    check_op("weighted and smoothed", Model(), (x, target), tmp_path)


def test_cross_entropy_with_class_probabilities(tmp_path):
    """Soft targets (distillation, mixup): -sum_c w_c q_c log p_c, with
    label smoothing, class weights, over extra dims, each reduction."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 5)
            self.register_buffer("weight",
                                 torch.tensor([0.5, 2.0, 1.0, 0.25, 3.0]))

        def forward(self, x, q):
            logits = self.lin(x)
            flat, soft = logits.reshape(-1, 5), q.reshape(-1, 5)
            return (F.cross_entropy(flat, soft)
                    + 0.5 * F.cross_entropy(flat, soft, label_smoothing=0.2,
                                            weight=self.weight)
                    + 0.3 * F.cross_entropy(logits.permute(0, 2, 1),
                                            q.permute(0, 2, 1),
                                            reduction="sum")
                    + 0.1 * F.cross_entropy(flat[0], soft[0])
                    + F.cross_entropy(flat, soft, reduction="none")[1])

    q = torch.softmax(randn(3, 4, 5, seed=4), -1)
    check_op("soft targets", Model(), (randn(3, 4, 4), q), tmp_path)


@pytest.mark.parametrize("shifted", [False, True],
                         ids=["views", "padded and shifted"])
def test_ignored_labels_as_data(tmp_path, shifted):
    """BERT's masked-language-model labels: -100 (ignore_index) where no
    token is predicted, reaching the loss through views only, or, as in
    Hugging Face's causal-LM loss, padded with -100, shifted by a slice and
    copied. They were refused at run time as outside the classes. A label
    that is neither a class nor ignored is refused by zb-run's check of its
    data, as PyTorch raises (zb.range_ignored lets -100 through, nothing
    else), also one the shift leaves out; ids that read a table get no such
    exception."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.out = nn.Linear(4, 10)

        def forward(self, ids, labels):
            logits = self.out(self.emb(ids))
            if shifted:
                labels = F.pad(labels, (0, 1), value=-100)[..., 1:]
                labels = labels.contiguous()
            return F.cross_entropy(logits.view(-1, 10), labels.view(-1))

    ids = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 9, 0]])
    labels = torch.tensor([[1, 2, 3, -100, -100], [6, 7, 8, 9, -100]])
    program = check_op("ignored labels", Model(), (ids, labels), tmp_path)
    assert program.mlir.count("zb.range_ignored = -100 : i64") == 1
    # (zb-run's arrays hold every microbatch: index [microbatch, ...].)
    for value, where in ((10, (0, 0)), (-1, (1, 2))):
        bad = labels.clone()
        bad[where] = value
        with pytest.raises(zb.CompilerError, match=(
                rf"'arg1' .* holds {value} at \[0, {where[0]}, {where[1]}\], "
                r"outside "
                r"the model's range \[0, 10\) \(zb.range\) and not -100 "
                r"\(zb.range_ignored\)")):
            compiled_gradients(program, [(ids, bad)], tmp_path,
                               check_grad=False)
    bad_ids = ids.clone()
    bad_ids[0, 1] = -100
    with pytest.raises(zb.CompilerError, match=r"'arg0' .* holds -100 at "
                       r"\[0, 0, 1\], outside the model's range \[0, 10\) "
                       r"\(zb.range\)") as refused:
        compiled_gradients(program, [(bad_ids, labels)], tmp_path,
                           check_grad=False)
    assert "zb.range_ignored" not in str(refused.value)


def test_cross_entropy_over_extra_dims(tmp_path):
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 5)

        def forward(self, x, target):
            logits = self.lin(x).permute(0, 3, 1, 2)      # [N, C, d1, d2]
            mean = F.cross_entropy(logits, target, ignore_index=1)
            total = F.cross_entropy(logits, target, reduction="sum")
            each = F.cross_entropy(logits, target, reduction="none")
            nll = F.nll_loss(F.log_softmax(logits, 1), target)
            return mean + 0.1 * total + weighted(each) + nll

    torch.manual_seed(0)
    target = torch.randint(0, 5, (2, 3, 2),
                           generator=torch.Generator().manual_seed(2))
    target[0, 0, 0] = 1
    check_op("cross_entropy nd", Model(), (randn(2, 3, 2, 4), target),
             tmp_path)


# -- whole models -------------------------------------------------------


@pytest.mark.parametrize("name", ["bloom", "deberta", "gpt2", "llama", "mamba",
                                  "deepseek_v3", "whisper", "wav2vec2",
                                  "mbart", "wavlm", "llama4",
                                  "time_series", "xlm", "llava",
                                  "qwen2_vl", "qwen3_vl", "gemma2",
                                  "qwen3_moe", "recurrent_gemma",
                                  "modernbert", "xlnet", "clip"])
def test_model_matches_autograd(name):
    torch.manual_seed(0)
    model, batches = {**MODELS, **ONE_PROCESS_MODELS}[name]()
    program = zb.from_torch(model, batches[0])
    ref_loss, ref_grads = torch_reference(model, batches)
    for alias, kept in program.tied.items():
        # A tied parameter is one parameter: PyTorch lists it once.
        assert alias not in ref_grads and kept in ref_grads
    result = zb.gradients(program, microbatches=len(batches), inputs=batches)
    assert result.loss == pytest.approx(ref_loss, rel=F32_RTOL), name
    assert_grads_close(name, result.grads, ref_grads, F32_RTOL)


def test_failed_export_names_the_line():
    """A forward that torch.export cannot trace for another reason than a
    value-dependent branch (here it replaces one of its modules, as
    transformers' Switch Transformers router casts its classifier): the
    error names the line and torch's message, not a bare RuntimeError."""

    class CastsItsLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            self.lin = self.lin.to(torch.float64)  # the line named
            return self.lin(x.double()).sum()

    with pytest.raises(zb.FrontendError) as info:
        zb.from_torch(CastsItsLayer(), (torch.ones(2, 3),))
    message = str(info.value)
    assert re.search(r"cannot export CastsItsLayer: torch\.export failed "
                     r"at .*test_aten_ops\.py:\d+ \(RuntimeError: ",
                     message), message


def test_deberta_own_loss_names_its_line():
    """DeBERTa's own classification loss keeps only the labels that are
    not negative (``nonzero``, then a branch on its size): the error names
    that line of transformers' model, not torch.export's internals."""
    model, batches = deberta(count=1, own_loss=True)
    with pytest.raises(zb.FrontendError) as info:
        zb.from_torch(model, batches[0])
    message = str(info.value)
    assert re.search(r"modeling_deberta\.py:\d+ branches on", message), \
        message
