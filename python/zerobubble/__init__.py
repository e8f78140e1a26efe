"""ZeroBubble MLIR from Python.

- :func:`compile`, :func:`run`, :func:`gradients`, :func:`evaluate`: the
  compiler (``zb-opt``) and the runner (``zb-run``) on a model;
- :func:`schedule` and :func:`plot_schedule`: the schedule library
  (``zb-sched``) and a timeline picture of a schedule;
- :func:`from_torch` and :func:`pipe_cut`: the PyTorch frontend (needs
  ``torch``).

The tools are found in ``$ZB_BIN_DIR``, on ``PATH`` or in the source
checkout's ``build/bin``. Their failures raise :class:`CompilerError`
carrying the diagnostics.
"""

from .compiler import (Gradients, RunResult, compile, evaluate, gradients,
                       run)
from .errors import (CompilerError, FrontendError, FrontendWarning,
                     ToolNotFoundError, UnsupportedOpError, ZeroBubbleError)
from .plot import plot_schedule
from .schedule import Action, Schedule, schedule

__version__ = "0.1.0"

__all__ = [
    "Action", "CompilerError", "FrontendError", "FrontendWarning",
    "Gradients", "Program",
    "RunResult", "Schedule", "ToolNotFoundError", "UnsupportedOpError",
    "ZeroBubbleError", "compile", "evaluate", "from_torch", "gradients",
    "pipe_cut", "plot_schedule", "run", "schedule",
]


def from_torch(module, example_args, **kwargs):
    """Export ``module`` with ``torch.export`` and return a :class:`Program`
    (see :func:`zerobubble.frontend.from_torch`)."""
    from .frontend import from_torch as _from_torch
    return _from_torch(module, example_args, **kwargs)


def pipe_cut(x):
    """Mark a pipeline stage boundary on tensor ``x`` in PyTorch code; an
    identity (with an identity gradient) when run eagerly."""
    from .frontend import pipe_cut as _pipe_cut
    return _pipe_cut(x)


def __getattr__(name):
    if name == "Program":
        from .frontend import Program
        return Program
    raise AttributeError(f"module 'zerobubble' has no attribute '{name}'")
