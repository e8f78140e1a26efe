"""zerobubble.compile / run / gradients / evaluate on the examples."""

import numpy as np
import pytest

import zerobubble as zb
from zb_testing import assert_close


@pytest.fixture(scope="module")
def mlp(repo_root):
    return repo_root / "examples" / "mlp.mlir"


def test_compile_runs_the_pipeline(mlp, tmp_path):
    out = tmp_path / "mlp-3.mlir"
    text = zb.compile(mlp, stages=3, microbatches=4, schedule="zb-h1",
                      output=out)
    assert "llvm.func" in text
    assert out.read_text() == text


def test_compile_with_explicit_passes(mlp):
    text = zb.compile(mlp.read_text(),
                      passes=["--zb-partition-stages=stages=3"])
    assert text.count("pipe.stage") >= 3


def test_compiler_diagnostics_become_exceptions():
    bad = "func.func @f(%a: tensor<2xf32>) -> tensor<f32> {\n  return %a : tensor<2xf32>\n}\n"
    with pytest.raises(zb.CompilerError) as info:
        zb.compile(bad, passes=["--zb-autodiff"])
    assert "error:" in str(info.value)
    assert info.value.returncode != 0
    assert "error:" in info.value.diagnostics


def test_run_reports_metrics_and_matches_gradients(mlp):
    """One SGD step on 2 ranks: the loss and the gradients equal the
    one-process gradients, and the parameters moved by -lr * grad."""
    rng = np.random.default_rng(1)
    inputs = {"arg0": rng.standard_normal((2, 8, 16)).astype(np.float32),
              "arg1": rng.integers(0, 10, (2, 8))}
    ref = zb.gradients(mlp, microbatches=2, inputs=inputs, seed=5)
    result = zb.run(mlp, ranks=2, schedule="1f1b", microbatches=2, steps=1,
                    lr=0.5, inputs=inputs, seed=5)
    assert len(result.losses) == 1 and len(result.microbatches_per_s) == 1
    assert result.losses[0] == pytest.approx(ref.loss, rel=1e-5)
    assert sorted(result.grads) == sorted(ref.grads)
    for name, grad in ref.grads.items():
        assert_close(name, result.grads[name], grad, 1e-5)
    # Starting from the same parameters, a second call with lr 0 keeps them.
    start = zb.run(mlp, steps=1, lr=0.0, inputs=inputs, seed=5,
                   microbatches=2).params
    for name, grad in ref.grads.items():
        assert_close(name, result.params[name], start[name] - 0.5 * grad,
                     1e-5)
    loss = zb.evaluate(mlp, microbatches=2, inputs=inputs, params=start)
    assert loss == pytest.approx(ref.loss, rel=1e-5)


@pytest.mark.parametrize("schedule", ["1f1b", "zb-v"])
def test_pipelined_gradients_and_evaluation_equal_one_process(mlp, schedule):
    """gradients() and evaluate() with ranks=2 run the per-rank programs
    (evaluation: the forwards alone) and equal the one-process results."""
    ref = zb.gradients(mlp, microbatches=4, seed=3)
    got = zb.gradients(mlp, microbatches=4, seed=3, ranks=2,
                       schedule=schedule)
    assert got.loss == pytest.approx(ref.loss, rel=1e-6)
    assert sorted(got.grads) == sorted(ref.grads)
    for name, grad in ref.grads.items():
        assert_close(name, got.grads[name], grad, 1e-5)
    one = zb.evaluate(mlp, microbatches=4, seed=3)
    assert one == pytest.approx(ref.loss, rel=1e-6)
    assert zb.evaluate(mlp, microbatches=4, seed=3, ranks=2,
                       schedule=schedule) == pytest.approx(one, rel=1e-6)


