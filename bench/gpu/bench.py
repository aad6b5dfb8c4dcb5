#!/usr/bin/env python3
"""attnc CUDA target: correctness check and timing on an NVIDIA GPU, through
the prebuilt libraries of bench/gpu/prepare.sh (see bench/gpu/README.md).

  python3 bench/gpu/bench.py [--prebuilt DIR] [--budget 420] [--part all|check|timing]
                             [--no-flex] [--cap 2.5]

(a) check: every `chk_*` library (B=2, H=4, S=257, D=64/128, f32 and bf16;
    plain, causal, GQA, ALiBi with captured slopes, key lengths): the forward
    (f and f_fwd) and every gradient of f_bwd against a float64 reference
    computed here with plain torch ops on the GPU (autograd for the gradients),
    itself first checked against torch's SDPA (math backend) in float64.
(b) timing: every `bench_*` library (bf16, B=4, H=16, S=4096/8192, D=64/128,
    causal or not): attnc's forward (f) and forward+backward (f_fwd + f_bwd)
    against torch SDPA with the flash backend and FlexAttention
    (torch.compile'd), CUDA events, median of adaptive repetitions; and
    attnc's O, dQ, dK, dV at these shapes against flash's.

The parts run in child processes (a kernel that faults poisons its CUDA
context): a child that crashes is restarted past the item it was on, and
everything is bounded by --budget seconds. The report goes to stdout and, when
$OUT is set, to $OUT/gpu_report.txt ($OUT/gpu_results.json has the raw
records, $OUT/gpu_bench_stderr.txt the children's stderr).

--fake-cpu (a test of this script on a machine without a GPU, torch needed):
the libraries are replaced by a float32 torch implementation on the CPU and
the timing shapes are shrunk; ATTNC_GPU_BENCH_FAKE_FAULT=SUBSTRING:MODE
(MODE crash, cudaerr, status, nan or hang;
ATTNC_GPU_BENCH_ITEM_LIMIT=S sets every item's time limit) injects a fault into the items whose
name contains SUBSTRING.

Exit status: 0 all checks passed; 1 a check failed or crashed; 2 nothing could
run here (no torch, no CUDA device, or no prebuilt libraries).
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import platform
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PREBUILT = os.path.join(HERE, "prebuilt")

# Tolerances on max|got - ref| / max|ref| (per tensor).
TOL = {"f32": 1e-4, "bf16": 3e-2, "f16": 1e-2}
# f32 gradients of captured tensors (d_slopes: a sum over B*Sq*Skv score
# gradients times j - i) are held to this instead.
TOL_F32_CAPTURE_GRAD = 1e-3
STATUS_NAMES = {0: "OK", 1: "NULL_ARGUMENT", 2: "BAD_SIZE", 3: "OUT_OF_MEMORY", 4: "INTERNAL",
                5: "NO_AMX", 6: "NO_DEVICE", 7: "DEVICE_ERROR", 8: "BAD_BUFFER"}

# Where tensors live: "cuda", or "cpu" under --fake-cpu.
DEV = "cuda"
FAKE = False


def say(*a):
    print(*a, flush=True)


def sync(torch):
    if not FAKE:
        torch.cuda.synchronize()


class _CpuEvent:
    def record(self):
        self.t = time.perf_counter()

    def elapsed_time(self, end):
        return (end.t - self.t) * 1000.0


def event(torch):
    return _CpuEvent() if FAKE else torch.cuda.Event(enable_timing=True)


def stream_handle(torch):
    return None if FAKE else torch.cuda.current_stream().cuda_stream


def is_fatal(msg):
    """An error after which the CUDA context is not to be trusted."""
    return any(s in msg for s in ("CUDA error", "CUDA_ERROR", "DEVICE_ERROR", "device-side",
                                  "illegal memory access", "illegal instruction",
                                  "unspecified launch failure"))


def fmt_e(x):
    if x is None:
        return "-"
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    return f"{x:.1e}"


def fmt_ms(x):
    if x is None:
        return "n/a"
    return f"{x:.3f}" if x < 10 else (f"{x:.2f}" if x < 100 else f"{x:.1f}")


def kernel_label(kernel):
    """fwd, bwd, bwd_0, ... from __attnc_impl_<f>_bwd_kernel_0."""
    m = re.search(r"_(fwd|bwd)_kernel(_\d+)?$", kernel)
    return (m.group(1) + (m.group(2) or "")) if m else kernel


def load_manifest(prebuilt):
    with open(os.path.join(prebuilt, "manifest.json")) as f:
        return json.load(f)


# ============================================================ the libraries

class Lib:
    """One prebuilt library: its ctypes handle, entry points and (lazily) an
    attnc CUDA context of its own copy of the runtime."""

    def __init__(self, prebuilt, entry):
        self.entry = entry
        self.name = entry["name"]
        self.p = entry["params"]
        self.dll = ctypes.CDLL(os.path.join(prebuilt, entry["lib"]), mode=os.RTLD_LOCAL)
        d = self.dll
        d.attnc_cuda_context_create.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
        d.attnc_cuda_context_create.restype = ctypes.c_int
        d.attnc_cuda_context_destroy.argtypes = [ctypes.c_void_p]
        d.attnc_cuda_context_destroy.restype = None
        for fn in ("attnc_cuda_last_error", "attnc_cuda_device_name"):
            getattr(d, fn).argtypes = [ctypes.c_void_p]
            getattr(d, fn).restype = ctypes.c_char_p
        d.attnc_cuda_load_error.argtypes = []
        d.attnc_cuda_load_error.restype = ctypes.c_char_p
        d.attnc_cuda_finish.argtypes = [ctypes.c_void_p]
        d.attnc_cuda_finish.restype = ctypes.c_int
        d.attnc_cuda_compute_capability.argtypes = [ctypes.c_void_p]
        d.attnc_cuda_compute_capability.restype = ctypes.c_int
        try:
            d.attnc_status_string.argtypes = [ctypes.c_int]
            d.attnc_status_string.restype = ctypes.c_char_p
            self._status_string = d.attnc_status_string
        except AttributeError:
            self._status_string = None
        self.fns = {}
        for kind, e in entry.get("entries", {}).items():
            fn = getattr(d, e["symbol"])
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_void_p] * len(e["args"])
            fn.restype = ctypes.c_int32
            self.fns[kind] = (fn, e["args"])
        self.queries = {}
        for q in entry.get("queries", []):
            fn = getattr(d, q)
            fn.argtypes = []
            fn.restype = ctypes.c_int64
            self.queries[q[len(self.name) + 1:]] = fn
        self.ctx = None

    def status_string(self, st):
        if self._status_string:
            return self._status_string(st).decode(errors="replace")
        return STATUS_NAMES.get(st, f"status {st}")

    def create_context(self):
        if self.ctx is None:
            p = ctypes.c_void_p()
            st = self.dll.attnc_cuda_context_create(0, ctypes.byref(p))
            if st != 0:
                raise RuntimeError(f"attnc_cuda_context_create: {self.status_string(st)}: "
                                   f"{self.dll.attnc_cuda_load_error().decode(errors='replace')}")
            self.ctx = p
        return self.ctx

    def device_name(self):
        return self.dll.attnc_cuda_device_name(self.ctx).decode(errors="replace")

    def destroy(self):
        if self.ctx is not None:
            self.dll.attnc_cuda_context_destroy(self.ctx)
            self.ctx = None

    def last_error(self):
        return self.dll.attnc_cuda_last_error(self.ctx).decode(errors="replace") if self.ctx else ""

    def finish(self):
        """attnc_cuda_finish: (status, message) of the first error of queued
        work since the last call."""
        st = self.dll.attnc_cuda_finish(self.ctx)
        return st, (f"{self.status_string(st)}: {self.last_error()}" if st else "")

    def call(self, kind, tensors, stream):
        """Calls entry `kind` (f, fwd, bwd) with the device tensors named as in
        the header; returns (status, message)."""
        fn, args = self.fns[kind]
        st = fn(self.ctx, stream, *[tensors[a["name"]].data_ptr() for a in args])
        return st, ("" if st == 0 else f"{self.status_string(st)}: {self.last_error()}")


class FakeLib:
    """--fake-cpu: a library's entry points in float32 torch on the CPU (the
    reference's formula), to test this script without a GPU."""

    def __init__(self, prebuilt, entry, params=None):
        self.entry = entry
        self.name = entry["name"]
        self.p = params or entry["params"]
        self.fns = {}
        for kind, e in entry.get("entries", {}).items():
            args = e["args"]
            if params:  # shrunk timing shapes
                args = [dict(a, shape=shrink_shape(a["shape"], entry["params"], params))
                        for a in args]
            self.fns[kind] = (None, args)
        self.queries = {"saved_bytes": lambda: 0, "workspace_bytes": lambda: 0}
        self.ctx = None
        self.err = 0
        self.fault = None
        spec = os.environ.get("ATTNC_GPU_BENCH_FAKE_FAULT", "")
        if ":" in spec:
            sub, mode = spec.rsplit(":", 1)
            self.fault_spec = (sub, mode)
        else:
            self.fault_spec = None

    def set_item(self, item):
        self.fault = None
        if self.fault_spec and self.fault_spec[0] in item:
            self.fault = self.fault_spec[1]

    def status_string(self, st):
        return STATUS_NAMES.get(st, f"status {st}")

    def create_context(self):
        self.ctx = 1

    def device_name(self):
        return "fake CPU device"

    def destroy(self):
        self.ctx = None

    def last_error(self):
        return "fake error" if self.err else ""

    def finish(self):
        st, self.err = self.err, 0
        return st, ("DEVICE_ERROR: fake error" if st else "")

    def call(self, kind, tensors, stream):
        import torch
        if self.fault == "crash":
            import signal
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.fault == "cudaerr":
            raise RuntimeError("CUDA error: an illegal memory access was encountered (fake)")
        if self.fault == "hang":
            time.sleep(3600)
        if self.fault == "status":
            return 7, "DEVICE_ERROR: fake launch failure"
        p = self.p
        names = [a["name"] for a in self.fns[kind][1]]
        f32 = {n: tensors[n].to(torch.float32) for n in ("q", "k", "v") }
        slopes = tensors["slopes"].to(torch.float32) if "slopes" in names else None
        lengths = tensors["len"] if "len" in names else None
        scale = self.entry.get("scale", 1.0 / math.sqrt(p["D"]))
        if kind == "bwd":
            leaves = {n: t.detach().clone().requires_grad_() for n, t in f32.items()}
            if slopes is not None:
                leaves["slopes"] = slopes.detach().clone().requires_grad_()
            o, _ = reference(torch, p, leaves["q"], leaves["k"], leaves["v"],
                             leaves.get("slopes"), lengths, scale)
            (o * tensors["d_o"].to(torch.float32)).sum().backward()
            for n, leaf in leaves.items():
                tensors["d_" + n].copy_(leaf.grad)
        else:
            with torch.no_grad():
                o, lse = reference(torch, p, f32["q"], f32["k"], f32["v"], slopes, lengths, scale)
            tensors["o"].copy_(o)
            if kind == "fwd":
                tensors["saved0"].copy_(lse)
        if self.fault == "nan":
            for a in self.fns[kind][1]:
                if a["output"]:
                    tensors[a["name"]].view(-1)[0] = float("nan")
        return 0, ""


