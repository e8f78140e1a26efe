"""Compiling and running models with zb-opt and zb-run.

A *model* argument is any of: a path to an ``.mlir`` file, the MLIR text of
a model, or a :class:`zerobubble.Program` made by
:func:`zerobubble.from_torch` (whose parameter values are then the default
parameters).
"""

import json
import math
import numbers
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._tools import run_tool
from .errors import ZeroBubbleError


def _model_path(model, workdir):
    """A file holding ``model`` (see the module docstring)."""
    text = getattr(model, "mlir", None)
    # IR text, not a path (which may hold "func.func" in a name).
    if text is None and isinstance(model, str) and "func.func" in model and \
            ("\n" in model or "{" in model):
        text = model
    if text is not None:
        name = getattr(model, "name", None) or "model"
        path = Path(workdir) / f"{name}.mlir"
        path.write_text(text)
        return path
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            raise ZeroBubbleError(f"no such model file: {path}")
        return path
    raise TypeError(
        "model must be a path, MLIR text or a zerobubble.Program, not "
        f"{type(model).__name__}")


def _npz_argument(value, workdir, stem):
    """A path for a ``.npz`` argument given as a path or a dict of arrays."""
    if value is None:
        return None
    if isinstance(value, dict):
        path = Path(workdir) / f"{stem}.npz"
        np.savez(path, **{k: np.asarray(v) for k, v in value.items()})
        return path
    return Path(value)


def _load_npz(path):
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def _check_options(timeout=None, **counts):
    """TypeError or ValueError naming an option that is not a positive
    integer (``counts``; None is left out) or a ``timeout`` that is not a
    positive number of seconds."""
    for name, value in counts.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an integer, not "
                            f"{type(value).__name__}")
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, numbers.Real)
            or not timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, got "
                         f"{timeout!r}")


def _common_args(model, workdir, *, microbatches, params, inputs, seed,
                 cache_dir):
    """The arguments every zb-run mode shares."""
    args = [_model_path(model, workdir), "--microbatches", microbatches]
    if params is None:
        params = getattr(model, "params", None)
        if params is not None and getattr(model, "buffers", None):
            params = {**params, **model.buffers}
    if hasattr(inputs, "__iter__") and not isinstance(
            inputs, (dict, str, os.PathLike)):
        if not hasattr(model, "stack_inputs"):
            raise TypeError("inputs given as microbatches need a "
                            "zerobubble.Program model")
        inputs = model.stack_inputs(inputs)
    params_path = _npz_argument(params, workdir, "params")
    inputs_path = _npz_argument(inputs, workdir, "inputs")
    if params_path is not None:
        args += ["--params", params_path]
    if inputs_path is not None:
        args += ["--inputs", inputs_path]
    if seed is not None:
        args += ["--seed", seed]
    if cache_dir is not None:
        args += ["--cache-dir", cache_dir]
    return args


