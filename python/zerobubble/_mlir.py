"""A small builder of the compiler's input IR, as MLIR text.

It emits the op set the compiler lowers and differentiates: ``linalg``
named ops (fill, matmul, batch_matmul, transpose, softmax) and
``linalg.generic`` with ``arith``/``math`` bodies, ``tensor`` reshapes and
slices, dense constants and ``pipe.cut``. It knows nothing of PyTorch.
"""

import math
import struct
from dataclasses import dataclass

import numpy as np

_FLOAT_TYPES = {"f16": np.float16, "bf16": None, "f32": np.float32,
                "f64": np.float64}
_NUMPY_TO_MLIR = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
                  np.dtype(np.float16): "f16", np.dtype(np.int64): "i64",
                  np.dtype(np.int32): "i32", np.dtype(np.int16): "i16",
                  np.dtype(np.int8): "i8", np.dtype(np.uint8): "i8",
                  np.dtype(np.bool_): "i1"}


def is_float(dtype):
    """Whether the MLIR element type ``dtype`` is a float type."""
    return dtype in _FLOAT_TYPES


def mlir_dtype(np_dtype):
    """The MLIR element type of a NumPy dtype."""
    try:
        return _NUMPY_TO_MLIR[np.dtype(np_dtype)]
    except KeyError:
        raise ValueError(f"no MLIR element type for {np_dtype}") from None


def tensor_type(shape, dtype):
    """``tensor<2x3xf32>`` for shape (2, 3) and dtype f32."""
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def float_literal(value, dtype):
    """An exact MLIR literal of the float ``value`` in type ``dtype``."""
    value = float(value)
    if dtype == "f64":
        if math.isfinite(value):
            return f"{value:.17e}"
        return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]
    if dtype == "f16":
        bits = np.array(value, dtype=np.float16).view(np.uint16)
        return "0x%04X" % int(bits)
    value32 = np.float32(value)
    if math.isfinite(value32):
        return f"{float(value32):.9e}"
    return "0x%08X" % int(np.array(value32).view(np.uint32))


def scalar_literal(value, dtype):
    """An MLIR literal of ``value`` in element type ``dtype``."""
    if is_float(dtype):
        return float_literal(value, dtype)
    if dtype == "i1":
        return "true" if value else "false"
    return str(int(value))


def scalar_constant(value, dtype):
    """The attribute of a scalar ``arith.constant``: ``1.0 : f32``; an i1
    is ``true`` or ``false`` alone (its type is implied)."""
    literal = scalar_literal(value, dtype)
    return literal if dtype == "i1" else f"{literal} : {dtype}"


def affine_map(rank, dims):
    """``affine_map<(d0, d1) -> (d1)>``: the loop dims ``dims`` of a
    ``rank``-deep iteration space (a string in ``dims`` is an expression as
    it is, such as ``"0"`` for a constant index)."""
    loops = ", ".join(f"d{i}" for i in range(rank))
    results = ", ".join(d if isinstance(d, str) else f"d{d}" for d in dims)
    return f"affine_map<({loops}) -> ({results})>"


@dataclass(frozen=True)
class Value:
    """An SSA value of tensor type."""
    name: str
    shape: tuple
    dtype: str

    @property
    def type(self):
        return tensor_type(self.shape, self.dtype)

    @property
    def rank(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)


