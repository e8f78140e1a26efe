"""Gradient clipping (--clip-grad-norm) and the overflow skip, checked the
zero-bubble way: each rank updates optimistically while the global norm and
finite check are gathered, and rolls back and redoes (or skips) the step when
they say so (post-validation).

- One SGD step equals PyTorch's rule, p - lr * g * min(1, X / (|g| + 1e-6)),
  computed here in NumPy from the step's unclipped gradients.
- The post-validated run is bitwise the run that gathers the check before
  the update (--sync-grad-check), with AdamW (whose state rolls back too),
  pipelined; and equal to one process.
- A shared (tied) parameter counts once in the norm: the norm on three ranks,
  two of which hold the parameter, is the norm on one process.
- A step whose gradients are not finite anywhere is skipped on every rank and
  reported; with AdamW the run then equals the run without that step.
"""

import json

import numpy as np
import pytest

from test_forward import describe

MICROBATCHES = 4


def run(zb_run, tmp_path, tag, model, *flags):
    metrics = tmp_path / f"{tag}.json"
    params = tmp_path / f"{tag}-params.npz"
    grads = tmp_path / f"{tag}-grads.npz"
    proc = zb_run(model, "--microbatches", MICROBATCHES, "--seed", 5,
                  "--metrics", metrics, "--dump-params", params,
                  "--dump-grads", grads, *flags)
    assert proc.returncode == 0, describe(proc)
    with np.load(params) as p, np.load(grads) as g:
        return (json.loads(metrics.read_text()), {k: p[k] for k in p.files},
                {k: g[k] for k in g.files if k != "loss"}, proc)


def test_one_step_is_torchs_rule(zb_run, examples_dir, tmp_path):
    model = examples_dir / "mlp.mlir"
    _, before, _, _ = run(zb_run, tmp_path, "init", model, "--steps", 1,
                          "--lr", 0)
    lr, limit = 0.5, 0.25
    metrics, after, grads, _ = run(zb_run, tmp_path, "clip", model,
                                   "--steps", 1, "--lr", lr,
                                   "--clip-grad-norm", limit)
    norm = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2))
                       for g in grads.values()))
    assert metrics["grad_norm"] == pytest.approx([norm], rel=1e-6)
    assert norm > limit and metrics["clipped_steps"] == [1]
    coef = limit / (norm + 1e-6)
    for name, g in grads.items():
        want = before[name].astype(np.float64) - lr * coef * g
        np.testing.assert_allclose(after[name], want, rtol=1e-6, atol=1e-7,
                                   err_msg=name)
    # A limit above the norm changes nothing: the plain SGD step.
    metrics, after, grads, _ = run(zb_run, tmp_path, "loose", model,
                                   "--steps", 1, "--lr", lr,
                                   "--clip-grad-norm", 10 * norm)
    assert metrics["clipped_steps"] == []
    for name, g in grads.items():
        np.testing.assert_allclose(
            after[name], before[name].astype(np.float64) - lr * g,
            rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("schedule", ["zb-h1", "zb-v"])
def test_post_validation_equals_a_synchronised_check(zb_run, examples_dir,
                                                     tmp_path, schedule):
    model = examples_dir / "gpt.mlir"
    common = ("--steps", 3, "--optimizer", "adamw", "--lr", 0.01,
              "--clip-grad-norm", 0.5)
    pipelined = ("--np", 2, "--schedule", schedule)
    opt_m, opt_p, _, _ = run(zb_run, tmp_path, "optimistic", model,
                             *common, *pipelined)
    sync_m, sync_p, _, _ = run(zb_run, tmp_path, "sync", model, *common,
                               *pipelined, "--sync-grad-check")
    one_m, one_p, _, _ = run(zb_run, tmp_path, "one", model, *common)
    assert opt_m["clipped_steps"] == [1, 2, 3], opt_m["grad_norm"]
    assert opt_m["loss"] == sync_m["loss"]
    assert opt_m["grad_norm"] == sync_m["grad_norm"]
    for name in opt_p:
        assert np.array_equal(opt_p[name], sync_p[name]), name
        np.testing.assert_allclose(opt_p[name], one_p[name], rtol=1e-5,
                                   atol=1e-6, err_msg=name)
    assert opt_m["grad_norm"] == pytest.approx(one_m["grad_norm"], rel=1e-5)


def test_shared_parameter_counts_once(zb_run, repo_root, tmp_path):
    model = repo_root / "test" / "Transforms" / "shared-params.mlir"
    flags = ("--steps", 2, "--lr", 0.1, "--clip-grad-norm", 1e-3)
    three, three_p, _, _ = run(zb_run, tmp_path, "three", model, *flags,
                               "--np", 3, "--schedule", "zb-h1")
    one, one_p, _, _ = run(zb_run, tmp_path, "one", model, *flags)
    assert three["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-5)
    for name in one_p:
        np.testing.assert_allclose(three_p[name], one_p[name], rtol=1e-5,
                                   atol=1e-7, err_msg=name)


def write_skip_inputs(tmp_path, bad):
    """The MLP example's data for three steps with `bad` in step 2's
    input (three.npz), and for steps 1 and 3 alone (two.npz)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, MICROBATCHES, 8, 16)).astype(np.float32)
    labels = rng.integers(0, 10, (3, MICROBATCHES, 8)).astype(np.int64)
    x[1, 2, 3, 4] = bad
    np.savez(tmp_path / "three.npz", arg0=x, arg1=labels)
    np.savez(tmp_path / "two.npz", arg0=x[[0, 2]], arg1=labels[[0, 2]])


@pytest.mark.parametrize("ranks", [1, 2])
def test_non_finite_step_is_skipped(zb_run, examples_dir, tmp_path, ranks):
    """Step 2 of 3 sees a NaN input: skipped everywhere, reported, and the
    run equals the two-step run on steps 1 and 3's data (AdamW's step count
    and moments rolled back)."""
    write_skip_inputs(tmp_path, np.nan)
    model = examples_dir / "mlp.mlir"
    pipelined = ("--np", ranks, "--schedule", "zb-h1") if ranks > 1 else ()
    common = ("--optimizer", "adamw", "--lr", 0.01, *pipelined)
    skip_m, skip_p, _, proc = run(zb_run, tmp_path, "skip", model, *common,
                                  "--steps", 3, "--inputs",
                                  tmp_path / "three.npz")
    ref_m, ref_p, _, _ = run(zb_run, tmp_path, "ref", model, *common,
                             "--steps", 2, "--inputs", tmp_path / "two.npz")
    assert proc.stdout.count("step 2: a gradient is not finite; the step is "
                             "skipped on every rank") == 1, proc.stdout
    assert skip_m["skipped_steps"] == [2]
    assert skip_m["grad_norm"][1] is None and skip_m["loss"][1] is None
    assert skip_m["loss"][0] == ref_m["loss"][0]
    for name in ref_p:
        assert np.array_equal(skip_p[name], ref_p[name]), name
