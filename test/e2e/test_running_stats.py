"""Running statistics (`pipe.running_stat`): zb-run folds each training
forward's value into its buffer after the step, microbatch by microbatch,
and saves the buffers with the parameters.

The model (running_stats.mlir) keeps the batch mean of its data on stage 0
and the batch mean of its squared hidden activation on stage 1. The
reference is NumPy: the same model trained with SGD in float64, the buffers
updated as PyTorch updates a batch norm's, once per microbatch in order.
Pipelined, each buffer lives on the rank of its stage; with replicas, the
saved buffers are replica 0's (its microbatches alone, as DDP keeps rank
0's). A checkpoint carries them: a resumed run continues bitwise.
"""

from pathlib import Path

import numpy as np
import pytest

from test_forward import describe

MODEL = Path(__file__).with_name("running_stats.mlir")
LR = 0.5
RTOL = 1e-5


def initial_params():
    rng = np.random.default_rng(5)
    return {"w1": rng.normal(0, 0.6, (8, 8)).astype(np.float32),
            "w2": rng.normal(0, 0.6, (8, 8)).astype(np.float32)}


def step_inputs(steps, count):
    """[steps][count][4, 8] data, one array per step."""
    rng = np.random.default_rng(9)
    return rng.normal(0.5, 1.0, (steps, count, 4, 8)).astype(np.float32)


def reference(steps, microbatches, replicas=1):
    """SGD in float64 over every replica's microbatches; the buffers
    updated from replica 0's microbatches."""
    w1, w2 = (v.astype(np.float64) for v in initial_params().values())
    xs = step_inputs(steps, microbatches * replicas).astype(np.float64)
    x_mean, h_sq = np.zeros(8), np.ones(8)
    for step in range(steps):
        g1, g2 = np.zeros_like(w1), np.zeros_like(w2)
        for mb, x in enumerate(xs[step]):
            t = np.tanh(x @ w1)
            y = t @ w2
            if mb < microbatches:
                x_mean = 0.9 * x_mean + 0.1 * x.mean(axis=0)
                h_sq = 0.8 * h_sq + 0.2 * (t * t).mean(axis=0)
            dy = 2 * y / y.size
            g2 += t.T @ dy
            g1 += x.T @ ((dy @ w2.T) * (1 - t * t))
        n = len(xs[step])
        w1, w2 = w1 - LR * g1 / n, w2 - LR * g2 / n
    return {"w1": w1, "w2": w2, "x.running_mean": x_mean,
            "h.running_sq": h_sq}


def write_inputs(tmp_path, steps, count):
    params, inputs = tmp_path / "params.npz", tmp_path / "inputs.npz"
    np.savez(params, **initial_params())
    np.savez(inputs, arg0=step_inputs(steps, count))
    return params, inputs


def train(zb_run, tmp_path, tag, steps, microbatches, *extra, replicas=1):
    params, inputs = write_inputs(tmp_path, steps, microbatches * replicas)
    out = tmp_path / f"{tag}.npz"
    proc = zb_run(MODEL, "--steps", steps, "--microbatches", microbatches,
                  "--lr", LR, "--params", params, "--inputs", inputs,
                  "--dump-params", out, *extra)
    assert proc.returncode == 0, describe(proc)
    with np.load(out) as dumped:
        return {k: dumped[k] for k in dumped.files}


def assert_close(name, ours, ref):
    scale = max(float(np.max(np.abs(ref))), 1e-12)
    err = float(np.max(np.abs(ours - ref))) / scale
    assert err <= RTOL, f"{name}: relative error {err:.2e}"


@pytest.mark.parametrize("layout", [
    (), ("--np", "2", "--schedule", "1f1b"), ("--np", "2", "--schedule",
                                              "zb-h1"),
    ("--np", "2", "--dp", "2", "--schedule", "zb-h1"),
    ("--np", "1", "--dp", "2")], ids=["P1", "P2-1f1b", "P2-zb-h1",
                                      "P2xD2", "P1xD2"])
def test_buffers_follow_pytorch_rule(zb_run, tmp_path, layout):
    replicas = int(layout[layout.index("--dp") + 1]) if "--dp" in layout \
        else 1
    ours = train(zb_run, tmp_path, "run", 3, 2, *layout, replicas=replicas)
    ref = reference(3, 2, replicas)
    assert sorted(ours) == sorted(ref)
    for name, value in ref.items():
        assert_close(name, ours[name], value)


def test_data_for_more_steps_than_run(zb_run, tmp_path):
    """An --inputs array of more steps than --steps: step s reads the s-th,
    the later ones are left unread. Fewer steps than run is an error."""
    params, inputs = write_inputs(tmp_path, 3, 2)
    out = tmp_path / "out.npz"
    proc = zb_run(MODEL, "--steps", 2, "--microbatches", 2, "--lr", LR,
                  "--params", params, "--inputs", inputs, "--dump-params",
                  out)
    assert proc.returncode == 0, describe(proc)
    with np.load(out) as dumped:
        for name, value in reference(2, 2).items():
            assert_close(name, dumped[name], value)
    proc = zb_run(MODEL, "--steps", 4, "--microbatches", 2, "--params",
                  params, "--inputs", inputs)
    assert proc.returncode != 0
    assert ("has shape [3, 2, 4, 8], but 2 microbatches of the model's "
            "argument need [2, 4, 8] (or [4, 2, 4, 8], one per step, for 4 "
            "steps; more steps are allowed)") in proc.stderr, describe(proc)


