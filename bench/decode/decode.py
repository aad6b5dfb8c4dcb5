#!/usr/bin/env python3
"""Decode attention: attnc against torch SDPA (enable_gqa) in the same run.

For each shape, attnc compiles the spec (`attnc bench --json`, forward only)
and torch runs torch.nn.functional.scaled_dot_product_attention on tensors of
the same shapes, alternately for --rounds rounds; the table shows medians of
ms per step, the K/V bytes read per ms of attnc (GB/s) and its fraction of
the machine's measured read bandwidth, the ratio torch/attnc (above 1: attnc
faster), and the extra memory of each (attnc: peak RSS beyond inputs and
outputs, from attnc bench; torch: the peak RSS growth of one call).

With --page P, attnc runs a paged cache instead: pools of B * ceil(Skv / P)
pages of P tokens, a block table of ceil(Skv / P) pages per sequence naming
every page once in random order (`attnc bench --fill table=shuffled`), the
lengths Skv (`--fill len=Skv`); torch runs on the contiguous cache as
before (its SDPA has no paged form).

With --cache CAP, attnc also runs one kernel per (dtype, B, Hkv, Sq) for
every Skv: a KV cache of capacity CAP (`causal cache lengths(%len)`, the
queries the cache's last Sq tokens), timed with `attnc bench --fill len=Skv`
in the same rounds; the ratio then compares torch with that kernel, and the
"cache/static" column its time with the kernel compiled for Skv keys. (At
Sq > 1 the cache's causal mask hides the last Sq (Sq - 1) / 2 pairs that
torch's unmasked SDPA computes, a negligible share at these Skv.)

usage: decode.py --attnc PATH [--threads N] [--reps N] [--rounds N]
                 [--batches "1 4"] [--kv-heads "8 32"] [--queries "1 16"]
                 [--keys "1024 4096 16384"] [--dtypes "f32 bf16"]
                 [--cache CAP] [--page P] [--json FILE]
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

H, D = 32, 128


def spec_text(b, hkv, sq, skv, dtype, cache=False, page=0):
    """The step's spec; with `cache`, K and V are a cache of capacity skv
    whose lengths come at run time (%len); with `page`, a paged cache of
    b * ceil(skv / page) pages and its block table (%table)."""
    t = lambda n, h, s: "tensor<%dx%dx%dx%dx%s>" % (n, h, s, D, dtype)
    lse = "tensor<%dx%dx%dxf32>" % (b, H, sq)
    kv = t(b, hkv, skv)
    masks = ""
    if page:
        m = -(-skv // page)
        kv = t(b * m, hkv, page)
    args = "%%q: %s, %%k: %s, %%v: %s" % (t(b, H, sq), kv, kv)
    if cache or page:
        args += ", %%len: tensor<%dxi32>" % b
        masks = " causal cache lengths(%%len : tensor<%dxi32>)" % b
    if page:
        args += ", %%table: tensor<%dx%dxi32>" % (b, m)
        masks += " pages(%%table : tensor<%dx%dxi32>)" % (b, m)
    return ("func.func @decode(%s) -> %s {\n"
            "  %%o, %%lse = attn.attention %%q, %%k, %%v%s : %s, %s, %s -> %s, %s\n"
            "  return %%o : %s\n}\n") % (args, t(b, H, sq), masks, t(b, H, sq),
                                          kv, kv, t(b, H, sq), lse, t(b, H, sq))


def status_mb(field):
    """A field of /proc/self/status (VmHWM: peak RSS, VmRSS: RSS), in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def torch_step(b, hkv, sq, skv, dtype, reps):
    dt = torch.float32 if dtype == "f32" else torch.bfloat16
    q = torch.randn(b, H, sq, D, dtype=dt)
    k = torch.randn(b, hkv, skv, D, dtype=dt)
    v = torch.randn(b, hkv, skv, D, dtype=dt)
    with torch.no_grad():
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # warm up
        try:  # reset the peak RSS (Linux): the extra memory of one call
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass
        before = status_mb("VmRSS")
        o = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        extra = max(0.0, status_mb("VmHWM") - before - o.numel() * o.element_size() / 2**20)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), extra


