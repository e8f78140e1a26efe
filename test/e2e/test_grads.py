"""End-to-end gradient test: zb-run's gradients of examples/{mlp,gpt}.mlir
(compiled reverse-mode autodiff, float32) equal the hand-derived NumPy
backward in reference.py (float64), and, where PyTorch is installed, torch
autograd (float64).

zb-run is invoked as
  zb-run examples/X.mlir --grads --params P.npz --inputs I.npz
         --microbatches 2 --dump-grads G.npz --metrics M.json
G.npz holds one gradient per parameter (keyed by its zb.param name), the mean
over the microbatches of each microbatch's loss gradient; M.json holds
{"loss": [mean loss], "microbatch_loss": [...]}.

Criterion, per parameter: max|ours - ref| <= 1e-5 * max|ref| (the issue's
"1e-5 relative", relative to the parameter's largest gradient entry so that
entries near zero do not dominate). The compiled model runs in float32; the
measured errors are about 1e-7 (mlp) and 1e-6 (gpt) of max|ref|, so 1e-5
holds with a margin of 10x or more (figures in the report of issue 5).

The tests of the reference backward itself (finite differences, no tool
needed) are at the bottom.
"""

import json
import math
import re
import shutil
import subprocess

import numpy as np
import pytest

import reference as ref
from test_forward import describe, random_params

MICROBATCHES = 2
GRAD_REL_TOL = 1e-5
LOSS_REL_TOL = 1e-5

# Per model: parameter shapes, data keys in signature order, loss and
# gradient functions of one microbatch.
MODELS = {
    "mlp": (ref.MLP_PARAM_SHAPES, [k for k, _, _ in ref.MLP_DATA],
            ref.mlp_loss, ref.mlp_grads),
    "gpt": (ref.GPT_PARAM_SHAPES, [k for k, _, _ in ref.GPT_DATA],
            ref.gpt_loss, ref.gpt_grads),
    "moe": (ref.MOE_PARAM_SHAPES, [k for k, _, _ in ref.MOE_DATA],
            ref.moe_loss, ref.moe_grads),
}


def make_case(model, seed):
    """Random float32 parameters and M microbatches of data."""
    shapes = MODELS[model][0]
    rng = np.random.default_rng(seed)
    params = random_params(shapes, rng)
    inputs = ref.synthetic_inputs(model, rng, MICROBATCHES)
    return params, inputs


def microbatches(model, inputs):
    keys = MODELS[model][1]
    return [tuple(inputs[k][m] for k in keys) for m in range(MICROBATCHES)]


def run_grads(zb_run, examples_dir, tmp_path, model, params, inputs,
              *flags):
    """Runs zb-run --grads; returns (grads dict, metrics dict, proc)."""
    p_path, i_path = tmp_path / "params.npz", tmp_path / "inputs.npz"
    g_path, m_path = tmp_path / "grads.npz", tmp_path / "metrics.json"
    np.savez(p_path, **params)
    np.savez(i_path, **inputs)
    proc = zb_run(examples_dir / f"{model}.mlir", "--grads",
                  "--params", p_path, "--inputs", i_path,
                  "--microbatches", MICROBATCHES,
                  "--dump-grads", g_path, "--metrics", m_path, *flags)
    assert proc.returncode == 0, describe(proc)
    with np.load(g_path) as archive:
        grads = {k: archive[k] for k in archive.files}
    return grads, json.loads(m_path.read_text()), proc


def grad_errors(got, want):
    """Per parameter: max|got - want| / max(max|want|, tiny)."""
    errors = {}
    for name, w in want.items():
        g = np.asarray(got[name], dtype=np.float64)
        assert g.shape == w.shape, (name, g.shape, w.shape)
        scale = max(float(np.abs(w).max()), 1e-30)
        errors[name] = float(np.abs(g - w).max()) / scale
    return errors


