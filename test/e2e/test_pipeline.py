"""Multi-process pipeline training equals training on one process.

For the MLP and GPT examples, `zb-run --np P --schedule S` (P processes under
mpirun, each running its rank's compiled step function) must give the same
per-step losses, final parameters and last-step gradients as `zb-run` on one
process (the unpartitioned model), after 3 SGD steps, to 1e-5 relative.
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

STEPS = 3
MICROBATCHES = 4
SCHEDULES = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-auto",
             "zb-v"]
RTOL = 1e-5


def train(zb_run, model, out_dir, tag, *extra, microbatches=MICROBATCHES):
    out_dir = Path(out_dir)
    metrics = out_dir / f"{tag}-metrics.json"
    params = out_dir / f"{tag}-params.npz"
    grads = out_dir / f"{tag}-grads.npz"
    proc = zb_run(model, "--steps", STEPS, "--microbatches", microbatches,
                  "--seed", 3, "--lr", 0.05, "--metrics", metrics,
                  "--dump-params", params, "--dump-grads", grads, *extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return (json.loads(metrics.read_text())["loss"], np.load(params),
            np.load(grads))


def assert_close(name, ours, ref):
    scale = max(float(np.max(np.abs(ref))), 1e-12)
    err = float(np.max(np.abs(ours - ref))) / scale
    assert err <= RTOL, f"{name}: relative error {err:.2e}"


@pytest.fixture(scope="module")
def references(zb_run, examples_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    return {m: train(zb_run, examples_dir / f"{m}.mlir", out, m)
            for m in ("mlp", "gpt")}


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("model", ["mlp", "gpt"])
def test_pipeline_equals_one_process(zb_run, examples_dir, references,
                                     tmp_path, model, schedule, ranks):
    ref_losses, ref_params, ref_grads = references[model]
    losses, params, grads = train(zb_run, examples_dir / f"{model}.mlir",
                                  tmp_path, f"{model}-{schedule}-{ranks}",
                                  "--np", ranks, "--schedule", schedule)
    assert len(losses) == STEPS
    np.testing.assert_allclose(losses, ref_losses, rtol=RTOL)
    assert sorted(params.files) == sorted(ref_params.files)
    for name in ref_params.files:
        assert_close(f"param {name}", params[name], ref_params[name])
    assert sorted(grads.files) == sorted(ref_grads.files)
    for name in ref_grads.files:
        assert_close(f"grad {name}", grads[name], ref_grads[name])


def test_training_lowers_the_loss(zb_run, examples_dir, tmp_path):
    """Same data every step: the loss must fall (AdamW, 2 ranks, zb-h1)."""
    rng = np.random.default_rng(0)
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, arg0=rng.standard_normal((MICROBATCHES, 8, 16)),
             arg1=rng.integers(0, 10, (MICROBATCHES, 8)))
    metrics = tmp_path / "m.json"
    proc = zb_run(examples_dir / "mlp.mlir", "--np", 2, "--steps", 20,
                  "--microbatches", MICROBATCHES, "--inputs", inputs,
                  "--optimizer", "adamw", "--lr", 0.01, "--metrics", metrics)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    losses = json.loads(metrics.read_text())["loss"]
    assert losses[-1] < 0.5 * losses[0], losses


def _worker_pids(marker):
    """(pid, rank) of the MPI workers whose command line holds `marker`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() not in cmdline or b"zb-run" not in cmdline:
            continue
        for entry in environ:
            if entry.startswith(b"OMPI_COMM_WORLD_RANK="):
                found.append((int(proc.name), int(entry.split(b"=")[1])))
    return found


def test_an_unnamed_parameter_pipelines(zb_run, examples_dir, tmp_path):
    """A parameter marked {zb.param} without a name is known as arg<N> by
    the pipelined ranks as by one process: the same losses."""
    text = (examples_dir / "mlp.mlir").read_text()
    assert '{zb.param = "l1.bias"}' in text
    model = tmp_path / "unnamed.mlir"
    model.write_text(text.replace('{zb.param = "l1.bias"}', "{zb.param}"))
    losses = []
    for ranks in (1, 2):
        metrics = tmp_path / f"m{ranks}.json"
        proc = zb_run(model, "--np", ranks, "--steps", 2, "--microbatches", 2,
                      "--metrics", metrics)
        assert proc.returncode == 0, proc.stderr
        losses.append(json.loads(metrics.read_text())["loss"])
    assert losses[0] == pytest.approx(losses[1], rel=1e-6), losses


