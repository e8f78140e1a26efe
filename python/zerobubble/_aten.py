"""ATen ops to the compiler's input IR.

One handler per ATen overload (keyed by its name, ``aten.linear.default``)
emits the op through :class:`zerobubble._mlir.Builder`. Handlers take the
node's arguments with graph values replaced by :class:`Value` (an SSA
tensor) or :class:`Const` (a folded constant tensor), in the order and with
the defaults of the ATen schema. A node whose inputs are all constants is
evaluated by PyTorch instead (``arange``, ``tril``, buffers sliced...).
"""

import math
import operator
import re

import torch
from torch.utils import _pytree as pytree

from ._mlir import Value, is_float
from .errors import FrontendError, UnsupportedOpError

_ELEMENT_TYPES = {torch.float32: "f32", torch.float64: "f64",
                  torch.float16: "f16", torch.int64: "i64",
                  torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
                  torch.uint8: "i8", torch.bool: "i1"}

_NEG_INF = float("-inf")


class Const:
    """A graph value known at export time (a buffer, a lifted constant or
    a folded computation)."""

    def __init__(self, tensor):
        self.tensor = tensor


def element_type(dtype, what=""):
    """The MLIR element type of a torch dtype."""
    try:
        return _ELEMENT_TYPES[dtype]
    except KeyError:
        raise FrontendError(f"unsupported dtype {dtype}"
                            + (f" of '{what}'" if what else "")) from None


def op_name(node):
    """``aten.linear.default`` for a node calling that overload."""
    target = node.target
    if target is operator.getitem:
        return "getitem"
    return str(target)


