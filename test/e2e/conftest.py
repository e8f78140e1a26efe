"""Fixtures of the end-to-end tests: where the repository and the built tools
are, and a helper that runs zb-run.

Environment:
  ZB_BIN_DIR  the folder holding the built tools (default: <repo>/build/bin)
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"

# A zb-run invocation compiles the model and runs it; generous, but bounded.
ZB_RUN_TIMEOUT_S = 600


def bin_dir():
    return Path(os.environ.get("ZB_BIN_DIR", REPO_ROOT / "build" / "bin"))


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session")
def examples_dir():
    return EXAMPLES


def tool_runner(name):
    """A function running the built tool `name` with ``*args`` that returns
    the CompletedProcess (text stdout/stderr captured, no check). Fails the
    test when the tool has not been built: a missing tool is an error, not
    a reason to skip."""
    exe = bin_dir() / name
    if not exe.is_file():
        pytest.fail(f"{name} not built ({exe} missing; set ZB_BIN_DIR)")

    def run(*args):
        return subprocess.run([str(exe), *map(str, args)], capture_output=True,
                              text=True, timeout=ZB_RUN_TIMEOUT_S,
                              cwd=REPO_ROOT, stdin=subprocess.DEVNULL)

    return run


@pytest.fixture(scope="session")
def zb_run():
    """Runs ``zb-run *args`` (tool_runner)."""
    return tool_runner("zb-run")


@pytest.fixture(scope="session")
def zb_opt():
    """Runs ``zb-opt *args`` (tool_runner)."""
    return tool_runner("zb-opt")


@pytest.fixture(scope="session")
def outside_mpirun():
    """A function giving the command line of an outside `mpirun -np N`, as
    a user's launcher would start zb-run (oversubscribed: this machine may
    have fewer cores than ranks)."""
    def command(np_):
        mpirun = shutil.which("mpirun")
        assert mpirun, "mpirun not on PATH (utils/install-deps.sh installs it)"
        cmd = [mpirun, "-np", str(np_), "--oversubscribe", "--bind-to", "none"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        return cmd

    return command
