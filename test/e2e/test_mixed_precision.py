"""--dtype bf16: a pipeline's activation stashes kept in bf16.

The stashes (F->B and B->W) are rounded to bf16 where they are stashed and
widened back where the backward reads them; parameters, gradients and all
arithmetic stay f32. Checked against the unpartitioned f32 model on one
process:

- training the GPT example for 20 steps, the per-step losses stay within
  1e-2 relative of the one-process f32 run (and are not bitwise the f32
  pipeline's: the stash really is rounded);
- the stash the schedule plans and the stash measured while training are
  about half of f32's (token ids and parameters are not narrowed);
- bad values and unsupported combinations are clear errors.
"""

import json

import numpy as np
import pytest

from test_forward import describe

STEPS = 20
MICROBATCHES = 4


def train(zb_run, tmp_path, tag, *flags):
    metrics = tmp_path / f"{tag}.json"
    proc = zb_run("examples/gpt.mlir", "--microbatches", MICROBATCHES,
                  "--steps", STEPS, "--lr", 0.05, "--seed", 3,
                  "--metrics", metrics, *flags)
    assert proc.returncode == 0, describe(proc)
    return json.loads(metrics.read_text())


@pytest.mark.parametrize("schedule", ["zb-h1", "zb-v"])
def test_bf16_stashes_train_like_f32(zb_run, tmp_path, schedule):
    one = train(zb_run, tmp_path, "one", "--np", 1)
    pipelined = ("--np", 2, "--schedule", schedule)
    f32 = train(zb_run, tmp_path, "f32", *pipelined)
    bf16 = train(zb_run, tmp_path, "bf16", *pipelined, "--dtype", "bf16")

    ref = np.array(one["loss"])
    np.testing.assert_allclose(f32["loss"], ref, rtol=1e-5)
    np.testing.assert_allclose(bf16["loss"], ref, rtol=1e-2)
    assert ref[-1] < ref[0], "the f32 run does not learn"
    assert bf16["loss"][-1] < bf16["loss"][0], "the bf16 run does not learn"
    assert not np.array_equal(bf16["loss"], f32["loss"]), \
        "bf16 stashes changed nothing"

    for key in ("predicted_stash_bytes", "peak_stash_bytes"):
        for rank, (narrow, wide) in enumerate(zip(bf16[key], f32[key])):
            assert 0.4 * wide <= narrow <= 0.6 * wide, (key, rank, narrow,
                                                        wide)


def test_dtype_errors(zb_run):
    proc = zb_run("examples/gpt.mlir", "--np", 2, "--dtype", "fp8")
    assert proc.returncode != 0
    assert "unknown --dtype 'fp8' (expected f32 or bf16)" in proc.stderr, \
        describe(proc)
    proc = zb_run("examples/gpt.mlir", "--dtype", "bf16")
    assert proc.returncode != 0
    assert "--dtype bf16 keeps a pipeline's stashes in bf16" in proc.stderr, \
        describe(proc)