def assert_grads_close(got, want, tol, what):
    errors = grad_errors(got, want)
    bad = {k: e for k, e in errors.items() if not e <= tol}
    worst = max(errors, key=errors.get)
    assert not bad, (f"{what}: {len(bad)} parameter(s) above {tol:g}: "
                     + ", ".join(f"{k} {e:.2e}" for k, e in sorted(bad.items()))
                     + f" (worst {worst} {errors[worst]:.2e})")


# --------------------------------------------------------------------------
# zb-run against the hand-derived reference
# --------------------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("seed", [0, 1])
def test_grads_match_reference(zb_run, examples_dir, tmp_path, model, seed):
    shapes, _, loss_fn, grads_fn = MODELS[model]
    params, inputs = make_case(model, seed)
    grads, metrics, proc = run_grads(zb_run, examples_dir, tmp_path, model,
                                     params, inputs)
    mbs = microbatches(model, inputs)

    # Every parameter, and nothing else, with the parameter's shape and dtype.
    grad_names = set(grads) - {"loss"}
    assert grad_names == set(shapes), sorted(grad_names ^ set(shapes))
    for name, shape in shapes.items():
        assert grads[name].shape == shape, name
        assert grads[name].dtype == np.float32, (name, grads[name].dtype)
        assert np.all(np.isfinite(grads[name])), name

    want = ref.mean_grads(grads_fn, params, mbs)
    assert_grads_close(grads, want, GRAD_REL_TOL, f"{model} seed {seed}")

    # The loss of the same run: the step loss and each microbatch's loss.
    want_losses = [loss_fn(params, *mb) for mb in mbs]
    want_loss = float(np.mean(want_losses))
    assert metrics["loss"][0] == pytest.approx(want_loss, rel=LOSS_REL_TOL)
    assert metrics["microbatch_loss"] == pytest.approx(want_losses,
                                                       rel=LOSS_REL_TOL)
    printed = re.search(r"mean loss (\S+)", proc.stdout)
    assert printed, describe(proc)
    assert float(printed.group(1)) == pytest.approx(want_loss, rel=1e-5)
    if "loss" in grads and "loss" not in shapes:
        assert float(grads["loss"]) == pytest.approx(want_loss,
                                                     rel=LOSS_REL_TOL)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("schedule", ["zb-h1", "zb-v"])
def test_pipelined_grads_equal_one_process(zb_run, examples_dir, tmp_path,
                                           model, schedule):
    """--grads --np 2 runs one step of the per-rank programs without an
    update: the same gradients and loss as --grads on one process, and the
    hand-derived reference."""
    shapes, _, loss_fn, grads_fn = MODELS[model]
    params, inputs = make_case(model, 3)
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one, one_metrics, _ = run_grads(zb_run, examples_dir, tmp_path / "one",
                                    model, params, inputs)
    two, two_metrics, proc = run_grads(zb_run, examples_dir,
                                       tmp_path / "two", model, params,
                                       inputs, "--np", 2, "--schedule",
                                       schedule)
    assert set(two) == set(one), sorted(set(two) ^ set(one))
    assert_grads_close(two, {k: np.asarray(v, np.float64)
                             for k, v in one.items() if k in shapes},
                       1e-6, f"{model} {schedule} --np 2 vs --np 1")
    assert_grads_close(two, ref.mean_grads(grads_fn, params,
                                           microbatches(model, inputs)),
                       GRAD_REL_TOL, f"{model} {schedule} --np 2 vs reference")
    assert two_metrics["loss"] == pytest.approx(one_metrics["loss"],
                                                rel=1e-6)
    assert len(two_metrics["loss"]) == 1
    printed = re.search(r"mean loss (\S+)", proc.stdout)
    assert printed, describe(proc)
    assert float(printed.group(1)) == pytest.approx(one_metrics["loss"][0],
                                                    rel=1e-5)
    assert "step 1/" not in proc.stdout, "--grads takes no training step"