@pytest.mark.parametrize("seconds", ["1e10", "1e300"])
def test_a_timeout_of_centuries_never_fires(zb_run, examples_dir, monkeypatch,
                                            seconds):
    """A timeout past the clock's range (its nanoseconds overflow 64 bits)
    means no deadline, not one already past."""
    monkeypatch.setenv("ZB_TIMEOUT_S", seconds)
    proc = zb_run(examples_dir / "mlp.mlir", "--np", 2, "--steps", 1,
                  "--microbatches", 2)
    assert proc.returncode == 0, proc.stderr


def test_killed_rank_stops_every_rank(repo_root, examples_dir, tmp_path):
    """Killing one rank mid-run: the run exits non-zero with a message."""
    exe = Path(os.environ.get("ZB_BIN_DIR", repo_root / "build" / "bin"))
    marker = str(tmp_path / "kill-metrics.json")
    env = dict(os.environ, ZB_TIMEOUT_S="30")
    proc = subprocess.Popen(
        [str(exe / "zb-run"), str(examples_dir / "mlp.mlir"), "--np", "2",
         "--steps", "100000", "--microbatches", "2", "--metrics", marker],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        stdin=subprocess.DEVNULL)
    try:
        # Wait until both ranks are training, then kill rank 1.
        deadline = time.time() + 120
        victim = None
        while time.time() < deadline and victim is None:
            time.sleep(0.5)
            pids = dict((r, p) for p, r in _worker_pids(marker))
            if len(pids) == 2:
                time.sleep(2)
                victim = pids[1]
        assert victim is not None, "the ranks did not start"
        os.kill(victim, signal.SIGKILL)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0
    assert "rank" in out and ("signal" in out or "error" in out), out


@pytest.mark.parametrize("model", ["mlp", "gpt"])
def test_split_backward_has_the_same_bits(zb_run, examples_dir, references,
                                          tmp_path, model):
    """B followed by W (the split stages of a 2-rank zb-h1 run) computes
    exactly what the unsplit backward of the one-process model computes:
    the same bits on the CPU, gradients and updated parameters alike."""
    ref_losses, ref_params, ref_grads = references[model]
    losses, params, grads = train(zb_run, examples_dir / f"{model}.mlir",
                                  tmp_path, f"{model}-bits", "--np", 2,
                                  "--schedule", "zb-h1")
    # The step's loss beside the gradients is averaged differently (on one
    # process in double precision); the gradients must match exactly.
    for name in ref_grads.files:
        if name != "loss":
            assert np.array_equal(grads[name], ref_grads[name]), name
    for name in ref_params.files:
        assert np.array_equal(params[name], ref_params[name]), name


def test_same_bits_at_a_deep_sum(zb_run, examples_dir, tmp_path):
    """The MLP with 1024 samples a microbatch: each weight gradient is a sum
    over 1024 products, deeper than a BLAS adds into its result at once
    (OpenBLAS sgemm splits k into blocks of a few hundred). Pipelined and
    one-process steps both add each microbatch's weight gradients into the
    step's sums through the gemm itself, so the blocks land on the same
    running sums: the gradients stay the same bits."""
    text = (examples_dir / "mlp.mlir").read_text()
    deep = text.replace("tensor<8x", "tensor<1024x").replace(
        "0.125 : f32", "0.0009765625 : f32")
    assert deep.count("tensor<1024x") > 20 and "0.125" not in deep
    model = tmp_path / "deep-mlp.mlir"
    model.write_text(deep)
    _, ref_params, ref_grads = train(zb_run, model, tmp_path, "one")
    _, params, grads = train(zb_run, model, tmp_path, "zb-h1", "--np", 2,
                             "--schedule", "zb-h1")
    for name in ref_grads.files:
        if name != "loss":
            assert grads[name].shape == ref_grads[name].shape
            assert np.array_equal(grads[name], ref_grads[name]), name
    for name in ref_params.files:
        assert np.array_equal(params[name], ref_params[name]), name


