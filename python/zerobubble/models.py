"""Example models in PyTorch, written once for the frontend, the tests and
the peer benchmark.

Both return the scalar loss of one microbatch from ``forward`` and mark
their pipeline stage boundaries with :func:`zerobubble.pipe_cut`
(``stages`` equal parts, at layer or block boundaries). ``split(n)``
returns the same model as ``n`` stage modules for
``torch.distributed.pipelining`` (stage 0 takes the data, the last returns
the logits for ``loss_fn``); the stage modules share the model's
parameters.

- :class:`MLP`: ``examples/mlp.mlir`` in PyTorch by default (16 features,
  hidden layers of 32, 10 classes, ReLU, mean cross-entropy; 8 samples).
- :class:`GPT`: ``examples/gpt.mlir`` in PyTorch by default (vocabulary 64,
  context 16, width 32, 2 heads, 4 pre-LayerNorm blocks with a 128-wide
  GELU MLP, final LayerNorm, untied LM head; 2 sequences).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from .frontend import pipe_cut


def _boundaries(layers, stages):
    """The layer indices after which each of ``stages`` equal parts of
    ``layers`` layers ends (all but the last part)."""
    if not 1 <= stages <= layers:
        raise ValueError(f"cannot cut {layers} layers into {stages} stages")
    return {round(layers * i / stages) - 1 for i in range(1, stages)}


def _parts(layers, stages):
    ends = sorted(_boundaries(layers, stages)) + [layers - 1]
    starts = [0] + [e + 1 for e in ends[:-1]]
    return list(zip(starts, [e + 1 for e in ends]))


class MLP(nn.Module):
    """``sizes[0]`` features through ReLU layers to ``sizes[-1]`` classes;
    the loss is the mean softmax cross-entropy."""

    def __init__(self, sizes=(16, 32, 32, 10), stages=1, batch=8):
        super().__init__()
        self.sizes = tuple(sizes)
        self.batch = batch
        self.layers = nn.ModuleList(
            nn.Linear(a, b) for a, b in zip(self.sizes, self.sizes[1:]))
        self.cuts = _boundaries(len(self.layers), stages)

    def run_layers(self, x, start, stop, cut=False):
        for i in range(start, stop):
            x = self.layers[i](x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
            if cut and i in self.cuts:
                x = pipe_cut(x)
        return x

    def forward(self, x, labels):
        return self.loss_fn(self.run_layers(x, 0, len(self.layers), True),
                            labels)

    @staticmethod
    def loss_fn(logits, labels):
        return F.cross_entropy(logits, labels)

    def example_inputs(self, generator=None):
        """One microbatch: (features [batch, in], labels [batch])."""
        return (torch.randn(self.batch, self.sizes[0], generator=generator),
                torch.randint(0, self.sizes[-1], (self.batch,),
                              generator=generator))

    def split(self, stages):
        return [_MLPStage(self, a, b) for a, b in _parts(len(self.layers),
                                                         stages)]


class _MLPStage(nn.Module):
    def __init__(self, model, start, stop):
        super().__init__()
        self.start, self.stop = start, stop
        self.model = [model]
        self.layers = nn.ModuleList(model.layers[start:stop])

    def forward(self, x):
        return self.model[0].run_layers(x, self.start, self.stop)


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(width, width, bias=False)
        self.k = nn.Linear(width, width, bias=False)
        self.v = nn.Linear(width, width, bias=False)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        h = self.heads

        def heads(y):
            return y.view(b, t, h, c // h).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // h))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class FeedForward(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.fc = nn.Linear(width, hidden)
        self.proj = nn.Linear(hidden, width)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """A pre-LayerNorm transformer block."""

    def __init__(self, width, heads, hidden):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = FeedForward(width, hidden)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A GPT-style decoder language model; the loss is the mean next-token
    cross-entropy over all positions (targets given)."""

    def __init__(self, vocab=64, context=16, width=32, heads=2, layers=4,
                 hidden=128, stages=1, batch=2):
        super().__init__()
        self.vocab, self.context, self.batch = vocab, context, batch
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.h = nn.ModuleList(Block(width, heads, hidden)
                               for _ in range(layers))
        self.lnf = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.cuts = _boundaries(layers, stages)

    def embed(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.wte(tokens) + self.wpe(positions)

    def run_blocks(self, x, start, stop, cut=False):
        for i in range(start, stop):
            x = self.h[i](x)
            if cut and i in self.cuts:
                x = pipe_cut(x)
        return x

    def head(self, x):
        return self.lm_head(self.lnf(x))

    def forward(self, tokens, targets):
        x = self.run_blocks(self.embed(tokens), 0, len(self.h), True)
        return self.loss_fn(self.head(x), targets)

    @staticmethod
    def loss_fn(logits, targets):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               targets.reshape(-1))

    def example_inputs(self, generator=None):
        """One microbatch: (tokens, targets), each [batch, context]."""
        shape = (self.batch, self.context)
        return (torch.randint(0, self.vocab, shape, generator=generator),
                torch.randint(0, self.vocab, shape, generator=generator))

    def split(self, stages):
        parts = _parts(len(self.h), stages)
        return [_GPTStage(self, a, b, i == 0, i == len(parts) - 1)
                for i, (a, b) in enumerate(parts)]


class _GPTStage(nn.Module):
    def __init__(self, model, start, stop, first, last):
        super().__init__()
        self.start, self.stop = start, stop
        self.model = [model]
        self.h = nn.ModuleList(model.h[start:stop])
        if first:
            self.wte, self.wpe = model.wte, model.wpe
        if last:
            self.lnf, self.lm_head = model.lnf, model.lm_head
        self.first, self.last = first, last

    def forward(self, x):
        model = self.model[0]
        if self.first:
            x = model.embed(x)
        x = model.run_blocks(x, self.start, self.stop)
        return model.head(x) if self.last else x