class Body:
    """The body of a ``linalg.generic`` being built: each method emits one
    scalar op and returns its SSA name."""

    def __init__(self, builder, indent):
        self._builder = builder
        self._indent = indent
        self.lines = []

    def op(self, text, hint="t"):
        """Emit ``%name = <text>`` and return ``%name``."""
        name = self._builder.fresh(hint)
        self.lines.append(f"{self._indent}{name} = {text}")
        return name

    def const(self, value, dtype):
        return self.op(f"arith.constant {scalar_constant(value, dtype)}",
                       "c")

    def index(self, dim):
        return self.op(f"linalg.index {dim} : index", "i")

    def binary(self, opname, a, b, dtype):
        return self.op(f"{opname} {a}, {b} : {dtype}")

    def unary(self, opname, a, dtype):
        return self.op(f"{opname} {a} : {dtype}")

    def select(self, cond, a, b, dtype):
        return self.op(f"arith.select {cond}, {a}, {b} : {dtype}")

    def cast(self, value, src, dst):
        """Convert a scalar between element types."""
        if src == dst:
            return value
        if dst == "i1":  # a bool is "not zero", not the lowest bit
            if is_float(src):
                return self.op(f"arith.cmpf une, {value}, "
                               f"{self.const(0.0, src)} : {src}", "cv")
            return self.op(f"arith.cmpi ne, {value}, {self.const(0, src)} "
                           f": {src}", "cv")
        if is_float(src) and is_float(dst):
            widen = np.dtype(_FLOAT_TYPES[dst]).itemsize > np.dtype(
                _FLOAT_TYPES[src]).itemsize
            op = "arith.extf" if widen else "arith.truncf"
        elif is_float(dst):
            op = "arith.uitofp" if src == "i1" else "arith.sitofp"
        elif is_float(src):
            op = "arith.fptosi"
        else:
            op = "arith.extsi" if int(src[1:]) < int(dst[1:]) else \
                "arith.trunci"
            if src == "i1":
                op = "arith.extui"
        return self.op(f"{op} {value} : {src} to {dst}", "cv")


