#!/usr/bin/env python3
"""Random bad input for the project's tools; reports what crashes or hangs.

    utils/fuzz-tools.py TARGET [--seconds S] [--seed N] [--out DIR]

TARGET is one of:

- ``zb-opt``: the lit tests' inputs (test/**/*.mlir, one split-input-file
  chunk at a time), mutated (integers, element types, shapes, SSA names,
  string attributes, attribute entries, lines deleted, duplicated or
  swapped), through the zb-opt passes of the test's RUN lines;
- ``zb-pipeline``: the examples through ``--zb-pipeline`` with random
  option values, good and bad;
- ``zb-sched``: random generated or imported (CSV) schedules with random
  flags;
- ``zb-run``: the examples with random flags and bad data files (one
  step; compiled models are cached under DIR);
- ``files``: valid files of every kind a tool reads, mutated (``.npz``
  parameters and data, at the byte level and in their arrays' headers,
  dtypes, shapes, names and values; a checkpoint's ``latest`` and
  ``state.json``; a ``--profile`` JSON), read by ``zb-run --params``,
  ``--inputs`` and ``--resume`` and by ``zb-opt --zb-pipeline=costs=``.

A finding is a run that ends by a signal, prints a stack dump, an LLVM
ERROR or a failed assertion, exits with a status the tool does not use
for errors, or runs past its timeout; each is written to DIR (the input,
the command, the output) and the script exits with 1 if there was one.
Clean error messages are what bad input should get and are not
findings. Two faults of MLIR 22's own parser are skipped, since mlir-opt
has them too: a dense array of `index` elements (`array<index: 0>`,
a crash in the parser) and a parse error inside a region after
unresolved forward references (heap corruption noticed at exit).

Tools are found through $ZB_BIN_DIR (default build/bin).
"""

import argparse
import hashlib
import io
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("ZB_BIN_DIR", ROOT / "build" / "bin"))
CRASH_TEXT = ("Stack dump", "LLVM ERROR", "Assertion", "UNREACHABLE",
              "exited on signal")
# MLIR 22's parser faults (see the docstring): not the project's.
UPSTREAM_TEXT = ("redefinition of", "expects different type than prior uses",
                 "use of undeclared SSA", "MLIR Parser", "PassNameCLParser")
EXAMPLES = sorted(str(p) for p in (ROOT / "examples").glob("*.mlir"))


def lit_cases():
    """(arguments, input chunk) for each zb-opt RUN line of the lit tests."""
    cases = []
    for path in sorted((ROOT / "test").rglob("*.mlir")):
        if {"e2e", "python"} & set(path.parts):
            continue
        text = path.read_text()
        for run in re.findall(r"//\s*RUN:(.*)", text):
            run = run.split("|")[0]
            if "zb-opt" not in run or "%t" in run:
                continue
            run = run[run.index("zb-opt") + len("zb-opt"):]
            try:
                args = shlex.split(run.replace("%zb_src_root", str(ROOT)))
            except ValueError:
                continue
            if "%s" not in args:
                continue
            args = [a for a in args if a != "%s" and not a.startswith("2>")
                    and a.lstrip("-") not in ("verify-diagnostics",
                                              "split-input-file")]
            for chunk in text.split("// -----"):
                if re.search(r"func\.func|module|pipe\.|sched\.", chunk):
                    cases.append((args, chunk))
    return cases


