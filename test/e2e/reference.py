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
# examples/moe.mlir: 16 -> 32 (ReLU) -> 4 experts 32 -> 64 -> 32, top 1,
# added back -> 10 classes, microbatch of 8 samples
# --------------------------------------------------------------------------

MOE_EXPERTS = 4
MOE_PARAM_SHAPES = {
    "l1.weight": (16, 32),
    "l1.bias": (32,),
    "router.weight": (32, MOE_EXPERTS),
    "experts.up": (MOE_EXPERTS, 32, 64),
    "experts.down": (MOE_EXPERTS, 64, 32),
    "head.weight": (32, 10),
    "head.bias": (10,),
}
MOE_DATA = [("arg0", (8, 16), np.float32), ("arg1", (8,), np.int64)]


def moe_forward(params, x):
    """examples/moe.mlir's values up to the logits, for its backward."""
    p = {k: _f64(v) for k, v in params.items()}
    v = {"z1": _f64(x) @ p["l1.weight"] + p["l1.bias"]}
    v["h1"] = np.maximum(v["z1"], 0.0)
    route = v["h1"] @ p["router.weight"]
    v["group"] = route.argmax(axis=1)  # the first of the largest
    v["probs"] = softmax(route, axis=1)
    rows = np.arange(route.shape[0])
    v["weight"] = v["probs"][rows, v["group"]]
    up, down = p["experts.up"][v["group"]], p["experts.down"][v["group"]]
    v["hidden"] = np.einsum("rk,rkn->rn", v["h1"], up)
    v["act"] = np.maximum(v["hidden"], 0.0)
    v["out"] = np.einsum("rk,rkn->rn", v["act"], down)
    v["h2"] = v["h1"] + v["weight"][:, None] * v["out"]
    v["logits"] = v["h2"] @ p["head.weight"] + p["head.bias"]
    return p, v


def moe_loss(params, x, labels):
    """examples/moe.mlir for one microbatch: x [8, 16] float, labels [8] ints
    in [0, 10)."""
    return cross_entropy(moe_forward(params, x)[1]["logits"], labels)


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
# Hand-derived backward passes (float64)
#
# Each *_grads function returns, for ONE microbatch, the gradient of that
# microbatch's loss with respect to every parameter, keyed by parameter name
# (float64 arrays shaped like the parameters). The gradient of a step is the
# mean over its microbatches; see ``mean_grads``. The derivations are written
# out by hand (no autodiff) and are themselves checked against central finite
# differences of the *_loss functions in test_grads.py.
# --------------------------------------------------------------------------


def mean_grads(grads_fn, params, microbatches):
    """Gradient of a step: the mean over microbatches of
    ``grads_fn(params, *mb)``."""
    total = None
    for mb in microbatches:
        g = grads_fn(params, *mb)
        if total is None:
            total = {k: v.copy() for k, v in g.items()}
        else:
            for k, v in g.items():
                total[k] += v
    return {k: v / len(microbatches) for k, v in total.items()}


def cross_entropy_backward(logits, targets):
    """d cross_entropy(logits, targets) / d logits: (softmax - onehot) / N."""
    logits = _f64(logits)
    targets = np.asarray(targets).astype(np.int64)
    n = logits.shape[0]
    d = softmax(logits, axis=1)
    d[np.arange(n), targets] -= 1.0
    return d / n


def dense_backward(x, w, dy):
    """y = x @ w (+ b), x [N, in], w [in, out]: returns (dx, dw, db)."""
    return dy @ w.T, x.T @ dy, dy.sum(axis=0)


def mlp_grads(params, x, labels):
    """Gradients of mlp_loss(params, x, labels) (one microbatch)."""
    p = {k: _f64(v) for k, v in params.items()}
    x = _f64(x)
    z1 = x @ p["l1.weight"] + p["l1.bias"]
    h1 = np.maximum(z1, 0.0)
    z2 = h1 @ p["l2.weight"] + p["l2.bias"]
    h2 = np.maximum(z2, 0.0)
    logits = h2 @ p["l3.weight"] + p["l3.bias"]

    g = {}
    dlogits = cross_entropy_backward(logits, labels)
    dh2, g["l3.weight"], g["l3.bias"] = dense_backward(h2, p["l3.weight"],
                                                       dlogits)
    dz2 = dh2 * (z2 > 0)  # ReLU: the derivative at exactly 0 is taken as 0
    dh1, g["l2.weight"], g["l2.bias"] = dense_backward(h1, p["l2.weight"], dz2)
    dz1 = dh1 * (z1 > 0)
    _, g["l1.weight"], g["l1.bias"] = dense_backward(x, p["l1.weight"], dz1)
    return g