@pytest.mark.parametrize("schedule", ["1f1b", "zb-h1"])
def test_borrowed_cores_keep_the_bits(zb_run, examples_dir, references,
                                      tmp_path, monkeypatch, schedule):
    """A rank waiting for a message lends its core to the other rank's
    products (zbrt/Lending.h), which share their row blocks or batch items
    with it. With every product allowed to borrow (ZB_LEND_MIN_MACS=0), the
    two ranks share their cores and the gradients and parameters keep the
    bits of the one-process run.

    Whether the helper thread takes any block before the borrowing thread
    has taken them all depends on a free core when it is woken (the
    example's products are tiny; under a loaded host, as in CI beside
    another suite, it may take none): this run checks that products borrow
    and that the bits stay; unittests/Runtime/LendingTest.cpp checks, until
    the helper has run some, that its blocks keep the bits of one call."""
    monkeypatch.setenv("ZB_LEND_MIN_MACS", "0")
    _, ref_params, ref_grads = references["gpt"]
    tag = f"lend-{schedule}"
    _, params, grads = train(zb_run, examples_dir / "gpt.mlir", tmp_path, tag,
                             "--np", 2, "--schedule", schedule)
    for name in ref_grads.files:
        if name != "loss":
            assert np.array_equal(grads[name], ref_grads[name]), name
    for name in ref_params.files:
        assert np.array_equal(params[name], ref_params[name]), name
    measured = json.loads((tmp_path / f"{tag}-metrics.json").read_text())
    assert sum(measured["borrowed_core_products"]) > 0, measured
    # Without lending, nothing borrows.
    monkeypatch.setenv("ZB_LEND_CORES", "0")
    train(zb_run, examples_dir / "gpt.mlir", tmp_path, f"alone-{schedule}",
          "--np", 2, "--schedule", schedule)
    alone = json.loads((tmp_path / f"alone-{schedule}-metrics.json")
                       .read_text())
    assert alone["borrowed_core_products"] == [0, 0], alone


@pytest.mark.parametrize("name,value", [("ZB_LEND_CORES", "yes"),
                                        ("ZB_LEND_MIN_MACS", "-5"),
                                        ("ZB_LEND_MIN_MACS", "1e6")])
def test_bad_lending_settings_are_named(zb_run, examples_dir, monkeypatch,
                                        name, value):
    monkeypatch.setenv(name, value)
    proc = zb_run(examples_dir / "gpt.mlir", "--steps", 1, "--np", 2)
    assert proc.returncode != 0
    assert f"{name} must be" in proc.stderr and value in proc.stderr, \
        proc.stderr