@pytest.mark.parametrize("schedule", ["1f1b", "zb-h1"])
def test_integer_stage_input_grads_equal_one_process(zb_run, zb_opt,
                                                     examples_dir, tmp_path,
                                                     schedule):
    """On two ranks zb-run drops examples/moe.mlir's three-stage markers and
    the cost model cuts after the router: rank 0 hands rank 1 each sample's
    expert (i64) with the activations. No gradient flows back for the
    integer: none is sent (rank 0 takes a zero for it), and the gradients
    are those of one process and of the reference."""
    lowered = zb_opt(examples_dir / "moe.mlir", "--zb-strip-cuts",
                     f"--zb-pipeline=stages=2 microbatches={MICROBATCHES} "
                     f"schedule={schedule} lower-to-cpu=false")
    assert lowered.returncode == 0, lowered.stderr
    rank0, rank1 = lowered.stdout.split("func.func @zb_rank1_step")
    rank0 = rank0.split("func.func @zb_rank0_step")[1]
    assert "call @zbrt_send_i64" in rank0, "the cut is not after the router"
    assert "call @zbrt_recv_i64" in rank1
    assert "call @zbrt_recv_i64" not in rank0, "rank 0 receives an integer"
    assert "call @zbrt_send_i64" not in rank1, "rank 1 sends an integer"

    params, inputs = make_case("moe", 4)
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one, one_metrics, _ = run_grads(zb_run, examples_dir, tmp_path / "one",
                                    "moe", params, inputs)
    two, two_metrics, _ = run_grads(zb_run, examples_dir, tmp_path / "two",
                                    "moe", params, inputs, "--np", 2,
                                    "--schedule", schedule)
    shapes, _, _, grads_fn = MODELS["moe"]
    assert_grads_close(two, {k: np.asarray(v, np.float64)
                             for k, v in one.items() if k in shapes},
                       1e-6, f"moe {schedule} --np 2 vs --np 1")
    assert_grads_close(two, ref.mean_grads(grads_fn, params,
                                           microbatches("moe", inputs)),
                       GRAD_REL_TOL, f"moe {schedule} --np 2 vs reference")
    assert two_metrics["loss"] == pytest.approx(one_metrics["loss"],
                                                rel=1e-6)


# --------------------------------------------------------------------------
# zb-run against torch autograd (float64), where PyTorch is installed
# --------------------------------------------------------------------------


def torch_mlp_loss(torch, p, x, labels):
    F = torch.nn.functional
    h = torch.relu(x @ p["l1.weight"] + p["l1.bias"])
    h = torch.relu(h @ p["l2.weight"] + p["l2.bias"])
    logits = h @ p["l3.weight"] + p["l3.bias"]
    return F.cross_entropy(logits, labels)


def torch_gpt_loss(torch, p, tokens, targets):
    F = torch.nn.functional
    B, T = tokens.shape
    d, H = ref.GPT_D, ref.GPT_H
    dh = d // H
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)

    def ln(x, name):
        return F.layer_norm(x, (d,), p[name + ".weight"], p[name + ".bias"],
                            eps=ref.LN_EPS)

    def heads(t):  # [B, T, d] -> [B, H, T, dh]
        return t.reshape(B, T, H, dh).transpose(1, 2)

    x = p["wte"][tokens] + p["wpe"][:T]
    for i in range(ref.GPT_LAYERS):
        h = f"h{i}."
        a = ln(x, h + "ln1")
        q, k, v = (heads(a @ p[h + f"attn.{w}.weight"]) for w in "qkv")
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
        scores = scores.masked_fill(future, float("-inf"))
        o = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, d)
        x = x + o @ p[h + "attn.proj.weight"] + p[h + "attn.proj.bias"]
        c = ln(x, h + "ln2")
        f = F.gelu(c @ p[h + "mlp.fc.weight"] + p[h + "mlp.fc.bias"],
                   approximate="none")
        x = x + f @ p[h + "mlp.proj.weight"] + p[h + "mlp.proj.bias"]
    logits = ln(x, "lnf") @ p["lm_head.weight"]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                           targets.reshape(-1))