def open_lib(prebuilt, entry, params=None):
    return FakeLib(prebuilt, entry, params) if FAKE else Lib(prebuilt, entry)


def shrink_shape(shape, old, new):
    """An argument's shape with the timing shapes shrunk (--fake-cpu)."""
    m = {old["B"]: new["B"], old["H"]: new["H"], old["Sq"]: new["Sq"]}
    return [m.get(x, x) if i < len(shape) - 1 or len(shape) < 4 else x
            for i, x in enumerate(shape)]


# ================================================== the float64 reference

def reference(torch, p, q, k, v, slopes, lengths, scale):
    """Attention with plain torch ops in the inputs' dtype and device: scores
    = Q K^T * scale (+ slopes[h] * (j - i) for ALiBi), causal (j <= i) and
    key-length (j < len[b]) masks -> -inf, softmax (a row with no visible key
    gets P = 0, LSE = -inf), P V; GQA: query head h reads KV head
    h / (H / Hkv). Returns (O, LSE)."""
    H, Hkv, Sq, Skv = p["H"], p["Hkv"], p["Sq"], p["Skv"]
    dev = q.device
    kr = k.repeat_interleave(H // Hkv, dim=1) if Hkv != H else k
    vr = v.repeat_interleave(H // Hkv, dim=1) if Hkv != H else v
    s = torch.matmul(q, kr.transpose(-1, -2)) * scale
    i = torch.arange(Sq, device=dev).view(Sq, 1)
    j = torch.arange(Skv, device=dev).view(1, Skv)
    if p.get("softcap"):
        s = p["softcap"] * torch.tanh(s / p["softcap"])
    if slopes is not None:
        s = s + slopes.view(1, H, 1, 1) * (j - i).to(s.dtype).view(1, 1, Sq, Skv)
    visible = torch.ones(q.shape[0], 1, Sq, Skv, dtype=torch.bool, device=dev)
    if p.get("causal"):
        visible = visible & (j <= i).view(1, 1, Sq, Skv)
    if p.get("window"):
        visible = visible & (i - j < p["window"]).view(1, 1, Sq, Skv)
    if p.get("varlen"):  # i and j in one packed sequence [cu[d], cu[d+1])
        same = torch.zeros(Sq, Skv, dtype=torch.bool, device=dev)
        for lo, hi in zip(p["varlen"], p["varlen"][1:]):
            same = same | ((i >= lo) & (i < hi) & (j >= lo) & (j < hi))
        visible = visible & same.view(1, 1, Sq, Skv)
    if lengths is not None:
        visible = visible & (j.view(1, 1, 1, Skv) < lengths.view(-1, 1, 1, 1).to(torch.int64))
    s = s.masked_fill(~visible, float("-inf"))
    m = s.amax(dim=-1, keepdim=True).detach()
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    den = e.sum(dim=-1, keepdim=True)
    prob = e / torch.where(den == 0, torch.ones_like(den), den)
    o = torch.matmul(prob, vr)
    lse = (torch.log(den) + m).squeeze(-1)
    return o, lse


def reference_selftest(torch):
    """reference() against torch's SDPA (math backend) in float64, with a
    float mask for causal/lengths/ALiBi and K, V repeated for GQA: O and the
    gradients of Q, K, V and the slopes. Returns (worst relative error, text)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    worst = 0.0
    g = torch.Generator(device=DEV)
    g.manual_seed(7)
    B, H, Hkv, S, D = 2, 4, 2, 37, 16
    for causal, alibi, lens, gqa in ((False, False, None, False), (True, False, None, False),
                                     (True, False, None, True), (True, True, None, False),
                                     (False, False, [37, 5], False), (True, True, [30, 11], True)):
        hkv = Hkv if gqa else H
        p = dict(B=B, H=H, Hkv=hkv, Sq=S, Skv=S, D=D, causal=causal)
        rnd = lambda *s: torch.randn(*s, generator=g, device=DEV, dtype=torch.float64)  # noqa: E731
        q, k, v, do = rnd(B, H, S, D), rnd(B, hkv, S, D), rnd(B, hkv, S, D), rnd(B, H, S, D)
        sl = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device=DEV,
                          dtype=torch.float64) if alibi else None
        ln = torch.tensor(lens, device=DEV, dtype=torch.int32) if lens else None
        grads = []
        for use_ref in (True, False):
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            if alibi:
                leaves.append(sl.clone().requires_grad_())
            if use_ref:
                o, _ = reference(torch, p, *leaves[:3], leaves[3] if alibi else None, ln,
                                 1 / math.sqrt(D))
            else:
                i = torch.arange(S, device=DEV).view(S, 1)
                j = torch.arange(S, device=DEV).view(1, S)
                mask = torch.zeros(B, H, S, S, device=DEV, dtype=torch.float64)
                if alibi:
                    mask = mask + leaves[3].view(1, H, 1, 1) * (j - i).to(torch.float64)
                vis = torch.ones(B, 1, S, S, dtype=torch.bool, device=DEV)
                if causal:
                    vis = vis & (j <= i)
                if lens:
                    vis = vis & (j.view(1, 1, 1, S) < ln.view(-1, 1, 1, 1))
                mask = mask.masked_fill(~vis, float("-inf"))
                kk, vv = leaves[1], leaves[2]
                if gqa:
                    kk = kk.repeat_interleave(H // hkv, dim=1)
                    vv = vv.repeat_interleave(H // hkv, dim=1)
                with sdpa_kernel(SDPBackend.MATH):
                    o = F.scaled_dot_product_attention(leaves[0], kk, vv, attn_mask=mask)
            (o * do).sum().backward()
            grads.append([o.detach()] + [t.grad for t in leaves])
        for a, b in zip(*grads):
            err = float((a - b).abs().max()) / max(float(b.abs().max()), 1e-300)
            worst = max(worst, err)
    ok = worst < 1e-10
    return worst, (f"  reference self-test: float64 reference vs SDPA (math) on 6 masks/GQA/ALiBi "
                   f"cases, O and all gradients: max rel error {worst:.1e} "
                   f"{'PASS' if ok else 'FAIL'}")


def compare(torch, got, ref):
    """(max abs error, max error / max|ref|, index of the worst element,
    max|ref|). Equal infinities count as equal; NaN or an unequal infinity is
    an error of inf."""
    g = got.detach().to(torch.float64)
    r = ref.detach().to(torch.float64)
    if g.shape != r.shape:
        return float("inf"), float("inf"), [], 0.0
    diff = (g - r).abs()
    diff = torch.where(g == r, torch.zeros_like(diff), diff)
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    if diff.numel() == 0:
        return 0.0, 0.0, [], 0.0
    flat = int(torch.argmax(diff).item())
    max_abs = float(diff.view(-1)[flat].item())
    fin = r[torch.isfinite(r)]
    ref_max = float(fin.abs().max().item()) if fin.numel() else 0.0
    rel = max_abs / ref_max if ref_max > 0 else max_abs
    idx = []
    for n in reversed(list(g.shape)):
        idx.append(flat % n)
        flat //= n
    return max_abs, rel, list(reversed(idx)), ref_max


# ==================================================== state file (children)

class State:
    """JSON lines shared by the driver and its children: "begin"/"end" of each
    item and its record, so that a crashed child's item is known and a
    restarted child skips what is done."""

    def __init__(self, path):
        self.path = path

    def write(self, **rec):
        rec.setdefault("t", time.time())
        with open(self.path, "a") as f:
            f.write(json.dumps(rec, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read(self):
        if not os.path.exists(self.path):
            return []
        out = []
        with open(self.path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out


# ============================================================ (a) the check

def check_items(manifest):
    items = [("reference-selftest", None, None)]
    for e in manifest["libs"]:
        if e.get("purpose") != "check":
            continue
        if e["params"].get("lengths"):
            B, S = e["params"]["B"], e["params"]["Skv"]
            # A long and a short batch; then a batch with no key at all
            # (fully masked rows: O = 0, LSE = -inf, gradients 0).
            short = ([S, 37] + [S] * B)[:B]
            empty = ([0, (S + 1) // 2] + [S] * B)[:B]
            items.append((f"{e['name']}:len={','.join(map(str, short))}", e, short))
            items.append((f"{e['name']}:len={','.join(map(str, empty))}", e, empty))
        else:
            items.append((e["name"], e, None))
    return items


def run_check_item(torch, lib, item, lengths_list, stream):
    """One correctness case; returns its record (tensors: label -> errors)."""
    p = lib.p
    dt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[p["dtype"]]
    tol = TOL[p["dtype"]]
    gen = torch.Generator(device=DEV)
    gen.manual_seed(zlib.crc32(lib.name.encode()))
    B, H, Hkv, Sq, Skv, D = p["B"], p["H"], p["Hkv"], p["Sq"], p["Skv"], p["D"]

    def rnd(*shape):
        return torch.randn(*shape, generator=gen, device=DEV, dtype=torch.float32).to(dt)

    Dv = p.get("Dv", D)
    inputs = {"q": rnd(B, H, Sq, D), "k": rnd(B, Hkv, Skv, D), "v": rnd(B, Hkv, Skv, Dv)}
    if p.get("alibi"):
        inputs["slopes"] = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)],
                                        device=DEV, dtype=torch.float32)
    if p.get("lengths"):
        inputs["len"] = torch.tensor(lengths_list, device=DEV, dtype=torch.int32)
    if p.get("varlen"):
        inputs["cu"] = torch.tensor(p["varlen"], device=DEV, dtype=torch.int32)
    d_o = rnd(B, H, Sq, Dv)
    originals = {n: t.clone() for n, t in inputs.items()}

    # The float64 reference and its gradients (autograd), from the same
    # (rounded) inputs.
    r64 = {n: t.detach().to(torch.float64).requires_grad_(n not in ("len", "cu"))
           for n, t in inputs.items()}
    o_ref, lse_ref = reference(torch, p, r64["q"], r64["k"], r64["v"], r64.get("slopes"),
                               inputs.get("len"), lib.entry.get("scale", 1.0 / math.sqrt(D)))
    (o_ref * d_o.to(torch.float64)).sum().backward()
    ref = {"o": o_ref.detach(), "lse": lse_ref.detach()}
    for n, t in r64.items():
        if t.requires_grad:
            ref["d_" + n] = t.grad

    rec = dict(item=item, lib=lib.name, dtype=p["dtype"], variant=p["variant"], D=D,
               tensors={}, errors=[], status="PASS")

    def out_like(a):
        torch_dt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
                    "i32": torch.int32, "i64": torch.int64}[a["dtype"]]
        if torch_dt.is_floating_point:  # NaN: an element the kernel does not write shows
            return torch.full(a["shape"], float("nan"), device=DEV, dtype=torch_dt)
        return torch.full(a["shape"], -12345, device=DEV, dtype=torch_dt)

    def invoke(kind, tensors):
        _, args = lib.fns[kind]
        for a in args:
            if a["output"]:
                tensors[a["name"]] = out_like(a)
            elif a["name"] not in tensors:
                raise RuntimeError(f"{kind}: no tensor for the input {a['name']}")
            t = tensors[a["name"]]
            if list(t.shape) != list(a["shape"]):
                raise RuntimeError(f"{kind}: {a['name']} has shape {list(t.shape)}, "
                                   f"the header says {a['shape']}")
        sync(torch)
        st, msg = lib.call(kind, tensors, stream)
        if st != 0:
            rec["errors"].append(f"{kind} returned {st} ({msg})")
            return False
        sync(torch)  # a fault raises here (the child then stops; see child_check)
        fst, fmsg = lib.finish()
        if fst != 0:
            rec["errors"].append(f"{kind}: attnc_cuda_finish {fst} ({fmsg})")
            return False
        return True

    def record(label, got, refname, tol_t, info=False):
        max_abs, rel, idx, ref_max = compare(torch, got, ref[refname])
        ok = rel <= tol_t
        rec["tensors"][label] = dict(abs=max_abs, rel=rel, tol=tol_t, ok=ok, info=info,
                                     worst=idx, ref_max=ref_max)
        if not ok and not info:
            rec["status"] = "FAIL"

    if "f" in lib.fns:  # the forward alone
        t = dict(inputs)
        if invoke("f", t):
            record("o", t["o"], "o", tol)
    if "fwd" in lib.fns:  # f_fwd, then f_bwd on its outputs
        t = dict(inputs)
        if invoke("fwd", t):
            record("o(fwd)", t["o"], "o", tol)
            if "saved0" in t and list(t["saved0"].shape) == list(ref["lse"].shape):
                record("lse", t["saved0"], "lse", 1e-4 if p["dtype"] == "f32" else 1e-2,
                       info=True)
            if "bwd" in lib.fns:
                tb = dict(inputs)
                for a in lib.fns["fwd"][1]:
                    if a["output"]:
                        tb[a["name"]] = t[a["name"]]
                tb["d_o"] = d_o
                if invoke("bwd", tb):
                    for a in lib.fns["bwd"][1]:
                        if not a["output"]:
                            continue
                        n = a["name"]
                        if n not in ref:
                            rec["errors"].append(f"bwd output {n}: no reference for it")
                            continue
                        capture = n[2:] not in ("q", "k", "v")
                        record(n, tb[n], n, TOL_F32_CAPTURE_GRAD
                               if capture and p["dtype"] == "f32" else tol)
                    bwd_outs = {a["name"] for a in lib.fns["bwd"][1] if a["output"]}
                    missing = [n for n in ref if n.startswith("d_") and n not in bwd_outs]
                    if missing:
                        rec["errors"].append(f"f_bwd has no output {', '.join(missing)}")
            else:
                rec["errors"].append("no f_bwd")
    else:
        rec["errors"].append("no f_fwd/f_bwd (compiled with --no-backward?)")
    for n, t0 in originals.items():  # the inputs are const
        if not torch.equal(inputs[n], t0):
            rec["errors"].append(f"the input {n} was modified")
    if rec["errors"] and rec["status"] == "PASS":
        rec["status"] = "FAIL"
    return rec


CHECK_COLS = ["o", "o(fwd)", "d_q", "d_k", "d_v", "d_slopes", "lse"]


def check_header():
    return ("  case                              result  " +
            " ".join(f"{c:>9s}" for c in CHECK_COLS))


def format_check(rec):
    if rec["item"] == "reference-selftest":
        return rec.get("text") or f"  reference self-test: {rec['status']} {rec.get('errors')}"
    t = rec.get("tensors", {})
    case = rec["item"].replace("chk_", "")
    rel = " ".join(f"{(fmt_e(t[c]['rel']) + ('!' if not t[c]['ok'] else '')):>9s}"
                   if c in t else f"{'-':>9s}" for c in CHECK_COLS)
    ab = " ".join(f"{fmt_e(t[c]['abs']):>9s}" if c in t else f"{'':>9s}" for c in CHECK_COLS)
    lines = [f"  {case:33s} {rec['status']:6s}  {rel}"]
    if t:
        lines.append(f"  {'':33s} {'abs':6s}  {ab}")
    for c in CHECK_COLS:
        if c in t and not t[c]["ok"]:
            lines.append(f"      {c}: max abs {t[c]['abs']:.3e} (rel {t[c]['rel']:.3e} > "
                         f"{t[c]['tol']:g}{', info only' if t[c]['info'] else ''}) at "
                         f"{t[c]['worst']}, max|ref| {t[c]['ref_max']:.3e}")
    for e in rec.get("errors", []):
        lines.append(f"      error: {e}")
    return "\n".join(lines)


def child_check(args, torch, manifest, state, skip):
    stream = stream_handle(torch)
    current = None  # (library name, Lib): one context per library, kept across its items
    for item, entry, lens in check_items(manifest):
        if item in skip:
            continue
        if time.time() > args.deadline - 5:
            state.write(event="skip", item=item, why="time budget")
            say(f"  {item}: skipped (time budget)")
            continue
        if current and (entry is None or current[0] != entry["name"]):
            current[1].destroy()
            current = None
        state.write(event="begin", item=item)
        try:
            if entry is None:
                worst, text = reference_selftest(torch)
                rec = dict(item=item, status="PASS" if worst < 1e-10 else "FAIL", text=text,
                           tensors={}, errors=[])
            elif "error" in entry:
                rec = dict(item=item, lib=entry["name"], status="ERROR", tensors={},
                           errors=["not built: " + entry["error"].strip().splitlines()[0]])
            else:
                if current is None:
                    current = (entry["name"], open_lib(args.prebuilt, entry))
                    current[1].create_context()
                if FAKE:
                    current[1].set_item(item)
                rec = run_check_item(torch, current[1], item, lens, stream)
        except Exception as e:  # noqa: BLE001
            msg = f"{type(e).__name__}: {e}".strip().splitlines()[0][:300]
            rec = dict(item=item, lib=entry and entry["name"], tensors={}, errors=[msg],
                       status="CRASH" if is_fatal(msg) else "ERROR")
        state.write(event="end", item=item, part="check", rec=rec)
        say(format_check(rec))
        if rec["status"] == "CRASH":
            return 3  # the CUDA context may be unusable: the driver restarts us
    if current:
        current[1].destroy()
    return 0


# =========================================================== (b) the timing

def flops(p, kind):
    f = 4.0 * p["B"] * p["H"] * p["Sq"] * p["Skv"] * p["D"]
    if p.get("causal"):
        f /= 2
    return f * (3.5 if kind == "fb" else 1.0)


def tflops(p, kind, ms):
    return flops(p, kind) / (ms * 1e-3) / 1e12


def time_fn(torch, fn, cap_s, max_reps=50, warm_up=True):
    """Median time (ms) of fn: one warm-up call unless warm_up is False (its
    wall time is returned as well: module loads, autotuning, compiles), one
    event-timed call as the estimate, then as many event-timed repetitions as
    fit in cap_s (3 to max_reps; none when one call takes over a third of
    cap_s). CUDA events around each call; the median includes the estimate."""
    first_s = None
    if warm_up:
        t0 = time.perf_counter()
        fn()
        sync(torch)
        first_s = time.perf_counter() - t0
    s, e = event(torch), event(torch)
    s.record()
    fn()
    e.record()
    sync(torch)
    est = s.elapsed_time(e)
    times = [est]
    cap_ms = cap_s * 1000.0
    if est * 3 <= cap_ms:
        reps = int(min(max_reps, max(3, (cap_ms - est) / max(est, 1e-3))))
        evs = [(event(torch), event(torch)) for _ in range(reps)]
        for a, b in evs:
            a.record()
            fn()
            b.record()
        sync(torch)
        times += [a.elapsed_time(b) for a, b in evs]
    return statistics.median(times), len(times), first_s


def bench_configs(manifest):
    cfgs = [e for e in manifest["libs"] if e.get("purpose") == "bench"]
    cfgs.sort(key=lambda e: (e["params"]["Sq"], e["params"]["D"], e["params"]["causal"],
                             e["params"].get("label", "")))
    return cfgs


def bench_params(entry):
    """The shapes a timing config runs at (shrunk under --fake-cpu)."""
    p = dict(entry["params"])
    if FAKE:
        p.update(B=1, H=2, Hkv=2, Sq=p["Sq"] // 32, Skv=p["Skv"] // 32)
    return p


def cfg_label(p):
    return (f"S={p['Sq']} D={p['D']} {'causal' if p['causal'] else 'full'}"
            + (f" {p['label']}" if p.get("label") else ""))


def timing_items(manifest, flex):
    items = []
    cfgs = bench_configs(manifest)
    # Variants of an attnc config (params "base") share its peers' timings.
    for e in cfgs:
        items.append((f"attnc:{e['name']}", "attnc", e))
        if "base" not in e["params"]:
            items.append((f"flash:{e['name']}", "flash", e))
    if flex:
        for e in cfgs:
            if "base" not in e["params"]:
                items.append((f"flex:{e['name']}", "flex", e))
    return items


def make_inputs(torch, p, requires_grad=False):
    g = torch.Generator(device=DEV)
    g.manual_seed(1234 + p["Sq"] + p["D"])
    B, H, Hkv, S, D = p["B"], p["H"], p["Hkv"], p["Sq"], p["D"]
    mk = lambda *s: torch.randn(*s, generator=g, device=DEV, dtype=torch.bfloat16)  # noqa: E731
    q, k, v, do = mk(B, H, S, D), mk(B, Hkv, S, D), mk(B, Hkv, S, D), mk(B, H, S, D)
    if requires_grad:
        q, k, v = (t.requires_grad_() for t in (q, k, v))
    return q, k, v, do


def flash_outputs(torch, p, q, k, v, do):
    """SDPA (flash backend) O and gradients of the same inputs, for the
    sanity check of attnc's outputs at the timing shapes."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=bool(p["causal"]))
    o.backward(do)
    return o.detach(), qq.grad, kk.grad, vv.grad


def measure_attnc(args, torch, entry, prior):
    p = bench_params(entry)
    stream = stream_handle(torch)
    lib = open_lib(args.prebuilt, entry, p if FAKE else None)
    lib.create_context()
    if FAKE:
        lib.set_item(f"attnc:{entry['name']}")
    rec = dict(item=f"attnc:{entry['name']}", peer="attnc", lib=entry["name"], params=p,
               fwd=None, fb=None, notes=[])
    q, k, v, do = make_inputs(torch, p)
    t = {"q": q, "k": k, "v": v, "d_o": do}
    dts = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    for kind in ("f", "fwd", "bwd"):
        for a in lib.fns.get(kind, (None, []))[1]:
            if a["name"] not in t:
                t[a["name"]] = torch.empty(a["shape"], device=DEV, dtype=dts[a["dtype"]])
    ws = lib.queries.get("workspace_bytes")
    if ws and ws() > 0:
        rec["notes"].append(f"workspace_bytes() = {ws()}: the ABI asks for a caller workspace?")

    def checked(kind):
        st, msg = lib.call(kind, t, stream)
        if st != 0:
            raise RuntimeError(f"{entry['name']} {kind} returned {st} ({msg})")

    def finish_ok(what):
        sync(torch)
        st, msg = lib.finish()
        if st != 0:
            raise RuntimeError(f"{what}: attnc_cuda_finish {st} ({msg})")

    def fwd():
        lib.call("f", t, stream)

    def fb():
        lib.call("fwd", t, stream)
        lib.call("bwd", t, stream)

    # At S=8192, not what took over a second per call at S=4096 (~4x here).
    smaller = [r for r in prior if r.get("peer") == "attnc" and r["params"]["D"] == p["D"]
               and r["params"]["causal"] == p["causal"] and r["params"]["Sq"] < p["Sq"]]
    kinds = ["fwd"] + (["fb"] if "bwd" in lib.fns else [])
    if "bwd" not in lib.fns:
        rec["notes"].append("no f_bwd")
    for kind in list(kinds):
        prev = [r for r in smaller if r.get(kind)]
        if prev and prev[0][kind] > 1000.0:
            est = prev[0][kind] * (p["Sq"] / prev[0]["params"]["Sq"]) ** 2
            rec["notes"].append(f"{kind} not run: {fmt_ms(prev[0][kind])} ms at "
                                f"S={prev[0]['params']['Sq']} (> 1 s; ~{est / 1000:.1f} s here)")
            kinds.remove(kind)
    if not kinds:
        lib.destroy()
        return rec

    # The first call (module load), then attnc's O and gradients against flash's.
    t0 = time.perf_counter()
    checked("f")
    finish_ok("f")
    rec["first_call_s"] = time.perf_counter() - t0
    sanity = {}
    if "fb" in kinds:
        checked("fwd")
        checked("bwd")
        finish_ok("fwd+bwd")
    try:
        fo, fdq, fdk, fdv = flash_outputs(torch, p, q, k, v, do)
        sanity["o"] = compare(torch, t["o"], fo)[1]
        if "fb" in kinds:
            for n, r in (("d_q", fdq), ("d_k", fdk), ("d_v", fdv)):
                sanity[n] = compare(torch, t[n], r)[1]
        del fo, fdq, fdk, fdv
    except Exception as e:  # noqa: BLE001
        if is_fatal(str(e)):
            raise
        rec["notes"].append(f"sanity vs flash: {type(e).__name__}: {str(e).strip()[:200]}")
    rec["sanity"] = sanity
    rec["sanity_ok"] = all(x <= TOL["bf16"] for x in sanity.values()) if sanity else None

    for kind in kinds:
        if time.time() > args.deadline - 20:
            rec["notes"].append(f"{kind} not timed: time budget")
            continue
        # The calls above were the warm-up.
        ms, n, _ = time_fn(torch, fwd if kind == "fwd" else fb, args.cap, warm_up=False)
        finish_ok(kind)
        rec[kind], rec[kind + "_reps"] = ms, n
        say(f"    attnc {kind:3s} {cfg_label(p):22s} {fmt_ms(ms):>8s} ms "
            f"{tflops(p, kind, ms):7.3g} TFLOP/s  ({n} reps)")
    lib.destroy()
    return rec


def measure_flash(args, torch, entry):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    p = bench_params(entry)
    rec = dict(item=f"flash:{entry['name']}", peer="flash", params=p, fwd=None, fb=None, notes=[])
    q, k, v, do = make_inputs(torch, p, requires_grad=True)
    causal = bool(p["causal"])

    def fwd():
        with torch.no_grad(), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def fb():
        q.grad = k.grad = v.grad = None
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        o.backward(do)

    for kind, fn in (("fwd", fwd), ("fb", fb)):
        try:
            ms, n, _ = time_fn(torch, fn, args.cap)
            rec[kind], rec[kind + "_reps"] = ms, n
            say(f"    flash {kind:3s} {cfg_label(p):22s} {fmt_ms(ms):>8s} ms "
                f"{tflops(p, kind, ms):7.3g} TFLOP/s  ({n} reps)")
        except Exception as e:  # noqa: BLE001
            if is_fatal(str(e)):
                raise
            rec["notes"].append(f"{kind}: {type(e).__name__}: {str(e).strip()[:200]}")
            say(f"    flash {kind:3s} {cfg_label(p):22s} n/a ({rec['notes'][-1]})")
    return rec


_FLEX = {}


def measure_flex(args, torch, entry, prior):
    p = bench_params(entry)
    rec = dict(item=f"flex:{entry['name']}", peer="flex", params=p, fwd=None, fb=None, notes=[])
    compiles = [r["compile_s"] for r in prior if r.get("peer") == "flex" and r.get("compile_s")]
    need = (max(compiles) * 1.3 + 2 * args.cap + 5) if compiles else 45
    if time.time() > args.deadline - need:
        rec["notes"].append(f"not run: time budget (needs ~{need:.0f} s)")
        say(f"    flex      {cfg_label(p):22s} n/a ({rec['notes'][-1]})")
        return rec
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        if "fn" not in _FLEX:
            import torch._dynamo
            for knob in ("cache_size_limit", "recompile_limit"):
                if hasattr(torch._dynamo.config, knob):
                    setattr(torch._dynamo.config, knob, 64)
            _FLEX["fn"] = torch.compile(flex_attention, dynamic=False)
        flex = _FLEX["fn"]
        bm = None
        if p["causal"]:
            bm = create_block_mask(lambda b, h, qi, kv: qi >= kv, B=None, H=None,
                                   Q_LEN=p["Sq"], KV_LEN=p["Skv"], device=DEV)
        q, k, v, do = make_inputs(torch, p, requires_grad=not FAKE)

        # One compiled graph (inputs that need gradients) serves both timings.
        def fwd():
            flex(q, k, v, block_mask=bm)

        def fb():
            q.grad = k.grad = v.grad = None
            flex(q, k, v, block_mask=bm).backward(do)

        t0 = time.perf_counter()
        (fwd if FAKE else fb)()  # FlexAttention has no backward on the CPU
        sync(torch)
        rec["compile_s"] = time.perf_counter() - t0
        for kind, fn in (("fwd", fwd),) + ((("fb", fb),) if not FAKE else ()):
            ms, n, _ = time_fn(torch, fn, args.cap)
            rec[kind], rec[kind + "_reps"] = ms, n
            say(f"    flex  {kind:3s} {cfg_label(p):22s} {fmt_ms(ms):>8s} ms "
                f"{tflops(p, kind, ms):7.3g} TFLOP/s  ({n} reps; first call, compiling, "
                f"{rec['compile_s']:.1f} s)")
    except Exception as e:  # noqa: BLE001
        if is_fatal(str(e)):
            raise
        msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        rec["notes"].append(f"{type(e).__name__}: {msg}")
        say(f"    flex      {cfg_label(p):22s} n/a ({rec['notes'][-1]})")
    return rec


def child_timing(args, torch, manifest, state, skip):
    prior = [r["rec"] for r in state.read() if r.get("event") == "end" and r.get("rec")]
    for item, peer, entry in timing_items(manifest, not args.no_flex):
        if item in skip:
            continue
        if "error" in entry and peer == "attnc":
            rec = dict(item=item, peer=peer, params=bench_params(entry), fwd=None, fb=None,
                       notes=["not built: " + entry["error"].strip().splitlines()[0]])
            state.write(event="end", item=item, part="timing", rec=rec)
            prior.append(rec)
            continue
        if time.time() > args.deadline - 8:
            state.write(event="skip", item=item, why="time budget")
            continue
        state.write(event="begin", item=item)
        fatal = False
        try:
            if peer == "attnc":
                rec = measure_attnc(args, torch, entry, prior)
            elif peer == "flash":
                rec = measure_flash(args, torch, entry)
            else:
                rec = measure_flex(args, torch, entry, prior)
        except Exception as e:  # noqa: BLE001
            msg = f"{type(e).__name__}: {str(e).strip()}".splitlines()[0][:300]
            rec = dict(item=item, peer=peer, params=bench_params(entry), fwd=None, fb=None,
                       notes=[f"error: {msg}"], error=msg)
            say(f"    {peer:5s}     {cfg_label(bench_params(entry)):22s} error: {msg}")
            fatal = is_fatal(msg)
        state.write(event="end", item=item, part="timing", rec=rec)
        prior.append(rec)
        if fatal:
            return 3  # the CUDA context may be unusable: the driver restarts us
        if not FAKE:
            torch.cuda.empty_cache()
    return 0


# ================================================================== children

def child_main(args):
    import faulthandler
    faulthandler.enable()  # a segfault in a kernel call shows its Python stack in stderr
    state = State(args.state)
    # What an earlier child of this part did (or skipped, or crashed on).
    skip = {r["item"] for r in state.read() if r.get("event") in ("end", "skip")}
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    manifest = load_manifest(args.prebuilt)
    if not FAKE:
        torch.cuda.init()
    if (args.child == "check" or args.first) and not skip:
        say(device_line(torch, manifest, args))
    if args.child == "check" and not skip:
        say(check_header())
    if args.child == "check":
        return child_check(args, torch, manifest, state, skip)
    return child_timing(args, torch, manifest, state, skip)


# ==================================================================== driver

class Report:
    """Prints, and writes $OUT/gpu_report.txt as it goes."""

    def __init__(self):
        self.out = os.environ.get("OUT") or None
        self.f = None
        if self.out:
            try:
                os.makedirs(self.out, exist_ok=True)
                self.f = open(os.path.join(self.out, "gpu_report.txt"), "w", buffering=1)
            except OSError as e:
                print(f"(cannot write $OUT/gpu_report.txt: {e})", flush=True)
                self.out = None

    def __call__(self, *a):
        line = " ".join(str(x) for x in a)
        print(line, flush=True)
        if self.f:
            self.f.write(line + "\n")
            self.f.flush()


_CHILDREN = []


def _die_with_parent():
    """preexec_fn: the child gets SIGKILL when the driver dies (Linux)."""
    try:
        import signal
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001
        pass


# Seconds one item may run before the driver kills its child (a hung kernel):
# by the item's prefix.
ITEM_LIMIT_S = {"flex": 240.0, "attnc": 120.0, "flash": 60.0, "": 60.0}


def open_item(records):
    """The (item, begin time) a child is on: begun and not ended; or None."""
    ended = {r["item"] for r in records if r.get("event") in ("end", "skip")}
    begun = [r for r in records if r.get("event") == "begin" and r["item"] not in ended]
    return (begun[-1]["item"], begun[-1].get("t", time.time())) if begun else None


def run_child(rep, args, part, state_path, deadline, stderr_path, max_restarts=6):
    """Runs `part` in child processes until it is done, restarting past an
    item that crashed or hung (ITEM_LIMIT_S); streams the child's stdout into
    the report. Kills the child at deadline + 15 s."""
    restarts = 0
    while True:
        before = State(state_path).read()
        cmd = [sys.executable, "-u", os.path.abspath(__file__), "--child", part,
               "--prebuilt", args.prebuilt, "--state", state_path, "--deadline", str(deadline),
               "--cap", str(args.cap)]
        if args.no_flex:
            cmd.append("--no-flex")
        if FAKE:
            cmd.append("--fake-cpu")
        if part == "check" or args.part == "timing":
            cmd.append("--first")
        killed = None
        with open(stderr_path, "a") as err:
            err.write(f"\n===== {part} child, {datetime.datetime.now().isoformat()} =====\n")
            err.flush()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, bufsize=0,
                                    env=dict(os.environ, PYTHONUNBUFFERED="1"),
                                    preexec_fn=_die_with_parent)
            _CHILDREN.append(proc)
            fd = proc.stdout.fileno()
            pending = b""
            while True:
                left = deadline + 15 - time.time()
                if left <= 0:
                    proc.kill()
                    killed = "killed at the time budget"
                    break
                cur = open_item(State(state_path).read())
                if cur:
                    limit = ITEM_LIMIT_S.get(cur[0].split(":")[0], ITEM_LIMIT_S[""])
                    if os.environ.get("ATTNC_GPU_BENCH_ITEM_LIMIT"):
                        limit = float(os.environ["ATTNC_GPU_BENCH_ITEM_LIMIT"])
                    if time.time() - cur[1] > limit:
                        import signal
                        proc.send_signal(signal.SIGABRT)  # faulthandler: its Python stack
                        try:
                            proc.wait(timeout=3)
                        except subprocess.TimeoutExpired:
                            pass
                        proc.kill()
                        killed = f"killed: the item ran over {limit:.0f} s (hung?)"
                        break
                r, _, _ = select.select([fd], [], [], min(left, 2))
                if not r:
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    rep(line.decode(errors="replace"))
            if pending:
                rep(pending.decode(errors="replace"))
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            _CHILDREN.remove(proc)
            rc = proc.returncode
        if rc == 0 and not killed:
            return
        after = State(state_path).read()
        cur = open_item(after)
        why = killed or (f"exit status {rc}" + (f" (signal {-rc})" if rc < 0 else ""))
        if cur:
            item = cur[0]
            rep(f"  {item}: CRASHED ({why})")
            State(state_path).write(event="end", item=item, part=part,
                                    rec=dict(item=item, status="CRASH", crashed=why,
                                             peer=item.split(":")[0], tensors={}, errors=[why],
                                             fwd=None, fb=None, notes=[f"crashed: {why}"]))
        elif rc != 3:
            rep(f"  {part} child ended with {why}")
        if rc != 3 or killed:
            try:
                with open(stderr_path) as f:
                    text = f.read()
                tail = [ln[:200] for ln in text[text.rfind("\n===== "):].splitlines()[2:]
                        if not ln.startswith("Extension modules")][-15:]
                if "".join(tail).strip():
                    rep("  its stderr, last lines:")
                    for ln in tail:
                        rep("    " + ln.rstrip())
            except OSError:
                pass
        progressed = len(after) > len(before)
        restarts += 1
        if (killed and "time budget" in killed) or restarts > max_restarts \
                or time.time() > deadline - 15 or not progressed:
            if not killed and restarts > max_restarts:
                rep(f"  {part}: giving up after {max_restarts} restarts")
            return
        rep(f"  ({part}: going on in a fresh process)")


def driver(args):
    t_start = time.time()
    rep = Report()
    deadline = t_start + args.budget
    rep(f"== attnc CUDA target: GPU check and benchmark "
        f"({datetime.datetime.now().isoformat(timespec='seconds')}"
        f"{', --fake-cpu: NO GPU, a CPU stand-in for the kernels' if FAKE else ''}) ==")
    rep(f"host {platform.node()}, python {platform.python_version()}, "
        f"{' '.join(platform.libc_ver()) or 'libc ?'}")

    # ---- the manifest and the libraries (no GPU needed for this part).
    try:
        manifest = load_manifest(args.prebuilt)
    except (OSError, ValueError) as e:
        rep(f"no usable {args.prebuilt}/manifest.json ({e}): run bench/gpu/prepare.sh first")
        return 2
    rep(f"prebuilt {args.prebuilt}: {len(manifest['libs'])} libraries, "
        f"{manifest.get('total_bytes', 0) / 2**20:.2f} MiB, --gpu-arch={manifest.get('gpu_arch')}; "
        f"attnc {manifest.get('attnc_git')} (binary of {manifest.get('attnc_mtime', '?')}), "
        f"prepared {manifest.get('created')} on {manifest.get('host')}")
    rep(f"  {manifest.get('ptxas')}; {manifest.get('compile_cmd')}")
    rep("")
    rep("attnc compile times (measured by prepare.sh), library sizes, ptxas registers per kernel:")
    cts = []
    load_errors = []
    for e in manifest["libs"]:
        stats = e.get("ptxas")
        if isinstance(stats, list):
            regs = " ".join(f"{kernel_label(k['kernel'])}:{k['registers']}" for k in stats)
            spill = sum(k["spill_bytes"] for k in stats)
            stats = f"regs {regs}" + (f", SPILLS {spill} B" if spill else "")
        else:
            stats = ""
        if "error" in e:
            rep(f"  {e['name']:30s} {e.get('compile_s', 0):6.2f} s  NOT BUILT: "
                f"{e['error'].strip().splitlines()[0][:120]}")
            continue
        cts.append(e["compile_s"])
        try:
            Lib(args.prebuilt, e)
        except (OSError, AttributeError) as x:
            load_errors.append(f"{e['lib']}: {x}")
        rep(f"  {e['name']:30s} {e['compile_s']:6.2f} s  {e.get('so_bytes', 0) / 1024:6.1f} KiB  "
            f"{stats}")
    if cts:
        rep(f"  compile time: total {sum(cts):.1f} s, median {statistics.median(cts):.2f} s, "
            f"max {max(cts):.2f} s over {len(cts)} specs")
    if load_errors:
        rep("cannot load prebuilt libraries:")
        for x in load_errors:
            rep("  " + x)
    rep("")

    # ---- torch and the GPU.
    try:
        import torch
    except ImportError as e:
        rep(f"no torch here ({e}): nothing to run on a GPU. {len(cts) - len(load_errors)} of "
            f"{len(manifest['libs'])} libraries built and load.")
        probe_no_device(rep, args, manifest)
        return 2
    rep(f"torch {torch.__version__} (CUDA {torch.version.cuda}), "
        f"triton {module_version('triton')}")
    if FAKE:
        rep("--fake-cpu: the kernels are a float32 CPU stand-in; timings mean nothing")
    elif not torch.cuda.is_available():
        rep("torch sees no CUDA device: nothing to run (--fake-cpu tests this script on the CPU).")
        probe_no_device(rep, args, manifest)
        return 2
    else:
        # The device's details come from the children: the driver makes no
        # CUDA context of its own.
        rep(f"{torch.cuda.device_count()} CUDA device(s); nvidia-smi: {nvidia_smi()}")
    if load_errors:
        return 2
    rep("")

    tmp = tempfile.mkdtemp(prefix="attnc-gpu-bench.")
    stderr_path = os.path.join(rep.out or tmp, "gpu_bench_stderr.txt")
    open(stderr_path, "w").close()
    records = []
    rc = 0
    if args.part in ("all", "check"):
        rep(f"== (a) correctness: B=2 H=4 S=257, against float64 (plain torch ops on the "
            f"{'CPU' if FAKE else 'GPU'}, autograd) ==")
        rep(f"  rel = max|err| / max|ref| per tensor (abs: max|err|); tolerance on rel: f32 "
            f"{TOL['f32']:g} (f32 d_slopes {TOL_F32_CAPTURE_GRAD:g}), bf16 {TOL['bf16']:g}; "
            f"'!' = over it")
        rep("  o = f's output, o(fwd) = f_fwd's, d_* = f_bwd's; lse = f_fwd's saved0 vs the "
            "reference LSE (information, not judged)")
        state = os.path.join(tmp, "check.jsonl")
        check_deadline = (min(deadline - 60, time.time() + args.check_budget)
                          if args.part == "all" else deadline)
        run_child(rep, args, "check", state, check_deadline, stderr_path)
        st = State(state).read()
        recs = [r["rec"] for r in st if r.get("event") == "end"]
        records += recs
        skipped = [r["item"] for r in st if r.get("event") == "skip"]
        n_pass = sum(r.get("status") == "PASS" for r in recs)
        bad = [f"{r['item']} ({r.get('status')})" for r in recs if r.get("status") != "PASS"]
        never = [i for i, _, _ in check_items(manifest)
                 if i not in {r["item"] for r in recs} and i not in skipped]
        rep(f"  correctness: {n_pass}/{len(recs)} PASS" +
            (f"; not passing: {', '.join(bad)}" if bad else "") +
            (f"; skipped (time): {', '.join(skipped)}" if skipped else "") +
            (f"; not run: {', '.join(never)}" if never else ""))
        if bad or not recs or never:
            rc = 1
        rep(f"  ({time.time() - t_start:.0f} s elapsed)")
        rep("")
    if args.part in ("all", "timing"):
        rep(f"== (b) timing: bf16, B=4, H=16; attnc vs SDPA flash and FlexAttention; CUDA events, "
            f"median of adaptive reps (<= ~{args.cap:g} s per measurement) ==")
        state = os.path.join(tmp, "timing.jsonl")
        run_child(rep, args, "timing", state, deadline - 5, stderr_path)
        trecs = [r["rec"] for r in State(state).read() if r.get("event") == "end"]
        records += trecs
        timing_table(rep, manifest, trecs)
        if any(r.get("peer") == "attnc" and (r.get("sanity_ok") is False or r.get("status") == "CRASH"
                                             or r.get("error")) for r in trecs):
            rc = 1
    rep("")
    rep(f"total {time.time() - t_start:.0f} s; exit status {rc}")
    if rep.out:
        try:
            with open(os.path.join(rep.out, "gpu_results.json"), "w") as f:
                json.dump(dict(records=records, manifest=manifest), f, indent=1, default=str)
        except OSError:
            pass
    return rc


def timing_table(rep, manifest, recs):
    by = {}
    for r in recs:
        peer = r.get("peer") or r["item"].split(":")[0]
        by[(peer, r["item"].split(":", 1)[1])] = r
    cfgs = bench_configs(manifest)
    rep("")
    rep("  ms per call (TFLOP/s). FLOPs: forward 4*B*H*S*S*D, halved when causal; "
        "forward+backward 3.5x. ratio = attnc TFLOP/s / peer TFLOP/s (< 1: attnc slower)")
    for kind, title in (("fwd", "forward"), ("fb", "forward+backward")):
        rep(f"  {title}:")
        rep(f"    {'config':22s} {'attnc':>17s} {'flash':>17s} {'flex':>17s} "
            f"{'attnc/flash':>11s} {'attnc/flex':>10s}")
        for e in cfgs:
            p = bench_params(e)
            cells, ms = [], {}
            for peer in ("attnc", "flash", "flex"):
                name = e["name"] if peer == "attnc" else e["params"].get("base", e["name"])
                r = by.get((peer, name))
                v = r.get(kind) if r else None
                ms[peer] = v
                cells.append(f"{fmt_ms(v)} ({tflops(p, kind, v):.3g})" if v else "n/a")

            def ratio(peer):
                return f"{ms[peer] / ms['attnc']:.3f}" if ms["attnc"] and ms[peer] else "n/a"
            rep(f"    {cfg_label(p):22s} {cells[0]:>17s} {cells[1]:>17s} {cells[2]:>17s} "
                f"{ratio('flash'):>11s} {ratio('flex'):>10s}")
    rep(f"  attnc's O, dQ, dK, dV at these shapes vs SDPA flash's (bf16 both; max|err|/max|ref|, "
        f"tolerance {TOL['bf16']:g}), its first call (module load), notes:")
    for e in cfgs:
        p = bench_params(e)
        r = by.get(("attnc", e["name"]))
        if not r:
            rep(f"    {cfg_label(p):22s} not run")
            continue
        san = r.get("sanity") or {}
        s = " ".join(f"{k} {fmt_e(v)}" for k, v in san.items())
        ok = {True: "PASS", False: "FAIL", None: "n/a "}[r.get("sanity_ok")]
        fc = f"first call {r['first_call_s'] * 1000:.0f} ms" if r.get("first_call_s") else ""
        rep(f"    {cfg_label(p):22s} {ok} {s}  {fc}")
        for n in r.get("notes", []):
            rep(f"      {n}")
    cfgs = [e for e in cfgs if "base" not in e["params"]]
    for peer in ("flash", "flex"):
        notes = [(cfg_label(bench_params(e)), n) for e in cfgs
                 for n in (by.get((peer, e["name"])) or {}).get("notes", [])]
        if notes and len(notes) == len(cfgs) and len({n for _, n in notes}) == 1:
            rep(f"    {peer}, every config: {notes[0][1]}")
        else:
            for c, n in notes:
                rep(f"    {peer} {c}: {n}")
    comp = [(cfg_label(bench_params(e)), by[("flex", e["name"])]["compile_s"]) for e in cfgs
            if by.get(("flex", e["name"]), {}).get("compile_s")]
    if comp:
        rep("  flex first calls (torch.compile of forward+backward):")
        for i in range(0, len(comp), 4):
            rep("    " + ", ".join(f"{c} {s:.1f} s" for c, s in comp[i:i + 4]))


def probe_no_device(rep, args, manifest):
    """Without a GPU: one library's attnc_cuda_context_create, to show that
    the runtime loads and what it says."""
    for e in manifest["libs"]:
        if "error" in e:
            continue
        try:
            lib = Lib(args.prebuilt, e)
            lib.create_context()
            rep(f"attnc_cuda_context_create ({e['lib']}): OK, device {lib.device_name()}")
            lib.destroy()
        except Exception as x:  # noqa: BLE001
            rep(f"{e['lib']}: {x}")
        return


def module_version(name):
    try:
        return __import__(name).__version__
    except Exception:  # noqa: BLE001
        return "n/a"


def nvidia_smi():
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                            "compute_mode", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=15)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else "n/a"
    except Exception:  # noqa: BLE001
        return "n/a"


