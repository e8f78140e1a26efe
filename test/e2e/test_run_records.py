"""What zb-run records and keeps: checkpoints that resume to the same loss
curve, the Chrome trace and the profile of a pipelined run, and the measured
figures of the metrics file.

The CPU runs are deterministic with one BLAS thread (the suite sets
OPENBLAS_NUM_THREADS=1), so a resumed run must reproduce the uninterrupted
run's losses and parameters bit for bit.
"""

import fcntl
import json
import platform
from pathlib import Path

import numpy as np
import pytest


def check(proc):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def losses(path):
    return json.loads(path.read_text())["loss"]


@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_resume_reproduces_the_run(zb_run, examples_dir, tmp_path, ranks,
                                   optimizer):
    model = examples_dir / "mlp.mlir"
    common = ["--np", ranks, "--microbatches", 4, "--optimizer", optimizer,
              "--lr", 0.05]
    check(zb_run(model, *common, "--steps", 6, "--metrics",
                 tmp_path / "straight.json", "--dump-params",
                 tmp_path / "straight.npz"))
    ckpt = tmp_path / "ckpt"
    check(zb_run(model, *common, "--steps", 3, "--checkpoint", ckpt))
    assert (ckpt / "latest").is_file()
    resumed = check(zb_run(model, *common, "--steps", 6, "--resume", ckpt,
                           "--metrics", tmp_path / "resumed.json",
                           "--dump-params", tmp_path / "resumed.npz"))
    assert "step 4/6" in resumed.stdout
    assert losses(tmp_path / "resumed.json") == \
        losses(tmp_path / "straight.json")[3:]
    straight = np.load(tmp_path / "straight.npz")
    again = np.load(tmp_path / "resumed.npz")
    assert sorted(straight.files) == sorted(again.files)
    for name in straight.files:
        assert np.array_equal(straight[name], again[name]), name


def test_checkpoint_every_keeps_the_newest_state(zb_run, examples_dir,
                                                 tmp_path):
    ckpt = tmp_path / "ckpt"
    check(zb_run(examples_dir / "mlp.mlir", "--steps", 5, "--checkpoint",
                 ckpt, "--checkpoint-every", 2))
    states = [p.name for p in ckpt.iterdir() if p.name.startswith("state-")]
    assert len(states) == 1, states
    assert (ckpt / "latest").read_text().strip() == states[0]
    assert json.loads((ckpt / states[0] / "state.json").read_text())[
        "step"] == 5


