"""Per-op gradient tests of --zb-autodiff: every model in grad_ops/ is a small
float64 function exercising one op (or a few related ones) of the autodiff
op set, ending in a scalar loss that weights the op's output with a fixed
non-uniform pattern (sum of 0.5 y^2 + w y, w made from linalg.index), so the
gradients are neither uniform nor independent of the values.

Each model is run as
  zb-run grad_ops/X.mlir --grads --check-grad --grad-samples 8
         --microbatches 2 --params P.npz --dump-grads G.npz
with random float64 parameters (seeded; the data arguments are synthesised by
zb-run from --seed), so check-grad compares the compiled gradients with
central finite differences at its float64 tolerance (1e-6 relative). The
test asserts a zero exit, parses the reported worst error, and checks the
dumped gradients' names, shapes, dtype and finiteness.

Ops outside the set must make `zb-run --grads` fail with a diagnostic naming
the op (bottom of this file).
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest

GRAD_OPS = Path(__file__).resolve().parent / "grad_ops"
MODELS = sorted(p.stem for p in GRAD_OPS.glob("*.mlir"))

# check-grad's default tolerance for float64 parameters.
F64_TOL = 1e-6
SAMPLES = 8
MICROBATCHES = 2

# "%name: tensor<3x4xf64> {zb.param = "name"}" in a function signature.
PARAM_RE = re.compile(
    r'%[\w.$-]+\s*:\s*tensor<((?:\d+x)*)(f64|f32)>\s*\{\s*zb\.param\s*=\s*"([^"]+)"')
WORST_RE = re.compile(
    r"check-grad: worst relative error (\S+) at (\S+) \(analytic (\S+), "
    r"finite difference (\S+)\)")


def model_params(path):
    """[(name, shape, dtype)] of the zb.param arguments of the model."""
    out = []
    for dims, dtype, name in PARAM_RE.findall(path.read_text()):
        shape = tuple(int(d) for d in dims.split("x") if d)
        out.append((name, shape, dtype))
    return out


def describe(proc):
    return (f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout}"
            f"\n--- stderr ---\n{proc.stderr}")


def test_models_found():
    assert len(MODELS) >= 20, MODELS
    for name in MODELS:
        params = model_params(GRAD_OPS / f"{name}.mlir")
        assert params, f"{name}.mlir: no zb.param argument found"
        assert all(dtype == "f64" for _, _, dtype in params), name


@pytest.mark.parametrize("name", MODELS)
def test_op_gradient_matches_finite_differences(zb_run, tmp_path, name):
    path = GRAD_OPS / f"{name}.mlir"
    rng = np.random.default_rng(sum(map(ord, name)))
    params = {p: 0.8 * rng.standard_normal(shape)
              for p, shape, _ in model_params(path)}
    p_path, g_path = tmp_path / "params.npz", tmp_path / "grads.npz"
    np.savez(p_path, **params)
    proc = zb_run(path, "--grads", "--check-grad", "--grad-samples", SAMPLES,
                  "--microbatches", MICROBATCHES, "--seed", 1,
                  "--params", p_path, "--dump-grads", g_path)
    assert proc.returncode == 0, describe(proc)

    m = WORST_RE.search(proc.stdout)
    assert m, describe(proc)
    worst = float(m.group(1))
    assert math.isfinite(worst) and worst <= F64_TOL, describe(proc)

    grads = np.load(g_path)
    # The file holds every parameter's gradient and the step's loss.
    assert sorted(grads.files) == sorted([*params, "loss"]), (grads.files,
                                                              list(params))
    assert grads["loss"].shape == () and np.isfinite(grads["loss"])
    for p, value in params.items():
        g = grads[p]
        assert g.shape == value.shape and g.dtype == np.float64, (p, g.shape,
                                                                  g.dtype)
        assert np.all(np.isfinite(g)), p
        # The weighted loss reaches every entry of every parameter here
        # except where an op selects (max/min, masks, insert_slice), so a
        # parameter whose gradient is all zero means a dropped adjoint.
        assert np.any(g != 0), f"{p}: all-zero gradient"


# Each op or form of the op set, and a token that shows it is used
# in some grad_ops model (guards the coverage against edits).
COVERAGE = {
    "linalg.matmul": "linalg.matmul ins",
    "linalg.matmul with indexing_maps": "linalg.matmul indexing_maps",
    "linalg.batch_matmul": "linalg.batch_matmul",
    "linalg.transpose": "linalg.transpose",
    "linalg.broadcast": "linalg.broadcast",
    "linalg.reduce (sum)": "linalg.reduce",
    "linalg.fill": "linalg.fill",
    "linalg.softmax": "linalg.softmax",
    "arith.addf": "arith.addf",
    "arith.subf": "arith.subf",
    "arith.mulf": "arith.mulf",
    "arith.divf": "arith.divf",
    "arith.negf": "arith.negf",
    "arith.maximumf": "arith.maximumf",
    "arith.minimumf": "arith.minimumf",
    "arith.cmpf": "arith.cmpf",
    "arith.select": "arith.select",
    "math.exp": "math.exp",
    "math.log": "math.log",
    "math.tanh": "math.tanh",
    "math.sqrt": "math.sqrt",
    "math.rsqrt": "math.rsqrt",
    "math.erf": "math.erf",
    "math.sin": "math.sin",
    "math.cos": "math.cos",
    "math.powf": "math.powf",
    "linalg.index": "linalg.index",
    "arith.cmpi": "arith.cmpi",
    "arith.index_cast": "arith.index_cast",
    "arith.sitofp": "arith.sitofp",
    "embedding lookup": "tensor.extract %",
    "tensor.empty": "tensor.empty",
    "tensor.expand_shape": "tensor.expand_shape",
    "tensor.collapse_shape": "tensor.collapse_shape",
    "tensor.extract_slice": "tensor.extract_slice",
    "tensor.insert_slice": "tensor.insert_slice",
    "tensor constant": "arith.constant dense<",
}


def test_op_set_is_covered():
    texts = "\n".join((GRAD_OPS / f"{n}.mlir").read_text() for n in MODELS)
    missing = [op for op, token in COVERAGE.items() if token not in texts]
    assert not missing, missing
    # Max reductions (linalg.reduce and generic forms).
    assert re.search(r"linalg\.reduce[^\n]*\n[^\n]*\n\s*%\w+ = arith\.maximumf",
                     texts)


# --------------------------------------------------------------------------
# Ops outside the set: a diagnostic naming the op, not a crash
# --------------------------------------------------------------------------

UNSUPPORTED = {
    # A math op without a rule in a generic body.
    "math.atan": """
