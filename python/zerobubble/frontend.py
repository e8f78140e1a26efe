"""The PyTorch frontend: an ``nn.Module`` returning a scalar loss becomes
the compiler's input IR.

``from_torch(module, example_args)`` exports ``module(*example_args)`` with
``torch.export`` and translates the exported ATen graph op by op (see
:mod:`zerobubble._aten`) into one public ``func.func``:

- the data arguments first, in ``example_args`` order and with their
  dtypes (``arg<i>`` in ``.npz`` files is the i-th example argument);
  integer data used as embedding indices or class targets gets a
  ``zb.range`` bound;
- then the parameters, ``{zb.param = "<PyTorch name>"}`` with PyTorch's
  shapes (a ``Linear`` weight stays ``[out, in]``); a tensor that several
  modules share (tied weights) is one parameter, under its first name;
- buffers and other constants become dense constants; computations on
  constants alone are folded; a batch norm's running statistics in
  training mode are also recorded (``pipe.running_stat``), so that a run
  updates them and saves them with the parameters (``Program.buffers``);
- ``zerobubble.pipe_cut(x)`` calls become ``pipe.cut`` stage boundaries.
"""

import contextlib
import inspect
import io
import operator
import os
import re
import sys
import traceback
import warnings

import numpy as np
import torch
import torch.utils._pytree as pytree

from . import _aten
from ._mlir import Builder, Value
from .errors import (FrontendError, FrontendWarning, UnsupportedOpError,
                     describe_module)

# The element types of the program's arguments: what zb-run reads from and
# writes to .npz files.
_ARGUMENT_TYPES = ("f32", "f64", "i32", "i64")

# Ops whose result holds only values of their first operand (moved,
# copied, left out) and constants: a result of a data argument counts as
# that argument for its zb.range (GPT-2's labels reach the loss padded
# with -100, sliced and copied).
_MOVES_VALUES = frozenset(
    f"aten.{name}" for name in (
        "pad.default", "constant_pad_nd.default", "slice.Tensor",
        "select.int", "narrow.default", "contiguous.default",
        "clone.default", "alias.default", "detach.default",
        "lift_fresh_copy.default", "view.default", "_unsafe_view.default",
        "reshape.default", "flatten.using_ints", "unflatten.int",
        "permute.default", "transpose.int", "t.default", "movedim.int",
        "expand.default", "unsqueeze.default", "squeeze.default",
        "squeeze.dim", "squeeze.dims", "to.dtype", "to.dtype_layout",
        "_to_copy.default"))

# -- the stage boundary marker -----------------------------------------


@torch.library.custom_op("zerobubble::pipe_cut", mutates_args=())
def _pipe_cut_op(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@_pipe_cut_op.register_fake
def _pipe_cut_fake(x):
    return torch.empty_like(x)


def _pipe_cut_backward(ctx, grad):
    return grad


_pipe_cut_op.register_autograd(_pipe_cut_backward)


def pipe_cut(x):
    """Mark a pipeline stage boundary after ``x``: the compiler's
    ``pipe.cut``. Eagerly it returns a copy of ``x`` (gradient: identity).
    A model with n markers is split into n + 1 stages when it is compiled
    for n + 1 stages (P x V); otherwise the compiler's cost model cuts."""
    return _pipe_cut_op(x)


# -- the program ---------------------------------------------------------


class DataArg:
    """A data argument of a program: ``index`` in the signature (its
    ``.npz`` key is ``key``), the placeholder ``name``, ``shape`` and
    ``dtype`` (a NumPy dtype), and ``range`` (the exclusive bound of an
    integer argument used as indices, or None); ``rng`` marks the random
    key zb-run supplies (not in a microbatch's values)."""

    def __init__(self, index, name, shape, dtype, range=None, rng=False):
        self.index = index
        self.name = name
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.range = range
        # The least value where negative indices count from the end
        # (-range), or None: values lie in [0, range).
        self.range_from = None
        # One more value the data may hold outside the range, which every
        # use leaves out (a loss's ignore_index), or None.
        self.range_ignored = None
        # The random key of the program's random ops ({zb.rng}): zb-run
        # supplies it per microbatch; it is no value of a microbatch.
        self.rng = rng

    @property
    def key(self):
        return f"arg{self.index}"

    def __repr__(self):
        bound = f", range={self.range}" if self.range is not None else ""
        if self.range_from is not None:
            bound += f", range_from={self.range_from}"
        if self.range_ignored is not None:
            bound += f", range_ignored={self.range_ignored}"
        return (f"DataArg({self.key}: {self.name} {list(self.shape)} "
                f"{self.dtype}{bound})")


class Program:
    """A model in the compiler's input IR, made by :func:`from_torch`.

    ``mlir`` is the IR text and ``name`` the function's name; ``params``
    maps each parameter's PyTorch name to its current value (a NumPy
    array, PyTorch's shape); ``data_args`` lists the data arguments;
    ``cuts`` is the number of ``pipe_cut`` markers; ``tied`` maps each
    further name of a tied (shared) parameter to the name it is kept under
    (``{"lm_head.weight": "transformer.wte.weight"}``); ``buffers`` maps
    the name of each running statistic the program updates (a training-mode
    batch norm's ``running_mean`` and ``running_var``) to its current
    value; ``counters`` each such batch norm's ``num_batches_tracked``
    with its current value (one more per training forward); ``frozen``
    names the parameters with ``requires_grad=False``, which the program
    holds as constants (no gradient, no update); ``unused`` the parameters
    the loss does not read (XLNet's ``mask_emb`` without masked inputs),
    which the program leaves out: PyTorch gives them no gradient, and its
    optimizers leave them as they are. A Program can
    be given wherever :mod:`zerobubble` takes a model; its ``params`` and
    ``buffers`` are then the default parameters.
    """

    def __init__(self, mlir, name, params, data_args, cuts, tied=None,
                 buffers=None, counters=None, frozen=(), unused=()):
        self.mlir = mlir
        self.name = name
        self.params = params
        self.data_args = data_args
        self.cuts = cuts
        self.tied = dict(tied or {})
        self.buffers = dict(buffers or {})
        self.counters = dict(counters or {})
        self.frozen = list(frozen)
        self.unused = list(unused)

    def save(self, path):
        """Write the IR text to ``path``."""
        with open(path, "w") as f:
            f.write(self.mlir)

    def save_params(self, path):
        """Write the parameters and the running statistics to an ``.npz``
        keyed by name."""
        np.savez(path, **self.params, **self.buffers)

    def stack_inputs(self, microbatches):
        """The data of ``microbatches`` as zb-run's ``--inputs`` arrays.

        ``microbatches`` is a list of microbatches, each a tuple of the
        data arguments (tensors or arrays, as in ``example_args``), or a
        list of such lists (one per step). Returns ``{"arg<i>": array}``
        with arrays ``[M][shape]`` (or ``[K][M][shape]``).
        """
        microbatches = list(microbatches)
        if not microbatches:
            raise ValueError("no microbatches given")
        if isinstance(microbatches[0], list):
            per_step = [self.stack_inputs(step) for step in microbatches]
            return {k: np.stack([s[k] for s in per_step])
                    for k in per_step[0]}
        arrays = {}
        given = [arg for arg in self.data_args if not arg.rng]
        for arg in given:
            values = []
            for mb in microbatches:
                if len(mb) != len(given):
                    raise ValueError(
                        f"a microbatch has {len(mb)} values; the program "
                        f"takes {len(given)} data arguments")
                value = mb[arg.index]
                if isinstance(value, torch.Tensor):
                    value = value.detach().cpu().numpy()
                value = np.asarray(value)
                if np.issubdtype(arg.dtype, np.integer) and \
                        not np.issubdtype(value.dtype, np.integer):
                    raise ValueError(
                        f"{arg.key} ({arg.name}): {value.dtype} values for "
                        f"an integer argument ({np.dtype(arg.dtype)}); "
                        "pass integers")
                value = value.astype(arg.dtype, copy=False)
                if value.shape != arg.shape:
                    raise ValueError(
                        f"{arg.key} ({arg.name}): shape {value.shape}, "
                        f"the program takes {arg.shape}")
                values.append(value)
            arrays[arg.key] = np.stack(values)
        return arrays

    def save_inputs(self, path, microbatches):
        """Write :meth:`stack_inputs` to an ``.npz`` file."""
        np.savez(path, **self.stack_inputs(microbatches))

    def __repr__(self):
        return (f"Program({self.name}: {len(self.data_args)} data args, "
                f"{len(self.params)} params, {self.cuts} cuts)")


# -- export and translation ---------------------------------------------


def _tensor_identity(tensor):
    """What makes two state entries one tensor: the same storage, offset,
    shape and strides."""
    return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(),
            tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype)