def torch_moe_loss(torch, p, x, labels):
    F = torch.nn.functional
    h1 = torch.relu(x @ p["l1.weight"] + p["l1.bias"])
    route = h1 @ p["router.weight"]
    probs = torch.softmax(route, dim=1)
    weight, group = probs.max(dim=1)
    hidden = torch.relu(torch.bmm(h1.unsqueeze(1),
                                  p["experts.up"][group]).squeeze(1))
    out = torch.bmm(hidden.unsqueeze(1), p["experts.down"][group]).squeeze(1)
    h2 = h1 + weight.unsqueeze(1) * out
    return F.cross_entropy(h2 @ p["head.weight"] + p["head.bias"], labels)


TORCH_LOSSES = {"mlp": torch_mlp_loss, "gpt": torch_gpt_loss,
                "moe": torch_moe_loss}


def torch_grads(torch, model, params, inputs):
    """(mean loss, gradients of the mean loss) over the microbatches, by torch
    autograd in float64."""
    p = {k: torch.tensor(np.asarray(v, np.float64), requires_grad=True)
         for k, v in params.items()}
    losses = []
    for mb in microbatches(model, inputs):
        if model in ("mlp", "moe"):
            args = (torch.tensor(np.asarray(mb[0], np.float64)),
                    torch.tensor(mb[1].astype(np.int64)))
        else:
            args = tuple(torch.tensor(a.astype(np.int64)) for a in mb)
        losses.append(TORCH_LOSSES[model](torch, p, *args))
    loss = torch.stack(losses).mean()
    loss.backward()
    return float(loss.detach()), {k: v.grad.numpy() for k, v in p.items()}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_grads_match_torch_autograd(zb_run, examples_dir, tmp_path, model):
    torch = pytest.importorskip("torch")
    params, inputs = make_case(model, 2)
    grads, metrics, _ = run_grads(zb_run, examples_dir, tmp_path, model,
                                  params, inputs)
    t_loss, t_grads = torch_grads(torch, model, params, inputs)
    assert set(t_grads) == set(MODELS[model][0])
    assert_grads_close(grads, t_grads, GRAD_REL_TOL, f"{model} vs torch")
    assert metrics["loss"][0] == pytest.approx(t_loss, rel=LOSS_REL_TOL)

    # The hand-derived reference and torch agree to float64 rounding.
    _, _, loss_fn, grads_fn = MODELS[model]
    mbs = microbatches(model, inputs)
    assert_grads_close(ref.mean_grads(grads_fn, params, mbs), t_grads, 1e-10,
                       f"{model} reference vs torch")
    assert ref.mean_loss(loss_fn, params, mbs) == pytest.approx(t_loss,
                                                                rel=1e-12)