#id = affine_map<(i, j) -> (i, j)>
#s = affine_map<(i, j) -> ()>
func.func @uses_atan(%a: tensor<3x4xf64> {zb.param = "a"}) -> tensor<f64> {
  %zero = arith.constant 0.0 : f64
  %el = tensor.empty() : tensor<f64>
  %l0 = linalg.fill ins(%zero : f64) outs(%el : tensor<f64>) -> tensor<f64>
  %loss = linalg.generic {indexing_maps = [#id, #s], iterator_types = ["reduction", "reduction"]}
      ins(%a : tensor<3x4xf64>) outs(%l0 : tensor<f64>) {
  ^bb0(%p: f64, %acc: f64):
    %t = math.atan %p : f64
    %r = arith.addf %acc, %t : f64
    linalg.yield %r : f64
  } -> tensor<f64>
  return %loss : tensor<f64>
}
""",
    # A named linalg op without a rule (a convolution).
    "linalg.conv_1d_nwc_wcf": """
#id = affine_map<(n, w, c) -> (n, w, c)>
#s = affine_map<(n, w, c) -> ()>
func.func @uses_conv(%x: tensor<1x8x2xf64> {zb.data = "x"},
                     %k: tensor<3x2x4xf64> {zb.param = "kernel"}) -> tensor<f64> {
  %zero = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<1x6x4xf64>
  %z = linalg.fill ins(%zero : f64) outs(%e : tensor<1x6x4xf64>) -> tensor<1x6x4xf64>
  %y = linalg.conv_1d_nwc_wcf {dilations = dense<1> : tensor<1xi64>, strides = dense<1> : tensor<1xi64>}
      ins(%x, %k : tensor<1x8x2xf64>, tensor<3x2x4xf64>) outs(%z : tensor<1x6x4xf64>) -> tensor<1x6x4xf64>
  %el = tensor.empty() : tensor<f64>
  %l0 = linalg.fill ins(%zero : f64) outs(%el : tensor<f64>) -> tensor<f64>
  %loss = linalg.generic {indexing_maps = [#id, #s], iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%y : tensor<1x6x4xf64>) outs(%l0 : tensor<f64>) {
  ^bb0(%p: f64, %acc: f64):
    %t = arith.mulf %p, %p : f64
    %r = arith.addf %acc, %t : f64
    linalg.yield %r : f64
  } -> tensor<f64>
  return %loss : tensor<f64>
}
""",
}


@pytest.mark.parametrize("op", sorted(UNSUPPORTED))
def test_op_outside_the_set_is_reported(zb_run, tmp_path, op):
    path = tmp_path / "model.mlir"
    path.write_text(UNSUPPORTED[op])
    proc = zb_run(path, "--grads")
    # A diagnostic, not a crash: a positive exit status (negative = signal).
    assert proc.returncode > 0, describe(proc)
    out = proc.stdout + proc.stderr
    assert f"'{op}'" in out, describe(proc)
    assert "differentiat" in out, describe(proc)
