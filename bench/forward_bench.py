#!/usr/bin/env python3
"""Compiled forward vs NumPy, and the runtime gemm path vs direct OpenBLAS.

Runs ``zb-forward-bench`` (the compiled examples/mlp.mlir and
examples/gpt.mlir forwards, and zbrt_sgemm_batched against direct
cblas_sgemm) and, on the very parameters and data it used, the same forward
in NumPy float32, then prints one side-by-side table. Ratios above 1 mean the
compiled side is faster (NumPy/compiled) or that the runtime's gemm path is
slower than direct OpenBLAS (zbrt/OpenBLAS).

    python3 bench/forward_bench.py [--threads N] [--quick] [--repeats R]

The binary is looked up in $ZB_BIN_DIR (default: build/bin next to this
directory). OPENBLAS_NUM_THREADS is set to --threads (default 1) for both
sides: before NumPy is imported here, and in the benchmark's environment.
"""

import argparse
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1,
                   help="OpenBLAS threads for both sides (default 1)")
    p.add_argument("--repeats", type=int, default=11,
                   help="timed repeats; the median is reported (default 11)")
    p.add_argument("--min-time-ms", type=float, default=20.0,
                   help="minimum length of one timed repeat (default 20)")
    p.add_argument("--quick", action="store_true",
                   help="3 repeats of at least 5 ms (a smoke run)")
    p.add_argument("--bin-dir", default=os.environ.get(
        "ZB_BIN_DIR", os.path.join(ROOT, "build", "bin")),
        help="where zb-forward-bench is (default: $ZB_BIN_DIR or build/bin)")
    args = p.parse_args()
    if args.quick:
        args.repeats = min(args.repeats, 3)
        args.min_time_ms = min(args.min_time_ms, 5.0)
    return args


ARGS = parse_args()
# Must happen before NumPy (and its OpenBLAS) is loaded.
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)

import numpy as np  # noqa: E402

F32 = np.float32


# --------------------------------------------------------------------------
# NumPy float32 forwards: the same formulas as test/e2e/reference.py (which
# is float64), kept in float32 throughout.
# --------------------------------------------------------------------------


def cross_entropy(logits, targets):
    mx = logits.max(axis=1)
    lse = np.log(np.exp(logits - mx[:, None]).sum(axis=1)) + mx
    picked = logits[np.arange(logits.shape[0]), targets]
    return (lse - picked).mean()


def mlp_forward(p, x, labels):
    h1 = np.maximum(x @ p["l1.weight"] + p["l1.bias"], F32(0))
    h2 = np.maximum(h1 @ p["l2.weight"] + p["l2.bias"], F32(0))
    logits = h2 @ p["l3.weight"] + p["l3.bias"]
    return cross_entropy(logits, labels)


GPT_H, GPT_LAYERS, LN_EPS = 2, 4, F32(1e-5)


def erf(x):
    """erf in float32 with NumPy ufuncs (NumPy has none; SciPy is not a
    dependency): Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7, i.e. float32
    rounding. The float64 reference uses math.erf per element, which would
    time Python, not NumPy."""
    s = np.sign(x)
    a = np.abs(x)
    t = F32(1) / (F32(1) + F32(0.3275911) * a)
    y = t * (F32(0.254829592) + t * (F32(-0.284496736) + t * (
        F32(1.421413741) + t * (F32(-1.453152027) + t * F32(1.061405429)))))
    return s * (F32(1) - y * np.exp(-a * a))


def layer_norm(x, w, b):
    mean = x.mean(axis=-1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + LN_EPS) * w + b


def gelu(x):
    return F32(0.5) * x * (F32(1) + erf(x * F32(1 / math.sqrt(2.0))))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


_FUTURE = {}