class Builder:
    """Accumulates the ops of one function body."""

    def __init__(self):
        self.lines = []
        self._names = set()
        self._counter = 0
        self._fills = {}

    # -- names and raw emission ---------------------------------------

    def fresh(self, hint="t"):
        """A new SSA name ``%<hint>`` (numbered when taken)."""
        hint = "".join(c if c.isalnum() or c == "_" else "_" for c in hint)
        if not hint or hint[0].isdigit():
            hint = "v" + hint
        name = hint
        while name in self._names:
            self._counter += 1
            name = f"{hint}_{self._counter}"
        self._names.add(name)
        return "%" + name

    def reserve(self, name):
        """Mark an SSA name (without ``%``) as taken."""
        self._names.add(name)

    def emit(self, text):
        """Emit an op (possibly several lines)."""
        self.lines.append(f"  {text}")

    def comment(self, text):
        self.lines.append(f"  // {text}")

    # -- constants ------------------------------------------------------

    def scalar(self, value, dtype, hint="c"):
        """A top-level scalar ``arith.constant``."""
        name = self.fresh(hint)
        self.emit(f"{name} = arith.constant {scalar_constant(value, dtype)}")
        return name

    def dense(self, array, dtype=None, hint="cst"):
        """A tensor ``arith.constant`` holding ``array``."""
        array = np.asarray(array)
        dtype = dtype or mlir_dtype(array.dtype)
        flat = array.reshape(-1)
        if flat.size and np.all(flat == flat[0]) and not (
                is_float(dtype) and np.isnan(flat[0])):
            payload = scalar_literal(flat[0].item(), dtype)
        elif dtype == "i1":
            payload = self._nested(array.astype(bool).tolist())
        else:
            np_type = {"f32": "<f4", "f64": "<f8", "f16": "<f2",
                       "i64": "<i8", "i32": "<i4", "i16": "<i2",
                       "i8": "i1"}[dtype]
            payload = '"0x' + array.astype(np_type).tobytes().hex().upper() \
                + '"'
        value = Value(self.fresh(hint), tuple(array.shape), dtype)
        self.emit(f"{value.name} = arith.constant dense<{payload}> : "
                  f"{value.type}")
        return value

    @staticmethod
    def _nested(items):
        if isinstance(items, list):
            return "[" + ", ".join(Builder._nested(i) for i in items) + "]"
        return "true" if items else "false"

    def empty(self, shape, dtype):
        value = Value(self.fresh("empty"), tuple(shape), dtype)
        self.emit(f"{value.name} = tensor.empty() : {value.type}")
        return value

    def filled(self, shape, dtype, fill):
        """A tensor of ``shape`` filled with ``fill`` (shared between
        uses)."""
        key = (tuple(shape), dtype, scalar_literal(fill, dtype))
        if key not in self._fills:
            empty = self.empty(shape, dtype)
            scalar = self.scalar(fill, dtype)
            value = Value(self.fresh("init"), tuple(shape), dtype)
            self.emit(f"{value.name} = linalg.fill ins({scalar} : {dtype}) "
                      f"outs({empty.name} : {empty.type}) -> {value.type}")
            self._fills[key] = value
        return self._fills[key]

    # -- structured ops ----------------------------------------------

    def generic(self, out_shape, out_dtype, inputs, body_fn, *,
                reductions=0, init=None, hint="t"):
        """A ``linalg.generic`` whose loops are the output's dims followed
        by ``reductions`` reduction loops.

        ``inputs`` is a list of ``(Value, dims)``, ``dims`` naming the loop
        that indexes each dimension of the value. ``body_fn(body, args,
        acc)`` emits the scalar computation on a :class:`Body` (``args``
        the input scalars, ``acc`` the accumulator) and returns the name
        to yield. The output is ``init`` (required with reductions), else a
        fresh ``tensor.empty``.
        """
        out_rank = len(out_shape)
        rank = out_rank + reductions
        iterators = ["parallel"] * out_rank + ["reduction"] * reductions
        if init is None:
            if reductions:
                raise ValueError("a reduction needs an init tensor")
            init = self.empty(out_shape, out_dtype)
        maps = [affine_map(rank, dims) for _, dims in inputs]
        maps.append(affine_map(rank, range(out_rank)))
        result = Value(self.fresh(hint), tuple(out_shape), out_dtype)
        body = Body(self, "    ")
        arg_names = [self.fresh("a") for _ in inputs]
        acc = self.fresh("acc")
        yielded = body_fn(body, arg_names, acc)
        header = (f"{result.name} = linalg.generic {{indexing_maps = "
                  f"[{', '.join(maps)}], iterator_types = ["
                  + ", ".join(f'"{it}"' for it in iterators) + "]}")
        if inputs:
            header += (f"\n      ins({', '.join(v.name for v, _ in inputs)}"
                       f" : {', '.join(v.type for v, _ in inputs)})")
        header += f"\n      outs({init.name} : {init.type}) {{"
        block_args = [f"{n}: {v.dtype}" for n, (v, _) in zip(arg_names,
                                                              inputs)]
        block_args.append(f"{acc}: {out_dtype}")
        lines = [header, f"  ^bb0({', '.join(block_args)}):", *body.lines,
                 f"    linalg.yield {yielded} : {out_dtype}",
                 f"  }} -> {result.type}"]
        self.emit("\n".join(lines))
        return result

    def matmul(self, a, b, *, transpose_b=False, hint="mm"):
        """``a @ b`` for 2-D ``a`` [M, K] and ``b`` [K, N] (or [N, K] with
        ``transpose_b``)."""
        m = a.shape[0]
        n = b.shape[0] if transpose_b else b.shape[1]
        init = self.filled((m, n), a.dtype, 0.0)
        result = Value(self.fresh(hint), (m, n), a.dtype)
        maps = ""
        if transpose_b:
            maps = (" indexing_maps = [affine_map<(m, n, k) -> (m, k)>, "
                    "affine_map<(m, n, k) -> (n, k)>, "
                    "affine_map<(m, n, k) -> (m, n)>]")
        self.emit(f"{result.name} = linalg.matmul{maps} ins({a.name}, "
                  f"{b.name} : {a.type}, {b.type}) outs({init.name} : "
                  f"{init.type}) -> {result.type}")
        return result

    def batch_matmul(self, a, b, hint="bmm"):
        """``a @ b`` for [B, M, K] and [B, K, N]."""
        shape = (a.shape[0], a.shape[1], b.shape[2])
        init = self.filled(shape, a.dtype, 0.0)
        result = Value(self.fresh(hint), shape, a.dtype)
        self.emit(f"{result.name} = linalg.batch_matmul ins({a.name}, "
                  f"{b.name} : {a.type}, {b.type}) outs({init.name} : "
                  f"{init.type}) -> {result.type}")
        return result

    def transpose(self, value, perm, hint="tr"):
        perm = list(perm)
        if perm == list(range(value.rank)):
            return value
        shape = tuple(value.shape[p] for p in perm)
        init = self.empty(shape, value.dtype)
        result = Value(self.fresh(hint), shape, value.dtype)
        self.emit(f"{result.name} = linalg.transpose ins({value.name} : "
                  f"{value.type}) outs({init.name} : {init.type}) "
                  f"permutation = [{', '.join(map(str, perm))}]")
        return result

    def softmax(self, value, dim, hint="softmax"):
        init = self.empty(value.shape, value.dtype)
        result = Value(self.fresh(hint), value.shape, value.dtype)
        self.emit(f"{result.name} = linalg.softmax dimension({dim}) "
                  f"ins({value.name} : {value.type}) outs({init.name} : "
                  f"{init.type}) -> {result.type}")
        return result

    def cut(self, value, hint="cut"):
        result = Value(self.fresh(hint), value.shape, value.dtype)
        self.emit(f"{result.name} = pipe.cut {value.name} : {value.type}")
        return result

    # -- shapes -------------------------------------------------------

    def _reassociate(self, op, value, groups, shape):
        result = Value(self.fresh("rs"), tuple(shape), value.dtype)
        reassoc = "[" + ", ".join(
            "[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"
        if op == "expand":
            self.emit(f"{result.name} = tensor.expand_shape {value.name} "
                      f"{reassoc} output_shape "
                      f"[{', '.join(map(str, shape))}] : {value.type} into "
                      f"{result.type}")
        else:
            self.emit(f"{result.name} = tensor.collapse_shape {value.name} "
                      f"{reassoc} : {value.type} into {result.type}")
        return result

    def reshape(self, value, shape):
        """``value`` viewed with ``shape`` (same number of elements)."""
        shape = tuple(shape)
        if shape == value.shape:
            return value
        groups = _merge_groups(value.shape, shape)
        if groups is not None:
            return self._reassociate("collapse", value, groups, shape)
        groups = _merge_groups(shape, value.shape)
        if groups is not None:
            return self._reassociate("expand", value, groups, shape)
        flat = self.reshape(value, (value.size,))
        return self.reshape(flat, shape)

    def drop_unit_dims(self, value, keep):
        """Collapse away the size-1 dims of ``value`` not in ``keep``."""
        keep = sorted(keep)
        if len(keep) == value.rank:
            return value
        groups = []
        pending = []
        for i in range(value.rank):
            if i in keep:
                groups.append(pending + [i])
                pending = []
            elif groups:
                groups[-1].append(i)
            else:
                pending.append(i)
        shape = tuple(value.shape[i] for i in keep)
        return self._reassociate("collapse", value, groups, shape)

    def extract_slice(self, value, offsets, sizes, strides):
        if 0 in sizes:
            # Nothing to read (tensor.extract_slice would still want its
            # offsets inside the source): PyTorch's empty slice x[..., n:].
            return self.empty(sizes, value.dtype)
        result = Value(self.fresh("slice"), tuple(sizes), value.dtype)
        self.emit(f"{result.name} = tensor.extract_slice {value.name}"
                  f"[{', '.join(map(str, offsets))}] "
                  f"[{', '.join(map(str, sizes))}] "
                  f"[{', '.join(map(str, strides))}] : {value.type} to "
                  f"{result.type}")
        return result

    def insert_slice(self, value, dest, offsets):
        result = Value(self.fresh("ins"), dest.shape, dest.dtype)
        ones = ", ".join("1" for _ in value.shape)
        self.emit(f"{result.name} = tensor.insert_slice {value.name} into "
                  f"{dest.name}[{', '.join(map(str, offsets))}] "
                  f"[{', '.join(map(str, value.shape))}] [{ones}] : "
                  f"{value.type} into {dest.type}")
        return result


def _merge_groups(src, dst):
    """The reassociation that collapses ``src`` into ``dst`` (each ``dst``
    dim the product of a contiguous run of ``src`` dims), or None."""
    if math.prod(src) != math.prod(dst):
        return None
    if not dst:
        return [] if all(d == 1 for d in src) else None
    groups, i = [], 0
    for size in dst:
        group, product = [], 1
        while i < len(src) and (product < size or not group):
            group.append(i)
            product *= src[i]
            i += 1
            if product == size and size != 1:
                break
        if product != size:
            return None
        groups.append(group)
    while i < len(src):
        if src[i] != 1:
            return None
        groups[-1].append(i)
        i += 1
    if any(not group for group in groups):
        return None
    return groups