def exported_symbols(path):
    """The symbols a compiled object exports."""
    nm = shutil.which("nm")
    assert nm, "nm not on PATH (binutils, which links compiled models)"
    out = subprocess.run([nm, "-D", "--defined-only", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


@pytest.mark.parametrize("mode, entries", [
    ((), {"zb_entry_mlp_grad_acc"}),
    (("--grads",), {"zb_entry_mlp_grad_acc"}),
    (("--eval",), {"zb_entry_mlp"}),
    (("--grads", "--check-grad"), {"zb_entry_mlp", "zb_entry_mlp_grad_acc"}),
], ids=["train", "grads", "eval", "check-grad"])
def test_one_process_compiles_what_it_runs(zb_run, examples_dir, mode,
                                           entries):
    """One process compiles the forward on its own only where it runs it
    (--eval, --check-grad's finite differences); training and --grads run
    the forward inside the gradient entry point. The object exports the
    entry points alone (the functions behind them are internal)."""
    proc = zb_run(examples_dir / "mlp.mlir", "--compile-only", *mode)
    assert proc.returncode == 0, describe(proc)
    assert exported_symbols(proc.stdout.strip()) == entries


# --------------------------------------------------------------------------
# The hand-derived backward itself, against central finite differences of
# the float64 reference loss (no tool needed)
# --------------------------------------------------------------------------


def finite_difference_check(loss_fn, grads_fn, params, data, entries, rng):
    """Worst relative error over `entries` sampled entries per parameter of
    grads_fn against central differences of loss_fn, each error relative to
    max(|fd|, |analytic|, 1e-2 * max|grad of that parameter|)."""
    params = {k: np.array(v, dtype=np.float64) for k, v in params.items()}
    grads = grads_fn(params, *data)
    assert set(grads) == set(params)
    worst, where = 0.0, None
    for name, value in params.items():
        g = grads[name]
        assert g.shape == value.shape and g.dtype == np.float64, name
        assert np.all(np.isfinite(g)), name
        flat = value.reshape(-1)
        scale = float(np.abs(g).max())
        for i in rng.choice(flat.size, size=min(entries, flat.size),
                            replace=False):
            x = flat[i]
            eps = 1e-5 * max(1.0, abs(x))
            flat[i] = x + eps
            up = loss_fn(params, *data)
            flat[i] = x - eps
            down = loss_fn(params, *data)
            flat[i] = x
            fd = (up - down) / (2 * eps)
            an = float(g.reshape(-1)[i])
            err = abs(fd - an) / max(abs(fd), abs(an), 1e-2 * scale, 1e-12)
            if err >= worst:
                worst, where = err, f"{name}[{i}] analytic {an} fd {fd}"
    return worst, where


@pytest.mark.parametrize("model,entries", [("mlp", 4), ("gpt", 2),
                                           ("moe", 3)])
def test_reference_grads_match_finite_differences(model, entries):
    shapes, _, loss_fn, grads_fn = MODELS[model]
    rng = np.random.default_rng(11)
    params = random_params(shapes, rng)
    data = microbatches(model, ref.synthetic_inputs(model, rng,
                                                    MICROBATCHES))[0]
    worst, where = finite_difference_check(loss_fn, grads_fn, params, data,
                                           entries, rng)
    # Central differences with eps = 1e-5 on a loss of about 4 have a
    # rounding noise near 1e-10 absolute, up to a few 1e-6 relative to the
    # smallest gradients here (measured worst over 5 seeds: 5e-8 mlp, 8e-7
    # gpt); a wrong term in the backward shows up as 1e-4 or more.
    assert worst < 1e-5, where


def test_reference_grads_of_repeated_tokens_accumulate():
    # Every position reads the same embedding row: its gradient is the sum
    # of the positions' gradients, checked by finite differences over the
    # whole row.
    rng = np.random.default_rng(5)
    params = random_params(ref.GPT_PARAM_SHAPES, rng)
    tokens = np.full((ref.GPT_B, ref.GPT_T), 7, dtype=np.int64)
    targets = rng.integers(0, ref.GPT_V, size=(ref.GPT_B, ref.GPT_T))
    g = ref.gpt_grads(params, tokens, targets)
    assert np.all(np.delete(g["wte"], 7, axis=0) == 0)
    p = {k: np.array(v, np.float64) for k, v in params.items()}
    for c in (0, 13, 31):
        eps = 1e-5
        p["wte"][7, c] += eps
        up = ref.gpt_loss(p, tokens, targets)
        p["wte"][7, c] -= 2 * eps
        down = ref.gpt_loss(p, tokens, targets)
        p["wte"][7, c] += eps
        assert g["wte"][7, c] == pytest.approx((up - down) / (2 * eps),
                                               rel=1e-6, abs=1e-10)


def test_reference_mean_grads_is_the_mean():
    rng = np.random.default_rng(6)
    params = random_params(ref.MLP_PARAM_SHAPES, rng)
    inputs = ref.synthetic_inputs("mlp", rng, 3)
    mbs = [(inputs["arg0"][m], inputs["arg1"][m]) for m in range(3)]
    mean = ref.mean_grads(ref.mlp_grads, params, mbs)
    for name in params:
        each = [ref.mlp_grads(params, *mb)[name] for mb in mbs]
        np.testing.assert_allclose(mean[name], np.mean(each, axis=0),
                                   rtol=1e-13, atol=0)
