"""End-to-end forward test: zb-run's evaluated loss of examples/{mlp,gpt}.mlir
equals the NumPy reference (reference.py) on the same parameters and data.

zb-run is invoked as
  zb-run examples/X.mlir --eval --params P.npz --inputs I.npz
         --microbatches 3 --metrics M.json
where P.npz holds one array per parameter (keyed by its zb.param name), I.npz
one array per data argument (keyed by its zb.data name, else ``arg<position
in the signature>``) with the microbatches stacked on a new leading dim, and
M.json gets {"loss": [step loss]}, the step loss being the mean of the
microbatch losses.

The tests of the reference itself (bottom of this file) need no built tool.
"""

import json
import math

import numpy as np
import pytest

import reference as ref

MICROBATCHES = 3
REL_TOL = 1e-5

# Per model: parameter shapes, data keys in signature order, loss function.
MODELS = {
    "mlp": (ref.MLP_PARAM_SHAPES, [k for k, _, _ in ref.MLP_DATA], ref.mlp_loss),
    "gpt": (ref.GPT_PARAM_SHAPES, [k for k, _, _ in ref.GPT_DATA], ref.gpt_loss),
}


def is_layernorm_weight(name):
    """LayerNorm scales are named "<...>.ln*.weight" (ln1, ln2, lnf)."""
    parts = name.split(".")
    return len(parts) >= 2 and parts[-2].startswith("ln") and parts[-1] == "weight"


def random_params(shapes, rng):
    """float32 parameters: matrices [in, out] (or a stack of them, one per
    expert) ~ U(-1/sqrt(in), 1/sqrt(in));
    LayerNorm weights 1 + N(0, 0.1^2); other vectors (biases) ~ U(-0.1, 0.1)."""
    params = {}
    for name, shape in shapes.items():
        if len(shape) in (2, 3):  # [in, out] or [experts, in, out]
            bound = 1.0 / math.sqrt(shape[-2])
            value = rng.uniform(-bound, bound, size=shape)
        elif is_layernorm_weight(name):
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            value = rng.uniform(-0.1, 0.1, size=shape)
        params[name] = value.astype(np.float32)
    return params


def write_case(tmp_path, model, seed, params=None, inputs=None):
    """Writes params.npz and inputs.npz (random unless given) into tmp_path;
    returns (params, inputs, paths)."""
    shapes, _, _ = MODELS[model]
    rng = np.random.default_rng(seed)
    if params is None:
        params = random_params(shapes, rng)
    if inputs is None:
        inputs = ref.synthetic_inputs(model, rng, MICROBATCHES)
    p_path, i_path = tmp_path / "params.npz", tmp_path / "inputs.npz"
    np.savez(p_path, **params)
    np.savez(i_path, **inputs)
    return params, inputs, p_path, i_path


def eval_args(examples_dir, model, p_path, i_path, m_path):
    return [examples_dir / f"{model}.mlir", "--eval", "--params", p_path,
            "--inputs", i_path, "--microbatches", MICROBATCHES,
            "--metrics", m_path]


def reference_step_loss(model, params, inputs):
    """Mean over the microbatches of the reference loss."""
    _, data_keys, loss_fn = MODELS[model]
    microbatches = [tuple(inputs[k][m] for k in data_keys)
                    for m in range(MICROBATCHES)]
    return ref.mean_loss(loss_fn, params, microbatches)


def describe(proc):
    return (f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout}"
            f"\n--- stderr ---\n{proc.stderr}")


# --------------------------------------------------------------------------
# zb-run against the reference
# --------------------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("seed", [0, 1])
def test_eval_loss_matches_reference(zb_run, examples_dir, tmp_path, model,
                                     seed):
    params, inputs, p_path, i_path = write_case(tmp_path, model, seed)
    m_path = tmp_path / "metrics.json"
    proc = zb_run(*eval_args(examples_dir, model, p_path, i_path, m_path))
    assert proc.returncode == 0, describe(proc)

    metrics = json.loads(m_path.read_text())
    losses = metrics["loss"]
    assert isinstance(losses, list) and len(losses) == 1, metrics
    got = float(losses[0])
    want = reference_step_loss(model, params, inputs)
    assert math.isfinite(got), metrics
    assert got == pytest.approx(want, rel=REL_TOL), (got, want)


