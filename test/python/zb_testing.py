"""Helpers of the Python package tests."""

import importlib
import os

import numpy as np
import pytest


def require(module):
    """Import ``module``; skip the calling test module without it, or fail
    when ZB_REQUIRE_TORCH=1."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("ZB_REQUIRE_TORCH") == "1":
            pytest.fail(f"{module} is required (ZB_REQUIRE_TORCH=1) but "
                        f"cannot be imported: {exc}", pytrace=False)
        pytest.skip(f"{module} not installed", allow_module_level=True)


def assert_close(name, ours, ref, rtol):
    """Max |ours - ref| relative to max |ref| is at most ``rtol``."""
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    assert ours.shape == ref.shape, f"{name}: shape {ours.shape} != {ref.shape}"
    scale = max(float(np.max(np.abs(ref))), 1e-12)
    err = float(np.max(np.abs(ours - ref))) / scale
    assert err <= rtol, f"{name}: relative error {err:.2e} > {rtol:.0e}"
