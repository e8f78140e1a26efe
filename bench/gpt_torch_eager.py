#!/usr/bin/env python3
"""Time one training step of examples/gpt.mlir's model in PyTorch eager mode.

The same model as examples/gpt.mlir (vocabulary 64, context 16, width 32,
2 heads, 4 pre-LayerNorm blocks with a 128-wide exact-GELU MLP, untied LM
head, microbatches of 2 sequences): forward, backward and an SGD update over
--microbatches microbatches. Prints "torch-eager-step-ms <ms>". Used by
bench/gpu_check.sh next to the compiled model's step time; exits with status
2 when PyTorch or a CUDA device is missing.
"""

import argparse
import sys
import time

V, T, D, H, L, F, B = 64, 16, 32, 2, 4, 128, 2


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    try:
        import torch
        import torch.nn.functional as fn
    except ImportError:
        print("PyTorch is not installed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    gen = torch.Generator(device="cpu").manual_seed(0)

    def param(*shape, scale=0.02):
        t = torch.randn(*shape, generator=gen) * scale
        return t.to(dev).requires_grad_()

    params = {"wte": param(V, D), "wpe": param(T, D)}
    for i in range(L):
        for name, shape in [("ln1_w", (D,)), ("ln1_b", (D,)), ("wq", (D, D)),
                            ("wk", (D, D)), ("wv", (D, D)), ("wo", (D, D)),
                            ("bo", (D,)), ("ln2_w", (D,)), ("ln2_b", (D,)),
                            ("wfc", (D, F)), ("bfc", (F,)), ("wp2", (F, D)),
                            ("bp2", (D,))]:
            params[f"{name}{i}"] = param(*shape)
    params.update(lnf_w=param(D), lnf_b=param(D), head=param(D, V))
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=dev), 1)

    def loss_fn(tokens, targets):
        p = params
        x = (p["wte"][tokens] + p["wpe"]).reshape(B * T, D)
        for i in range(L):
            a = fn.layer_norm(x, (D,), p[f"ln1_w{i}"], p[f"ln1_b{i}"], 1e-5)

            def heads(t):
                return t.reshape(B, T, H, D // H).transpose(1, 2)

            q, k, v = (heads(a @ p[f"{w}{i}"]) for w in ("wq", "wk", "wv"))
            s = (q @ k.transpose(-1, -2)) / (D // H) ** 0.5
            s = s.masked_fill(mask, float("-inf")).softmax(-1)
            o = (s @ v).transpose(1, 2).reshape(B * T, D)
            x = x + o @ p[f"wo{i}"] + p[f"bo{i}"]
            m = fn.layer_norm(x, (D,), p[f"ln2_w{i}"], p[f"ln2_b{i}"], 1e-5)
            m = fn.gelu(m @ p[f"wfc{i}"] + p[f"bfc{i}"])
            x = x + m @ p[f"wp2{i}"] + p[f"bp2{i}"]
        x = fn.layer_norm(x, (D,), p["lnf_w"], p["lnf_b"], 1e-5)
        return fn.cross_entropy(x @ p["head"], targets.reshape(-1))

    data = [(torch.randint(0, V, (B, T), generator=gen).to(dev),
             torch.randint(0, V, (B, T), generator=gen).to(dev))
            for _ in range(args.microbatches)]

    def step():
        for t in params.values():
            t.grad = None
        for tokens, targets in data:
            (loss_fn(tokens, targets) / len(data)).backward()
        with torch.no_grad():
            for t in params.values():
                t -= 0.01 * t.grad

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - start) / args.steps * 1e3
    print(f"torch-eager-step-ms {ms:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
