#!/usr/bin/env python3
"""Training shapes: attnc against torch SDPA, forward and forward+backward.

For each point (B, H, S, D, causal or not, dtype), attnc compiles the spec
`attn.attention %q, %k, %v [causal]` (`attnc bench --json`: the forward
@attn, and forward+backward as the @attn_fwd and @attn_bwd a training step
calls, each call with its own allocations) and torch runs
torch.nn.functional.scaled_dot_product_attention on CPU tensors of the same
shapes (forward under no_grad; forward+backward as autograd runs it:
requires_grad inputs, then o.backward(dO)), alternately for --rounds
rounds. The table shows the medians of ms and attnc's GFLOP/s (the FLOP
convention of bench/README.md: 4 B H Sq Skv D visible pairs, the backward
2.5 forwards) with its fraction of the FMA peak `attnc bench` measured in
the same run, the median of the per-round ratios torch/attnc (above 1:
attnc faster), and, for bf16 points, attnc's bf16 time against its own f32
at the same point (f32 ms / bf16 ms, when f32 is in --dtypes).

usage: train.py --attnc PATH [--threads N] [--reps N] [--rounds N]
                [--batch N] [--heads N] [--sizes "2048"] [--dims "64 128"]
                [--causal "no yes"] [--dtypes "f32 bf16"] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import torch
import torch.nn.functional as F


def spec_text(b, h, s, d, causal, dtype):
    t = "tensor<%dx%dx%dx%dx%s>" % (b, h, s, d, dtype)
    lse = "tensor<%dx%dx%dxf32>" % (b, h, s)
    return ("func.func @attn(%%q: %s, %%k: %s, %%v: %s) -> %s {\n"
            "  %%o, %%lse = attn.attention %%q, %%k, %%v%s : %s, %s, %s -> %s, %s\n"
            "  return %%o : %s\n}\n") % (t, t, t, t, " causal" if causal else "",
                                          t, t, t, t, lse, t)


def torch_point(b, h, s, d, causal, dtype, reps):
    dt = torch.float32 if dtype == "f32" else torch.bfloat16
    q, k, v, do = (torch.randn(b, h, s, d, dtype=dt) for _ in range(4))

    def median_ms(step):
        step()  # warm up
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    with torch.no_grad():
        fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))

    def step():
        for x in (qg, kg, vg):
            x.grad = None
        F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal).backward(do)

    return fwd, median_ms(step)


def attnc_point(attnc, path, threads, reps):
    out = subprocess.run([attnc, "bench", path, "--json", "--threads", str(threads),
                          "--reps", str(reps)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnc", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--sizes", default="2048")
    ap.add_argument("--dims", default="64 128")
    ap.add_argument("--causal", default="no yes")
    ap.add_argument("--dtypes", default="f32 bf16")
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print("torch %s, %d threads, B=%d H=%d; ratio = torch ms / attnc ms (above 1: attnc "
          "faster); bf16/f32 = attnc f32 ms / attnc bf16 ms" % (
              torch.__version__, a.threads, a.batch, a.heads))
    print("%-5s %5s %4s %-3s | %-8s %8s %8s %7s %6s %6s | %-8s %8s %8s %7s %6s %6s" % (
        "dtype", "S", "D", "cau", "forward", "attnc ms", "torch ms", "GFLOP/s", "ratio",
        "bf/f32", "fwd+bwd", "attnc ms", "torch ms", "GFLOP/s", "ratio", "bf/f32"))
    rows = []
    f32_ms = {}
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in a.dtypes.split():
            for s in map(int, a.sizes.split()):
                for d in map(int, a.dims.split()):
                    for causal in [c == "yes" for c in a.causal.split()]:
                        path = os.path.join(tmp, "attn.mlir")
                        with open(path, "w") as f:
                            f.write(spec_text(a.batch, a.heads, s, d, causal, dtype))
                        runs, ratios, both_ratios, fractions = [], [], [], []
                        for _ in range(a.rounds):
                            r = attnc_point(a.attnc, path, a.threads, a.reps)
                            tf, tb = torch_point(a.batch, a.heads, s, d, causal, dtype, a.reps)
                            runs.append((r["forward"]["median_ms"],
                                         r["forward_backward"]["median_ms"], tf, tb))
                            ratios.append(tf / runs[-1][0])
                            both_ratios.append(tb / runs[-1][1])
                            fractions.append((r["forward"]["fraction"],
                                              r["forward_backward"]["fraction"]))
                        ms, both, tms, tboth = (statistics.median(x) for x in zip(*runs))
                        flops = r["forward_flops"]
                        key = (s, d, causal)
                        if dtype == "f32":
                            f32_ms[key] = (ms, both)
                        vs = f32_ms.get(key) if dtype != "f32" else None
                        row = dict(dtype=dtype, B=a.batch, H=a.heads, S=s, D=d,
                                   causal=causal, attnc_forward_ms=ms, torch_forward_ms=tms,
                                   forward_gflops=flops / ms / 1e6,
                                   forward_fraction=statistics.median(f[0] for f in fractions),
                                   forward_ratio=statistics.median(ratios),
                                   attnc_both_ms=both, torch_both_ms=tboth,
                                   both_gflops=3.5 * flops / both / 1e6,
                                   both_fraction=statistics.median(f[1] for f in fractions),
                                   both_ratio=statistics.median(both_ratios),
                                   forward_vs_f32=vs[0] / ms if vs else None,
                                   both_vs_f32=vs[1] / both if vs else None)
                        rows.append(row)
                        fmt = lambda x: "%6.2f" % x if x else "     -"
                        print("%-5s %5d %4d %-3s | %-8s %8.2f %8.2f %7.1f %6.2f %s | %-8s %8.2f "
                              "%8.2f %7.1f %6.2f %s" % (
                                  dtype, s, d, "yes" if causal else "no", "",
                                  ms, tms, row["forward_gflops"], row["forward_ratio"],
                                  fmt(row["forward_vs_f32"]), "", both, tboth,
                                  row["both_gflops"], row["both_ratio"],
                                  fmt(row["both_vs_f32"])), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(threads=a.threads, torch=torch.__version__, rows=rows), f,
                      indent=1)


if __name__ == "__main__":
    main()
