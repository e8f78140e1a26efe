"""Data parallel x pipeline parallel: `zb-run --np P --dp D` equals one
process over all D * M microbatches.

D replicas of a P-rank pipeline run side by side (P * D processes); replica
r runs microbatches r*M .. r*M+M-1 of each step's D * M, and each stage's
gradients are averaged over its replicas after its last W. The reference is
the unpartitioned model on one process with --microbatches D * M: per-step
losses, the parameters after 3 SGD and after 3 AdamW steps, and the last
step's gradients, to 1e-5 relative, and bitwise where the sums run in the
same order (one microbatch per replica, two replicas). zb-run writes the dumped parameters and
gradients only when every replica's copy is bitwise the same, so each run
also shows that the replicas stayed equal.
"""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from test_forward import describe

STEPS = 3
MICROBATCHES = 2
RTOL = 1e-5
# AdamW's update g / (|g| + eps) magnifies the last bits of a gradient entry
# that cancels to ~eps: in the GPT example, one bias entry's first gradient
# is 3.0195e-8 on one process and 3.0152e-8 as the mean of four replicas'
# (an absolute difference of 4e-11, the rounding of a different summation
# order), which moves that entry's update by 1e-3 of the learning rate.
# Such an entry's parameter moves apart by a share of the learning rate each
# step, whatever the tolerance: at 0.05, up to 1.1e-3 of the parameters'
# scale after three steps (h0.mlp.fc.weight). AdamW therefore trains at
# ADAMW_LR, where they stay within a few 1e-4 (3.5e-4, h2.mlp.fc.bias), and
# the last step's gradients, taken at those parameters, within a few 1e-5 of
# theirs (3.3e-5). Which entries sit at that edge changes with any change
# in rounding. AdamW's parameters are compared to 1e-3 of their scale and
# its last gradients to 1e-4; SGD's, and everything where the order is the
# same, to 1e-5 or bitwise (test_same_order_same_bits).
LR = 0.05
ADAMW_LR = 0.005
ADAMW_PARAM_RTOL = 1e-3
ADAMW_GRAD_RTOL = 1e-4

# (P, D, schedule, chunks)
LAYOUTS = [(2, 2, "zb-h1", None), (1, 2, "1f1b", None), (1, 4, "zb-h1", None),
           (2, 2, "zb-v", 2)]


def train(zb_run, model, out_dir, tag, microbatches, *extra, lr=LR):
    out_dir = Path(out_dir)
    metrics = out_dir / f"{tag}-metrics.json"
    params = out_dir / f"{tag}-params.npz"
    grads = out_dir / f"{tag}-grads.npz"
    proc = zb_run(model, "--steps", STEPS, "--microbatches", microbatches,
                  "--seed", 3, "--lr", lr, "--metrics", metrics,
                  "--dump-params", params, "--dump-grads", grads, *extra)
    assert proc.returncode == 0, describe(proc)
    with np.load(params) as p, np.load(grads) as g:
        return (json.loads(metrics.read_text()), {k: p[k] for k in p.files},
                {k: g[k] for k in g.files}, proc)


def assert_close(name, ours, ref, rtol=RTOL):
    scale = max(float(np.max(np.abs(ref))), 1e-12)
    err = float(np.max(np.abs(ours - ref))) / scale
    assert err <= rtol, f"{name}: relative error {err:.2e}"


def assert_same_run(ours, ref, param_rtol=RTOL, grad_rtol=RTOL):
    metrics, params, grads, _ = ours
    ref_metrics, ref_params, ref_grads, _ = ref
    np.testing.assert_allclose(metrics["loss"], ref_metrics["loss"],
                               rtol=RTOL)
    assert sorted(params) == sorted(ref_params)
    for name in ref_params:
        assert_close(f"param {name}", params[name], ref_params[name],
                     param_rtol)
    assert sorted(grads) == sorted(ref_grads)
    for name in ref_grads:
        assert_close(f"grad {name}", grads[name], ref_grads[name], grad_rtol)