def _sanitize(name):
    name = re.sub(r"\W", "_", name)
    return name if name and not name[0].isdigit() else "m_" + name


def _module_name(module):
    name = type(module).__name__
    return _sanitize(re.sub(r"(?<!^)(?=[A-Z][a-z])", "_", name).lower())


def from_torch(module, example_args, *, name=None, strict=False,
               constants=None):
    """Export ``module`` and translate it to the compiler's input IR.

    ``module(*example_args)`` must return the scalar loss of one
    microbatch; ``example_args`` fix every shape and dtype. Parameters keep
    their PyTorch names and shapes; the data arguments come first, in
    ``example_args`` order. ``name`` names the function (default: the
    module's class name in snake case); ``strict`` is passed to
    ``torch.export.export``.

    ``constants`` maps keyword arguments of ``module``'s forward to tensors
    whose values are the same for every batch and decide shapes (a
    vision-language model's ``image_grid_thw`` or ``image_sizes``): the
    program is compiled for those values, as if the forward built them
    with ``torch.tensor(<Python list>)``, which makes a constant of the
    program too (up to ``CONSTANT_ELEMENTS`` elements). Returns a
    :class:`Program`.

    Raises :class:`zerobubble.UnsupportedOpError` naming the ATen op and
    the module path for an op the frontend cannot translate, and
    :class:`zerobubble.FrontendError` for other unsupported programs,
    among them a module whose control flow or shapes depend on the values
    of its tensors (the message names the line).
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_torch needs a torch.nn.Module, not "
                        f"{type(module).__name__}")
    if isinstance(example_args, torch.Tensor) or not isinstance(
            example_args, (tuple, list)):
        raise TypeError(
            "example_args must be a tuple of the module's arguments (one "
            f"tensor x: (x,)), not {type(example_args).__name__}")
    example_args = tuple(example_args)
    for i, arg in enumerate(example_args):
        if not isinstance(arg, torch.Tensor):
            raise FrontendError(
                f"example argument {i} is a {type(arg).__name__}; every "
                "data argument must be a tensor")
    _check_batch_norms(module)
    applied = {}
    with _static_experts(module), _bound_constants(module, constants), \
            _constant_tensors(), _custom_functions(applied):
        exported = _export(module, example_args, strict)
    custom = [cls for cls in applied
              if cls.__module__.split(".")[0] != "torch"]
    if custom:
        with _static_experts(module), _bound_constants(module, constants):
            _warn_custom_backwards(module, example_args, custom)
    translator = _Translator(exported, name or _module_name(module))
    return translator.translate()


def _check_batch_norms(module):
    """A training-mode batch norm with momentum=None keeps a cumulative
    average, weighting each update by 1 / num_batches_tracked, which its
    forward reads as a Python number (torch.export would blame the line
    as a value-dependent branch): refused here, by name."""
    for path, sub in module.named_modules():
        if isinstance(sub, torch.nn.modules.batchnorm._BatchNorm) and \
                sub.training and sub.track_running_stats and \
                sub.momentum is None:
            raise UnsupportedOpError(
                "aten.batch_norm", path, type(sub).__name__,
                detail="momentum=None (a cumulative average of the "
                "statistics, weighted by the count of batches) is not "
                "supported; give the batch norm a momentum (PyTorch's "
                "default is 0.1), or export in eval mode")


def _export(module, example_args, strict):
    """``torch.export.export``; where the program's control flow or a
    shape depends on the values of a tensor (which one traced program
    cannot follow), a :class:`FrontendError` naming the line of the model
    that does it and the way out."""
    # torch.export prints the graph traced up to a failure to stderr (a
    # thousand lines for a transformers model); the error names the line.
    # What else it writes there (warnings) is passed on.
    written = io.StringIO()
    try:
        with contextlib.redirect_stderr(written):
            exported = torch.export.export(module, example_args,
                                           strict=strict)
    except Exception as error:
        partial = getattr(error, "partial_fx_graph", None)
        sys.stderr.write(written.getvalue().replace(f"{partial}\n", "")
                         if partial is not None else written.getvalue())
        where = _model_line(error)
        lines = str(error).strip().splitlines()
        detail = lines[0] if lines else ""
        if not _depends_on_values(error):
            raise FrontendError(
                f"cannot export {type(module).__name__}: torch.export "
                f"failed{' at ' + where if where else ''} "
                f"({type(error).__name__}: {detail}); see that the module "
                "runs on the example arguments in eager mode, and that its "
                "forward neither changes its modules nor reads a tensor's "
                "value in Python") from error
        raise _value_dependent(module, where, detail) from error
    sys.stderr.write(written.getvalue())
    _check_static_shapes(module, exported)
    return exported


def _value_dependent(module, where, detail):
    """The error for a module whose branches or shapes depend on the values
    of a tensor: what it is, the model's line, the ways out."""
    return FrontendError(
        f"cannot export {type(module).__name__}: "
        f"{'the code at ' + where if where else 'its code'} branches on "
        "or sizes a tensor by the values it holds "
        f"(torch.export: {detail}). from_torch compiles one program for "
        "every batch of the example's shapes: compute that part outside "
        "the exported module (a transformers model's loss: return the "
        "logits and apply the loss to them in a wrapper module), or "
        "write it without value-dependent branches; values that are the "
        "same for every batch (an image grid, position ids) can be "
        "compiled in: pass them in from_torch(constants={...}) or build "
        "them in forward with torch.tensor(<Python list>) (up to "
        f"{CONSTANT_ELEMENTS} elements)")