# Which data array to drop, and which parameter to mis-shape, per model.
MISSING_INPUT = {"mlp": "arg1", "gpt": "targets"}
BAD_PARAM = {"mlp": ("l2.bias", (31,)),
             "gpt": ("h1.mlp.fc.weight", (128, 32))}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_missing_input_array_is_reported(zb_run, examples_dir, tmp_path, model):
    missing = MISSING_INPUT[model]
    inputs = ref.synthetic_inputs(model, np.random.default_rng(0), MICROBATCHES)
    del inputs[missing]
    _, _, p_path, i_path = write_case(tmp_path, model, 0, inputs=inputs)
    proc = zb_run(*eval_args(examples_dir, model, p_path, i_path,
                             tmp_path / "metrics.json"))
    # A diagnostic, not a crash: a positive exit status (negative = signal).
    assert proc.returncode > 0, describe(proc)
    assert missing in proc.stderr + proc.stdout, describe(proc)


@pytest.mark.parametrize("ranks", [1, 2])
def test_bad_data_is_named_once_before_compiling(zb_run, examples_dir, tmp_path,
                                                 monkeypatch, ranks):
    """A data array that does not fit the model is named once, before
    anything compiles (the compile cache stays empty) and before the ranks
    start (no MPI abort)."""
    inputs = ref.synthetic_inputs("gpt", np.random.default_rng(0), MICROBATCHES)
    inputs["targets"] = inputs["targets"][:, :-1]
    _, _, p_path, i_path = write_case(tmp_path, "gpt", 0, inputs=inputs)
    cache = tmp_path / "cache"
    monkeypatch.setenv("ZB_CACHE_DIR", str(cache))
    proc = zb_run(examples_dir / "gpt.mlir", "--np", ranks, "--steps", 1,
                  "--microbatches", MICROBATCHES, "--params", p_path,
                  "--inputs", i_path)
    assert proc.returncode > 0, describe(proc)
    errors = [line for line in proc.stderr.splitlines()
              if line.startswith("zb-run: error:")]
    assert len(errors) == 1, describe(proc)
    assert "data array 'targets'" in errors[0], describe(proc)
    assert "MPI_ABORT" not in proc.stderr + proc.stdout, describe(proc)
    assert not cache.exists() or not any(cache.rglob("*")), \
        sorted(map(str, cache.rglob("*")))


@pytest.mark.parametrize("value", [64, -5, 1 << 40])
def test_token_outside_the_range_is_named(zb_run, examples_dir, tmp_path,
                                          value):
    """A token id outside the model's zb.range [0, 64) would index past the
    embedding table: named with its place, not read."""
    inputs = ref.synthetic_inputs("gpt", np.random.default_rng(0), MICROBATCHES)
    inputs["tokens"][1, 0, 5] = value
    _, _, p_path, i_path = write_case(tmp_path, "gpt", 0, inputs=inputs)
    proc = zb_run(*eval_args(examples_dir, "gpt", p_path, i_path,
                             tmp_path / "metrics.json"))
    assert proc.returncode > 0, describe(proc)
    assert (f"data array 'tokens' in '{i_path}' holds {value} at [1, 0, 5], "
            "outside the model's range [0, 64) (zb.range)") in proc.stderr, \
        describe(proc)


