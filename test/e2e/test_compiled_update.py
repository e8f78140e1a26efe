"""The optimizer step as compiled code (`zb-run --compiled-update`, what
`--backend nccl` runs on the GPU with the parameters, gradients and state
kept there), against the runtime's host optimizer on the same pipeline:

- Without clipping the runs are bitwise equal (losses and every parameter),
  with SGD and AdamW, for ZB-H1 and ZB-V, and with replicas (--dp 2).
- The compiled gradient norm (`@zb_rank<r>_grad_squares`) sums in another
  order than the host: equal to 1e-12; clipped runs equal to 1e-6, and
  bitwise the run that checks before the update (the compiled update's own
  rollback).
- A non-finite step is skipped: the run equals the run without that step.
- A shared (tied) parameter is updated alike on the ranks that hold it.
- Checkpoints carry the optimizer state in one format: a compiled run
  resumes a host run's checkpoint and the other way round, bitwise.
"""

import json

import numpy as np
import pytest

from test_forward import describe
from test_grad_clip import MICROBATCHES, write_skip_inputs


def run(zb_run, tmp_path, tag, model, *flags):
    metrics = tmp_path / f"{tag}.json"
    params = tmp_path / f"{tag}-params.npz"
    proc = zb_run(model, "--microbatches", MICROBATCHES, "--seed", 3,
                  "--metrics", metrics, "--dump-params", params, *flags)
    assert proc.returncode == 0, describe(proc)
    with np.load(params) as p:
        return json.loads(metrics.read_text()), {k: p[k] for k in p.files}


def assert_bitwise(got, want):
    assert sorted(got) == sorted(want)
    for name in want:
        assert np.array_equal(got[name], want[name]), name


@pytest.mark.parametrize("schedule,optimizer,extra", [
    ("zb-h1", "adamw", ()),
    ("zb-v", "adamw", ()),
    ("zb-h1", "sgd", ()),
    ("zb-h1", "sgd-momentum", ("--momentum", 0.7)),
    ("1f1b", "adamw", ("--dp", 2)),
])
def test_equals_the_host_optimizer(zb_run, examples_dir, tmp_path, schedule,
                                   optimizer, extra):
    model = examples_dir / "gpt.mlir"
    # A clip far above the norm reports the norm and never clips.
    common = ("--np", 2, "--schedule", schedule, "--steps", 3, "--optimizer",
              optimizer, "--lr", 0.01, "--clip-grad-norm", 1e9, *extra)
    host_m, host_p = run(zb_run, tmp_path, "host", model, *common)
    comp_m, comp_p = run(zb_run, tmp_path, "compiled", model, *common,
                         "--compiled-update")
    assert comp_m["loss"] == host_m["loss"]
    assert comp_m["clipped_steps"] == []
    assert comp_m["grad_norm"] == pytest.approx(host_m["grad_norm"],
                                                rel=1e-12)
    assert_bitwise(comp_p, host_p)
    # The update changed the parameters (a run that never updated would
    # also agree with itself).
    _, init_p = run(zb_run, tmp_path, "init", model, *common[:4], "--steps",
                    1, "--lr", 0, "--compiled-update")
    assert any(not np.array_equal(init_p[k], comp_p[k]) for k in init_p)


def test_clipping_rolls_back_and_redoes(zb_run, examples_dir, tmp_path):
    model = examples_dir / "gpt.mlir"
    common = ("--np", 2, "--steps", 3, "--optimizer", "adamw", "--lr", 0.01,
              "--clip-grad-norm", 0.5, "--compiled-update")
    opt_m, opt_p = run(zb_run, tmp_path, "optimistic", model, *common)
    sync_m, sync_p = run(zb_run, tmp_path, "sync", model, *common,
                         "--sync-grad-check")
    host_m, host_p = run(zb_run, tmp_path, "host", model, *common[:-1])
    assert opt_m["clipped_steps"] == [1, 2, 3], opt_m["grad_norm"]
    assert opt_m["loss"] == sync_m["loss"]
    assert_bitwise(opt_p, sync_p)
    assert opt_m["grad_norm"] == pytest.approx(host_m["grad_norm"], rel=1e-9)
    for name in host_p:
        np.testing.assert_allclose(opt_p[name], host_p[name], rtol=1e-6,
                                   atol=1e-7, err_msg=name)


def test_non_finite_step_is_skipped(zb_run, examples_dir, tmp_path):
    write_skip_inputs(tmp_path, np.inf)
    model = examples_dir / "mlp.mlir"
    common = ("--np", 2, "--optimizer", "adamw", "--lr", 0.01,
              "--compiled-update")
    skip_m, skip_p = run(zb_run, tmp_path, "skip", model, *common, "--steps",
                         3, "--inputs", tmp_path / "three.npz")
    ref_m, ref_p = run(zb_run, tmp_path, "ref", model, *common, "--steps", 2,
                       "--inputs", tmp_path / "two.npz")
    assert skip_m["skipped_steps"] == [2]
    assert skip_m["loss"][2] == ref_m["loss"][1]
    assert_bitwise(skip_p, ref_p)


def test_shared_parameter(zb_run, repo_root, tmp_path):
    model = repo_root / "test" / "Transforms" / "shared-params.mlir"
    flags = ("--steps", 2, "--lr", 0.1, "--optimizer", "adamw", "--np", 3,
             "--schedule", "zb-h1")
    host_m, host_p = run(zb_run, tmp_path, "host", model, *flags)
    comp_m, comp_p = run(zb_run, tmp_path, "compiled", model, *flags,
                         "--compiled-update")
    assert comp_m["loss"] == host_m["loss"]
    assert_bitwise(comp_p, host_p)


def test_checkpoints_move_between_host_and_compiled(zb_run, examples_dir,
                                                    tmp_path):
    model = examples_dir / "gpt.mlir"
    common = ("--np", 2, "--optimizer", "adamw", "--lr", 0.01)
    _, full = run(zb_run, tmp_path, "full", model, *common, "--steps", 4)
    for first, then in [((), ("--compiled-update",)),
                        (("--compiled-update",), ())]:
        ck = tmp_path / f"ck{len(first)}"
        run(zb_run, tmp_path, "half", model, *common, *first, "--steps", 2,
            "--checkpoint", ck)
        _, resumed = run(zb_run, tmp_path, "resumed", model, *common, *then,
                         "--steps", 4, "--resume", ck)
        assert_bitwise(resumed, full)


def test_needs_a_pipelined_training_run(zb_run, examples_dir):
    proc = zb_run(examples_dir / "mlp.mlir", "--compiled-update")
    assert proc.returncode != 0
    assert "--compiled-update compiles a pipelined training run's" in \
        proc.stderr, describe(proc)
    proc = zb_run(examples_dir / "mlp.mlir", "--np", 2, "--grads",
                  "--compiled-update")
    assert proc.returncode != 0 and "needs training" in proc.stderr