def _thread_env(threads):
    if threads is None:
        return None
    return {"OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads}


def compile(model, *, stages=1, microbatches=1, schedule="zb-h1", chunks=None,
            mem_limit=None, lower_to_cpu=True, passes=None, output=None):
    """Compile ``model`` with ``zb-opt`` and return the resulting IR text.

    By default this runs ``--zb-pipeline`` with the given ``stages``,
    ``microbatches``, ``schedule``, ``chunks`` and ``mem_limit`` (and
    ``lower-to-cpu``); ``passes``, a list of ``zb-opt`` flags such as
    ``["--zb-partition-stages=stages=2", "--zb-autodiff"]``, runs those
    instead. ``output`` also writes the text to that file. Diagnostics
    raise :class:`zerobubble.CompilerError`.
    """
    if passes is None:
        # Each value is one option of the pipeline's text: a schedule name
        # holding a space or '=' would set others.
        _check_options(stages=stages, microbatches=microbatches,
                       chunks=chunks)
        if not isinstance(schedule, str) or not re.fullmatch(
                r"[A-Za-z0-9_.-]+", schedule):
            raise ValueError(f"schedule must be a schedule's name (see "
                             f"zb-sched --help), got {schedule!r}")
        if mem_limit is not None and (
                isinstance(mem_limit, bool)
                or not isinstance(mem_limit, numbers.Real)):
            raise TypeError(f"mem_limit must be a number of bytes, not "
                            f"{type(mem_limit).__name__}")
        options = [f"stages={stages}", f"microbatches={microbatches}",
                   f"schedule={schedule}",
                   f"lower-to-cpu={'true' if lower_to_cpu else 'false'}"]
        if chunks is not None:
            options.append(f"chunks={chunks}")
        if mem_limit is not None:
            options.append(f"mem-limit={mem_limit}")
        passes = [f"--zb-pipeline={' '.join(options)}"]
    with tempfile.TemporaryDirectory(prefix="zerobubble-") as workdir:
        path = _model_path(model, workdir)
        text = run_tool("zb-opt", [path, *passes]).stdout
    if output is not None:
        Path(output).write_text(text)
    return text


@dataclass
class Gradients:
    """What :func:`gradients` computed: the mean loss and every parameter's
    gradient (means over the microbatches), keyed by parameter name."""
    loss: float
    grads: dict


@dataclass
class RunResult:
    """What :func:`run` measured and produced.

    ``losses`` holds each step's loss (the mean over its microbatches),
    ``microbatches_per_s`` each step's throughput, ``params`` the trained
    parameters and ``grads`` the last step's gradients (both keyed by
    parameter name), ``metrics`` the whole metrics JSON and ``output``
    zb-run's standard output; ``buffers`` the running statistics after
    training (a training-mode batch norm's ``running_mean`` and
    ``running_var``, and ``num_batches_tracked``), keyed by buffer
    name.
    """
    losses: list
    microbatches_per_s: list
    params: dict
    grads: dict
    metrics: dict = field(repr=False)
    output: str = field(repr=False)
    buffers: dict = field(default_factory=dict)


def run(model, *, ranks=1, replicas=1, schedule="zb-h1", microbatches=1,
        steps=1, optimizer="sgd", lr=0.01, chunks=None, params=None,
        inputs=None, seed=None, threads=None, cache_dir=None, timeout=None,
        balance=False, backend="mpi", dtype="f32", momentum=None):
    """Train ``model`` with ``zb-run`` and return a :class:`RunResult`.

    ``ranks`` is the number of pipeline processes P (``--np``; P > 1 runs
    under ``mpirun`` with ``schedule`` and ``chunks``); each step runs
    ``microbatches`` microbatches and updates the parameters with
    ``optimizer`` (``"sgd"``, ``"sgd-momentum"`` with ``momentum``,
    default 0.9, or ``"adamw"``) at learning rate ``lr``.
    ``replicas`` D (``--dp``) runs D copies of the pipeline side by side
    (data parallelism, P * D processes): each runs ``microbatches`` of the
    step's D * ``microbatches`` (replica r the r-th slice of ``inputs``),
    and their gradients are averaged.

    ``params`` is a dict of arrays keyed by parameter name or a ``.npz``
    path (default: a Program's own values, else initialised from ``seed``);
    ``inputs`` is a dict of arrays ``[M][shape]`` or
    ``[K][M][shape]`` (one per step, K at least ``steps``) keyed ``arg<i>`` (or ``zb.data`` names), a
    ``.npz`` path, or, for a Program, a list of microbatches, each a tuple
    of the model's data arguments (default: synthetic data from ``seed``).
    ``threads`` sets the BLAS threads of every rank. ``balance`` (P > 1)
    cuts the stages at times measured before training instead of the
    cost model's FLOPs (``zb-run --balance``). ``backend="nccl"`` runs
    every rank on a GPU (``--backend nccl``, P = 1 included); ``dtype="bf16"``
    keeps a pipeline's activation stashes in bf16 (``--dtype bf16``; on the
    GPU the gemms also multiply in bf16).
    """
    _check_options(timeout, ranks=ranks, replicas=replicas,
                   microbatches=microbatches, steps=steps, threads=threads,
                   chunks=chunks)
    if momentum is not None and optimizer != "sgd-momentum":
        raise ValueError(f"momentum sets the momentum of optimizer="
                         f"\"sgd-momentum\", not of {optimizer!r}")
    with tempfile.TemporaryDirectory(prefix="zerobubble-") as workdir:
        args = _common_args(model, workdir, microbatches=microbatches,
                            params=params, inputs=inputs, seed=seed,
                            cache_dir=cache_dir)
        if balance:
            args.append("--balance")
        if backend != "mpi":
            args += ["--backend", backend]
        if dtype != "f32":
            args += ["--dtype", dtype]
        if momentum is not None:
            args += ["--momentum", momentum]
        out = Path(workdir)
        args += ["--steps", steps, "--optimizer", optimizer, "--lr", lr,
                 "--np", ranks, "--dp", replicas,
                 "--metrics", out / "metrics.json",
                 "--dump-params", out / "params.npz",
                 "--dump-grads", out / "grads.npz"]
        if ranks > 1 or replicas > 1:
            args += ["--schedule", schedule]
            if chunks is not None:
                args += ["--chunks", chunks]
        proc = run_tool("zb-run", args, env=_thread_env(threads),
                        timeout=timeout)
        metrics = json.loads((out / "metrics.json").read_text())
        grads = _load_npz(out / "grads.npz")
        grads.pop("loss", None)
        # The dump holds the running statistics next to the parameters. A
        # Program names them; for IR, they are the arrays without a
        # gradient.
        dumped = _load_npz(out / "params.npz")
        stats = getattr(model, "buffers", None)
        buffers = {k: v for k, v in dumped.items()
                   if (k in stats if stats is not None else k not in grads)}
        # A batch norm's num_batches_tracked: one more per training forward
        # (replica 0's, as the running statistics).
        for name, value in getattr(model, "counters", {}).items():
            buffers[name] = np.asarray(value) + steps * microbatches
        return RunResult(
            # A skipped step's loss is null in the metrics: NaN here.
            losses=[math.nan if x is None else float(x)
                    for x in metrics.get("loss", [])],
            microbatches_per_s=[float(x) for x in
                                metrics.get("microbatches_per_s", [])],
            params={k: v for k, v in dumped.items() if k not in buffers},
            grads=grads, metrics=metrics, output=proc.stdout,
            buffers=buffers)


def _pipeline_args(ranks, schedule, chunks):
    """``--np`` and, for P > 1, the schedule and its chunks."""
    args = ["--np", ranks]
    if ranks > 1:
        args += ["--schedule", schedule]
        if chunks is not None:
            args += ["--chunks", chunks]
    return args


def gradients(model, *, ranks=1, schedule="zb-h1", chunks=None,
              microbatches=1, params=None, inputs=None, seed=None,
              threads=None, cache_dir=None, timeout=None):
    """Forward and backward, no update (``zb-run --grads``): on one process,
    or with ``ranks`` P > 1 one step of the pipeline's per-rank programs
    under ``schedule``.

    Arguments as for :func:`run`. Returns :class:`Gradients`.
    """
    _check_options(timeout, ranks=ranks, microbatches=microbatches,
                   threads=threads, chunks=chunks)
    with tempfile.TemporaryDirectory(prefix="zerobubble-") as workdir:
        args = _common_args(model, workdir, microbatches=microbatches,
                            params=params, inputs=inputs, seed=seed,
                            cache_dir=cache_dir)
        dump = Path(workdir) / "grads.npz"
        args += ["--grads", "--dump-grads", dump,
                 *_pipeline_args(ranks, schedule, chunks)]
        run_tool("zb-run", args, env=_thread_env(threads), timeout=timeout)
        grads = _load_npz(dump)
    loss = float(grads.pop("loss"))
    return Gradients(loss=loss, grads=grads)


def evaluate(model, *, ranks=1, schedule="zb-h1", chunks=None,
             microbatches=1, params=None, inputs=None, seed=None,
             threads=None, cache_dir=None, timeout=None):
    """The mean forward loss over the microbatches (``zb-run --eval``): on
    one process, or with ``ranks`` P > 1 through the pipeline, each rank
    running its stages' forwards in ``schedule``'s order.

    Arguments as for :func:`run`.
    """
    _check_options(timeout, ranks=ranks, microbatches=microbatches,
                   threads=threads, chunks=chunks)
    with tempfile.TemporaryDirectory(prefix="zerobubble-") as workdir:
        args = _common_args(model, workdir, microbatches=microbatches,
                            params=params, inputs=inputs, seed=seed,
                            cache_dir=cache_dir)
        metrics = Path(workdir) / "metrics.json"
        args += ["--eval", "--metrics", metrics,
                 *_pipeline_args(ranks, schedule, chunks)]
        run_tool("zb-run", args, env=_thread_env(threads), timeout=timeout)
        losses = json.loads(metrics.read_text()).get("loss")
    if not losses:
        raise ZeroBubbleError("zb-run --eval wrote no loss")
    return float(losses[0])
