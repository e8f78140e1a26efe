"""Batch norm's running statistics through ``from_torch``: a training-mode
batch norm records its batch mean and unbiased variance
(``pipe.running_stat``), zb-run folds them into ``running_mean`` and
``running_var`` after each step, microbatch by microbatch, and returns them
with the trained parameters (``RunResult.buffers``).

The reference is PyTorch training the same model on the same microbatches
one after the other (what its pipelining does) with the same optimizer, in
float64: its buffers after three SGD steps, on one process, on two ranks
with ZB-H1 and with ZB-V (two chunks per rank), and with two replicas,
where the buffers are replica 0's (DDP keeps rank 0's). Each batch norm's
``num_batches_tracked`` counts the training forwards, as in PyTorch.
"""

import copy

import numpy as np
import pytest

from zb_testing import assert_close, require

torch = require("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import zerobubble as zb  # noqa: E402

RTOL = 1e-4
STEPS = 3
LR = 0.05


class SmallCNN(nn.Module):
    """conv -> BN -> ReLU [cut] conv -> BN -> ReLU [cut] pool -> linear,
    cross entropy; `cuts` markers (0 to 3)."""

    def __init__(self, cuts=1):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 6, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(6, momentum=0.3)
        self.head = nn.Linear(6, 5)
        self.cuts = cuts

    def cut(self, h, i):
        return zb.pipe_cut(h) if i < self.cuts else h

    def forward(self, x, y):
        h = self.cut(F.relu(self.bn1(self.conv1(x))), 0)
        h = self.cut(F.relu(self.bn2(self.conv2(h))), 1)
        h = self.cut(h.mean(dim=(2, 3)), 2)
        return F.cross_entropy(self.head(h), y)


def data(steps, count, seed=3):
    gen = torch.Generator().manual_seed(seed)
    return [[(torch.randn(2, 3, 6, 6, generator=gen) * 2 + 1,
              torch.randint(0, 5, (2,), generator=gen))
             for _ in range(count)] for _ in range(steps)]


def torch_buffers(model, steps_data, microbatches):
    """SGD in float64 over each step's microbatches in order; the running
    statistics follow the first `microbatches` of each step only (replica
    0's), the others' forwards leave them as they were."""
    model = copy.deepcopy(model).double().train()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for batches in steps_data:
        opt.zero_grad()
        for i, (x, y) in enumerate(batches):
            saved = copy.deepcopy(dict(model.named_buffers()))
            (model(x.double(), y) / len(batches)).backward()
            if i >= microbatches:
                for name, value in model.named_buffers():
                    value.copy_(saved[name])
        opt.step()
    return ({n: b.detach().numpy() for n, b in model.named_buffers()},
            {n: p.detach().numpy() for n, p in model.named_parameters()})


def test_program_records_running_stats():
    torch.manual_seed(0)
    model = SmallCNN()
    program = zb.from_torch(model, data(1, 1)[0][0])
    assert sorted(program.buffers) == ["bn1.running_mean", "bn1.running_var",
                                       "bn2.running_mean", "bn2.running_var"]
    assert program.mlir.count("pipe.running_stat") == 4
    assert 'buffer = "bn2.running_var", init = 1.0 : f64, momentum = 0.3' \
        in program.mlir
    assert sorted(program.counters) == ["bn1.num_batches_tracked",
                                        "bn2.num_batches_tracked"]
    # In eval mode the running statistics are constants: nothing to keep.
    evaluated = zb.from_torch(copy.deepcopy(model).eval(),
                              data(1, 1)[0][0])
    assert evaluated.buffers == {} and "running_stat" not in evaluated.mlir
    assert evaluated.counters == {}


def test_module_called_twice_is_refused():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(4)

        def forward(self, x):
            return self.bn(self.bn(x)).sum()

    with pytest.raises(zb.FrontendError, match="'bn.running_mean' is "
                       "updated twice in one forward"):
        zb.from_torch(Twice().train(), (torch.randn(3, 4),))


@pytest.mark.parametrize("ranks,replicas,schedule,chunks,cuts", [
    (1, 1, "zb-h1", None, 1), (2, 1, "zb-h1", None, 1),
    (2, 1, "zb-v", 2, 3), (1, 2, "zb-h1", None, 1)],
    ids=["P1", "P2-zb-h1", "P2-zb-v", "P1xD2"])
def test_buffers_match_torch(ranks, replicas, schedule, chunks, cuts):
    torch.manual_seed(0)
    model = SmallCNN(cuts=cuts).train()
    steps_data = data(STEPS, 2 * replicas)
    program = zb.from_torch(model, steps_data[0][0])
    ref_buffers, ref_params = torch_buffers(model, steps_data, 2)
    result = zb.run(program, ranks=ranks, replicas=replicas,
                    schedule=schedule, chunks=chunks, microbatches=2,
                    steps=STEPS, optimizer="sgd", lr=LR, inputs=steps_data)
    assert sorted(result.buffers) == sorted(ref_buffers)
    for name, value in ref_buffers.items():
        if name.endswith("num_batches_tracked"):
            # One per forward of replica 0: steps x microbatches.
            assert int(result.buffers[name]) == int(value) == STEPS * 2, name
        else:
            assert_close(name, result.buffers[name], value, RTOL)
    for name, value in ref_params.items():
        assert_close(name, result.params[name], value, RTOL)
    # Not the initial values: every running statistic moved.
    for name, value in program.buffers.items():
        assert not np.allclose(result.buffers[name], value), name