def attnc_step(attnc, path, threads, reps, fills=()):
    extra = [x for fill in fills for x in ("--fill", fill)]
    out = subprocess.run([attnc, "bench", path, "--json", "--no-backward",
                          "--threads", str(threads), "--reps", str(reps)] + extra,
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    return r["forward"]["median_ms"], r["forward"]["extra_mb"]


def read_bandwidth_gbs():
    x = torch.ones(1 << 27)  # 512 MB
    best = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t0)
    return x.numel() * 4 / best / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnc", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", default="1 4")
    ap.add_argument("--kv-heads", default="8 32")
    ap.add_argument("--queries", default="1 16")
    ap.add_argument("--keys", default="1024 4096 16384")
    ap.add_argument("--dtypes", default="f32 bf16")
    ap.add_argument("--cache", type=int, default=0)
    ap.add_argument("--page", type=int, default=0)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    bandwidth = read_bandwidth_gbs()
    print("torch %s, %d threads, measured read bandwidth %.1f GB/s (torch sum)"
          % (torch.__version__, a.threads, bandwidth))
    if a.cache and max(map(int, a.keys.split())) > a.cache:
        ap.error("--cache must hold every --keys value")
    if a.cache and a.page:
        ap.error("--cache and --page are separate modes")
    print("%-5s %2s %4s %3s %6s | %9s %9s %6s %6s | %6s | %8s %8s%s" % (
        "dtype", "B", "Hkv", "Sq", "Skv", "attnc ms", "torch ms", "GB/s",
        "of bw", "ratio", "attnc MB", "torch MB",
        " | static ms  cache/static" if a.cache else ""))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in a.dtypes.split():
            for b in map(int, a.batches.split()):
                for hkv in map(int, a.kv_heads.split()):
                    for sq in map(int, a.queries.split()):
                        for skv in map(int, a.keys.split()):
                            path = os.path.join(tmp, "decode.mlir")
                            with open(path, "w") as f:
                                f.write(spec_text(b, hkv, sq, skv, dtype, page=a.page))
                            cache = os.path.join(tmp, "cache.mlir")
                            if a.cache:
                                with open(cache, "w") as f:
                                    f.write(spec_text(b, hkv, sq, a.cache, dtype, True))
                            ours, theirs, ratios, static = [], [], [], []
                            for _ in range(a.rounds):
                                if a.cache:
                                    static.append(attnc_step(a.attnc, path, a.threads, a.reps)[0])
                                    ms, extra = attnc_step(a.attnc, cache, a.threads, a.reps,
                                                           ["len=%d" % skv])
                                elif a.page:
                                    ms, extra = attnc_step(a.attnc, path, a.threads, a.reps,
                                                           ["len=%d" % skv, "table=shuffled"])
                                else:
                                    ms, extra = attnc_step(a.attnc, path, a.threads, a.reps)
                                tms, textra = torch_step(b, hkv, sq, skv, dtype, a.reps)
                                ours.append(ms)
                                theirs.append(tms)
                                ratios.append(tms / ms)
                            ms, tms = statistics.median(ours), statistics.median(theirs)
                            kv_bytes = 2 * b * hkv * skv * D * (4 if dtype == "f32" else 2)
                            gbs = kv_bytes / ms / 1e6
                            row = dict(dtype=dtype, B=b, H=H, Hkv=hkv, Sq=sq, Skv=skv,
                                       D=D, attnc_ms=ms, torch_ms=tms,
                                       ratio=statistics.median(ratios), kv_gbs=gbs,
                                       bandwidth_fraction=gbs / bandwidth,
                                       attnc_extra_mb=extra, torch_extra_mb=textra)
                            tail = ""
                            if a.page:
                                row["page"] = a.page
                            if a.cache:
                                row["cache_capacity"] = a.cache
                                row["static_ms"] = statistics.median(static)
                                row["cache_over_static"] = statistics.median(
                                    [c / s for c, s in zip(ours, static)])
                                tail = " | %9.3f %12.3f" % (row["static_ms"],
                                                            row["cache_over_static"])
                            rows.append(row)
                            print("%-5s %2d %4d %3d %6d | %9.3f %9.3f %6.1f %5.0f%% | %6.2f | %8.1f %8.1f%s" % (
                                dtype, b, hkv, sq, skv, ms, tms, gbs,
                                100 * gbs / bandwidth, row["ratio"], extra, textra, tail),
                                flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(bandwidth_gbs=bandwidth, threads=a.threads, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
