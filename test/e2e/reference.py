"""NumPy references for the example models in examples/.

Each ``*_loss`` function computes, for ONE microbatch, exactly what the
corresponding examples/*.mlir function computes: same parameter names (the
``zb.param`` attributes), same layouts (weights are [in, out], y = x @ W + b),
same formulas. Arithmetic is done in float64, so the compiled float32 model
should match to float32 rounding (about 1e-6 relative on these sizes).

A step over M microbatches has loss = mean of the M microbatch losses; see
``mean_loss``.
"""

import math

import numpy as np

# --------------------------------------------------------------------------
# Shared pieces
# --------------------------------------------------------------------------


def _f64(a):
    return np.asarray(a, dtype=np.float64)


def cross_entropy(logits, targets):
    """Mean softmax cross-entropy of ``logits`` [N, C] against class ids
    ``targets`` [N]: mean(log(sum(exp(l - max))) + max - l[target])."""
    logits = _f64(logits)
    targets = np.asarray(targets).astype(np.int64)
    mx = logits.max(axis=1)
    lse = np.log(np.exp(logits - mx[:, None]).sum(axis=1)) + mx
    picked = logits[np.arange(logits.shape[0]), targets]
    return float(np.mean(lse - picked))


def mean_loss(loss_fn, params, microbatches):
    """Loss of a step: the mean over microbatches of ``loss_fn(params, *mb)``.

    ``microbatches`` is a sequence of argument tuples, one per microbatch.
    """
    losses = [loss_fn(params, *mb) for mb in microbatches]
    return float(np.mean(losses))


# --------------------------------------------------------------------------
# examples/mlp.mlir: 16 -> 32 -> 32 -> 10, ReLU, microbatch of 8 samples
# --------------------------------------------------------------------------

MLP_PARAM_SHAPES = {
    "l1.weight": (16, 32),
    "l1.bias": (32,),
    "l2.weight": (32, 32),
    "l2.bias": (32,),
    "l3.weight": (32, 10),
    "l3.bias": (10,),
}

# Data arguments in signature order: (key in an inputs .npz, shape, dtype).
# mlp.mlir's data args carry no zb.data name, so they are keyed by position.
MLP_DATA = [("arg0", (8, 16), np.float32), ("arg1", (8,), np.int64)]
MLP_CLASSES = 10


def mlp_loss(params, x, labels):
    """examples/mlp.mlir for one microbatch: x [8, 16] float, labels [8] ints
    in [0, 10)."""
    p = {k: _f64(v) for k, v in params.items()}
    h1 = np.maximum(_f64(x) @ p["l1.weight"] + p["l1.bias"], 0.0)
    h2 = np.maximum(h1 @ p["l2.weight"] + p["l2.bias"], 0.0)
    logits = h2 @ p["l3.weight"] + p["l3.bias"]
    return cross_entropy(logits, labels)


# --------------------------------------------------------------------------
# examples/gpt.mlir: GPT decoder, B=2 sequences of T=16 tokens per microbatch
# --------------------------------------------------------------------------

GPT_B, GPT_T, GPT_V, GPT_D, GPT_H, GPT_LAYERS, GPT_FF = 2, 16, 64, 32, 2, 4, 128
GPT_DH = GPT_D // GPT_H
LN_EPS = 1e-5


def _gpt_param_shapes():
    shapes = {"wte": (GPT_V, GPT_D), "wpe": (GPT_T, GPT_D)}
    for i in range(GPT_LAYERS):
        h = f"h{i}."
        shapes.update({
            h + "ln1.weight": (GPT_D,),
            h + "ln1.bias": (GPT_D,),
            h + "attn.q.weight": (GPT_D, GPT_D),
            h + "attn.k.weight": (GPT_D, GPT_D),
            h + "attn.v.weight": (GPT_D, GPT_D),
            h + "attn.proj.weight": (GPT_D, GPT_D),
            h + "attn.proj.bias": (GPT_D,),
            h + "ln2.weight": (GPT_D,),
            h + "ln2.bias": (GPT_D,),
            h + "mlp.fc.weight": (GPT_D, GPT_FF),
            h + "mlp.fc.bias": (GPT_FF,),
            h + "mlp.proj.weight": (GPT_FF, GPT_D),
            h + "mlp.proj.bias": (GPT_D,),
        })
    shapes.update({
        "lnf.weight": (GPT_D,),
        "lnf.bias": (GPT_D,),
        "lm_head.weight": (GPT_D, GPT_V),
    })
    return shapes


