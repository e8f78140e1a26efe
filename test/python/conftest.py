"""Fixtures of the Python package tests.

The package is imported from <repo>/python (no install needed). The tools
come from $ZB_BIN_DIR (default <repo>/build/bin); a missing tool fails the
tests. Tests that need PyTorch or matplotlib call `zb_testing.require`:
with ZB_REQUIRE_TORCH=1 (set by ctest) a missing package is an error,
otherwise those tests are skipped.

Environment:
  ZB_BIN_DIR        the folder holding the built tools
  ZB_REQUIRE_TORCH  1: torch and matplotlib must be installed
"""

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "python"))
os.environ.setdefault("ZB_BIN_DIR", str(REPO_ROOT / "build" / "bin"))


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session", autouse=True)
def tools_built():
    exe = Path(os.environ["ZB_BIN_DIR"]) / "zb-run"
    if not exe.is_file():
        pytest.fail(f"zb-run not built ({exe} missing; set ZB_BIN_DIR)")