def _check_static_shapes(module, exported):
    """Refuses an exported program in which a value read from a tensor
    (.tolist(), .item(), nonzero's count: one of torch.export's unbacked
    symbols) sizes a tensor. (One that feeds the computation is refused by
    the translation of the op that reads it; one that feeds only runtime
    assertions is left out with them.)"""
    graph = exported.graph_module.graph
    sizing = set()
    for node in graph.nodes:
        val = node.meta.get("val")
        for tensor in pytree.tree_leaves(val):
            if isinstance(tensor, torch.Tensor):
                for size in tensor.shape:
                    if isinstance(size, torch.SymInt):
                        sizing |= size.node.expr.free_symbols
    for node in graph.nodes:
        bound = node.meta.get("unbacked_bindings") or {}
        if sizing.intersection(bound):
            where = _innermost_model_frame(_frames_in(
                node.meta.get("stack_trace") or ""))
            raise _value_dependent(
                module, where, f"'{_aten.op_name(node)}' gives a value "
                "that sizes a tensor")


# The most elements a tensor the forward builds from Python data
# (torch.tensor(list), from_torch's constants) may have for export to keep
# its values: computations on such constants alone then yield values too,
# so that shapes and branches may depend on them (torch's own limit is one
# element).
CONSTANT_ELEMENTS = 1 << 20


@contextlib.contextmanager
def _constant_tensors():
    """While exporting, the tensors the forward builds from Python data of
    up to CONSTANT_ELEMENTS elements are constants of torch's fake tensors
    (their values known; what is computed from them alone too)."""
    from torch._subclasses import fake_tensor
    previous = fake_tensor.CONSTANT_NUMEL_LIMIT
    fake_tensor.CONSTANT_NUMEL_LIMIT = max(previous, CONSTANT_ELEMENTS)
    try:
        yield
    finally:
        fake_tensor.CONSTANT_NUMEL_LIMIT = previous


@contextlib.contextmanager
def _function_apply(wrap):
    """While active, ``F.apply(*args, **kwargs)`` of a subclass F of
    torch.autograd.Function returns ``wrap(F, apply, args, kwargs)``, where
    ``apply`` is F's own."""
    function = torch.autograd.Function
    original = function.__dict__["apply"]

    def apply(cls, *args, **kwargs):
        return wrap(cls, original.__get__(None, cls), args, kwargs)

    function.apply = classmethod(apply)
    try:
        yield
    finally:
        function.apply = original


def _custom_functions(applied):
    """While exporting, records in ``applied`` each subclass of
    torch.autograd.Function the forward calls (torch.export keeps only
    what their forward computes), and runs a reentrant checkpoint's
    function as it is: the checkpoint's forward runs it without gradients
    (its backward runs it again with them), which the exported program
    would keep as a gradient of zero."""
    from torch.utils.checkpoint import CheckpointFunction

    def wrap(cls, apply, args, kwargs):
        if cls is CheckpointFunction:
            run_function, _, *inputs = args
            return run_function(*inputs)
        applied.setdefault(cls, None)
        return apply(*args, **kwargs)

    return _function_apply(wrap)