def module_of(node):
    """(dotted module path, class name) of the module that called
    ``node``."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, kind = list(stack.values())[-1]
    path = re.sub(r"^L\['self'\]\.?", "", str(path))
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\['([^']*)'\]", r".\1", path).strip(".")
    kind = kind if isinstance(kind, str) else kind.__qualname__
    return path, kind.rsplit(".", 1)[-1]


# -- dispatch -----------------------------------------------------------

_HANDLERS = {}
_IGNORED = re.compile(r"^aten\._assert|^aten\.sym_constrain")
_RANDOM = re.compile(r"rand|dropout|bernoulli|normal|uniform|multinomial")


def _handles(*names):
    def register(fn):
        for name in names:
            _HANDLERS[name] = fn
        return fn
    return register


def translate(translator, node):
    """The value (Value, Const, tuple of them, or Python scalar) of
    ``node``."""
    name = op_name(node)
    if node.target is operator.getitem:
        item = translator.env[node.args[0]][node.args[1]]
        if item is None:
            raise UnsupportedOpError(
                "getitem", *module_of(node),
                detail=f"output {node.args[1]} of "
                f"'{op_name(node.args[0])}' is not supported")
        return item
    if _IGNORED.match(name):
        return None
    args, kwargs = pytree.tree_map(
        lambda x: translator.env[x] if isinstance(x, torch.fx.Node) else x,
        (node.args, node.kwargs))
    leaves = pytree.tree_leaves((args, kwargs))
    if not any(isinstance(x, Value) for x in leaves) and \
            not _RANDOM.search(name) and not name.startswith("zerobubble."):
        return _fold(node, args, kwargs)
    handler = _HANDLERS.get(name)
    if handler is None:
        raise UnsupportedOpError(name, *module_of(node))
    ctx = _Context(translator, node)
    result = handler(ctx, *args, **kwargs)
    ctx.check(result)
    return result


def _fold(node, args, kwargs):
    def unwrap(x):
        return x.tensor if isinstance(x, Const) else x

    args, kwargs = pytree.tree_map(unwrap, (args, kwargs))
    with torch.no_grad():
        result = node.target(*args, **kwargs)
    return pytree.tree_map(
        lambda x: Const(x) if isinstance(x, torch.Tensor) else x, result)


class _Context:
    """What a handler works with: the builder, the node's expected result
    (shape, element type) and helpers."""

    def __init__(self, translator, node):
        self.translator = translator
        self.node = node
        self.b = translator.builder
        val = node.meta.get("val")
        self.val = val
        if isinstance(val, torch.Tensor):
            self.shape = tuple(int(d) for d in val.shape)
            self.dtype = element_type(val.dtype)
        else:
            self.shape = self.dtype = None
        self.hint = node.name

    def unsupported(self, detail):
        raise UnsupportedOpError(op_name(self.node), *module_of(self.node),
                                 detail=detail)

    def check(self, result):
        if isinstance(result, Value) and self.shape is not None:
            if result.shape != self.shape or result.dtype != self.dtype:
                raise FrontendError(
                    f"internal error translating '{op_name(self.node)}': "
                    f"made {result.type}, expected "
                    f"{Value('', self.shape, self.dtype).type}")

    # -- values ---------------------------------------------------

    def tensor(self, x):
        """``x`` as an SSA tensor (constants are materialised)."""
        if isinstance(x, Value):
            return x
        if isinstance(x, Const):
            array = x.tensor.detach().cpu()
            return self.b.dense(array.numpy(), element_type(array.dtype))
        raise FrontendError(f"expected a tensor, got {x!r}")

    def reshape(self, x, shape):
        x = self.tensor(x)
        return self.translator.alias(self.b.reshape(x, shape), x)

    def broadcast(self, value, shape):
        """(value, loop dims) reading ``value`` broadcast to ``shape``."""
        offset = len(shape) - value.rank
        if offset < 0:
            raise FrontendError(f"cannot broadcast {value.type} to "
                                f"{list(shape)}")
        keep = []
        for i, size in enumerate(value.shape):
            if size == shape[offset + i]:
                keep.append(i)
            elif size != 1:
                raise FrontendError(f"cannot broadcast {value.type} to "
                                    f"{list(shape)}")
        value = self.b.drop_unit_dims(value, keep)
        return value, [offset + i for i in keep]

    def expand(self, x, shape):
        """``x`` broadcast to ``shape``, materialised."""
        x = self.tensor(x)
        if x.shape == tuple(shape):
            return x
        return self.elementwise([x], lambda bb, xs: xs[0][0],
                                shape=shape, dtype=x.dtype)

    def elementwise(self, operands, fn, *, shape=None, dtype=None,
                    scalar_dtype=None, hint=None):
        """A ``linalg.generic`` over ``shape`` (default: the node's)
        combining ``operands`` (tensors broadcast as in PyTorch, or Python
        scalars) with ``fn(body, xs)``, where ``xs`` are (name, element
        type) pairs; scalars are emitted as ``scalar_dtype`` (default: the
        result's type)."""
        shape = self.shape if shape is None else tuple(shape)
        dtype = dtype or self.dtype
        scalar_dtype = scalar_dtype or dtype
        inputs, slots = [], []
        for x in operands:
            if isinstance(x, Const) and x.tensor.dim() == 0:
                x = x.tensor.item()
            if isinstance(x, (bool, int, float)):
                slots.append(("scalar", x))
                continue
            value, dims = self.broadcast(self.tensor(x), shape)
            slots.append(("input", len(inputs), value.dtype))
            inputs.append((value, dims))

        def body(bb, names, acc):
            xs = []
            for slot in slots:
                if slot[0] == "scalar":
                    xs.append((bb.const(slot[1], scalar_dtype), scalar_dtype))
                else:
                    xs.append((names[slot[1]], slot[2]))
            return fn(bb, xs)

        return self.b.generic(shape, dtype, inputs, body,
                              hint=hint or self.hint)

    def reduce(self, x, dims, init, combine, *, scale=None, hint=None):
        """Reduce ``x`` over ``dims`` (keeping the others, in order):
        ``combine(body, element, acc)``; ``scale`` multiplies each
        element first."""
        x = self.tensor(x)
        dims = sorted(d % x.rank for d in dims) if x.rank else []
        kept = [d for d in range(x.rank) if d not in dims]
        out_shape = tuple(x.shape[d] for d in kept)
        loops = []
        for d in range(x.rank):
            loops.append(kept.index(d) if d in kept
                         else len(kept) + dims.index(d))
        init_value = self.b.filled(out_shape, x.dtype, init)

        def body(bb, names, acc):
            element = names[0]
            if scale is not None:
                element = bb.binary("arith.mulf", element,
                                    bb.const(scale, x.dtype), x.dtype)
            return combine(bb, element, acc)

        return self.b.generic(out_shape, x.dtype, [(x, loops)], body,
                              reductions=len(dims), init=init_value,
                              hint=hint or "red")


def _cast(bb, x, dtype):
    return bb.cast(x[0], x[1], dtype)


def _norm_dim(dim, rank):
    return dim % rank if rank else 0


# -- stage marker and identities ----------------------------------------


@_handles("zerobubble.pipe_cut.default")
def _pipe_cut(ctx, x):
    ctx.translator.cuts += 1
    return ctx.b.cut(ctx.tensor(x), hint=ctx.hint)


@_handles("aten.clone.default", "aten.contiguous.default",
          "aten.alias.default", "aten.lift_fresh_copy.default")
def _identity(ctx, x, *args, **kwargs):
    return x


@_handles("aten.dropout.default")
def _dropout(ctx, x, p, train):
    if train and p != 0:
        ctx.unsupported("dropout with p > 0 in training mode is random; "
                        "call module.eval() or use p = 0 for export")
    return x


@_handles("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout",
          "aten.type_as.default")
def _to_dtype(ctx, x, *args, **kwargs):
    x = ctx.tensor(x)
    if x.dtype == ctx.dtype:
        return x
    return ctx.elementwise([x], lambda bb, xs: _cast(bb, xs[0], ctx.dtype))


# -- shapes -------------------------------------------------------------


@_handles("aten.view.default", "aten.reshape.default",
          "aten._unsafe_view.default", "aten.flatten.using_ints",
          "aten.unflatten.int", "aten.unsqueeze.default",
          "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default",
          "aten.view_as.default", "aten.reshape_as.default")
def _view(ctx, x, *args, **kwargs):
    return ctx.reshape(x, ctx.shape)


@_handles("aten.permute.default")
def _permute(ctx, x, dims):
    x = ctx.tensor(x)
    return ctx.b.transpose(x, [_norm_dim(d, x.rank) for d in dims],
                           hint=ctx.hint)


@_handles("aten.transpose.int")
def _transpose(ctx, x, dim0, dim1):
    x = ctx.tensor(x)
    perm = list(range(x.rank))
    a, b = _norm_dim(dim0, x.rank), _norm_dim(dim1, x.rank)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.b.transpose(x, perm, hint=ctx.hint)


@_handles("aten.t.default", "aten.numpy_T.default")
def _t(ctx, x):
    x = ctx.tensor(x)
    return ctx.b.transpose(x, list(reversed(range(x.rank))), hint=ctx.hint)


@_handles("aten.expand.default", "aten.expand_as.default")
def _expand(ctx, x, *args, **kwargs):
    return ctx.expand(x, ctx.shape)


@_handles("aten.broadcast_tensors.default")
def _broadcast_tensors(ctx, tensors):
    return [ctx.expand(x, tuple(int(d) for d in val.shape))
            for x, val in zip(tensors, ctx.val)]


@_handles("aten.slice.Tensor")
def _slice(ctx, x, dim=0, start=None, end=None, step=1):
    x = ctx.tensor(x)
    if ctx.shape == x.shape:
        return x
    dim = _norm_dim(dim, x.rank)
    size = x.shape[dim]
    start = 0 if start is None else start
    start = min(max(start + size if start < 0 else start, 0), size)
    offsets = [0] * x.rank
    strides = [1] * x.rank
    offsets[dim], strides[dim] = start, step
    return ctx.b.extract_slice(x, offsets, ctx.shape, strides)


@_handles("aten.select.int")
def _select(ctx, x, dim, index):
    x = ctx.tensor(x)
    dim = _norm_dim(dim, x.rank)
    index = index + x.shape[dim] if index < 0 else index
    offsets = [0] * x.rank
    offsets[dim] = index
    sizes = list(x.shape)
    sizes[dim] = 1
    piece = ctx.b.extract_slice(x, offsets, sizes, [1] * x.rank)
    return ctx.b.reshape(piece, ctx.shape)


def _pieces(ctx, x, dim, sizes):
    x = ctx.tensor(x)
    dim = _norm_dim(dim, x.rank)
    results, offset = [], 0
    for size in sizes:
        offsets = [0] * x.rank
        offsets[dim] = offset
        shape = list(x.shape)
        shape[dim] = size
        results.append(ctx.b.extract_slice(x, offsets, shape,
                                           [1] * x.rank))
        offset += size
    return results


@_handles("aten.split.Tensor")
def _split(ctx, x, split_size, dim=0):
    dim = _norm_dim(dim, ctx.tensor(x).rank)
    return _pieces(ctx, x, dim, [int(v.shape[dim]) for v in ctx.val])


@_handles("aten.split_with_sizes.default")
def _split_with_sizes(ctx, x, split_sizes, dim=0):
    return _pieces(ctx, x, dim, split_sizes)


@_handles("aten.unbind.int")
def _unbind(ctx, x, dim=0):
    x = ctx.tensor(x)
    dim = _norm_dim(dim, x.rank)
    pieces = _pieces(ctx, x, dim, [1] * x.shape[dim])
    shape = tuple(s for i, s in enumerate(x.shape) if i != dim)
    return [ctx.b.reshape(p, shape) for p in pieces]


@_handles("aten.cat.default")
def _cat(ctx, tensors, dim=0):
    dim = _norm_dim(dim, len(ctx.shape))
    result = ctx.b.empty(ctx.shape, ctx.dtype)
    offset = 0
    for x in tensors:
        x = ctx.tensor(x)
        if x.size == 0:
            continue
        offsets = [0] * len(ctx.shape)
        offsets[dim] = offset
        result = ctx.b.insert_slice(x, result, offsets)
        offset += x.shape[dim]
    return result


@_handles("aten.stack.default")
def _stack(ctx, tensors, dim=0):
    dim = _norm_dim(dim, len(ctx.shape))
    result = ctx.b.empty(ctx.shape, ctx.dtype)
    for i, x in enumerate(tensors):
        x = ctx.tensor(x)
        shape = list(x.shape)
        shape.insert(dim, 1)
        offsets = [0] * len(ctx.shape)
        offsets[dim] = i
        result = ctx.b.insert_slice(ctx.b.reshape(x, shape), result, offsets)
    return result


# -- elementwise ----------------------------------------------------------

_ARITH = {"add": ("arith.addf", "arith.addi"),
          "sub": ("arith.subf", "arith.subi"),
          "mul": ("arith.mulf", "arith.muli")}


def _binary(kind, swap=False):
    def handler(ctx, a, b, alpha=1):
        dtype = ctx.dtype
        op = _ARITH[kind][0 if is_float(dtype) else 1]

        def fn(bb, xs):
            x, y = (_cast(bb, v, dtype) for v in xs)
            if swap:
                x, y = y, x
            if alpha != 1:
                mul = _ARITH["mul"][0 if is_float(dtype) else 1]
                y = bb.binary(mul, y, bb.const(alpha, dtype), dtype)
            return bb.binary(op, x, y, dtype)

        return ctx.elementwise([a, b], fn)
    return handler


for _kind in ("add", "sub", "mul"):
    _handles(f"aten.{_kind}.Tensor", f"aten.{_kind}.Scalar")(_binary(_kind))
_handles("aten.rsub.Tensor", "aten.rsub.Scalar")(_binary("sub", swap=True))


@_handles("aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode")
def _div(ctx, a, b, rounding_mode=None):
    if rounding_mode is not None or not is_float(ctx.dtype):
        ctx.unsupported("only true division of floats is supported")
    return ctx.elementwise([a, b], lambda bb, xs: bb.binary(
        "arith.divf", _cast(bb, xs[0], ctx.dtype),
        _cast(bb, xs[1], ctx.dtype), ctx.dtype))


@_handles("aten.maximum.default", "aten.minimum.default")
def _max_min(ctx, a, b):
    if not is_float(ctx.dtype):
        ctx.unsupported("only float operands are supported")
    op = "arith.maximumf" if "maximum" in op_name(ctx.node) else \
        "arith.minimumf"
    return ctx.elementwise([a, b], lambda bb, xs: bb.binary(
        op, _cast(bb, xs[0], ctx.dtype), _cast(bb, xs[1], ctx.dtype),
        ctx.dtype))


def _unary(build):
    def handler(ctx, x, *args, **kwargs):
        if not is_float(ctx.dtype):
            ctx.unsupported("only float operands are supported")
        return ctx.elementwise(
            [x], lambda bb, xs: build(bb, _cast(bb, xs[0], ctx.dtype),
                                      ctx.dtype, *args, **kwargs))
    return handler


def _sigmoid(bb, x, t):
    e = bb.unary("math.exp", bb.unary("arith.negf", x, t), t)
    one = bb.const(1.0, t)
    return bb.binary("arith.divf", one, bb.binary("arith.addf", one, e, t),
                     t)


def _gelu(bb, x, t, approximate="none"):
    half = bb.const(0.5, t)
    one = bb.const(1.0, t)
    if approximate == "tanh":
        x3 = bb.binary("arith.mulf", bb.binary("arith.mulf", x, x, t), x, t)
        inner = bb.binary("arith.addf", x, bb.binary(
            "arith.mulf", x3, bb.const(0.044715, t), t), t)
        inner = bb.binary("arith.mulf", inner,
                          bb.const(math.sqrt(2.0 / math.pi), t), t)
        g = bb.unary("math.tanh", inner, t)
    else:
        g = bb.unary("math.erf", bb.binary(
            "arith.mulf", x, bb.const(1.0 / math.sqrt(2.0), t), t), t)
    return bb.binary("arith.mulf", bb.binary("arith.mulf", x, half, t),
                     bb.binary("arith.addf", g, one, t), t)


def _pow_scalar(bb, x, t, exponent):
    if exponent == 2:
        return bb.binary("arith.mulf", x, x, t)
    if exponent == 1:
        return x
    if exponent == 0.5:
        return bb.unary("math.sqrt", x, t)
    if exponent == -0.5:
        return bb.unary("math.rsqrt", x, t)
    if exponent == -1:
        return bb.binary("arith.divf", bb.const(1.0, t), x, t)
    return bb.binary("math.powf", x, bb.const(exponent, t), t)


_UNARY = {
    "neg": lambda bb, x, t: bb.unary("arith.negf", x, t),
    "exp": lambda bb, x, t: bb.unary("math.exp", x, t),
    "log": lambda bb, x, t: bb.unary("math.log", x, t),
    "tanh": lambda bb, x, t: bb.unary("math.tanh", x, t),
    "sqrt": lambda bb, x, t: bb.unary("math.sqrt", x, t),
    "rsqrt": lambda bb, x, t: bb.unary("math.rsqrt", x, t),
    "erf": lambda bb, x, t: bb.unary("math.erf", x, t),
    "abs": lambda bb, x, t: bb.unary("math.absf", x, t),
    "relu": lambda bb, x, t: bb.binary("arith.maximumf", x,
                                       bb.const(0.0, t), t),
    "sigmoid": _sigmoid,
    "silu": lambda bb, x, t: bb.binary("arith.mulf", x, _sigmoid(bb, x, t),
                                       t),
    "reciprocal": lambda bb, x, t: bb.binary("arith.divf", bb.const(1.0, t),
                                             x, t),
    "square": lambda bb, x, t: bb.binary("arith.mulf", x, x, t),
}
for _name, _build in _UNARY.items():
    _handles(f"aten.{_name}.default")(_unary(_build))
_handles("aten.gelu.default")(_unary(_gelu))
_handles("aten.pow.Tensor_Scalar")(_unary(_pow_scalar))

_PREDICATES = {"eq": ("oeq", "eq"), "ne": ("une", "ne"),
               "lt": ("olt", "slt"), "le": ("ole", "sle"),
               "gt": ("ogt", "sgt"), "ge": ("oge", "sge")}


def _operand_type(x):
    if isinstance(x, Value):
        return x.dtype
    if isinstance(x, Const):
        return element_type(x.tensor.dtype)
    return "f32" if isinstance(x, float) else None


def _compare(kind):
    def handler(ctx, a, b):
        types = [t for t in map(_operand_type, (a, b)) if t]
        common = next((t for t in types if is_float(t)),
                      types[0] if types else "i64")
        float_cmp = is_float(common)
        predicate = _PREDICATES[kind][0 if float_cmp else 1]
        op = "arith.cmpf" if float_cmp else "arith.cmpi"
        return ctx.elementwise(
            [a, b], lambda bb, xs: bb.op(
                f"{op} {predicate}, {_cast(bb, xs[0], common)}, "
                f"{_cast(bb, xs[1], common)} : {common}"),
            scalar_dtype=common)
    return handler


for _kind in _PREDICATES:
    _handles(f"aten.{_kind}.Tensor", f"aten.{_kind}.Scalar")(_compare(_kind))


@_handles("aten.logical_not.default", "aten.bitwise_not.default")
def _not(ctx, x):
    if ctx.dtype != "i1":
        ctx.unsupported("only boolean operands are supported")
    return ctx.elementwise([x], lambda bb, xs: bb.binary(
        "arith.xori", xs[0][0], bb.const(True, "i1"), "i1"))


@_handles("aten.where.self", "aten.where.ScalarSelf",
          "aten.where.ScalarOther", "aten.where.Scalar")
def _where(ctx, cond, a, b):
    return ctx.elementwise([cond, a, b], lambda bb, xs: bb.select(
        xs[0][0], _cast(bb, xs[1], ctx.dtype), _cast(bb, xs[2], ctx.dtype),
        ctx.dtype))


@_handles("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def _masked_fill(ctx, x, mask, value):
    return ctx.elementwise([x, mask, value], lambda bb, xs: bb.select(
        xs[1][0], _cast(bb, xs[2], ctx.dtype), _cast(bb, xs[0], ctx.dtype),
        ctx.dtype))


def _triangle(upper):
    def handler(ctx, x, diagonal=0):
        x = ctx.tensor(x)
        rank = x.rank

        def fn(bb, xs):
            i = bb.index(rank - 2)
            j = bb.index(rank - 1)
            d = bb.op(f"arith.subi {j}, {i} : index")
            k = bb.op(f"arith.constant {diagonal} : index")
            keep = bb.op(f"arith.cmpi {'sge' if upper else 'sle'}, {d}, "
                         f"{k} : index")
            return bb.select(keep, xs[0][0], bb.const(0, x.dtype), x.dtype)

        return ctx.elementwise([x], fn)
    return handler


_handles("aten.triu.default")(_triangle(True))
_handles("aten.tril.default")(_triangle(False))


@_handles("aten.zeros_like.default", "aten.ones_like.default",
          "aten.full_like.default", "aten.empty_like.default")
def _like(ctx, x, *args, **kwargs):
    name = op_name(ctx.node)
    fill = 1 if "ones" in name else (args[0] if "full" in name else 0)
    dtype = ctx.val.dtype
    return Const(torch.full(ctx.shape, fill, dtype=dtype))


# -- contractions -------------------------------------------------------


def _matmul(ctx, a, b):
    """PyTorch ``matmul`` semantics on SSA tensors."""
    a, b = ctx.tensor(a), ctx.tensor(b)
    squeeze_a, squeeze_b = a.rank == 1, b.rank == 1
    if squeeze_a:
        a = ctx.b.reshape(a, (1, a.shape[0]))
    if squeeze_b:
        b = ctx.b.reshape(b, (b.shape[0], 1))
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.rank == 2:
        flat = ctx.b.reshape(a, (math.prod(a.shape[:-1]), k))
        result = ctx.b.matmul(flat, b)
        shape = (*a.shape[:-2], m, n)
    else:
        batch = tuple(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        a = ctx.expand(a, (*batch, m, k))
        b = ctx.expand(b, (*batch, k, n))
        count = math.prod(batch)
        result = ctx.b.batch_matmul(ctx.b.reshape(a, (count, m, k)),
                                    ctx.b.reshape(b, (count, k, n)))
        shape = (*batch, m, n)
    if squeeze_a:
        shape = shape[:-2] + shape[-1:]
    if squeeze_b:
        shape = shape[:-1]
    return ctx.b.reshape(result, shape)


def _require_float(ctx, *values):
    for v in values:
        if isinstance(v, Value) and not is_float(v.dtype):
            ctx.unsupported("only float operands are supported")


@_handles("aten.matmul.default", "aten.mm.default", "aten.bmm.default")
def _matmul_op(ctx, a, b):
    _require_float(ctx, a, b)
    return _matmul(ctx, a, b)


@_handles("aten.linear.default")
def _linear(ctx, x, weight, bias=None):
    x, weight = ctx.tensor(x), ctx.tensor(weight)
    _require_float(ctx, x, weight)
    out_features, in_features = weight.shape
    flat = ctx.b.reshape(x, (x.size // in_features, in_features))
    y = ctx.b.matmul(flat, weight, transpose_b=True)
    if bias is not None:
        y = ctx.elementwise(
            [y, bias], lambda bb, xs: bb.binary("arith.addf", xs[0][0],
                                                xs[1][0], ctx.dtype),
            shape=y.shape)
    return ctx.b.reshape(y, ctx.shape)


@_handles("aten.addmm.default")
def _addmm(ctx, bias, a, b, beta=1, alpha=1):
    product = _matmul(ctx, a, b)

    def fn(bb, xs):
        t = ctx.dtype
        p, c = xs[0][0], xs[1][0]
        if alpha != 1:
            p = bb.binary("arith.mulf", p, bb.const(alpha, t), t)
        if beta != 1:
            c = bb.binary("arith.mulf", c, bb.const(beta, t), t)
        return bb.binary("arith.addf", p, c, t)

    return ctx.elementwise([product, bias], fn)


# -- reductions ---------------------------------------------------------


def _add_acc(bb, x, acc, t):
    return bb.binary("arith.addf", x, acc, t)


def _reduction(ctx, x, dim, keepdim, mean):
    x = ctx.tensor(x)
    if not is_float(x.dtype) or x.dtype != ctx.dtype:
        ctx.unsupported("only float reductions in the input's type are "
                        "supported")
    dims = list(range(x.rank)) if dim is None or dim == [] else (
        [dim] if isinstance(dim, int) else list(dim))
    dims = [_norm_dim(d, x.rank) for d in dims]
    count = math.prod(x.shape[d] for d in dims)
    result = ctx.reduce(
        x, dims, 0.0, lambda bb, e, acc: _add_acc(bb, e, acc, x.dtype),
        scale=1.0 / count if mean else None, hint=ctx.hint)
    return ctx.b.reshape(result, ctx.shape)


@_handles("aten.sum.dim_IntList")
def _sum_dims(ctx, x, dim=None, keepdim=False, dtype=None):
    return _reduction(ctx, x, dim, keepdim, mean=False)


@_handles("aten.sum.default")
def _sum(ctx, x, dtype=None):
    return _reduction(ctx, x, None, False, mean=False)


@_handles("aten.mean.dim")
def _mean_dims(ctx, x, dim=None, keepdim=False, dtype=None):
    return _reduction(ctx, x, dim, keepdim, mean=True)


@_handles("aten.mean.default")
def _mean(ctx, x, dtype=None):
    return _reduction(ctx, x, None, False, mean=True)


@_handles("aten.amax.default")
def _amax(ctx, x, dim=(), keepdim=False):
    x = ctx.tensor(x)
    _require_float(ctx, x)
    dims = list(dim) or list(range(x.rank))
    result = ctx.reduce(x, dims, _NEG_INF, lambda bb, e, acc: bb.binary(
        "arith.maximumf", e, acc, x.dtype))
    return ctx.b.reshape(result, ctx.shape)


# -- normalisation and softmax -----------------------------------------


@_handles("aten.layer_norm.default", "aten.native_layer_norm.default")
def _layer_norm(ctx, x, normalized_shape, weight=None, bias=None, eps=1e-5,
                *args):
    x = ctx.tensor(x)
    _require_float(ctx, x)
    t = x.dtype
    width = math.prod(normalized_shape)
    rows = x.size // width
    flat = ctx.b.reshape(x, (rows, width))
    inv = 1.0 / width
    total = ctx.reduce(flat, [1], 0.0,
                       lambda bb, e, acc: _add_acc(bb, e, acc, t),
                       hint="ln_sum")
    var_init = ctx.b.filled((rows,), t, 0.0)

    def variance(bb, names, acc):
        v, s = names
        mean = bb.binary("arith.mulf", s, bb.const(inv, t), t)
        d = bb.binary("arith.subf", v, mean, t)
        sq = bb.binary("arith.mulf", bb.binary("arith.mulf", d, d, t),
                       bb.const(inv, t), t)
        return bb.binary("arith.addf", acc, sq, t)

    var = ctx.b.generic((rows,), t, [(flat, [0, 1]), (total, [0])],
                        variance, reductions=1, init=var_init,
                        hint="ln_var")
    inputs = [(flat, [0, 1]), (total, [0]), (var, [0])]
    affine = []
    for p in (weight, bias):
        if p is not None:
            inputs.append((ctx.reshape(p, (width,)), [1]))
        affine.append(p is not None)

    def normalize(bb, names, acc):
        v, s, var_ = names[:3]
        mean = bb.binary("arith.mulf", s, bb.const(inv, t), t)
        d = bb.binary("arith.subf", v, mean, t)
        sd = bb.unary("math.sqrt", bb.binary(
            "arith.addf", var_, bb.const(eps, t), t), t)
        y = bb.binary("arith.divf", d, sd, t)
        rest = list(names[3:])
        if affine[0]:
            y = bb.binary("arith.mulf", y, rest.pop(0), t)
        if affine[1]:
            y = bb.binary("arith.addf", y, rest.pop(0), t)
        return y

    normed = ctx.b.generic((rows, width), t, inputs, normalize,
                           hint=ctx.hint)
    out = ctx.b.reshape(normed, x.shape)
    if op_name(ctx.node) == "aten.native_layer_norm.default":
        return (out, None, None)
    return out


@_handles("aten.softmax.int", "aten._softmax.default")
def _softmax(ctx, x, dim, *args):
    x = ctx.tensor(x)
    _require_float(ctx, x)
    if x.rank == 0:
        return ctx.elementwise([], lambda bb, xs: bb.const(1.0, x.dtype))
    return ctx.b.softmax(x, _norm_dim(dim, x.rank), hint=ctx.hint)


def _log_softmax_value(ctx, x, dim):
    t = x.dtype
    keep = list(x.shape)
    keep[dim] = 1
    mx = ctx.b.reshape(ctx.reduce(x, [dim], _NEG_INF, lambda bb, e, acc:
                                  bb.binary("arith.maximumf", e, acc, t),
                                  hint="lsm_max"), keep)
    shifted = ctx.elementwise([x, mx], lambda bb, xs: bb.binary(
        "arith.subf", xs[0][0], xs[1][0], t), shape=x.shape, dtype=t,
        hint="lsm_shift")
    total = ctx.b.reshape(ctx.reduce(
        shifted, [dim], 0.0, lambda bb, e, acc: _add_acc(
            bb, bb.unary("math.exp", e, t), acc, t), hint="lsm_sum"), keep)
    return ctx.elementwise([shifted, total], lambda bb, xs: bb.binary(
        "arith.subf", xs[0][0], bb.unary("math.log", xs[1][0], t), t),
        shape=x.shape, dtype=t)


@_handles("aten.log_softmax.int", "aten._log_softmax.default")
def _log_softmax(ctx, x, dim, *args):
    x = ctx.tensor(x)
    _require_float(ctx, x)
    return _log_softmax_value(ctx, x, _norm_dim(dim, x.rank))


# -- embedding and attention ---------------------------------------------


@_handles("aten.embedding.default")
def _embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False,
               sparse=False):
    if padding_idx is not None and padding_idx >= 0:
        ctx.unsupported("padding_idx is not supported (its row gets no "
                        "gradient in PyTorch)")
    if scale_grad_by_freq:
        ctx.unsupported("scale_grad_by_freq is not supported")
    weight, indices = ctx.tensor(weight), ctx.tensor(indices)
    ctx.translator.note_range(indices, weight.shape[0])
    rank = indices.rank
    t = weight.dtype

    def body(bb, names, acc):
        column = bb.index(rank)
        row = bb.op(f"arith.index_cast {names[0]} : {indices.dtype} to index")
        return bb.op(f"tensor.extract {weight.name}[{row}, {column}] : "
                     f"{weight.type}")

    return ctx.b.generic(ctx.shape, t, [(indices, list(range(rank)))], body,
                         hint=ctx.hint)


@_handles("aten.scaled_dot_product_attention.default")
def _sdpa(ctx, query, key, value, attn_mask=None, dropout_p=0.0,
          is_causal=False, scale=None, enable_gqa=False):
    if dropout_p:
        ctx.unsupported("attention dropout is not supported")
    if enable_gqa:
        ctx.unsupported("enable_gqa is not supported")
    query, key = ctx.tensor(query), ctx.tensor(key)
    _require_float(ctx, query, key)
    t = query.dtype
    rank = key.rank
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    scores = _matmul(ctx, query, ctx.b.transpose(key, perm))
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    operands = [scores] + ([attn_mask] if attn_mask is not None else [])
    mask_is_bool = attn_mask is not None and (
        (isinstance(attn_mask, Value) and attn_mask.dtype == "i1") or
        (isinstance(attn_mask, Const) and attn_mask.tensor.dtype ==
         torch.bool))

    def masked(bb, xs):
        s = bb.binary("arith.mulf", xs[0][0], bb.const(scale, t), t)
        if attn_mask is not None:
            if mask_is_bool:
                s = bb.select(xs[1][0], s, bb.const(_NEG_INF, t), t)
            else:
                s = bb.binary("arith.addf", s, _cast(bb, xs[1], t), t)
        if is_causal:
            i = bb.index(scores.rank - 2)
            j = bb.index(scores.rank - 1)
            future = bb.op(f"arith.cmpi ugt, {j}, {i} : index")
            s = bb.select(future, bb.const(_NEG_INF, t), s, t)
        return s

    logits = ctx.elementwise(operands, masked, shape=scores.shape, dtype=t,
                             hint="attn_scores")
    probs = ctx.b.softmax(logits, scores.rank - 1, hint="attn_probs")
    return _matmul(ctx, probs, value)


# -- losses -------------------------------------------------------------

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _pick_loss(ctx, logits, target, ignore_index, reduction, log_probs):
    """Per-row ``-log p[target]`` of [N, C] ``logits`` (or, with
    ``log_probs``, ``-logits[target]``), reduced like PyTorch (rows whose
    target is ``ignore_index`` contribute nothing and are not counted)."""
    logits, target = ctx.tensor(logits), ctx.tensor(target)
    if logits.rank != 2 or target.rank != 1:
        ctx.unsupported("only [N, C] inputs with [N] class-index targets "
                        "are supported")
    if is_float(target.dtype):
        ctx.unsupported("only class-index targets are supported")
    rows, classes = logits.shape
    t = logits.dtype
    ctx.translator.note_range(target, classes)
    zero_rows = ctx.b.filled((rows,), t, 0.0)

    def picked_body(bb, names, acc):
        value, label = names
        j = bb.op(f"arith.index_cast {bb.index(1)} : index to "
                  f"{target.dtype}")
        hit = bb.op(f"arith.cmpi eq, {j}, {label} : {target.dtype}")
        return bb.binary("arith.addf", acc,
                         bb.select(hit, value, bb.const(0.0, t), t), t)

    picked = ctx.b.generic((rows,), t, [(logits, [0, 1]), (target, [0])],
                           picked_body, reductions=1, init=zero_rows,
                           hint="picked")
    operands = [(picked, [0]), (target, [0])]
    if not log_probs:
        mx = ctx.reduce(logits, [1], _NEG_INF, lambda bb, e, acc: bb.binary(
            "arith.maximumf", e, acc, t), hint="ce_max")

        def sumexp(bb, names, acc):
            d = bb.binary("arith.subf", names[0], names[1], t)
            return bb.binary("arith.addf", acc, bb.unary("math.exp", d, t), t)

        total = ctx.b.generic((rows,), t, [(logits, [0, 1]), (mx, [0])],
                              sumexp, reductions=1, init=zero_rows,
                              hint="ce_sumexp")
        operands += [(total, [0]), (mx, [0])]

    def row_loss(bb, names):
        value, label = names[:2]
        if log_probs:
            loss = bb.unary("arith.negf", value, t)
        else:
            lse = bb.binary("arith.addf", bb.unary("math.log", names[2], t),
                            names[3], t)
            loss = bb.binary("arith.subf", lse, value, t)
        ignored = bb.op(f"arith.cmpi eq, {label}, "
                        f"{bb.const(ignore_index, target.dtype)} : "
                        f"{target.dtype}")
        return bb.select(ignored, bb.const(0.0, t), loss, t)

    mode = _REDUCTIONS.get(reduction)
    if mode == "none":
        return ctx.b.generic((rows,), t, operands,
                             lambda bb, names, acc: row_loss(bb, names),
                             hint=ctx.hint)
    scalar_zero = ctx.b.filled((), t, 0.0)
    total_loss = ctx.b.generic(
        (), t, operands, lambda bb, names, acc: bb.binary(
            "arith.addf", acc, row_loss(bb, names), t),
        reductions=1, init=scalar_zero,
        hint=ctx.hint if mode == "sum" else "loss_sum")
    if mode == "sum":
        return total_loss

    def count_body(bb, names, acc):
        ignored = bb.op(f"arith.cmpi eq, {names[0]}, "
                        f"{bb.const(ignore_index, target.dtype)} : "
                        f"{target.dtype}")
        one = bb.select(ignored, bb.const(0.0, t), bb.const(1.0, t), t)
        return bb.binary("arith.addf", acc, one, t)

    count = ctx.b.generic((), t, [(target, [0])], count_body, reductions=1,
                          init=scalar_zero, hint="count")
    return ctx.b.generic(
        (), t, [(total_loss, []), (count, [])],
        lambda bb, names, acc: bb.binary("arith.divf", names[0], names[1],
                                         t), hint=ctx.hint)


@_handles("aten.cross_entropy_loss.default")
def _cross_entropy(ctx, logits, target, weight=None, reduction=1,
                   ignore_index=-100, label_smoothing=0.0):
    if weight is not None:
        ctx.unsupported("class weights are not supported")
    if label_smoothing:
        ctx.unsupported("label smoothing is not supported")
    return _pick_loss(ctx, logits, target, ignore_index, reduction,
                      log_probs=False)


@_handles("aten.nll_loss.default", "aten.nll_loss_nd.default",
          "aten.nll_loss_forward.default")
def _nll_loss(ctx, log_probs, target, weight=None, reduction=1,
              ignore_index=-100):
    if weight is not None:
        ctx.unsupported("class weights are not supported")
    loss = _pick_loss(ctx, log_probs, target, ignore_index, reduction,
                      log_probs=True)
    if op_name(ctx.node) == "aten.nll_loss_forward.default":
        return (loss, None)
    return loss


@_handles("aten.mse_loss.default")
def _mse_loss(ctx, a, b, reduction=1):
    a = ctx.tensor(a)
    t = a.dtype

    def square_error(bb, xs):
        d = bb.binary("arith.subf", xs[0][0], _cast(bb, xs[1], t), t)
        return bb.binary("arith.mulf", d, d, t)

    squared = ctx.elementwise([a, b], square_error, shape=a.shape, dtype=t,
                              hint="sq_err")
    mode = _REDUCTIONS.get(reduction)
    if mode == "none":
        return squared
    return ctx.reduce(squared, list(range(a.rank)), 0.0,
                      lambda bb, e, acc: _add_acc(bb, e, acc, t),
                      scale=1.0 / a.size if mode == "mean" else None,
                      hint=ctx.hint)