def test_buffers_from_the_params_file(zb_run, tmp_path):
    """A buffer in --params is where the running average starts."""
    params, inputs = write_inputs(tmp_path, 1, 1)
    start = np.full(8, 3.0, np.float32)
    np.savez(params, **initial_params(), **{"x.running_mean": start})
    out = tmp_path / "out.npz"
    proc = zb_run(MODEL, "--steps", 1, "--params", params, "--inputs",
                  inputs, "--dump-params", out)
    assert proc.returncode == 0, describe(proc)
    x = step_inputs(1, 1)[0, 0].astype(np.float64)
    with np.load(out) as dumped:
        assert_close("x.running_mean", dumped["x.running_mean"],
                     0.9 * 3.0 + 0.1 * x.mean(axis=0))
        # Not in the file: the op's init (1.0), then one update.
        assert dumped["h.running_sq"].shape == (8,)

    np.savez(params, **initial_params(),
             **{"x.running_mean": np.zeros(3, np.float32)})
    proc = zb_run(MODEL, "--steps", 1, "--params", params, "--inputs",
                  inputs)
    assert proc.returncode != 0
    assert ("running statistic 'x.running_mean' in '" in proc.stderr and
            "has shape [3], but the model expects [8]" in proc.stderr), \
        describe(proc)


def test_arrays_the_model_does_not_have(zb_run, tmp_path):
    """A misspelt buffer in --params would leave the statistic at its
    initial value without a word: the arrays that name nothing of the
    model are a warning, each named, in --params and --inputs alike."""
    params, inputs = write_inputs(tmp_path, 1, 1)
    np.savez(params, **initial_params(),
             **{"x.running_maen": np.full(8, 3.0, np.float32)})
    with np.load(inputs) as data:
        arrays = dict(data)
    np.savez(inputs, **arrays, extra=np.zeros(2, np.float32))
    proc = zb_run(MODEL, "--steps", 1, "--params", params, "--inputs",
                  inputs)
    assert proc.returncode == 0, describe(proc)
    assert (f"warning: '{params}' holds 1 array the model does not have, "
            f"left unread: 'x.running_maen'; '{inputs}' holds 1 array the "
            "model does not have, left unread: 'extra'") in proc.stderr, \
        describe(proc)
    # Files holding only the model's arrays: no warning.
    params, inputs = write_inputs(tmp_path, 1, 1)
    proc = zb_run(MODEL, "--steps", 1, "--params", params, "--inputs",
                  inputs)
    assert proc.returncode == 0 and "warning" not in proc.stderr, \
        describe(proc)


def test_no_update_without_training(zb_run, tmp_path):
    """--eval and --grads run forwards that PyTorch would run in eval mode
    or without a step: the buffers keep their values."""
    params, inputs = write_inputs(tmp_path, 1, 2)
    out = tmp_path / "grads.npz"
    for mode in (["--eval"], ["--grads", "--dump-grads", out]):
        proc = zb_run(MODEL, "--microbatches", 2, "--params", params,
                      "--inputs", inputs, *mode)
        assert proc.returncode == 0, describe(proc)
    with np.load(out) as grads:
        assert "x.running_mean" not in grads.files


@pytest.mark.parametrize("ranks", [1, 2])
def test_checkpoint_carries_buffers(zb_run, tmp_path, ranks):
    """Two steps, a checkpoint, two more from it: bitwise the four-step
    run."""
    layout = ["--np", ranks, "--schedule", "1f1b"] if ranks > 1 else []
    whole = train(zb_run, tmp_path, "whole", 4, 2, *layout)
    ckpt = tmp_path / "ckpt"
    params, inputs = write_inputs(tmp_path, 4, 2)
    first_inputs = tmp_path / "first.npz"
    np.savez(first_inputs, arg0=step_inputs(4, 2)[:2])
    first = zb_run(MODEL, "--steps", 2, "--microbatches", 2, "--lr", LR,
                   "--params", params, "--inputs", first_inputs,
                   "--checkpoint", ckpt, *layout)
    assert first.returncode == 0, describe(first)
    out = tmp_path / "resumed.npz"
    second = zb_run(MODEL, "--steps", 4, "--microbatches", 2, "--lr", LR,
                    "--params", params, "--inputs", inputs, "--resume", ckpt,
                    "--dump-params", out, *layout)
    assert second.returncode == 0, describe(second)
    with np.load(out) as resumed:
        for name, value in whole.items():
            assert np.array_equal(resumed[name], value), name