def moe_grads(params, x, labels):
    """Gradients of moe_loss(params, x, labels) (one microbatch). The
    routing (argmax) is piecewise constant: no gradient through it."""
    p, v = moe_forward(params, x)
    g = {}
    dlogits = cross_entropy_backward(v["logits"], labels)
    dh2, g["head.weight"], g["head.bias"] = dense_backward(
        v["h2"], p["head.weight"], dlogits)
    dh1 = dh2.copy()  # the residual
    dweight = (dh2 * v["out"]).sum(axis=1)
    dout = v["weight"][:, None] * dh2
    group = v["group"]
    up, down = p["experts.up"][group], p["experts.down"][group]
    g["experts.down"] = np.zeros_like(p["experts.down"])
    np.add.at(g["experts.down"], group,
              np.einsum("rk,rn->rkn", v["act"], dout))
    dhidden = np.einsum("rn,rkn->rk", dout, down) * (v["hidden"] > 0)
    g["experts.up"] = np.zeros_like(p["experts.up"])
    np.add.at(g["experts.up"], group,
              np.einsum("rk,rn->rkn", v["h1"], dhidden))
    dh1 += np.einsum("rn,rkn->rk", dhidden, up)
    # The weight is the chosen expert's probability: softmax's backward.
    dprobs = np.zeros_like(v["probs"])
    dprobs[np.arange(len(group)), group] = dweight
    droute = v["probs"] * (dprobs - (dprobs * v["probs"]).sum(
        axis=1, keepdims=True))
    g["router.weight"] = v["h1"].T @ droute
    dh1 += droute @ p["router.weight"].T
    dz1 = dh1 * (v["z1"] > 0)
    _, g["l1.weight"], g["l1.bias"] = dense_backward(_f64(x),
                                                     p["l1.weight"], dz1)
    return g


