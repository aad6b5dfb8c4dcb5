#!/usr/bin/env python3
"""Compiles the GPU benchmark's specs with `attnc compile --target=cuda` and
links each into a self-contained shared library under bench/gpu/prebuilt/,
with a manifest.json that bench.py reads (see bench/gpu/README.md).

Runs on the machine that has attnc and the CUDA toolkit (ptxas); needs no GPU.
Usually started by prepare.sh, which finds attnc and libattnc_rt.a:

  prepare.py --attnc PATH --runtime PATH/libattnc_rt.a [--gpu-arch sm_90a]
             [--out DIR] [--cc cc] [--only SUBSTRING] [--keep-objects]

Every spec is written to OUT/<name>.mlir, compiled to <name>.o and <name>.h
(kept: the header documents the ABI), linked into OUT/lib<name>.so and
described in OUT/manifest.json: its parameters, its entry points with their
arguments in order (parsed from the generated header), the measured compile
and link times and the library's size. A spec that fails to compile or link
is recorded with its error and the others go on; the exit status is 1 then.
Standard library only (no numpy, no torch).
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# ---------------------------------------------------------------- the specs
#
# Correctness specs: B=2, H=4, S=257 (odd: not a multiple of any tile), D in
# {64, 128}, f32 and bf16, five variants. Timing specs: bf16, B=4, H=16,
# S in {4096, 8192}, D in {64, 128}, causal and not.

CHECK_VARIANTS = {
    # variant: (Hkv, causal, alibi, lengths)
    "none": (None, False, False, False),      # plain, non-causal
    "causal": (None, True, False, False),
    "gqa": (2, True, False, False),           # H=4 query heads over 2 KV heads, causal
    "alibi": (None, True, True, False),       # causal + ALiBi score_mod (slopes captured)
    "lengths": (None, False, False, True),    # per-batch key lengths, non-causal
}
# Variants checked in f16 and bf16 only (the tensor-core kernels' paths):
# name: extra parameters.
MMA_VARIANTS = {
    "window": dict(causal=True, window=100),          # sliding window of 100 keys
    "softcap": dict(softcap=30.0),                    # 30 tanh(s / 30), no capture
    "cross": dict(Sq=77, Skv=300, causal=True),       # Sq != Skv, top-left causal
    "widev": dict(Dv=128, causal=True),               # value heads wider than D (D = 64)
    # Packed sequences (varlen): rows 0-2 and 230-256 in none, one empty.
    "varlen": dict(causal=True, varlen=[3, 100, 100, 230]),
}


def check_specs():
    out = []
    base = dict(purpose="check", B=2, H=4, Sq=257, Skv=257, causal=False, alibi=False,
                lengths=False, gqa=False)
    for dtype in ("f32", "bf16"):
        for variant, (hkv, causal, alibi, lengths) in CHECK_VARIANTS.items():
            for d in (64, 128):
                out.append(dict(base, name=f"chk_{dtype}_{variant}_d{d}", Hkv=hkv or 4, D=d,
                                dtype=dtype, variant=variant, causal=causal, alibi=alibi,
                                lengths=lengths, gqa=(hkv or 4) != 4))
    for dtype in ("bf16", "f16"):
        for variant, extra in MMA_VARIANTS.items():
            for d in ((64,) if "Dv" in extra else (64, 128)):
                out.append(dict(base, name=f"chk_{dtype}_{variant}_d{d}", Hkv=4, D=d,
                                dtype=dtype, variant=variant, **extra))
    # The backward that adds dQ with atomics (--gpu-atomic-dq).
    for p in [p for p in out if p["name"] in ("chk_bf16_gqa_d64", "chk_f16_window_d128",
                                              "chk_bf16_softcap_d128")]:
        out.append(dict(p, name=p["name"] + "_atomic", flags=["--gpu-atomic-dq"]))
    # The portable GPU kernels in bf16, beside the tensor-core ones.
    out.append(dict(base, name="chk_bf16_portable_causal_d64", Hkv=4, D=64, dtype="bf16",
                    variant="causal", causal=True, flags=["--gpu-tensor-cores=false"]))
    return out


def bench_specs():
    out = []
    for s in (4096, 8192):
        for d in (64, 128):
            for causal in (False, True):
                v = "causal" if causal else "none"
                out.append(dict(
                    name=f"bench_bf16_{v}_s{s}_d{d}", purpose="bench",
                    B=4, H=16, Hkv=16, Sq=s, Skv=s, D=d, dtype="bf16", variant=v,
                    causal=causal, alibi=False, lengths=False, gqa=False))
    # The backward that adds dQ with atomics (--gpu-atomic-dq) beside the
    # default (a deterministic dQ kernel), timed against the same peers.
    for p in [p for p in out if p["Sq"] == 8192]:
        out.append(dict(p, name=p["name"] + "_atomic", label="atomic dQ", base=p["name"],
                        flags=["--gpu-atomic-dq"]))
    return out


def spec_text(p):
    """The attn-dialect spec of parameter set p: one public function @name
    over the fused attn.attention op, returning O only (so that <f>_fwd
    saves the LSE for <f>_bwd)."""
    n, dt = p["name"], p["dtype"]
    dv = p.get("Dv", p["D"])
    q = f"tensor<{p['B']}x{p['H']}x{p['Sq']}x{p['D']}x{dt}>"
    kv = f"tensor<{p['B']}x{p['Hkv']}x{p['Skv']}x{p['D']}x{dt}>"
    vt = f"tensor<{p['B']}x{p['Hkv']}x{p['Skv']}x{dv}x{dt}>"
    o = f"tensor<{p['B']}x{p['H']}x{p['Sq']}x{dv}x{dt}>"
    lse = f"tensor<{p['B']}x{p['H']}x{p['Sq']}xf32>"
    args = [f"%q: {q}", f"%k: {kv}", f"%v: {vt}"]
    opts = ""
    if p["causal"]:
        opts += " causal"
    if p.get("window"):
        opts += f" window {p['window']}"
    if p["lengths"]:
        args.append(f"%len: tensor<{p['B']}xi32>")
        opts += f" lengths(%len : tensor<{p['B']}xi32>)"
    if p.get("varlen"):
        cu = f"tensor<{len(p['varlen'])}xi32>"
        args.append(f"%cu: {cu}")
        opts += f" varlen(%cu : {cu})"
    region = ""
    if p["alibi"]:
        sl = f"tensor<{p['H']}xf32>"
        args.append(f"%slopes: {sl}")
        opts += f" score_captures(%slopes : {sl})"
        region = f"""
      score_mod {{
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: {sl}):
    %m = tensor.extract %sl[%h] : {sl}
    %d = arith.subi %j, %i : index
    %di = arith.index_cast %d : index to i32
    %df = arith.sitofp %di : i32 to f32
    %bias = arith.mulf %m, %df : f32
    %r = arith.addf %s, %bias : f32
    attn.yield %r : f32
  }}"""
    if p.get("softcap"):
        c = p["softcap"]
        region = f"""
      score_mod {{
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
    %c = arith.constant {c:e} : f32
    %x = arith.divf %s, %c : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %c : f32
    attn.yield %r : f32
  }}"""
    desc = (f"// bench/gpu: {p['purpose']} spec {n}: B={p['B']} H={p['H']} Hkv={p['Hkv']} "
            f"Sq={p['Sq']} Skv={p['Skv']} D={p['D']} {dt} variant={p['variant']}\n"
            "// (generated by bench/gpu/prepare.py; scale = the default 1/sqrt(D))\n")
    return (desc +
            f"func.func @{n}({', '.join(args)})\n    -> {o} {{\n"
            f"  %o, %lse = attn.attention %q, %k, %v{opts}\n"
            f"      : {q}, {kv}, {vt}\n"
            f"        -> {o}, {lse}{region}\n"
            f"  return %o : {o}\n}}\n")


# ------------------------------------------------------- the header's ABI

PROTO_RE = re.compile(r"^int32_t (\w+)\(attnc_cuda_context \*ctx, attnc_cuda_stream stream"
                      r"((?:, [^)]*)?)\);$", re.M)
ARG_RE = re.compile(r"^ \*   (\w+): \[([0-9,]*)\] (\w+)(?: \(bits\))?, (input|output)(?::.*)?$")
I64_RE = re.compile(r"^int64_t (\w+)\(void\);$", re.M)


def parse_header(text):
    """Entry points of a --target=cuda header: {name: [args]} in prototype
    order, each arg {name, shape, dtype, output}; and the int64_t queries."""
    entries = {}
    blocks = re.split(r"(?=^/\* \w+: every device pointer)", text, flags=re.M)
    for block in blocks:
        m = PROTO_RE.search(block)
        if not m:
            continue
        name = m.group(1)
        args = []
        for line in block.splitlines():
            a = ARG_RE.match(line)
            if a:
                args.append(dict(name=a.group(1),
                                 shape=[int(x) for x in a.group(2).split(",") if x],
                                 dtype=a.group(3), output=a.group(4) == "output"))
        # Cross-check against the prototype's parameter names.
        proto_names = [re.split(r"[ *]+", x.strip())[-1]
                       for x in m.group(2).split(",") if x.strip()]
        if proto_names != [a["name"] for a in args]:
            raise ValueError(f"header: {name}: documented arguments "
                             f"{[a['name'] for a in args]} != prototype {proto_names}")
        entries[name] = args
    queries = I64_RE.findall(text)
    return entries, queries


# ------------------------------------------------------ ptxas statistics

def ptxas_stats(attnc, arch, mlir, ptxas, workdir, flags=()):
    """Registers, spills and shared memory of each kernel, from `attnc compile
    --emit=ptx` assembled module by module with `ptxas -v` (what the fatbin's
    cubin gets). A list of dicts, or a string saying why there is none."""
    ptx = os.path.join(workdir, "stats.ptx")
    r, _ = run([attnc, "compile", "--target=cuda", f"--gpu-arch={arch}", *flags,
                "--emit=ptx", mlir, "-o", ptx])
    if r.returncode != 0:
        return f"--emit=ptx failed: {r.stderr.strip()[-500:]}"
    text = open(ptx).read()
    os.remove(ptx)
    starts = [m.start() for m in re.finditer(r"^//\n// Generated by LLVM", text, re.M)] or \
        [m.start() for m in re.finditer(r"^\.version", text, re.M)]
    kernels = []
    for a, b in zip(starts, starts[1:] + [len(text)]):
        mod = os.path.join(workdir, "module.ptx")
        with open(mod, "w") as f:
            f.write(text[a:b])
        r, _ = run([ptxas, f"-arch={arch}", "-v", mod, "-o", os.devnull])
        os.remove(mod)
        if r.returncode != 0:
            return f"ptxas failed: {r.stderr.strip()[-500:]}"
        k = None
        for line in r.stderr.splitlines():
            m = re.search(r"Compiling entry function '(\w+)'", line)
            if m:
                k = dict(kernel=m.group(1), registers=None, spill_bytes=0, smem_bytes=0)
                continue
            m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m and k:
                k["spill_bytes"] = int(m.group(1)) + int(m.group(2))
                continue
            m = re.search(r"Used (\d+) registers", line)
            if m and k:
                k["registers"] = int(m.group(1))
                sm = re.search(r"(\d+) bytes smem", line)
                k["smem_bytes"] = int(sm.group(1)) if sm else 0
                kernels.append(k)
                k = None
    return kernels


def kernel_label(kernel):
    """fwd, bwd, bwd_0, ... from __attnc_impl_<f>_bwd_kernel_0."""
    m = re.search(r"_(fwd|bwd)_kernel(_\d+)?$", kernel)
    return (m.group(1) + (m.group(2) or "")) if m else kernel


# ------------------------------------------------------------------- main

def run(cmd, **kw):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return r, time.perf_counter() - t0


def tool_version(cmd, last=True):
    """The last (or first) line a tool's --version prints; "n/a (...)" when it fails."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        lines = (r.stdout + r.stderr).strip().splitlines()
        return (lines[-1] if last else lines[0]) if lines else ""
    except Exception as e:  # noqa: BLE001
        return f"n/a ({e})"