def _warn_custom_backwards(module, example_args, classes):
    """A FrontendWarning for each autograd.Function in ``classes`` (the
    model's own) whose backward is not its forward's derivative (which is
    what the compiled program computes), checked at the arguments of its
    first call in an eager run of ``module`` on ``example_args``; the
    module's buffers and the random state are left as they were."""
    calls = {}

    def wrap(cls, apply, args, kwargs):
        if cls in classes and cls not in calls:
            calls[cls] = pytree.tree_map(
                lambda x: x.detach().clone()
                if isinstance(x, torch.Tensor) else x, (args, kwargs))
        return apply(*args, **kwargs)

    buffers = {name: b.detach().clone() for name, b in module.named_buffers()}
    try:
        # Its warnings were the export's too (or concern no_grad).
        with _function_apply(wrap), torch.random.fork_rng(), \
                torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module(*example_args)
    except Exception:
        pass  # the classes not reached get the warning
    finally:
        with torch.no_grad():
            for name, b in module.named_buffers():
                b.copy_(buffers[name])
    for cls in classes:
        if cls in calls and _backward_is_derivative(cls, *calls[cls]):
            continue
        try:
            where = (f" ({inspect.getsourcefile(cls)}:"
                     f"{inspect.getsourcelines(cls)[1]})")
        except (OSError, TypeError):
            where = ""
        warnings.warn(
            f"{cls.__qualname__}{where} is a torch.autograd.Function whose "
            "backward is not its forward's derivative (a straight-through "
            "estimator, a gradient reversal, a surrogate gradient): "
            "torch.export keeps what its forward computes, so the compiled "
            f"program trains with that derivative, not {cls.__qualname__}"
            ".backward, and its gradients differ from PyTorch's",
            FrontendWarning, stacklevel=4)


class _FunctionContext:
    """What an autograd.Function's forward may ask of its ``ctx``, for
    running that forward with gradients, outside its Function."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors):
        pass

    def mark_non_differentiable(self, *tensors):
        pass

    def mark_dirty(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        pass


def _backward_is_derivative(cls, args, kwargs):
    """Whether ``cls.backward`` gives the derivative of ``cls.forward`` at
    ``args`` (within 1e-4 of the largest gradient), for one random
    cotangent; False when it cannot tell."""
    floats = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
              and a.is_floating_point()]

    def inputs():
        return [a.detach().clone().requires_grad_() if i in floats else a
                for i, a in enumerate(args)]

    def gradients(outputs, xs, cotangents):
        return torch.autograd.grad(outputs, [xs[i] for i in floats],
                                   cotangents, allow_unused=True)

    try:
        with torch.enable_grad():
            xs = inputs()
            custom = pytree.tree_leaves(cls.apply(*xs, **kwargs))
            picked = [i for i, o in enumerate(custom)
                      if isinstance(o, torch.Tensor) and o.requires_grad]
            if not picked:
                return True
            gen = torch.Generator().manual_seed(0)
            cotangents = [torch.randn(custom[i].shape, generator=gen,
                                      dtype=custom[i].dtype) for i in picked]
            expected = gradients([custom[i] for i in picked], xs, cotangents)
            xs = inputs()
            if cls.setup_context is torch.autograd.Function.setup_context:
                ctx = _FunctionContext(
                    tuple(i in floats for i in range(len(xs))))
                derived = cls.forward(ctx, *xs, **kwargs)
            else:
                derived = cls.forward(*xs, **kwargs)
            derived = pytree.tree_leaves(derived)
            got = gradients([derived[i] for i in picked], xs, cotangents)
    except Exception:
        return False
    pairs = [(torch.zeros_like(args[i]) if e is None else e,
              torch.zeros_like(args[i]) if g is None else g)
             for i, e, g in zip(floats, expected, got)]
    scale = max([float(e.abs().max()) for e, _ in pairs if e.numel()] + [0.0])
    return all(torch.allclose(g, e, rtol=0.0, atol=1e-4 * scale + 1e-12)
               for e, g in pairs)


@contextlib.contextmanager
def _bound_constants(module, constants):
    """While exporting, ``module``'s forward called with the keyword
    arguments ``constants`` (name to tensor), each built in the forward
    from its values (a constant of the exported program); its signature
    without them."""
    if not constants:
        yield
        return
    forward = module.forward
    signature = inspect.signature(forward)
    values = {}
    for key, tensor in constants.items():
        if key not in signature.parameters and not any(
                p.kind is p.VAR_KEYWORD
                for p in signature.parameters.values()):
            raise FrontendError(
                f"constants: {type(module).__name__}.forward has no "
                f"argument '{key}'")
        if not isinstance(tensor, torch.Tensor):
            raise FrontendError(
                f"constants: '{key}' is a {type(tensor).__name__}, not a "
                "tensor")
        if tensor.numel() > CONSTANT_ELEMENTS:
            raise FrontendError(
                f"constants: '{key}' has {tensor.numel()} elements; a "
                f"constant holds at most {CONSTANT_ELEMENTS}")
        values[key] = (tensor.detach().cpu().tolist(), tensor.dtype,
                       tuple(tensor.shape))

    def bound(*args, **kwargs):
        for key, (data, dtype, shape) in values.items():
            kwargs[key] = torch.tensor(data, dtype=dtype).reshape(shape)
        return forward(*args, **kwargs)

    bound.__signature__ = signature.replace(parameters=[
        p for p in signature.parameters.values() if p.name not in values])
    own = module.__dict__.get("forward")
    module.forward = bound
    try:
        yield
    finally:
        if own is None:
            del module.forward
        else:
            module.forward = own


def _depends_on_values(error):
    """Whether torch.export failed on a branch or shape that depends on
    a tensor's values (a data-dependent guard; under strict=True Dynamo's
    data-dependent branching)."""
    from torch.fx.experimental.symbolic_shapes import (
        GuardOnDataDependentSymNode)
    if isinstance(error, GuardOnDataDependentSymNode):
        return True
    dynamo = getattr(getattr(torch, "_dynamo", None), "exc", None)
    return (dynamo is not None
            and isinstance(error, dynamo.TorchDynamoException)
            and "data-dependent" in str(error).lower())


def _model_line(error):
    """``file:line`` of the innermost frame of the model's own code where
    ``error`` arose (outside torch and this package): from the traceback,
    or from the frames Dynamo names in its message under strict=True; None
    when there is none."""
    frames = [(f.filename, f.lineno)
              for f in traceback.extract_tb(error.__traceback__)]
    # The traceback's frames run outermost first, then the message's, which
    # lie inside the export call.
    return _innermost_model_frame(frames + _frames_in(str(error)))


def _frames_in(text):
    """The (file, line) frames a traceback's text names, in order."""
    return [(m.group(1), int(m.group(2)))
            for m in re.finditer(r'File "([^"]+)", line (\d+)', text)]