def device_line(torch, manifest, args):
    """The device as torch and as attnc's runtime see it (printed by a child)."""
    if FAKE:
        return "  device: the CPU (--fake-cpu)"
    prop = torch.cuda.get_device_properties(0)
    line = (f"  device: {torch.cuda.get_device_name(0)}, sm_{prop.major}{prop.minor}, "
            f"{prop.multi_processor_count} SMs, {prop.total_memory / 2**30:.0f} GiB")
    for e in manifest["libs"]:
        if "error" not in e:
            try:
                lib = Lib(args.prebuilt, e)
                lib.create_context()
                line += (f"; attnc runtime: {lib.device_name()}, compute capability "
                         f"{lib.dll.attnc_cuda_compute_capability(lib.ctx)}")
                lib.destroy()
            except Exception as x:  # noqa: BLE001
                line += f"; attnc runtime: {x}"
            break
    return line


def main():
    global DEV, FAKE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prebuilt", default=DEFAULT_PREBUILT)
    ap.add_argument("--budget", type=float, default=420.0,
                    help="seconds for everything (default 420; run.sh kills at 450)")
    ap.add_argument("--check-budget", type=float, default=150.0,
                    help="at most this many seconds of --budget for the check (default 150)")
    ap.add_argument("--part", choices=("all", "check", "timing"), default="all")
    ap.add_argument("--no-flex", action="store_true", help="skip FlexAttention")
    ap.add_argument("--cap", type=float, default=2.5,
                    help="seconds of wall time per timed measurement (default 2.5)")
    ap.add_argument("--fake-cpu", action="store_true",
                    help="test this script without a GPU (a CPU stand-in for the kernels)")
    # Internal: the children.
    ap.add_argument("--child", choices=("check", "timing"), help=argparse.SUPPRESS)
    ap.add_argument("--state", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--first", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.prebuilt = os.path.abspath(args.prebuilt)
    if args.fake_cpu:
        DEV, FAKE = "cpu", True
    if args.child:
        return child_main(args)
    import signal

    def on_signal(signum, frame):
        for proc in list(_CHILDREN):
            proc.kill()
        print(f"bench.py: signal {signum}: stopped", flush=True)
        os._exit(124)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