def mutate(text, rng):
    """One to three random edits of an MLIR text."""
    edits = [
        (r"(?<![\w%#@.])-?\d+(?![\w.])",
         ["0", "-1", "1", "2", "3", "64", "2147483647", "4294967296",
          "-2147483648", "9223372036854775807"]),
        (r"\b(f32|f64|bf16|i32|i64|i1|index)\b",
         ["f32", "f64", "bf16", "f16", "i32", "i64", "i1", "index"]),
        (r"(?<=[<x])\d+(?=x)", ["0", "1", "?", "3", "5", "128"]),
        (r'"[^"\n]*"', ['""', '"x"', '"w0"', '"a b"']),
        (r"\b[\w.]+ = [^,}\n]+,?", [""]),
    ]
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(len(edits) + 4)
        lines = text.split("\n")
        if kind < len(edits):
            pattern, values = edits[kind]
            found = list(re.finditer(pattern, text))
            if found:
                m = rng.choice(found)
                text = text[:m.start()] + rng.choice(values) + text[m.end():]
        elif kind == len(edits):
            names = sorted(set(re.findall(r"%\w+", text)))
            if len(names) > 1:
                a, b = rng.sample(names, 2)
                uses = list(re.finditer(re.escape(a) + r"\b", text))
                m = rng.choice(uses)
                text = text[:m.start()] + b + text[m.end():]
        elif len(lines) > 2:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            if kind == len(edits) + 1:
                del lines[i]
            elif kind == len(edits) + 2:
                lines.insert(i, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
    return text


def some(rng, options, p):
    """Each of `options` (name -> values) with probability p, as flags."""
    return [f"{k}={rng.choice(v)}" for k, v in options.items()
            if rng.random() < p]


def zb_opt(rng, work, cases):
    args, chunk = rng.choice(cases)
    text = mutate(chunk, rng)
    if "array<index" in text:
        return None
    return [str(BIN / "zb-opt"), "-", *args], text, ""


PIPELINE_OPTIONS = {
    "stages": ["1", "2", "3", "4", "8", "0", "-1", "100"],
    "chunks": ["1", "2", "3", "0"],
    "microbatches": ["1", "2", "3", "4", "7", "8", "0"],
    "schedule": ["1f1b", "zb-h1", "zb-h2", "zb-v", "v-half", "v-min",
                 "zb-auto", "gpipe", "interleaved-1f1b", "x"],
    "mem-limit": ["0", "1", "1e3", "-1", "nan", "1e300"],
    "replicas": ["1", "2", "0", "-3"], "dtype": ["f32", "bf16", "x"],
    "optimizer": ["sgd", "adamw", "sgd-momentum", "x"],
    "target": ["cpu", "gpu", "x"],
}


def zb_pipeline(rng, work, cases):
    options = some(rng, PIPELINE_OPTIONS, 0.5)
    options += [f for f in ("forward-only", "lower-to-cpu", "unroll")
                if rng.random() < 0.1]
    first = "--zb-strip-cuts" if rng.random() < 0.5 else "--mlir-disable-threading"
    return [str(BIN / "zb-opt"), rng.choice(EXAMPLES), first,
            "--zb-pipeline=" + " ".join(options), "-o", os.devnull], None, ""


SCHED_FLAGS = {
    "chunks": ["1", "2", "3"], "placement": ["loop", "v", "x"],
    "mem-limit": ["0.5", "1", "2", "100"], "cost-reduce": ["0", "2.5"],
    "format": ["text", "json", "csv", "svg", "chrome", "mlir"],
    "mem-b": ["0", "1"], "mem-w": ["0", "1", "3"],
}


def random_csv(rng):
    ranks, mbs = rng.randint(1, 4), rng.randint(1, 5)
    rows = []
    for r in range(ranks):
        cells = [f"{rng.choice([r, r, 2 * ranks - 1 - r, rng.randint(0, 9)])}"
                 f"{rng.choice('FFIWB')}{rng.randint(0, mbs)}"
                 for _ in range(rng.randint(0, 4 * mbs))]
        if rng.random() < 0.1:
            cells.append(rng.choice(["0SEND_F1", "(0F1;1B0)OVERLAP_F_B",
                                     "()OVERLAP_F_B", "x"]))
        rows.append(",".join(cells))
    return "\n".join(rows) + "\n"


def zb_sched(rng, work, cases):
    args = [str(BIN / "zb-sched"), "--time-limit=3"]
    args += [f"--cost-{k}={rng.choice(['0', '1', '1.5', '2'])}" for k in "fbw"]
    csv = ""
    if rng.random() < 0.5:
        csv = random_csv(rng)
        (work / "schedule.csv").write_text(csv)
        args.append(f"--import-csv={work / 'schedule.csv'}")
    else:
        args += [f"--schedule={rng.choice(PIPELINE_OPTIONS['schedule'] + ['optimal'])}",
                 f"--stages={rng.choice([1, 2, 3, 4, 5, 8])}",
                 f"--microbatches={rng.choice([1, 2, 3, 4, 5, 8, 16])}"]
    return args + ["--" + f for f in some(rng, SCHED_FLAGS, 0.25)], None, csv


def zb_run(rng, work, cases):
    garbage, empty = work / "garbage.npz", work / "empty.npz"
    if not garbage.exists():
        garbage.write_bytes(bytes(rng.randrange(256) for _ in range(300)))
        empty.write_bytes(b"PK\x05\x06" + bytes(18))
    flags = {
        "np": ["1", "2", "3", "0", "x"],
        "schedule": ["1f1b", "zb-h1", "zb-v", "zb-auto", "x"],
        "microbatches": ["1", "2", "3", "4", "0", "99999999999"],
        "chunks": ["1", "2", "3"], "lr": ["0.1", "-1", "nan", "inf", "x"],
        "dtype": ["f32", "bf16", "x"], "optimizer": ["sgd", "adamw", "x"],
        "clip-grad-norm": ["1", "0", "-1", "nan"], "dp": ["1", "2", "0"],
        "grad-samples": ["1", "0", "-3"], "backend": ["cpu", "gpu", "x"],
        "inputs": [garbage, empty, work / "absent.npz"],
        "params": [garbage, empty], "resume": [work / "absent"],
        "checkpoint": [work / "checkpoint"], "metrics": [work / "m.json"],
    }
    args = [str(BIN / "zb-run"), rng.choice(EXAMPLES), "--steps=1",
            f"--cache-dir={work / 'cache'}"]
    args += ["--" + f for f in some(rng, flags, 0.12)]
    args += [f"--{b}" for b in ("balance", "compile-only", "compiled-update",
                                "eval", "check-grad", "grads")
             if rng.random() < 0.08]
    return args, None, ""


NPY_MAGIC = b"\x93NUMPY\x01\x00"


def npy(header, data):
    """A .npy member: `header` (the dict's text) padded as numpy pads it."""
    text = header.encode("latin1")
    pad = (64 - (len(NPY_MAGIC) + 2 + len(text) + 1) % 64) % 64
    text += b" " * pad + b"\n"
    return NPY_MAGIC + len(text).to_bytes(2, "little") + text + data


def read_npz(path):
    """[(name, header text, data bytes)] of a stored (uncompressed) .npz."""
    members = []
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            raw = z.read(info)
            size = int.from_bytes(raw[8:10], "little")
            members.append((info.filename[:-4],
                            raw[10:10 + size].decode("latin1").rstrip(),
                            raw[10 + size:]))
    return members


HEADER_EDITS = [
    (r"'descr': '[^']*'", ["'descr': '<f8'", "'descr': '<i4'",
                           "'descr': '>f4'", "'descr': '|b1'",
                           "'descr': '<c8'", "'descr': '|O'",
                           "'descr': '<U3'", "'descr': ''", "'descr': 7"]),
    (r"'fortran_order': \w+", ["'fortran_order': True",
                                "'fortran_order': 1", "'fortran_order': x"]),
    (r"'shape': \([^)]*\)", ["'shape': ()", "'shape': (0,)",
                              "'shape': (1000000000000,)",
                              "'shape': (9223372036854775807, 2)",
                              "'shape': (-1,)", "'shape': (2, 2, 2, 2)",
                              "'shape': (3,", "'shape': [2]"]),
    (r"\d+", ["0", "1", "-1", "4294967296", "99999999999999999999"]),
    (r"[{},:]", ["", "{", "}}"]),
]


def mutate_npz(members, rng):
    """The members of an .npz with one to three random edits."""
    members = list(members)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(members))
        name, header, data = members[i]
        kind = rng.randrange(7)
        if kind == 0:
            pattern, values = rng.choice(HEADER_EDITS)
            found = list(re.finditer(pattern, header))
            if found:
                m = rng.choice(found)
                header = header[:m.start()] + rng.choice(values) + header[m.end():]
        elif kind == 1 and data:  # cut or lengthen the data
            data = data[:rng.randrange(len(data))] if rng.random() < 0.5 \
                else data + bytes(rng.randrange(1, 64))
        elif kind == 2 and data:  # non-finite or extreme values
            j = rng.randrange(0, len(data) - 3, 4) if len(data) > 3 else 0
            word = rng.choice([b"\x00\x00\xc0\x7f", b"\x00\x00\x80\x7f",
                               b"\xff\xff\xff\xff", b"\xff\xff\xff\x7f"])
            data = data[:j] + word + data[j + 4:]
        elif kind == 3:
            name = rng.choice(["", "x", name + "x", "../" + name, "a/b",
                               members[rng.randrange(len(members))][0]])
        elif kind == 4 and len(members) > 1:
            del members[i]
            continue
        elif kind == 5:
            members.append(members[i])
        members[i] = (name, header, data)
    return members