def _innermost_model_frame(frames):
    """``file:line`` of the last of ``frames`` (outermost first) in the
    model's own code (outside torch and this package), or None."""
    skip = (os.path.dirname(torch.__file__) + os.sep,
            os.path.dirname(__file__) + os.sep)
    ours = [f for f in frames if not f[0].startswith(skip)]
    if not ours:
        return None
    filename, line = ours[-1]
    return f"{filename}:{line}"


# The mixture-of-experts implementation from_torch exports transformers'
# experts layers with (Mixtral, Qwen-MoE...): registered with transformers
# while exporting.
_GROUPED_EXPERTS = "zerobubble_grouped"


@torch.library.custom_op("zerobubble::grouped_mm", mutates_args=())
def _grouped_mm_op(x: torch.Tensor, weight: torch.Tensor, group: torch.Tensor,
                   transposed: bool) -> torch.Tensor:
    """Row r of ``x`` [R, K] times ``weight[group[r]]`` ([G, K, N], or its
    transpose when ``weight`` is [G, N, K] and ``transposed``): [R, N]."""
    w = weight[group]
    return torch.bmm(x.unsqueeze(1),
                     w.transpose(1, 2) if transposed else w).squeeze(1)


@_grouped_mm_op.register_fake
def _grouped_mm_fake(x, weight, group, transposed):
    return x.new_empty(x.size(0), weight.size(1 if transposed else 2))


def _grouped_mm_setup(ctx, inputs, output):
    x, weight, group, transposed = inputs
    ctx.save_for_backward(x, weight, group)
    ctx.transposed = transposed


def _grouped_mm_backward(ctx, grad):
    x, weight, group = ctx.saved_tensors
    dx = _grouped_mm_op(grad, weight, group, not ctx.transposed)
    outer = (grad.unsqueeze(2) * x.unsqueeze(1) if ctx.transposed
             else x.unsqueeze(2) * grad.unsqueeze(1))
    dw = torch.zeros_like(weight).index_add_(0, group, outer)
    return dx, dw, None, None


_grouped_mm_op.register_autograd(_grouped_mm_backward,
                                 setup_context=_grouped_mm_setup)


def _grouped_experts_forward(self, hidden_states, top_k_index,
                             top_k_weights):
    """transformers' experts as grouped products (``zerobubble::grouped_mm``,
    the compiler's grouped products): each token's row once per chosen
    expert, times that expert's weights, weighted by the router and summed
    per token; the arithmetic of transformers' ``batched_mm`` without its
    per-row copies of the weights, at the chosen experts' FLOPs."""
    top_k = top_k_index.size(-1)
    rows = hidden_states.repeat_interleave(top_k, dim=0)
    group = top_k_index.reshape(-1)
    if self.has_gate:
        up = self.gate_up_proj
        up_bias = self.gate_up_proj_bias if self.has_bias else None
    else:
        up = self.up_proj
        up_bias = self.up_proj_bias if self.has_bias else None
    out = _grouped_mm_op(rows, up, group, not self.is_transposed)
    if up_bias is not None:
        out = out + up_bias[group]
    out = self._apply_gate(out) if self.has_gate else self.act_fn(out)
    out = _grouped_mm_op(out, self.down_proj, group, not self.is_transposed)
    if self.has_bias:
        out = out + self.down_proj_bias[group]
    if self.has_post_expert_norm:
        out = self.post_expert_norm(out)
    out = out * top_k_weights.reshape(-1, 1).to(out.dtype)
    out = out.view(hidden_states.size(0), top_k, -1).sum(dim=1)
    return out.to(hidden_states.dtype)


@contextlib.contextmanager
def _static_experts(module, implementation=_GROUPED_EXPERTS):
    """While exporting, transformers models with mixture-of-experts layers
    run ``implementation`` (default: :func:`_grouped_experts_forward`) where
    their default ``grouped_mm`` sorts the tokens into groups of
    data-dependent sizes that static shapes cannot hold. Restored
    afterwards, the registration included. Experts split over devices
    (expert parallelism) keep theirs."""
    switched = []
    interface = None
    try:
        for sub in module.modules():
            can_set = getattr(type(sub), "_can_set_experts_implementation",
                              None)
            if not (callable(can_set) and can_set()):
                continue
            if any(getattr(m, "_is_expert_parallel", False)
                   for m in sub.modules()):
                continue
            if implementation == _GROUPED_EXPERTS and interface is None:
                from transformers.integrations.moe import \
                    ALL_EXPERTS_FUNCTIONS as interface
                interface[_GROUPED_EXPERTS] = _grouped_experts_forward
            current = sub.get_experts_implementation()
            if set(current.values()) != {implementation}:
                sub.set_experts_implementation(implementation)
                switched.append((sub, current))
        yield
    finally:
        for sub, previous in reversed(switched):
            sub.set_experts_implementation(previous)
        if interface is not None and _GROUPED_EXPERTS in interface:
            del interface[_GROUPED_EXPERTS]


def _alias_base(node):
    """The tensor that ``node`` aliases: through views and the results of
    in-place ops (``r = x.add_(y)`` is x) to the tensor they write."""
    while isinstance(node, torch.fx.Node) and (
            _aten._is_view(node) or _aten._is_in_place_result(node)):
        node = node.args[0]
    return node