def test_run_with_bf16_stashes(mlp):
    """dtype="bf16" reaches zb-run: the stash halves and the loss stays
    within 1e-2 of the f32 run's (the model's input data is not
    narrowed, so rank 0's stash shrinks by less than half)."""
    common = dict(ranks=2, schedule="zb-h1", microbatches=4, steps=3,
                  lr=0.1, seed=2)
    f32 = zb.run(mlp, **common)
    bf16 = zb.run(mlp, dtype="bf16", **common)
    np.testing.assert_allclose(bf16.losses, f32.losses, rtol=1e-2)
    for narrow, wide in zip(bf16.metrics["predicted_stash_bytes"],
                            f32.metrics["predicted_stash_bytes"]):
        assert narrow <= 0.7 * wide, (narrow, wide)
    with pytest.raises(zb.CompilerError, match="unknown --dtype 'f8'"):
        zb.run(mlp, dtype="f8", **common)


def test_run_reports_a_skipped_step(mlp):
    """A step whose gradient is not finite is skipped (the parameters keep
    their values); its loss is NaN in ``losses``, the next one trains."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 2, 8, 16)).astype(np.float32)
    x[0, 1, 3, 5] = np.nan
    inputs = {"arg0": x, "arg1": rng.integers(0, 10, (2, 2, 8))}
    result = zb.run(mlp, microbatches=2, steps=2, lr=0.1, inputs=inputs,
                    seed=5)
    assert np.isnan(result.losses[0]) and np.isfinite(result.losses[1])
    assert result.metrics["skipped_steps"] == [1]
    second = {"arg0": x[1:], "arg1": inputs["arg1"][1:]}
    alone = zb.run(mlp, microbatches=2, steps=1, lr=0.1, inputs=second,
                   seed=5)
    assert result.losses[1] == pytest.approx(alone.losses[0], rel=1e-6)
    for name, value in alone.params.items():
        assert_close(name, result.params[name], value, 1e-6)


def test_run_errors_carry_the_diagnostics(mlp):
    with pytest.raises(zb.CompilerError, match="zb-run"):
        zb.run(mlp, params={"nope": np.zeros(3, np.float32)})


def test_a_path_naming_func_func_is_a_path(mlp, tmp_path):
    path = tmp_path / "func.func.mlir"
    path.write_text(mlp.read_text())
    assert zb.evaluate(str(path), microbatches=2, seed=3) == pytest.approx(
        zb.evaluate(mlp, microbatches=2, seed=3))


def test_options_are_checked_before_anything_runs(mlp):
    with pytest.raises(TypeError, match="ranks must be an integer, not str"):
        zb.gradients(mlp, ranks="2")
    with pytest.raises(ValueError, match="threads must be at least 1, got -4"):
        zb.run(mlp, threads=-4)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        zb.evaluate(mlp, timeout=0)
    with pytest.raises(ValueError, match="momentum sets the momentum of "
                       "optimizer=\"sgd-momentum\", not of 'adamw'"):
        zb.run(mlp, optimizer="adamw", momentum=0.5)
    # compile()'s values each make one option of the pipeline's text: one
    # holding a space would set another option.
    with pytest.raises(ValueError, match="schedule must be a schedule's name"):
        zb.compile(mlp, stages=2, microbatches=4,
                   schedule="zb-h1 stages=1")
    with pytest.raises(TypeError, match="mem_limit must be a number"):
        zb.compile(mlp, stages=2, microbatches=4, mem_limit="1 stages=1")
    with pytest.raises(zb.CompilerError, match="mem-limit must be a finite "
                       "number, 0 .no limit. or more, got nan"):
        zb.compile(mlp, stages=2, microbatches=4, mem_limit=float("nan"))
    with pytest.raises(TypeError, match="chunks must be an integer"):
        zb.compile(mlp, stages=2, microbatches=4, chunks="2 stages=1")


def test_missing_model_file(tmp_path):
    with pytest.raises(zb.ZeroBubbleError, match="no such model file"):
        zb.gradients(tmp_path / "missing.mlir")
