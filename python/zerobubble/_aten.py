"""ATen ops to the compiler's input IR.

One handler per ATen overload (keyed by its name, ``aten.linear.default``)
emits the op through :class:`zerobubble._mlir.Builder`. Handlers take the
node's arguments with graph values replaced by :class:`Value` (an SSA
tensor) or :class:`Const` (a folded constant tensor), in the order and with
the defaults of the ATen schema. A node whose inputs are all constants is
evaluated by PyTorch instead (``arange``, ``tril``, buffers sliced...).
"""

import functools
import math
import operator
import re
from collections import Counter

import numpy as np
import torch
from torch.utils import _pytree as pytree

from ._mlir import Value, is_float
from .errors import FrontendError, UnsupportedOpError

# The MLIR element type of each torch dtype the frontend translates.
ELEMENT_TYPES = {torch.float32: "f32", torch.float64: "f64",
                 torch.float16: "f16", torch.int64: "i64",
                 torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
                 torch.uint8: "i8", torch.bool: "i1"}

_COMPLEX_PARTS = {torch.complex64: torch.float32,
                  torch.complex128: torch.float64}

_NEG_INF = float("-inf")


class Const:
    """A graph value known at export time (a buffer, a lifted constant or
    a folded computation)."""

    def __init__(self, tensor):
        self.tensor = tensor


def half_precision_hint(dtype):
    """What to do about a half-precision model (else ""): compiled model
    code computes in f32 or f64; bf16 is what a run keeps its stashes
    (and, on the GPU, its gemm inputs) in."""
    if dtype not in (torch.bfloat16, torch.float16):
        return ""
    return ("; convert the model and its inputs to float32 (model.float()) "
            "and pass dtype='bf16' to run() to keep the pipeline's "
            "activations in bf16")


def element_type(dtype, what=""):
    """The MLIR element type of a torch dtype."""
    try:
        return ELEMENT_TYPES[dtype]
    except KeyError:
        raise FrontendError(f"unsupported dtype {dtype}"
                            + (f" of '{what}'" if what else "")
                            + half_precision_hint(dtype)) from None


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
# Random ops: never folded at export time (a constant would draw once).
_RANDOM = re.compile(r"rand|dropout|bernoulli|normal|uniform|multinomial|"
                     r"exponential|geometric|cauchy|poisson\b|binomial|"
                     r"_standard_gamma|dirichlet|rrelu")
# What a user can do about a random op in the forward without a handler
# (multinomial, exponential_...).
_RANDOM_DETAIL = (
    "random ops other than dropout (attention's too), bernoulli, rand, "
    "randn, uniform_, normal_, randint and randperm draws are not "
    "supported; export in eval mode (which also freezes batch norm) or "
    "without them")


def _handles(*names):
    def register(fn):
        for name in names:
            _HANDLERS[name] = fn
        return fn
    return register


def _functional_name(name):
    """``aten.add.Tensor`` for the in-place ``aten.add_.Tensor`` (None for
    other names)."""
    match = re.match(r"^aten\.(\w+?)_\.(\w+)$", name)
    if not match or match.group(1).startswith("_"):
        return None
    return f"aten.{match.group(1)}.{match.group(2)}"


# In-place ops that change a tensor's shape, not its elements, and the
# ops that make the new shape.
_RESHAPING_IN_PLACE = {
    "aten.transpose_.default": "aten.transpose.int",
    "aten.t_.default": "aten.t.default",
    "aten.unsqueeze_.default": "aten.unsqueeze.default",
    "aten.squeeze_.dim": "aten.squeeze.dim",
    "aten.squeeze_.dims": "aten.squeeze.dims",
    "aten.squeeze_.default": "aten.squeeze.default",
    "aten.swapaxes_.default": "aten.swapaxes.default",
    "aten.swapdims_.default": "aten.swapdims.default"}

# ATen's alternative names of ops (torch.multiply, Tensor.greater...).
_OP_ALIASES = {"multiply": "mul", "subtract": "sub", "divide": "div",
               "true_divide": "div", "greater": "gt", "greater_equal": "ge",
               "less": "lt", "less_equal": "le", "not_equal": "ne",
               "negative": "neg", "absolute": "abs", "clip": "clamp",
               "concat": "cat", "concatenate": "cat"}


def _canonical_name(name):
    """``aten.mul.Tensor`` for ``aten.multiply.Tensor``; other names as
    they are."""
    parts = name.split(".")
    if len(parts) == 3 and parts[0] == "aten" and parts[1] in _OP_ALIASES:
        parts[1] = _OP_ALIASES[parts[1]]
    return ".".join(parts)


def _functional_target(target):
    """The functional overload of an in-place ATen op (or the op)."""
    functional = _functional_name(str(target))
    if functional is None:
        return target
    _, base, overload = functional.split(".")
    try:
        return getattr(getattr(torch.ops.aten, base), overload)
    except AttributeError:
        return target


def translate(translator, node):
    """The value (Value, Const, tuple of them, or Python scalar) of
    ``node``.

    An in-place op (``add_``, ``relu_``...) is translated as its functional
    form, and later reads of the tensor it mutated see the result."""
    name = op_name(node)
    if name in _RESHAPING_IN_PLACE:
        # x.t_(), x.unsqueeze_(0): x now names the re-shaped tensor; its
        # elements (and any tensor it views) are unchanged.
        result = _translate(translator, node, _RESHAPING_IN_PLACE[name])
        translator.env[node.args[0]] = result
        translator.count_forwards(node.args[0])
        return result
    if name == "aten.embedding_renorm_.default":
        raise UnsupportedOpError(
            name, *module_of(node),
            detail="nn.Embedding(max_norm=...) rescales rows of its weight "
            "in place in every forward, a change to the parameter that "
            "the compiled step (which changes parameters only in its "
            "optimizer update) does not make; build the Embedding without "
            "max_norm")
    functional = _functional_name(name)
    if functional is not None:
        if node.args and isinstance(node.args[0], torch.fx.Node):
            translator.change(_changed_tensor(translator, node.args[0]),
                              node)
        chain = None
        if _updates_a_read_view(translator, node):
            chain = _slice_chain(node)
            if chain is None:
                raise UnsupportedOpError(
                    name, *module_of(node),
                    detail="an in-place update of a view whose base tensor "
                    "is read afterwards is supported through slices and "
                    "indices (x[..., a:b], x[i]), reshapes and transposes, "
                    "not this view")
        result = _translate(translator, node, functional)
        if node.args and isinstance(node.args[0], torch.fx.Node):
            translator.env[node.args[0]] = result
            translator.count_forwards(node.args[0])
            if chain:
                _write_back(translator, chain, result)
            _refresh_views(translator, node)
        return result
    return _translate(translator, node, name)


def _refresh_views(translator, node):
    """After in-place ``node`` changed its tensor (and, through
    _write_back, the views up to its base), the other views of that base
    taken before it and read after it see the change, as PyTorch's shared
    storage does (``v = y[1]; y.mul_(q)``, then ``v``): each is translated
    again from its refreshed base, in graph order."""
    written = node.args[0]
    root = _view_base(written)
    chain = set()
    view = written
    while view is not root:
        chain.add(view)
        view = view.args[0]
    for view in _views_read_after(translator, node, root):
        if view in chain:
            continue
        name = op_name(view)
        if _is_view(view):
            translator.env[view] = _translate(translator, view, name)
        elif name in _RESHAPING_IN_PLACE:
            # The result of x.unsqueeze_(0): x as it is now, re-shaped.
            translator.env[view] = _translate(translator, view,
                                              _RESHAPING_IN_PLACE[name])
        else:
            # The result of x.relu_(): x as it is now.
            translator.env[view] = translator.env[view.args[0]]


def _graph_order(translator, graph):
    """Each node of ``graph`` by its position (computed once a graph)."""
    cache = translator.__dict__.setdefault("_graph_orders", {})
    if graph not in cache:
        cache[graph] = {n: i for i, n in enumerate(graph.nodes)}
    return cache[graph]


def _views_of(translator, graph):
    """The nodes of ``graph`` that alias a tensor, grouped by that tensor
    (_view_base), in graph order (computed once a graph): its views, and
    the results of in-place ops on it or on its views (``r = x.relu_()``
    is x)."""
    cache = translator.__dict__.setdefault("_graph_views", {})
    if graph not in cache:
        views = {}
        for n in graph.nodes:
            if _is_view(n):
                views.setdefault(_view_base(n), []).append(n)
            elif _is_in_place_result(n):
                views.setdefault(_view_base(n.args[0]), []).append(n)
        cache[graph] = views
    return cache[graph]


def _is_in_place_result(node):
    """Whether ``node`` is an in-place op (its schema says it returns its
    first argument, written) on a graph tensor."""
    if node.op != "call_function" or not node.args or \
            not isinstance(node.args[0], torch.fx.Node):
        return False
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.returns:
        return False
    alias = schema.returns[0].alias_info
    return alias is not None and alias.is_write


# Views a write goes through to its base, by how the written value is
# placed in the base: as a block (insert_slice) or as the whole tensor
# re-shaped or transposed back.
_SLICING_VIEWS = ("aten.slice.Tensor", "aten.select.int")
_RESHAPING_VIEWS = (
    "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
    "aten.flatten.using_ints", "aten.unflatten.int",
    "aten.unsqueeze.default", "aten.squeeze.dim", "aten.squeeze.dims",
    "aten.squeeze.default", "aten.view_as.default",
    "aten.reshape_as.default", "aten.contiguous.default",
    "aten.alias.default")
_TRANSPOSING_VIEWS = ("aten.permute.default", "aten.transpose.int",
                      "aten.swapaxes.default", "aten.swapdims.default",
                      "aten.movedim.int", "aten.movedim.intlist",
                      "aten.moveaxis.int", "aten.moveaxis.intlist",
                      "aten.t.default", "aten.numpy_T.default")


def _slice_chain(node):
    """The views from the one in-place ``node`` writes up to its base when
    each is a step-1 ``slice``, a ``select``, a reshape or a transpose of
    the next (x[..., 1:], x[:, 0], x.view(...), x.t()), else None."""
    chain, view = [], node.args[0]
    while isinstance(view, torch.fx.Node) and _is_view(view):
        name = op_name(view)
        step = view.args[4] if len(view.args) > 4 else view.kwargs.get(
            "step", 1)
        if name not in _SLICING_VIEWS + _RESHAPING_VIEWS + \
                _TRANSPOSING_VIEWS or (name == "aten.slice.Tensor"
                                       and step != 1):
            return None
        chain.append(view)
        view = view.args[0]
    return chain or None


def _view_permutation(view, rank):
    """The dimension order of transposing node ``view`` (permute,
    transpose and its aliases swapaxes and swapdims, movedim and moveaxis,
    t) of a rank-``rank`` tensor: its result's dim i is the base's
    perm[i]. The translation of the op and the write back through it both
    read it here."""
    name = op_name(view)
    name = _RESHAPING_IN_PLACE.get(name, name)
    if name == "aten.permute.default":
        return [_norm_dim(d, rank) for d in view.args[1]]
    if name in ("aten.transpose.int", "aten.swapaxes.default",
                "aten.swapdims.default"):
        perm = list(range(rank))
        a, b = (_norm_dim(d, rank) for d in view.args[1:3])
        perm[a], perm[b] = perm[b], perm[a]
        return perm
    if name.startswith(("aten.movedim.", "aten.moveaxis.")):
        # The source dims land at the destinations; the others keep their
        # order in the places left.
        sources, destinations = view.args[1:3]
        if isinstance(sources, int):
            sources, destinations = [sources], [destinations]
        sources = [_norm_dim(d, rank) for d in sources]
        destinations = [_norm_dim(d, rank) for d in destinations]
        perm = [None] * rank
        for source, destination in zip(sources, destinations):
            perm[destination] = source
        rest = iter(d for d in range(rank) if d not in sources)
        return [next(rest) if d is None else d for d in perm]
    return list(reversed(range(rank)))


def _write_back(translator, chain, value):
    """After an in-place op wrote ``value`` into the first view of
    ``chain`` (_slice_chain), each view's base takes it where the view
    lies (tensor.insert_slice for a slice, the value reshaped or
    transposed back for a whole view), up to the base tensor, so that
    later reads of any of them see the update, as PyTorch's aliasing
    does."""
    for view in chain:
        base = view.args[0]
        if isinstance(value, Const) and isinstance(translator.env[base],
                                                   Const):
            # Constants (an index table built in place) stay constants.
            whole = translator.env[base].tensor.clone()
            view.target(whole, *view.args[1:], **view.kwargs).copy_(
                value.tensor)
            value = translator.env[base] = Const(whole)
            continue
        ctx = _Context(translator, base)
        whole = ctx.tensor(translator.env[base])
        value = ctx.tensor(value)
        name = op_name(view)
        if name in _RESHAPING_VIEWS:
            value = ctx.reshape(value, whole.shape)
        elif name in _TRANSPOSING_VIEWS:
            perm = _view_permutation(view, whole.rank)
            inverse = sorted(range(whole.rank), key=perm.__getitem__)
            value = ctx.b.transpose(value, inverse, hint=ctx.hint)
        else:
            value = _insert_view(ctx, view, whole, value)
        translator.env[base] = value


def _insert_view(ctx, view, whole, value):
    """``whole`` with slice or select ``view`` of it replaced by
    ``value``."""
    dim = _norm_dim(view.args[1] if len(view.args) > 1 else 0, whole.rank)
    offsets = [0] * whole.rank
    if op_name(view) == "aten.select.int":
        offsets[dim] = _select_index(view.args[2], whole.shape[dim])
        value = ctx.b.reshape(value, whole.shape[:dim] + (1,)
                              + whole.shape[dim + 1:])
    else:
        offsets[dim] = _slice_start(
            view.args[2] if len(view.args) > 2 else None, whole.shape[dim])
    if not value.size:
        return whole
    return ctx.b.insert_slice(value, whole, offsets)


def _is_view(node):
    """Whether ``node`` returns a view of its first argument (its schema
    says so, and where that depends on the layout, as for contiguous() and
    reshape, the example's strides say it did not copy)."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return isinstance(node.args[0], torch.fx.Node) and _is_view(
            node.args[0])
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.returns:
        return False
    alias = schema.returns[0].alias_info
    return alias is not None and not alias.is_write and not _copied(node)


def _copied(node):
    """Whether aliasing view op ``node`` returned a copy for the exported
    example: contiguous() of a tensor that is not, a reshape that no view
    can express (x.t().reshape(-1))."""
    name = op_name(node)
    if name not in ("aten.contiguous.default", "aten.reshape.default",
                    "aten.reshape_as.default", "aten.flatten.using_ints"):
        return False
    source = node.args[0].meta.get("val") if isinstance(
        node.args[0], torch.fx.Node) else None
    result = node.meta.get("val")
    if not isinstance(source, torch.Tensor) or \
            not isinstance(result, torch.Tensor):
        return False
    layout = torch.empty_strided(source.shape, source.stride(),
                                 dtype=source.dtype, device="meta")
    try:
        layout.view(result.shape)
    except RuntimeError:
        return True
    if name != "aten.contiguous.default":
        return False
    layout = node.kwargs.get("memory_format", node.args[1] if len(
        node.args) > 1 else torch.contiguous_format)
    return not source.is_contiguous(memory_format=layout)


def _view_base(node):
    """The tensor that ``node`` is a view of (through views of views), or
    ``node``."""
    while isinstance(node, torch.fx.Node) and _is_view(node):
        node = node.args[0]  # split(x)[i]: split(x), then x
    return node


def _changed_tensor(translator, node):
    """The tensor an in-place write to ``node`` changes: what ``node``
    views (_view_base), followed out of the regions translated inline to
    the tensor each input of theirs stands for."""
    node = _view_base(node)
    while node in translator.region_inputs:
        node = _view_base(translator.region_inputs[node])
    return node


def _updates_a_read_view(translator, node):
    """Whether in-place ``node`` writes a view of a tensor that is read
    after it, itself or through another of its views taken before (the
    translation would not see the update there)."""
    view = node.args[0] if node.args else None
    chain = set()
    while isinstance(view, torch.fx.Node) and _is_view(view):
        chain.add(view)
        base = view.args[0]
        if view.target is operator.getitem:
            base = base.args[0]  # split(x)[i]: x
        if _read_later(node, base):
            return True
        view = base
    return bool(chain) and any(
        other not in chain for other in _views_read_after(translator, node,
                                                          view))


def _views_read_after(translator, node, root):
    """The views of ``root`` taken before ``node`` and in the translation
    that a node after ``node`` reads, or that such a view is taken from;
    in graph order."""
    order = _graph_order(translator, node.graph)
    position = order[node]
    views = [view for view in _views_of(translator, node.graph).get(root, ())
             if order[view] < position and view in translator.env]
    needed = set()
    for view in reversed(views):
        if any(order.get(user, -1) > position or user in needed
               for user in view.users):
            needed.add(view)
    return [view for view in views if view in needed]


# The value of an item() that feeds runtime assertions alone.
_CHECKED_ONLY = object()
# Python's scalar operators on such values (torch.export's symbolic ints).
_SCALAR_OPS = frozenset((operator.le, operator.lt, operator.ge, operator.gt,
                         operator.eq, operator.ne, operator.and_,
                         operator.or_, operator.not_, operator.add,
                         operator.sub, operator.mul, operator.floordiv,
                         operator.mod, operator.neg, torch.sym_ite,
                         torch.sym_not, torch.sym_max, torch.sym_min))


def _only_checked(node):
    """Whether every use of ``node``, through Python scalar operators,
    ends in a runtime assertion (aten._assert_scalar...)."""
    for user in node.users:
        if user.op != "call_function":
            return False
        if op_name(user).startswith("aten._assert"):
            continue
        if user.target not in _SCALAR_OPS or not _only_checked(user):
            return False
    return True


def _translate(translator, node, name):
    if node.target is operator.getitem:
        item = translator.env[node.args[0]][node.args[1]]
        if item is None and node.users:
            raise UnsupportedOpError(
                "getitem", *module_of(node),
                detail=f"output {node.args[1]} of "
                f"'{op_name(node.args[0])}' is not supported")
        return item
    if _IGNORED.match(name):
        return None
    if name == "aten.item.default" and _only_checked(node):
        # A value read in Python only to assert on it (XLM's
        # ``assert lengths.max().item() <= slen``): the compiled program
        # leaves the check out, as it leaves out torch.export's other
        # runtime assertions.
        return _CHECKED_ONLY
    if name == "aten.item.default":
        raise UnsupportedOpError(
            op_name(node), *module_of(node),
            detail="the module reads a tensor's value in Python (.item(), "
            "int(), float()) for more than an assertion; from_torch "
            "compiles one program for every batch: compute it from shapes "
            "or keep it a tensor")
    if any(translator.env.get(a) is _CHECKED_ONLY for a in node.args
           if isinstance(a, torch.fx.Node)):
        return _CHECKED_ONLY
    args, kwargs = pytree.tree_map(
        lambda x: translator.env[x] if isinstance(x, torch.fx.Node) else x,
        (node.args, node.kwargs))
    leaves = pytree.tree_leaves((args, kwargs))
    if not any(isinstance(x, (Value, Complex)) for x in leaves) and \
            not _RANDOM.search(name) and not name.startswith("zerobubble."):
        return _fold(node, args, kwargs)
    canonical = _canonical_name(name)
    handler = _HANDLERS.get(canonical)
    if handler is None and not _RANDOM.search(name):
        graph = _decomposition(node)
        if graph is not None:
            tensors = [a for a in pytree.tree_leaves((node.args,
                                                      node.kwargs))
                       if isinstance(a, torch.fx.Node)]
            try:
                return _inline(translator, graph,
                               [translator.env[a] for a in tensors])
            except UnsupportedOpError as error:
                raise UnsupportedOpError(
                    op_name(node), *module_of(node),
                    detail=f"its decomposition uses {error.op!r}: "
                    f"{error.detail}" if error.detail else
                    f"its decomposition uses {error.op!r}") from error
    if handler is None:
        raise UnsupportedOpError(op_name(node), *module_of(node),
                                 _RANDOM_DETAIL if _RANDOM.search(name)
                                 else _out_detail(node)
                                 if "out" in node.kwargs else "")
    ctx = _Context(translator, node)
    if any(isinstance(x, Complex) or _is_complex_const(x) for x in leaves):
        return _translate_complex(ctx, canonical, handler, args, kwargs)
    result = handler(ctx, *args, **kwargs)
    ctx.check(result)
    return result


def _out_detail(node):
    """Why an op writing into ``out=`` is refused, and for spectral_norm's
    (whose training-mode power iteration writes its buffers so) what to do
    instead."""
    detail = ("it writes its result into a tensor given as out=, which "
              "from_torch does not translate (it translates functional "
              "calls and in-place ones, x.op_())")
    if module_of(node)[1] == "_SpectralNorm":
        detail += (
            "; spectral_norm's power iteration does so on its buffers in "
            "every training-mode forward, state that the compiled step "
            "(every microbatch on the buffers as they were before the "
            "step) does not keep: put the parametrization in eval mode "
            "(fixed u and v), updating them between steps if need be")
    return detail


def _decomposition(node):
    """For an ATen op without a handler, the graph of PyTorch's own
    decomposition of it (its CompositeImplicitAutograd kernel, or
    torch._decomp's entry: cosine_similarity, binary_cross_entropy, var,
    logit...), traced on fake tensors of the node's argument shapes and
    taking the node's tensor arguments as its inputs, in order; None when
    there is none (or it calls the op again)."""
    op = node.target
    if not isinstance(op, torch._ops.OpOverload):
        return None
    from torch._decomp import decomposition_table
    from torch.fx.experimental.proxy_tensor import make_fx
    decompose = None
    if op.has_kernel_for_dispatch_key(
            torch._C.DispatchKey.CompositeImplicitAutograd):
        decompose = op.decompose
    elif not getattr(decomposition_table.get(op), "__module__",
                     "torch._refs").startswith("torch._refs"):
        # torch._decomp's own (in ATen ops), not the references (in prims).
        decompose = decomposition_table[op]
    if decompose is None:
        return None
    from torch._subclasses.fake_tensor import FakeTensorMode
    leaves, spec = pytree.tree_flatten((node.args, node.kwargs))
    slots = [i for i, a in enumerate(leaves) if isinstance(a, torch.fx.Node)]
    vals = [leaves[i].meta.get("val") for i in slots]
    if not all(isinstance(v, torch.Tensor) for v in vals):
        return None
    with FakeTensorMode():  # shapes only: nothing is allocated
        examples = [torch.empty(tuple(int(d) for d in v.shape),
                                dtype=v.dtype) for v in vals]

    def call(*tensors):
        filled = list(leaves)
        for i, tensor in zip(slots, tensors):
            filled[i] = tensor
        args, kwargs = pytree.tree_unflatten(filled, spec)
        return decompose(*args, **kwargs)

    try:
        graph = make_fx(call, tracing_mode="fake")(*examples)
    except Exception:
        return None
    if any(n.target is op for n in graph.graph.nodes):
        return None
    return graph


def _fold(node, args, kwargs):
    def unwrap(x):
        return x.tensor if isinstance(x, Const) else x

    args, kwargs = pytree.tree_map(unwrap, (args, kwargs))
    # An in-place op on a constant (a BatchNorm's num_batches_tracked += 1)
    # must not mutate the module's buffers: fold its functional form.
    target = _functional_target(node.target)
    with torch.no_grad():
        result = target(*args, **kwargs)
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
            # A complex result (an FFT's) is a pair of tensors of its parts'
            # type.
            self.dtype = element_type(_COMPLEX_PARTS.get(val.dtype,
                                                         val.dtype))
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
            value = self.b.dense(array.numpy(), element_type(array.dtype))
            if not array.is_floating_point() and array.dtype != torch.bool:
                self.translator.constants[value.name] = array.numpy()
            return value
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

    def reduce(self, x, dims, init, combine, *, scale=None, hint=None,
               dtype=None):
        """Reduce ``x`` over ``dims`` (keeping the others, in order):
        ``combine(body, element, acc)``; each element is first cast to
        ``dtype`` (x's by default), then multiplied by ``scale``."""
        x = self.tensor(x)
        t = dtype or x.dtype
        dims, kept, loops = _reduced_loops(x, dims)
        out_shape = tuple(x.shape[d] for d in kept)
        init_value = self.b.filled(out_shape, t, init)

        def body(bb, names, acc):
            element = names[0]
            if t != x.dtype:
                element = _cast(bb, (element, x.dtype), t)
            if scale is not None:
                element = bb.binary("arith.mulf", element,
                                    bb.const(scale, t), t)
            return combine(bb, element, acc)

        return self.b.generic(out_shape, t, [(x, loops)], body,
                              reductions=len(dims), init=init_value,
                              hint=hint or "red")


def _cast(bb, x, dtype):
    return bb.cast(x[0], x[1], dtype)


def _norm_dim(dim, rank):
    return dim % rank if rank else 0


def _reduction_dims(dim, rank):
    """A reduction's ``dim`` argument (an int, a list, or None or [] for
    every dim) as a list of dims in [0, rank)."""
    dims = list(range(rank)) if dim is None or dim == [] else (
        [dim] if isinstance(dim, int) else list(dim))
    return [_norm_dim(d, rank) for d in dims]


def _stop_gradient(bb, x, t):
    """``x`` unchanged, with no derivative: a round trip through the
    integer of the same width (autodiff gives an op whose operands are not
    floats a zero tangent). A canonicalization before autodiff would fold
    the pair away; the pipelines run none."""
    word, bits = _as_bits(bb, x, t)
    return bb.op(f"arith.bitcast {word} : {bits} to {t}", "nograd")


def _as_bits(bb, x, t):
    """Float scalar ``x``'s bits as the integer of the same width, and that
    integer type."""
    bits = {"f64": "i64", "f32": "i32", "f16": "i16", "bf16": "i16"}[t]
    return bb.op(f"arith.bitcast {x} : {t} to {bits}", "bits"), bits


def _no_grad(ctx, value):
    """A float tensor ``value`` with no gradient (a complex one's parts;
    other values as they are)."""
    if isinstance(value, Complex):
        return Complex(_no_grad(ctx, value.real), _no_grad(ctx, value.imag))
    if not isinstance(value, Value) or not is_float(value.dtype):
        return value
    return ctx.elementwise([value], lambda bb, xs: _stop_gradient(
        bb, xs[0][0], value.dtype), shape=value.shape, dtype=value.dtype,
        hint="no_grad")


def _up_to(bb, rank, dim):
    """In a generic whose reduction loop ``rank`` runs along output dim
    ``dim``: whether that loop's position is at or before the output's
    (a prefix: cumsum, cumprod, cummax...)."""
    return bb.op(f"arith.cmpi ule, {bb.index(rank)}, {bb.index(dim)} : "
                 "index")


def _index_const(bb, value):
    return bb.op(f"arith.constant {int(value)} : index", "c")


def _index_op(bb, op, a, b):
    return bb.op(f"arith.{op} {a}, {b} : index", "i")


def _to_index(bb, value, dtype):
    """An integer scalar as an ``index``."""
    return bb.op(f"arith.index_cast {value} : {dtype} to index", "i")


def _as_i64(bb, index):
    """An ``index`` scalar (a loop position) as an i64."""
    return bb.op(f"arith.index_cast {index} : index to i64", "i")


def _all_of(bb, conditions):
    """The conjunction of i1 ``conditions`` (None when there are none)."""
    result = None
    for c in conditions:
        result = c if result is None else bb.binary("arith.andi", result, c,
                                                    "i1")
    return result


def _ints(value, count):
    """A conv/pool size argument (an int or a list of 1 or ``count``) as a
    list of ``count`` ints."""
    if isinstance(value, int):
        return [value] * count
    value = [int(v) for v in value]
    if len(value) == 1:
        return value * count
    if len(value) != count:
        raise FrontendError(f"expected {count} sizes, got {value}")
    return value


# -- stage marker and identities ----------------------------------------


@_handles("zerobubble.pipe_cut.default")
def _pipe_cut(ctx, x):
    ctx.translator.cuts += 1
    return ctx.b.cut(ctx.tensor(x), hint=ctx.hint)


@_handles("zerobubble.grouped_mm.default")
def _grouped_mm(ctx, x, weight, group, transposed):
    """Each row of ``x`` [R, K] times its group's matrix of ``weight``
    ([G, K, N], or [G, N, K] when ``transposed``): a grouped product
    (zb/Analysis/GroupedProduct.h), whose loops (row, column, group, inner)
    keep the term of the row's group alone; the runtime computes each
    group's rows in one gemm."""
    x, weight, group = ctx.tensor(x), ctx.tensor(weight), ctx.tensor(group)
    _require_float(ctx, x, weight)
    if group.dtype != "i64":
        group = ctx.elementwise([group], lambda bb, xs: _cast(bb, xs[0],
                                                              "i64"),
                                shape=group.shape, dtype="i64")
    rows = x.shape[0]
    n = weight.shape[1] if transposed else weight.shape[2]
    t = ctx.dtype

    def body(bb, names, acc):
        row, w, g = names
        hit = bb.op(f"arith.cmpi eq, {g}, {_as_i64(bb, bb.index(2))} : i64",
                    "hit")
        product = bb.binary("arith.mulf", row, w, t)
        return bb.binary("arith.addf", acc,
                         bb.select(hit, product, bb.const(0.0, t), t), t)

    return ctx.b.generic(
        (rows, n), t,
        [(x, [0, 3]), (weight, [2, 1, 3] if transposed else [2, 3, 1]),
         (group, [0])],
        body, reductions=2, init=ctx.b.filled((rows, n), t, 0.0),
        hint="grouped")


@_handles("aten.clone.default", "aten.contiguous.default",
          "aten.alias.default", "aten.lift_fresh_copy.default")
def _identity(ctx, x, *args, **kwargs):
    return x


def _i64(value):
    """A 64-bit word as the signed literal of an i64 constant."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


# The random bits of element i of random op n: mix64(key + n * DROP_OP +
# i * DROP_INDEX), i the element's row-major position and mix64 SplitMix64's
# finaliser (zbrt::mix64); the top 24 bits are the element's uniform draw.
DROP_OP, DROP_INDEX = 0xD1B54A32D192ED03, 0x9E3779B97F4A7C15
MIX_1, MIX_2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _draw(bb, key, number, shape):
    """Emits, in a generic body over ``shape``, the 24-bit uniform draw of
    the current element for random op ``number``: the top 24 bits of
    mix64(key + number * DROP_OP + position * DROP_INDEX)."""
    position = None
    for dim, extent in enumerate(shape):
        i = _as_i64(bb, bb.index(dim))
        position = i if position is None else bb.binary(
            "arith.addi", bb.binary("arith.muli", position,
                                    bb.const(extent, "i64"), "i64"),
            i, "i64")
    z = bb.binary("arith.addi", key,
                  bb.const(_i64(number * DROP_OP), "i64"), "i64")
    if position is not None:
        z = bb.binary("arith.addi", z, bb.binary(
            "arith.muli", position, bb.const(_i64(DROP_INDEX), "i64"),
            "i64"), "i64")
    for shift, factor in ((30, MIX_1), (27, MIX_2), (31, None)):
        z = bb.binary("arith.xori", z, bb.binary(
            "arith.shrui", z, bb.const(shift, "i64"), "i64"), "i64")
        if factor is not None:
            z = bb.binary("arith.muli", z, bb.const(_i64(factor), "i64"),
                          "i64")
    return bb.binary("arith.shrui", z, bb.const(40, "i64"), "i64")


def _threshold(ctx, p, what):
    """round(p * 2^24): a draw below it happens with probability p."""
    if not 0 <= p <= 1:
        ctx.unsupported(f"{what} probability {p} outside [0, 1]")
    return round(p * (1 << 24))


@_handles("aten.dropout.default", "aten.feature_dropout.default",
          "aten.alpha_dropout.default", "aten.feature_alpha_dropout.default")
def _dropout(ctx, x, p, train):
    """In training mode, each element is kept when its draw is not below
    p (at least round(p * 2^24)) and scaled by 1 / (1 - p), else 0; the
    draws come from the microbatch's random key, so that a pipelined run
    drops what one process drops, and the backward recomputes the mask
    from the key instead of stashing it. Feature dropout (dropout1d/2d/3d)
    draws one mask element per sample and channel (the first two dims);
    alpha dropout (SELU networks) keeps the mean and variance as PyTorch's
    does: x * a where kept, else -alpha * a, plus alpha * a * p."""
    if not train or p == 0:
        return x
    name = op_name(ctx.node)
    x = ctx.tensor(x)
    if "feature" in name and x.rank < 2:
        ctx.unsupported("feature dropout of a tensor with fewer than 2 "
                        "dims")
    return _dropped(ctx, x, p, feature="feature" in name,
                    alpha="alpha" in name)



def _dropped(ctx, x, p, feature=False, alpha=False):
    """``x`` under a dropout of p (see _dropout): with ``feature``, the
    draw of element i is that of its (sample, channel) in row-major order
    over the first two dims."""
    threshold = _threshold(ctx, p, "dropout")
    key, number = ctx.translator.random_key()
    if alpha:
        # SELU's negative saturation, -scale * alpha, is where it drops to.
        saturation = _SELU_SCALE * _SELU_ALPHA
        a = (1.0 / math.sqrt((saturation ** 2 * p + 1) * (1 - p))
             if p < 1 else 0.0)
        scale, dropped, shift = a, -saturation * a, saturation * a * p
    else:
        scale, dropped, shift = (0.0 if p == 1 else 1.0 / (1.0 - p)), 0.0, 0.0
    drawn = x.shape[:2] if feature else x.shape

    def body(bb, args, acc):
        draw = _draw(bb, args[1], number, drawn)
        keep = bb.op(f"arith.cmpi uge, {draw}, "
                     f"{bb.const(threshold, 'i64')} : i64", "keep")
        scaled = bb.binary("arith.mulf", args[0],
                           bb.const(scale, x.dtype), x.dtype)
        value = bb.select(keep, scaled, bb.const(dropped, x.dtype), x.dtype)
        if shift:
            value = bb.binary("arith.addf", value, bb.const(shift, x.dtype),
                              x.dtype)
        return value

    dims = list(range(len(x.shape)))
    return ctx.b.generic(x.shape, x.dtype, [(x, dims), (key, ["0"])], body,
                         hint="dropout")


@_handles("aten.bernoulli.float", "aten.bernoulli.p")
def _bernoulli(ctx, x, p=0.5, generator=None):
    """1 where the element's draw is below p (probability p), else 0, in
    ``x``'s shape and dtype (torchvision's stochastic depth draws its
    per-sample noise so)."""
    if generator is not None:
        ctx.unsupported("a bernoulli draw from a given generator")
    if not is_float(ctx.dtype):
        ctx.unsupported("bernoulli draws into an integer tensor")
    threshold = _threshold(ctx, p, "bernoulli")
    key, number = ctx.translator.random_key()

    def body(bb, args, acc):
        draw = _draw(bb, args[0], number, ctx.shape)
        hit = bb.op(f"arith.cmpi ult, {draw}, "
                    f"{bb.const(threshold, 'i64')} : i64", "hit")
        return bb.select(hit, bb.const(1.0, ctx.dtype),
                         bb.const(0.0, ctx.dtype), ctx.dtype)

    return ctx.b.generic(ctx.shape, ctx.dtype, [(key, ["0"])], body,
                         hint="bernoulli")


def _uniform(bb, key, number, shape, t):
    """The current element's uniform draw of random op ``number`` as an
    f32 or f64 ``t``: its 24-bit draw times 2^-24, in [0, 1) (exact in
    both)."""
    draw = bb.cast(_draw(bb, key, number, shape), "i64", t)
    return bb.binary("arith.mulf", draw, bb.const(2.0 ** -24, t), t)


def _random_tensor(ctx, numbers, fn, generator=None):
    """A float tensor of the node's shape whose element is ``fn(bb,
    draws)``, ``draws`` the element's uniform draws (``_uniform``) of
    ``numbers`` random ops (each its own stream of the key), computed in
    f32 (f64 for f64 tensors) and rounded to the node's type."""
    what = op_name(ctx.node)
    if generator is not None:
        ctx.unsupported(f"'{what}' from a given generator")
    if not is_float(ctx.dtype):
        ctx.unsupported(f"'{what}' into an integer tensor")
    streams = [ctx.translator.random_key() for _ in range(numbers)]
    key = streams[0][0]
    wide = ctx.dtype if ctx.dtype == "f64" else "f32"

    def body(bb, args, acc):
        draws = [_uniform(bb, args[0], number, ctx.shape, wide)
                 for _, number in streams]
        return bb.cast(fn(bb, draws, wide), wide, ctx.dtype)

    return ctx.b.generic(ctx.shape, ctx.dtype, [(key, ["0"])], body,
                         hint="random")