@pytest.fixture(scope="module")
def references(zb_run, examples_dir, tmp_path_factory):
    """One process over D * M microbatches, per model, D and optimizer."""
    out = tmp_path_factory.mktemp("reference")
    cache = {}

    def get(model, replicas, optimizer):
        key = (model, replicas, optimizer)
        if key not in cache:
            cache[key] = train(zb_run, examples_dir / f"{model}.mlir", out,
                               f"{model}-{replicas}-{optimizer}",
                               MICROBATCHES * replicas,
                               "--optimizer", optimizer,
                               lr=ADAMW_LR if optimizer == "adamw" else LR)
        return cache[key]

    return get


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
@pytest.mark.parametrize("ranks,replicas,schedule,chunks", LAYOUTS)
@pytest.mark.parametrize("model", ["mlp", "gpt"])
def test_replicas_equal_one_process(zb_run, examples_dir, references,
                                    tmp_path, model, ranks, replicas,
                                    schedule, chunks, optimizer):
    extra = ["--np", ranks, "--dp", replicas, "--schedule", schedule,
             "--optimizer", optimizer]
    if chunks:
        extra += ["--chunks", chunks]
    adamw = optimizer == "adamw"
    ours = train(zb_run, examples_dir / f"{model}.mlir", tmp_path,
                 f"{model}-{ranks}x{replicas}", MICROBATCHES, *extra,
                 lr=ADAMW_LR if adamw else LR)
    assert_same_run(ours, references(model, replicas, optimizer),
                    ADAMW_PARAM_RTOL if adamw else RTOL,
                    ADAMW_GRAD_RTOL if adamw else RTOL)
    metrics = ours[0]
    assert metrics["ranks"] == ranks and metrics["replicas"] == replicas
    # The step's samples are every replica's: microbatches (counted over
    # every replica) times dim 0 of the model's data.
    assert len(metrics["microbatches_per_s"]) == STEPS
    samples = {"mlp": 8, "gpt": 2}[model]
    assert metrics["samples_per_s"] == pytest.approx(
        [r * samples for r in metrics["microbatches_per_s"]], rel=1e-6)


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
@pytest.mark.parametrize("ranks", [1, 2])
def test_same_order_same_bits(zb_run, examples_dir, tmp_path, ranks,
                              optimizer):
    """One microbatch on each of two replicas: the replicas' mean is
    (g0 + g1) / 2, the sum one process forms over two microbatches, so the
    gradients and the trained parameters are the same bits."""
    gpt = examples_dir / "gpt.mlir"
    _, ref_params, ref_grads, _ = train(zb_run, gpt, tmp_path, "ref", 2,
                                        "--optimizer", optimizer)
    _, params, grads, _ = train(zb_run, gpt, tmp_path, "dp", 1, "--np", ranks,
                                "--dp", 2, "--schedule", "zb-h1",
                                "--optimizer", optimizer)
    for name in ref_grads:
        if name != "loss":
            assert np.array_equal(grads[name], ref_grads[name]), name
    for name in ref_params:
        assert np.array_equal(params[name], ref_params[name]), name