def first_line(cmd):
    return tool_version(cmd, last=False)


def sha256(path):
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def git_describe():
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return head + ("+uncommitted-changes" if dirty else "")
    except Exception:  # noqa: BLE001
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attnc", required=True)
    ap.add_argument("--runtime", required=True, help="libattnc_rt.a (built PIC)")
    ap.add_argument("--gpu-arch", default="sm_90a")
    ap.add_argument("--out", default=os.path.join(HERE, "prebuilt"))
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--only", default="", help="only specs whose name contains this")
    ap.add_argument("--keep-objects", action="store_true", help="keep the .o files")
    ap.add_argument("--no-ptxas-stats", action="store_true",
                    help="skip the per-kernel register/spill statistics (ptxas -v)")
    ap.add_argument("--no-glibc-compat", action="store_true",
                    help="do not link glibc_compat.c (the libraries then need the glibc "
                         "of this machine for dlopen & co., 2.34 or later)")
    args = ap.parse_args()

    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    ptxas = shutil.which("ptxas", path=os.path.join(cuda_home, "bin")) or shutil.which("ptxas")
    specs = [p for p in check_specs() + bench_specs() if args.only in p["name"]]
    if not args.only:  # a full run starts from an empty folder (no stale libraries)
        for f in os.listdir(out):
            if re.fullmatch(r"lib\w+\.so|\w+\.(mlir|h|o)|manifest\.json", f):
                os.remove(os.path.join(out, f))
    manifest = dict(
        format=1,
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        host=platform.node(), machine=platform.machine(),
        attnc=os.path.abspath(args.attnc), attnc_git=git_describe(),
        attnc_mtime=datetime.datetime.fromtimestamp(
            os.path.getmtime(args.attnc), datetime.timezone.utc).isoformat(timespec="seconds"),
        attnc_sha256=sha256(args.attnc)[:16],
        runtime=os.path.abspath(args.runtime), gpu_arch=args.gpu_arch,
        ptxas=tool_version([ptxas, "--version"]) if ptxas else "not found",
        cc=first_line([args.cc, "--version"]),
        compile_cmd=f"attnc compile --target=cuda --gpu-arch={args.gpu_arch} X.mlir -o X.o --emit-header X.h",
        libs=[])
    # glibc_compat.c: dlopen/dlsym/dlerror/dlclose bound to GLIBC_2.2.5, so
    # that the libraries also load where glibc is older than here.
    compat = []
    if not args.no_glibc_compat:
        compat_o = os.path.join(out, "glibc_compat.o")
        r, _ = run([args.cc, "-O2", "-fPIC", "-c", os.path.join(HERE, "glibc_compat.c"),
                    "-o", compat_o])
        if r.returncode == 0:
            compat = [compat_o, "-Wl,--no-as-needed", "-l:libdl.so.2"]
        else:
            print(f"prepare: glibc_compat.c did not compile, linking without it:\n{r.stderr}",
                  file=sys.stderr)
    manifest["glibc_compat"] = bool(compat)
    manifest["link_cmd"] = (f"{args.cc} -shared -o libX.so X.o "
                            + ("glibc_compat.o " if compat else "") + "libattnc_rt.a "
                            "-Wl,-Bsymbolic -Wl,-u,attnc_status_string -Wl,--no-undefined "
                            + ("-Wl,--no-as-needed -l:libdl.so.2 " if compat else "-ldl ")
                            + "-lpthread -lm")
    failures = 0
    for p in specs:
        n = p["name"]
        mlir, obj, hdr, so = (os.path.join(out, n + ".mlir"), os.path.join(out, n + ".o"),
                              os.path.join(out, n + ".h"), os.path.join(out, f"lib{n}.so"))
        for f in (obj, hdr, so):
            if os.path.exists(f):
                os.remove(f)
        with open(mlir, "w") as f:
            f.write(spec_text(p))
        entry = dict(name=n, spec=os.path.basename(mlir), header=os.path.basename(hdr),
                     lib=os.path.basename(so), params={k: v for k, v in p.items()
                                                        if k not in ("name", "purpose")},
                     purpose=p["purpose"], scale=1.0 / p["D"] ** 0.5)
        cmd = [args.attnc, "compile", "--target=cuda", f"--gpu-arch={args.gpu_arch}",
               *p.get("flags", []), mlir, "-o", obj, "--emit-header", hdr]
        r, t = run(cmd)
        entry["compile_s"] = round(t, 3)
        entry["compile_cmd"] = " ".join(cmd)
        status = "ok"
        if r.returncode != 0:
            entry["error"] = f"attnc compile failed (exit {r.returncode}):\n{r.stdout}{r.stderr}"
        else:
            lcmd = ([args.cc, "-shared", "-o", so, obj] + compat[:1]
                    + [os.path.abspath(args.runtime), "-Wl,-Bsymbolic",
                       "-Wl,-u,attnc_status_string", "-Wl,--no-undefined"]
                    + (compat[1:] or ["-ldl"]) + ["-lpthread", "-lm"])
            lr, lt = run(lcmd)
            entry["link_s"] = round(lt, 3)
            if lr.returncode != 0:
                entry["error"] = f"link failed (exit {lr.returncode}):\n{lr.stdout}{lr.stderr}"
            else:
                entry["so_bytes"] = os.path.getsize(so)
                entry["obj_bytes"] = os.path.getsize(obj)
                try:
                    with open(hdr) as f:
                        entries, queries = parse_header(f.read())
                    entry["entries"] = {}
                    for kind, sym in (("f", n), ("fwd", n + "_fwd"), ("bwd", n + "_bwd")):
                        if sym in entries:
                            entry["entries"][kind] = dict(symbol=sym, args=entries[sym])
                    entry["queries"] = queries
                    if "f" not in entry["entries"]:
                        raise ValueError(f"no entry point {n} in the header")
                except Exception as e:  # noqa: BLE001
                    entry["error"] = f"header: {e}"
            if r.stderr.strip():
                entry["compile_stderr"] = r.stderr.strip()[-4000:]
            if not args.no_ptxas_stats and ptxas:
                entry["ptxas"] = ptxas_stats(args.attnc, args.gpu_arch, mlir, ptxas, out,
                                             p.get("flags", ()))
        if not args.keep_objects and os.path.exists(obj):
            os.remove(obj)
        if "error" in entry:
            failures += 1
            status = "FAILED: " + entry["error"].strip().splitlines()[0]
            print("\n".join(entry["error"].rstrip().splitlines()[:8]), file=sys.stderr)
        ents = ",".join(entry.get("entries", {}).keys())
        stats = entry.get("ptxas")
        if isinstance(stats, list):
            regs = " ".join(f"{kernel_label(k['kernel'])}:{k['registers']}" for k in stats)
            spill = sum(k["spill_bytes"] for k in stats)
            stats = f"regs {regs}" + (f", SPILLS {spill} B" if spill else "")
        print(f"  {n:28s} compile {entry['compile_s']:6.2f} s  "
              f"{entry.get('so_bytes', 0) / 1024:6.1f} KiB  [{ents}]  {stats or ''}  {status}",
              flush=True)
        manifest["libs"].append(entry)

    if compat and os.path.exists(compat[0]):
        os.remove(compat[0])
    # The size of what has to be copied to the GPU machine.
    total = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)
                if os.path.isfile(os.path.join(out, f)) and f != "manifest.json")
    manifest["total_bytes"] = total
    manifest["failures"] = failures
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"prepare: {len(specs) - failures}/{len(specs)} libraries in {out} "
          f"({total / 2**20:.2f} MiB), manifest.json written", flush=True)
    if total > 50 * 2**20:
        print("prepare: WARNING: prebuilt/ is over 50 MiB", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