@_handles("aten.rand.default", "aten.rand_like.default",
          "aten.uniform.default")
def _rand(ctx, *args, **kwargs):
    """``torch.rand``, ``rand_like`` and ``x.uniform_(low, high)``: the
    element's uniform draw in [0, 1) (_uniform), for uniform_ scaled to
    [low, high) (HF's drop path floors keep_prob + rand)."""
    low, high = 0.0, 1.0
    if op_name(ctx.node).startswith("aten.uniform"):
        low = args[1] if len(args) > 1 else kwargs.get("from", 0.0)
        high = args[2] if len(args) > 2 else kwargs.get("to", 1.0)

    def fn(bb, draws, t):
        u = draws[0]
        if (low, high) == (0.0, 1.0):
            return u
        return bb.binary("arith.addf", bb.const(low, t), bb.binary(
            "arith.mulf", u, bb.const(high - low, t), t), t)

    return _random_tensor(ctx, 1, fn, kwargs.get("generator"))


@_handles("aten.randn.default", "aten.randn_like.default",
          "aten.normal.default", "aten.normal.float_float")
def _randn(ctx, *args, **kwargs):
    """``torch.randn``, ``randn_like``, ``x.normal_(mean, std)`` and
    ``torch.normal(mean, std, size)``: from the draws u1, u2 of two random
    ops (n and n + 1), Box-Muller's sqrt(-2 log(1 - u1)) * cos(2 pi u2)
    (1 - u1 is never 0), for normal times std plus mean."""
    mean, std = 0.0, 1.0
    name = op_name(ctx.node)
    if name == "aten.normal.float_float":
        mean, std = args[0], args[1]
    elif name.startswith("aten.normal"):
        mean = args[1] if len(args) > 1 else kwargs.get("mean", 0.0)
        std = args[2] if len(args) > 2 else kwargs.get("std", 1.0)

    def fn(bb, draws, t):
        one_minus = bb.binary("arith.subf", bb.const(1.0, t), draws[0], t)
        radius = bb.unary("math.sqrt", bb.binary(
            "arith.mulf", bb.const(-2.0, t),
            bb.unary("math.log", one_minus, t), t), t)
        angle = bb.binary("arith.mulf", draws[1],
                          bb.const(2.0 * math.pi, t), t)
        z = bb.binary("arith.mulf", radius, bb.unary("math.cos", angle, t),
                      t)
        if (mean, std) == (0.0, 1.0):
            return z
        return bb.binary("arith.addf", bb.const(mean, t), bb.binary(
            "arith.mulf", z, bb.const(std, t), t), t)

    return _random_tensor(ctx, 2, fn, kwargs.get("generator"))


@_handles("aten.randint.default", "aten.randint.low",
          "aten.randint_like.default", "aten.randint_like.low_dtype")
def _randint(ctx, *args, **kwargs):
    """``torch.randint`` and ``randint_like``: low + ((draw * (high - low))
    >> 24) from the element's 24-bit draw, i.e. floor(u * (high - low))
    for the uniform u of ``rand`` (each value within (high - low) / 2^24 of
    its probability)."""
    name = op_name(ctx.node)
    if kwargs.get("generator") is not None:
        ctx.unsupported(f"'{name}' from a given generator")
    bounds = {"aten.randint.default": (0, args[0]),
              "aten.randint.low": args[:2],
              "aten.randint_like.default": (0, args[1]),
              "aten.randint_like.low_dtype": args[1:3]}[name]
    low, high = (int(b) for b in bounds)
    if high <= low or high - low > 1 << 39:
        ctx.unsupported(f"randint from {low} to {high} (need low < high, "
                        "high - low <= 2^39)")
    key, number = ctx.translator.random_key()

    def body(bb, args, acc):
        span = bb.binary("arith.muli", _draw(bb, args[0], number, ctx.shape),
                         bb.const(high - low, "i64"), "i64")
        value = bb.binary("arith.addi", bb.const(low, "i64"), bb.binary(
            "arith.shrui", span, bb.const(24, "i64"), "i64"), "i64")
        return bb.cast(value, "i64", ctx.dtype)

    return ctx.b.generic(ctx.shape, ctx.dtype, [(key, ["0"])], body,
                         hint="randint")


@_handles("aten.randperm.default")
def _randperm(ctx, n, **kwargs):
    """``torch.randperm(n)``: the stable argsort of n draws of a random op
    (its numbers 0..n-1 in the order of their draws, equal draws by
    position)."""
    if kwargs.get("generator") is not None:
        ctx.unsupported("'randperm' from a given generator")
    key, number = ctx.translator.random_key()
    shape = (int(n),)
    draws = ctx.b.generic(shape, "i64", [(key, ["0"])], lambda bb, args, acc:
                          _draw(bb, args[0], number, shape), hint="draws")
    indices = _sorted_indices(ctx, draws, 0, False)
    if ctx.dtype == "i64":
        return indices
    return ctx.elementwise([indices], lambda bb, xs: bb.cast(
        xs[0][0], "i64", ctx.dtype), hint="randperm")


@_handles("aten.detach.default")
def _detach(ctx, x):
    # No gradient flows back through a detached value (the result is read
    # through a stop-gradient round trip; see _stop_gradient).
    return _no_grad(ctx, ctx.tensor(x))


@_handles("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout",
          "aten.to.device", "aten.type_as.default")
def _to_dtype(ctx, x, *args, **kwargs):
    return _cast_to(ctx, ctx.tensor(x), ctx.dtype)


def _cast_to(ctx, x, dtype):
    """Tensor ``x`` with ``dtype`` elements (``x`` itself when it has)."""
    if x.dtype == dtype:
        return x
    return ctx.elementwise([x], lambda bb, xs: _cast(bb, xs[0], dtype),
                           shape=x.shape, dtype=dtype)


# -- shapes -------------------------------------------------------------


@_handles("aten.view.default", "aten.reshape.default",
          "aten._unsafe_view.default", "aten.flatten.using_ints",
          "aten.unflatten.int", "aten.unsqueeze.default",
          "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default",
          "aten.view_as.default", "aten.reshape_as.default")
def _view(ctx, x, *args, **kwargs):
    return ctx.reshape(x, ctx.shape)


@_handles(*_TRANSPOSING_VIEWS)
def _transpose(ctx, x, *args):
    x = ctx.tensor(x)
    return ctx.b.transpose(x, _view_permutation(ctx.node, x.rank),
                           hint=ctx.hint)


@_handles("aten.expand.default", "aten.expand_as.default",
          "aten.broadcast_to.default")
def _expand(ctx, x, *args, **kwargs):
    return ctx.expand(x, ctx.shape)


@_handles("aten.repeat_interleave.self_int")
def _repeat_interleave(ctx, x, repeats, dim=None, output_size=None):
    """Each element ``repeats`` times in a row along ``dim`` (of the
    flattened tensor without one): x broadcast over a new dim after
    ``dim``, merged into it."""
    x = ctx.tensor(x)
    if dim is None:
        x, dim = ctx.b.reshape(x, (x.size,)), 0
    dim = _norm_dim(dim, x.rank)
    spread = x.shape[:dim + 1] + (repeats,) + x.shape[dim + 1:]
    x = ctx.b.reshape(x, x.shape[:dim + 1] + (1,) + x.shape[dim + 1:])
    return ctx.b.reshape(ctx.expand(x, spread), ctx.shape)


@_handles("aten.repeat.default")
def _repeat(ctx, x, repeats):
    """Tile ``x``: as [1, a, 1, b] broadcast to [r0, a, r1, b], then
    [r0 * a, r1 * b]."""
    x = ctx.tensor(x)
    repeats = [int(r) for r in repeats]
    shape = [1] * (len(repeats) - x.rank) + list(x.shape)
    spread = [d for size in shape for d in (1, size)]
    tiled = [d for r, size in zip(repeats, shape) for d in (r, size)]
    spread_x = ctx.b.reshape(x, spread)
    return ctx.b.reshape(ctx.expand(spread_x, tiled), ctx.shape)


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
    offsets = [0] * x.rank
    strides = [1] * x.rank
    offsets[dim], strides[dim] = _slice_start(start, x.shape[dim]), step
    return ctx.b.extract_slice(x, offsets, ctx.shape, strides)


def _slice_start(start, size):
    """Where x[start:] begins along a dim of ``size`` (None: 0; negative:
    from the end; clamped to the dim)."""
    start = 0 if start is None else start
    return min(max(start + size if start < 0 else start, 0), size)


def _select_index(index, size):
    """x[index] along a dim of ``size`` (negative: from the end)."""
    return index + size if index < 0 else index


@_handles("aten.select.int")
def _select(ctx, x, dim, index):
    x = ctx.tensor(x)
    dim = _norm_dim(dim, x.rank)
    index = _select_index(index, x.shape[dim])
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


@_handles("aten.chunk.default")
def _chunk(ctx, x, chunks, dim=0):
    dim = _norm_dim(dim, ctx.tensor(x).rank)
    return _pieces(ctx, x, dim, [int(v.shape[dim]) for v in ctx.val])


@_handles("aten.split_with_sizes.default")
def _split_with_sizes(ctx, x, split_sizes, dim=0):
    return _pieces(ctx, x, dim, split_sizes)


@_handles("aten.glu.default")
def _glu(ctx, x, dim=-1):
    """a * sigmoid(b) for the halves a, b of x along ``dim``."""
    x = ctx.tensor(x)
    if not is_float(x.dtype):
        ctx.unsupported("only float operands are supported")
    dim = _norm_dim(dim, x.rank)
    half = x.shape[dim] // 2
    a, b = _pieces(ctx, x, dim, [half, half])
    return ctx.elementwise([a, b], lambda bb, xs: bb.binary(
        "arith.mulf", xs[0][0], _sigmoid(bb, xs[1][0], x.dtype), x.dtype))


