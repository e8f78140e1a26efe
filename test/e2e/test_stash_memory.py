"""M_B and M_W that --zb-split-backward records for the GPT example equal
the sizes of the tensors its stages actually stash, read back from the IR.

M_B is the forward's stash (held from F until B), M_W the B->W stash (held
from B until W); parameters handed on are held once, not per microbatch, and
do not count."""

import re

import numpy as np
import pytest

BYTES = {"f32": 4, "f64": 8, "i64": 8, "i32": 4}


def tensor_bytes(type_text):
    m = re.fullmatch(r"tensor<((?:\d+x)*)(\w+)>", type_text.strip())
    assert m, type_text
    dims = [int(d) for d in m.group(1).split("x") if d]
    return int(np.prod(dims, dtype=np.int64)) * BYTES[m.group(2)]


def split_types(text):
    """Top-level comma-separated types of a list like 'tensor<2x3xf32>, ...'."""
    return [t.strip() for t in re.findall(r"tensor<[^>]*>", text)]


def parse_stash(line):
    """('%a, %b', 'T1, T2') of a pipe.yield's stash(...) clause."""
    m = re.search(r"stash\(([^:]*):(.*)\)\s*$", line)
    if not m:
        return [], []
    return ([v.strip() for v in m.group(1).split(",")],
            split_types(m.group(2)))


def block_args(line):
    return re.findall(r"(%[\w]+): ", line)


@pytest.mark.parametrize("stages", [2, 4])
def test_recorded_stash_bytes_match_ir(repo_root, zb_opt, stages):
    flags = [f"--zb-partition-stages=stages={stages} chunks={4 // stages}",
             "--zb-autodiff", "--canonicalize", "--cse",
             "--zb-split-backward"]
    out = zb_opt(repo_root / "examples/gpt.mlir", *flags)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    checked = 0
    for i, line in enumerate(lines):
        m = re.search(r"pipe\.stage (\d+) on rank \d+ .*params\(([^:]*):", line)
        if not m:
            continue
        attrs = dict(re.findall(r"(mem_[bw]) = (\d+)", line))
        num_params = len(m.group(2).split(","))
        # The forward's block arguments: inputs, data, then params.
        fwd_args = block_args(lines[i + 1])
        params = set(fwd_args[-num_params:])
        # Walk the regions: forward yield, then backward_input's header and
        # yield.
        j = i + 1
        while "pipe.yield" not in lines[j] or "stash(" not in lines[j]:
            j += 1
        fwd_names, fwd_types = parse_stash(lines[j])
        mem_b = sum(tensor_bytes(t) for n, t in zip(fwd_names, fwd_types)
                    if n not in params)
        while "backward_input {" not in lines[j]:
            j += 1
        b_args = block_args(lines[j + 1])
        # B's first arguments receive the forward stash, in order.
        param_args = {a for a, v in zip(b_args, fwd_names) if v in params}
        while not lines[j].strip().startswith("pipe.yield"):
            j += 1
        w_names, w_types = parse_stash(lines[j])
        mem_w = sum(tensor_bytes(t) for n, t in zip(w_names, w_types)
                    if n not in param_args)
        assert int(attrs["mem_b"]) == mem_b, (m.group(1), attrs, mem_b)
        assert int(attrs["mem_w"]) == mem_w, (m.group(1), attrs, mem_w)
        assert mem_b > 0
        checked += 1
    assert checked == stages * (4 // stages)