def _in_place_updates(graph, cache):
    """The in-place ops of ``graph`` by the tensor they change
    (_alias_base), computed once a graph."""
    if graph not in cache:
        updates = {}
        for node in graph.nodes:
            if _aten._is_in_place_result(node):
                updates.setdefault(_alias_base(node.args[0]),
                                   []).append(node)
        cache[graph] = updates
    return cache[graph]


def _set_grad_region(node):
    """The ``wrap_with_set_grad_enabled`` region (a torch.no_grad() or
    enable_grad() block) whose output ``node`` takes (``getitem``), or
    None."""
    region = node.args[0] if node.target is operator.getitem else None
    if isinstance(region, torch.fx.Node) and \
            _aten.op_name(region) == "wrap_with_set_grad_enabled":
        return region
    return None


def _loss_inputs(output):
    """The graph nodes that the exported graph's ``output`` depends on. A
    torch.no_grad() region's output depends on what that output reads in
    the region, not on all of the region's inputs. A read of a tensor
    depends on every in-place change of it or of its views as well
    (``attn[:, 1:] += rel``, then ``attn.softmax(-1)``: the softmax reads
    ``rel``), before or after the read (more than it reads, never less)."""
    seen, stack, updates = set(), [output], {}
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        inputs = list(node.all_input_nodes)
        inputs += _in_place_updates(node.graph, updates).get(
            _alias_base(node), [])
        region = _set_grad_region(node)
        if region is not None:
            # getitem(region, k): region's output k, then its inputs.
            seen.add(region)
            module = getattr(region.graph.owning_module,
                             region.args[1].target)
            inner = _loss_inputs(module.graph.output_node().args[0][
                node.args[1]])
            inputs = [arg for arg, placeholder in zip(region.args[2:], (
                n for n in module.graph.nodes if n.op == "placeholder"))
                      if placeholder in inner]
        stack.extend(inputs)
    return seen


