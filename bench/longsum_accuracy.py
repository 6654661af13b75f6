#!/usr/bin/python3
"""longsum_accuracy.py - the float32 error of attnc's long sums and
means against float64, next to PyTorch's (docs/ops.md, "Summation order").

For each row count R (4096 and 65536 by default) and two kinds of data
(uniform in [0, 1), of one sign like a bias gradient of ReLU outputs, and
standard normal) it sums and averages an (R, 64) float32 tensor over its
rows (the bias gradient over B*T rows is such a column sum), an (64, R)
one along its rows, and the whole tensor, in attnc's interpreter, attnc's
JIT (`attnc --interp|--jit --inputs ... --outputs ...`) and PyTorch
(float32, its default threads). The error of an output is |got - ref| /
(eps * sum|x|) (a mean's: against mean|x|), ref the float64 result of the
same float32 inputs; the worst over the outputs is printed for each, with
attnc's JIT over PyTorch's ratio (at most 1: attnc as accurate or more).

    /usr/bin/python3 bench/longsum_accuracy.py [--attnc build/attnc] [--rows 4096,65536]

Needs PyTorch and NumPy (/usr/bin/python3 on this project's machines).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

COLS = 64
EPS = float(np.finfo(np.float32).eps)

MODEL = """model longsum_accuracy

export def columns(x: f32[{R}, {C}])
  return sum(x, 0), mean(x, 0), sum(x), mean(x)

export def rows(y: f32[{C}, {R}])
  return sum(y, 1), mean(y, 1)
"""

# (entry, output index, name, reduction of a float64 or torch tensor,
# whether it is a mean, how sum|x| per output is taken)
CASES = [
    ("columns", 0, "sum over rows (bias gradient)", lambda t: t.sum(0), False, lambda a: a.sum(0)),
    ("columns", 1, "mean over rows", lambda t: t.mean(0), True, lambda a: a.sum(0)),
    ("columns", 2, "sum of the whole tensor", lambda t: t.sum(), False, lambda a: a.sum()),
    ("columns", 3, "mean of the whole tensor", lambda t: t.mean(), True, lambda a: a.sum()),
    ("rows", 0, "sum along rows", lambda t: t.sum(1), False, lambda a: a.sum(1)),
    ("rows", 1, "mean along rows", lambda t: t.mean(1), True, lambda a: a.sum(1)),
]


def write_safetensors(path, name, x):
    """One float32 tensor `name` as a safetensors file."""
    head = json.dumps({name: {"dtype": "F32", "shape": list(x.shape),
                              "data_offsets": [0, x.nbytes]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + x.tobytes())


def read_safetensors(path):
    """The float32 tensors of a safetensors file, by name."""
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    head = json.loads(blob[8:8 + n])
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + lo:8 + n + hi],
                                  dtype=np.float32).reshape(t["shape"])
    return out


def attnc_outputs(attnc, model, entry, mode, name, x, tmp):
    """attnc's outputs (out0, out1, ...) of `entry` on x, run with --mode."""
    src = os.path.join(tmp, "in.safetensors")
    dst = os.path.join(tmp, "out.safetensors")
    write_safetensors(src, name, x)
    subprocess.run([attnc, model, "--" + mode, "--entry", entry,
                    "--inputs", src, "--outputs", dst],
                   check=True, stdout=subprocess.DEVNULL)
    got = read_safetensors(dst)
    return [got["out%d" % i] for i in range(len(got))]


def error(got, x64, case):
    """The worst |got - ref| / (eps * scale) over the outputs."""
    _, _, _, reduce, is_mean, abs_sum = case
    ref = reduce(x64)
    scale = abs_sum(np.abs(x64))
    if is_mean:
        scale = scale / (x64.size / np.size(ref))
    e = np.abs(np.asarray(got, dtype=np.float64) - ref) / (EPS * scale)
    return float(np.max(e))


def measure(attnc, R, kind, tmp):
    """One table's rows: the errors for R rows of data of `kind`."""
    rng = np.random.default_rng(20261201 + R)
    x = (rng.random((R, COLS), dtype=np.float32) if kind == "uniform"
         else rng.standard_normal((R, COLS), dtype=np.float32))
    inputs = {"columns": ("x", x), "rows": ("y", np.ascontiguousarray(x.T))}
    model = os.path.join(tmp, "longsum.g")
    with open(model, "w") as f:
        f.write(MODEL.format(R=R, C=COLS))
    got = {}
    for entry, (name, v) in inputs.items():
        for mode in ("interp", "jit"):
            got[entry, mode] = attnc_outputs(attnc, model, entry, mode, name,
                                             v, tmp)
    rows = []
    for case in CASES:
        entry, k, what, reduce, _, _ = case
        v = inputs[entry][1]
        x64 = v.astype(np.float64)
        e_torch = error(reduce(torch.from_numpy(v)).numpy(), x64, case)
        e_interp = error(got[entry, "interp"][k], x64, case)
        e_jit = error(got[entry, "jit"][k], x64, case)
        rows.append((what, e_interp, e_jit, e_torch))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attnc", default="build/attnc")
    ap.add_argument("--rows", default="4096,65536")
    a = ap.parse_args()
    print("worst |float32 - float64| / (eps sum|x|) over 64 outputs "
          "(a mean's: over mean|x|); PyTorch %s, %d threads"
          % (torch.__version__, torch.get_num_threads()))
    with tempfile.TemporaryDirectory() as tmp:
        for R in [int(r) for r in a.rows.split(",")]:
            for kind in ("uniform", "normal"):
                print("\n%d rows, %s data:" % (R, kind))
                print("  %-32s %10s %10s %10s %8s"
                      % ("", "interp", "jit", "pytorch", "jit/pt"))
                for what, ei, ej, et in measure(a.attnc, R, kind, tmp):
                    ratio = ej / et if et > 0 else float("inf") if ej else 0
                    print("  %-32s %10.4f %10.4f %10.4f %8.2f"
                          % (what, ei, ej, et, ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