@_handles("aten.pixel_shuffle.default")
def _pixel_shuffle(ctx, x, factor):
    """[..., C r^2, H, W] -> [..., C, H r, W r]: each pixel's r x r
    channels spread over an r x r block (a reshape, a transpose, a
    reshape)."""
    x = ctx.tensor(x)
    lead, (c, h, w), r = x.shape[:-3], x.shape[-3:], factor
    k = len(lead)
    spread = ctx.b.reshape(x, (*lead, c // (r * r), r, r, h, w))
    order = list(range(k)) + [k, k + 3, k + 1, k + 4, k + 2]
    return ctx.b.reshape(ctx.b.transpose(spread, order), ctx.shape)


@_handles("aten.pixel_unshuffle.default")
def _pixel_unshuffle(ctx, x, factor):
    """[..., C, H r, W r] -> [..., C r^2, H, W], pixel_shuffle's
    inverse."""
    x = ctx.tensor(x)
    lead, (c, h, w), r = x.shape[:-3], x.shape[-3:], factor
    k = len(lead)
    blocks = ctx.b.reshape(x, (*lead, c, h // r, r, w // r, r))
    order = list(range(k)) + [k, k + 2, k + 4, k + 1, k + 3]
    return ctx.b.reshape(ctx.b.transpose(blocks, order), ctx.shape)


@_handles("aten.unbind.int")
def _unbind(ctx, x, dim=0):
    x = ctx.tensor(x)
    dim = _norm_dim(dim, x.rank)
    pieces = _pieces(ctx, x, dim, [1] * x.shape[dim])
    shape = tuple(s for i, s in enumerate(x.shape) if i != dim)
    return [ctx.b.reshape(p, shape) for p in pieces]


@_handles("aten.cat.default")
def _cat(ctx, tensors, dim=0):
    return _joined(ctx, [ctx.tensor(x) for x in tensors],
                   _norm_dim(dim, len(ctx.shape)), ctx.shape, ctx.dtype)


def _joined(ctx, pieces, dim, shape, t):
    """``pieces`` concatenated along ``dim`` into ``shape`` (empty ones,
    which PyTorch's cat also takes in other shapes, left out)."""
    result = ctx.b.empty(shape, t)
    offset = 0
    for piece in pieces:
        if piece.size == 0:
            continue
        offsets = [0] * len(shape)
        offsets[dim] = offset
        result = ctx.b.insert_slice(piece, result, offsets)
        offset += piece.shape[dim]
    return result


@_handles("aten.roll.default")
def _roll(ctx, x, shifts, dims=()):
    """torch.roll: along each dim, the last ``shift`` entries first (two
    slices joined); without dims, over the flattened tensor."""
    x = ctx.tensor(x)
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    shape = x.shape
    if not dims:
        if len(shifts) != 1:
            ctx.unsupported("several shifts need as many dims")
        x, dims = ctx.b.reshape(x, (x.size,)), [0]
    if len(shifts) != len(dims):
        ctx.unsupported("shifts and dims differ in length")
    for shift, dim in zip(shifts, dims):
        dim = _norm_dim(dim, x.rank)
        size = x.shape[dim]
        shift = shift % size if size else 0
        if not shift:
            continue
        result = ctx.b.empty(x.shape, x.dtype)
        for start, length, at in ((size - shift, shift, 0),
                                  (0, size - shift, shift)):
            offsets, sizes = [0] * x.rank, list(x.shape)
            offsets[dim], sizes[dim] = start, length
            piece = ctx.b.extract_slice(x, offsets, sizes, [1] * x.rank)
            offsets[dim] = at
            result = ctx.b.insert_slice(piece, result, offsets)
        x = result
    return ctx.b.reshape(x, shape)


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
        if not swap and (isinstance(a, Complex) or isinstance(b, Complex)):
            return _complex_arith(ctx, kind, a, b, alpha)
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
    if isinstance(b, Complex) or (isinstance(a, Complex)
                                  and rounding_mode is not None):
        ctx.unsupported("only true division of a complex tensor by a real "
                        "one is supported")
    if isinstance(a, Complex):
        # Each part divided by the real divisor.
        return Complex(*(None if part is None else _div(ctx, part, b)
                         for part in (a.real, a.imag)))
    if rounding_mode in ("floor", "trunc") and is_float(ctx.dtype):
        # A derivative of 0, as PyTorch's.
        return ctx.elementwise([a, b], lambda bb, xs: _rounded_quotient(
            bb, _cast(bb, xs[0], ctx.dtype), _cast(bb, xs[1], ctx.dtype),
            ctx.dtype, rounding_mode))
    if rounding_mode in ("floor", "trunc") and ctx.dtype != "i1":
        t = ctx.dtype
        op = "arith.floordivsi" if rounding_mode == "floor" else "arith.divsi"
        return ctx.elementwise([a, b], lambda bb, xs: _integer_division(
            bb, _cast(bb, xs[0], t), _cast(bb, xs[1], t), t, op))
    if rounding_mode is not None or not is_float(ctx.dtype):
        ctx.unsupported("only true division of floats is supported")
    return ctx.elementwise([a, b], lambda bb, xs: bb.binary(
        "arith.divf", _cast(bb, xs[0], ctx.dtype),
        _cast(bb, xs[1], ctx.dtype), ctx.dtype))


def _larger(bb, a, b, t, op="arith.maximumf"):
    """max(a, b) (``op``: arith.maximumf, NaN propagating, or
    arith.maxnumf, NaN ignored) whose gradient at a tie is half to each, as
    PyTorch's: there it is (a + b) / 2, which equals a unless a + b
    overflows (then the plain max, its gradient to b)."""
    mid = bb.binary("arith.mulf", bb.binary("arith.addf", a, b, t),
                    bb.const(0.5, t), t)
    tie = bb.op(f"arith.andi {bb.op(f'arith.cmpf oeq, {a}, {b} : {t}')}, "
                f"{bb.op(f'arith.cmpf oeq, {mid}, {a} : {t}')} : i1")
    return bb.select(tie, mid, bb.binary(op, a, b, t), t)


def _smaller(bb, a, b, t, op="arith.maximumf"):
    """min(a, b) as -max(-a, -b) (see _larger): the same ties, and -0 below
    +0."""
    neg = lambda v: bb.unary("arith.negf", v, t)  # noqa: E731
    return neg(_larger(bb, neg(a), neg(b), t, op))


@_handles("aten.maximum.default", "aten.minimum.default",
          "aten.max.other", "aten.min.other", "aten.fmax.default",
          "aten.fmin.default")
def _max_min(ctx, a, b):
    """Elementwise maximum or minimum (NaN propagates, as in PyTorch; fmax
    and fmin ignore it); torch.max(a, b) is the same op as torch.maximum.
    At a tie each operand gets half the gradient."""
    if not is_float(ctx.dtype):
        ctx.unsupported("only float operands are supported")
    name = op_name(ctx.node)
    pick = _larger if name.startswith(("aten.maximum.", "aten.max.",
                                       "aten.fmax.")) else _smaller
    op = "arith.maxnumf" if name.startswith(("aten.fmax.", "aten.fmin.")) \
        else "arith.maximumf"
    return ctx.elementwise([a, b], lambda bb, xs: pick(
        bb, _cast(bb, xs[0], ctx.dtype), _cast(bb, xs[1], ctx.dtype),
        ctx.dtype, op))


def _clamp(ctx, x, low=None, high=None):
    """min(max(x, low), high), either bound optional (a scalar or a
    tensor). At a scalar bound x gets no gradient; at a tensor bound's tie
    half (then the bound the other half), as in PyTorch."""
    t = ctx.dtype
    if t == "i1":
        ctx.unsupported("boolean operands are not supported")
    operands = [x] + [v for v in (low, high) if v is not None]

    def bound(bb, y, v, given, lower):
        if not is_float(t):
            return bb.binary("arith.maxsi" if lower else "arith.minsi", y, v,
                             t)
        if isinstance(given, (int, float)):
            return bb.binary("arith.maximumf" if lower else "arith.minimumf",
                             y, v, t)
        return (_larger if lower else _smaller)(bb, y, v, t)

    def fn(bb, xs):
        xs = [_cast(bb, v, t) for v in xs]
        y, rest = xs[0], xs[1:]
        if low is not None:
            y = bound(bb, y, rest.pop(0), low, True)
        if high is not None:
            y = bound(bb, y, rest.pop(0), high, False)
        return y

    return ctx.elementwise(operands, fn)


@_handles("aten.clamp.default", "aten.clamp.Tensor")
def _clamp_op(ctx, x, min=None, max=None):
    return _clamp(ctx, x, min, max)


@_handles("aten.clamp_min.default", "aten.clamp_min.Tensor")
def _clamp_min(ctx, x, min):
    return _clamp(ctx, x, min, None)


@_handles("aten.clamp_max.default", "aten.clamp_max.Tensor")
def _clamp_max(ctx, x, max):
    return _clamp(ctx, x, None, max)


@_handles("aten.hardtanh.default")
def _hardtanh(ctx, x, min_val=-1.0, max_val=1.0):
    return _clamp(ctx, x, min_val, max_val)


@_handles("aten.relu6.default")
def _relu6(ctx, x):
    return _clamp(ctx, x, 0.0, 6.0)


@_handles("aten.remainder.Scalar", "aten.remainder.Tensor")
def _remainder(ctx, a, b):
    t = ctx.dtype
    if is_float(t):
        return ctx.elementwise([a, b], lambda bb, xs: _modulo(
            bb, _cast(bb, xs[0], t), _cast(bb, xs[1], t), t, "floor"))
    if t == "i1":
        ctx.unsupported("remainders of booleans are not supported")

    def fn(bb, xs):
        x, y = (_cast(bb, v, t) for v in xs)
        # Python's sign convention: the result has the divisor's sign.
        r = _integer_division(bb, x, y, t, "arith.remsi")
        zero = bb.const(0, t)
        nonzero = bb.op(f"arith.cmpi ne, {r}, {zero} : {t}")
        r_neg = bb.op(f"arith.cmpi slt, {r}, {zero} : {t}")
        y_neg = bb.op(f"arith.cmpi slt, {y}, {zero} : {t}")
        differ = bb.binary("arith.xori", r_neg, y_neg, "i1")
        fix = bb.binary("arith.andi", nonzero, differ, "i1")
        return bb.select(fix, bb.binary("arith.addi", r, y, t), r, t)

    return ctx.elementwise([a, b], fn)


def _float_binary(build):
    """A float binary op ``build(body, a, b, t)`` of broadcast operands."""
    def handler(ctx, a, b, *args):
        t = ctx.dtype
        if not is_float(t):
            ctx.unsupported("only float operands are supported")
        return ctx.elementwise([a, b], lambda bb, xs: build(
            bb, _cast(bb, xs[0], t), _cast(bb, xs[1], t), t, *args))
    return handler


def _integer_division(bb, x, y, t, op):
    """x op y for an integer quotient or remainder (``op``:
    arith.floordivsi, arith.divsi or arith.remsi) that cannot trap: a
    divisor of 0, which PyTorch refuses, gives 0 (the CPU's division would
    stop the process), and one of -1 gives -x (wrapping at the least value,
    where PyTorch's CPU kernel stops the process) or a remainder of 0."""
    zero, one = bb.const(0, t), bb.const(1, t)
    by_zero = bb.op(f"arith.cmpi eq, {y}, {zero} : {t}")
    by_minus_one = bb.op(f"arith.cmpi eq, {y}, {bb.const(-1, t)} : {t}")
    special = bb.binary("arith.ori", by_zero, by_minus_one, "i1")
    result = bb.binary(op, x, bb.select(special, one, y, t), t)
    negated = zero if op == "arith.remsi" else _integer_negation(bb, x, t)
    result = bb.select(by_minus_one, negated, result, t)
    return bb.select(by_zero, zero, result, t)


def _rounded_quotient(bb, a, b, t, rounding):
    return bb.unary(f"math.{rounding}", bb.binary("arith.divf", a, b, t), t)


def _modulo(bb, a, b, t, rounding):
    """a - rounding(a / b) * b: fmod (trunc, the dividend's sign) and the
    float remainder (floor, the divisor's sign)."""
    return bb.binary("arith.subf", a, bb.binary(
        "arith.mulf", _rounded_quotient(bb, a, b, t, rounding), b, t), t)


def _copysign(bb, a, b, t):
    """|a| with the sign bit of b (-0 and a NaN's sign included): the
    gradient to a is +-1 (0 at a = 0, as PyTorch's), none to b."""
    word, bits = _as_bits(bb, b, t)
    negative = bb.op(f"arith.cmpi slt, {word}, {bb.const(0, bits)} : {bits}")
    magnitude = bb.unary("math.absf", a, t)
    return bb.select(negative, bb.unary("arith.negf", magnitude, t),
                     magnitude, t)


def _minus_abs(bb, x, positive, t):
    """-|x| as ``-x if positive else x``, ``positive`` the caller's own test
    of x's sign (x >= 0 or x > 0), so that at x = 0 its derivative is that
    of the side the caller's other selects take there: a smooth function
    written with it (sigmoid, softplus, logaddexp) keeps its derivative at
    0, where math.absf's subgradient 0 would lose it."""
    return bb.select(positive, bb.unary("arith.negf", x, t), x, t)


def _logaddexp(bb, a, b, t):
    """max(a, b) + log1p(exp(-|a - b|)) (a or b where both are -inf); at a
    = b each gets half the gradient, as in PyTorch."""
    d = bb.binary("arith.subf", a, b, t)
    first = bb.op(f"arith.cmpf ogt, {d}, {bb.const(0.0, t)} : {t}")
    m = bb.select(first, a, b, t)
    minus = _minus_abs(bb, d, first, t)
    both = _is_finite(bb, d, t)
    tail = _log1p(bb, bb.unary("math.exp", bb.select(
        both, minus, bb.const(0.0, t), t), t), t)
    return bb.select(both, bb.binary("arith.addf", m, tail, t),
                     bb.binary("arith.maximumf", a, b, t), t)


_handles("aten.hypot.default")(_float_binary(lambda bb, a, b, t: bb.unary(
    "math.sqrt", bb.binary("arith.addf", bb.binary("arith.mulf", a, a, t),
                           bb.binary("arith.mulf", b, b, t), t), t)))
_handles("aten.logaddexp.default")(_float_binary(_logaddexp))
_handles("aten.copysign.Tensor", "aten.copysign.Scalar")(_float_binary(
    lambda bb, a, b, t: _copysign(bb, a, b, t)))
_handles("aten.logaddexp2.default")(_float_binary(
    lambda bb, a, b, t: bb.binary("arith.divf", _logaddexp(
        bb, bb.binary("arith.mulf", a, bb.const(math.log(2.0), t), t),
        bb.binary("arith.mulf", b, bb.const(math.log(2.0), t), t), t),
        bb.const(math.log(2.0), t), t)))
_handles("aten.fmod.Tensor", "aten.fmod.Scalar")(_float_binary(
    lambda bb, a, b, t: _modulo(bb, a, b, t, "trunc")))


def _unary(build, integer=None):
    """The handler of a float unary op ``build(body, x, t)``; with
    ``integer``, also of integers (not booleans)."""
    def handler(ctx, x, *args, **kwargs):
        t = ctx.dtype
        if integer is not None and t != "i1" and not is_float(t):
            return ctx.elementwise([x], lambda bb, xs: integer(
                bb, _cast(bb, xs[0], t), t))
        if not is_float(ctx.dtype):
            ctx.unsupported("only float operands are supported")
        return ctx.elementwise(
            [x], lambda bb, xs: build(bb, _cast(bb, xs[0], ctx.dtype),
                                      ctx.dtype, *args, **kwargs))
    return handler


def _sigmoid(bb, x, t):
    """1 / (1 + e) for x >= 0, e / (1 + e) below, with e = exp(-|x|) in
    (0, 1]: no overflow, so the derivative is finite everywhere (at x =
    -inf too, where a router's masked scores are: there 1 / (1 + exp(-x))
    has the derivative inf / inf)."""
    positive = bb.op(f"arith.cmpf oge, {x}, {bb.const(0.0, t)} : {t}")
    e = bb.unary("math.exp", _minus_abs(bb, x, positive, t), t)
    one = bb.const(1.0, t)
    denominator = bb.binary("arith.addf", one, e, t)
    return bb.binary("arith.divf", bb.select(positive, one, e, t),
                     denominator, t)


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
    """x ** exponent: products, square roots and reciprocals for the
    exponents PyTorch's CPU kernel computes so (GELU's tanh form cubes),
    math.powf for the others."""
    if exponent == 0:
        # 1 everywhere (NaN and 0 included), with PyTorch's gradient 0 (0 *
        # x^-1 would be NaN at 0).
        return bb.const(1.0, t)
    if exponent in (2, 3, -2):
        square = bb.binary("arith.mulf", x, x, t)
        if exponent == 3:
            return bb.binary("arith.mulf", square, x, t)
        if exponent == -2:
            return bb.binary("arith.divf", bb.const(1.0, t), square, t)
        return square
    if exponent == 1:
        return x
    if exponent == 0.5:
        return bb.unary("math.sqrt", x, t)
    if exponent == -0.5:
        return bb.unary("math.rsqrt", x, t)
    if exponent == -1:
        return bb.binary("arith.divf", bb.const(1.0, t), x, t)
    return bb.binary("math.powf", x, bb.const(exponent, t), t)


def _log1p(bb, x, t):
    """log(1 + x) without the cancellation near 0 (torch's log1p): with
    u = 1 + x rounded, log(u) * x / (u - 1), exact in x's rounding; x
    itself where u is 1."""
    one = bb.const(1.0, t)
    u = bb.binary("arith.addf", one, x, t)
    d = bb.binary("arith.subf", u, one, t)
    same = bb.op(f"arith.cmpf oeq, {d}, {bb.const(0.0, t)} : {t}")
    # Unselected, the quotient divides by 1, not 0 (its adjoint is 0).
    safe = bb.select(same, one, d, t)
    ratio = bb.binary("arith.divf", x, safe, t)
    return bb.select(same, x, bb.binary(
        "arith.mulf", bb.unary("math.log", u, t), ratio, t), t)


def _arith(bb, t):
    """Shorthands for scalar formulas in ``t``: a constant, and a binary
    arith op by name (``op("mulf", a, b)``)."""
    return (lambda v: bb.const(v, t),
            lambda name, a, b: bb.binary(f"arith.{name}", a, b, t))


def _shifted_and_reflected(bb, x, t, asymptotic, shift, reflected):
    """lgamma and digamma's common form: with y = x, or 1 - x below 1/2,
    ``asymptotic(z, 1/z)`` at z >= 8 (z = y + 8 for y < 8, less
    ``shift([y, y + 1, ..., y + 7])``); below 1/2 ``reflected(x, f(1 -
    x))``. Unselected
    branches stay finite (their adjoints are multiplied by 0)."""
    c, _ = _arith(bb, t)

    reflect = bb.op(f"arith.cmpf olt, {x}, {c(0.5)} : {t}")
    y = bb.select(reflect, bb.binary("arith.subf", c(1.0), x, t), x, t)
    small = bb.op(f"arith.cmpf olt, {y}, {c(8.0)} : {t}")
    w = bb.select(small, y, c(1.0), t)
    z = bb.select(small, bb.binary("arith.addf", y, c(8.0), t), y, t)
    inverse = bb.binary("arith.divf", c(1.0), z, t)
    steps = [w] + [bb.binary("arith.addf", w, c(float(i)), t)
                   for i in range(1, 8)]
    main = bb.binary("arith.subf", asymptotic(z, inverse), bb.select(
        small, shift(steps), c(0.0), t), t)
    return bb.select(reflect, reflected(bb.select(reflect, x, c(0.25), t),
                                        main), main, t)


def _series_in_square(bb, coefficients, x, t):
    """x * (c0 + c1 x^2 + c2 x^4 + ...) by Horner's rule in x^2."""
    square = bb.binary("arith.mulf", x, x, t)
    series = bb.const(coefficients[-1], t)
    for k in reversed(coefficients[:-1]):
        series = bb.binary("arith.addf", bb.binary(
            "arith.mulf", series, square, t), bb.const(k, t), t)
    return bb.binary("arith.mulf", series, x, t)


def _lgamma(bb, x, t):
    """log |Gamma(x)|: Stirling's series at z >= 8 (z = y + 8 for y < 8,
    less the log of y (y + 1) ... (y + 7)); below 1/2 by reflection,
    log(pi / |sin(pi x)|) - lgamma(1 - x). Elementary ops, so the
    derivative (digamma) is the expression's."""
    c, op = _arith(bb, t)

    def stirling(z, inverse):
        # 1/(12z) - 1/(360z^3) + 1/(1260z^5) - 1/(1680z^7) + 1/(1188z^9)
        # (the next term is below 2e-13 at z = 8).
        series = _series_in_square(bb, (1.0 / 12, -1.0 / 360, 1.0 / 1260,
                                        -1.0 / 1680, 1.0 / 1188), inverse, t)
        return op("addf", op("subf", op("mulf", op("subf", z, c(0.5)),
                                         bb.unary("math.log", z, t)), z),
                  op("addf", c(0.5 * math.log(2 * math.pi)), series))

    def shift(steps):
        return bb.unary("math.log", functools.reduce(
            lambda a, b: op("mulf", a, b), steps), t)

    def reflected(x, mirrored):
        sine = bb.unary("math.absf", bb.unary(
            "math.sin", op("mulf", c(math.pi), x), t), t)
        return op("subf", bb.unary("math.log", op("divf", c(math.pi), sine),
                                   t), mirrored)

    return _shifted_and_reflected(bb, x, t, stirling, shift, reflected)


def _digamma(bb, x, t):
    """psi(x), the derivative of lgamma: the asymptotic series at z >= 8
    (z = y + 8 for y < 8, less 1/y + 1/(y + 1) + ... + 1/(y + 7)); below
    1/2 by reflection, psi(1 - x) - pi / tan(pi x) (-inf at 0, as
    PyTorch's). Elementary ops, so the derivative (trigamma) is the
    expression's."""
    c, op = _arith(bb, t)

    def asymptotic(z, inverse):
        # log z - 1/(2z) - (1/(12z^2) - 1/(120z^4) + 1/(252z^6) -
        # 1/(240z^8) + 1/(132z^10)) (the next term is below 4e-13 at z = 8).
        series = _series_in_square(bb, (1.0 / 12, -1.0 / 120, 1.0 / 252,
                                        -1.0 / 240, 1.0 / 132), inverse, t)
        return op("subf", op("subf", bb.unary("math.log", z, t), op(
            "mulf", c(0.5), inverse)), op("mulf", series, inverse))

    def shift(steps):
        return functools.reduce(lambda a, b: op("addf", a, b), [
            op("divf", c(1.0), step) for step in steps])

    def reflected(x, mirrored):
        angle = op("mulf", c(math.pi), x)
        cotangent = op("divf", bb.unary("math.cos", angle, t),
                       bb.unary("math.sin", angle, t))
        return op("subf", mirrored, op("mulf", c(math.pi), cotangent))

    return _shifted_and_reflected(bb, x, t, asymptotic, shift, reflected)


def _atan(bb, x, t):
    """arctan from elementary ops: |x| > 1 through pi/2 - atan(1/|x|), then
    above tan(pi/12) through pi/6 + atan((sqrt(3) a - 1) / (sqrt(3) + a)),
    then the odd Taylor series to a^17 (|a| <= 0.27: below 1e-11), the sign
    restored. Each branch reads a safe value where it is not taken."""
    c, op = _arith(bb, t)

    def cmp(pred, a, b):
        return bb.op(f"arith.cmpf {pred}, {a}, {b} : {t}")

    negative = cmp("olt", x, c(0.0))
    a = bb.select(negative, bb.unary("arith.negf", x, t), x, t)
    big = cmp("ogt", a, c(1.0))
    a = bb.select(big, op("divf", c(1.0), bb.select(big, a, c(1.0), t)), a,
                  t)
    root3 = math.sqrt(3.0)
    far = cmp("ogt", a, c(math.tan(math.pi / 12)))
    reduced = op("divf", op("subf", op("mulf", a, c(root3)), c(1.0)),
                 op("addf", a, c(root3)))
    a = bb.select(far, reduced, a, t)
    a2 = op("mulf", a, a)
    series = c(1.0 / 17)
    for k in range(15, 0, -2):
        series = op("addf", op("mulf", series, a2),
                    c((-1.0 if (k // 2) % 2 else 1.0) / k))
    # series = 1 - a^2/3 + a^4/5 ... (the signs alternate from 1/1).
    result = op("mulf", series, a)
    result = bb.select(far, op("addf", result, c(math.pi / 6)), result, t)
    result = bb.select(big, op("subf", c(math.pi / 2), result), result, t)
    return bb.select(negative, bb.unary("arith.negf", result, t), result, t)


def _atan2(bb, y, x, t):
    """The angle of (x, y): where |y| > |x|, +-pi/2 - atan(x / y); else
    atan(y / x), turned by pi into the left half plane; 0 at the origin, as
    PyTorch's. Each quotient is at most 1 in size, and its derivatives hold
    on the axes too (d/dx at x = 0 is -1/y)."""
    zero, one = bb.const(0.0, t), bb.const(1.0, t)

    def cmp(pred, a, b):
        return bb.op(f"arith.cmpf {pred}, {a}, {b} : {t}")

    steep = cmp("ogt", bb.unary("math.absf", y, t), bb.unary("math.absf", x,
                                                             t))
    near_axis = bb.binary("arith.subf", bb.binary(
        "arith.mulf", _sign(bb, y, t), bb.const(math.pi / 2, t), t),
        _atan(bb, bb.binary("arith.divf", x, bb.select(steep, y, one, t), t),
              t), t)
    origin = cmp("oeq", x, zero)
    angle = _atan(bb, bb.binary("arith.divf", y, bb.select(
        bb.op(f"arith.ori {steep}, {origin} : i1"), one, x, t), t), t)
    turn = bb.select(cmp("olt", y, zero), bb.const(-math.pi, t),
                     bb.const(math.pi, t), t)
    angle = bb.select(cmp("olt", x, zero), bb.binary("arith.addf", angle,
                                                     turn, t), angle, t)
    return bb.select(steep, near_axis, bb.select(origin, zero, angle, t), t)


def _cosine_side(bb, x, t):
    """sqrt(1 - x^2), the other side of asin's and acos's triangle."""
    return bb.unary("math.sqrt", bb.binary("arith.subf", bb.const(1.0, t),
                                           bb.binary("arith.mulf", x, x, t),
                                           t), t)


def _sign(bb, x, t):
    """1, -1 or 0 (for 0 and NaN, as PyTorch's); a derivative of 0."""
    zero = bb.const(0.0, t)
    positive = bb.op(f"arith.cmpf ogt, {x}, {zero} : {t}")
    negative = bb.op(f"arith.cmpf olt, {x}, {zero} : {t}")
    return bb.select(positive, bb.const(1.0, t), bb.select(
        negative, bb.const(-1.0, t), zero, t), t)


def _asinh(bb, x, t):
    """asinh of |x| as log1p(y + y^2 / (1 + sqrt(1 + y^2))) (no
    cancellation near 0), its sign restored (y = -x below 0, so the
    derivative at 0 is 1)."""
    negative = bb.op(f"arith.cmpf olt, {x}, {bb.const(0.0, t)} : {t}")
    y = bb.select(negative, bb.unary("arith.negf", x, t), x, t)
    one = bb.const(1.0, t)
    y2 = bb.binary("arith.mulf", y, y, t)
    root = bb.unary("math.sqrt", bb.binary("arith.addf", one, y2, t), t)
    a = _log1p(bb, bb.binary("arith.addf", y, bb.binary(
        "arith.divf", y2, bb.binary("arith.addf", one, root, t), t), t), t)
    return bb.select(negative, bb.unary("arith.negf", a, t), a, t)


def _sinc(bb, x, t):
    """sin(pi x) / (pi x), 1 at 0 (the quotient then reads 1, not 0)."""
    zero = bb.op(f"arith.cmpf oeq, {x}, {bb.const(0.0, t)} : {t}")
    px = bb.binary("arith.mulf", bb.select(zero, bb.const(1.0, t), x, t),
                   bb.const(math.pi, t), t)
    return bb.select(zero, bb.const(1.0, t), bb.binary(
        "arith.divf", bb.unary("math.sin", px, t), px, t), t)


def _scaled(factor):
    return lambda bb, x, t: bb.binary("arith.mulf", x, bb.const(factor, t),
                                      t)


_UNARY = {
    "lgamma": _lgamma,
    "digamma": _digamma,
    "atan": _atan,
    "asin": lambda bb, x, t: _atan2(bb, x, _cosine_side(bb, x, t), t),
    "acos": lambda bb, x, t: _atan2(bb, _cosine_side(bb, x, t), x, t),
    "sign": _sign,
    "sgn": _sign,
    "sinh": lambda bb, x, t: bb.binary("arith.mulf", bb.binary(
        "arith.subf", _expm1_any(bb, x, t), _expm1_any(
            bb, bb.unary("arith.negf", x, t), t), t), bb.const(0.5, t), t),
    "cosh": lambda bb, x, t: bb.binary("arith.mulf", bb.binary(
        "arith.addf", bb.unary("math.exp", x, t), bb.unary(
            "math.exp", bb.unary("arith.negf", x, t), t), t),
        bb.const(0.5, t), t),
    "tan": lambda bb, x, t: bb.binary("arith.divf", bb.unary(
        "math.sin", x, t), bb.unary("math.cos", x, t), t),
    "asinh": _asinh,
    "acosh": lambda bb, x, t: bb.unary("math.log", bb.binary(
        "arith.addf", x, bb.unary("math.sqrt", bb.binary(
            "arith.subf", bb.binary("arith.mulf", x, x, t),
            bb.const(1.0, t), t), t), t), t),
    "atanh": lambda bb, x, t: bb.binary("arith.mulf", _log1p(bb, bb.binary(
        "arith.divf", bb.binary("arith.addf", x, x, t), bb.binary(
            "arith.subf", bb.const(1.0, t), x, t), t), t), bb.const(0.5, t),
        t),
    "sinc": _sinc,
    "deg2rad": _scaled(math.pi / 180.0),
    "rad2deg": _scaled(180.0 / math.pi),
    "log1p": _log1p,
    "expm1": lambda bb, x, t: _expm1_any(bb, x, t),
    "log2": lambda bb, x, t: bb.binary("arith.mulf", bb.unary(
        "math.log", x, t), bb.const(1.0 / math.log(2.0), t), t),
    "log10": lambda bb, x, t: bb.binary("arith.mulf", bb.unary(
        "math.log", x, t), bb.const(1.0 / math.log(10.0), t), t),
    "exp2": lambda bb, x, t: bb.unary("math.exp", bb.binary(
        "arith.mulf", x, bb.const(math.log(2.0), t), t), t),
    "neg": lambda bb, x, t: bb.unary("arith.negf", x, t),
    "exp": lambda bb, x, t: bb.unary("math.exp", x, t),
    "log": lambda bb, x, t: bb.unary("math.log", x, t),
    "tanh": lambda bb, x, t: bb.unary("math.tanh", x, t),
    "sqrt": lambda bb, x, t: bb.unary("math.sqrt", x, t),
    "rsqrt": lambda bb, x, t: bb.unary("math.rsqrt", x, t),
    "erf": lambda bb, x, t: bb.unary("math.erf", x, t),
    "erfc": lambda bb, x, t: bb.unary("math.erfc", x, t),
    "abs": lambda bb, x, t: bb.unary("math.absf", x, t),
    "relu": lambda bb, x, t: bb.binary("arith.maximumf", x,
                                       bb.const(0.0, t), t),
    "sigmoid": _sigmoid,
    "silu": lambda bb, x, t: bb.binary("arith.mulf", x, _sigmoid(bb, x, t),
                                       t),
    "reciprocal": lambda bb, x, t: bb.binary("arith.divf", bb.const(1.0, t),
                                             x, t),
    "square": lambda bb, x, t: bb.binary("arith.mulf", x, x, t),
    "sin": lambda bb, x, t: bb.unary("math.sin", x, t),
    "cos": lambda bb, x, t: bb.unary("math.cos", x, t),
    # Rounding: a derivative of 0, as PyTorch's.
    "floor": lambda bb, x, t: bb.unary("math.floor", x, t),
    "ceil": lambda bb, x, t: bb.unary("math.ceil", x, t),
    "trunc": lambda bb, x, t: bb.unary("math.trunc", x, t),
    "round": lambda bb, x, t: bb.unary("math.roundeven", x, t),
}


def _integer_negation(bb, x, t):
    """-x of an integer (wrapping at the least value, as PyTorch's)."""
    return bb.binary("arith.subi", bb.const(0, t), x, t)


# The unary ops of integers too (-x and |x| wrap at the least value, as
# PyTorch's).
_INTEGER_UNARY = {
    "neg": _integer_negation,
    "abs": lambda bb, x, t: bb.select(
        bb.op(f"arith.cmpi slt, {x}, {bb.const(0, t)} : {t}"),
        _integer_negation(bb, x, t), x, t),
}
for _name, _build in _UNARY.items():
    _handles(f"aten.{_name}.default")(_unary(_build,
                                             _INTEGER_UNARY.get(_name)))
_handles("aten.atan2.default")(_float_binary(_atan2))
_handles("aten.gelu.default")(_unary(_gelu))
_handles("aten.pow.Tensor_Scalar")(_unary(_pow_scalar))
# x ** y and 2 ** x: math.powf, whose gradients are PyTorch's (0 for x
# where y is 0, and for y where x is 0 and y >= 0).
_handles("aten.pow.Tensor_Tensor", "aten.pow.Scalar")(_float_binary(
    lambda bb, x, y, t: bb.binary("math.powf", x, y, t)))


@_handles("aten.addcmul.default", "aten.addcdiv.default")
def _addc(ctx, x, a, b, *, value=1):
    """x + value * a * b (addcmul) or x + value * a / b (addcdiv),
    broadcast."""
    t = ctx.dtype
    if not is_float(t):
        ctx.unsupported("only float operands are supported")
    op = "arith.mulf" if "addcmul" in op_name(ctx.node) else "arith.divf"

    def body(bb, xs):
        x, a, b = (_cast(bb, v, t) for v in xs)
        term = bb.binary(op, a, b, t)
        if value != 1:
            term = bb.binary("arith.mulf", bb.const(float(value), t), term,
                             t)
        return bb.binary("arith.addf", x, term, t)

    return ctx.elementwise([x, a, b], body)


@_handles("aten.dot.default", "aten.vdot.default")
def _dot(ctx, a, b):
    """The sum of the products of two vectors (vdot: of real ones)."""
    a, b = ctx.tensor(a), ctx.tensor(b)
    _require_float(ctx, a, b)
    t = ctx.dtype
    products = ctx.elementwise([a, b], lambda bb, xs: bb.binary(
        "arith.mulf", xs[0][0], xs[1][0], t), shape=a.shape, dtype=t)
    return ctx.reduce(products, [0], 0.0,
                      lambda bb, e, acc: _add_acc(bb, e, acc, t))


@_handles("aten.bilinear.default")
def _bilinear(ctx, x1, x2, weight, bias=None):
    """y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]
    (nn.Bilinear): one gemm of x1 with W's [I, O*J] view, then each
    output's products with x2 summed over j."""
    x1, x2, weight = ctx.tensor(x1), ctx.tensor(x2), ctx.tensor(weight)
    _require_float(ctx, x1, x2, weight)
    t = ctx.dtype
    outs, ins, others = weight.shape
    lead = x1.shape[:-1]
    rows = math.prod(lead)
    flat1 = ctx.b.reshape(x1, (rows, ins))
    flat2 = ctx.b.reshape(x2, (rows, 1, others))
    table = ctx.b.reshape(ctx.b.transpose(weight, [1, 0, 2]),
                          (ins, outs * others))
    mixed = ctx.b.reshape(_matmul(ctx, flat1, table), (rows, outs, others))
    products = ctx.elementwise([mixed, flat2], lambda bb, xs: bb.binary(
        "arith.mulf", xs[0][0], xs[1][0], t), shape=mixed.shape, dtype=t)
    y = ctx.reduce(products, [2], 0.0,
                   lambda bb, e, acc: _add_acc(bb, e, acc, t))
    if bias is not None:
        y = ctx.elementwise([y, bias], lambda bb, xs: bb.binary(
            "arith.addf", xs[0][0], _cast(bb, xs[1], t), t), shape=y.shape,
            dtype=t)
    return ctx.b.reshape(y, (*lead, outs))


@_handles("aten.addr.default")
def _addr(ctx, x, u, v, *, beta=1, alpha=1):
    """beta * x + alpha * the outer product of vectors u and v (x not read
    where beta is 0, as in PyTorch)."""
    u, v = ctx.tensor(u), ctx.tensor(v)
    t = ctx.dtype
    if not is_float(t):
        ctx.unsupported("only float operands are supported")
    column = ctx.b.reshape(u, (u.shape[0], 1))
    operands = [column, v] + ([x] if beta != 0 else [])

    def body(bb, xs):
        outer = bb.binary("arith.mulf", _cast(bb, xs[0], t),
                          _cast(bb, xs[1], t), t)
        if alpha != 1:
            outer = bb.binary("arith.mulf", bb.const(float(alpha), t), outer,
                              t)
        if beta == 0:
            return outer
        scaled = _cast(bb, xs[2], t)
        if beta != 1:
            scaled = bb.binary("arith.mulf", bb.const(float(beta), t), scaled,
                               t)
        return bb.binary("arith.addf", scaled, outer, t)

    return ctx.elementwise(operands, body)


# -- piecewise activations ------------------------------------------------
# Each as the expression PyTorch's kernel evaluates; the derivative is the
# expression's (PyTorch's backward formulas agree away from the kinks, and
# at a kink both take the side the comparison `x > 0` picks).


def _if_positive(bb, x, t, positive, negative):
    """``positive`` where x > 0, else ``negative``."""
    cond = bb.op(f"arith.cmpf ogt, {x}, {bb.const(0.0, t)} : {t}")
    return bb.select(cond, positive, negative, t)


def _expm1(bb, x, t):
    """exp(x) - 1 without the cancellation near 0 (torch's expm1): with
    h = tanh(x / 2), 2h / (1 - h)."""
    h = bb.unary("math.tanh", bb.binary("arith.mulf", x, bb.const(0.5, t),
                                        t), t)
    return bb.binary("arith.divf", bb.binary("arith.addf", h, h, t),
                     bb.binary("arith.subf", bb.const(1.0, t), h, t), t)


def _expm1_any(bb, x, t):
    """expm1 of any x: the tanh form (its tanh rounds to 1 for large x)
    where |x| < 1/2, exp(x) - 1 elsewhere (no cancellation there); the
    tanh form reads 0 where it is not selected, so its adjoint stays
    finite."""
    near = bb.op(f"arith.cmpf olt, {bb.unary('math.absf', x, t)}, "
                 f"{bb.const(0.5, t)} : {t}")
    small = _expm1(bb, bb.select(near, x, bb.const(0.0, t), t), t)
    large = bb.binary("arith.subf", bb.unary("math.exp", x, t),
                      bb.const(1.0, t), t)
    return bb.select(near, small, large, t)


def _softplus_tail(bb, z, t):
    """log1p(exp(-|z|)), what softplus adds to max(z, 0) (and log_sigmoid
    subtracts from min(z, 0)), with the test z >= 0 whose side it takes at
    0: exp's argument is never positive (no overflow), and log1p keeps
    exp(-|z|)'s digits where it is small (softplus(-20) = 2e-9, not the 0
    of log(1 + e)). The caller's max or min takes the same side, so that
    the derivatives at 0 add up to 1/2."""
    positive = bb.op(f"arith.cmpf oge, {z}, {bb.const(0.0, t)} : {t}")
    return positive, _log1p(bb, bb.unary(
        "math.exp", _minus_abs(bb, z, positive, t), t), t)


def _relu6_of_x_plus_3(bb, x, t):
    """min(max(x + 3, 0), 6), the ramp of hardsigmoid and hardswish."""
    y = bb.binary("arith.addf", x, bb.const(3.0, t), t)
    y = bb.binary("arith.maximumf", y, bb.const(0.0, t), t)
    return bb.binary("arith.minimumf", y, bb.const(6.0, t), t)


def _hardsigmoid(bb, x, t):
    """relu6(x + 3) / 6."""
    return bb.binary("arith.divf", _relu6_of_x_plus_3(bb, x, t),
                     bb.const(6.0, t), t)


def _hardswish(bb, x, t):
    """x * relu6(x + 3) / 6, multiplied before the division as PyTorch's
    kernel does."""
    return bb.binary("arith.divf", bb.binary(
        "arith.mulf", x, _relu6_of_x_plus_3(bb, x, t), t), bb.const(6.0, t), t)


def _leaky_relu(bb, x, t, negative_slope=0.01):
    return _if_positive(bb, x, t, x, bb.binary(
        "arith.mulf", x, bb.const(negative_slope, t), t))


def _elu(bb, x, t, alpha=1.0, scale=1.0, input_scale=1.0):
    """scale * x for x > 0, else scale * alpha * expm1(x * input_scale)."""
    scaled = bb.binary("arith.mulf", x, bb.const(input_scale, t), t)
    negative = bb.binary("arith.mulf", _expm1(bb, scaled, t),
                         bb.const(scale * alpha, t), t)
    positive = bb.binary("arith.mulf", x, bb.const(scale, t), t)
    return _if_positive(bb, x, t, positive, negative)


# torch.nn.SELU's constants.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _softplus(bb, x, t, beta=1.0, threshold=20.0):
    """x where beta * x > threshold, else log(1 + exp(beta * x)) / beta,
    as max(z, 0) + log(1 + exp(-|z|)) for z = beta * x."""
    z = bb.binary("arith.mulf", x, bb.const(beta, t), t)
    positive, tail = _softplus_tail(bb, z, t)
    smooth = bb.binary("arith.addf", bb.select(positive, z, bb.const(
        0.0, t), t), tail, t)
    smooth = bb.binary("arith.divf", smooth, bb.const(beta, t), t)
    linear = bb.op(f"arith.cmpf ogt, {z}, {bb.const(threshold, t)} : {t}")
    return bb.select(linear, x, smooth, t)


def _log_sigmoid(bb, x, t):
    """min(x, 0) - log1p(exp(-|x|))."""
    positive, tail = _softplus_tail(bb, x, t)
    return bb.binary("arith.subf", bb.select(positive, bb.const(0.0, t), x,
                                             t), tail, t)


_ACTIVATIONS = {
    "hardsigmoid": _hardsigmoid,
    "hardswish": _hardswish,
    "leaky_relu": _leaky_relu,
    "elu": _elu,
    "selu": lambda bb, x, t: _elu(bb, x, t, _SELU_ALPHA, _SELU_SCALE),
    "celu": lambda bb, x, t, alpha=1.0: _elu(bb, x, t, alpha, 1.0,
                                             1.0 / alpha),
    "softplus": _softplus,
    "mish": lambda bb, x, t: bb.binary("arith.mulf", x, bb.unary(
        "math.tanh", _softplus(bb, x, t), t), t),
    "log_sigmoid": _log_sigmoid,
}
def _shrink(bb, x, t, lambd=0.5, soft=False):
    """Hard shrink (x where |x| > lambd, else 0) or soft (x - lambd or x +
    lambd beyond the band, 0 inside)."""
    zero, band = bb.const(0.0, t), bb.const(lambd, t)
    above = bb.op(f"arith.cmpf ogt, {x}, {band} : {t}")
    below = bb.op(f"arith.cmpf olt, {x}, {bb.unary('arith.negf', band, t)}"
                  f" : {t}")
    high = bb.binary("arith.subf", x, band, t) if soft else x
    low = bb.binary("arith.addf", x, band, t) if soft else x
    return bb.select(above, high, bb.select(below, low, zero, t), t)


def _threshold_fill(bb, x, t, threshold, value):
    """x above ``threshold``, else ``value`` (F.threshold)."""
    above = bb.op(f"arith.cmpf ogt, {x}, {bb.const(threshold, t)} : {t}")
    return bb.select(above, x, bb.const(value, t), t)


def _logit(bb, x, t, eps=None):
    """log(x / (1 - x)), x clamped into [eps, 1 - eps] first when given."""
    if eps is not None:
        x = bb.binary("arith.minimumf", bb.binary(
            "arith.maximumf", x, bb.const(eps, t), t),
            bb.const(1.0 - eps, t), t)
    return bb.unary("math.log", bb.binary("arith.divf", x, bb.binary(
        "arith.subf", bb.const(1.0, t), x, t), t), t)


def _entr(bb, x, t):
    """-x log x: 0 at 0, -inf below (the log reads 1 at 0)."""
    zero = bb.const(0.0, t)
    at_zero = bb.op(f"arith.cmpf oeq, {x}, {zero} : {t}")
    negative = bb.op(f"arith.cmpf olt, {x}, {zero} : {t}")
    safe = bb.select(at_zero, bb.const(1.0, t), x, t)
    value = bb.unary("arith.negf", bb.binary(
        "arith.mulf", x, bb.unary("math.log", safe, t), t), t)
    return bb.select(negative, bb.const(float("-inf"), t),
                     bb.select(at_zero, zero, value, t), t)


def _nan_to_num(bb, x, t, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced (by default with 0 and the type's
    largest and lowest finite values)."""
    largest = float(torch.finfo({"f16": torch.float16, "bf16": torch.bfloat16,
                                 "f32": torch.float32}.get(
        t, torch.float64)).max)
    inf = bb.const(float("inf"), t)
    result = bb.select(bb.op(f"arith.cmpf uno, {x}, {x} : {t}"),
                       bb.const(nan, t), x, t)
    result = bb.select(bb.op(f"arith.cmpf oeq, {x}, {inf} : {t}"),
                       bb.const(largest if posinf is None else posinf, t),
                       result, t)
    return bb.select(
        bb.op(f"arith.cmpf oeq, {x}, {bb.unary('arith.negf', inf, t)} : "
              f"{t}"), bb.const(-largest if neginf is None else neginf, t),
        result, t)


_ACTIVATIONS.update({
    "hardshrink": _shrink,
    "softshrink": lambda bb, x, t, lambd=0.5: _shrink(bb, x, t, lambd, True),
    "threshold": _threshold_fill,
    "logit": _logit,
    "special_entr": _entr,
    "nan_to_num": _nan_to_num,
    "frac": lambda bb, x, t: bb.binary("arith.subf", x, bb.unary(
        "math.trunc", x, t), t),
})
for _name, _build in _ACTIVATIONS.items():
    _handles(f"aten.{_name}.default")(_unary(_build))


@_handles("aten.rrelu.default")
def _rrelu(ctx, x, lower=1.0 / 8, upper=1.0 / 3, training=False,
           generator=None):
    """Randomized leaky ReLU in eval mode: the slope (lower + upper) / 2;
    training mode draws a slope per element (refused)."""
    if training:
        ctx.unsupported(_RANDOM_DETAIL)
    return _unary(lambda bb, v, t: _leaky_relu(bb, v, t, (lower + upper)
                                               / 2))(ctx, x)


@_handles("aten.log_sigmoid_forward.default")
def _log_sigmoid_forward(ctx, x):
    """log_sigmoid's forward (value, buffer): the buffer is not read."""
    x = ctx.tensor(x)
    _require_float(ctx, x)
    value = ctx.elementwise([x], lambda bb, xs: _ACTIVATIONS["log_sigmoid"](
        bb, xs[0][0], x.dtype), shape=x.shape, dtype=x.dtype)
    return value, ctx.b.filled((0,), x.dtype, 0.0)


@_handles("aten.xlogy.Tensor", "aten.xlogy.Scalar_Other",
          "aten.xlogy.Scalar_Self", "aten.special_xlog1py.default",
          "aten.special_xlog1py.self_scalar",
          "aten.special_xlog1py.other_scalar")
def _xlogy(ctx, a, b):
    """a log b (xlog1py: a log1p b), 0 where a is 0 (and b not NaN)."""
    t = ctx.dtype
    one_plus = op_name(ctx.node).startswith("aten.special_xlog1py.")

    def fn(bb, xs):
        x, y = _cast(bb, xs[0], t), _cast(bb, xs[1], t)
        zero = bb.const(0.0, t)
        at_zero = bb.binary("arith.andi", bb.op(
            f"arith.cmpf oeq, {x}, {zero} : {t}"), bb.op(
            f"arith.cmpf ord, {y}, {y} : {t}"), "i1")
        safe = bb.select(at_zero, bb.const(0.0 if one_plus else 1.0, t), y,
                         t)
        log = _log1p(bb, safe, t) if one_plus else bb.unary("math.log", safe,
                                                             t)
        return bb.select(at_zero, zero, bb.binary("arith.mulf", x, log, t), t)

    return ctx.elementwise([a, b], fn)


@_handles("aten.prelu.default")
def _prelu(ctx, x, weight):
    """x for x > 0, else weight * x, the weight one per channel (dim 1) or
    one for all."""
    x, weight = ctx.tensor(x), ctx.tensor(weight)
    _require_float(ctx, x, weight)
    if weight.size != 1:
        if x.rank < 2 or weight.shape != (x.shape[1],):
            ctx.unsupported(f"a weight of shape {list(weight.shape)} for an "
                            f"input of shape {list(x.shape)}")
        weight = ctx.b.reshape(weight, (x.shape[1],) + (1,) * (x.rank - 2))

    def fn(bb, xs):
        t = ctx.dtype
        v, w = _cast(bb, xs[0], t), _cast(bb, xs[1], t)
        return _if_positive(bb, v, t, v, bb.binary("arith.mulf", w, v, t))

    return ctx.elementwise([x, weight], fn)

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


def _logical(kind):
    """and/or/xor of booleans (logical_* of any operands: not zero), and
    the bitwise forms of booleans and integers."""
    ops = {"and": "arith.andi", "or": "arith.ori", "xor": "arith.xori"}

    def handler(ctx, a, b):
        logical = op_name(ctx.node).startswith("aten.logical_")
        t = "i1" if logical else ctx.dtype
        if is_float(t):
            ctx.unsupported("bitwise operations of floats")
        return ctx.elementwise([a, b], lambda bb, xs: bb.binary(
            ops[kind], _cast(bb, xs[0], t), _cast(bb, xs[1], t), t),
            scalar_dtype=t)
    return handler


for _kind in ("and", "or", "xor"):
    _handles(f"aten.logical_{_kind}.default", f"aten.bitwise_{_kind}.Tensor",
             f"aten.bitwise_{_kind}.Scalar", f"aten.__{_kind}__.Tensor",
             f"aten.__{_kind}__.Scalar")(_logical(_kind))


@_handles("aten.isnan.default", "aten.isinf.default",
          "aten.isfinite.default", "aten.isposinf.default",
          "aten.isneginf.default")
def _float_class(ctx, x):
    """Whether each element is NaN, infinite (of either sign) or finite;
    integers are never NaN or infinite."""
    x = ctx.tensor(x)
    kind = op_name(ctx.node).split(".")[1]
    t = x.dtype

    def fn(bb, xs):
        v = xs[0][0]
        if not is_float(t):
            return bb.const(kind == "isfinite", "i1")
        inf = bb.const(float("inf"), t)
        if kind == "isnan":
            return bb.op(f"arith.cmpf uno, {v}, {v} : {t}")
        if kind == "isfinite":
            return _is_finite(bb, v, t)
        if kind == "isposinf":
            return bb.op(f"arith.cmpf oeq, {v}, {inf} : {t}")
        if kind == "isneginf":
            minus = bb.unary("arith.negf", inf, t)
            return bb.op(f"arith.cmpf oeq, {v}, {minus} : {t}")
        return bb.op(f"arith.cmpf oeq, {bb.unary('math.absf', v, t)}, "
                     f"{inf} : {t}")

    return ctx.elementwise([x], fn)


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


@_handles("aten.copy.default")
def _copy(ctx, x, src, non_blocking=False):
    """``x.copy_(src)``'s value: src broadcast to x's shape, in x's type
    (floats into integers truncated toward zero, as PyTorch's copy)."""
    return ctx.elementwise([src], lambda bb, xs: _cast(bb, xs[0],
                                                       ctx.dtype))


@_handles("aten.fill.Scalar", "aten.fill.Tensor")
def _fill(ctx, x, value):
    """``x.fill_(value)``'s value: x's shape, every element ``value``."""
    return ctx.elementwise([value], lambda bb, xs: _cast(bb, xs[0],
                                                         ctx.dtype))


@_handles("aten.zero.default", "aten.zeros_like.default",
          "aten.ones_like.default", "aten.full_like.default",
          "aten.empty_like.default",
          "aten.new_zeros.default", "aten.new_ones.default",
          "aten.new_full.default", "aten.new_empty.default")
def _like(ctx, x, *args, **kwargs):
    """A constant of the node's shape and dtype (x's, or new_*'s size):
    zeros (empty and x.zero_()'s value too), ones, or full_like(x, fill) /
    new_full(x, size, fill)."""
    name = op_name(ctx.node)
    fill = 0
    if "ones" in name:
        fill = 1
    elif "full" in name:
        fill = args[1] if name.startswith("aten.new_") else args[0]
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


def _require_float_or_integer(ctx, x):
    """Floats or integers (XLM's longest sequence, ``lengths.max()``); not
    booleans, whose order is not the signed one of i1."""
    if x.dtype == "i1":
        ctx.unsupported("booleans are not supported (use any/all)")


@_handles("aten.matmul.default", "aten.mm.default", "aten.bmm.default")
def _matmul_op(ctx, a, b):
    _require_float(ctx, a, b)
    return _matmul(ctx, a, b)


def _einsum_terms(ctx, equation, operands):
    """Each operand's labels and the output's for ``equation``; the dims
    an ellipsis stands for are labelled by their position from the right
    ("...1" the last), so that they broadcast as in PyTorch."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        ctx.unsupported(f"einsum equation '{equation}' names {len(terms)} "
                        f"operands, {len(operands)} given")

    def labels(term, rank):
        before, dots, after = term.partition("...")
        count = rank - len(before) - len(after) if dots else 0
        if count < 0 or (not dots and len(term) != rank):
            ctx.unsupported(f"einsum term '{term}' does not match an "
                            f"operand of rank {rank}")
        return [*before, *(f"...{count - i}" for i in range(count)),
                *after]

    inputs = [labels(t, x.rank) for t, x in zip(terms, operands)]
    dots = max((sum(label.startswith("...") for label in ls)
                for ls in inputs), default=0)
    if arrow:
        output = labels(rhs, len(rhs.replace("...", "")) + (
            dots if "..." in rhs else 0))
    else:
        counts = Counter(label for ls in inputs for label in ls
                         if not label.startswith("..."))
        output = [f"...{dots - i}" for i in range(dots)] + sorted(
            label for label, n in counts.items() if n == 1)
    unknown = set(output).difference(*inputs)
    if unknown:
        ctx.unsupported(f"einsum output labels {sorted(unknown)} are in no "
                        "operand")
    for ls in inputs + [output]:
        if len(set(ls)) != len(ls):
            ctx.unsupported(f"einsum equation '{equation}' repeats a label "
                            "within a term (a diagonal)")
    return inputs, output


def _sum_labels(ctx, x, labels, keep):
    """``x`` summed over its labels not in ``keep``."""
    gone = [i for i, label in enumerate(labels) if label not in keep]
    if not gone:
        return x, labels
    x = ctx.reduce(x, gone, 0.0,
                   lambda bb, e, acc: _add_acc(bb, e, acc, x.dtype),
                   hint=ctx.hint)
    return x, [label for label in labels if label in keep]


def _contract(ctx, a, la, b, lb, keep):
    """Operands ``a`` and ``b`` with labels ``la`` and ``lb`` contracted
    over the labels they share that ``keep`` does not hold: one (batch)
    matmul of a as [batch, rows, shared] by b as [batch, shared, cols].
    Returns the product and its labels (batch, rows, cols)."""
    a, la = _sum_labels(ctx, a, la, set(keep) | set(lb))
    b, lb = _sum_labels(ctx, b, lb, set(keep) | set(la))
    size = dict(zip(la, a.shape))
    for label, n in zip(lb, b.shape):
        size[label] = max(size.get(label, 1), n)
    a = ctx.expand(a, [size[label] for label in la])
    b = ctx.expand(b, [size[label] for label in lb])
    batch = [label for label in la if label in lb and label in keep]
    shared = [label for label in la if label in lb and label not in keep]
    rows = [label for label in la if label not in lb]
    cols = [label for label in lb if label not in la]

    count = math.prod(size[label] for label in batch)
    m = math.prod(size[label] for label in rows)
    k = math.prod(size[label] for label in shared)
    n = math.prod(size[label] for label in cols)
    a = ctx.b.transpose(a, [la.index(label) for label in batch + rows + shared],
                        hint=ctx.hint)
    b = ctx.b.transpose(b, [lb.index(label) for label in batch + shared + cols],
                        hint=ctx.hint)
    if batch:
        product = _matmul(ctx, ctx.b.reshape(a, (count, m, k)),
                          ctx.b.reshape(b, (count, k, n)))
    else:
        product = _matmul(ctx, ctx.b.reshape(a, (m, k)),
                          ctx.b.reshape(b, (k, n)))
    labels = batch + rows + cols
    return ctx.b.reshape(product, [size[label] for label in labels]), labels


@_handles("aten.einsum.default")
def _einsum(ctx, equation, operands, path=None):
    """torch.einsum as pairwise contractions from the left, each a (batch)
    matmul; a label no later operand or the output needs is summed out as
    early as possible."""
    _require_float(ctx, *operands)
    operands = [ctx.tensor(x) for x in operands]
    inputs, output = _einsum_terms(ctx, equation, operands)
    x, labels = operands[0], inputs[0]
    for i in range(1, len(operands)):
        keep = set(output).union(*inputs[i + 1:])
        x, labels = _contract(ctx, x, labels, operands[i], inputs[i], keep)
    x, labels = _sum_labels(ctx, x, labels, set(output))
    x = ctx.b.transpose(x, [labels.index(label) for label in output],
                        hint=ctx.hint)
    return ctx.expand(x, ctx.shape)


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


@_handles("aten.addmm.default", "aten.baddbmm.default")
def _addmm(ctx, bias, a, b, beta=1, alpha=1):
    """beta * bias + alpha * (a @ b), a batch of products for baddbmm; with
    beta = 0 the bias is not read (as in PyTorch: NaN there stays out)."""
    _require_float(ctx, a, b)
    product = _matmul(ctx, a, b)

    def fn(bb, xs):
        t = ctx.dtype
        p = xs[0][0]
        if alpha != 1:
            p = bb.binary("arith.mulf", p, bb.const(alpha, t), t)
        if beta == 0:
            return p
        c = _cast(bb, xs[1], t)
        if beta != 1:
            c = bb.binary("arith.mulf", c, bb.const(beta, t), t)
        return bb.binary("arith.addf", p, c, t)

    return ctx.elementwise([product] + ([bias] if beta != 0 else []), fn)


# -- reductions ---------------------------------------------------------


def _add_acc(bb, x, acc, t):
    return bb.binary("arith.addf" if is_float(t) else "arith.addi", x, acc,
                     t)


def _reduction(ctx, x, dim, keepdim, mean):
    """A sum (or mean) in the result's type: an integer or boolean input
    sums as PyTorch's does, in int64 unless ``dtype`` says otherwise."""
    x = ctx.tensor(x)
    t = ctx.dtype
    if t == "i1":
        ctx.unsupported("boolean results are not supported")
    if is_float(x.dtype) != is_float(t):
        ctx.unsupported(f"a sum of {x.dtype} into {t} is not supported")
    dims = _reduction_dims(dim, x.rank)
    count = math.prod(x.shape[d] for d in dims)
    result = ctx.reduce(
        x, dims, 0.0 if is_float(t) else 0,
        lambda bb, e, acc: _add_acc(bb, e, acc, t),
        scale=1.0 / count if mean else None, hint=ctx.hint, dtype=t)
    return ctx.b.reshape(result, ctx.shape)


@_handles("aten.prod.dim_int", "aten.prod.default")
def _prod(ctx, x, dim=None, keepdim=False, dtype=None):
    """The product over ``dim`` (all elements without); see _product."""
    x = ctx.tensor(x)
    dims = _reduction_dims(dim, x.rank)

    def over(op, term):
        return ctx.reduce(x, dims, 1.0 if op == "mulf" else 0.0,
                          lambda bb, e, acc: bb.binary(
                              f"arith.{op}", acc, term(bb, e), x.dtype))

    return ctx.b.reshape(_product(ctx, x, over), ctx.shape)


@_handles("aten.cummax.default", "aten.cummin.default")
def _cummax(ctx, x, dim):
    """(values, indices) of the running maximum (minimum) along ``dim``:
    the index the last position up to i holding the extremum so far (as
    PyTorch's, on ties too), the value a lookup there, so the gradient
    goes to that element."""
    x = ctx.tensor(x)
    _require_float_or_integer(ctx, x)
    if x.rank == 0:
        return x, ctx.b.filled((), "i64", 0)
    largest = op_name(ctx.node).startswith("aten.cummax")
    dim = _norm_dim(dim, x.rank)
    rank, t = x.rank, x.dtype
    loops = [rank if d == dim else d for d in range(rank)]
    op, lowest = _extremum_combiner(t, largest)

    def running(bb, names, acc):
        keep = _up_to(bb, rank, dim)
        return bb.binary(op, acc, bb.select(keep, names[0], bb.const(
            lowest, t), t), t)

    extremum = ctx.b.generic(x.shape, t, [(x, loops)], running,
                             reductions=1,
                             init=ctx.b.filled(x.shape, t, lowest),
                             hint="running")
    equal = "arith.cmpf oeq" if is_float(t) else "arith.cmpi eq"

    def last(bb, names, acc):
        keep = _up_to(bb, rank, dim)
        hit = bb.binary("arith.andi", keep, bb.op(
            f"{equal}, {names[0]}, {names[1]} : {t}"), "i1")
        return bb.select(hit, _as_i64(bb, bb.index(rank)), acc, "i64")

    frozen = _no_grad(ctx, extremum)
    where = ctx.b.generic(x.shape, "i64", [(x, loops), (frozen, list(
        range(rank)))], last, reductions=1,
        init=ctx.b.filled(x.shape, "i64", 0), hint="where")
    return _gather_along(ctx, x, dim, where), where


@_handles("aten.cumprod.default")
def _cumprod(ctx, x, dim, dtype=None):
    """The products of x[..., :i + 1, ...] along ``dim``; see _product."""
    x = ctx.tensor(x)
    if x.rank == 0:
        return x
    dim = _norm_dim(dim, x.rank)
    rank = x.rank
    loops = [rank if d == dim else d for d in range(rank)]

    def over(op, term):
        neutral = 1.0 if op == "mulf" else 0.0

        def body(bb, names, acc):
            keep = _up_to(bb, rank, dim)
            return bb.binary(f"arith.{op}", acc, bb.select(
                keep, term(bb, names[0]), bb.const(neutral, x.dtype),
                x.dtype), x.dtype)
        return ctx.b.generic(x.shape, x.dtype, [(x, loops)], body,
                             reductions=1, init=ctx.b.filled(
                                 x.shape, x.dtype, neutral), hint="prefix")

    return _product(ctx, x, over)


def _product(ctx, x, over):
    """A product of x's elements, ``over(op, term)`` combining the term of
    each with ``op`` (addf, mulf) over all of a dim or a prefix: its value
    a product reduction (exact, not differentiated), its gradient that of
    sgn * exp(sum log |x|) over the non-zero elements, which is P / x_i
    with no zero, the others' product at the one zero, and 0 with more;
    the two joined as value + (carrier - carrier without gradient)."""
    t = ctx.dtype
    if not is_float(t) or x.dtype != t:
        ctx.unsupported("only float products in the input's type are "
                        "supported")

    def is_zero(bb, e):
        return bb.op(f"arith.cmpf oeq, {e}, {bb.const(0.0, t)} : {t}")

    def add_where(predicate, value=None):
        def term(bb, e):
            hit = bb.op(f"arith.cmpf {predicate}, {e}, "
                        f"{bb.const(0.0, t)} : {t}")
            return bb.select(hit, e if value is None else bb.const(value, t),
                             bb.const(0.0, t), t)
        return over("addf", term)

    direct = over("mulf", lambda bb, e: e)
    zeros, negatives = add_where("oeq", 1.0), add_where("olt", 1.0)
    logs = over("addf", lambda bb, e: bb.unary("math.log", bb.select(
        is_zero(bb, e), bb.const(1.0, t), bb.unary("math.absf", e, t), t),
        t))
    # The zero element itself (0 in value), carrying the gradient of the
    # one zero.
    zero_part = add_where("oeq")

    def join(bb, xs):
        p, z, n, s, at_zero = (v for v, _ in xs)
        half = bb.binary("arith.mulf", n, bb.const(0.5, t), t)
        odd = bb.op(f"arith.cmpf one, {bb.unary('math.floor', half, t)}, "
                    f"{half} : {t}")
        sign = bb.select(odd, bb.const(-1.0, t), bb.const(1.0, t), t)
        carrier = bb.binary("arith.mulf", sign, bb.unary("math.exp", s, t),
                            t)
        none = bb.op(f"arith.cmpf oeq, {z}, {bb.const(0.0, t)} : {t}")
        single = bb.op(f"arith.cmpf oeq, {z}, {bb.const(1.0, t)} : {t}")
        carrier = bb.select(none, carrier, bb.select(
            single, bb.binary("arith.mulf", at_zero, carrier, t),
            bb.const(0.0, t), t), t)
        frozen = _stop_gradient(bb, carrier, t)
        return bb.binary("arith.addf", _stop_gradient(bb, p, t), bb.binary(
            "arith.subf", carrier, frozen, t), t)

    return ctx.elementwise([direct, zeros, negatives, logs, zero_part],
                           join, shape=direct.shape, dtype=t)


@_handles("aten.sum.dim_IntList")
def _sum_dims(ctx, x, dim=None, keepdim=False, dtype=None):
    return _reduction(ctx, x, dim, keepdim, mean=False)


@_handles("aten.sum.default")
def _sum(ctx, x, dtype=None):
    return _reduction(ctx, x, None, False, mean=False)


def _all_or_any(ctx, x, dim, every):
    """Whether every (or any) element over ``dim`` (None or []: all of
    them) is not zero, a boolean tensor."""
    x = ctx.tensor(x)
    dims = _reduction_dims(dim, x.rank)
    op = "arith.andi" if every else "arith.ori"
    result = ctx.reduce(x, dims, every,
                        lambda bb, e, acc: bb.binary(op, e, acc, "i1"),
                        hint=ctx.hint, dtype="i1")
    return ctx.b.reshape(result, ctx.shape)


@_handles("aten.all.default", "aten.all.dim", "aten.all.dims",
          "aten._is_all_true.default")
def _all(ctx, x, dim=None, keepdim=False):
    return _all_or_any(ctx, x, dim, every=True)


@_handles("aten.any.default", "aten.any.dim", "aten.any.dims",
          "aten._is_any_true.default")
def _any(ctx, x, dim=None, keepdim=False):
    return _all_or_any(ctx, x, dim, every=False)


@_handles("aten.mean.dim")
def _mean_dims(ctx, x, dim=None, keepdim=False, dtype=None):
    return _reduction(ctx, x, dim, keepdim, mean=True)


@_handles("aten.mean.default")
def _mean(ctx, x, dtype=None):
    return _reduction(ctx, x, None, False, mean=True)


def _is_finite(bb, v, t):
    """Whether float scalar ``v`` is neither infinite nor NaN."""
    return bb.op(f"arith.cmpf olt, {bb.unary('math.absf', v, t)}, "
                 f"{bb.const(float('inf'), t)} : {t}")


def _first_hit(bb, acc, e, extremum, t, position, miss, inside=None):
    """One step of finding the first position whose element ``e`` equals
    ``extremum`` (or is NaN, which an extremum propagates): the smaller of
    ``acc`` and ``position`` (an index) where it does (and ``inside``
    holds), else of ``acc`` and ``miss``; an i64."""
    if is_float(t):
        hit = bb.binary("arith.ori",
                        bb.op(f"arith.cmpf oeq, {e}, {extremum} : {t}"),
                        bb.op(f"arith.cmpf uno, {e}, {e} : {t}"), "i1")
    else:
        hit = bb.op(f"arith.cmpi eq, {e}, {extremum} : {t}")
    if inside is not None:
        hit = bb.binary("arith.andi", hit, inside, "i1")
    k = _as_i64(bb, position)
    return bb.binary("arith.minsi", acc, bb.select(
        hit, k, bb.const(miss, "i64"), "i64"), "i64")


def _reduced_loops(x, dims):
    """(kept dims, the loop of each of x's dims) for a reduction of x over
    ``dims``: the kept dims' loops first, in order, then the reduced."""
    dims = sorted(d % x.rank for d in dims) if x.rank else []
    kept = [d for d in range(x.rank) if d not in dims]
    return dims, kept, [kept.index(d) if d in kept else len(kept) +
                        dims.index(d) for d in range(x.rank)]


def _extremum_combiner(t, largest):
    """(op, start) of a maximum (minimum) of element type ``t``: NaN
    propagates; the start is the type's lowest (highest) value."""
    if is_float(t):
        return (("arith.maximumf", _NEG_INF) if largest else
                ("arith.minimumf", float("inf")))
    bits = int(t[1:])
    return (("arith.maxsi", -(1 << (bits - 1))) if largest else
            ("arith.minsi", (1 << (bits - 1)) - 1))


def _extremum(ctx, x, dims, largest):
    """The maximum (or minimum) of x over ``dims``; NaN propagates."""
    op, init = _extremum_combiner(x.dtype, largest)
    return ctx.reduce(x, dims, init,
                      lambda bb, e, acc: bb.binary(op, e, acc, x.dtype))


def _first_extremal(ctx, x, dim, largest):
    """The first position along ``dim`` holding x's extremum there (or
    NaN), an i64 tensor shaped as x without ``dim``."""
    m = _extremum(ctx, x, [dim], largest)
    dims, kept, loops = _reduced_loops(x, [dim])
    size = x.shape[dims[0]]

    def first(bb, names, acc):
        return _first_hit(bb, acc, names[0], names[1], x.dtype,
                          bb.index(len(kept)), size - 1)

    where = ctx.b.generic(m.shape, "i64", [(x, loops), (m, list(range(
        len(kept))))], first, reductions=1,
        init=ctx.b.filled(m.shape, "i64", size - 1), hint="argext")
    return where


@_handles("aten.histc.default")
def _histc(ctx, x, bins=100, min=0, max=0):
    """torch.histc: counts of x's elements in ``bins`` equal bins over
    [min, max] (the last bin holding max too; elements outside, NaN
    included, not counted), in x's type; each element's bin as PyTorch's
    CPU kernel computes it, (x - min) * bins / (max - min) truncated. A
    mixture of experts' load-balancing loss counts the experts' tokens so.
    No gradient (PyTorch defines none)."""
    x = ctx.tensor(x)
    lo, hi = float(min), float(max)
    if not lo < hi:
        ctx.unsupported(f"histc's range [{lo}, {hi}] is empty: a range "
                        "taken from the data (min == max) is not supported")
    if not is_float(x.dtype):
        ctx.unsupported("histc of integers (PyTorch's CPU kernel takes "
                        "floats)")
    t = x.dtype
    flat = ctx.b.reshape(x, (x.size,))

    def body(bb, names, acc):
        v = names[0]
        low, high = bb.const(lo, t), bb.const(hi, t)
        inside = _all_of(bb, [bb.op(f"arith.cmpf oge, {v}, {low} : {t}"),
                              bb.op(f"arith.cmpf ole, {v}, {high} : {t}")])
        scaled = bb.binary("arith.divf", bb.binary(
            "arith.mulf", bb.binary("arith.subf", v, low, t),
            bb.const(float(bins), t), t),
            bb.binary("arith.subf", high, low, t), t)
        # Outside the range the position is not used (and may not fit).
        safe = bb.select(inside, scaled, bb.const(0.0, t), t)
        pos = bb.op(f"arith.fptosi {safe} : {t} to i64", "i")
        pos = bb.binary("arith.minsi", pos, bb.const(bins - 1, "i64"), "i64")
        this_bin = _as_i64(bb, bb.index(0))
        hit = _all_of(bb, [bb.op(f"arith.cmpi eq, {pos}, {this_bin} : i64"),
                           inside])
        return bb.binary("arith.addf", acc, bb.select(
            hit, bb.const(1.0, t), bb.const(0.0, t), t), t)

    counts = ctx.b.generic((bins,), t, [(flat, [1])], body, reductions=1,
                           init=ctx.b.filled((bins,), t, 0.0), hint="histc")
    return counts


@_handles("aten.argmax.default", "aten.argmin.default")
def _argmax(ctx, x, dim=None, keepdim=False):
    x = ctx.tensor(x)
    if dim is None:
        x, dim = ctx.b.reshape(x, (x.size,)), 0
    largest = op_name(ctx.node).startswith("aten.argmax")
    where = _first_extremal(ctx, x, _norm_dim(dim, x.rank), largest)
    return ctx.b.reshape(where, ctx.shape)


@_handles("aten.amax.default", "aten.amin.default", "aten.max.default",
          "aten.min.default")
def _amax(ctx, x, dim=(), keepdim=False):
    x = ctx.tensor(x)
    _require_float_or_integer(ctx, x)
    dims = ([dim] if isinstance(dim, int) else list(dim)) or \
        list(range(x.rank))
    largest = ".max" in op_name(ctx.node) or "amax" in op_name(ctx.node)
    # The autodiff shares the gradient of a max/min reduction evenly among
    # the tied elements, as PyTorch does here.
    return ctx.b.reshape(_extremum(ctx, x, dims, largest), ctx.shape)


@_handles("aten.aminmax.default")
def _aminmax(ctx, x, dim=None, keepdim=False):
    """(min, max) over ``dim`` or all elements."""
    x = ctx.tensor(x)
    _require_float_or_integer(ctx, x)
    dims = _reduction_dims(dim, x.rank)
    shape = tuple(int(d) for d in ctx.val[0].shape)
    return tuple(ctx.b.reshape(_extremum(ctx, x, dims, largest), shape)
                 for largest in (False, True))


@_handles("aten.max.dim", "aten.min.dim")
def _max_dim(ctx, x, dim, keepdim=False):
    """(values, indices) along ``dim``: the first extremal element (or
    NaN), whose lookup carries the gradient, as in PyTorch."""
    x = ctx.tensor(x)
    _require_float_or_integer(ctx, x)
    shape = tuple(int(d) for d in ctx.val[0].shape)
    largest = op_name(ctx.node).startswith("aten.max")
    dim = _norm_dim(dim, x.rank)
    where = _first_extremal(ctx, x, dim, largest)
    where = ctx.b.reshape(where, x.shape[:dim] + (1,) + x.shape[dim + 1:])
    values = _gather_along(ctx, x, dim, where)
    return ctx.b.reshape(values, shape), ctx.b.reshape(where, shape)


def _sorted_indices(ctx, x, dim, descending):
    """The positions along ``dim`` of ``x``'s elements in stable sorted
    order (see _sort)."""
    t = x.dtype
    own = list(range(x.rank))
    other = own[:dim] + [x.rank] + own[dim + 1:]
    kind = "cmpf" if is_float(t) else "cmpi"
    order = ("ogt" if descending else "olt") if is_float(t) else (
        "sgt" if descending else "slt")
    equal = "oeq" if is_float(t) else "eq"

    def before(bb, names, acc):
        """acc + 1 where the other element (loop x.rank) comes first."""
        mine, theirs = names
        i = _as_i64(bb, bb.index(dim))
        j = _as_i64(bb, bb.index(x.rank))
        tie = bb.binary("arith.andi", bb.op(
            f"arith.{kind} {equal}, {theirs}, {mine} : {t}"), bb.op(
            f"arith.cmpi slt, {j}, {i} : i64"), "i1")
        first = bb.binary("arith.ori", bb.op(
            f"arith.{kind} {order}, {theirs}, {mine} : {t}"), tie, "i1")
        return bb.binary("arith.addi", acc, bb.cast(first, "i1", "i64"),
                         "i64")

    place = ctx.b.generic(x.shape, "i64", [(x, own), (x, other)], before,
                          reductions=1, init=ctx.b.filled(x.shape, "i64", 0),
                          hint="place")

    def at_place(bb, names, acc):
        """acc + j where element j's place is this position."""
        p = _as_i64(bb, bb.index(dim))
        j = _as_i64(bb, bb.index(x.rank))
        hit = bb.op(f"arith.cmpi eq, {names[0]}, {p} : i64")
        return bb.binary("arith.addi", acc, bb.select(
            hit, j, bb.const(0, "i64"), "i64"), "i64")

    return ctx.b.generic(x.shape, "i64", [(place, other)], at_place,
                         reductions=1, init=ctx.b.filled(x.shape, "i64", 0),
                         hint="sorted")


@_handles("aten.sort.default", "aten.sort.stable", "aten.argsort.default",
          "aten.argsort.stable")
def _sort(ctx, x, *args, **kwargs):
    """``sort`` (values, indices) and ``argsort`` along ``dim``, stable
    (equal values in their order), ascending or descending, of floats or
    integers. Each element's place is the count of the row's elements
    before it in that order, and the index at place p is the position
    whose place is p: two passes over pairs of the row (n^2 per row; MAE's
    random masking sorts one noise value per patch). The values are
    lookups at the indices, so the gradient goes back to where each came
    from. NaN is not ordered as PyTorch orders it (above everything)."""
    x = ctx.tensor(x)
    if x.dtype == "i1" or not (is_float(x.dtype) or x.dtype.startswith("i")):
        ctx.unsupported(f"sorting {x.dtype} tensors")
    dim = args[0] if args else kwargs.get("dim", -1)
    descending = args[1] if len(args) > 1 else kwargs.get("descending",
                                                           False)
    if x.rank == 0:
        zero = ctx.b.filled((), "i64", 0)
        return zero if op_name(ctx.node).startswith("aten.argsort") else (
            x, zero)
    dim = _norm_dim(dim, x.rank)
    indices = _sorted_indices(ctx, x, dim, descending)
    if op_name(ctx.node).startswith("aten.argsort"):
        return indices
    return _gather_along(ctx, x, dim, indices), indices


def _order_statistic(ctx, x, position, dim, keepdim):
    """(value, index) of the element at sorted ``position`` along ``dim``
    (stable ascending order; the value a lookup, so its gradient goes to
    that element)."""
    x = ctx.tensor(x)
    _require_float_or_integer(ctx, x)
    if x.rank == 0:
        return x, ctx.b.filled((), "i64", 0)
    dim = _norm_dim(dim, x.rank)
    order = _sorted_indices(ctx, x, dim, False)
    offsets = [0] * x.rank
    offsets[dim] = position
    kept = x.shape[:dim] + (1,) + x.shape[dim + 1:]
    index = ctx.b.extract_slice(order, offsets, list(kept), [1] * x.rank)
    value = _gather_along(ctx, x, dim, index)
    shape = kept if keepdim else x.shape[:dim] + x.shape[dim + 1:]
    return ctx.b.reshape(value, shape), ctx.b.reshape(index, shape)


@_handles("aten.kthvalue.default")
def _kthvalue(ctx, x, k, dim=-1, keepdim=False):
    return _order_statistic(ctx, x, k - 1, dim, keepdim)


@_handles("aten.median.dim", "aten.median.default")
def _median(ctx, x, dim=None, keepdim=False):
    """The lower median (PyTorch's: of an even count, the smaller middle
    element) along ``dim``, with its index; of all elements without."""
    x = ctx.tensor(x)
    if dim is None:
        flat = ctx.b.reshape(x, (x.size,))
        return _order_statistic(ctx, flat, (x.size - 1) // 2, 0, False)[0]
    size = x.shape[_norm_dim(dim, x.rank)] if x.rank else 1
    return _order_statistic(ctx, x, (size - 1) // 2, dim, keepdim)


@_handles("aten.lerp.Scalar", "aten.lerp.Tensor")
def _lerp(ctx, a, b, weight):
    """a + weight (b - a)."""
    t = ctx.dtype
    return ctx.elementwise([a, b, weight], lambda bb, xs: bb.binary(
        "arith.addf", _cast(bb, xs[0], t), bb.binary(
            "arith.mulf", _cast(bb, xs[2], t), bb.binary(
                "arith.subf", _cast(bb, xs[1], t), _cast(bb, xs[0], t), t),
            t), t))


@_handles("aten.topk.default")
def _topk(ctx, x, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the ``k`` largest (smallest) elements along
    ``dim``, in order, an equal value's lower index first; also for
    ``sorted=False``, whose order PyTorch leaves open. Pass r finds the
    extremum among the elements after pick r - 1 in that order, then the
    first position holding it: 2k reductions of the row, no sort (MoE
    routers pick 1 to 8 of a few experts). The values are lookups at the
    indices, so the gradient goes to the picked elements. NaN is not
    ordered as PyTorch orders it (above everything)."""
    x = ctx.tensor(x)
    _require_float(ctx, x)
    t = x.dtype
    dims, kept, loops = _reduced_loops(x, [dim])
    size = x.shape[dims[0]]
    rows = tuple(x.shape[d] for d in kept)
    at_row = list(range(len(kept)))

    def eligible(bb, e, previous):
        """Whether element ``e`` comes after the previous pick."""
        if not previous:
            return None
        value, index = previous
        after = bb.op(f"arith.cmpf {'olt' if largest else 'ogt'}, {e}, "
                      f"{value} : {t}")
        position = _as_i64(bb, bb.index(len(kept)))
        tie = bb.binary("arith.andi", bb.op(
            f"arith.cmpf oeq, {e}, {value} : {t}"), bb.op(
            f"arith.cmpi sgt, {position}, {index} : i64"), "i1")
        return bb.binary("arith.ori", after, tie, "i1")

    picks, previous = [], []
    for _ in range(k):
        inputs = [(x, loops)] + [(v, at_row) for v in previous]

        def best(bb, names, acc):
            better = bb.binary("arith.maximumf" if largest else
                               "arith.minimumf", names[0], acc, t)
            ok = eligible(bb, names[0], names[1:])
            return better if ok is None else bb.select(ok, better, acc, t)

        extremum = ctx.b.generic(rows, t, inputs, best, reductions=1,
                                 init=ctx.b.filled(rows, t, _NEG_INF if
                                                   largest else
                                                   float("inf")),
                                 hint="topv")

        def first(bb, names, acc):
            return _first_hit(bb, acc, names[0], names[1], t,
                              bb.index(len(kept)), size - 1,
                              inside=eligible(bb, names[0], names[2:]))

        index = ctx.b.generic(rows, "i64", [inputs[0], (extremum, at_row)]
                              + inputs[1:], first, reductions=1,
                              init=ctx.b.filled(rows, "i64", size - 1),
                              hint="topi")
        previous = [extremum, index]
        picks.append(index)

    dim = dims[0]
    shape = x.shape[:dim] + (k,) + x.shape[dim + 1:]
    indices = ctx.b.empty(shape, "i64")
    for r, index in enumerate(picks):
        offsets = [0] * x.rank
        offsets[dim] = r
        indices = ctx.b.insert_slice(ctx.b.reshape(
            index, x.shape[:dim] + (1,) + x.shape[dim + 1:]), indices,
            offsets)

    return _gather_along(ctx, x, dim, indices), indices


def _two_norm(ctx, x, dims):
    """sqrt(sum of squares) of x over ``dims`` (the others kept, in
    order), whose gradient is 0 where it is 0, as PyTorch's."""
    t = x.dtype
    squares = ctx.reduce(x, dims, 0.0, lambda bb, e, acc: _add_acc(
        bb, bb.binary("arith.mulf", e, e, t), acc, t))

    return ctx.elementwise([squares], lambda bb, xs: _root(bb, xs[0][0], t),
                           shape=squares.shape)


def _root(bb, s, t):
    """sqrt(s) for a sum of squares, whose gradient is 0 where s is 0 (as
    PyTorch's for norms and the standard deviation; sqrt's derivative
    there is infinite, and the chain rule would give inf * 0); NaN stays
    NaN."""
    nonzero = bb.op(f"arith.cmpf une, {s}, {bb.const(0.0, t)} : {t}")
    return bb.select(nonzero, bb.unary("math.sqrt", s, t), bb.const(0.0, t),
                     t)


@_handles("aten._weight_norm.default")
def _weight_norm(ctx, v, g, dim=0):
    """Weight normalisation, v * g / ||v|| with the norm over every dim
    but ``dim`` (over all of v for dim -1)."""
    v, g = ctx.tensor(v), ctx.tensor(g)
    _require_float(ctx, v, g)
    keep = [] if dim == -1 else [_norm_dim(dim, v.rank)]
    norm = _two_norm(ctx, v, [d for d in range(v.rank) if d not in keep])
    norm = ctx.b.reshape(norm, tuple(v.shape[d] if d in keep else 1
                                     for d in range(v.rank)))
    t = v.dtype
    return ctx.elementwise([v, g, norm], lambda bb, xs: bb.binary(
        "arith.mulf", xs[0][0], bb.binary("arith.divf", xs[1][0], xs[2][0],
                                          t), t), shape=v.shape)


@_handles("aten.linalg_vector_norm.default")
def _vector_norm(ctx, x, ord=2, dim=None, keepdim=False, dtype=None):
    """The 2-norm (and the 1- and max-norms) over ``dim``, with PyTorch's
    gradients: x / ||x||, and 0 where the norm is 0 (the square root's
    derivative is not taken there). ``dtype`` casts x first."""
    x = _in_result_dtype(ctx, x)
    _require_float(ctx, x)
    t = x.dtype
    dims = _reduction_dims(dim, x.rank)

    def absolute(bb, e):
        return bb.unary("math.absf", e, t)

    if ord == 2:
        norm = _two_norm(ctx, x, dims)
    elif ord == 1:
        norm = ctx.reduce(x, dims, 0.0, lambda bb, e, acc: _add_acc(
            bb, absolute(bb, e), acc, t))
    elif ord == float("inf"):
        magnitude = ctx.elementwise([x], lambda bb, xs: absolute(
            bb, xs[0][0]), shape=x.shape)
        norm = _extremum(ctx, magnitude, dims, True)
    elif isinstance(ord, (int, float)) and 0 < ord < float("inf"):
        # (sum |x|^p)^(1/p).
        powers = ctx.elementwise([x], lambda bb, xs: bb.binary(
            "math.powf", absolute(bb, xs[0][0]), bb.const(float(ord), t),
            t), shape=x.shape, dtype=t)
        total = ctx.reduce(powers, dims, 0.0,
                           lambda bb, e, acc: _add_acc(bb, e, acc, t))
        norm = ctx.elementwise([total], lambda bb, xs: bb.binary(
            "math.powf", xs[0][0], bb.const(1.0 / ord, t), t),
            shape=total.shape, dtype=t)
    else:
        ctx.unsupported(f"only the p-norms for p > 0 and the max-norm are "
                        f"supported, not ord={ord}")
    return ctx.b.reshape(norm, ctx.shape)


def _moments(ctx, x, dim, correction, keepdim):
    """(variance with ``correction``, mean) of x over ``dim`` (None: all),
    shaped as ``keepdim`` says."""
    x = ctx.tensor(x)
    _require_float(ctx, x)
    t = x.dtype
    dims = sorted(_reduction_dims(dim, x.rank))
    count = math.prod(x.shape[d] for d in dims)
    kept = tuple(1 if d in dims else n for d, n in enumerate(x.shape))
    mean = ctx.b.reshape(ctx.reduce(
        x, dims, 0.0, lambda bb, e, acc: _add_acc(bb, e, acc, t),
        scale=1.0 / count), kept)
    squares = ctx.elementwise([x, mean], lambda bb, xs: bb.binary(
        "arith.mulf", *(2 * [bb.binary("arith.subf", xs[0][0], xs[1][0],
                                       t)]), t), shape=x.shape, dtype=t)
    divisor = max(count - correction, 0)
    var = ctx.reduce(squares, dims, 0.0,
                     lambda bb, e, acc: _add_acc(bb, e, acc, t),
                     scale=1.0 / divisor if divisor else float("inf"))
    shape = kept if keepdim else tuple(
        n for d, n in enumerate(x.shape) if d not in dims)
    return ctx.b.reshape(var, shape), ctx.b.reshape(mean, shape)


def _std(ctx, var):
    return ctx.elementwise([var], lambda bb, xs: _root(bb, xs[0][0],
                                                      var.dtype),
                           shape=var.shape, dtype=var.dtype)


def _correction(unbiased=True, correction=None):
    return correction if correction is not None else int(bool(unbiased))


@_handles("aten.var.correction", "aten.var.dim", "aten.var.default",
          "aten.std.correction", "aten.std.dim", "aten.std.default",
          "aten.var_mean.correction", "aten.var_mean.dim",
          "aten.std_mean.correction", "aten.std_mean.dim")
def _var_std(ctx, x, dim=None, unbiased=True, keepdim=False, *,
             correction=None):
    """Variance and standard deviation (Bessel's correction by default,
    ``correction`` subtracted from the count), with the mean for the
    *_mean forms."""
    if isinstance(dim, bool):  # var(x, unbiased)
        dim, unbiased = None, dim
    var, mean = _moments(ctx, x, dim, _correction(unbiased, correction),
                         keepdim)
    name = op_name(ctx.node).split(".")[1]
    value = _std(ctx, var) if name.startswith("std") else var
    return (value, mean) if name.endswith("_mean") else value


@_handles("aten.norm.ScalarOpt_dim", "aten.norm.Scalar",
          "aten.norm.ScalarOpt_dim_dtype")
def _norm(ctx, x, p=2, dim=None, keepdim=False, *args, **kwargs):
    """Tensor.norm: the vector p-norm over ``dim`` (all elements by
    default)."""
    return _vector_norm(ctx, x, 2 if p is None else p, dim, keepdim)


@_handles("aten.count_nonzero.default", "aten.count_nonzero.dim_IntList")
def _count_nonzero(ctx, x, dim=None):
    x = ctx.tensor(x)
    nonzero = ctx.elementwise([x], lambda bb, xs: _cast(bb, xs[0], "i1"),
                              shape=x.shape, dtype="i1")
    dims = _reduction_dims(dim, x.rank)
    total = ctx.reduce(nonzero, dims, 0,
                       lambda bb, e, acc: _add_acc(bb, e, acc, "i64"),
                       dtype="i64")
    return ctx.b.reshape(total, ctx.shape)


@_handles("aten.channel_shuffle.default",
          "aten.native_channel_shuffle.default")
def _channel_shuffle(ctx, x, groups):
    """[N, g * k, ...] -> [N, k * g, ...]: the channels of each group
    interleaved (ShuffleNet)."""
    x = ctx.tensor(x)
    n, c, rest = x.shape[0], x.shape[1], x.shape[2:]
    split = ctx.b.reshape(x, (n, groups, c // groups, *rest))
    order = [0, 2, 1, *range(3, 3 + len(rest))]
    return ctx.b.reshape(ctx.b.transpose(split, order), ctx.shape)


@_handles("aten.diagonal.default")
def _diagonal(ctx, x, offset=0, dim1=0, dim2=1):
    """x's diagonal (``offset`` above it, below when negative) of dims
    ``dim1`` and ``dim2`` as the last dim of the others: a lookup."""
    x = ctx.tensor(x)
    dim1, dim2 = _norm_dim(dim1, x.rank), _norm_dim(dim2, x.rank)
    rest = [d for d in range(x.rank) if d not in (dim1, dim2)]

    def body(bb, names, acc):
        at = [None] * x.rank
        for k, d in enumerate(rest):
            at[d] = bb.index(k)
        i = bb.index(len(rest))
        at[dim1] = _index_op(bb, "addi", i, _index_const(bb, max(-offset,
                                                                  0)))
        at[dim2] = _index_op(bb, "addi", i, _index_const(bb, max(offset,
                                                                 0)))
        return _lookup(bb, x, at)

    if not math.prod(ctx.shape):
        return ctx.b.filled(ctx.shape, x.dtype, 0)
    return ctx.b.generic(ctx.shape, x.dtype, [], body, hint=ctx.hint)


@_handles("aten.cdist.default", "aten._cdist_forward.default")
def _cdist(ctx, a, b, p=2.0, compute_mode=None):
    """The p-norm distance of every row of ``a`` [..., P, M] to every row
    of ``b`` [..., R, M]: the norm of their [..., P, R, M] differences."""
    a, b = ctx.tensor(a), ctx.tensor(b)
    _require_float(ctx, a, b)
    shape = ctx.shape + (a.shape[-1],)
    k = len(ctx.shape) - 2
    lead = list(range(k))
    diff = ctx.b.generic(shape, a.dtype, [
        (a, lead[len(lead) - (a.rank - 2):] + [k, k + 2]),
        (b, lead[len(lead) - (b.rank - 2):] + [k + 1, k + 2])],
        lambda bb, names, acc: bb.binary("arith.subf", names[0], names[1],
                                         a.dtype), hint="diff")
    return _vector_norm(ctx, diff, p, [-1])


@_handles("aten.diag_embed.default")
def _diag_embed(ctx, x, offset=0, dim1=-2, dim2=-1):
    """x's last dim on the diagonal (``offset`` above it) of two new dims
    ``dim1`` and ``dim2``, zeros elsewhere."""
    x = ctx.tensor(x)
    rank = x.rank + 1
    dim1, dim2 = _norm_dim(dim1, rank), _norm_dim(dim2, rank)
    rest = [d for d in range(rank) if d not in (dim1, dim2)]
    t = x.dtype

    def body(bb, names, acc):
        i, j = bb.index(dim1), bb.index(dim2)
        shifted = _index_op(bb, "addi", i, _index_const(bb, offset))
        on = bb.op(f"arith.cmpi eq, {shifted}, {j} : index")
        along = i if offset >= 0 else j
        at = [bb.index(d) for d in rest] + [bb.op(
            f"arith.minui {along}, {_index_const(bb, x.shape[-1] - 1)} : "
            "index")]
        return bb.select(on, _lookup(bb, x, at), bb.const(0, t), t)

    return ctx.b.generic(ctx.shape, t, [], body, hint=ctx.hint)


@_handles("aten.linalg_cross.default")
def _cross(ctx, a, b, dim=-1):
    """The cross product of 3-vectors along ``dim`` (operands broadcast)."""
    shape, t = ctx.shape, ctx.dtype
    dim = _norm_dim(dim, len(shape))
    a, b = ctx.expand(a, shape), ctx.expand(b, shape)
    pa, pb = (_pieces(ctx, v, dim, [1, 1, 1]) for v in (a, b))
    part = shape[:dim] + (1,) + shape[dim + 1:]

    def term(i, j):
        return ctx.elementwise([pa[i], pb[j], pa[j], pb[i]], lambda bb, xs:
                               bb.binary("arith.subf", bb.binary(
                                   "arith.mulf", xs[0][0], xs[1][0], t),
                                   bb.binary("arith.mulf", xs[2][0],
                                             xs[3][0], t), t),
                               shape=part, dtype=t)
    return _joined(ctx, [term(1, 2), term(2, 0), term(0, 1)], dim, shape, t)


@_handles("aten.trace.default")
def _trace(ctx, x):
    x = ctx.tensor(x)
    _require_float(ctx, x)
    t = x.dtype

    def body(bb, names, acc):
        i = bb.index(0)
        return bb.binary("arith.addf", acc, _lookup(bb, x, [i, i]), t)

    # One reduction loop over the shorter side, reading x[i, i].
    side = min(x.shape)
    total = ctx.b.generic((), t, [(ctx.b.filled((side,), t, 0.0), [0])],
                          body, reductions=1, init=ctx.b.filled((), t, 0.0),
                          hint=ctx.hint)
    return total


@_handles("aten.linalg_norm.default", "aten.linalg_norm.ord_str")
def _linalg_norm(ctx, x, ord=None, dim=None, keepdim=False, dtype=None):
    """torch.linalg.norm: with ``ord`` None the 2-norm of the elements
    over ``dim`` (Frobenius's over two dims), with a number and one dim
    (or a 1-d input) that vector norm; matrix norms (ord over two dims)
    are refused."""
    x = ctx.tensor(x)
    dims = _reduction_dims(dim, x.rank)
    if ord is None or ord == "fro":
        if ord == "fro" and len(dims) != 2:
            ctx.unsupported("the Frobenius norm over other than two dims")
        ord = 2
    elif len(dims) != 1:
        ctx.unsupported(f"the matrix norm ord={ord} is not supported")
    return _vector_norm(ctx, x, ord, dims, keepdim)


def _finite_max(ctx, x, dims):
    """The maximum of x over ``dims`` without its gradient, 0 where it is
    infinite: the shift that keeps a log-sum-exp from overflowing."""
    t = x.dtype
    m = _no_grad(ctx, _extremum(ctx, x, dims, True))
    return ctx.elementwise([m], lambda bb, xs: bb.select(
        _is_finite(bb, xs[0][0], t), xs[0][0], bb.const(0.0, t), t),
        shape=m.shape, dtype=t)


@_handles("aten.logsumexp.default")
def _logsumexp(ctx, x, dim, keepdim=False):
    """m + log(sum(exp(x - m))) for m the maximum without its gradient (0
    where it is infinite, as in PyTorch)."""
    x = ctx.tensor(x)
    _require_float(ctx, x)
    t = x.dtype
    dims = [dim] if isinstance(dim, int) else list(dim)
    m = _finite_max(ctx, x, dims)
    dims, kept, loops = _reduced_loops(x, dims)

    def body(bb, names, acc):
        e = bb.unary("math.exp", bb.binary("arith.subf", names[0], names[1],
                                           t), t)
        return bb.binary("arith.addf", acc, e, t)

    total = ctx.b.generic(m.shape, t, [(x, loops), (m, list(range(
        len(kept))))], body, reductions=len(dims),
        init=ctx.b.filled(m.shape, t, 0.0), hint="lse")
    out = ctx.elementwise([m, total], lambda bb, xs: bb.binary(
        "arith.addf", xs[0][0], bb.unary("math.log", xs[1][0], t), t),
        shape=m.shape, dtype=t)
    return ctx.b.reshape(out, ctx.shape)


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


def _in_result_dtype(ctx, x):
    """``x`` cast to the node's result type where that differs (the
    ``dtype=`` of softmax and log_softmax: PyTorch casts first)."""
    x = ctx.tensor(x)
    if not is_float(x.dtype) or not is_float(ctx.dtype):
        return x
    return _cast_to(ctx, x, ctx.dtype)


@_handles("aten.softmax.int", "aten._softmax.default")
def _softmax(ctx, x, dim, *args):
    x = _in_result_dtype(ctx, x)
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
    x = _in_result_dtype(ctx, x)
    _require_float(ctx, x)
    return _log_softmax_value(ctx, x, _norm_dim(dim, x.rank))


# -- embedding and attention ---------------------------------------------


@_handles("aten.embedding.default")
def _embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False,
               sparse=False):
    if scale_grad_by_freq:
        ctx.unsupported("scale_grad_by_freq is not supported")
    weight, indices = ctx.tensor(weight), ctx.tensor(indices)
    checked = ctx.translator.note_range(indices, weight.shape[0])
    rank = indices.rank
    t = weight.dtype

    padded = padding_idx is not None and padding_idx >= 0

    def body(bb, names, acc):
        column = bb.index(rank)
        row = _to_index(bb, names[0], indices.dtype)
        value = _guarded_lookup(bb, weight, [row, column],
                                [] if checked else [0])
        if not padded:
            return value
        # As in PyTorch, the padding row is looked up like any other (its
        # current value, zeros unless the module was changed) but gets no
        # gradient: where the index is padding_idx the value is read through
        # a stop-gradient round trip, whose tangent is zero.
        is_pad = bb.op(f"arith.cmpi eq, {names[0]}, "
                       f"{bb.const(padding_idx, indices.dtype)} : "
                       f"{indices.dtype}")
        return bb.select(is_pad, _stop_gradient(bb, value, t), value, t)

    return ctx.b.generic(ctx.shape, t, [(indices, list(range(rank)))], body,
                         hint=ctx.hint)


@_handles("aten.scaled_dot_product_attention.default")
def _sdpa(ctx, query, key, value, attn_mask=None, dropout_p=0.0,
          is_causal=False, scale=None, enable_gqa=False):
    query, key = ctx.tensor(query), ctx.tensor(key)
    if enable_gqa and key.rank >= 3 and key.shape[-3] != query.shape[-3]:
        # Grouped-query attention: each key/value head serves
        # heads(query) / heads(key) query heads, in order.
        heads, kv_heads = query.shape[-3], key.shape[-3]
        if heads % kv_heads:
            ctx.unsupported(f"{heads} query heads do not divide into "
                            f"{kv_heads} key/value heads")

        def repeat(x):
            x = ctx.tensor(x)
            lead, (s, d) = x.shape[:-3], x.shape[-2:]
            x = ctx.b.reshape(x, (*lead, kv_heads, 1, s, d))
            x = ctx.expand(x, (*lead, kv_heads, heads // kv_heads, s, d))
            return ctx.b.reshape(x, (*lead, heads, s, d))

        key, value = repeat(key), repeat(value)
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

    dead = None if attn_mask is None else _masked_rows_of(
        ctx, attn_mask, mask_is_bool, t)
    if dead is not None:
        operands.append(dead)

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
        if dead is not None:
            # A row that masks every key: finite scores, so that neither
            # its softmax nor that softmax's gradient is NaN.
            s = bb.select(xs[2][0], bb.const(0.0, t), s, t)
        return s

    logits = ctx.elementwise(operands, masked, shape=scores.shape, dtype=t,
                             hint="attn_scores")
    probs = ctx.b.softmax(logits, scores.rank - 1, hint="attn_probs")
    if dead is not None:
        # PyTorch's attention gives such a row 0 (its safe softmax).
        probs = ctx.elementwise(
            [probs, dead], lambda bb, xs: bb.select(
                xs[1][0], bb.const(0.0, t), xs[0][0], t),
            shape=scores.shape, dtype=t, hint="attn_probs")
    if dropout_p:
        # As PyTorch's reference: the probabilities under a dropout.
        probs = _dropped(ctx, probs, dropout_p)
    return _matmul(ctx, probs, value)


def _masked_rows_of(ctx, mask, is_bool, t):
    """The rows (queries) of attention mask ``mask`` that mask every key
    (all False, or all -inf), as an i1 tensor of the mask's shape with its
    last dim 1 (broadcasting over the keys); None when no row can be (a
    constant mask with a key left in every row)."""
    if isinstance(mask, Const):
        m = mask.tensor
        rows = ~m.any(-1, keepdim=True) if m.dtype == torch.bool else (
            m == float("-inf")).all(-1, keepdim=True)
        return Const(rows) if bool(rows.any()) else None
    mask = ctx.tensor(mask)

    def kept(bb, xs):
        if is_bool:
            return bb.select(xs[0][0], bb.const(1.0, t), bb.const(0.0, t), t)
        m = _cast(bb, xs[0], t)
        gone = bb.op(f"arith.cmpf oeq, {m}, {bb.const(_NEG_INF, t)} : {t}")
        return bb.select(gone, bb.const(0.0, t), bb.const(1.0, t), t)

    # Constants selected by the mask: no gradient flows through here.
    keys = ctx.elementwise([mask], kept, shape=mask.shape, dtype=t,
                           hint="attn_keys")
    any_key = ctx.reduce(keys, [mask.rank - 1], 0.0, lambda bb, e, acc:
                         bb.binary("arith.maximumf", e, acc, t),
                         hint="attn_any_key")
    any_key = ctx.b.reshape(any_key, (*mask.shape[:-1], 1))
    return ctx.elementwise(
        [any_key], lambda bb, xs: bb.op(
            f"arith.cmpf oeq, {xs[0][0]}, {bb.const(0.0, t)} : {t}"),
        shape=any_key.shape, dtype="i1", hint="attn_dead_rows")


# -- losses -------------------------------------------------------------

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _pick_loss(ctx, logits, target, ignore_index, reduction, log_probs,
               weight=None, smoothing=0.0):
    """Per-row ``-log p[target]`` of [N, C] ``logits`` (or, with
    ``log_probs``, ``-logits[target]``), reduced like PyTorch (rows whose
    target is ``ignore_index`` contribute nothing and are not counted).
    With class ``weight`` [C] each row counts w[target] times (a mean
    divides by the rows' weights); with ``smoothing`` e (cross-entropy's
    label smoothing) a row's loss is (1 - e) of that plus e / C of
    -sum_c w_c log p[c], as PyTorch's."""
    logits, target = ctx.tensor(logits), ctx.tensor(target)
    if is_float(target.dtype):
        ctx.unsupported("only class-index targets are supported")
    if logits.rank == 1 and target.rank == 0:
        logits = ctx.b.reshape(logits, (1, logits.shape[0]))
        target = ctx.reshape(target, (1,))
    elif logits.rank > 2 and target.rank == logits.rank - 1:
        # [N, C, d...] with [N, d...] targets: classes last, then one row
        # per (n, d...).
        perm = [0, *range(2, logits.rank), 1]
        logits = ctx.b.transpose(logits, perm, hint="ce_classes_last")
        classes = logits.shape[-1]
        logits = ctx.b.reshape(logits, (logits.size // classes, classes))
        target = ctx.reshape(target, (target.size,))
    if logits.rank != 2 or target.rank != 1 or \
            target.shape[0] != logits.shape[0]:
        ctx.unsupported("only [N, C] or [N, C, d...] inputs with [N] or "
                        "[N, d...] class-index targets are supported")
    rows, classes = logits.shape
    t = logits.dtype
    weight = _class_weights(ctx, weight, classes, t)
    # Labels index no table here (each row compares them with its class
    # numbers), so the runner's check of a zb.range stands in for PyTorch's
    # of the labels: a class, or ignore_index where it lies outside the
    # classes (-100, BERT's masked-language-model labels: zb.range_ignored).
    labels_checked = 0 <= ignore_index < classes
    ctx.translator.note_range(
        target, classes, ignored=None if labels_checked else ignore_index)
    zero_rows = ctx.b.filled((rows,), t, 0.0)

    def at_label(value, hint):
        """Row n's entry of [N, C] ``value`` (or of [C] ``value``) at its
        label, 0 where the label is no class."""
        def body(bb, names, acc):
            entry, label = names
            j = bb.op(f"arith.index_cast {bb.index(1)} : index to "
                      f"{target.dtype}")
            hit = bb.op(f"arith.cmpi eq, {j}, {label} : {target.dtype}")
            return bb.binary("arith.addf", acc,
                             bb.select(hit, entry, bb.const(0.0, t), t), t)

        dims = [1] if value.rank == 1 else [0, 1]
        return ctx.b.generic((rows,), t, [(value, dims), (target, [0])],
                             body, reductions=1, init=zero_rows, hint=hint)

    operands = [(at_label(logits, "picked"), [0]), (target, [0])]
    slot = {}
    if not log_probs:
        # The stabilising maximum cancels out of the loss: no gradient
        # (which would be zero but for rounding) flows through it.
        mx = _no_grad(ctx, ctx.reduce(
            logits, [1], _NEG_INF, lambda bb, e, acc: bb.binary(
                "arith.maximumf", e, acc, t), hint="ce_max"))

        def sumexp(bb, names, acc):
            d = bb.binary("arith.subf", names[0], names[1], t)
            return bb.binary("arith.addf", acc, bb.unary("math.exp", d, t), t)

        total = ctx.b.generic((rows,), t, [(logits, [0, 1]), (mx, [0])],
                              sumexp, reductions=1, init=zero_rows,
                              hint="ce_sumexp")
        slot["total"], slot["max"] = len(operands), len(operands) + 1
        operands += [(total, [0]), (mx, [0])]
    if weight is not None:
        slot["weight"] = len(operands)
        operands.append((at_label(weight, "ce_weight"), [0]))
    weights_sum = float(classes)
    if smoothing:
        # sum_c w_c x[n, c] (w_c = 1 without weights) and sum_c w_c.
        inputs = [(logits, [0, 1])] + ([(weight, [1])] if weight is not None
                                       else [])

        def weighted_row(bb, names, acc):
            term = names[0] if weight is None else bb.binary(
                "arith.mulf", names[0], names[1], t)
            return bb.binary("arith.addf", acc, term, t)

        slot["row"] = len(operands)
        operands.append((ctx.b.generic((rows,), t, inputs, weighted_row,
                                       reductions=1, init=zero_rows,
                                       hint="ce_smooth"), [0]))
        if weight is not None:
            slot["weights"] = len(operands)
            operands.append((ctx.reduce(weight, [0], 0.0, lambda bb, e, acc:
                                        _add_acc(bb, e, acc, t),
                                        hint="ce_weights"), []))

    def row_loss(bb, names):
        value, label = names[:2]
        if log_probs:
            loss = bb.unary("arith.negf", value, t)
        else:
            lse = bb.binary("arith.addf", bb.unary(
                "math.log", names[slot["total"]], t), names[slot["max"]], t)
            loss = bb.binary("arith.subf", lse, value, t)
        if weight is not None:
            loss = bb.binary("arith.mulf", names[slot["weight"]], loss, t)
        if smoothing:
            # -sum_c w_c log p[c] = lse * sum_c w_c - sum_c w_c x[c].
            total_weight = names[slot["weights"]] if weight is not None \
                else bb.const(weights_sum, t)
            smooth = bb.binary("arith.subf", bb.binary(
                "arith.mulf", lse, total_weight, t), names[slot["row"]], t)
            loss = bb.binary("arith.addf", bb.binary(
                "arith.mulf", bb.const(1.0 - smoothing, t), loss, t),
                bb.binary("arith.mulf", bb.const(smoothing / classes, t),
                          smooth, t), t)
        ignored = bb.op(f"arith.cmpi eq, {label}, "
                        f"{bb.const(ignore_index, target.dtype)} : "
                        f"{target.dtype}")
        if not labels_checked:
            ty = target.dtype
            low = bb.op(f"arith.cmpi slt, {label}, {bb.const(0, ty)} : {ty}")
            high = bb.op(f"arith.cmpi sge, {label}, "
                         f"{bb.const(classes, ty)} : {ty}")
            bad = bb.op(f"arith.ori {low}, {high} : i1")
            loss = bb.select(bad, bb.const(math.nan, t), loss, t)
        return bb.select(ignored, bb.const(0.0, t), loss, t)

    mode = _REDUCTIONS.get(reduction)
    if mode == "none":
        losses = ctx.b.generic((rows,), t, operands,
                               lambda bb, names, acc: row_loss(bb, names),
                               hint=ctx.hint)
        shape = ctx.shape if ctx.shape is not None else tuple(
            int(d) for d in ctx.val[0].shape)
        return ctx.b.reshape(losses, shape)
    scalar_zero = ctx.b.filled((), t, 0.0)
    total_loss = ctx.b.generic(
        (), t, operands, lambda bb, names, acc: bb.binary(
            "arith.addf", acc, row_loss(bb, names), t),
        reductions=1, init=scalar_zero,
        hint=ctx.hint if mode == "sum" else "loss_sum")
    if mode == "sum":
        return total_loss

    # The mean divides by the rows counted: their weights, or their number.
    def count_body(bb, names, acc):
        ignored = bb.op(f"arith.cmpi eq, {names[0]}, "
                        f"{bb.const(ignore_index, target.dtype)} : "
                        f"{target.dtype}")
        one = bb.const(1.0, t) if weight is None else names[1]
        return bb.binary("arith.addf", acc, bb.select(
            ignored, bb.const(0.0, t), one, t), t)

    counted = [(target, [0])] + ([operands[slot["weight"]]]
                                 if weight is not None else [])
    count = ctx.b.generic((), t, counted, count_body, reductions=1,
                          init=scalar_zero, hint="count")
    return ctx.b.generic(
        (), t, [(total_loss, []), (count, [])],
        lambda bb, names, acc: bb.binary("arith.divf", names[0], names[1],
                                         t), hint=ctx.hint)


@_handles("aten.cross_entropy_loss.default")
def _cross_entropy(ctx, logits, target, weight=None, reduction=1,
                   ignore_index=-100, label_smoothing=0.0):
    if is_float(ctx.tensor(target).dtype):
        return _soft_cross_entropy(ctx, logits, target, weight, reduction,
                                   float(label_smoothing))
    return _pick_loss(ctx, logits, target, ignore_index, reduction,
                      log_probs=False, weight=weight,
                      smoothing=float(label_smoothing))


def _class_weights(ctx, weight, classes, t):
    """A loss's ``weight`` argument: None, or a [classes] tensor of ``t``."""
    if weight is None:
        return None
    weight = ctx.tensor(weight)
    if weight.shape != (classes,):
        ctx.unsupported(f"class weights of shape {list(weight.shape)} for "
                        f"{classes} classes")
    return _cast_to(ctx, weight, t)


def _soft_cross_entropy(ctx, logits, target, weight, reduction, smoothing):
    """Cross-entropy against class probabilities (classes along dim 1, or
    dim 0 of one sample): -sum_c w_c q_c log p_c per position, where q is
    the target mixed with e / C of the uniform (label smoothing e); a mean
    divides by the positions, as PyTorch's."""
    logits, target = ctx.tensor(logits), ctx.tensor(target)
    _require_float(ctx, logits)
    if target.shape != logits.shape:
        ctx.unsupported(f"probability targets of shape {list(target.shape)} "
                        f"for logits of shape {list(logits.shape)}")
    t = logits.dtype
    dim = 1 if logits.rank > 1 else 0
    classes = logits.shape[dim]
    log_p = _log_softmax_value(ctx, logits, dim)
    operands = [log_p, target]
    weight = _class_weights(ctx, weight, classes, t)
    if weight is not None:
        operands.append(ctx.b.reshape(
            weight, (classes,) + (1,) * (logits.rank - dim - 1)))

    def term(bb, xs):
        q = _cast(bb, xs[1], t)
        if smoothing:
            q = bb.binary("arith.addf", bb.binary(
                "arith.mulf", q, bb.const(1.0 - smoothing, t), t),
                bb.const(smoothing / classes, t), t)
        value = bb.binary("arith.mulf", xs[0][0], q, t)
        if weight is not None:
            value = bb.binary("arith.mulf", value, _cast(bb, xs[2], t), t)
        return bb.unary("arith.negf", value, t)

    terms = ctx.elementwise(operands, term, shape=logits.shape, dtype=t,
                            hint="ce_terms")
    losses = ctx.reduce(terms, [dim], 0.0,
                        lambda bb, e, acc: _add_acc(bb, e, acc, t))
    mode = _REDUCTIONS.get(reduction)
    if mode == "none":
        return losses
    total = ctx.reduce(losses, list(range(losses.rank)), 0.0,
                       lambda bb, e, acc: _add_acc(bb, e, acc, t))
    if mode == "sum" or not losses.rank:
        return total
    count = float(math.prod(losses.shape))
    return ctx.elementwise([total], lambda bb, xs: bb.binary(
        "arith.divf", xs[0][0], bb.const(count, t), t), shape=(), dtype=t)


@_handles("aten.nll_loss.default", "aten.nll_loss_nd.default",
          "aten.nll_loss_forward.default", "aten.nll_loss2d.default",
          "aten.nll_loss2d_forward.default")
def _nll_loss(ctx, log_probs, target, weight=None, reduction=1,
              ignore_index=-100):
    loss = _pick_loss(ctx, log_probs, target, ignore_index, reduction,
                      log_probs=True, weight=weight)
    if op_name(ctx.node).endswith("_forward.default"):
        return (loss, None)
    return loss


def _pointwise_loss(ctx, a, b, reduction, error):
    """``error(body, d, |d|, t)`` of each difference d = a - b, then
    reduced as ``reduction`` says (mean, sum or none)."""
    a = ctx.tensor(a)
    _require_float(ctx, a)
    t = a.dtype

    def each(bb, xs):
        d = bb.binary("arith.subf", xs[0][0], _cast(bb, xs[1], t), t)
        return error(bb, d, bb.unary("math.absf", d, t), t)

    errors = ctx.elementwise([a, b], each, shape=a.shape, dtype=t,
                             hint="err")
    mode = _REDUCTIONS.get(reduction)
    if mode == "none":
        return errors
    return ctx.reduce(errors, list(range(a.rank)), 0.0,
                      lambda bb, e, acc: _add_acc(bb, e, acc, t),
                      scale=1.0 / a.size if mode == "mean" else None,
                      hint=ctx.hint)


@_handles("aten.mse_loss.default")
def _mse_loss(ctx, a, b, reduction=1):
    return _pointwise_loss(ctx, a, b, reduction, lambda bb, d, m, t:
                           bb.binary("arith.mulf", d, d, t))


@_handles("aten.l1_loss.default")
def _l1_loss(ctx, a, b, reduction=1):
    return _pointwise_loss(ctx, a, b, reduction, lambda bb, d, m, t: m)


def _quadratic_near_zero(bb, d, m, t, width, scale):
    """``scale`` * (d^2 / (2 width)) where |d| < width, else ``scale`` *
    (|d| - width / 2): smooth L1 (scale 1) and Huber (scale width)."""
    if width == 0:
        return m
    near = bb.op(f"arith.cmpf olt, {m}, {bb.const(width, t)} : {t}")
    inner = bb.binary("arith.mulf", bb.binary("arith.mulf", d, d, t),
                      bb.const(scale * 0.5 / width, t), t)
    outer = bb.binary("arith.mulf", bb.binary(
        "arith.subf", m, bb.const(0.5 * width, t), t),
        bb.const(float(scale), t), t)
    return bb.select(near, inner, outer, t)


@_handles("aten.smooth_l1_loss.default")
def _smooth_l1_loss(ctx, a, b, reduction=1, beta=1.0):
    return _pointwise_loss(ctx, a, b, reduction, lambda bb, d, m, t:
                           _quadratic_near_zero(bb, d, m, t, beta, 1.0))


@_handles("aten.huber_loss.default")
def _huber_loss(ctx, a, b, reduction=1, delta=1.0):
    return _pointwise_loss(ctx, a, b, reduction, lambda bb, d, m, t:
                           _quadratic_near_zero(bb, d, m, t, delta, delta))


# -- padding, indexing and scans ----------------------------------------


@_handles("aten.pad.default")
def _pad(ctx, x, pad, mode="constant", value=None):
    if mode != "constant":
        return _index_pad(ctx, x, pad, mode)
    return _constant_pad(ctx, x, pad, 0 if value is None else value)


@_handles("aten.reflection_pad1d.default", "aten.reflection_pad2d.default",
          "aten.reflection_pad3d.default")
def _reflection_pad(ctx, x, pad):
    return _index_pad(ctx, x, pad, "reflect")


@_handles("aten.replication_pad1d.default", "aten.replication_pad2d.default",
          "aten.replication_pad3d.default")
def _replication_pad(ctx, x, pad):
    return _index_pad(ctx, x, pad, "replicate")


@_handles("aten._pad_circular.default")
def _circular_pad(ctx, x, pad):
    return _index_pad(ctx, x, pad, "circular")


def _index_pad(ctx, x, pad, mode):
    """Reflect, replicate or circular padding (``pad`` as F.pad's: last
    dim first): each element a lookup of the input at the position the
    mode maps it to (x[1], x[0], x[n - 1]... before x[0] for reflect,
    x[0] for replicate, x[n - 1] for circular), so the gradient adds up
    where positions repeat."""
    x = ctx.tensor(x)
    pad = [int(p) for p in pad]
    if mode not in ("reflect", "replicate", "circular"):
        ctx.unsupported(f"padding mode '{mode}' is not supported")
    if mode == "circular" and min(pad, default=0) < 0 and \
            len(pad) % 2 == 0 and len(pad) // 2 <= x.rank:
        # PyTorch crops the negative sides first, then wraps the rest.
        offsets, sizes = [0] * x.rank, list(x.shape)
        for i in range(len(pad) // 2):
            d = x.rank - 1 - i
            cut_low, cut_high = max(-pad[2 * i], 0), max(-pad[2 * i + 1], 0)
            if cut_low + cut_high >= x.shape[d]:
                ctx.unsupported(f"circular padding {pad[2 * i:2 * i + 2]} "
                                f"crops all of a dim of size {x.shape[d]}")
            offsets[d], sizes[d] = cut_low, x.shape[d] - cut_low - cut_high
        x = ctx.b.extract_slice(x, offsets, sizes, [1] * x.rank)
        pad = [max(p, 0) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > x.rank or min(pad, default=0) < 0:
        ctx.unsupported(f"bad padding {pad} for a rank-{x.rank} input "
                        f"in mode '{mode}'")
    low = [0] * x.rank
    for i in range(len(pad) // 2):
        d = x.rank - 1 - i
        low[d] = pad[2 * i]
        limit = x.shape[d] - (1 if mode == "reflect" else 0)
        if mode != "replicate" and max(pad[2 * i:2 * i + 2]) > limit:
            ctx.unsupported(f"{mode} padding {pad[2 * i:2 * i + 2]} of a "
                            f"dim of size {x.shape[d]}")

    def body(bb, names, acc):
        at = []
        for d in range(x.rank):
            i = bb.index(d)
            if ctx.shape[d] == x.shape[d] and not low[d]:
                at.append(i)
                continue
            n = x.shape[d]
            i = _index_op(bb, "subi", i, _index_const(bb, low[d]))
            zero, last = _index_const(bb, 0), _index_const(bb, n - 1)
            below = bb.op(f"arith.cmpi slt, {i}, {zero} : index")
            above = bb.op(f"arith.cmpi sgt, {i}, {last} : index")
            if mode == "replicate":
                under, over = zero, last
            elif mode == "reflect":
                under = _index_op(bb, "subi", zero, i)
                over = _index_op(bb, "subi", _index_const(bb, 2 * (n - 1)),
                                 i)
            else:
                under = _index_op(bb, "addi", i, _index_const(bb, n))
                over = _index_op(bb, "subi", i, _index_const(bb, n))
            i = bb.select(below, under, bb.select(above, over, i, "index"),
                          "index")
            at.append(i)
        return _lookup(bb, x, at)

    return ctx.b.generic(ctx.shape, x.dtype, [], body, hint=ctx.hint)


@_handles("aten.constant_pad_nd.default")
def _constant_pad_nd(ctx, x, pad, value=0):
    return _constant_pad(ctx, x, pad, value)


def _constant_pad(ctx, x, pad, value):
    """``pad`` = (last dim low, last dim high, previous dim low, ...):
    negative amounts crop (extract_slice), positive ones surround the
    input with ``value`` (fill + insert_slice)."""
    x = ctx.tensor(x)
    pad = [int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > x.rank:
        ctx.unsupported(f"bad padding {pad} for a rank-{x.rank} input")
    low, high = [0] * x.rank, [0] * x.rank
    for i in range(len(pad) // 2):
        low[x.rank - 1 - i], high[x.rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    if any(lo < 0 or hi < 0 for lo, hi in zip(low, high)):
        offsets = [max(-lo, 0) for lo in low]
        sizes = [s - max(-lo, 0) - max(-hi, 0)
                 for s, lo, hi in zip(x.shape, low, high)]
        if all(s > 0 for s in sizes):
            x = ctx.b.extract_slice(x, offsets, sizes, [1] * x.rank)
        else:
            x = None
    filled = ctx.b.filled(ctx.shape, ctx.dtype, value)
    if x is None:
        return filled
    if x.shape == ctx.shape:
        return x
    return ctx.b.insert_slice(x, filled, [max(lo, 0) for lo in low])


def _guarded_lookup(bb, table, indices, guarded):
    """_lookup of ``table`` at ``indices``, where the positions listed in
    ``guarded`` were computed in the model (no check of the data bounds
    them) and may fall outside their dimension, where PyTorch raises: such
    a read takes entry 0 instead and gives NaN (0 for integers), so that the
    loss shows it and neither the read nor its gradient's scatter leaves the
    table."""
    if not guarded:
        return _lookup(bb, table, indices)
    indices, inside = list(indices), None
    for k in guarded:
        ok = bb.op(f"arith.cmpi ult, {indices[k]}, "
                   f"{_index_const(bb, table.shape[k])} : index", "i")
        indices[k] = bb.select(ok, indices[k], _index_const(bb, 0), "index")
        inside = ok if inside is None else bb.binary("arith.andi", inside,
                                                     ok, "i1")
    t = table.dtype
    return bb.select(inside, _lookup(bb, table, indices),
                     bb.const(math.nan if is_float(t) else 0, t), t)


def _lookup(bb, table, indices):
    return bb.op(f"tensor.extract {table.name}[{', '.join(indices)}] : "
                 f"{table.type}", "v")


def _wrapped_index(bb, value, dtype, size):
    """An integer index scalar as an ``index``, negative ones counted from
    the end (``size`` + value)."""
    i = _to_index(bb, value, dtype)
    negative = bb.op(f"arith.cmpi slt, {i}, {_index_const(bb, 0)} : index")
    return bb.select(negative, _index_op(bb, "addi", i, _index_const(
        bb, size)), i, "index")


def _index_tensor(ctx, index, what):
    index = ctx.tensor(index)
    if is_float(index.dtype) or index.dtype == "i1":
        ctx.unsupported(f"{what} must be an integer tensor (boolean masks "
                        "are not supported)")
    return index


# -- resampling -----------------------------------------------------------


def _source_ratio(size_in, size_out, align_corners, scale, real):
    """Input positions per output position (area_pixel_compute_scale)."""
    if align_corners:
        return real(size_in - 1) / real(size_out - 1) if size_out > 1 \
            else real(0)
    return real(1) / real(scale) if scale else real(size_in) / real(size_out)


# PyTorch's cubic convolution (A = -0.75: upsample_bicubic2d and
# grid_sample's bicubic mode) as polynomials in the distance d, highest
# power first: for the near taps (d < 1) and the far ones (1 <= d < 2).
_CUBIC_A = -0.75
_CUBIC_NEAR = (_CUBIC_A + 2, -(_CUBIC_A + 3), 0.0, 1.0)
_CUBIC_FAR = (_CUBIC_A, -5 * _CUBIC_A, 8 * _CUBIC_A, -4 * _CUBIC_A)


def _cubic_convolution(d, near, mul, add, const):
    """The cubic convolution's weight at distance ``d`` (Horner's rule) in
    the arithmetic ``mul``, ``add`` and ``const`` give: NumPy scalars for
    interpolation weights at export, IR values in a kernel."""
    coefficients = _CUBIC_NEAR if near else _CUBIC_FAR
    value = const(coefficients[0])
    for c in coefficients[1:]:
        value = mul(value, d)
        if c:
            value = add(value, const(c))
    return value


def _interpolation_weights(size_in, size_out, mode, align_corners, scale,
                           real):
    """The (size_out, size_in) matrix A of one spatial dimension, out = A
    in: PyTorch's source indices (area_pixel_compute_source_index,
    nearest_idx) in the input's precision ``real``. ``scale`` is the
    scale factor the call gave (None: the sizes' ratio)."""
    weights = np.zeros((size_out, size_in))
    one = real(1)
    if mode == "cubic":
        # upsample_bicubic2d: four taps of the cubic convolution (A =
        # -0.75) around floor(src), indices clamped to the edges, the
        # source index not clamped at 0.
        ratio = _source_ratio(size_in, size_out, align_corners, scale, real)

        def near(x):
            return _cubic_convolution(x, True, operator.mul, operator.add,
                                      real)

        def far(x):
            return _cubic_convolution(x, False, operator.mul, operator.add,
                                      real)

        for i in range(size_out):
            src = ratio * real(i) if align_corners else \
                ratio * (real(i) + real(0.5)) - real(0.5)
            base = int(math.floor(src))
            t = src - real(base)
            taps = (far(t + one), near(t), near(one - t), far(one - t + one))
            for k, w in enumerate(taps):
                weights[i, min(max(base - 1 + k, 0), size_in - 1)] += w
        return weights
    if mode == "linear":
        ratio = _source_ratio(size_in, size_out, align_corners, scale, real)
        for i in range(size_out):
            src = ratio * real(i) if align_corners else max(
                ratio * (real(i) + real(0.5)) - real(0.5), real(0))
            i0 = min(int(src), size_in - 1)
            i1 = i0 + (1 if i0 < size_in - 1 else 0)
            frac = src - real(i0)
            weights[i, i0] += one - frac
            weights[i, i1] += frac
        return weights
    ratio = _source_ratio(size_in, size_out, False, scale, real)
    for i in range(size_out):
        if mode == "nearest-exact":
            src = int(math.floor((real(i) + real(0.5)) * ratio))
        elif size_out == size_in:
            src = i
        elif size_out == 2 * size_in:
            src = i >> 1
        else:
            src = int(math.floor(real(i) * ratio))
        weights[i, min(src, size_in - 1)] = 1.0
    return weights


# -- recurrent layers -----------------------------------------------------
# nn.LSTM, nn.GRU and nn.RNN unrolled over the (fixed) sequence: per layer
# and direction the input's projection for every step is one gemm, then
# each step a gemm of the hidden state and the gate arithmetic, as
# PyTorch's cells compute them.

_RNN_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _rnn(ctx, kind, x, hx, params, has_biases, num_layers, dropout, train,
         bidirectional, batch_first):
    x = ctx.tensor(x)
    _require_float(ctx, x)
    t = x.dtype
    unbatched = x.rank == 2
    if unbatched:
        x = ctx.b.reshape(x, (x.shape[0], 1, x.shape[1]))
    elif batch_first:
        x = ctx.b.transpose(x, [1, 0, 2])
    steps, batch = x.shape[0], x.shape[1]
    directions = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    if len(params) != num_layers * directions * per:
        ctx.unsupported("recurrent layers with projections (proj_size) are "
                        "not supported")
    hidden = ctx.tensor(params[1]).shape[1]
    states = [ctx.tensor(h) for h in hx]
    if unbatched:
        states = [ctx.b.reshape(h, (h.shape[0], 1, h.shape[1]))
                  for h in states]
    finals = [[] for _ in states]
    for layer in range(num_layers):
        outputs = []
        for d in range(directions):
            k = layer * directions + d
            weights = [ctx.tensor(p) for p in params[k * per:(k + 1) * per]]
            _require_float(ctx, *weights)
            start = [_rnn_state(ctx, h, k) for h in states]
            sequence, last = _rnn_direction(ctx, kind, x, weights, start,
                                            reverse=d == 1)
            outputs.append(sequence)
            for slot, value in zip(finals, last):
                slot.append(ctx.b.reshape(value, (1, batch, hidden)))
        x = outputs[0] if directions == 1 else _joined(
            ctx, outputs, 2, (steps, batch, directions * hidden), t)
        # In training, each layer's output but the last's goes to the next
        # under a dropout, as PyTorch's.
        if dropout and train and layer + 1 < num_layers:
            x = _dropped(ctx, x, dropout)
    out = x
    if unbatched:
        out = ctx.b.reshape(out, (steps, out.shape[2]))
    elif batch_first:
        out = ctx.b.transpose(out, [1, 0, 2])
    results = [out]
    for slot in finals:
        joined = _joined(ctx, slot, 0, (len(slot), batch, hidden), t)
        results.append(ctx.b.reshape(joined, (len(slot), hidden))
                       if unbatched else joined)
    return tuple(results)


def _rnn_state(ctx, h, k):
    """Layer-direction ``k``'s [B, H] initial state of [L*D, B, H]."""
    piece = ctx.b.extract_slice(h, [k, 0, 0], [1, *h.shape[1:]], [1, 1, 1])
    return ctx.b.reshape(piece, h.shape[1:])


def _rnn_direction(ctx, kind, x, weights, state, reverse):
    """One layer-direction over [T, B, I] ``x``: ([T, B, H] outputs, its
    final states)."""
    steps, batch = x.shape[0], x.shape[1]
    w_ih, w_hh = weights[0], weights[1]
    b_ih, b_hh = (weights[2], weights[3]) if len(weights) == 4 else (None,
                                                                     None)
    width = w_ih.shape[0]
    t = x.dtype
    projected = ctx.b.matmul(ctx.b.reshape(x, (steps * batch, x.shape[2])),
                             w_ih, transpose_b=True, hint="rnn_x")
    if b_ih is not None:
        projected = _plus_row(ctx, projected, b_ih)
    projected = ctx.b.reshape(projected, (steps, batch, width))
    outputs = [None] * steps
    for step in (reversed(range(steps)) if reverse else range(steps)):
        xw = ctx.b.reshape(ctx.b.extract_slice(
            projected, [step, 0, 0], [1, batch, width], [1, 1, 1]),
            (batch, width))
        hw = ctx.b.matmul(state[0], w_hh, transpose_b=True, hint="rnn_h")
        if b_hh is not None:
            hw = _plus_row(ctx, hw, b_hh)
        state = _rnn_cell(ctx, kind, xw, hw, state, t)
        outputs[step] = ctx.b.reshape(state[0], (1, batch,
                                                 state[0].shape[1]))
    return _joined(ctx, outputs, 0, (steps, batch, state[0].shape[1]),
                   t), state


def _plus_row(ctx, m, row):
    return ctx.elementwise([m, row], lambda bb, xs: bb.binary(
        "arith.addf", xs[0][0], xs[1][0], m.dtype), shape=m.shape,
        dtype=m.dtype)


def _rnn_cell(ctx, kind, xw, hw, state, t):
    """The new states from the step's input and hidden projections
    ([B, G*H] each, gates in PyTorch's order)."""
    hidden = hw.shape[1] // _RNN_GATES[kind]
    shape = (hw.shape[0], hidden)

    def gate(v, i):
        return ctx.b.extract_slice(v, [0, i * hidden], list(shape), [1, 1])

    def each(operands, fn):
        return ctx.elementwise(operands, lambda bb, xs: fn(
            bb, *[n for n, _ in xs]), shape=shape, dtype=t)

    def add(bb, a, b):
        return bb.binary("arith.addf", a, b, t)

    def mul(bb, a, b):
        return bb.binary("arith.mulf", a, b, t)

    if kind in ("rnn_tanh", "rnn_relu"):
        return [each([xw, hw], lambda bb, a, b: bb.unary(
            "math.tanh", add(bb, a, b), t) if kind == "rnn_tanh" else
            bb.binary("arith.maximumf", add(bb, a, b), bb.const(0.0, t),
                      t))]
    if kind == "lstm":
        i, f, g, o = (each([gate(xw, k), gate(hw, k)], add) for k in range(4))
        c = each([f, state[1], i, g], lambda bb, f_, c_, i_, g_: add(
            bb, mul(bb, _sigmoid(bb, f_, t), c_),
            mul(bb, _sigmoid(bb, i_, t), bb.unary("math.tanh", g_, t))))
        h = each([o, c], lambda bb, o_, c_: mul(
            bb, _sigmoid(bb, o_, t), bb.unary("math.tanh", c_, t)))
        return [h, c]
    # GRU: r and z from both projections; n = tanh(x_n + r (W_hn h + b_hn)).
    r, z = (each([gate(xw, k), gate(hw, k)], add) for k in range(2))
    n = each([gate(xw, 2), r, gate(hw, 2)], lambda bb, xn, r_, hn: bb.unary(
        "math.tanh", add(bb, xn, mul(bb, _sigmoid(bb, r_, t), hn)), t))
    h = each([z, n, state[0]], lambda bb, z_, n_, h_: add(
        bb, n_, mul(bb, _sigmoid(bb, z_, t), bb.binary("arith.subf", h_, n_,
                                                       t))))
    return [h]


@_handles("aten.lstm.input")
def _lstm(ctx, x, hx, params, *flags):
    return _rnn(ctx, "lstm", x, hx, params, *flags)


@_handles("aten.gru.input")
def _gru(ctx, x, hx, params, *flags):
    return _rnn(ctx, "gru", x, [hx], params, *flags)


@_handles("aten.rnn_tanh.input", "aten.rnn_relu.input")
def _vanilla_rnn(ctx, x, hx, params, *flags):
    kind = op_name(ctx.node).split(".")[1]
    return _rnn(ctx, kind, x, [hx], params, *flags)


@_handles("aten.grid_sampler_2d.default", "aten.grid_sampler.default")
def _grid_sampler(ctx, x, grid, interpolation, padding, align_corners):
    """F.grid_sample on [N, C, H, W] at the [N, Ho, Wo, 2] grid's (x, y)
    in [-1, 1]: bilinear (the four neighbours' lookups weighted by the
    distances, so the gradient reaches the input as a scatter-add and the
    grid through the weights), nearest (halves to even, no gradient to
    the grid) or bicubic (the 4 x 4 neighbours weighted by the cubic
    convolution, A = -0.75, of the distances: GLM-4V resamples its
    position embeddings so); zeros or border padding."""
    x, grid = ctx.tensor(x), ctx.tensor(grid)
    _require_float(ctx, x, grid)
    if x.rank != 4:
        ctx.unsupported("only 2-d grid sampling ([N, C, H, W]) is supported")
    if interpolation not in (0, 1, 2) or padding not in (0, 1):
        ctx.unsupported("only bilinear, nearest and bicubic sampling with "
                        "zeros or border padding are supported")
    t = x.dtype
    n, c, height, width = x.shape
    out = (n, c, grid.shape[1], grid.shape[2])
    gx, gy = (ctx.b.reshape(p, grid.shape[:3])
              for p in _pieces(ctx, grid, 3, [1, 1]))

    def body(bb, names, acc):
        def f(v):
            return bb.const(float(v), t)

        def clamped(p, size):
            return bb.binary("arith.minimumf", bb.binary(
                "arith.maximumf", p, f(0), t), f(size - 1), t)

        def coordinate(g, size, clamp=True):
            # [-1, 1] to pixels: the corners' centres (align_corners) or
            # the corners' edges; border padding clamps into the image
            # (bicubic: each tap's position).
            if align_corners:
                p = bb.binary("arith.mulf", bb.binary("arith.addf", g, f(1),
                                                      t), f((size - 1) / 2),
                              t)
            else:
                p = bb.binary("arith.subf", bb.binary(
                    "arith.mulf", bb.binary("arith.addf", g, f(1), t),
                    f(size / 2), t), f(0.5), t)
            return clamped(p, size) if padding == 1 and clamp else p

        def cubic(d, near):
            return _cubic_convolution(
                d, near, lambda a, b: bb.binary("arith.mulf", a, b, t),
                lambda a, b: bb.binary("arith.addf", a, b, t), f)

        def taps(p, size):
            """The four (position, weight) taps around pixel position p."""
            base = bb.unary("math.floor", p, t)
            frac = bb.binary("arith.subf", p, base, t)
            rest = bb.binary("arith.subf", f(1), frac, t)
            weights = [cubic(bb.binary("arith.addf", frac, f(1), t), False),
                       cubic(frac, True), cubic(rest, True),
                       cubic(bb.binary("arith.addf", rest, f(1), t), False)]
            result = []
            for offset, weight in zip((-1, 0, 1, 2), weights):
                q = bb.binary("arith.addf", base, f(offset), t)
                result.append((clamped(q, size) if padding == 1 else q,
                               weight))
            return result

        def bicubic(px, py):
            total = f(0)
            for cy, wy in taps(py, height):
                row = f(0)
                for cx, wx in taps(px, width):
                    value, inside = at(cx, cy)
                    row = bb.binary("arith.addf", row, bb.select(
                        inside, bb.binary("arith.mulf", value, wx, t), f(0),
                        t), t)
                total = bb.binary("arith.addf", total, bb.binary(
                    "arith.mulf", row, wy, t), t)
            return total

        def at(ix, iy):
            """x at integer-valued float positions: (value, inside)."""
            checks, index = [], []
            for v, size in ((iy, height), (ix, width)):
                checks.append(bb.op(f"arith.cmpf oge, {v}, {f(0)} : {t}"))
                checks.append(bb.op(
                    f"arith.cmpf ole, {v}, {f(size - 1)} : {t}"))
                safe = bb.binary("arith.minimumf", bb.binary(
                    "arith.maximumf", v, f(0), t), f(size - 1), t)
                index.append(_to_index(bb, bb.op(
                    f"arith.fptosi {safe} : {t} to i64", "i"), "i64"))
            value = _lookup(bb, x, [bb.index(0), bb.index(1), *index])
            return value, _all_of(bb, checks)

        if interpolation == 2:
            return bicubic(coordinate(names[0], width, False),
                           coordinate(names[1], height, False))
        px, py = coordinate(names[0], width), coordinate(names[1], height)
        if interpolation == 1:
            value, inside = at(bb.unary("math.roundeven", px, t),
                               bb.unary("math.roundeven", py, t))
            return bb.select(inside, value, f(0), t)
        x0, y0 = bb.unary("math.floor", px, t), bb.unary("math.floor", py, t)
        x1, y1 = (bb.binary("arith.addf", v, f(1), t) for v in (x0, y0))
        total = f(0)
        for cx, wx in ((x0, bb.binary("arith.subf", x1, px, t)),
                       (x1, bb.binary("arith.subf", px, x0, t))):
            for cy, wy in ((y0, bb.binary("arith.subf", y1, py, t)),
                           (y1, bb.binary("arith.subf", py, y0, t))):
                value, inside = at(cx, cy)
                term = bb.binary("arith.mulf", value, bb.binary(
                    "arith.mulf", wx, wy, t), t)
                total = bb.binary("arith.addf", total, bb.select(
                    inside, term, f(0), t), t)
        return total

    return ctx.b.generic(out, t, [(gx, [0, 2, 3]), (gy, [0, 2, 3])], body,
                         hint=ctx.hint)


@_handles("aten.affine_grid_generator.default")
def _affine_grid(ctx, theta, size, align_corners):
    """F.affine_grid for 2-d sizes: each output pixel's normalised (x, y,
    1) times theta^T ([N, 2, 3]), a product with a constant base grid."""
    theta = ctx.tensor(theta)
    _require_float(ctx, theta)
    if len(size) != 4:
        ctx.unsupported("only 2-d affine grids are supported")
    n, _, height, width = (int(v) for v in size)

    def steps(count):
        if align_corners:
            return np.linspace(-1.0, 1.0, count) if count > 1 else \
                np.zeros(1)
        return (np.arange(count) * 2.0 + 1.0) / count - 1.0

    base = np.stack(np.broadcast_arrays(
        steps(width)[None, :], steps(height)[:, None],
        np.ones((height, width))), axis=-1)
    t = theta.dtype
    base = ctx.b.dense(base, t)

    def mul_add(bb, names, acc):
        return bb.binary("arith.addf", acc, bb.binary(
            "arith.mulf", names[0], names[1], t), t)

    return ctx.b.generic((n, height, width, 2), t,
                         [(base, [1, 2, 4]), (theta, [0, 3, 4])], mul_add,
                         reductions=1, init=ctx.b.filled(
                             (n, height, width, 2), t, 0.0), hint=ctx.hint)


def _upsample(mode):
    """F.interpolate's nearest, nearest-exact, (bi/tri)linear and bicubic
    modes: per spatial dimension, a product with the constant interpolation
    matrix (_interpolation_weights), so the gradient is the transposed
    product."""
    def handler(ctx, x, output_size, *rest):
        x = ctx.tensor(x)
        if not is_float(x.dtype):
            ctx.unsupported("only float inputs are supported")
        smooth = mode in ("linear", "cubic")
        align_corners = rest[0] if smooth else False
        scales = rest[1] if smooth else rest[0]
        spatial = x.rank - 2
        dtype = ctx.val.dtype
        real = np.float64 if dtype == torch.float64 else np.float32
        for d in reversed(range(spatial)):
            dim = 2 + d
            size_in, size_out = x.shape[dim], ctx.shape[dim]
            scale = scales[d] if scales else None
            weights = _interpolation_weights(size_in, size_out, mode,
                                             align_corners, scale, real)
            if size_in == size_out and np.array_equal(
                    weights, np.eye(size_in)):
                continue
            x = _along(ctx, x, dim, ctx.tensor(Const(torch.tensor(
                weights, dtype=dtype))))
        return x
    return handler


def _along(ctx, x, dim, weights):
    """``weights`` (out, in) applied to dimension ``dim`` of ``x``."""
    last = x.rank - 1
    perm = [d for d in range(x.rank) if d != dim] + [dim]
    moved = ctx.b.transpose(x, perm) if dim != last else x
    rows = math.prod(moved.shape[:-1])
    flat = ctx.b.reshape(moved, (rows, moved.shape[-1]))
    y = ctx.b.matmul(flat, weights, transpose_b=True)
    y = ctx.b.reshape(y, moved.shape[:-1] + (weights.shape[0],))
    if dim == last:
        return y
    inverse = [perm.index(d) for d in range(x.rank)]
    return ctx.b.transpose(y, inverse)


for _d in (1, 2, 3):
    _handles(f"aten.upsample_nearest{_d}d.vec")(_upsample("nearest"))
    _handles(f"aten._upsample_nearest_exact{_d}d.vec")(
        _upsample("nearest-exact"))
_handles("aten.upsample_linear1d.vec", "aten.upsample_bilinear2d.vec",
         "aten.upsample_trilinear3d.vec")(_upsample("linear"))
_handles("aten.upsample_bicubic2d.vec")(_upsample("cubic"))


def _antialiased(op):
    """F.interpolate's bilinear and bicubic modes with antialias=True
    (SigLIP 2 resizes its position embeddings so): a triangle or cubic
    filter widened by the scale when shrinking, its weights normalised
    over the input. Per spatial dimension a product with the matrix that
    PyTorch's own kernel ``op`` gives for the unit vectors of that
    dimension (the other one kept at size 2, which it leaves as it is; at
    size 1 the kernel writes zeros)."""
    def handler(ctx, x, output_size, align_corners, scales):
        x = ctx.tensor(x)
        if not is_float(x.dtype):
            ctx.unsupported("only float inputs are supported")
        dtype = ctx.val.dtype
        for dim in (3, 2):
            size_in, size_out = x.shape[dim], ctx.shape[dim]
            unit = torch.eye(size_in, dtype=dtype)
            shape, size, factors = [size_in, 1, 2, 2], [2, 2], [1.0, 1.0]
            shape[dim] = size_in
            size[dim - 2] = size_out
            if scales:
                factors[dim - 2] = scales[dim - 2]
            # Unit vector i along dim, constant along the other dimension.
            basis = unit.reshape([size_in, 1] + [
                size_in if d == dim else 1 for d in (2, 3)]).expand(shape)
            with torch.no_grad():
                columns = op(basis.contiguous(), None if scales else size,
                             align_corners, factors if scales else None)
            weights = columns.select(5 - dim, 0).reshape(size_in,
                                                          size_out).T
            if size_in == size_out and torch.equal(weights, unit):
                continue
            x = _along(ctx, x, dim, ctx.tensor(Const(weights.contiguous())))
        return x
    return handler


_handles("aten._upsample_bilinear2d_aa.vec")(
    _antialiased(torch.ops.aten._upsample_bilinear2d_aa.vec))
_handles("aten._upsample_bicubic2d_aa.vec")(
    _antialiased(torch.ops.aten._upsample_bicubic2d_aa.vec))


class Complex:
    """A complex tensor as its real and imaginary parts (Values or Consts;
    ``imag`` None where it is zero): what the FFTs, ``view_as_complex``,
    ``polar`` and ``complex`` make; views, products and sums of them are
    taken part by part (_translate_complex), and ``real``, ``imag`` and
    ``view_as_real`` read them."""

    def __init__(self, real, imag):
        self.real = real
        self.imag = imag

    def __repr__(self):
        return "a complex tensor"


# Ops taken part by part on a complex tensor: views, copies, joins.
_PART_WISE = frozenset(
    _SLICING_VIEWS + _RESHAPING_VIEWS + _TRANSPOSING_VIEWS + (
        "aten.expand.default", "aten.clone.default", "aten._to_copy.default",
        "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device",
        "aten.type_as.default", "aten.cat.default", "aten.stack.default",
        "aten.split.Tensor", "aten.split_with_sizes.default",
        "aten.chunk.default", "aten.unbind.int", "aten.repeat.default",
        "aten.flip.default", "aten.roll.default", "aten.neg.default",
        "aten.lift_fresh_copy.default"))
# Handlers that read Complex operands themselves.
_TAKES_COMPLEX = frozenset((
    "aten.real.default", "aten.imag.default", "aten.view_as_real.default",
    "aten.mul.Tensor", "aten.mul.Scalar", "aten.add.Tensor",
    "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar",
    "aten.div.Scalar", "aten.div.Tensor", "aten.fft_fft.default",
    "aten.fft_fftn.default"))


def _is_complex_const(x):
    return isinstance(x, Const) and x.tensor.is_complex()


def _as_complex(x):
    """Complex operand ``x`` (a Complex, or a folded complex constant) as
    a Complex; other operands as they are."""
    if _is_complex_const(x):
        return Complex(Const(x.tensor.real.contiguous()),
                       Const(x.tensor.imag.contiguous()))
    return x


def _translate_complex(ctx, name, handler, args, kwargs):
    """An op with a complex operand: part by part (_PART_WISE), by its own
    handler (_TAKES_COMPLEX), or, for a conversion to a real type, of the
    real part (as PyTorch's, which warns that it drops the imaginary)."""
    args, kwargs = pytree.tree_map(_as_complex, (args, kwargs))
    result_complex = any(getattr(v, "is_complex", lambda: False)()
                         for v in pytree.tree_leaves(ctx.val))
    if name in _TAKES_COMPLEX:
        return handler(ctx, *args, **kwargs)
    if name in _PART_WISE and not result_complex and name.startswith(
            ("aten.to.", "aten._to_copy.", "aten.type_as.")):
        real_args, real_kwargs = _part(ctx, (args, kwargs), 0)
        return handler(ctx, *real_args, **real_kwargs)
    if name not in _PART_WISE or not result_complex:
        ctx.unsupported(
            "complex operands are supported in views, copies, cat/stack, "
            "products, sums and differences, real/imag and view_as_real")
    parts = []
    for which in (0, 1):
        part_args, part_kwargs = _part(ctx, (args, kwargs), which)
        result = handler(ctx, *part_args, **part_kwargs)
        ctx.check(result)
        parts.append(result)
    real, imag = parts
    if isinstance(real, (list, tuple)):
        return type(real)(Complex(a, b) for a, b in zip(real, imag))
    return Complex(real, imag)


def _part(ctx, tree, which):
    """``tree`` with each Complex replaced by its real (``which`` 0) or
    imaginary part (zeros where it has none)."""
    def pick(x):
        if not isinstance(x, Complex):
            return x
        if which == 0:
            return x.real
        if x.imag is not None:
            return x.imag
        real = ctx.tensor(x.real)
        return ctx.b.filled(real.shape, real.dtype, 0.0)
    return pytree.tree_map(pick, tree)


def _complex_parts(ctx, x):
    """(real, imag) of operand ``x``: a Complex's parts, or a real
    tensor's (or scalar's) with None for its imaginary part."""
    if isinstance(x, Complex):
        return x.real, x.imag
    return x, None


def _complex_arith(ctx, kind, a, b, alpha=1):
    """a + alpha b, a - alpha b or a * b with a complex operand, part by
    part: (ar br - ai bi) + i (ar bi + ai br) for a product."""
    (ar, ai), (br, bi) = _complex_parts(ctx, a), _complex_parts(ctx, b)
    t = ctx.dtype

    def combine(terms):
        """The sum of signed products (sign, x, y) of the present parts, or
        None when none is."""
        terms = [(sign, x, y) for sign, x, y in terms
                 if x is not None and y is not None]
        if not terms:
            return None
        operands = [v for _, x, y in terms for v in (x, y)]

        def fn(bb, xs):
            total = None
            for k, (sign, _, _) in enumerate(terms):
                p = bb.binary("arith.mulf", _cast(bb, xs[2 * k], t),
                              _cast(bb, xs[2 * k + 1], t), t)
                if total is None:
                    total = p if sign > 0 else bb.unary("arith.negf", p, t)
                else:
                    total = bb.binary("arith.addf" if sign > 0 else
                                      "arith.subf", total, p, t)
            return total
        return ctx.elementwise(operands, fn)

    if kind == "mul":
        return Complex(combine([(1, ar, br), (-1, ai, bi)]),
                       combine([(1, ar, bi), (1, ai, br)]))
    sign = 1 if kind == "add" else -1

    factor = float(sign * alpha)

    def plus(x, y):
        """x + factor * y of the parts present (broadcast to the result)."""
        if y is None:
            return None if x is None else ctx.elementwise(
                [x], lambda bb, xs: _cast(bb, xs[0], t))
        if x is None:
            return ctx.elementwise([y], lambda bb, xs: bb.binary(
                "arith.mulf", _cast(bb, xs[0], t), bb.const(factor, t), t))
        return ctx.elementwise([x, y], lambda bb, xs: bb.binary(
            "arith.addf", _cast(bb, xs[0], t), bb.binary(
                "arith.mulf", _cast(bb, xs[1], t), bb.const(factor, t), t),
            t))
    return Complex(plus(ar, br), plus(ai, bi))


@_handles("aten.view_as_complex.default")
def _view_as_complex(ctx, x):
    """[..., 2] as the complex [...]: its last dim's two elements the
    real and imaginary parts."""
    x = ctx.tensor(x)
    real, imag = _pieces(ctx, x, x.rank - 1, [1, 1])
    return Complex(ctx.b.reshape(real, ctx.shape),
                   ctx.b.reshape(imag, ctx.shape))


@_handles("aten.view_as_real.default")
def _view_as_real(ctx, x):
    """A complex [...] as [..., 2] (real, imaginary)."""
    real, imag = _complex_parts(ctx, x)
    real = ctx.tensor(real)
    imag = ctx.b.filled(real.shape, real.dtype, 0.0) if imag is None \
        else ctx.tensor(imag)
    return _joined(ctx, [ctx.b.reshape(part, real.shape + (1,))
                         for part in (real, imag)], real.rank, ctx.shape,
                   ctx.dtype)


@_handles("aten.polar.default")
def _polar(ctx, magnitude, angle):
    """magnitude (cos angle + i sin angle)."""
    t = ctx.dtype

    def part(fn):
        return ctx.elementwise([magnitude, angle], lambda bb, xs: bb.binary(
            "arith.mulf", _cast(bb, xs[0], t), bb.unary(
                fn, _cast(bb, xs[1], t), t), t))
    return Complex(part("math.cos"), part("math.sin"))


@_handles("aten.complex.default")
def _complex(ctx, real, imag):
    t = ctx.dtype
    return Complex(*(ctx.elementwise([v], lambda bb, xs: _cast(bb, xs[0], t))
                     for v in (real, imag)))


def _dft_along(ctx, value, dim, norm):
    """The discrete Fourier transform of Complex ``value`` along ``dim``:
    with W = C - iS (C = cos, S = sin of 2 pi a j / n), the real part
    C re + S im and the imaginary part C im - S re, each a product with a
    constant matrix (so the gradient is the transposed product)."""
    re, im = value.real, value.imag
    n, t = re.shape[dim], re.dtype
    scale = {None: 1.0, "backward": 1.0, "ortho": 1.0 / math.sqrt(n),
             "forward": 1.0 / n}.get(norm)
    if scale is None:
        ctx.unsupported(f"FFT normalisation '{norm}'")
    angle = 2 * math.pi * np.outer(np.arange(n), np.arange(n)) / n
    cos = ctx.b.dense(scale * np.cos(angle), t)
    sin = ctx.b.dense(scale * np.sin(angle), t)

    def combine(first, second, sign):
        return ctx.elementwise([first, second], lambda bb, xs: bb.binary(
            "arith.addf" if sign > 0 else "arith.subf", xs[0][0], xs[1][0],
            t), shape=re.shape, dtype=t)

    c_re = _along(ctx, re, dim, cos)
    if im is None:
        minus_sin = ctx.b.dense(-scale * np.sin(angle), t)
        return Complex(c_re, _along(ctx, re, dim, minus_sin))
    s_re = _along(ctx, re, dim, sin)
    c_im, s_im = _along(ctx, im, dim, cos), _along(ctx, im, dim, sin)
    return Complex(combine(c_re, s_im, +1), combine(c_im, s_re, -1))


@_handles("aten.fft_fftn.default", "aten.fft_fft.default")
def _fft(ctx, x, *args, **kwargs):
    """fft.fftn (and fft.fft) of a real or complex tensor over its dims
    (FNet mixes tokens that way), as one DFT matrix product per dim; no
    resizing."""
    one_d = op_name(ctx.node) == "aten.fft_fft.default"
    names = ("n", "dim", "norm") if one_d else ("s", "dim", "norm")
    given = dict(zip(names, args), **kwargs)
    x_in = x
    x = ctx.tensor(x.real if isinstance(x, Complex) else x)
    _require_float(ctx, x)
    dims = given.get("dim")
    if one_d:
        dims = [-1 if dims is None else dims]
        sizes = given.get("n")
        sizes = None if sizes is None else [sizes]
    else:
        sizes = given.get("s")
        dims = list(range(x.rank)) if dims is None else list(dims)
    dims = [_norm_dim(d, x.rank) for d in dims]
    if sizes is not None and list(sizes) != [x.shape[d] for d in dims]:
        ctx.unsupported("an FFT that pads or crops (n or s) is not supported")
    value = Complex(x, None)
    if isinstance(x_in, Complex):
        value = Complex(x, None if x_in.imag is None else ctx.tensor(
            x_in.imag))
    for d in dims:
        value = _dft_along(ctx, value, d, given.get("norm"))
    return value


@_handles("aten.real.default", "aten.imag.default")
def _real_imag(ctx, x):
    imag = op_name(ctx.node) == "aten.imag.default"
    if not isinstance(x, Complex):
        if imag:
            ctx.unsupported("the imaginary part of a real tensor")
        return x
    if not imag:
        return x.real
    return x.imag if x.imag is not None else ctx.b.filled(ctx.shape,
                                                          ctx.dtype, 0.0)


@_handles("aten.gather.default")
def _gather(ctx, x, dim, index, sparse_grad=False):
    """out[i...] = x[i...] with dimension ``dim`` replaced by index[i...]:
    the generic reads the index and extracts from ``x`` (captured; its
    gradient is a scatter-add)."""
    x = ctx.tensor(x)
    index = _index_tensor(ctx, index, "the index")
    dim = _norm_dim(dim, x.rank)
    checked = ctx.translator.note_range(index, x.shape[dim])
    return _gather_along(ctx, x, dim, index, guard=not checked)


def _gather_along(ctx, x, dim, index, guard=False):
    """out[i...] = x[i...] with dimension ``dim`` replaced by index[i...],
    shaped as ``index`` (``guard``: an index computed in the model, see
    _guarded_lookup)."""
    def body(bb, names, acc):
        at = [bb.index(d) for d in range(index.rank)]
        at[dim] = _to_index(bb, names[0], index.dtype)
        return _guarded_lookup(bb, x, at, [dim] if guard else [])

    return ctx.b.generic(index.shape, x.dtype, [(index, list(range(
        index.rank)))], body, hint=ctx.hint)


def _scatter_operands(ctx, what, x, dim, index):
    """(x, index, dim, the index's loops, _outside's flag) of a scatter
    into ``x`` along ``dim``: ``index`` must have x's shape but along
    ``dim``; its positions along ``dim`` become a reduction loop."""
    x = ctx.tensor(x)
    index = _index_tensor(ctx, index, "the index")
    dim = _norm_dim(dim, x.rank)
    if index.rank != x.rank or any(index.shape[d] != x.shape[d]
                                   for d in range(x.rank) if d != dim):
        ctx.unsupported(f"{what} needs an index of the input's shape "
                        f"{list(x.shape)} but along dim {dim}, got "
                        f"{list(index.shape)}")
    outside = _outside(ctx, index, x.shape[dim])
    loops = list(range(x.rank))
    loops[dim] = x.rank
    return x, index, dim, loops, outside


def _outside(ctx, index, bound, negative=False):
    """Whether some value of integer tensor ``index`` lies outside
    [0, ``bound``) ([-bound, bound) with ``negative``): a rank-0 i1
    tensor, for an index computed in the model; None for one known to be
    inside (data, which zb-run checks, or a constant, checked here;
    note_range)."""
    if ctx.translator.note_range(index, bound, negative=negative):
        return None
    t = index.dtype

    def body(bb, names, acc):
        low = bb.const(-bound if negative else 0, t)
        below = bb.op(f"arith.cmpi slt, {names[0]}, {low} : {t}")
        above = bb.op(f"arith.cmpi sge, {names[0]}, "
                      f"{bb.const(bound, t)} : {t}")
        return bb.binary("arith.ori", acc, bb.binary(
            "arith.ori", below, above, "i1"), "i1")

    return ctx.b.generic((), "i1", [(index, list(range(index.rank)))], body,
                         reductions=index.rank,
                         init=ctx.b.filled((), "i1", False), hint="outside")


def _poisoned(ctx, result, flags):
    """``result`` of a write through indices computed in the model, NaN
    in every element where one of ``flags`` (_outside) holds: PyTorch
    raises there, and the loss shows it (the gradients it reaches skip the
    step). An integer result keeps what landed inside."""
    flags = [f for f in flags if f is not None]
    if not flags or not isinstance(result, Value) or \
            not is_float(result.dtype):
        return result
    t = result.dtype

    def fn(bb, xs):
        bad = xs[1][0]
        for flag, _ in xs[2:]:
            bad = bb.binary("arith.ori", bad, flag, "i1")
        return bb.select(bad, bb.const(math.nan, t), xs[0][0], t)

    return ctx.elementwise([result, *flags], fn, shape=result.shape,
                           dtype=t)


@_handles("aten.scatter.value", "aten.scatter.src")
def _scatter(ctx, x, dim, index, src):
    """x with out[i...] at dimension ``dim`` replaced by index[i...] set to
    ``src`` (a scalar, or src[i...]); where several write one element, the
    last along ``dim`` wins (PyTorch leaves that open). One reduction finds
    each element's last writer, a second generic selects; the gradients
    are PyTorch's (below). ``index`` must have x's shape but along
    ``dim``."""
    x, index, dim, loops, outside = _scatter_operands(ctx, "scatter", x,
                                                      dim, index)

    def last(bb, names, acc):
        target = _to_index(bb, names[0], index.dtype)
        hit = bb.op(f"arith.cmpi eq, {target}, {bb.index(dim)} : index")
        j = _as_i64(bb, bb.index(x.rank))
        return bb.select(hit, j, acc, "i64")

    writer = ctx.b.generic(x.shape, "i64", [(index, loops)], last,
                           reductions=1,
                           init=ctx.b.filled(x.shape, "i64", -1),
                           hint="writer")
    scalar = not isinstance(src, (Value, Const))
    if not scalar:
        src = ctx.tensor(src)

    def body(bb, names, acc):
        hit = bb.op(f"arith.cmpi sge, {names[1]}, "
                    f"{bb.const(0, 'i64')} : i64")
        if scalar:
            value = bb.const(src, x.dtype)
        else:
            at = [bb.index(d) for d in range(x.rank)]
            at[dim] = _to_index(bb, bb.select(hit, names[1], bb.const(
                0, "i64"), "i64"), "i64")
            value = _lookup(bb, src, at)
        return bb.select(hit, value, names[0], x.dtype)

    result = ctx.b.generic(x.shape, x.dtype, [(x, list(range(x.rank))),
                                              (writer, list(range(x.rank)))],
                           body, hint=ctx.hint)
    if scalar or not is_float(x.dtype):
        return _poisoned(ctx, result, [outside])
    # PyTorch's gradients: every src element gets the output's at its index
    # (grad.gather(dim, index)), a losing duplicate's too; x's where
    # nothing is written. Those of x where unwritten plus the scattered sum
    # of src, carried by the result.
    if src.shape != index.shape:
        src = ctx.b.extract_slice(src, [0] * src.rank, list(index.shape),
                                  [1] * src.rank)
    kept = ctx.elementwise(
        [x, writer], lambda bb, xs: bb.select(bb.op(
            f"arith.cmpi sge, {xs[1][0]}, {bb.const(0, 'i64')} : i64"),
            bb.const(0.0, x.dtype), xs[0][0], x.dtype),
        shape=x.shape, dtype=x.dtype, hint="unwritten")
    summed = _scattered_sum(ctx, x, dim, index, loops, src)
    carrier = ctx.elementwise([kept, summed], lambda bb, xs: bb.binary(
        "arith.addf", xs[0][0], xs[1][0], x.dtype), shape=x.shape,
        dtype=x.dtype, hint="scatter_grads")
    return _poisoned(ctx, _straight_through(ctx, carrier, result), [outside])


@_handles("aten.masked_scatter.default")
def _masked_scatter(ctx, x, mask, source):
    """x with the elements where ``mask`` (broadcast to x's shape) holds
    replaced, in order, by the leading elements of ``source`` (LLaVA-style
    models merge image features into the text embeddings so). x's
    gradient flows where the mask is false, source's to the elements
    taken (a lookup)."""
    x = ctx.tensor(x)
    mask = ctx.tensor(mask)
    source = ctx.tensor(source)
    if mask.dtype != "i1":
        ctx.unsupported("masked_scatter needs a boolean mask")
    taken = _running_mask_count(ctx, mask, x.shape)
    flat = ctx.b.reshape(source, (source.size,))
    mask, mask_dims = ctx.broadcast(mask, x.shape)

    def body(bb, names, acc):
        value = _lookup(bb, flat, [_taken_place(bb, names[2], flat.size)])
        return bb.select(names[1], value, names[0], x.dtype)

    loops = list(range(x.rank))
    return ctx.b.generic(x.shape, x.dtype, [(x, loops), (mask, mask_dims),
                                            (taken, loops)], body,
                         hint=ctx.hint)


def _running_mask_count(ctx, mask, shape):
    """For each element of the boolean ``mask`` broadcast to ``shape``,
    how many elements up to it in row-major order are true (i64)."""
    flags = ctx.elementwise([mask], lambda bb, xs: _cast(bb, xs[0], "i64"),
                            shape=shape, dtype="i64", hint="flags")
    size = math.prod(shape)
    return ctx.b.reshape(_flat_running_count(
        ctx, ctx.b.reshape(flags, (size,))), shape)


def _taken_place(bb, count, size):
    """The place, in a source of ``size`` rows, of the masked element
    whose running count is ``count``: count - 1, kept inside the source
    (an ``index``; elements not masked read row 0, unused)."""
    place = bb.binary("arith.subi", count, bb.const(1, "i64"), "i64")
    place = bb.binary("arith.maxsi", place, bb.const(0, "i64"), "i64")
    place = bb.binary("arith.minsi", place, bb.const(size - 1, "i64"),
                      "i64")
    return _to_index(bb, place, "i64")


def _mask_rank(ctx, x, dim, mask):
    """The rank of boolean index ``mask`` over x's dims from ``dim`` on,
    whose shape it must have."""
    k = mask.rank
    if mask.shape != x.shape[dim:dim + k]:
        ctx.unsupported(f"a boolean index of shape {list(mask.shape)} "
                        f"must match the indexed dims "
                        f"{list(x.shape[dim:dim + k])}")
    return k


def _masked_put(ctx, x, dim, mask, values, accumulate):
    """x[..., mask] = values (or +=; ``values`` of x's type) for a boolean
    ``mask`` over x's dims from ``dim`` on: a value shared by every masked
    element is a select;
    one row of ``values`` per masked element (Kosmos-2 places its image
    embeddings so) is taken in order by the mask's running count, as
    masked_scatter does (the mask then over x's leading dims)."""
    t = x.dtype
    k = _mask_rank(ctx, x, dim, mask)
    after = x.shape[dim + k:]
    selected = dim + 1 + len(after)  # [before..., count, after...]
    if values.rank > selected:
        ctx.unsupported(f"values of shape {list(values.shape)} for a "
                        f"selection of rank {selected}")
    shape = (1,) * (selected - values.rank) + values.shape
    add = "arith.addf" if is_float(t) else "arith.addi"

    def put(bb, old, value):
        return bb.binary(add, old, value, t) if accumulate else value

    placed = ctx.b.reshape(mask, (1,) * dim + mask.shape + (1,) * len(
        after))
    if shape[dim] == 1:
        shared = ctx.b.reshape(values, shape[:dim] + (1,) * k + shape[
            dim + 1:])
        return ctx.elementwise([x, placed, shared], lambda bb, xs: bb.select(
            xs[1][0], put(bb, xs[0][0], xs[2][0]), xs[0][0], t),
            shape=x.shape, dtype=t)
    if dim:
        ctx.unsupported("one value per masked element needs the boolean "
                        "index first (x[mask] = v, not x[:, mask] = v)")
    rows = ctx.expand(ctx.b.reshape(values, shape), shape)
    taken = _running_mask_count(ctx, mask, mask.shape)

    def body(bb, names, acc):
        at = [_taken_place(bb, names[2], rows.shape[0])] + [
            bb.index(d) for d in range(k, x.rank)]
        value = put(bb, names[0], _lookup(bb, rows, at))
        return bb.select(names[1], value, names[0], t)

    loops = list(range(x.rank))
    return ctx.b.generic(x.shape, t, [(x, loops), (mask, loops[:k]),
                                      (taken, loops[:k])], body,
                         hint=ctx.hint)


@_handles("aten.scatter_add.default")
def _scatter_add(ctx, x, dim, index, src):
    """x plus, at each index[i...] along ``dim``, src[i...] (several adds
    to one element sum): a reduction over the index's positions along
    ``dim``, then x added. The gradient reaches x whole and src as what
    each position added to. ``index`` must have x's shape but along
    ``dim``, and src the index's shape."""
    x, index, dim, loops, outside = _scatter_operands(ctx, "scatter_add",
                                                      x, dim, index)
    src = ctx.tensor(src)
    if src.shape != index.shape:
        ctx.unsupported(f"scatter_add needs src of the index's shape "
                        f"{list(index.shape)}, got {list(src.shape)}")
    t = x.dtype
    add = "arith.addf" if is_float(t) else "arith.addi"
    summed = _scattered_sum(ctx, x, dim, index, loops, src)
    return _poisoned(ctx, ctx.elementwise([x, summed], lambda bb, xs: (
        bb.binary(add, xs[0][0], xs[1][0], t)), shape=x.shape, dtype=t),
        [outside])


def _scattered_sum(ctx, x, dim, index, loops, src):
    """For each element of x, the sum of src[i...] over the positions
    whose index[i...] along ``dim`` lands on it (a reduction along
    ``dim``; ``src`` None counts them)."""
    t = x.dtype
    add = "arith.addf" if is_float(t) else "arith.addi"

    def body(bb, names, acc):
        target = _to_index(bb, names[0], index.dtype)
        hit = bb.op(f"arith.cmpi eq, {target}, {bb.index(dim)} : index")
        one = bb.const(1, t) if src is None else _cast(
            bb, (names[1], src.dtype), t)
        return bb.binary(add, acc, bb.select(hit, one, bb.const(0, t), t),
                         t)

    inputs = [(index, loops)] + ([] if src is None else [(src, loops)])
    return ctx.b.generic(x.shape, t, inputs, body, reductions=1,
                         init=ctx.b.filled(x.shape, t, 0),
                         hint="scatter_add" if src is not None else "hits")


@_handles("aten.scatter_reduce.two")
def _scatter_reduce(ctx, x, dim, index, src, reduce, include_self=True):
    """scatter_reduce's sum and mean: the scattered sum (and count) of
    ``src``, with x's own element counted where ``include_self`` (where
    nothing lands, x stays)."""
    if reduce not in ("sum", "mean"):
        ctx.unsupported(f"scatter_reduce '{reduce}' (only sum and mean)")
    x, index, dim, loops, outside = _scatter_operands(
        ctx, "scatter_reduce", x, dim, index)
    src = ctx.tensor(src)
    if src.shape != index.shape:
        ctx.unsupported("scatter_reduce needs src of the index's shape")
    t = x.dtype
    _require_float(ctx, x)
    summed = _scattered_sum(ctx, x, dim, index, loops, src)
    count = _scattered_sum(ctx, x, dim, index, loops, None)

    def fn(bb, xs):
        own, total, hits = (v for v, _ in xs)
        zero = bb.const(0.0, t)
        landed = bb.op(f"arith.cmpf ogt, {hits}, {zero} : {t}")
        if include_self:
            total = bb.binary("arith.addf", total, own, t)
            hits = bb.binary("arith.addf", hits, bb.const(1.0, t), t)
        if reduce == "mean":
            total = bb.binary("arith.divf", total, bb.select(
                landed, hits, bb.const(1.0, t), t), t)
        return bb.select(landed, total, own, t)

    return _poisoned(ctx, ctx.elementwise([x, summed, count], fn,
                                          shape=x.shape, dtype=t), [outside])


@_handles("aten.index_put.default")
def _index_put(ctx, x, indices, values, accumulate=False):
    """x[indices] = values or += (_put_at). Where an index may repeat, the
    gradients are PyTorch's: every value gets the output's at its place
    (grad[indices]), a value a later one overwrote too; x's where nothing
    is written. The values of _put_at carry the gradients of x with the
    written places cleared, plus the values accumulated there."""
    result = _put_at(ctx, x, indices, values, accumulate)
    shape = ctx.tensor(x).shape
    outside = [_outside(ctx, ctx.tensor(i), shape[d], negative=True)
               for d, i in enumerate(indices)
               if i is not None and ctx.tensor(i).dtype != "i1"]
    if accumulate or not isinstance(values, Value) or \
            not is_float(values.dtype) or not _may_repeat(indices, shape):
        return _poisoned(ctx, result, outside)
    t = ctx.tensor(x).dtype
    cleared = _put_at(ctx, x, indices, ctx.b.filled((), t, 0.0), False)
    carrier = _put_at(ctx, cleared, indices, values, True)
    return _poisoned(ctx, _straight_through(ctx, carrier, result), outside)


def _may_repeat(indices, shape):
    """Whether the index tensors of an index_put into a tensor of ``shape``
    may name one place twice (3 and -1 of 4 rows are one): not for
    constants whose places are distinct, nor for a boolean mask."""
    given = [(i, shape[d]) for d, i in enumerate(indices) if i is not None]
    if any(isinstance(i, Value) and i.dtype == "i1" for i, _ in given):
        return False
    if not all(isinstance(i, Const) for i, _ in given):
        return True
    if any(i.tensor.dtype == torch.bool for i, _ in given):
        return False
    places = torch.broadcast_tensors(*(i.tensor % n for i, n in given))
    flat = torch.stack([p.flatten() for p in places], 1)
    return flat.unique(dim=0).shape[0] != flat.shape[0]


def _put_at(ctx, x, indices, values, accumulate):
    """x[indices] = values (``x[i] = v``, index_copy) or, with
    ``accumulate``, += (``x[i] += v``, index_add): the index tensors
    broadcast together to B; ``values`` broadcast to x[indices]'s shape.
    Each element of x reduces over B's positions: with ``accumulate`` the
    sum of the values that land there (every add counts), otherwise the
    last position that writes it is found first (an integer reduction)
    and its value looked up, x's own where none does; so x's gradient
    flows where nothing is written and the values' to what is kept."""
    x = ctx.tensor(x)
    t = x.dtype
    dims = [d for d, i in enumerate(indices) if i is not None]
    if not dims:
        ctx.unsupported("index_put without an index tensor")
    values = ctx.tensor(values)
    if values.dtype != t:
        values = ctx.elementwise([values], lambda bb, xs: _cast(
            bb, xs[0], t), shape=values.shape, dtype=t)
    first = ctx.tensor(indices[dims[0]])
    if len(dims) == 1 and first.dtype == "i1":
        return _masked_put(ctx, x, dims[0], first, values, accumulate)
    index = [_index_tensor(ctx, indices[d], "an index") for d in dims]
    for i, d in zip(index, dims):
        ctx.translator.note_range(i, x.shape[d], negative=True)
    batch = tuple(torch.broadcast_shapes(*(i.shape for i in index)))
    index = [ctx.expand(i, batch) for i in index]
    rest = [d for d in range(x.rank) if d not in dims]
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    if adjacent:
        before = list(x.shape[:dims[0]])
        shape = before + list(batch) + list(x.shape[dims[-1] + 1:])
    else:
        before, shape = [], list(batch) + [x.shape[d] for d in rest]
    values = ctx.expand(values, shape)
    if before:
        # [before..., B..., after...] -> [B..., before..., after...]
        k, n = len(before), len(batch)
        values = ctx.b.transpose(values, list(range(k, k + n))
                                 + list(range(k)) + list(range(
                                     k + n, values.rank)))
    # values: [B..., rest...]; the loops: x's dims, then B's.
    rank, n = x.rank, len(batch)
    b_loops = list(range(rank, rank + n))

    def hit(bb, names):
        return _all_of(bb, [bb.op(
            f"arith.cmpi eq, {_wrapped_index(bb, name, i.dtype, x.shape[d])}"
            f", {bb.index(d)} : index") for name, i, d in zip(
                names, index, dims)])

    inputs = [(i, b_loops) for i in index]
    if accumulate:
        add = "arith.addf" if is_float(t) else "arith.addi"

        def total(bb, names, acc):
            return bb.binary(add, acc, bb.select(
                hit(bb, names[:-1]), names[-1], bb.const(0, t), t), t)

        summed = ctx.b.generic(
            x.shape, t, inputs + [(values, b_loops + rest)], total,
            reductions=n, init=ctx.b.filled(x.shape, t, 0), hint="put_add")
        return ctx.elementwise([x, summed], lambda bb, xs: bb.binary(
            add, xs[0][0], xs[1][0], t), shape=x.shape, dtype=t)
    strides = [math.prod(batch[j + 1:]) for j in range(n)]

    def last(bb, names, acc):
        flat = bb.const(0, "i64")
        for j, stride in enumerate(strides):
            flat = bb.binary("arith.addi", flat, bb.binary(
                "arith.muli", _as_i64(bb, bb.index(rank + j)),
                bb.const(stride, "i64"), "i64"), "i64")
        return bb.select(hit(bb, names), flat, acc, "i64")

    writer = ctx.b.generic(x.shape, "i64", inputs, last, reductions=n,
                           init=ctx.b.filled(x.shape, "i64", -1),
                           hint="writer")
    flat = ctx.b.reshape(values, (math.prod(batch),
                                  *values.shape[n:]))

    def body(bb, names, acc):
        written = bb.op(f"arith.cmpi sge, {names[1]}, "
                        f"{bb.const(0, 'i64')} : i64")
        at = [_to_index(bb, bb.select(written, names[1], bb.const(
            0, "i64"), "i64"), "i64")] + [bb.index(d) for d in rest]
        return bb.select(written, _lookup(bb, flat, at), names[0], t)

    return ctx.b.generic(x.shape, t, [(x, list(range(rank))),
                                      (writer, list(range(rank)))], body,
                         hint=ctx.hint)


@_handles("aten.index_fill.int_Scalar", "aten.index_fill.int_Tensor")
def _index_fill(ctx, x, dim, index, value):
    """x with the slices at ``index`` along ``dim`` set to ``value``."""
    x = ctx.tensor(x)
    index = _index_tensor(ctx, index, "the index")
    dim = _norm_dim(dim, x.rank)
    outside = _outside(ctx, index, x.shape[dim], negative=True)
    index = ctx.b.reshape(index, (index.size,))
    t = x.dtype

    def picked(bb, names, acc):
        i = _wrapped_index(bb, names[0], index.dtype, x.shape[dim])
        return bb.binary("arith.ori", acc, bb.op(
            f"arith.cmpi eq, {i}, {bb.index(0)} : index"), "i1")

    chosen = ctx.b.generic((x.shape[dim],), "i1", [(index, [1])], picked,
                           reductions=1,
                           init=ctx.b.filled((x.shape[dim],), "i1", False),
                           hint="filled")
    return _poisoned(ctx, ctx.elementwise([x, ctx.b.reshape(chosen, tuple(
        n if d == dim else 1 for d, n in enumerate(x.shape))), value],
        lambda bb, xs: bb.select(xs[1][0], _cast(bb, xs[2], t), xs[0][0],
                                 t), shape=x.shape, dtype=t), [outside])


@_handles("aten.bucketize.Tensor", "aten.searchsorted.Tensor")
def _bucketize(ctx, *args, out_int32=False, right=False, side=None,
               sorter=None):
    """The bucket of each value among sorted 1-d ``boundaries``: how many
    boundaries lie below it (at or below it with ``right``); integers,
    no gradient."""
    if op_name(ctx.node).startswith("aten.bucketize"):
        x, boundaries = args[0], args[1]
    else:
        boundaries, x = args[0], args[1]
        right = right or side == "right"
    if sorter is not None:
        ctx.unsupported("searchsorted with a sorter")
    x, boundaries = ctx.tensor(x), ctx.tensor(boundaries)
    if boundaries.rank != 1:
        ctx.unsupported("only 1-d boundaries are supported")
    t = x.dtype if is_float(x.dtype) else boundaries.dtype
    out = ctx.dtype
    pred = ("ole" if right else "olt") if is_float(t) else (
        "sle" if right else "slt")
    cmp = "arith.cmpf" if is_float(t) else "arith.cmpi"

    def count(bb, names, acc):
        bound = _cast(bb, (names[1], boundaries.dtype), t)
        value = _cast(bb, (names[0], x.dtype), t)
        below = bb.op(f"{cmp} {pred}, {bound}, {value} : {t}")
        return bb.binary("arith.addi", acc, _cast(bb, (below, "i1"), out),
                         out)

    return ctx.b.generic(x.shape, out, [(x, list(range(x.rank))),
                                        (boundaries, [x.rank])], count,
                         reductions=1, init=ctx.b.filled(x.shape, out, 0),
                         hint=ctx.hint)


@_handles("aten.embedding_bag.padding_idx", "aten.embedding_bag.default",
          "aten._embedding_bag.default",
          "aten._embedding_bag_forward_only.default")
def _embedding_bag(ctx, weight, indices, offsets, scale_grad_by_freq=False,
                   mode=0, sparse=False, per_sample_weights=None,
                   include_last_offset=False, padding_idx=None):
    """nn.EmbeddingBag's sum and mean: bag b takes the rows of
    indices[offsets[b]:offsets[b + 1]] (the last to the end), each times
    its per-sample weight, leaving out ``padding_idx``; an empty bag is 0.
    A reduction over all the indices for each bag (the rows are lookups,
    so the table's gradient is a scatter-add)."""
    if mode not in (0, 1):
        ctx.unsupported("embedding_bag's max mode is not supported (sum and "
                        "mean are)")
    if scale_grad_by_freq:
        ctx.unsupported("embedding_bag with scale_grad_by_freq")
    weight = ctx.tensor(weight)
    _require_float(ctx, weight)
    indices = _index_tensor(ctx, indices, "the indices")
    offsets = _index_tensor(ctx, offsets, "the offsets")
    checked = ctx.translator.note_range(indices, weight.shape[0])
    t, count = weight.dtype, indices.shape[0]
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    dim = weight.shape[1]
    inputs = [(indices, [2])]
    if per_sample_weights is not None:
        inputs.append((ctx.tensor(per_sample_weights), [2]))

    def member(bb, names, position):
        """Whether index n (loop ``position``) is in bag b (loop 0), not
        padding."""
        b, n = bb.index(0), bb.index(position)
        start = _to_index(bb, _lookup(bb, offsets, [b]), offsets.dtype)
        following = _index_op(bb, "addi", b, _index_const(bb, 1))
        has_next = bb.op(f"arith.cmpi slt, {following}, "
                         f"{_index_const(bb, offsets.shape[0])} : index")
        next_start = _to_index(bb, _lookup(bb, offsets, [bb.op(
            f"arith.minui {following}, "
            f"{_index_const(bb, offsets.shape[0] - 1)} : index")]),
            offsets.dtype)
        end = bb.select(has_next, next_start, _index_const(bb, count),
                        "index")
        checks = [bb.op(f"arith.cmpi sge, {n}, {start} : index"),
                  bb.op(f"arith.cmpi slt, {n}, {end} : index")]
        if padding_idx is not None and padding_idx >= 0:
            checks.append(bb.op(
                f"arith.cmpi ne, {names[0]}, "
                f"{bb.const(padding_idx, indices.dtype)} : {indices.dtype}"))
        return _all_of(bb, checks)

    def total(bb, names, acc):
        row = _to_index(bb, names[0], indices.dtype)
        value = _guarded_lookup(bb, weight, [row, bb.index(1)],
                                [] if checked else [0])
        if per_sample_weights is not None:
            value = bb.binary("arith.mulf", value, _cast(
                bb, (names[1], inputs[1][0].dtype), t), t)
        return bb.binary("arith.addf", acc, bb.select(
            member(bb, names, 2), value, bb.const(0.0, t), t), t)

    sums = ctx.b.generic((bags, dim), t, inputs, total, reductions=1,
                         init=ctx.b.filled((bags, dim), t, 0.0),
                         hint="bag_sum")
    if mode == 0:
        return sums, None, None, None

    def members(bb, names, acc):
        return bb.binary("arith.addf", acc, bb.select(
            member(bb, names, 1), bb.const(1.0, t), bb.const(0.0, t), t), t)

    sizes = ctx.b.generic((bags,), t, [(indices, [1])], members,
                          reductions=1, init=ctx.b.filled((bags,), t, 0.0),
                          hint="bag_size")
    sizes = ctx.b.reshape(sizes, (bags, 1))
    return ctx.elementwise([sums, sizes], lambda bb, xs: bb.binary(
        "arith.divf", xs[0][0], bb.binary("arith.maximumf", xs[1][0],
                                          bb.const(1.0, t), t), t),
        shape=(bags, dim), dtype=t), None, None, None


@_handles("aten.index_select.default")
def _index_select(ctx, x, dim, index):
    x = ctx.tensor(x)
    index = _index_tensor(ctx, index, "the index")
    dim = _norm_dim(dim, x.rank)
    checked = ctx.translator.note_range(index, x.shape[dim])
    index = ctx.b.reshape(index, (index.size,))

    def body(bb, names, acc):
        at = [bb.index(d) for d in range(x.rank)]
        at[dim] = _to_index(bb, names[0], index.dtype)
        return _guarded_lookup(bb, x, at, [] if checked else [dim])

    return ctx.b.generic(ctx.shape, x.dtype, [(index, [dim])], body,
                         hint=ctx.hint)


@_handles("aten.take_along_dim.default")
def _take_along_dim(ctx, x, indices, dim=None):
    x = ctx.tensor(x)
    indices = _index_tensor(ctx, indices, "the indices")
    if dim is None:
        x = ctx.b.reshape(x, (x.size,))
        indices = ctx.b.reshape(indices, (indices.size,))
        dim = 0
    dim = _norm_dim(dim, x.rank)
    shape = tuple(x.shape[d] if d != dim else 1 for d in range(x.rank))
    shape = tuple(torch.broadcast_shapes(shape, indices.shape))
    if x.rank != indices.rank:
        ctx.unsupported("the input and the indices must have the same rank")
    checked = ctx.translator.note_range(indices, x.shape[dim])
    read, dims = ctx.broadcast(indices, shape)

    def body(bb, names, acc):
        at = [bb.index(d) if x.shape[d] == shape[d] else _index_const(bb, 0)
              for d in range(x.rank)]
        at[dim] = _to_index(bb, names[0], indices.dtype)
        return _guarded_lookup(bb, x, at, [] if checked else [dim])

    result = ctx.b.generic(shape, x.dtype, [(read, dims)], body,
                           hint=ctx.hint)
    return ctx.b.reshape(result, ctx.shape)


@_handles("aten.index.Tensor")
def _index(ctx, x, indices):
    """x[..., i, j, ...] with integer index tensors (broadcast together;
    their dims replace the indexed ones, or lead when the indexed dims are
    not adjacent, as in NumPy); negative indices count from the end."""
    x = ctx.tensor(x)
    indices = list(indices) + [None] * (x.rank - len(indices))
    where = [d for d, i in enumerate(indices) if i is not None]
    if not where:
        return x
    first = ctx.tensor(indices[where[0]])
    if len(where) == 1 and first.dtype == "i1":
        return _masked_rows(ctx, x, where[0], first)
    tensors = [_index_tensor(ctx, indices[d], "an index") for d in where]
    guarded = [d for d, index in zip(where, tensors)
               if not ctx.translator.note_range(index, x.shape[d],
                                                negative=True)]
    bshape = tuple(torch.broadcast_shapes(*(i.shape for i in tensors)))
    adjacent = where == list(range(where[0], where[-1] + 1))
    first = where[0] if adjacent else 0
    rest = [d for d in range(x.rank) if d not in where]
    # Output dims: x's unindexed dims before `first`, the broadcast dims,
    # the remaining unindexed dims.
    before = [d for d in rest if d < first] if adjacent else []
    after = [d for d in rest if d not in before]
    shape = (*[x.shape[d] for d in before], *bshape,
             *[x.shape[d] for d in after])
    if shape != ctx.shape:
        raise FrontendError(f"index: made shape {list(shape)}, expected "
                            f"{list(ctx.shape)}")
    inputs = []
    for index in tensors:
        value, dims = ctx.broadcast(index, bshape)
        inputs.append((value, [len(before) + d for d in dims]))
    loop_of = {d: i for i, d in enumerate(before)}
    loop_of.update({d: len(before) + len(bshape) + i
                    for i, d in enumerate(after)})

    def body(bb, names, acc):
        at = []
        for d in range(x.rank):
            if d in where:
                k = where.index(d)
                at.append(_wrapped_index(bb, names[k], tensors[k].dtype,
                                         x.shape[d]))
            else:
                at.append(bb.index(loop_of[d]))
        return _guarded_lookup(bb, x, at, guarded)

    return ctx.b.generic(shape, x.dtype, inputs, body, hint=ctx.hint)


def _masked_rows(ctx, x, dim, mask):
    """x[..., mask, ...]: the elements of x's dims from ``dim`` on where
    the boolean ``mask`` holds, in order, as one dimension. Its length
    depends on the mask's values; export knows it where a runtime
    assertion fixes it (transformers checks that the image tokens match
    the image features: Qwen3-VL adds its deepstack features at
    ``hidden[mask]``), else the program is refused before this. The k-th
    selected element's place is the first whose running count reaches
    k + 1 (a binary search over the counts, k log n steps); its gradient
    goes back through the lookup."""
    k = _mask_rank(ctx, x, dim, mask)
    count = ctx.shape[dim]
    size = mask.size
    counts = ctx.b.reshape(_running_mask_count(ctx, mask, mask.shape),
                           (size,))

    steps = max(size - 1, 0).bit_length()

    def place(bb, names, acc):
        # The first element whose running count reaches n + 1 (the n-th
        # selected, counted from 0): a binary search over the running
        # counts, which never decrease, in ceil(log2(size)) halvings.
        wanted = bb.binary("arith.addi", _as_i64(bb, bb.index(0)),
                           bb.const(1, "i64"), "i64")
        low, high = _index_const(bb, 0), _index_const(bb, size - 1)
        for _ in range(steps):
            middle = _index_op(bb, "divui", _index_op(bb, "addi", low, high),
                               _index_const(bb, 2))
            short = bb.op(f"arith.cmpi slt, {_lookup(bb, counts, [middle])}"
                          f", {wanted} : i64")
            low = bb.select(short, _index_op(bb, "addi", middle,
                                             _index_const(bb, 1)), low,
                            "index")
            high = bb.select(short, high, middle, "index")
        return _as_i64(bb, low)

    places = ctx.b.generic((count,), "i64", [], place, hint="places")
    rows = ctx.b.reshape(x, x.shape[:dim] + (size,) + x.shape[dim + k:])
    shape = x.shape[:dim] + (count,) + x.shape[dim + k:]

    def body(bb, names, acc):
        # The search stays inside x should fewer elements be selected than
        # asserted (the assertion is left out): the last one is read.
        at = [bb.index(d) for d in range(rows.rank)]
        at[dim] = _to_index(bb, names[0], "i64")
        return _lookup(bb, rows, at)

    return ctx.b.generic(shape, x.dtype, [(places, [dim])], body,
                         hint=ctx.hint)


@_handles("aten.logcumsumexp.default")
def _logcumsumexp(ctx, x, dim):
    """log(cumsum(exp(x - m))) + m along ``dim`` with m the maximum over
    the dim (without gradient; 0 where it is infinite): the cumulative sum
    of shifted exponentials never overflows."""
    x = ctx.tensor(x)
    _require_float(ctx, x)
    t = x.dtype
    dim = _norm_dim(dim, x.rank)
    reduced = _finite_max(ctx, x, [dim])
    rank = x.rank

    def body(bb, names, acc):
        keep = _up_to(bb, rank, dim)
        e = bb.unary("math.exp", bb.binary("arith.subf", names[0], names[1],
                                           t), t)
        return bb.binary("arith.addf", acc, bb.select(
            keep, e, bb.const(0.0, t), t), t)

    loops = [rank if d == dim else d for d in range(rank)]
    total = ctx.b.generic(x.shape, t, [(x, loops), (reduced, [
        d for d in range(rank) if d != dim])], body, reductions=1,
        init=ctx.b.filled(x.shape, t, 0.0), hint="lcse")
    m = ctx.b.reshape(reduced, x.shape[:dim] + (1,) + x.shape[dim + 1:])
    return ctx.elementwise([total, m], lambda bb, xs: bb.binary(
        "arith.addf", bb.unary("math.log", xs[0][0], t), xs[1][0], t),
        shape=x.shape, dtype=t)


@_handles("aten.cumsum.default")
def _cumsum(ctx, x, dim, dtype=None):
    """out[..., i, ...] = sum over j <= i of x[..., j, ...]."""
    x = ctx.tensor(x)
    t = ctx.dtype
    if x.rank == 0:
        return ctx.elementwise([x], lambda bb, xs: _cast(bb, xs[0], t))
    if t == "i1":
        ctx.unsupported("boolean results are not supported")
    return _running_sum(ctx, x, _norm_dim(dim, x.rank), t, ctx.hint)


def _running_sum(ctx, x, dim, t, hint="cumsum"):
    """x summed along ``dim`` up to each position, in type ``t``: a
    reduction over j reading x at j, masked to j <= i."""
    rank = x.rank
    add = "arith.addf" if is_float(t) else "arith.addi"

    def body(bb, names, acc):
        value = _cast(bb, (names[0], x.dtype), t)
        keep = _up_to(bb, rank, dim)
        return bb.binary(add, bb.select(keep, value, bb.const(0, t), t), acc,
                         t)

    dims = [rank if d == dim else d for d in range(rank)]
    return ctx.b.generic(x.shape, t, [(x, dims)], body, reductions=1,
                         init=ctx.b.filled(x.shape, t, 0), hint=hint)


# The block length of a running count over a flattened tensor.
_SCAN_BLOCK = 64


def _flat_running_count(ctx, counts):
    """The running sum of the 1-D i64 tensor ``counts`` in blocks: each
    block's own running sum plus the totals of the blocks before it (a
    running sum of the totals, found the same way), n * block steps rather
    than the n * n of one masked reduction."""
    n = counts.shape[0]
    if n <= _SCAN_BLOCK:
        return _running_sum(ctx, counts, 0, "i64")
    blocks = -(-n // _SCAN_BLOCK)
    size = blocks * _SCAN_BLOCK
    if size != n:
        counts = ctx.b.insert_slice(counts, ctx.b.filled((size,), "i64", 0),
                                    [0])
    within = _running_sum(ctx, ctx.b.reshape(counts, (blocks, _SCAN_BLOCK)),
                          1, "i64")
    totals = ctx.b.reshape(ctx.b.extract_slice(
        within, [0, _SCAN_BLOCK - 1], [blocks, 1], [1, 1]), (blocks,))
    through = _flat_running_count(ctx, totals)

    def body(bb, names, acc):
        before = bb.binary("arith.subi", names[1], names[2], "i64")
        return bb.binary("arith.addi", names[0], before, "i64")

    total = ctx.b.generic((blocks, _SCAN_BLOCK), "i64", [
        (within, [0, 1]), (through, [0]), (totals, [0])], body, hint="scan")
    total = ctx.b.reshape(total, (size,))
    return total if size == n else ctx.b.extract_slice(total, [0], [n], [1])


# -- convolution and pooling --------------------------------------------


def _window_index(bb, out, k, stride, dilation, low, size, out_size, kernel):
    """The input position out * stride + k * dilation - low along one
    spatial dim, clamped into [0, size): (index, [in-bounds conditions]).
    Checks that cannot fail are left out."""
    pos = out if stride == 1 else _index_op(bb, "muli", out,
                                            _index_const(bb, stride))
    step = k if dilation == 1 else _index_op(bb, "muli", k,
                                             _index_const(bb, dilation))
    pos = _index_op(bb, "addi", pos, step)
    if low:
        pos = _index_op(bb, "subi", pos, _index_const(bb, low))
    highest = (out_size - 1) * stride + (kernel - 1) * dilation - low
    checks = []
    if low > 0:
        zero = _index_const(bb, 0)
        checks.append(bb.op(f"arith.cmpi sge, {pos}, {zero} : index"))
        pos = _index_op(bb, "maxsi", pos, zero)
    if highest > size - 1:
        bound = _index_const(bb, size)
        checks.append(bb.op(f"arith.cmpi slt, {pos}, {bound} : index"))
        pos = _index_op(bb, "minsi", pos, _index_const(bb, size - 1))
    return pos, checks


def _masked(bb, value, checks, fill, t):
    inside = _all_of(bb, checks)
    if inside is None:
        return value
    return bb.select(inside, value, bb.const(fill, t), t)


def _conv_padding(ctx, padding, kernel, dilation, spatial):
    if isinstance(padding, str):
        if padding == "valid":
            return [0] * spatial, [0] * spatial
        if padding == "same":
            total = [d * (k - 1) for d, k in zip(dilation, kernel)]
            low = [t // 2 for t in total]
            return low, [t - lo for t, lo in zip(total, low)]
        ctx.unsupported(f"padding '{padding}' is not supported")
    low = _ints(padding, spatial)
    return low, list(low)


def _patches(ctx, x, groups, kernel, stride, dilation, low, out):
    """The windows of [N, C, size...] input ``x`` as [G, N, out...,
    C/G, kernel...]: a generic reading the (captured) input with
    tensor.extract at clamped positions, zero where a window hangs over
    the padding (``low`` on each spatial dim's low side)."""
    spatial = len(kernel)
    group_channels, size, t = x.shape[1] // groups, x.shape[2:], x.dtype

    def patch(bb, names, acc):
        gi, ni = bb.index(0), bb.index(1)
        ci = bb.index(2 + spatial)
        if groups > 1:
            ci = _index_op(bb, "addi", _index_op(
                bb, "muli", gi, _index_const(bb, group_channels)), ci)
        at, checks = [ni, ci], []
        for s in range(spatial):
            pos, c = _window_index(bb, bb.index(2 + s),
                                   bb.index(3 + spatial + s), stride[s],
                                   dilation[s], low[s], size[s], out[s],
                                   kernel[s])
            at.append(pos)
            checks += c
        return _masked(bb, _lookup(bb, x, at), checks, 0.0, t)

    return ctx.b.generic((groups, x.shape[0], *out, group_channels,
                          *kernel), t, [], patch, hint="patches")


@_handles("aten.unfold.default")
def _unfold(ctx, x, dim, size, step):
    """Tensor.unfold: the windows of ``size`` every ``step`` along
    ``dim``, that dim counting the windows and a new last dim their
    elements: out[..., i, ..., k] = x[..., i * step + k, ...]; a lookup,
    so the gradient adds up where windows overlap."""
    x = ctx.tensor(x)
    if x.rank == 0:
        ctx.unsupported("unfold of a 0-d tensor is not supported")
    dim = _norm_dim(dim, x.rank)

    def window(bb, names, acc):
        at = [bb.index(d) for d in range(x.rank)]
        start = at[dim] if step == 1 else _index_op(
            bb, "muli", at[dim], _index_const(bb, step))
        at[dim] = _index_op(bb, "addi", start, bb.index(x.rank))
        return _lookup(bb, x, at)

    return ctx.b.generic(ctx.shape, x.dtype, [], window, hint=ctx.hint)


@_handles("aten.im2col.default")
def _im2col(ctx, x, kernel_size, dilation, padding, stride):
    """nn.Unfold: the sliding windows of [N, C, H, W] (or [C, H, W]) as
    [N, C * kh * kw, L], the convolution's patches re-ordered."""
    x = ctx.tensor(x)
    unbatched = x.rank == 3
    if unbatched:
        x = ctx.b.reshape(x, (1, *x.shape))
    kernel, dilation = _ints(kernel_size, 2), _ints(dilation, 2)
    low, stride = _ints(padding, 2), _ints(stride, 2)
    out = [(x.shape[2 + i] + 2 * low[i] - dilation[i] * (kernel[i] - 1) - 1)
           // stride[i] + 1 for i in range(2)]
    patches = _patches(ctx, x, 1, kernel, stride, dilation, low, out)
    # [1, N, oh, ow, C, kh, kw] -> [N, C, kh, kw, oh, ow]
    columns = ctx.b.transpose(patches, [0, 1, 4, 5, 6, 2, 3], hint=ctx.hint)
    return ctx.b.reshape(columns, ctx.shape)


def _convolve(ctx, x, weight, bias, stride, padding, dilation, groups,
              pads=None):
    """An N-d convolution (PyTorch's cross-correlation) as im2col and a
    gemm: a generic gathers the patches [G, N, out..., C/G, kernel...] from
    the (captured) input with tensor.extract at clamped positions, zero
    where the window hangs over the padding; then patches x weight^T, so
    the weight's gradient is a gemm and the input's a scatter-add.
    ``pads`` (low, high) pads each spatial dim unevenly (or crops, where
    negative) instead of ``padding``."""
    x, weight = ctx.tensor(x), ctx.tensor(weight)
    _require_float(ctx, x, weight)
    spatial = weight.rank - 2
    if spatial < 1 or x.dtype != weight.dtype:
        ctx.unsupported("expected a [O, C/groups, k...] float weight of the "
                        "input's type")
    unbatched = x.rank == spatial + 1
    if unbatched:
        x = ctx.b.reshape(x, (1, *x.shape))
    if x.rank != spatial + 2:
        ctx.unsupported(f"a rank-{x.rank} input for a {spatial}-d kernel")
    t = x.dtype
    n, channels, size = x.shape[0], x.shape[1], x.shape[2:]
    out_channels, group_channels, kernel = (weight.shape[0], weight.shape[1],
                                            weight.shape[2:])
    g = groups
    if group_channels * g != channels or out_channels % g:
        ctx.unsupported(f"{channels} input and {out_channels} output "
                        f"channels do not split into {g} groups of a "
                        f"{group_channels}-channel kernel")
    og = out_channels // g
    stride = _ints(stride, spatial)
    dilation = _ints(dilation, spatial)
    low, high = pads or _conv_padding(ctx, padding, kernel, dilation,
                                      spatial)
    out = [(size[i] + low[i] + high[i] - dilation[i] * (kernel[i] - 1) - 1)
           // stride[i] + 1 for i in range(spatial)]
    if any(o <= 0 for o in out):
        ctx.unsupported(f"the kernel does not fit the input {list(size)}")

    patches = _patches(ctx, x, g, kernel, stride, dilation, low, out)
    depth = group_channels * math.prod(kernel)
    rows = n * math.prod(out)
    rest = list(range(2, 2 + spatial))
    if g == 1:
        y = ctx.b.matmul(ctx.b.reshape(patches, (rows, depth)),
                         ctx.b.reshape(weight, (out_channels, depth)),
                         transpose_b=True, hint="conv_mm")
        y = ctx.b.reshape(y, (n, *out, out_channels))
        inputs = [(y, [0, *rest, 1])]
        if bias is not None:
            inputs.append((ctx.tensor(bias), [1]))
        shape = (n, out_channels, *out)
    else:
        flat = ctx.b.reshape(patches, (g, rows, depth))
        w = ctx.b.reshape(weight, (g, og, depth))

        def mul_add(bb, names, acc):
            return bb.binary("arith.addf", acc, bb.binary(
                "arith.mulf", names[0], names[1], t), t)

        y = ctx.b.generic((g, rows, og), t, [(flat, [0, 1, 3]),
                                             (w, [0, 2, 3])], mul_add,
                          reductions=1, init=ctx.b.filled((g, rows, og), t,
                                                          0.0),
                          hint="conv_mm")
        y = ctx.b.reshape(y, (g, n, *out, og))
        inputs = [(y, [1, 0, *[3 + s for s in range(spatial)], 2])]
        if bias is not None:
            inputs.append((ctx.b.reshape(ctx.tensor(bias), (g, og)), [1, 2]))
        shape = (n, g, og, *out)

    def finish(bb, names, acc):
        if bias is None:
            return names[0]
        return bb.binary("arith.addf", names[0], names[1], t)

    result = ctx.b.generic(shape, t, inputs, finish, hint=ctx.hint)
    result = ctx.b.reshape(result, (n, out_channels, *out))
    if unbatched:
        result = ctx.b.reshape(result, (out_channels, *out))
    return result


@_handles("aten.conv1d.default", "aten.conv2d.default",
          "aten.conv3d.default", "aten.conv1d.padding",
          "aten.conv2d.padding", "aten.conv3d.padding")
def _conv(ctx, x, weight, bias=None, stride=1, padding=0, dilation=1,
          groups=1):
    return _convolve(ctx, x, weight, bias, stride, padding, dilation, groups)


@_handles("aten.convolution.default", "aten._convolution.default")
def _convolution(ctx, x, weight, bias, stride, padding, dilation, transposed,
                 output_padding, groups, *args):
    if transposed:
        return _convolve_transposed(ctx, x, weight, bias, stride, padding,
                                    output_padding, groups, dilation)
    return _convolve(ctx, x, weight, bias, stride, padding, dilation, groups)


@_handles("aten.conv_transpose1d.default", "aten.conv_transpose2d.input",
          "aten.conv_transpose3d.input")
def _conv_transpose(ctx, x, weight, bias=None, stride=1, padding=0,
                    output_padding=0, groups=1, dilation=1):
    return _convolve_transposed(ctx, x, weight, bias, stride, padding,
                                output_padding, groups, dilation)


def _convolve_transposed(ctx, x, weight, bias, stride, padding,
                         output_padding, groups, dilation):
    """A transposed convolution (the gradient of a convolution with
    respect to its input) as a convolution: of the input spread out by the
    stride (stride - 1 zeros between elements), padded by dilation *
    (kernel - 1) - padding on each side (plus output_padding on the high
    one), with the kernel flipped and its [C, O/groups] channels swapped
    per group. The zeros are multiplied too: stride^d times the work of a
    direct form, simple and exact."""
    x, weight = ctx.tensor(x), ctx.tensor(weight)
    _require_float(ctx, x, weight)
    spatial = weight.rank - 2
    if spatial < 1:
        ctx.unsupported("expected a [C, O/groups, k...] weight")
    unbatched = x.rank == spatial + 1
    if unbatched:
        x = ctx.b.reshape(x, (1, *x.shape))
    if x.rank != spatial + 2 or x.shape[1] != weight.shape[0] or \
            weight.shape[0] % groups:
        ctx.unsupported(f"a {list(x.shape)} input for a "
                        f"{list(weight.shape)} weight in {groups} groups")
    if isinstance(padding, str):
        ctx.unsupported(f"padding '{padding}' of a transposed convolution")
    stride, dilation = _ints(stride, spatial), _ints(dilation, spatial)
    padding = _ints(padding, spatial)
    extra = _ints(output_padding, spatial)
    kernel = weight.shape[2:]
    spread = _spread(ctx, x, stride)
    # [C, O/g, k...] -> [g, O/g, C/g, k...] -> [O, C/g, k...], flipped.
    g, cg, og = groups, weight.shape[0] // groups, weight.shape[1]
    swapped = ctx.b.transpose(
        ctx.b.reshape(weight, (g, cg, og, *kernel)),
        [0, 2, 1, *range(3, 3 + spatial)])
    swapped = ctx.b.reshape(swapped, (g * og, cg, *kernel))
    flipped = _flipped(ctx, swapped, range(2, 2 + spatial))
    low = [d * (k - 1) - p for d, k, p in zip(dilation, kernel, padding)]
    high = [lo + e for lo, e in zip(low, extra)]
    result = _convolve(ctx, spread, flipped, bias, 1, None, dilation, groups,
                       pads=(low, high))
    if unbatched:
        result = ctx.b.reshape(result, result.shape[1:])
    return result


def _spread(ctx, x, stride):
    """[N, C, size...] with stride - 1 zeros between neighbours along each
    spatial dim: [N, C, (size - 1) * stride + 1...]."""
    if all(s == 1 for s in stride):
        return x
    lead = x.rank - len(stride)
    shape = x.shape[:lead] + tuple((n - 1) * s + 1 for n, s in
                                   zip(x.shape[lead:], stride))

    def body(bb, names, acc):
        at = [bb.index(d) for d in range(lead)]
        on_grid = []
        for d, s in enumerate(stride):
            i = bb.index(lead + d)
            if s == 1:
                at.append(i)
                continue
            step = _index_const(bb, s)
            left = _index_op(bb, "remui", i, step)
            on_grid.append(bb.op(f"arith.cmpi eq, {left}, "
                                 f"{_index_const(bb, 0)} : index"))
            at.append(_index_op(bb, "divui", i, step))
        return _masked(bb, _lookup(bb, x, at), on_grid, 0.0, x.dtype)

    return ctx.b.generic(shape, x.dtype, [], body, hint="spread")


def _flipped(ctx, x, dims):
    """``x`` reversed along ``dims`` (a lookup, so the gradient is the
    reversed gradient)."""
    dims = set(dims)

    def body(bb, names, acc):
        at = []
        for d in range(x.rank):
            i = bb.index(d)
            if d in dims:
                i = _index_op(bb, "subi", _index_const(bb, x.shape[d] - 1), i)
            at.append(i)
        return _lookup(bb, x, at)

    return ctx.b.generic(x.shape, x.dtype, [], body, hint="flip")


@_handles("aten.flip.default")
def _flip(ctx, x, dims):
    x = ctx.tensor(x)
    return _flipped(ctx, x, [_norm_dim(d, x.rank) for d in dims])


@_handles("aten.rot90.default")
def _rot90(ctx, x, k=1, dims=(0, 1)):
    """``k`` quarter turns from dims[0] towards dims[1]: a flip, and for
    odd turns the two dims swapped (PyTorch's composition)."""
    x = ctx.tensor(x)
    a, b = (_norm_dim(d, x.rank) for d in dims)
    k %= 4
    if k == 0:
        return x
    if k == 2:
        return _flipped(ctx, x, [a, b])
    perm = list(range(x.rank))
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.b.transpose(_flipped(ctx, x, [b if k == 1 else a]), perm,
                           hint=ctx.hint)


def _window_reduce(ctx, x, spatial, kernel, position, kind, scale=None):
    """Reduce a window of the last ``spatial`` dims of ``x`` for each
    element of the result: ``position(bb, s, out, k)`` gives the index
    along spatial dim s and its in-bounds conditions; out-of-bounds
    elements are -inf (max) or 0 (sum). ``scale`` (a constant over the
    output's spatial dims) multiplies each element of a sum."""
    x = ctx.tensor(x)
    _require_float(ctx, x)
    t = x.dtype
    shape = ctx.shape
    lead = x.rank - spatial
    rank = len(shape)
    fill = _NEG_INF if kind == "max" else 0.0
    # A constant read by the reduction loops only gives them their extent.
    inputs = [(ctx.b.filled(tuple(kernel), t, 0.0),
               list(range(rank, rank + spatial)))]
    if scale is not None:
        inputs.append((ctx.b.dense(scale, t), list(range(lead, rank))))

    def body(bb, names, acc):
        at = [bb.index(d) for d in range(lead)]
        checks = []
        for s in range(spatial):
            pos, c = position(bb, s, bb.index(lead + s),
                              bb.index(rank + s))
            at.append(pos)
            checks += c
        e = _masked(bb, _lookup(bb, x, at), checks, fill, t)
        if kind == "max":
            return bb.binary("arith.maximumf", e, acc, t)
        if scale is not None:
            e = bb.binary("arith.mulf", e, names[1], t)
        return bb.binary("arith.addf", e, acc, t)

    result = ctx.b.generic(shape, t, inputs, body, reductions=spatial,
                           init=ctx.b.filled(shape, t, fill), hint=ctx.hint)
    if kind != "max":
        return result
    return _first_of_window(ctx, x, spatial, kernel, position, result)


def _first_of_window(ctx, x, spatial, kernel, position, maxima):
    """The window maxima ``maxima`` of _window_reduce as the element each
    came from: the first one in the window's row-major scan equal to the
    maximum (or NaN), as PyTorch's max pooling picks it. The value is the
    same; the gradient goes to that element alone (through the lookup's
    scatter-add), where differentiating the maximum would give it to every
    element equal to it, and overlapping pools make such ties (a maximum
    repeated by a stride-2 pool, then pooled again: GoogLeNet)."""
    t = x.dtype
    shape = ctx.shape
    lead = x.rank - spatial
    rank = len(shape)
    # Window offsets in row-major order: k = sum k_s * strides[s].
    strides = [math.prod(kernel[s + 1:]) for s in range(spatial)]
    none = math.prod(kernel)
    inputs = [(ctx.b.filled(tuple(kernel), t, 0.0),
               list(range(rank, rank + spatial))),
              (maxima, list(range(rank)))]

    def first(bb, names, acc):
        at = [bb.index(d) for d in range(lead)]
        checks = []
        flat = _index_const(bb, 0)
        for s in range(spatial):
            k = bb.index(rank + s)
            pos, c = position(bb, s, bb.index(lead + s), k)
            at.append(pos)
            checks += c
            flat = _index_op(bb, "addi", flat, _index_op(
                bb, "muli", k, _index_const(bb, strides[s])))
        return _first_hit(bb, acc, _lookup(bb, x, at), names[1], t, flat,
                          none, _all_of(bb, checks))

    where = ctx.b.generic(shape, "i64", inputs, first, reductions=spatial,
                          init=ctx.b.filled(shape, "i64", none),
                          hint=f"{ctx.hint}_first")

    def pick(bb, names, acc):
        # Every window holds an element of x, so some offset matched.
        flat = _to_index(bb, names[0], "i64")
        at = [bb.index(d) for d in range(lead)]
        for s in range(spatial):
            k = _index_op(bb, "remui", _index_op(
                bb, "divui", flat, _index_const(bb, strides[s])),
                _index_const(bb, kernel[s]))
            pos, _ = position(bb, s, bb.index(lead + s), k)
            at.append(pos)
        return _lookup(bb, x, at)

    return ctx.b.generic(shape, t, [(where, list(range(rank)))], pick,
                         hint=ctx.hint)


def _pool_spatial(ctx):
    match = re.search(r"pool(\d)d", op_name(ctx.node))
    return int(match.group(1))


def _pool_args(ctx, x, kernel_size, stride, padding, dilation=1):
    spatial = _pool_spatial(ctx)
    kernel = _ints(kernel_size, spatial)
    stride = _ints(stride, spatial) if stride else kernel
    padding = _ints(padding, spatial)
    dilation = _ints(dilation, spatial)
    x = ctx.tensor(x)
    if x.rank < spatial + 1:
        ctx.unsupported(f"a rank-{x.rank} input for {spatial}-d pooling")
    size = x.shape[-spatial:]
    out = ctx.shape[-spatial:]
    return x, spatial, kernel, stride, padding, dilation, size, out


@_handles("aten.max_pool1d.default", "aten.max_pool2d.default",
          "aten.max_pool3d.default", "aten.max_pool2d_with_indices.default",
          "aten.max_pool3d_with_indices.default")
def _max_pool(ctx, x, kernel_size, stride=(), padding=0, dilation=1,
              ceil_mode=False):
    indices = "with_indices" in op_name(ctx.node)
    if indices:
        ctx.shape = tuple(int(d) for d in ctx.val[0].shape)
    x, spatial, kernel, stride, padding, dilation, size, out = _pool_args(
        ctx, x, kernel_size, stride, padding, dilation)

    def position(bb, s, o, k):
        return _window_index(bb, o, k, stride[s], dilation[s], padding[s],
                             size[s], out[s], kernel[s])

    result = _window_reduce(ctx, x, spatial, kernel, position, "max")
    return (result, None) if indices else result


@_handles("aten.avg_pool1d.default", "aten.avg_pool2d.default",
          "aten.avg_pool3d.default")
def _avg_pool(ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False,
              count_include_pad=True, divisor_override=None):
    x, spatial, kernel, stride, padding, _, size, out = _pool_args(
        ctx, x, kernel_size, stride, padding)
    # The divisor of each output position, as PyTorch counts it: the
    # window clipped to the padded input (count_include_pad) or to the
    # input, or divisor_override.
    factors = []
    for s in range(spatial):
        counts = []
        for o in range(out[s]):
            start = o * stride[s] - padding[s]
            end = min(start + kernel[s], size[s] + padding[s])
            padded = end - start
            inside = min(end, size[s]) - max(start, 0)
            counts.append(padded if count_include_pad else inside)
        factors.append(counts)
    divisor = torch.ones(out, dtype=torch.float64)
    for s, counts in enumerate(factors):
        view = [1] * spatial
        view[s] = out[s]
        divisor = divisor * torch.tensor(counts, dtype=torch.float64).view(
            view)
    if divisor_override:
        divisor = torch.full(out, float(divisor_override),
                             dtype=torch.float64)

    def position(bb, s, o, k):
        return _window_index(bb, o, k, stride[s], 1, padding[s], size[s],
                             out[s], kernel[s])

    return _window_reduce(ctx, x, spatial, kernel, position, "sum",
                          scale=(1.0 / divisor).numpy())


def _adaptive_bounds(size, out):
    """PyTorch's adaptive windows: [floor(o * size / out),
    ceil((o + 1) * size / out)) for each output index o."""
    return [((o * size) // out, -(-((o + 1) * size) // out))
            for o in range(out)]


def _adaptive_pool(ctx, x, kind):
    x = ctx.tensor(x)
    spatial = _pool_spatial(ctx)
    size = x.shape[-spatial:]
    out = ctx.shape[-spatial:]
    bounds = [_adaptive_bounds(size[s], out[s]) for s in range(spatial)]
    kernel = [max(e - b for b, e in bounds[s]) for s in range(spatial)]

    def position(bb, s, o, k):
        if size[s] % out[s] == 0:
            step = size[s] // out[s]
            return _window_index(bb, o, k, step, 1, 0, size[s], out[s],
                                 step)
        # start = o * size / out (floor), end = ceil((o + 1) * size / out)
        times = _index_op(bb, "muli", o, _index_const(bb, size[s]))
        start = _index_op(bb, "divui", times, _index_const(bb, out[s]))
        end = _index_op(bb, "divui", _index_op(
            bb, "addi", times, _index_const(bb, size[s] + out[s] - 1)),
            _index_const(bb, out[s]))
        pos = _index_op(bb, "addi", start, k)
        inside = bb.op(f"arith.cmpi slt, {pos}, {end} : index")
        pos = _index_op(bb, "minsi", pos, _index_const(bb, size[s] - 1))
        return pos, [inside]

    scale = None
    if kind == "sum":
        divisor = torch.ones(out, dtype=torch.float64)
        for s in range(spatial):
            view = [1] * spatial
            view[s] = out[s]
            counts = torch.tensor([e - b for b, e in bounds[s]],
                                  dtype=torch.float64)
            divisor = divisor * counts.view(view)
        scale = (1.0 / divisor).numpy()
    return _window_reduce(ctx, x, spatial, kernel, position, kind,
                          scale=scale)


@_handles("aten.adaptive_avg_pool1d.default",
          "aten.adaptive_avg_pool2d.default",
          "aten._adaptive_avg_pool2d.default",
          "aten.adaptive_avg_pool3d.default",
          "aten._adaptive_avg_pool3d.default")
def _adaptive_avg_pool(ctx, x, output_size):
    return _adaptive_pool(ctx, x, "sum")


@_handles("aten.adaptive_max_pool1d.default",
          "aten.adaptive_max_pool2d.default",
          "aten.adaptive_max_pool3d.default")
def _adaptive_max_pool(ctx, x, output_size):
    ctx.shape = tuple(int(d) for d in ctx.val[0].shape)
    return (_adaptive_pool(ctx, x, "max"), None)


# -- batch, group and RMS normalisation -----------------------------------


def _channel_stats(ctx, x, hint):
    """Per-channel (dim 1) mean and biased variance of ``x`` over every
    other dim."""
    t = x.dtype
    channels = x.shape[1]
    count = x.size // channels
    dims = [0, *range(2, x.rank)]
    inv = 1.0 / count
    mean = ctx.reduce(x, dims, 0.0, lambda bb, e, acc: _add_acc(bb, e, acc, t),
                      scale=inv, hint=f"{hint}_mean")
    loops = [1, 0, *range(2, x.rank)]

    def variance(bb, names, acc):
        d = bb.binary("arith.subf", names[0], names[1], t)
        sq = bb.binary("arith.mulf", bb.binary("arith.mulf", d, d, t),
                       bb.const(inv, t), t)
        return bb.binary("arith.addf", acc, sq, t)

    var = ctx.b.generic((channels,), t, [(x, loops), (mean, [0])], variance,
                        reductions=x.rank - 1,
                        init=ctx.b.filled((channels,), t, 0.0),
                        hint=f"{hint}_var")
    return mean, var, count


def _normalize(ctx, x, stats, params, eps, dims, hint):
    """(x - mean) * rsqrt(var + eps) [* weight] [+ bias], each of ``stats``
    (mean, var) and ``params`` (weight, bias; None when absent) read
    through ``dims``."""
    t = x.dtype
    inputs = [(x, list(range(x.rank)))]
    for v in stats:
        inputs.append((ctx.tensor(v), dims))
    present = [p is not None for p in params]
    for p in params:
        if p is not None:
            inputs.append((ctx.tensor(p), dims))

    def body(bb, names, acc):
        v, mean, var = (_cast(bb, (n, val.dtype), t)
                        for n, (val, _) in zip(names[:3], inputs[:3]))
        y = bb.binary("arith.mulf", bb.binary("arith.subf", v, mean, t),
                      bb.unary("math.rsqrt", bb.binary(
                          "arith.addf", var, bb.const(eps, t), t), t), t)
        rest = list(zip(names[3:], inputs[3:]))
        if present[0]:
            n, (val, _) = rest.pop(0)
            y = bb.binary("arith.mulf", y, _cast(bb, (n, val.dtype), t), t)
        if present[1]:
            n, (val, _) = rest.pop(0)
            y = bb.binary("arith.addf", y, _cast(bb, (n, val.dtype), t), t)
        return y

    return ctx.b.generic(x.shape, t, inputs, body, hint=hint)


def _batch_norm_value(ctx, x, weight, bias, running_mean, running_var,
                      training, momentum, eps, extras=True, record=False):
    """(out, mean, rstd, new running mean, new running var): training mode
    normalises with the batch statistics (over N and the spatial dims;
    biased variance), eval mode with the running ones. Without ``extras``
    only ``out`` is made (the rest are None). With ``record`` (the forms
    that update the buffers in place) training mode records the batch
    statistics into the running ones."""
    x = ctx.tensor(x)
    _require_float(ctx, x)
    if x.rank < 2:
        ctx.unsupported("batch norm needs an [N, C, ...] input")
    t = x.dtype
    channels = x.shape[1]
    if training or running_mean is None or running_var is None:
        mean, var, count = _channel_stats(ctx, x, "bn")
        if record and running_mean is not None and running_var is not None:
            _record_running_stats(ctx, mean, var, count / max(count - 1, 1),
                                  momentum if momentum is not None else 0.1)
    else:
        mean, var = ctx.tensor(running_mean), ctx.tensor(running_var)
        count = None
    out = _normalize(ctx, x, (mean, var), (weight, bias), eps, [1],
                     ctx.hint)
    if not extras:
        return out, None, None, None, None
    rstd = ctx.elementwise([var], lambda bb, xs: bb.unary(
        "math.rsqrt", bb.binary("arith.addf", _cast(bb, xs[0], t),
                                bb.const(eps, t), t), t),
        shape=(channels,), dtype=t, hint="bn_rstd")
    new_mean = new_var = None
    if count is not None and running_mean is not None and \
            running_var is not None:
        m = momentum if momentum is not None else 0.1
        unbiased = count / max(count - 1, 1)

        def update(factor):
            def fn(bb, xs):
                old, batch = (_cast(bb, v, t) for v in xs)
                return bb.binary("arith.addf", bb.binary(
                    "arith.mulf", old, bb.const(1 - m, t), t), bb.binary(
                    "arith.mulf", batch, bb.const(m * factor, t), t), t)
            return fn

        new_mean = ctx.elementwise([running_mean, mean], update(1.0),
                                   shape=(channels,), dtype=t,
                                   hint="running_mean")
        new_var = ctx.elementwise([running_var, var], update(unbiased),
                                  shape=(channels,), dtype=t,
                                  hint="running_var")
    # As in PyTorch, only `out` is differentiable.
    extras = [_no_grad(ctx, v) for v in (mean, rstd, new_mean, new_var)]
    return (out, *extras)


def _record_running_stats(ctx, mean, var, unbiased, momentum):
    """Training mode: the batch's mean and unbiased variance go into the
    running statistics of the batch norm's buffers (``pipe.running_stat``),
    which a run folds in after each step, microbatch by microbatch, as
    PyTorch updates them."""
    args = ctx.node.args
    if len(args) < 5 or not isinstance(args[3], torch.fx.Node):
        return
    channels = mean.shape[0]
    t = mean.dtype
    ctx.translator.running_stat(args[3], mean, momentum, 0.0)
    if isinstance(args[4], torch.fx.Node) and \
            args[4] in ctx.translator.buffer_names:
        uvar = ctx.elementwise([var], lambda bb, xs: bb.binary(
            "arith.mulf", _cast(bb, xs[0], t), bb.const(unbiased, t), t),
            shape=(channels,), dtype=t, hint="bn_unbiased_var")
        ctx.translator.running_stat(args[4], uvar, momentum, 1.0)


def _read_later(node, arg):
    """Whether graph value ``arg`` is read by a node after ``node``."""
    if not isinstance(arg, torch.fx.Node):
        return False
    later = node.next
    while later.op != "root":
        if arg in later.all_input_nodes:
            return True
        later = later.next
    return False


def _update_running_stats(ctx, training, new_mean, new_var):
    """PyTorch updates the running statistics in place in training mode:
    later reads in this forward see the new values (no gradient). Nothing
    is written back: the compiled program returns only the loss."""
    if not training:
        return
    args = ctx.node.args
    for position, value in ((3, new_mean), (4, new_var)):
        if value is not None and len(args) > position and \
                _read_later(ctx.node, args[position]):
            ctx.translator.env[args[position]] = value


def _batch_norm_updating(ctx, x, weight, bias, running_mean, running_var,
                         training, momentum, eps):
    node, args = ctx.node, ctx.node.args
    extras = training and any(_read_later(node, args[i]) for i in (3, 4)
                              if len(args) > i)
    result = _batch_norm_value(ctx, x, weight, bias, running_mean,
                               running_var, training, momentum, eps,
                               extras=extras or isinstance(ctx.val,
                                                           (tuple, list)),
                               record=True)
    _update_running_stats(ctx, training, result[3], result[4])
    return result


@_handles("aten.batch_norm.default")
def _batch_norm(ctx, x, weight, bias, running_mean, running_var, training,
                momentum, eps, cudnn_enabled=False):
    return _batch_norm_updating(ctx, x, weight, bias, running_mean,
                                running_var, training, momentum, eps)[0]


@_handles("aten._native_batch_norm_legit_functional.default")
def _batch_norm_functional(ctx, x, weight, bias, running_mean, running_var,
                           training, momentum, eps):
    out, mean, rstd, new_mean, new_var = _batch_norm_value(
        ctx, x, weight, bias, running_mean, running_var, training, momentum,
        eps)
    if not training:
        new_mean, new_var = running_mean, running_var
    return (out, mean, rstd, new_mean, new_var)


@_handles("aten._native_batch_norm_legit.default",
          "aten.native_batch_norm.default")
def _native_batch_norm(ctx, x, weight, bias, running_mean, running_var,
                       training, momentum, eps):
    out, mean, rstd, _, _ = _batch_norm_updating(
        ctx, x, weight, bias, running_mean, running_var, training, momentum,
        eps)
    if not training:
        # PyTorch returns empty statistics in eval mode.
        return (out, None, None)
    return (out, mean, rstd)


@_handles("aten._native_batch_norm_legit.no_stats")
def _native_batch_norm_no_stats(ctx, x, weight, bias, training, momentum,
                                eps):
    out, mean, rstd, _, _ = _batch_norm_value(
        ctx, x, weight, bias, None, None, True, momentum, eps)
    return (out, mean, rstd)


@_handles("aten._native_batch_norm_legit_no_training.default")
def _native_batch_norm_eval(ctx, x, weight, bias, running_mean, running_var,
                            momentum, eps):
    out = _batch_norm_value(ctx, x, weight, bias, running_mean, running_var,
                            False, momentum, eps, extras=False)[0]
    return (out, None, None)


def _group_norm_value(ctx, x, groups, weight, bias, eps):
    x = ctx.tensor(x)
    _require_float(ctx, x)
    t = x.dtype
    if x.rank < 2 or x.shape[1] % groups:
        ctx.unsupported(f"{list(x.shape)} does not split into {groups} "
                        "channel groups")
    n, channels = x.shape[:2]
    width = channels // groups
    length = x.size // (n * channels)
    x4 = ctx.b.reshape(x, (n, groups, width, length))
    inv = 1.0 / (width * length)
    mean = ctx.reduce(x4, [2, 3], 0.0, lambda bb, e, acc: _add_acc(
        bb, e, acc, t), scale=inv, hint="gn_mean")

    def variance(bb, names, acc):
        d = bb.binary("arith.subf", names[0], names[1], t)
        sq = bb.binary("arith.mulf", bb.binary("arith.mulf", d, d, t),
                       bb.const(inv, t), t)
        return bb.binary("arith.addf", acc, sq, t)

    var = ctx.b.generic((n, groups), t, [(x4, [0, 1, 2, 3]), (mean, [0, 1])],
                        variance, reductions=2,
                        init=ctx.b.filled((n, groups), t, 0.0),
                        hint="gn_var")
    inputs = [(x4, [0, 1, 2, 3]), (mean, [0, 1]), (var, [0, 1])]
    present = []
    for p in (weight, bias):
        present.append(p is not None)
        if p is not None:
            inputs.append((ctx.reshape(p, (groups, width)), [1, 2]))

    def body(bb, names, acc):
        v, m, var_ = names[:3]
        y = bb.binary("arith.mulf", bb.binary("arith.subf", v, m, t),
                      bb.unary("math.rsqrt", bb.binary(
                          "arith.addf", var_, bb.const(eps, t), t), t), t)
        rest = list(names[3:])
        if present[0]:
            y = bb.binary("arith.mulf", y, rest.pop(0), t)
        if present[1]:
            y = bb.binary("arith.addf", y, rest.pop(0), t)
        return y

    normed = ctx.b.generic((n, groups, width, length), t, inputs, body,
                           hint=ctx.hint)
    rstd = ctx.elementwise([var], lambda bb, xs: bb.unary(
        "math.rsqrt", bb.binary("arith.addf", xs[0][0], bb.const(eps, t), t),
        t), shape=(n, groups), dtype=t, hint="gn_rstd")
    return ctx.b.reshape(normed, x.shape), mean, rstd


@_handles("aten.group_norm.default")
def _group_norm(ctx, x, num_groups, weight=None, bias=None, eps=1e-5,
                cudnn_enabled=True):
    return _group_norm_value(ctx, x, num_groups, weight, bias, eps)[0]


@_handles("aten.native_group_norm.default")
def _native_group_norm(ctx, x, weight, bias, n, c, hw, group, eps):
    return _group_norm_value(ctx, x, group, weight, bias, eps)


def _rms_norm_value(ctx, x, normalized_shape, weight, eps):
    x = ctx.tensor(x)
    _require_float(ctx, x)
    t = x.dtype
    if eps is None:
        eps = torch.finfo({"f64": torch.float64, "f32": torch.float32,
                           "f16": torch.float16}[t]).eps
    width = math.prod(normalized_shape)
    rows = x.size // width
    flat = ctx.b.reshape(x, (rows, width))
    inv = 1.0 / width

    def square(bb, e, acc):
        return bb.binary("arith.addf", acc, bb.binary(
            "arith.mulf", bb.binary("arith.mulf", e, e, t),
            bb.const(inv, t), t), t)

    mean_square = ctx.reduce(flat, [1], 0.0, square, hint="rms_ms")
    rstd = ctx.elementwise([mean_square], lambda bb, xs: bb.unary(
        "math.rsqrt", bb.binary("arith.addf", xs[0][0], bb.const(eps, t), t),
        t), shape=(rows,), dtype=t, hint="rms_rstd")
    inputs = [(flat, [0, 1]), (rstd, [0])]
    if weight is not None:
        inputs.append((ctx.reshape(weight, (width,)), [1]))

    def body(bb, names, acc):
        y = bb.binary("arith.mulf", names[0], names[1], t)
        if weight is not None:
            y = bb.binary("arith.mulf", y, names[2], t)
        return y

    out = ctx.b.generic((rows, width), t, inputs, body, hint=ctx.hint)
    return ctx.b.reshape(out, x.shape), rstd


@_handles("aten.rms_norm.default")
def _rms_norm(ctx, x, normalized_shape, weight=None, eps=None):
    return _rms_norm_value(ctx, x, normalized_shape, weight, eps)[0]


@_handles("aten._fused_rms_norm.default")
def _fused_rms_norm(ctx, x, normalized_shape, weight=None, eps=None):
    out, rstd = _rms_norm_value(ctx, x, normalized_shape, weight, eps)
    shape = tuple(int(d) for d in ctx.val[1].shape)
    return (out, ctx.b.reshape(rstd, shape))


# -- higher-order ops -----------------------------------------------------


@_handles("wrap_with_set_grad_enabled")
def _set_grad_enabled(ctx, enabled, graph_module, *args):
    """A region run under torch.no_grad() (or enable_grad): its graph is
    translated inline. Without grad, what it computes gets no gradient,
    but a tensor it changes in place keeps its own (PyTorch records no
    change, so the gradient reaches the tensor as if unchanged): the new
    values with the old tensor's gradient. Its inputs stand for the
    tensors they are called with, so that a change of a parameter or buffer
    through one is noted as that tensor's (``change``)."""
    outer = ctx.node.args[2:]
    if enabled:
        return _inline(ctx.translator, graph_module, args, outer=outer)
    results, changed = _inline(ctx.translator, graph_module, args,
                               changed_inputs=True, outer=outer)
    return tuple(
        _straight_through(ctx, args[index], result) if index is not None
        else pytree.tree_map(lambda v: _no_grad(ctx, v), result)
        for result, index in zip(results, changed))


def _straight_through(ctx, before, after):
    """``after``'s values with ``before``'s gradient passed through as it
    is: after (no gradient) - (before (no gradient) - before), the
    difference an exact 0 (which keeps after's -0) where before is finite,
    a constant 0 elsewhere."""
    if isinstance(after, Complex):
        return Complex(_straight_through(ctx, before.real, after.real),
                       _straight_through(ctx, before.imag, after.imag))
    if not isinstance(after, Value) or not is_float(after.dtype):
        return after
    t = after.dtype

    def body(bb, xs):
        old, new = xs[0][0], xs[1][0]
        zero = bb.const(0.0, t)
        difference = bb.binary("arith.subf", _stop_gradient(bb, old, t), old,
                               t)
        exact = bb.op(f"arith.cmpf oeq, {difference}, {zero} : {t}")
        return bb.binary("arith.subf", _stop_gradient(bb, new, t), bb.select(
            exact, difference, zero, t), t)

    return ctx.elementwise([before, after], body, shape=after.shape, dtype=t,
                           hint="changed")


def _inline(translator, graph_module, args, changed_inputs=False,
            outer=None):
    """Translate ``graph_module``'s graph with its placeholders bound to
    ``args`` (standing for graph nodes ``outer`` when given); returns its
    outputs (with ``changed_inputs``, also, for each output, the index of
    the input it is after in-place changes, or None)."""
    env = translator.env
    placeholders = [n for n in graph_module.graph.nodes
                    if n.op == "placeholder"]
    if len(placeholders) != len(args):
        raise FrontendError(f"a subgraph takes {len(placeholders)} inputs, "
                            f"given {len(args)}")
    for node, value in zip(placeholders, args):
        env[node] = value
    if outer is not None:
        translator.region_inputs.update(
            (node, source) for node, source in zip(placeholders, outer)
            if isinstance(source, torch.fx.Node))
    for node in graph_module.graph.nodes:
        if node.op == "call_function":
            env[node] = translate(translator, node)
        elif node.op == "get_attr":
            value = getattr(graph_module, node.target)
            env[node] = Const(value) if isinstance(value, torch.Tensor) \
                else value
        elif node.op == "output":
            results = pytree.tree_map(
                lambda n: env[n] if isinstance(n, torch.fx.Node) else n,
                node.args[0])
            if not changed_inputs:
                return results
            return results, [_changed_input(n, placeholders)
                             for n in node.args[0]]
        elif node.op != "placeholder":
            raise FrontendError(f"unsupported subgraph node '{node.op}'")
    raise FrontendError("a subgraph without an output")


def _changed_input(node, placeholders):
    """The index of the placeholder that ``node`` is, after in-place ops
    (``clamp_`` of it), or None."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function" \
            and node.args and _functional_name(op_name(node)) is not None:
        node = node.args[0]
    return placeholders.index(node) if node in placeholders else None