class _Translator:
    """Translates one ExportedProgram into a Program."""

    def __init__(self, exported, name):
        self.exported = exported
        self.name = name
        self.builder = Builder()
        self.env = {}
        self.arg_index = {}
        self.ranges = {}
        self.negative_ok = {}
        self.range_ignored = {}
        # Integer constants materialised as values (name -> array): an
        # index among them is checked as it is translated.
        self.constants = {}
        self.cuts = 0
        # The random key (a Value), made by the first random op.
        self.rng = None
        self.random_ops = 0
        # Buffer placeholders by node, their names and values; the names of
        # the running statistics and counters met so far.
        self.buffer_names = {}
        # Parameter placeholders (trainable or frozen) by node: their names.
        self.parameter_names = {}
        # Buffer placeholders changed in place: the first node changing
        # each.
        self.changed_buffers = {}
        # The inputs of regions translated inline (torch.no_grad()): the
        # graph node each stands for.
        self.region_inputs = {}
        self.buffer_values = {}
        self.running_stats = []
        self.counters = []

    def translate(self):
        from torch.export.graph_signature import InputKind

        signature = self.exported.graph_signature
        graph = self.exported.graph_module.graph
        kinds = {spec.arg.name: spec for spec in signature.input_specs}
        state = dict(self.exported.state_dict)
        state.update(self.exported.constants)

        data, params = [], []
        for node in graph.nodes:
            if node.op != "placeholder":
                continue
            spec = kinds[node.name]
            if spec.kind == InputKind.USER_INPUT:
                data.append(node)
            elif spec.kind == InputKind.PARAMETER:
                params.append((node, spec.target))
                self.parameter_names[node] = spec.target
            elif spec.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                self.env[node] = _aten.Const(state[spec.target].detach())
                if spec.kind == InputKind.BUFFER:
                    self.buffer_names[node] = spec.target
                    self.buffer_values[spec.target] = \
                        state[spec.target].detach().cpu()
            elif spec.kind == InputKind.CUSTOM_OBJ and getattr(
                    spec.arg, "class_fqn", "") == "torch._C.Generator":
                user = next(iter(node.users), None)
                raise UnsupportedOpError(
                    _aten.op_name(user) if user is not None else "generator",
                    *(_aten.module_of(user) if user is not None else ("",)),
                    detail="the forward draws with a torch.Generator of its "
                    "own; a compiled program's random ops draw from the key "
                    "zb-run gives each microbatch (seeded by --seed), so "
                    "leave out generator=")
            else:
                raise FrontendError(
                    f"unsupported exported input '{node.name}' "
                    f"({spec.kind.name})")

        signature_args, data_args, param_values = [], [], {}
        for index, node in enumerate(data):
            value = self._argument(node, f"data argument {index} "
                                   f"('{node.name}')")
            if not value.shape:
                # Each microbatch is a block of samples along the first
                # dimension, which a 0-d tensor has not.
                raise FrontendError(
                    f"data argument {index} ('{node.name}') is a 0-d "
                    "tensor: data arguments are batches of samples along "
                    "their first dimension; give it one (a tensor of one "
                    "sample per row), or pass a value that is the same for "
                    f"every batch as a constant (constants={{'{node.name}': "
                    "...}) or a buffer")
            self.arg_index[value.name] = index
            signature_args.append((value, None))
            data_args.append(DataArg(index, node.name, value.shape,
                                     self._numpy_dtype(node)))
        # A tensor reached under several names (tied weights: GPT-2's
        # wte.weight and lm_head.weight) stays one parameter, under the
        # first name; every use reads it, so its gradient sums them all.
        owner, tied, frozen = {}, {}, []
        for node, target in params:
            if not state[target].requires_grad:
                # Frozen (Whisper's sinusoidal positions, the layers a
                # fine-tuning leaves alone): a constant, like a buffer.
                self.env[node] = _aten.Const(state[target].detach())
                frozen.append(target)
                continue
            key = _tensor_identity(state[target])
            if key in owner:
                first = owner[key]
                self.env[node] = self.env[first[0]]
                tied[target] = first[1]
                continue
            owner[key] = (node, target)
            value = self._argument(node, f"parameter '{target}'")
            signature_args.append((value, target))
            param_values[target] = state[target].detach().cpu().numpy()

        loss = None
        for node in graph.nodes:
            if node.op == "call_function":
                self._call(node)
            elif node.op == "output":
                loss = self._output(node)
                self._check_changed_buffers(node)
            elif node.op == "get_attr":
                # A submodule of a higher-order op (a torch.no_grad()
                # region, as Llama's rotary embedding has).
                self.env[node] = getattr(self.exported.graph_module,
                                         node.target)
            elif node.op != "placeholder":
                raise FrontendError(f"unsupported graph node '{node.op}'")

        # Parameters the loss does not depend on (under none of their
        # names) are left out, with the further names of a tied one.
        unused = self._unused_params(graph, params, tied, frozen)
        if unused:
            # Dead code may still read them (its results are removed as the
            # program compiles): an empty tensor stands for each.
            self.builder.lines[:0] = [
                f"  {value.name} = tensor.empty() : {value.type}"
                for value, target in signature_args if target in unused]
            signature_args = [(value, target) for value, target in
                              signature_args if target not in unused]
            for target in unused:
                del param_values[target]
            unused += [name for name, kept in tied.items() if kept in unused]
            tied = {name: kept for name, kept in tied.items()
                    if kept not in unused}
        if self.rng is not None:
            data_args.append(DataArg(len(signature_args), "zb_rng", (1,),
                                     np.int64, rng=True))
            signature_args.append((self.rng, None))
        for arg in data_args:
            arg.range = self.ranges.get(arg.index)
            if arg.range is not None and self.negative_ok.get(arg.index):
                arg.range_from = -arg.range
            if arg.range is not None:
                arg.range_ignored = self.range_ignored.get(arg.index)
        buffers = {name: self.buffer_values[name].numpy()
                   for name in self.running_stats}
        counters = {name: self.buffer_values[name].numpy()
                    for name in self.counters}
        return Program(self._function(signature_args, loss, data_args),
                       self.name, param_values, data_args, self.cuts,
                       tied=tied, buffers=buffers, counters=counters,
                       frozen=frozen, unused=unused)

    # -- pieces -----------------------------------------------------

    def _argument(self, node, what):
        """The function argument for placeholder ``node``: data argument
        or parameter ``what`` (for messages)."""
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise FrontendError(
                f"input '{node.name}' is not a tensor; only tensor "
                "arguments are supported")
        dtype = _aten.ELEMENT_TYPES.get(val.dtype)
        if dtype not in _ARGUMENT_TYPES:
            # What zb-run reads and writes (.npz parameters and data).
            raise FrontendError(
                f"{what} is {val.dtype}: parameters and data of a compiled "
                "model are float32, float64, int32 or int64"
                + (_aten.half_precision_hint(val.dtype) or
                   " (convert it: .long(), .float())"))
        self.builder.reserve(node.name)
        value = Value("%" + node.name, tuple(val.shape), dtype)
        self.env[node] = value
        return value

    @staticmethod
    def _numpy_dtype(node):
        return torch.empty((), dtype=node.meta["val"].dtype).numpy().dtype

    @staticmethod
    def _unused_params(graph, params, tied, frozen):
        """The kept names of the parameters whose placeholders the graph's
        output does not depend on (LLaVA's last vision layer, whose output
        nothing reads)."""
        reached = _loss_inputs(graph.output_node())
        used = {}
        for node, target in params:
            if target not in frozen:
                kept = tied.get(target, target)
                used[kept] = used.get(kept, False) or node in reached
        return [kept for kept, hit in used.items() if not hit]

    def _call(self, node):
        try:
            self.env[node] = _aten.translate(self, node)
            if _aten.op_name(node) in _MOVES_VALUES and node.args:
                result, source = self.env[node], self.env.get(node.args[0])
                if isinstance(result, Value) and isinstance(source, Value) \
                        and result.dtype == source.dtype:
                    self.alias(result, source)
        except FrontendError:
            raise
        except Exception as exc:
            path, kind = _aten.module_of(node)
            where = f"module '{path}'" if path else "the root module"
            raise FrontendError(
                f"cannot translate '{_aten.op_name(node)}' in {where} "
                f"({kind}): {exc}") from exc

    def _output(self, node):
        results = node.args[0]
        if not isinstance(results, (tuple, list)) or len(results) != 1:
            raise FrontendError("the module must return one value, the "
                                "scalar loss")
        loss = self.env.get(results[0])
        if not isinstance(loss, Value) or loss.rank != 0 or \
                not loss.dtype.startswith("f"):
            raise FrontendError("the module must return the scalar loss, a "
                                "0-d float tensor that depends on the "
                                "inputs or parameters")
        region = _set_grad_region(results[0])
        if region is not None and not region.args[0]:
            raise FrontendError(
                "the exported program computes the loss under "
                "torch.no_grad(), so that no parameter gets a gradient "
                "(PyTorch refuses the backward of such a loss). A "
                "torch.autograd.Function whose forward runs layers under "
                "torch.no_grad() and whose backward runs them again "
                "(reversible layers, as Reformer's) makes torch.export "
                "record what follows the Function without gradients too: "
                "call its layers directly when exporting")
        return loss

    def _function(self, signature_args, loss, data_args):
        ranges = {a.index: a.range for a in data_args if a.range is not None}
        froms = {a.index: a.range_from for a in data_args
                 if a.range_from is not None}
        ignored = {a.index: a.range_ignored for a in data_args
                   if a.range_ignored is not None}
        keys = {a.index for a in data_args if a.rng}
        args = []
        for index, (value, target) in enumerate(signature_args):
            attrs = []
            if target is not None:
                attrs.append(f'zb.param = "{target}"')
            elif index in ranges:
                attrs.append(f"zb.range = {ranges[index]} : i64")
                if index in froms:
                    attrs.append(f"zb.range_from = {froms[index]} : i64")
                if index in ignored:
                    attrs.append(
                        f"zb.range_ignored = {ignored[index]} : i64")
            elif index in keys:
                attrs.append('zb.data = "zb_rng", zb.rng')
            text = f"{value.name}: {value.type}"
            if attrs:
                text += " {" + ", ".join(attrs) + "}"
            args.append(text)
        indent = " " * (len(self.name) + 12)
        header = (f"func.func @{self.name}(" +
                  f",\n{indent}".join(args) + ") -> " + loss.type + " {")
        doc = [f"// {self.name}: exported from PyTorch by zerobubble."
               " Data arguments: " + (", ".join(
                   f"{a.name} (arg{a.index})" for a in data_args) or "none")
               + f"; {len(signature_args) - len(data_args)} parameters"
               f"; {self.cuts} pipe.cut markers."]
        body = self.builder.lines
        return "\n".join([*doc, header, *body,
                          f"  return {loss.name} : {loss.type}", "}", ""])

    def random_key(self):
        """The program's random key (``tensor<1xi64>``, ``{zb.rng}``,
        made on first use) and the number of the random op asking for it:
        each op draws from its own stream of the microbatch's key."""
        if self.rng is None:
            self.builder.reserve("zb_rng")
            self.rng = Value("%zb_rng", (1,), "i64")
        self.random_ops += 1
        return self.rng, self.random_ops - 1

    def running_stat(self, buffer_node, value, momentum, init):
        """Records ``value`` into the running average of buffer
        ``buffer_node`` (a graph node) when it is a buffer of the module:
        ``pipe.running_stat``."""
        name = self.buffer_names.get(buffer_node)
        if name is None:
            return
        if name in self.running_stats:
            raise FrontendError(
                f"the running statistic '{name}' is updated twice in one "
                "forward (a batch norm module called twice in training "
                "mode); the compiler keeps one update per forward")
        self.running_stats.append(name)
        self.builder.emit(
            f'pipe.running_stat {value.name} {{buffer = "{name}", '
            f"init = {float(init)!r} : f64, "
            f"momentum = {float(momentum)!r} : f64}} : {value.type}")

    def change(self, node, where):
        """Notes that graph node ``where`` changes ``node`` in place when it
        is a buffer; refuses it when it is a parameter (the compiled step
        changes parameters only in its optimizer update)."""
        if node in self.buffer_names:
            self.changed_buffers.setdefault(node, where)
        name = self.parameter_names.get(node)
        if name is not None:
            raise UnsupportedOpError(
                _aten.op_name(where), *_aten.module_of(where),
                detail=f"parameter '{name}' is changed in place in the "
                "forward, a change that the compiled step (which changes "
                "parameters only in its optimizer update) does not make; "
                "change it between steps instead")

    def _check_changed_buffers(self, output):
        """A buffer that the forward changes in place (batch norm's running
        statistics and counters aside, which a run updates) is refused
        where the loss depends on it: the compiled step runs microbatches
        alike, each on the buffers as they were before the step, and keeps
        no change (PyTorch's microbatches read their predecessors'
        changes). Where the loss does not depend on it, a warning that the
        change is not kept."""
        read = _loss_inputs(output)
        for node, where in self.changed_buffers.items():
            name = self.buffer_names[node]
            if name in self.counters or name in self.running_stats:
                continue
            place = describe_module(*_aten.module_of(where))
            if node in read:
                raise FrontendError(
                    f"buffer '{name}' is changed in place in the forward "
                    f"(in {place}) and the loss depends on it: the compiled "
                    "step runs every microbatch on the buffers as they were "
                    "before the step and keeps no change (batch norm's "
                    "running statistics aside); keep the state out of the "
                    "forward, or update it between steps")
            warnings.warn(
                f"buffer '{name}' is changed in place in the forward (in "
                f"{place}); the loss does not depend on it, and the "
                "compiled program does not keep the change",
                FrontendWarning, stacklevel=5)

    def count_forwards(self, buffer_node):
        """A batch norm's ``num_batches_tracked`` updated in place in
        training mode: one more per forward, which a run counts."""
        name = self.buffer_names.get(buffer_node)
        if name is not None and name.endswith("num_batches_tracked") and \
                name not in self.counters:
            self.counters.append(name)

    def note_range(self, value, bound, negative=False, ignored=None):
        """Record that data argument ``value`` (if it is one) indexes
        ``bound`` entries: its ``zb.range``; with ``negative``, a use that
        counts negative values from the end. Where every use does, the
        values may also lie in [-range, 0) (``zb.range_from``). ``ignored``:
        one more value this use leaves out (a loss's ``ignore_index``, past
        the range), allowed where every use leaves it out
        (``zb.range_ignored``). The bound holds for every value of the
        argument, also those a slice on the way leaves out. Returns whether
        ``value``'s values are known to be in bounds: an argument, which
        zb-run checks, or a constant, checked here (an index computed in
        the model is not)."""
        known = self.constants.get(value.name)
        if known is not None:
            low = -bound if negative else 0
            outside = (known < low) | (known >= bound)
            if outside.any():
                raise FrontendError(
                    f"a constant index holds {int(known[outside][0])}, "
                    f"outside [{low}, {bound}) of the dimension it indexes")
            return True
        index = self.arg_index.get(value.name)
        if index is not None:
            current = self.ranges.get(index)
            self.ranges[index] = bound if current is None else min(current,
                                                                   bound)
            self.negative_ok[index] = negative and self.negative_ok.get(
                index, True)
            same = self.range_ignored.get(index, ignored) == ignored
            self.range_ignored[index] = ignored if same else None
        return index is not None

    def alias(self, result, source):
        """``result`` holds only values of ``source`` (a view, a copy, a
        padding): it inherits the argument it came from (for
        ``zb.range``)."""
        if source.name in self.arg_index and result is not source:
            self.arg_index[result.name] = self.arg_index[source.name]
        return result
