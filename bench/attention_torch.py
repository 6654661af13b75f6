#!/usr/bin/python3
"""attention_torch.py - PyTorch's CPU time and memory for the attention
that bench_attention times in attnc: batch x heads N = 8, head width 64
(-w), queries = keys = seq from 128 to 4096, every key visible or causal
(-c: query t sees keys 0 .. t), forward alone and forward + backward,
median of several runs, d2l's formulation (masked_softmax: bmm, scale,
masked fill with -1e6, softmax, bmm), torch.set_num_threads.

Memory is the peak resident set a run adds to the process that holds the
inputs: each (seq, pass) runs in a fresh child process, which reports its
ru_maxrss before and after the timed runs.

    /usr/bin/python3 bench/attention_torch.py [-r REPS] [-t THREADS] [-s SEQ]...
                                              [-w WIDTH] [-c]
"""
import argparse
import math
import os
import resource
import statistics
import sys
import time

N, WIDTH = 8, 64


def masked_softmax(x, valid):
    """d2l's masked_softmax with 1-D valid lengths (one per batch row) or
    2-D ones (one per query)."""
    shape = x.shape
    if valid.dim() == 1:
        lens = torch.repeat_interleave(valid, shape[1])
    else:
        lens = valid.reshape(-1)
    x = x.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1], dtype=torch.float32)[None, :] < lens[:, None]
    x[~mask] = -1e6
    return torch.nn.functional.softmax(x.reshape(shape), dim=-1)


def attention(q, k, v, valid):
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
    return torch.bmm(masked_softmax(scores, valid), v)


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(seq, width, causal, backward, reps, threads, out):
    """Times one cell; writes 'median_s extra_mib' to the pipe out."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    q, k, v, w = (torch.randn(N, seq, width) for _ in range(4))
    if causal:
        valid = torch.arange(1, seq + 1, dtype=torch.float32).repeat(N, 1)
    else:
        valid = torch.full((N,), seq, dtype=torch.float32)
    if backward:
        for t in (q, k, v):
            t.requires_grad_(True)
    base = peak_mib()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        if backward:
            (attention(q, k, v, valid) * w).sum().backward()
            for t in (q, k, v):
                t.grad = None
        else:
            with torch.no_grad():
                attention(q, k, v, valid)
        times.append(time.perf_counter() - t0)
        if times[-1] > 1.0 and len(times) >= 3:
            break
    os.write(out, ("%.6f %.1f" % (statistics.median(times),
                                  peak_mib() - base)).encode())
    os._exit(0)


def cell(seq, width, causal, backward, reps, threads):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child(seq, width, causal, backward, reps, threads, w)
    os.close(w)
    data = os.read(r, 256).decode()
    os.close(r)
    os.waitpid(pid, 0)
    s, mib = data.split()
    return float(s), float(mib)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-r", type=int, default=5, help="runs per cell")
    ap.add_argument("-t", type=int, default=2, help="threads")
    ap.add_argument("-s", type=int, action="append", help="sequence length")
    ap.add_argument("-w", type=int, default=WIDTH, help="head width")
    ap.add_argument("-c", action="store_true", help="causal")
    a = ap.parse_args()
    seqs = a.s or [128, 256, 512, 1024, 2048, 4096]
    print("pytorch %s attention: N = %d, head width %d%s, %d thread%s, "
          "median of %d" % (torch.__version__, N, a.w,
                            " (causal)" if a.c else "", a.t,
                            "" if a.t == 1 else "s", a.r))
    print("%6s %10s %10s %12s %12s" % ("seq", "fwd ms", "fwd+bwd ms",
                                       "fwd MiB", "fwd+bwd MiB"))
    for seq in seqs:
        f, fm = cell(seq, a.w, a.c, False, a.r, a.t)
        b, bm = cell(seq, a.w, a.c, True, a.r, a.t)
        print("%6d %10.3f %10.3f %12.1f %12.1f" % (seq, f * 1e3, b * 1e3,
                                                 fm, bm))
        sys.stdout.flush()


if __name__ == "__main__":
    import torch
    main()