@pytest.mark.parametrize("shape, message", [
    ("4294967296x4294967296", "holds more than 2^50 bytes (1 PiB)"),
    ("281474976710657", "holds more than 2^50 bytes (1 PiB)"),
    ("1099511627776", "more than this machine's memory"),
])
def test_arguments_too_large_are_named(zb_run, tmp_path, shape, message):
    model = tmp_path / "big.mlir"
    model.write_text(f"""
func.func @big(%w: tensor<{shape}xf32> {{zb.param = "w"}},
               %x: tensor<2xf32>) -> tensor<f32> {{
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}}
""")
    proc = zb_run(model, "--eval")
    assert proc.returncode > 0, describe(proc)
    assert message in proc.stderr, describe(proc)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_misshaped_param_is_reported(zb_run, examples_dir, tmp_path, model):
    name, bad_shape = BAD_PARAM[model]
    shapes, _, _ = MODELS[model]
    assert shapes[name] != bad_shape
    params = random_params(shapes, np.random.default_rng(0))
    params[name] = np.zeros(bad_shape, dtype=np.float32)
    _, _, p_path, i_path = write_case(tmp_path, model, 0, params=params)
    proc = zb_run(*eval_args(examples_dir, model, p_path, i_path,
                             tmp_path / "metrics.json"))
    assert proc.returncode > 0, describe(proc)
    assert name in proc.stderr + proc.stdout, describe(proc)


# --------------------------------------------------------------------------
# The reference itself (no tool needed)
# --------------------------------------------------------------------------


def mlp_loss_loops(params, x, labels):
    """mlp.mlir written out with scalar Python loops, as a check on the
    vectorised reference."""

    def dense(h, w, b, relu):
        out = []
        for row in h:
            r = []
            for j in range(len(b)):
                s = float(b[j]) + sum(float(row[i]) * float(w[i][j])
                                      for i in range(len(row)))
                r.append(max(s, 0.0) if relu else s)
            out.append(r)
        return out

    h = dense(x, params["l1.weight"], params["l1.bias"], True)
    h = dense(h, params["l2.weight"], params["l2.bias"], True)
    logits = dense(h, params["l3.weight"], params["l3.bias"], False)
    total = 0.0
    for row, label in zip(logits, labels):
        total += math.log(sum(math.exp(v) for v in row)) - row[int(label)]
    return total / len(logits)


def test_mlp_reference_by_hand():
    # All-zero weights and biases: uniform logits, loss = log(10).
    zero = {k: np.zeros(s, np.float32) for k, s in ref.MLP_PARAM_SHAPES.items()}
    x = np.ones((8, 16), np.float32)
    labels = np.arange(8) % 10
    assert ref.mlp_loss(zero, x, labels) == pytest.approx(math.log(10), rel=1e-12)

    # Only the last bias set: logits = b3 for each sample.
    p = dict(zero)
    p["l3.bias"] = np.arange(10, dtype=np.float32)
    labels = np.array([9, 9, 9, 9, 0, 0, 0, 0])
    lse = math.log(sum(math.exp(v) for v in range(10)))
    want = lse - (4 * 9 + 4 * 0) / 8
    assert ref.mlp_loss(p, x, labels) == pytest.approx(want, rel=1e-12)

    # Random parameters against the scalar-loop version.
    rng = np.random.default_rng(3)
    p = random_params(ref.MLP_PARAM_SHAPES, rng)
    data = ref.synthetic_inputs("mlp", rng, 1)
    x, labels = data["arg0"][0], data["arg1"][0]
    assert ref.mlp_loss(p, x, labels) == pytest.approx(
        mlp_loss_loops(p, x, labels), rel=1e-12)


def test_gpt_reference_shapes_and_causality():
    rng = np.random.default_rng(4)
    params = random_params(ref.GPT_PARAM_SHAPES, rng)
    data = ref.synthetic_inputs("gpt", rng, 1)
    tokens, targets = data["tokens"][0], data["targets"][0]
    assert tokens.shape == (ref.GPT_B, ref.GPT_T)

    logits = ref.gpt_logits(params, tokens)
    assert logits.shape == (ref.GPT_B, ref.GPT_T, ref.GPT_V)
    assert np.all(np.isfinite(logits))

    # Causal: changing token t leaves the logits of positions < t unchanged
    # and changes those at t.
    t = 9
    changed = tokens.copy()
    changed[:, t] = (changed[:, t] + 1) % ref.GPT_V
    logits2 = ref.gpt_logits(params, changed)
    np.testing.assert_allclose(logits2[:, :t], logits[:, :t], rtol=0, atol=1e-12)
    assert np.abs(logits2[:, t] - logits[:, t]).max() > 1e-6

    # The loss is the mean cross-entropy over all B*T positions.
    flat = logits.reshape(-1, ref.GPT_V)
    lse = np.log(np.exp(flat).sum(axis=1))
    want = np.mean(lse - flat[np.arange(flat.shape[0]), targets.reshape(-1)])
    assert ref.gpt_loss(params, tokens, targets) == pytest.approx(want, rel=1e-12)

    # A zero LM head gives uniform predictions: loss = log(V).
    params["lm_head.weight"] = np.zeros_like(params["lm_head.weight"])
    assert ref.gpt_loss(params, tokens, targets) == pytest.approx(
        math.log(ref.GPT_V), rel=1e-12)