def layer_norm_forward(x, w, b, eps=LN_EPS):
    """layer_norm with the values its backward needs: (y, xhat, rstd)."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - mean) * rstd
    return xhat * w + b, xhat, rstd


def layer_norm_backward(dy, xhat, rstd, w):
    """y = xhat * w + b with xhat = (x - mean) * rstd over the last dim of
    [N, d] rows: returns (dx, dw, db).

    dxhat = dy * w; since xhat depends on x through the mean and the biased
    variance, dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
    """
    dxhat = dy * w
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                 - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)


def gelu_backward(u, dy):
    """d gelu(u) = 0.5 (1 + erf(u / sqrt 2)) + u * exp(-u^2 / 2) / sqrt(2 pi)."""
    cdf = 0.5 * (1.0 + _erf(u / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)
    return dy * (cdf + u * pdf)


def causal_attention_forward(a, wq, wk, wv, n_heads=GPT_H):
    """causal_attention with the values its backward needs."""
    B, T, d = a.shape
    dh = d // n_heads

    def split(t):  # [B, T, d] -> [B, H, T, dh]
        return t.reshape(B, T, n_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(a @ wq), split(a @ wk), split(a @ wv)
    scale = 1.0 / math.sqrt(dh)
    scores = q @ k.transpose(0, 1, 3, 2) * scale
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    scores = np.where(future, -np.inf, scores)
    prob = softmax(scores, axis=-1)
    o = prob @ v
    out = o.transpose(0, 2, 1, 3).reshape(B, T, d)
    return out, (q, k, v, prob, scale)


def causal_attention_backward(dout, a, wq, wk, wv, saved, n_heads=GPT_H):
    """Backward of causal_attention for dout [B, T, d]: returns
    (da, dwq, dwk, dwv). Masked scores have probability 0, so they get no
    gradient through the softmax."""
    q, k, v, prob, scale = saved
    B, T, d = a.shape
    dh = d // n_heads

    def merge(t):  # [B, H, T, dh] -> [B*T, d]
        return t.transpose(0, 2, 1, 3).reshape(B * T, d)

    do = dout.reshape(B, T, n_heads, dh).transpose(0, 2, 1, 3)
    dprob = do @ v.transpose(0, 1, 3, 2)            # [B, H, T, T]
    dv = prob.transpose(0, 1, 3, 2) @ do            # [B, H, T, dh]
    # Softmax along the keys: ds = p * (dp - sum_j dp * p).
    dscores = prob * (dprob - (dprob * prob).sum(axis=-1, keepdims=True))
    dq = dscores @ k * scale
    dk = dscores.transpose(0, 1, 3, 2) @ q * scale
    a2 = a.reshape(B * T, d)
    dq, dk, dv = merge(dq), merge(dk), merge(dv)
    da = dq @ wq.T + dk @ wk.T + dv @ wv.T
    return da.reshape(B, T, d), a2.T @ dq, a2.T @ dk, a2.T @ dv


def gpt_grads(params, tokens, targets):
    """Gradients of gpt_loss(params, tokens, targets) (one microbatch)."""
    p = {k: _f64(v) for k, v in params.items()}
    tokens = np.asarray(tokens).astype(np.int64)
    B, T = tokens.shape
    d = p["wte"].shape[1]
    N = B * T

    # Forward, keeping what the backward needs. The residual stream is kept
    # as [N, d] rows for the dense layers and [B, T, d] for attention.
    x = (p["wte"][tokens] + p["wpe"][:T]).reshape(N, d)
    saved = []
    for i in range(GPT_LAYERS):
        h = f"h{i}."
        a, a_hat, a_rstd = layer_norm_forward(x, p[h + "ln1.weight"],
                                              p[h + "ln1.bias"])
        o, att = causal_attention_forward(
            a.reshape(B, T, d), p[h + "attn.q.weight"],
            p[h + "attn.k.weight"], p[h + "attn.v.weight"])
        o = o.reshape(N, d)
        x = x + o @ p[h + "attn.proj.weight"] + p[h + "attn.proj.bias"]
        c, c_hat, c_rstd = layer_norm_forward(x, p[h + "ln2.weight"],
                                              p[h + "ln2.bias"])
        u = c @ p[h + "mlp.fc.weight"] + p[h + "mlp.fc.bias"]
        f = gelu(u)
        x = x + f @ p[h + "mlp.proj.weight"] + p[h + "mlp.proj.bias"]
        saved.append((a, a_hat, a_rstd, att, o, c, c_hat, c_rstd, u, f))
    xf, xf_hat, xf_rstd = layer_norm_forward(x, p["lnf.weight"], p["lnf.bias"])
    logits = xf @ p["lm_head.weight"]

    # Backward.
    g = {}
    dlogits = cross_entropy_backward(logits, np.asarray(targets).reshape(-1))
    g["lm_head.weight"] = xf.T @ dlogits
    dxf = dlogits @ p["lm_head.weight"].T
    dx, g["lnf.weight"], g["lnf.bias"] = layer_norm_backward(
        dxf, xf_hat, xf_rstd, p["lnf.weight"])
    for i in reversed(range(GPT_LAYERS)):
        h = f"h{i}."
        a, a_hat, a_rstd, att, o, c, c_hat, c_rstd, u, f = saved[i]
        # x = mid + f @ Wproj2 + bproj2: the residual passes dx through.
        df, g[h + "mlp.proj.weight"], g[h + "mlp.proj.bias"] = dense_backward(
            f, p[h + "mlp.proj.weight"], dx)
        du = gelu_backward(u, df)
        dc, g[h + "mlp.fc.weight"], g[h + "mlp.fc.bias"] = dense_backward(
            c, p[h + "mlp.fc.weight"], du)
        dmid, g[h + "ln2.weight"], g[h + "ln2.bias"] = layer_norm_backward(
            dc, c_hat, c_rstd, p[h + "ln2.weight"])
        dx = dx + dmid
        # mid = x + o @ Wproj + bproj.
        do, g[h + "attn.proj.weight"], g[h + "attn.proj.bias"] = dense_backward(
            o, p[h + "attn.proj.weight"], dx)
        da, g[h + "attn.q.weight"], g[h + "attn.k.weight"], \
            g[h + "attn.v.weight"] = causal_attention_backward(
                do.reshape(B, T, d), a.reshape(B, T, d),
                p[h + "attn.q.weight"], p[h + "attn.k.weight"],
                p[h + "attn.v.weight"], att)
        dxa, g[h + "ln1.weight"], g[h + "ln1.bias"] = layer_norm_backward(
            da.reshape(N, d), a_hat, a_rstd, p[h + "ln1.weight"])
        dx = dx + dxa

    # Embedding: x0[b, t] = wte[tokens[b, t]] + wpe[t]; a token that occurs
    # several times accumulates (scatter-add).
    dx = dx.reshape(B, T, d)
    g["wte"] = np.zeros_like(p["wte"])
    np.add.at(g["wte"], tokens.reshape(-1), dx.reshape(N, d))
    g["wpe"] = np.zeros_like(p["wpe"])
    g["wpe"][:T] = dx.sum(axis=0)
    return g


# --------------------------------------------------------------------------
# Synthetic data
# --------------------------------------------------------------------------


def synthetic_inputs(name, rng, microbatches):
    """Random data for ``microbatches`` microbatches of model ``name``
    ("mlp", "gpt" or "moe"): a dict keyed as zb-run's --inputs expects, each array
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
    if name == "moe":
        (kx, sx, _), (kl, sl, _) = MOE_DATA
        return {
            kx: rng.standard_normal((M, *sx)).astype(np.float32),
            kl: rng.integers(0, MLP_CLASSES, size=(M, *sl), dtype=np.int64),
        }
    raise ValueError(f"unknown model {name!r}")