@pytest.mark.parametrize("ranks", [1, 2])
def test_a_checkpoint_folder_in_use_is_refused(zb_run, examples_dir, tmp_path,
                                               ranks):
    """Two runs given one --checkpoint would write states and temporary
    files over each other: while one holds the folder's lock (here this
    test, as another run would), a second stops, naming the holder, and
    writes nothing; once it is free the run proceeds."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    model = examples_dir / "mlp.mlir"
    with open(ckpt / ".lock", "w") as lock:
        lock.write("4242\n")
        lock.flush()
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proc = zb_run(model, "--np", ranks, "--steps", 2, "--checkpoint",
                      ckpt)
        assert proc.returncode != 0
        assert (f"checkpoint directory '{ckpt}' is in use by another run "
                "(process 4242)") in proc.stderr, proc.stderr
        assert not (ckpt / "latest").exists()
    check(zb_run(model, "--np", ranks, "--steps", 2, "--checkpoint", ckpt))
    assert (ckpt / "latest").is_file()


def test_bad_resume_is_refused_before_writing(zb_run, examples_dir, tmp_path):
    model = examples_dir / "mlp.mlir"
    params = tmp_path / "params.npz"
    params.write_bytes(b"keep me")
    cases = {
        "missing": (tmp_path / "nothing-here", "not a directory"),
        "empty": (tmp_path / "empty", "no 'latest' file"),
    }
    (tmp_path / "empty").mkdir()
    for name, (directory, message) in cases.items():
        proc = zb_run(model, "--steps", 4, "--resume", directory,
                      "--dump-params", params, "--checkpoint", directory)
        assert proc.returncode != 0, name
        assert message in proc.stderr, (name, proc.stderr)
        assert params.read_bytes() == b"keep me"

    # A state of another optimizer, and one already past --steps.
    ckpt = tmp_path / "ckpt"
    check(zb_run(model, "--steps", 2, "--checkpoint", ckpt))
    proc = zb_run(model, "--steps", 4, "--optimizer", "adamw", "--resume",
                  ckpt, "--dump-params", params)
    assert proc.returncode != 0
    assert "written for another model or optimizer" in proc.stderr
    proc = zb_run(model, "--steps", 2, "--resume", ckpt)
    assert proc.returncode != 0
    assert "leaves nothing to run" in proc.stderr
    assert params.read_bytes() == b"keep me"

    # A damaged state: a config whose escape is not four hex digits.
    state = ckpt / (ckpt / "latest").read_text().strip()
    state_json = state / "state.json"
    saved = state_json.read_text()
    state_json.write_text('{"step": 1, "config": "\\uZZZZ"}')
    proc = zb_run(model, "--steps", 4, "--resume", ckpt)
    assert proc.returncode > 0, proc.stderr
    assert 'has no valid "step" and "config"' in proc.stderr, proc.stderr
    state_json.write_text(saved)

    # A damaged state: the parameters file is not an .npz.
    (state / "params.npz").write_bytes(b"garbage")
    proc = zb_run(model, "--steps", 4, "--resume", ckpt)
    assert proc.returncode != 0
    assert "checkpoint '" in proc.stderr and "params.npz" in proc.stderr


def test_a_pipelined_resume_error_is_said_once(zb_run, examples_dir, tmp_path):
    """Every rank finds the state written for another optimizer; rank 0
    says so, once."""
    model, ckpt = examples_dir / "mlp.mlir", tmp_path / "ckpt"
    check(zb_run(model, "--np", 2, "--steps", 2, "--checkpoint", ckpt))
    proc = zb_run(model, "--np", 2, "--steps", 4, "--resume", ckpt,
                  "--optimizer", "adamw")
    assert proc.returncode > 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert out.count("written for another model or optimizer") == 1, out


@pytest.mark.parametrize("schedule,kinds", [("1f1b", {"F", "BW"}),
                                            ("zb-h1", {"F", "B", "W"})])
def test_trace_profile_and_metrics(zb_run, examples_dir, tmp_path, repo_root,
                                   schedule, kinds):
    steps, microbatches, ranks = 3, 4, 2
    metrics = tmp_path / "m.json"
    trace = tmp_path / "t.json"
    profile = tmp_path / "p.json"
    proc = check(zb_run(examples_dir / "gpt.mlir", "--np", ranks,
                        "--schedule", schedule, "--steps", steps,
                        "--microbatches", microbatches, "--metrics", metrics,
                        "--trace", trace, "--profile", profile))
    assert "bubble rate" in proc.stdout and "simulated" in proc.stdout

    # Every action of every step on every rank, in zb-sched's trace format.
    events = json.loads(trace.read_text())["traceEvents"]
    actions = [e for e in events if e["ph"] == "X"]
    stages = 2 * ranks if schedule == "interleaved-1f1b" else ranks
    per_microbatch = 3 if "W" in kinds else 2
    assert len(actions) == steps * microbatches * stages * per_microbatch
    assert {e["cat"] for e in actions} == kinds
    assert {e["tid"] for e in actions} == set(range(ranks))
    for rank in range(ranks):
        mine = sorted((e["ts"], e["ts"] + e["dur"]) for e in actions
                      if e["tid"] == rank)
        assert all(end <= nxt + 1e-3 for (_, end), (nxt, _) in
                   zip(mine, mine[1:])), "actions of one rank overlap"

    # The profile: one entry per stage, positive F times.
    entries = json.loads(profile.read_text())["stages"]
    assert [e["stage"] for e in entries] == list(range(stages))
    assert all(e["f"] > 0 and e["b"] >= 0 and e["w"] >= 0 for e in entries)

    m = json.loads(metrics.read_text())
    assert len(m["loss"]) == steps
    assert 0 <= m["bubble_rate"] < 1 and 0 <= m["simulated_bubble_rate"] < 1
    assert len(m["step_bubble_rate"]) == steps
    for key in ("peak_stash_bytes", "predicted_stash_bytes",
                "peak_memory_bytes"):
        assert len(m[key]) == ranks and all(v > 0 for v in m[key]), key
    assert all(s <= p for s, p in zip(m["peak_stash_bytes"],
                                      m["peak_memory_bytes"]))


def test_profile_feeds_the_compiler(zb_run, zb_opt, examples_dir, tmp_path):
    """A profile written by --profile is what --zb-pipeline costs= reads
    (the MLP's two pipe.cut markers make 3 stages: zb-run, like this test,
    drops them for 2 ranks and partitions by the cost model)."""
    profile = tmp_path / "p.json"
    check(zb_run(examples_dir / "mlp.mlir", "--np", 2, "--steps", 2,
                 "--microbatches", 4, "--profile", profile))
    out = zb_opt(examples_dir / "mlp.mlir", "--zb-strip-cuts",
                 "--zb-pipeline=stages=2 microbatches=4 schedule=zb-h1 "
                 f"costs={profile} lower-to-cpu=false")
    assert out.returncode == 0, out.stderr
    assert "zb_rank1_step" in out.stdout


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "zb-h1", "zb-h2"])
def test_measured_stash_matches_the_simulator(zb_run, examples_dir, tmp_path,
                                              schedule):
    """The stash the runtime measures (the rank's arena) is the simulator's
    prediction from the stages' mem_b/mem_w plus at most what one action
    holds on both sides while it runs (one microbatch's mem_b and mem_w),
    less the token ids that mem_b and mem_w count in every microbatch's
    stash (the rank holds them with its inputs: 256 bytes a microbatch
    here); and 1F1B and ZB-H1 keep within the paper's bound of P
    microbatches' stash per rank, a stash being mem_b or, where W needs
    more than F stashed, mem_w."""
    ranks, microbatches = 2, 8
    metrics = tmp_path / "m.json"
    params = tmp_path / "params.npz"
    check(zb_run(examples_dir / "gpt.mlir", "--np", ranks, "--schedule",
                 schedule, "--steps", 2, "--microbatches", microbatches,
                 "--metrics", metrics, "--dump-params", params))
    m = json.loads(metrics.read_text())
    for rank in range(ranks):
        measured = m["peak_stash_bytes"][rank]
        predicted = m["predicted_stash_bytes"][rank]
        overlap = (m["microbatch_stash_bytes"][rank] +
                   m["microbatch_w_stash_bytes"][rank])
        token_ids = 256 * microbatches
        assert (predicted - token_ids <= measured <=
                predicted + overlap + 16384), \
            (rank, measured, predicted, overlap)
        if schedule in ("1f1b", "zb-h1"):
            mem_b = m["microbatch_stash_bytes"][rank]
            mem_w = m["microbatch_w_stash_bytes"][rank]
            assert predicted <= ranks * max(mem_b, mem_w), \
                (rank, predicted, mem_b, mem_w)
    if schedule == "gpipe":
        # Every microbatch's stash is held at once.
        assert m["predicted_stash_bytes"] == [
            microbatches * b for b in m["microbatch_stash_bytes"]]


def test_trace_needs_a_pipeline(zb_run, examples_dir, tmp_path):
    proc = zb_run(examples_dir / "mlp.mlir", "--steps", 1, "--trace",
                  tmp_path / "t.json")
    assert proc.returncode != 0
    assert "need --np 2 or more" in proc.stderr


def test_code_for_a_cpu_this_one_lacks_is_refused(zb_run, examples_dir):
    """--target-cpu naming a CPU with instruction sets this machine lacks:
    compiled (--compile-only serves another machine), but refused to run
    with the sets named, instead of stopping at the first of them."""
    if platform.machine() != "x86_64":
        pytest.skip("the CPUs named here are x86 ones")
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    lacking = [(cpu, needs) for cpu, flag, needs in [
        ("x86-64-v4", "avx512f", "avx512f"),
        ("sapphirerapids", "amx_tile", "amx-tile")] if flag not in flags]
    if not lacking:
        pytest.skip("this CPU has AVX-512 and AMX: no CPU here it cannot run")
    cpu, needs = lacking[0]
    model = examples_dir / "mlp.mlir"
    proc = zb_run(model, "--grads", "--target-cpu", cpu)
    assert proc.returncode > 0, proc.stderr
    assert f"code for the CPU '{cpu}' needs" in proc.stderr, proc.stderr
    assert needs in proc.stderr, proc.stderr
    assert "--compile-only" in proc.stderr, proc.stderr
    assert zb_run(model, "--compile-only", "--target-cpu",
                  cpu).returncode == 0
    # The baseline every x86-64 CPU runs.
    check(zb_run(model, "--grads", "--target-cpu", "x86-64"))


def test_a_random_key_is_neither_samples_nor_input(zb_run, examples_dir,
                                                   tmp_path):
    """A {zb.rng} argument (here first, unused) is zb-run's: an --inputs
    array of its name is not read (this one has the wrong shape), and
    samples per second count the first real data argument's samples (8),
    not the key's 1."""
    text = (examples_dir / "mlp.mlir").read_text()
    text = text.replace("func.func @mlp(%x:", "func.func @mlp(%key: "
                        'tensor<1xi64> {zb.data = "zb_rng", zb.rng}, %x:', 1)
    assert "zb.rng" in text
    model = tmp_path / "keyed.mlir"
    model.write_text(text)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "inputs.npz",
             arg1=rng.standard_normal((2, 8, 16)).astype(np.float32),
             arg2=rng.integers(0, 10, (2, 8)),
             zb_rng=np.zeros((3, 3), np.int64))
    metrics = tmp_path / "m.json"
    check(zb_run(model, "--steps", 2, "--microbatches", 2, "--inputs",
                 tmp_path / "inputs.npz", "--metrics", metrics))
    m = json.loads(metrics.read_text())
    assert m["samples_per_s"] == pytest.approx(
        [r * 8 for r in m["microbatches_per_s"]], rel=1e-6)


UNREAD_PARAMETER_MODEL = """
func.func @m(%x: tensor<2x4xf32> {zb.data = "x"},
             %w: tensor<4x4xf32> {zb.param = "w"},
             %unread: tensor<3x3xf32> {zb.param = "unread"},
             %v: tensor<4x4xf32> {zb.param = "v"}) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>)
      -> tensor<2x4xf32>
  %a = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x4xf32>)
      outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = pipe.cut %a : tensor<2x4xf32>
  %b = linalg.matmul ins(%h, %v : tensor<2x4xf32>, tensor<4x4xf32>)
      outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  %c = linalg.mul ins(%b, %b : tensor<2x4xf32>, tensor<2x4xf32>)
      outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  %l = linalg.reduce ins(%c : tensor<2x4xf32>) outs(%z : tensor<f32>)
      dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}
"""


def test_a_parameter_nothing_reads(zb_run, tmp_path):
    """A parameter no operation reads is held by the first stage, as the
    whole model on one process holds it: a pipelined run trains it as one
    process does (a zero gradient, AdamW's decay), writes it to its
    parameter file and its checkpoints, and resumes from them."""
    model = tmp_path / "unread.mlir"
    model.write_text(UNREAD_PARAMETER_MODEL)
    common = ["--microbatches", 2, "--optimizer", "adamw", "--lr", 0.05,
              "--seed", 4]
    check(zb_run(model, *common, "--steps", 4, "--dump-params",
                 tmp_path / "one.npz"))
    ckpt = tmp_path / "ckpt"
    check(zb_run(model, *common, "--np", 2, "--steps", 2, "--checkpoint",
                 ckpt))
    check(zb_run(model, *common, "--np", 2, "--steps", 4, "--resume", ckpt,
                 "--dump-params", tmp_path / "two.npz"))
    one, two = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    assert sorted(one.files) == sorted(two.files) == ["unread", "v", "w"]
    assert np.any(one["unread"] != 0)
    for name in one.files:
        np.testing.assert_allclose(two[name], one[name], rtol=1e-5,
                                   err_msg=name)