# Parameter name -> shape, in signature order.
GPT_PARAM_SHAPES = _gpt_param_shapes()

# Data arguments in signature order: (zb.data name, shape, dtype).
GPT_DATA = [("tokens", (GPT_B, GPT_T), np.int64),
            ("targets", (GPT_B, GPT_T), np.int64)]

_erf = np.vectorize(math.erf, otypes=[np.float64])


def layer_norm(x, w, b, eps=LN_EPS):
    """LayerNorm over the last dim with the biased variance."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def gelu(x):
    """Exact GELU: 0.5 x (1 + erf(x / sqrt(2)))."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def causal_attention(a, wq, wk, wv, n_heads=GPT_H):
    """Multi-head causal self-attention of ``a`` [B, T, d] (no output
    projection): per head softmax(mask(q k^T / sqrt(dh))) v, heads
    concatenated back to [B, T, d]."""
    B, T, d = a.shape
    dh = d // n_heads

    def split(t):  # [B, T, d] -> [B, H, T, dh]
        return t.reshape(B, T, n_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(a @ wq), split(a @ wk), split(a @ wv)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    future = np.triu(np.ones((T, T), dtype=bool), k=1)  # key j > query i
    scores = np.where(future, -np.inf, scores)
    o = softmax(scores, axis=-1) @ v  # [B, H, T, dh]
    return o.transpose(0, 2, 1, 3).reshape(B, T, d)


def gpt_logits(params, tokens):
    """Logits [B, T, V] of examples/gpt.mlir's decoder."""
    p = {k: _f64(v) for k, v in params.items()}
    tokens = np.asarray(tokens).astype(np.int64)
    T = tokens.shape[1]
    x = p["wte"][tokens] + p["wpe"][:T]  # [B, T, d]
    for i in range(GPT_LAYERS):
        h = f"h{i}."
        a = layer_norm(x, p[h + "ln1.weight"], p[h + "ln1.bias"])
        o = causal_attention(a, p[h + "attn.q.weight"], p[h + "attn.k.weight"],
                             p[h + "attn.v.weight"])
        x = x + o @ p[h + "attn.proj.weight"] + p[h + "attn.proj.bias"]
        c = layer_norm(x, p[h + "ln2.weight"], p[h + "ln2.bias"])
        f = gelu(c @ p[h + "mlp.fc.weight"] + p[h + "mlp.fc.bias"])
        x = x + f @ p[h + "mlp.proj.weight"] + p[h + "mlp.proj.bias"]
    x = layer_norm(x, p["lnf.weight"], p["lnf.bias"])
    return x @ p["lm_head.weight"]


def gpt_loss(params, tokens, targets):
    """examples/gpt.mlir for one microbatch: tokens, targets [2, 16] ints in
    [0, 64); the loss is the mean cross-entropy over all B*T positions."""
    logits = gpt_logits(params, tokens)
    targets = np.asarray(targets)
    return cross_entropy(logits.reshape(-1, logits.shape[-1]),
                         targets.reshape(-1))


# --------------------------------------------------------------------------
# Synthetic data
# --------------------------------------------------------------------------


def synthetic_inputs(name, rng, microbatches):
    """Random data for ``microbatches`` microbatches of model ``name``
    ("mlp" or "gpt"): a dict keyed as zb-run's --inputs expects, each array
    stacked along a new leading microbatch dim ([M, *shape])."""
    M = microbatches
    if name == "mlp":
        (kx, sx, _), (kl, sl, _) = MLP_DATA
        return {
            kx: rng.standard_normal((M, *sx)).astype(np.float32),
            kl: rng.integers(0, MLP_CLASSES, size=(M, *sl), dtype=np.int64),
        }
    if name == "gpt":
        return {key: rng.integers(0, GPT_V, size=(M, *shape), dtype=np.int64)
                for key, shape, _ in GPT_DATA}
    raise ValueError(f"unknown model {name!r}")
