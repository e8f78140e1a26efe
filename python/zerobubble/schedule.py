"""The schedule library through zb-sched: generate, simulate, validate."""

import json
import math
from dataclasses import dataclass, field

from ._tools import run_tool

#: zb-sched exit codes: 0 valid, 1 written but invalid, 2 usage/input error.
_VALID, _INVALID = 0, 1


@dataclass(frozen=True)
class Action:
    """One action of a rank: ``kind`` is ``"F"`` (forward), ``"B"`` (input
    gradient), ``"W"`` (weight gradient) or ``"BW"`` (fused backward), on
    model ``stage`` for ``microbatch``, from ``start`` to ``end`` in cost
    units."""
    kind: str
    stage: int
    microbatch: int
    start: float
    end: float


@dataclass
class Schedule:
    """A simulated pipeline schedule (what ``zb-sched --format=json``
    reports).

    ``bubble_rate`` follows the paper: (max span - m (T_F + T_B + T_W)) /
    max span. ``lower_bound`` is a proven lower bound on the makespan and
    ``gap`` the makespan's distance to it; ``peak_memory`` holds each
    rank's peak activation memory in ``mem_b`` units; ``actions[r]`` is
    rank r's ordered list of :class:`Action`.
    """
    name: str
    stages: int
    microbatches: int
    chunks: int
    placement: str
    costs: dict
    memory: dict
    makespan: float
    max_span: float
    bubble_rate: float
    lower_bound: float
    gap: float
    peak_memory: list
    valid: bool
    diagnostics: list
    actions: list
    _args: list = field(default=None, repr=False, compare=False)

    @property
    def ranks(self):
        """Number of pipeline ranks (the ``stages`` flag of zb-sched)."""
        return self.stages

    def chunk(self, action):
        """The chunk (0 .. chunks-1) of the rank that ``action`` belongs
        to."""
        return action.stage // self.stages

    def render(self, format="text"):
        """This schedule in another zb-sched format: ``text``, ``json``,
        ``chrome`` (trace JSON), ``svg``, ``csv`` (PyTorch pipelining) or
        ``mlir`` (a ``sched.program``)."""
        proc = run_tool("zb-sched", [*self._args, f"--format={format}"],
                        ok_codes=(_VALID, _INVALID))
        return proc.stdout

    def save(self, path, format=None):
        """Write :meth:`render` to ``path``; the format defaults to the
        file's extension (``.txt`` is text, ``.json`` json, ``.svg``,
        ``.csv``, ``.mlir``)."""
        if format is None:
            ext = str(path).rsplit(".", 1)[-1].lower()
            format = {"txt": "text"}.get(ext, ext)
        text = self.render(format)  # a bad format leaves the file alone
        with open(path, "w") as f:
            f.write(text)


def schedule(name, stages, microbatches, *, chunks=None, placement=None,
             cost_f=1.0, cost_b=1.0, cost_w=1.0, cost_comm=None, mem_b=None,
             mem_w=None, mem_limit=None, import_csv=None):
    """Generate (or import) a schedule, simulate and validate it.

    ``name`` is one of zb-sched's schedules (``gpipe``, ``1f1b``,
    ``interleaved-1f1b``, ``zb-h1``, ``zb-h2``, ``zb-auto``, ``zb-v``,
    ``v-half``, ``v-min``, ``dualpipev``); ``stages`` is the number of
    pipeline ranks P and ``chunks`` the stages per rank V. Costs are per rank and
    microbatch; ``mem_b``/``mem_w``/``mem_limit`` are activation memory
    (in any unit). ``import_csv`` reads a PyTorch pipelining CSV instead of
    generating. Returns a :class:`Schedule`; an invalid schedule comes back
    with ``valid`` false and its ``diagnostics``; bad arguments raise
    :class:`zerobubble.CompilerError`.
    """
    args = [f"--schedule={name}", f"--stages={stages}",
            f"--microbatches={microbatches}", f"--cost-f={cost_f}",
            f"--cost-b={cost_b}", f"--cost-w={cost_w}"]
    optional = {"chunks": chunks, "placement": placement,
                "cost-comm": cost_comm, "mem-b": mem_b, "mem-w": mem_w,
                "mem-limit": mem_limit, "import-csv": import_csv}
    args += [f"--{flag}={value}" for flag, value in optional.items()
             if value is not None]
    proc = run_tool("zb-sched", [*args, "--format=json"],
                    ok_codes=(_VALID, _INVALID))
    data = json.loads(proc.stdout)
    # An invalid schedule's actions that were not simulated have no times.
    actions = [[Action(a["kind"], int(a["stage"]), int(a["microbatch"]),
                       float(a.get("start", math.nan)),
                       float(a.get("end", math.nan))) for a in rank]
               for rank in data["actions"]]
    return Schedule(
        name=data["schedule"], stages=data["stages"],
        microbatches=data["microbatches"], chunks=data["chunks"],
        placement=data["placement"], costs=data["costs"],
        memory=data["memory"], makespan=data["makespan"],
        max_span=data["max_span"], bubble_rate=data["bubble_rate"],
        lower_bound=data["lower_bound"], gap=data["gap"],
        peak_memory=data["peak_memory"], valid=bool(data["valid"]),
        diagnostics=list(data.get("diagnostics", [])), actions=actions,
        _args=args)