def test_replicas_take_their_slices_of_the_inputs(zb_run, examples_dir,
                                                  tmp_path):
    """--inputs holds each step's D * M microbatches; replica r takes
    microbatches r*M .. r*M+M-1: the run equals one process over all of
    them (and differs from one that gives every replica the same ones)."""
    rng = np.random.default_rng(4)
    total = 2 * MICROBATCHES
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, arg0=rng.standard_normal((STEPS, total, 8, 16)),
             arg1=rng.integers(0, 10, (STEPS, total, 8)))
    mlp = examples_dir / "mlp.mlir"
    ref = train(zb_run, mlp, tmp_path, "ref", total, "--inputs", inputs)
    ours = train(zb_run, mlp, tmp_path, "dp", MICROBATCHES, "--np", 2, "--dp",
                 2, "--inputs", inputs)
    assert_same_run(ours, ref)
    first = tmp_path / "first.npz"
    np.savez(first, arg0=np.load(inputs)["arg0"][:, :MICROBATCHES],
             arg1=np.load(inputs)["arg1"][:, :MICROBATCHES])
    half = train(zb_run, mlp, tmp_path, "half", MICROBATCHES, "--inputs",
                 first)
    assert not np.allclose(half[0]["loss"], ref[0]["loss"], rtol=1e-3)

    # An inputs file sized for one replica is an error naming the count.
    proc = zb_run(mlp, "--np", 2, "--dp", 2, "--microbatches", MICROBATCHES,
                  "--inputs", first, "--steps", STEPS)
    assert proc.returncode != 0
    assert f"but {total} microbatches of the model's argument need" \
        in proc.stderr, describe(proc)


def test_one_checkpoint_and_resume(zb_run, examples_dir, tmp_path):
    """Replica 0 writes the one checkpoint; every replica resumes from it
    and the run continues the uninterrupted loss curve."""
    common = [examples_dir / "mlp.mlir", "--np", 2, "--dp", 2,
              "--microbatches", MICROBATCHES, "--optimizer", "adamw",
              "--lr", 0.01, "--seed", 3]

    def losses(*args):
        metrics = tmp_path / "metrics.json"
        proc = zb_run(*common, *args, "--metrics", metrics)
        assert proc.returncode == 0, describe(proc)
        return json.loads(metrics.read_text())["loss"]

    full = losses("--steps", 4)
    ckpt = tmp_path / "ckpt"
    first = losses("--steps", 2, "--checkpoint", ckpt)
    rest = losses("--steps", 4, "--resume", ckpt)
    assert first == full[:2]
    np.testing.assert_allclose(rest, full[2:], rtol=1e-6)
    # And one process resumes the same checkpoint (it holds every
    # parameter once).
    proc = zb_run(examples_dir / "mlp.mlir", "--microbatches",
                  2 * MICROBATCHES, "--optimizer", "adamw", "--lr", 0.01,
                  "--seed", 3, "--steps", 4, "--resume", ckpt)
    assert proc.returncode == 0, describe(proc)


def test_trace_and_metrics_cover_every_replica(zb_run, examples_dir,
                                               tmp_path):
    trace, metrics = tmp_path / "trace.json", tmp_path / "m.json"
    proc = zb_run(examples_dir / "mlp.mlir", "--np", 2, "--dp", 2,
                  "--microbatches", MICROBATCHES, "--steps", 2, "--trace",
                  trace, "--metrics", metrics)
    assert proc.returncode == 0, describe(proc)
    # What the reductions added to a step, measured and simulated.
    m = json.loads(metrics.read_text())
    assert m["reduction_wait_ms"] >= 0 and m["simulated_reduction_ms"] > 0, m
    assert "gradient reduction over 2 replicas" in proc.stdout
    events = json.loads(trace.read_text())["traceEvents"]
    lanes = {e["tid"] for e in events if e.get("ph") == "X"}
    assert lanes == {0, 1, 2, 3}
    per_lane = {t: sum(1 for e in events
                       if e.get("ph") == "X" and e["tid"] == t)
                for t in lanes}
    # Each process runs its rank's F, B and W of every microbatch, twice.
    assert set(per_lane.values()) == {2 * 3 * MICROBATCHES}, per_lane