def write_npz(path, members, rng):
    """Writes `members` as an .npz; sometimes with its bytes mutated too."""
    buffer = io.BytesIO()
    warnings.filterwarnings("ignore", "Duplicate name", UserWarning)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as z:
        for name, header, data in members:
            z.writestr(name + ".npy", npy(header, data))
    raw = bytearray(buffer.getvalue())
    if rng.random() < 0.2:
        for _ in range(rng.randint(1, 8)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
    if rng.random() < 0.05:
        del raw[rng.randrange(len(raw)):]
    path.write_bytes(bytes(raw))


def valid_files(work):
    """Makes (once) valid files of each kind from examples/mlp.mlir: its
    parameters, data, an AdamW checkpoint and a two-rank profile."""
    seeds = work / "seeds"
    if seeds.exists():
        return seeds
    sys.path.insert(0, str(ROOT / "test" / "e2e"))
    import numpy as np
    import reference
    tmp = work / "making"
    tmp.mkdir()
    np.savez(tmp / "inputs.npz", **reference.synthetic_inputs(
        "mlp", np.random.default_rng(0), 4))
    model, cache = ROOT / "examples" / "mlp.mlir", f"--cache-dir={work / 'cache'}"
    for flags in (["--dump-params", tmp / "params.npz", "--checkpoint",
                   tmp / "checkpoint", "--optimizer", "adamw"],
                  ["--np", "2", "--profile", tmp / "profile.json"]):
        subprocess.run([str(BIN / "zb-run"), str(model), "--steps=2",
                        "--microbatches=4", cache, *map(str, flags)],
                       check=True, capture_output=True,
                       env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    tmp.rename(seeds)
    return seeds


def files(rng, work, cases):
    seeds = valid_files(work)
    model = str(ROOT / "examples" / "mlp.mlir")
    run = [str(BIN / "zb-run"), model, "--steps=3", "--microbatches=4",
           f"--cache-dir={work / 'cache'}"]
    kind = rng.choice(["params", "inputs", "checkpoint", "checkpoint",
                       "profile"])
    case = work / "case"
    subprocess.run(["rm", "-rf", str(case)], check=True)
    case.mkdir()
    if kind in ("params", "inputs"):
        target = case / f"{kind}.npz"
        write_npz(target, mutate_npz(read_npz(seeds / f"{kind}.npz"), rng),
                  rng)
        extra = ["--inputs", str(seeds / "inputs.npz")] if kind == "params" \
            else []
        return run + [f"--{kind}", str(target), *extra], None, kind
    if kind == "profile":
        text = mutate((seeds / "profile.json").read_text(), rng)
        (case / "profile.json").write_text(text)
        return [str(BIN / "zb-opt"), model, "--zb-strip-cuts",
                "--zb-pipeline=stages=2 microbatches=4 lower-to-cpu=false "
                f"costs={case / 'profile.json'}", "-o", os.devnull], None, text
    # A checkpoint: one of its files mutated.
    subprocess.run(["cp", "-r", str(seeds / "checkpoint"), str(case)],
                   check=True)
    ckpt = case / "checkpoint"
    state = ckpt / (ckpt / "latest").read_text().strip()
    part = rng.choice(["latest", "state.json", "params.npz",
                       "optimizer.npz"])
    if part == "latest":
        (ckpt / "latest").write_text(rng.choice(
            ["", "\n", "state-9-x", "..", "/etc", "../checkpoint",
             state.name + "/..", state.name + "\x00", "x" * 5000]))
    elif part == "state.json":
        (state / part).write_text(mutate((state / part).read_text(), rng))
    else:
        write_npz(state / part, mutate_npz(read_npz(state / part), rng), rng)
    return run + ["--optimizer=adamw", f"--resume={ckpt}"], None, part


TARGETS = {"zb-opt": (zb_opt, 1), "zb-pipeline": (zb_pipeline, 1),
           "zb-sched": (zb_sched, 2), "zb-run": (zb_run, 2),
           "files": (files, 2)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("target", choices=sorted(TARGETS))
    p.add_argument("--seconds", type=float, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=120,
                   help="seconds one run may take")
    p.add_argument("--out", default="fuzz-findings")
    args = p.parse_args()
    make, error_status = TARGETS[args.target]
    cases = lit_cases() if args.target == "zb-opt" else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    runs, findings = 0, 0
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="zb-fuzz-") as tmp:
        work = Path(tmp)
        while time.monotonic() - start < args.seconds:
            made = make(rng, work, cases)
            if made is None:
                continue
            command, stdin, note = made
            try:
                done = subprocess.run(
                    command, input=stdin.encode() if stdin else None,
                    capture_output=True, timeout=args.timeout, env=env)
                status = done.returncode
                output = (done.stdout + done.stderr).decode(errors="replace")
            except subprocess.TimeoutExpired:
                status, output = "timeout", ""
            runs += 1
            if stdin is not None and any(t in output for t in UPSTREAM_TEXT):
                continue
            if not (status == "timeout" or status < 0 or status > error_status
                    or any(t in output for t in CRASH_TEXT)):
                continue
            findings += 1
            if findings > 20:
                continue  # counted; the first twenty are kept
            digest = hashlib.sha1(
                (shlex.join(command) + (stdin or "")).encode()).hexdigest()[:10]
            print(f"finding ({status}): {shlex.join(command)}"
                  + (f" < {out / digest}.mlir" if stdin else ""), flush=True)
            if stdin:
                (out / f"{digest}.mlir").write_text(stdin)
            if (work / "case").is_dir():  # the files the run read
                shutil.copytree(work / "case", out / digest, dirs_exist_ok=True)
            (out / f"{digest}.txt").write_text(
                f"status {status}\n{shlex.join(command)}\n"
                + (f"\ninput file:\n{note}" if note else "")
                + f"\noutput:\n{output[-8000:]}")
    print(f"{args.target}: {runs} runs, {findings} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