def test_gpt_reference_attention_single_head_by_hand():
    # One head, T=2, d=1, identity projections: position 0 attends only to
    # itself; position 1 mixes values with softmax weights of q1 * k_j.
    a = np.array([[[1.0], [2.0]]])
    eye = np.eye(1)
    out = ref.causal_attention(a, eye, eye, eye, n_heads=1)
    w = np.exp([2.0 * 1.0, 2.0 * 2.0])
    w /= w.sum()
    np.testing.assert_allclose(out[0, :, 0], [1.0, w[0] * 1.0 + w[1] * 2.0],
                               rtol=1e-12)


def test_random_params_layernorm_weights_near_one():
    params = random_params(ref.GPT_PARAM_SHAPES, np.random.default_rng(0))
    for name in ("h0.ln1.weight", "h3.ln2.weight", "lnf.weight"):
        assert abs(float(params[name].mean()) - 1.0) < 0.1, name
    for name in ("h0.ln1.bias", "lnf.bias", "h2.mlp.fc.bias"):
        assert abs(float(params[name].mean())) < 0.1, name


@pytest.mark.parametrize("model,ranks,schedule,extra", [
    ("mlp", 2, "1f1b", []),
    ("mlp", 2, "zb-v", []),
    ("gpt", 2, "zb-h1", []),
    ("gpt", 2, "zb-v", []),
    ("gpt", 3, "interleaved-1f1b", ["--chunks", 2]),
])
def test_pipelined_eval_equals_one_process(zb_run, examples_dir, tmp_path,
                                           model, ranks, schedule, extra):
    """--eval --np P runs the per-rank programs with the schedule's F
    actions alone: the loss of --eval on one process and of the
    reference."""
    params, inputs, p_path, i_path = write_case(tmp_path, model, 2)
    one_path, two_path = tmp_path / "one.json", tmp_path / "two.json"
    one = zb_run(*eval_args(examples_dir, model, p_path, i_path, one_path))
    assert one.returncode == 0, describe(one)
    proc = zb_run(*eval_args(examples_dir, model, p_path, i_path, two_path),
                  "--np", ranks, "--schedule", schedule, *extra)
    assert proc.returncode == 0, describe(proc)
    want = reference_step_loss(model, params, inputs)
    got = json.loads(two_path.read_text())
    assert got["ranks"] == ranks and got["schedule"] == schedule, got
    assert len(got["loss"]) == 1, got
    assert got["loss"][0] == pytest.approx(
        json.loads(one_path.read_text())["loss"][0], rel=1e-6)
    assert got["loss"][0] == pytest.approx(want, rel=REL_TOL)
    # Rank 0 reports once; no training step, no measured schedule.
    assert proc.stdout.count("mean loss") == 1, describe(proc)
    assert "step 1/" not in proc.stdout and "bubble rate" not in proc.stdout


@pytest.mark.parametrize("flags,message", [
    (["--dump-grads", "g.npz"], "--eval computes no gradients"),
    (["--trace", "t.json"], "--eval runs forwards only"),
])
def test_pipelined_eval_refuses_what_needs_a_backward(
        zb_run, examples_dir, tmp_path, flags, message):
    _, _, p_path, i_path = write_case(tmp_path, "mlp", 0)
    proc = zb_run(*eval_args(examples_dir, "mlp", p_path, i_path,
                             tmp_path / "m.json"), "--np", 2,
                  *[tmp_path / f if f.endswith(".npz") or f.endswith(".json")
                    else f for f in flags])
    assert proc.returncode == 1, describe(proc)
    assert message in proc.stderr, describe(proc)
