"""zerobubble.schedule and plot_schedule: the schedule library from Python."""

import math

import pytest

import zerobubble as zb
from zb_testing import require


def test_zero_bubble_beats_1f1b():
    """With T_F = T_B = T_W, ZB-H1 has fewer bubbles than 1F1B at the same
    peak memory; both are valid and at or above the lower bound."""
    h1 = zb.schedule("zb-h1", 4, 8)
    f1b = zb.schedule("1f1b", 4, 8)
    assert h1.valid and f1b.valid
    assert h1.bubble_rate < f1b.bubble_rate
    assert h1.makespan >= h1.lower_bound
    assert max(h1.peak_memory) == max(f1b.peak_memory) == 4
    assert len(h1.actions) == 4
    kinds = {a.kind for rank in h1.actions for a in rank}
    assert kinds == {"F", "B", "W"}
    # Every rank runs F, B and W once per microbatch.
    for rank in h1.actions:
        assert len(rank) == 3 * 8


def test_v_schedule_chunks():
    s = zb.schedule("zb-v", 2, 4, cost_comm=0.1)
    assert s.chunks == 2 and s.placement == "v"
    # Rank 0 holds the first and the last model stage.
    assert {a.stage for a in s.actions[0]} == {0, 3}
    assert {s.chunk(a) for a in s.actions[0]} == {0, 1}


def test_render_formats(tmp_path):
    s = zb.schedule("zb-h1", 2, 4)
    assert "bubble rate" in s.render("text")
    assert "<svg" in s.render("svg")
    assert "sched.program" in s.render("mlir")
    path = tmp_path / "s.json"
    s.save(path)
    assert '"schedule": "zb-h1"' in path.read_text()


def test_an_imported_schedule_that_deadlocks_comes_back_invalid(tmp_path):
    """Its actions, never simulated, have no times (NaN); saving it in an
    unknown format leaves an existing file as it was."""
    csv = tmp_path / "deadlock.csv"
    csv.write_text("0F0,0I0,0W0\n1I0,1F0,1W0\n")
    s = zb.schedule("zb-h1", 2, 1, import_csv=csv)
    assert not s.valid and s.diagnostics
    assert [a.kind for a in s.actions[1]] == ["B", "F", "W"]
    assert all(math.isnan(a.start) for rank in s.actions for a in rank)
    kept = tmp_path / "kept.png"
    kept.write_text("keep")
    with pytest.raises(zb.CompilerError, match="unknown format 'png'"):
        s.save(kept)
    assert kept.read_text() == "keep"


def test_bad_arguments_raise_with_the_diagnostic():
    with pytest.raises(zb.CompilerError, match="unknown schedule 'nope'"):
        zb.schedule("nope", 2, 4)


def test_plot_schedule_png(tmp_path):
    """The PNG shows one row per rank, the F/B/W colours and idle gaps."""
    require("matplotlib")
    from matplotlib.colors import to_rgb
    from matplotlib.image import imread
    from zerobubble.plot import COLORS, IDLE_COLOR

    s = zb.schedule("zb-h1", 3, 6)
    path = tmp_path / "zb-h1.png"
    fig = zb.plot_schedule(s, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "rank 2", "rank 1", "rank 0"]

    pixels = imread(path)[..., :3]

    def present(color):
        diff = abs(pixels - to_rgb(color)).max(axis=-1)
        return (diff < 0.02).sum()

    for kind in ("F", "B", "W"):
        assert present(COLORS[kind]) > 500, kind
    assert present(IDLE_COLOR) > 50, "no idle gaps drawn"


def test_plot_schedule_svg_by_name(tmp_path):
    require("matplotlib")
    path = tmp_path / "zbv.svg"
    zb.plot_schedule("zb-v", path, stages=2, microbatches=4)
    assert "<svg" in path.read_text()


@pytest.mark.parametrize("ranks,microbatches", [(2, 4), (2, 7), (3, 6),
                                                (4, 8), (4, 13)])
def test_dualpipev_is_pytorchs_order(tmp_path, ranks, microbatches):
    """Our dualpipev is PyTorch's ScheduleDualPipeV action for action (its
    overlapped F&B pairs taken one after the other, F first), and PyTorch's
    own CSV of it, OVERLAP_F_B cells included, imports to the same
    schedule."""
    require("torch")
    import types

    from torch.distributed.pipelining.schedules import ScheduleDualPipeV

    # The per-rank order needs no process group: only the sizes.
    sizes = types.SimpleNamespace(pp_group_size=ranks,
                                  _n_microbatches=microbatches)
    theirs = [ScheduleDualPipeV._calculate_single_rank_operations(sizes, r)
              for r in range(ranks)]
    kind = {"F": "F", "I": "B", "W": "W", "B": "BW"}

    def flat(action):
        if action.sub_actions:
            return [x for sub in action.sub_actions for x in flat(sub)]
        return [(kind[action.computation_type.value], action.stage_index,
                 action.microbatch_index)]

    expected = [[x for a in rank if a is not None for x in flat(a)]
                for rank in theirs]
    ours = zb.schedule("dualpipev", ranks, microbatches)
    assert ours.valid, ours.diagnostics
    assert [[(a.kind, a.stage, a.microbatch) for a in rank]
            for rank in ours.actions] == expected

    csv = tmp_path / "dualpipev.csv"
    csv.write_text("\n".join(",".join(str(a) for a in rank if a is not None)
                             for rank in theirs) + "\n")
    assert "OVERLAP_F_B" in csv.read_text()
    imported = zb.schedule("dualpipev", ranks, microbatches, import_csv=csv)
    assert imported.valid, imported.diagnostics
    assert [[(a.kind, a.stage, a.microbatch) for a in rank]
            for rank in imported.actions] == expected