def causal_attention(a, wq, wk, wv):
    B, T, d = a.shape
    dh = d // GPT_H
    future = _FUTURE.get(T)
    if future is None:  # a constant of the model, built once
        future = _FUTURE[T] = np.triu(np.ones((T, T), dtype=bool), k=1)

    def split(t):  # [B, T, d] -> [B, H, T, dh]
        return t.reshape(B, T, GPT_H, dh).transpose(0, 2, 1, 3)

    q, k, v = split(a @ wq), split(a @ wk), split(a @ wv)
    scores = q @ k.transpose(0, 1, 3, 2) * F32(1 / math.sqrt(dh))
    scores = np.where(future, F32(-np.inf), scores)
    o = softmax(scores) @ v
    return o.transpose(0, 2, 1, 3).reshape(B, T, d)


def gpt_forward(p, tokens, targets):
    T = tokens.shape[1]
    x = p["wte"][tokens] + p["wpe"][:T]
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
    logits = x @ p["lm_head.weight"]
    return cross_entropy(logits.reshape(-1, logits.shape[-1]),
                         targets.reshape(-1))


FORWARDS = {
    # model: (function, names of its data arguments in signature order)
    "mlp": (mlp_forward, ["arg0", "arg1"]),
    "gpt": (gpt_forward, ["tokens", "targets"]),
}


# --------------------------------------------------------------------------
# Timing and the BLAS NumPy uses
# --------------------------------------------------------------------------


