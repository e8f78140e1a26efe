"""A timeline picture of a pipeline schedule (matplotlib)."""

from .schedule import Schedule, schedule as make_schedule

#: Colours of the action kinds; chunks after the first are drawn lighter.
COLORS = {"F": "#4E79A7", "B": "#F28E2B", "W": "#59A14F", "BW": "#B07AA1"}
IDLE_COLOR = "#E15759"
_LABELS = {"F": "F (forward)", "B": "B (input gradient)",
           "W": "W (weight gradient)", "BW": "BW (fused backward)"}


def _lighter(hex_color, amount):
    rgb = [int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    return tuple(c + (1 - c) * amount for c in rgb)


def _idle_gaps(actions, end):
    """The (start, length) of each idle interval of one rank in [0, end]."""
    gaps, t = [], 0.0
    for a in sorted(actions, key=lambda a: a.start):
        if a.start > t + 1e-9:
            gaps.append((t, a.start - t))
        t = max(t, a.end)
    if end > t + 1e-9:
        gaps.append((t, end - t))
    return gaps


def plot_schedule(sched, path=None, *, title=None, labels=True, ax=None,
                  **schedule_args):
    """Draw ``sched`` as a timeline: one row per rank, one box per action
    coloured by kind (F, B, W, fused BW; later chunks lighter), the
    microbatch number inside, and idle gaps hatched.

    ``sched`` is a :class:`zerobubble.Schedule`, or a schedule name whose
    other arguments (``stages``, ``microbatches``, costs...) are passed as
    keywords. ``path`` saves the figure (PNG, SVG, PDF... by extension).
    ``ax`` draws into an existing matplotlib Axes. Returns the Figure.
    """
    if not isinstance(sched, Schedule):
        sched = make_schedule(sched, **schedule_args)
    elif schedule_args:
        raise TypeError("schedule arguments given with a Schedule")
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    ranks = len(sched.actions)
    end = sched.makespan
    own_figure = ax is None
    if own_figure:
        fig = Figure(figsize=(max(6.0, min(24.0, 0.45 * end + 2.0)),
                              1.3 + 0.55 * ranks), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure

    kinds_seen = []
    for rank, actions in enumerate(sched.actions):
        y = ranks - 1 - rank
        for start, length in _idle_gaps(actions, end):
            ax.broken_barh([(start, length)], (y - 0.4, 0.8),
                           facecolors="#F4F4F4", edgecolor=IDLE_COLOR,
                           hatch="///", linewidth=0.0)
        for a in actions:
            base = COLORS.get(a.kind, "#9C9C9C")
            chunk = sched.chunk(a)
            color = _lighter(base, 0.45) if chunk % 2 else base
            ax.broken_barh([(a.start, a.end - a.start)], (y - 0.4, 0.8),
                           facecolors=color, edgecolor="white",
                           linewidth=0.8)
            if a.kind not in kinds_seen:
                kinds_seen.append(a.kind)
            if labels and a.end - a.start >= 0.25:
                ax.text((a.start + a.end) / 2, y, str(a.microbatch),
                        ha="center", va="center", fontsize=7,
                        color="black" if chunk % 2 else "white")

    ax.set_xlim(0, end)
    ax.set_ylim(-0.6, ranks - 0.4)
    ax.set_yticks(range(ranks))
    ax.set_yticklabels([f"rank {r}" for r in reversed(range(ranks))])
    ax.set_xlabel("time (cost units)")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if title is None:
        title = (f"{sched.name}: P={sched.stages}, M={sched.microbatches}, "
                 f"V={sched.chunks}  |  makespan {end:g} (lower bound "
                 f"{sched.lower_bound:g}), bubble rate "
                 f"{100 * sched.bubble_rate:.1f}%")
    ax.set_title(title, fontsize=10)

    order = [k for k in COLORS if k in kinds_seen] + [
        k for k in kinds_seen if k not in COLORS]
    handles = [Patch(facecolor=COLORS.get(k, "#9C9C9C"),
                     label=_LABELS.get(k, k)) for k in order]
    if sched.chunks > 1:
        handles.append(Patch(facecolor=_lighter(COLORS["F"], 0.45),
                             label="odd chunks (lighter)"))
    handles.append(Patch(facecolor="#F4F4F4", edgecolor=IDLE_COLOR,
                         hatch="///", label="idle"))
    if own_figure:
        fig.legend(handles=handles, loc="outside lower center",
                   ncol=len(handles), frameon=False, fontsize=8)
    else:
        ax.legend(handles=handles, loc="upper right", fontsize=7)
    if path is not None:
        fig.savefig(path, dpi=150)
    return fig
