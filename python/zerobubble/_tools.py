"""Locating and running the ZeroBubble command-line tools.

The tools are looked up, in order, in ``$ZB_BIN_DIR``, on ``PATH``, and in
the build tree of the source checkout this package sits in
(``<repo>/build/bin``).
"""

import os
import shutil
import subprocess
from pathlib import Path

from .errors import CompilerError, ToolNotFoundError

_SOURCE_BUILD_BIN = Path(__file__).resolve().parents[2] / "build" / "bin"


def find_tool(name):
    """The path of the tool ``name`` (``"zb-run"``, ``"zb-opt"``, ...)."""
    searched = []
    env_dir = os.environ.get("ZB_BIN_DIR")
    if env_dir:
        candidate = Path(env_dir) / name
        if candidate.is_file():
            return str(candidate)
        searched.append(f"$ZB_BIN_DIR={env_dir}")
    on_path = shutil.which(name)
    if on_path:
        return on_path
    searched.append("PATH")
    candidate = _SOURCE_BUILD_BIN / name
    if candidate.is_file():
        return str(candidate)
    searched.append(str(_SOURCE_BUILD_BIN))
    raise ToolNotFoundError(
        f"cannot find '{name}' (searched {', '.join(searched)}); "
        "set ZB_BIN_DIR to the folder holding the built tools")


def run_tool(name, args, *, ok_codes=(0,), env=None, timeout=None,
             input=None, cwd=None):
    """Run ``name *args`` and return the ``CompletedProcess`` (text output).

    A return code outside ``ok_codes`` raises :class:`CompilerError` carrying
    the tool's diagnostics. ``env`` entries are added to the current
    environment.
    """
    command = [find_tool(name), *map(str, args)]
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update({k: str(v) for k, v in env.items()})
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, env=full_env,
            timeout=timeout, input=input, cwd=cwd,
            stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise CompilerError(command, -1,
                            f"timed out after {exc.timeout} s") from None
    if proc.returncode not in ok_codes:
        raise CompilerError(command, proc.returncode, proc.stderr,
                            proc.stdout)
    return proc