def time_us(fn, repeats, min_time_ms):
    """Median over `repeats` of the per-call time (µs) of a loop calibrated
    to run at least `min_time_ms`, after a warm-up (as zb-forward-bench)."""
    import timeit
    timer = timeit.Timer(fn)
    timer.timeit(3)
    number = 1
    while True:
        t = timer.timeit(number)
        if t * 1e3 >= min_time_ms / 4:
            number = max(1, int(number * min_time_ms / max(t * 1e3, 1e-6)))
            break
        number *= 16 if t * 1e3 < min_time_ms / 64 else 2
    times = sorted(t / number * 1e6 for t in timer.repeat(repeats, number))
    return times[len(times) // 2]


def numpy_blas():
    """A line naming the BLAS NumPy is built with and its thread count."""
    name = "unknown BLAS"
    try:
        cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        name = f"{cfg.get('name', '?')} {cfg.get('version', '')}".strip()
    except Exception:  # older NumPy: no dict mode
        pass
    threads = "?"
    try:  # threadpoolctl, if it happens to be installed
        import threadpoolctl
        for info in threadpoolctl.threadpool_info():
            if info.get("user_api") == "blas":
                threads = info.get("num_threads")
                name += f" [{info.get('internal_api')} {info.get('version')}" \
                        f", {info.get('filepath')}]"
                break
    except ImportError:  # ask the bundled OpenBLAS through ctypes
        import ctypes
        import glob
        libs = glob.glob(os.path.join(os.path.dirname(np.__file__), "..",
                                      "numpy.libs", "*openblas*"))
        for path in libs:
            lib = ctypes.CDLL(path)
            for sym in ("scipy_openblas_get_num_threads64_",
                        "openblas_get_num_threads64_",
                        "openblas_get_num_threads"):
                if hasattr(lib, sym):
                    threads = getattr(lib, sym)()
                    break
            name += f" [{os.path.basename(path)}]"
            break
    return name, threads


# --------------------------------------------------------------------------


def run_bench(dump_dir):
    exe = os.path.join(ARGS.bin_dir, "zb-forward-bench")
    if not os.path.exists(exe):
        sys.exit(f"forward_bench.py: error: no '{exe}' (build the "
                 "zb-forward-bench target or set ZB_BIN_DIR)")
    cmd = [exe, "--examples", os.path.join(ROOT, "examples"), "--dump",
           dump_dir, "--tsv", "--threads", str(ARGS.threads), "--repeats",
           str(ARGS.repeats), "--min-time-ms", str(ARGS.min_time_ms)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env=os.environ).stdout
    rows = {"info": {}, "forward": {}, "gemm": [], "model-gemm": []}
    for line in out.splitlines():
        kind, *f = line.split("\t")
        if kind == "info":
            rows["info"][f[0]] = f[1]
        elif kind == "forward":
            rows["forward"][f[0]] = dict(us=float(f[1]), call_us=float(f[2]),
                                         loss=float(f[3]),
                                         compile_s=float(f[4]))
        elif kind == "gemm":
            rows["gemm"].append((f[0], f[1], *map(float, f[2:7])))
        elif kind == "model-gemm":
            rows["model-gemm"].append((f[0], f[1], float(f[2]), float(f[3]),
                                       float(f[4]), float(f[5])))
    return rows


def main():
    with tempfile.TemporaryDirectory(prefix="zb-forward-bench-") as dump:
        rows = run_bench(dump)
        data = {}
        for model in FORWARDS:
            params = dict(np.load(os.path.join(dump, f"{model}_params.npz")))
            inputs = dict(np.load(os.path.join(dump, f"{model}_inputs.npz")))
            data[model] = (params, inputs)

    blas_name, blas_threads = numpy_blas()
    print(f"threads: OPENBLAS_NUM_THREADS={ARGS.threads} for both sides "
          f"(zb-forward-bench: OpenBLAS reports "
          f"{rows['info'].get('threads')} thread(s); NumPy's BLAS reports "
          f"{blas_threads})")
    print(f"zbrt / zb-forward-bench BLAS: {rows['info'].get('blas')}")
    print(f"NumPy {np.__version__} BLAS: {blas_name}")
    print(f"timing: median of {ARGS.repeats} repeats, each >= "
          f"{ARGS.min_time_ms:g} ms, after a warm-up; both sides in this run; "
          "gemm ratios: median of per-repeat ratios of interleaved runs")
    print()

    print("Forward (one microbatch; examples/*.mlir vs NumPy float32 on the "
          "same parameters and data)")
    print(f"{'model':<6} {'compiled us':>12} {'callEntry us':>13} "
          f"{'NumPy us':>10} {'NumPy/compiled':>15}   loss compiled / NumPy")
    for model, (fn, data_names) in FORWARDS.items():
        params, inputs = data[model]
        args = [inputs[n] for n in data_names]
        loss_np = float(fn(params, *args))
        np_us = time_us(lambda: fn(params, *args), ARGS.repeats,
                        ARGS.min_time_ms)
        f = rows["forward"][model]
        print(f"{model:<6} {f['us']:12.2f} {f['call_us']:13.2f} "
              f"{np_us:10.2f} {np_us / f['us']:15.2f}   "
              f"{f['loss']:.6f} / {loss_np:.6f}")
    print()

    print("Gemm path: zbrt_sgemm_batched (what compiled code calls, beta=1) "
          "vs direct cblas_sgemm; 'B packed': zbrt with B a weight packed "
          "once, as in a step")
    print(f"{'shape m*n*k':<19} {'use':<15} {'zbrt us':>10} "
          f"{'OpenBLAS us':>12} {'zbrt/OpenBLAS':>14} {'B packed us':>12} "
          f"{'packed/OpenBLAS':>16}")
    for shape, use, zbrt_us, blas_us, ratio, packed_us, packed_ratio in \
            rows["gemm"]:
        print(f"{shape:<19} {use:<15} {zbrt_us:10.3f} {blas_us:12.3f} "
              f"{ratio:14.3f} {packed_us:12.3f} {packed_ratio:16.3f}")
    print()

    print("Compiled one-matmul function (fill + gemm, whole compiled path) "
          "vs one direct cblas_sgemm (beta=0)")
    print(f"{'shape m*n*k':<16} {'use':<15} {'compiled us':>12} "
          f"{'OpenBLAS us':>12} {'compiled/OpenBLAS':>18} {'max |err|':>10}")
    for shape, use, comp_us, blas_us, ratio, err in rows["model-gemm"]:
        print(f"{shape:<16} {use:<15} {comp_us:12.3f} {blas_us:12.3f} "
              f"{ratio:18.3f} {err:10.2g}")


if __name__ == "__main__":
    main()