def test_outside_launcher_runs_as_its_ranks(repo_root, examples_dir,
                                            references, tmp_path,
                                            outside_mpirun):
    """zb-run started by an outside `mpirun -np 2` runs as those two ranks
    (no second launch): the same run as zb-run launching itself. A --np
    that does not match the launcher's world is an error naming both; it and
    a bad flag are printed once, not once per rank."""
    exe = Path(os.environ.get("ZB_BIN_DIR", repo_root / "build" / "bin"))
    ref_losses, ref_params, _ = references["mlp"]
    metrics, params = tmp_path / "m.json", tmp_path / "p.npz"
    args = [str(exe / "zb-run"), str(examples_dir / "mlp.mlir"),
            "--steps", str(STEPS), "--microbatches", str(MICROBATCHES),
            "--seed", "3", "--lr", "0.05", "--schedule", "zb-h1"]
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    proc = subprocess.run(
        outside_mpirun(2) + args + ["--np", "2", "--metrics", str(metrics),
                                     "--dump-params", str(params)],
        capture_output=True, text=True, env=env, timeout=300,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # One run: rank 0 prints each step once.
    assert proc.stdout.count(f"step {STEPS}/{STEPS}") == 1, proc.stdout
    losses = json.loads(metrics.read_text())["loss"]
    np.testing.assert_allclose(losses, ref_losses, rtol=RTOL)
    with np.load(params) as got:
        for name in ref_params.files:
            assert_close(name, got[name], ref_params[name])

    wrong = subprocess.run(outside_mpirun(2) + args + ["--np", "4"],
                           capture_output=True, text=True, env=env,
                           timeout=300, stdin=subprocess.DEVNULL)
    assert wrong.returncode != 0
    assert ("started as one of 2 processes by an MPI launcher, but --np 4 "
            "needs 4; pass --np P and --dp D with P * D = 2") in wrong.stderr, \
        wrong.stderr
    # Errors every rank meets alike are printed once, by rank 0.
    assert wrong.stderr.count("started as one of 2") == 1, wrong.stderr
    bad = subprocess.run(outside_mpirun(2) + args + ["--np", "2",
                                                     "--microbatches", "0"],
                         capture_output=True, text=True, env=env,
                         timeout=300, stdin=subprocess.DEVNULL)
    assert bad.returncode != 0
    assert bad.stderr.count("--microbatches must be at least 1, got 0") == 1, \
        bad.stderr


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("model", ["mlp", "gpt"])
def test_dualpipev_equals_one_process(zb_run, examples_dir, tmp_path, model,
                                      ranks):
    """DualPipeV (m >= 2p microbatches, its F&B pairs one after the other)
    trains like one process over the same microbatches."""
    microbatches = 2 * ranks
    path = examples_dir / f"{model}.mlir"
    ref_losses, ref_params, ref_grads = train(zb_run, path, tmp_path, "ref",
                                              microbatches=microbatches)
    losses, params, grads = train(zb_run, path, tmp_path, "dualpipev", "--np",
                                  ranks, "--schedule", "dualpipev",
                                  microbatches=microbatches)
    np.testing.assert_allclose(losses, ref_losses, rtol=RTOL)
    for name in ref_params.files:
        assert_close(f"param {name}", params[name], ref_params[name])
    for name in ref_grads.files:
        assert_close(f"grad {name}", grads[name], ref_grads[name])

    # Fewer than 2p microbatches: the schedule says what it needs.
    proc = zb_run(path, "--np", ranks, "--schedule", "dualpipev",
                  "--microbatches", 2 * ranks - 1)
    assert proc.returncode != 0
    assert f"needs at least 2p = {2 * ranks} microbatches" in proc.stderr, \
        proc.stderr


@pytest.mark.parametrize("schedule,ranks", [("zb-h1", 2), ("zb-v", 2),
                                            ("1f1b", 4)])
def test_balanced_pipeline_equals_one_process(zb_run, examples_dir,
                                              references, tmp_path, schedule,
                                              ranks):
    """--balance cuts the stages at measured times (a profile of a finer
    partition run round the ranks first) and schedules with them: the
    training is still the one-process training."""
    ref_losses, ref_params, _ = references["gpt"]
    losses, params, _ = train(zb_run, examples_dir / "gpt.mlir", tmp_path,
                              f"balance-{schedule}", "--np", ranks,
                              "--schedule", schedule, "--balance")
    np.testing.assert_allclose(losses, ref_losses, rtol=RTOL)
    for name in ref_params.files:
        assert_close(f"param {name}", params[name], ref_params[name])


def test_balance_reports_the_profile(zb_run, examples_dir, tmp_path):
    """The finer partition's stage times are printed (M=3 is no multiple of
    P=2: rank 0 runs them alone), and --balance needs a pipeline."""
    proc = zb_run(examples_dir / "mlp.mlir", "--np", 2, "--balance",
                  "--steps", 1, "--microbatches", 3)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "zb-run: --balance: " in proc.stdout
    assert "finer stages measured, F+B+W ms:" in proc.stdout
    proc = zb_run(examples_dir / "mlp.mlir", "--np", 1, "--balance")
    assert proc.returncode != 0
    assert "--balance cuts the stages of a pipeline: it needs --np 2" in \
        proc.stderr