def test_outside_launcher_and_bad_flags(zb_run, repo_root, examples_dir,
                                        tmp_path, outside_mpirun):
    """An outside `mpirun -np 4` with --np 2 --dp 2 runs as those ranks: the
    same run as zb-run's own launch. A product that does not match the
    world, and flags --dp does not take, are errors."""
    exe = Path(os.environ.get("ZB_BIN_DIR", repo_root / "build" / "bin"))
    args = [str(exe / "zb-run"), str(examples_dir / "mlp.mlir"),
            "--steps", str(STEPS), "--microbatches", str(MICROBATCHES),
            "--seed", "3", "--lr", "0.05", "--np", "2"]
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    own = train(zb_run, examples_dir / "mlp.mlir", tmp_path, "own",
                MICROBATCHES, "--np", 2, "--dp", 2)
    metrics, params = tmp_path / "m.json", tmp_path / "p.npz"
    proc = subprocess.run(
        outside_mpirun(4) + args + ["--dp", "2", "--metrics", str(metrics),
                                    "--dump-params", str(params)],
        capture_output=True, text=True, env=env, timeout=300,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(f"step {STEPS}/{STEPS}") == 1, proc.stdout
    assert json.loads(metrics.read_text())["loss"] == own[0]["loss"]
    with np.load(params) as got:
        for name, value in own[1].items():
            assert np.array_equal(got[name], value), name

    wrong = subprocess.run(outside_mpirun(4) + args + ["--dp", "3"],
                           capture_output=True, text=True, env=env,
                           timeout=300, stdin=subprocess.DEVNULL)
    assert wrong.returncode != 0
    assert ("started as one of 4 processes by an MPI launcher, but --np 2 "
            "--dp 3 needs 6") in wrong.stderr, wrong.stderr

    mlp = examples_dir / "mlp.mlir"
    for flags, message in [
            (["--dp", 0], "--dp must be at least 1, got 0"),
            (["--np", 65536, "--dp", 65536],
             "--np 65536 x --dp 65536 = 4294967296 processes, more than an "
             "MPI job holds"),
            (["--dp", 2, "--eval"], "--dp needs training or --grads"),
            (["--dp", 2, "--backend", "nccl"],
             "--dp with --backend nccl is not supported yet")]:
        proc = zb_run(mlp, *flags)
        assert proc.returncode != 0, flags
        assert message in proc.stderr, (flags, proc.stderr)


def test_grads_over_replicas(zb_run, examples_dir, tmp_path):
    """--grads --np 2 --dp 2: one pipelined step's gradients, the mean over
    all 2 * M microbatches."""
    gpt = examples_dir / "gpt.mlir"
    ref, ours = tmp_path / "ref.npz", tmp_path / "dp.npz"
    for path, flags in [(ref, ["--microbatches", 2 * MICROBATCHES]),
                        (ours, ["--microbatches", MICROBATCHES, "--np", 2,
                                "--dp", 2])]:
        proc = zb_run(gpt, "--grads", "--seed", 1, "--dump-grads", path,
                      *flags)
        assert proc.returncode == 0, describe(proc)
    with np.load(ref) as r, np.load(ours) as o:
        assert sorted(r.files) == sorted(o.files)
        for name in r.files:
            assert_close(name, o[name], r[name])


def test_clipping_over_replicas(zb_run, examples_dir, tmp_path):
    """--clip-grad-norm with replicas: the global norm of the replicas'
    mean gradient (every replica decides alike) clips as one process over
    all D * M microbatches does."""
    gpt = examples_dir / "gpt.mlir"
    ref = train(zb_run, gpt, tmp_path, "ref", 2 * MICROBATCHES,
                "--clip-grad-norm", 0.05)
    ours = train(zb_run, gpt, tmp_path, "dp", MICROBATCHES, "--np", 2,
                 "--dp", 2, "--clip-grad-norm", 0.05)
    assert ref[0]["clipped_steps"] == [1, 2, 3]
    assert ours[0]["clipped_steps"] == ref[0]["clipped_steps"]
    np.testing.assert_allclose(ours[0]["grad_norm"], ref[0]["grad_norm"],
                               rtol=RTOL)
    assert_same_run(ours, ref)
