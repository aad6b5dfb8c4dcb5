#!/usr/bin/env bash
# Benchmarks attnc's attention kernels against the unfused OpenBLAS baseline
# (attnc-bench-openblas) for B=1, H=8, S in {1024,2048,4096}, D in {64,128},
# causal off/on, and prints one table. See bench/README.md.
#
#   bash bench/run.sh [--threads N] [--reps N] [--sizes "1024 2048"]
#                     [--dims "64 128"] [--causal "no yes"] [--no-4096]
#                     [--openblas-core auto|host|NAME] [--no-build] [--jobs N]
#                     [--attnc PATH] [--baseline PATH] [--results FILE]
#                     [--keep-tmp] [--bf16] [--rounds N]
#
# Each point runs attnc and the baseline alternately --rounds times (default
# 3): the table shows the median GFLOP/s of each and the median of the
# per-round ratios, so that a load that comes and goes on a shared machine
# moves both sides of a ratio rather than one.
#
# --bf16 also runs each spec with bf16 Q, K, V and O and adds the bf16
# forward's GFLOP/s and its ratio to the f32 forward.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${ATTNC_BUILD_DIR:-build}
threads=2
reps=5
rounds=3
sizes="1024 2048 4096"
dims="64 128"
causals="no yes"
openblas_core=host
do_build=1
jobs=""
attnc=""
baseline=""
results=""
keep_tmp=0
bf16=0

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
  case "$1" in
    --threads) threads=$2; shift ;;
    --reps) reps=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --sizes) sizes=$2; shift ;;
    --dims) dims=$2; shift ;;
    --causal) causals=$2; shift ;;
    --no-4096) sizes=$(tr ' ' '\n' <<<"$sizes" | grep -vx 4096 | tr '\n' ' ') ;;
    --openblas-core) openblas_core=$2; shift ;;
    --no-build) do_build=0 ;;
    --jobs) jobs="-j$2"; shift ;;
    --attnc) attnc=$2; shift ;;
    --baseline) baseline=$2; shift ;;
    --results) results=$2; shift ;;
    --keep-tmp) keep_tmp=1 ;;
    --bf16) bf16=1 ;;
    -h|--help) usage 0 ;;
    *) echo "run.sh: unknown option $1" >&2; usage 2 ;;
  esac
  shift
done
attnc=${attnc:-$build/bin/attnc}
baseline=${baseline:-$build/bin/attnc-bench-openblas}

if ((do_build)); then
  if [ ! -f "$build/build.ninja" ]; then
    echo "run.sh: no $build/build.ninja; run tools/scripts/build.sh first" >&2
    exit 1
  fi
  # shellcheck disable=SC2086
  ninja -C "$build" $jobs attnc attnc-bench-openblas
fi
if [ ! -x "$baseline" ]; then
  echo "run.sh: $baseline missing (is libopenblas-dev installed? see" \
       "the cmake output 'attnc bench: ...')" >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/attnc-bench.XXXXXX")
if ((keep_tmp)); then
  echo "run.sh: keeping $tmp" >&2
else
  trap 'rm -rf "$tmp"' EXIT
fi
results=${results:-$tmp/results.jsonl}
: >"$results"

# --- OpenBLAS environment -------------------------------------------------
# The environment may force OPENBLAS_CORETYPE (e.g. Haswell: AVX2 kernels on an
# AVX-512 machine) and OPENBLAS_L2_SIZE; the baseline runs without both. On a
# CPU newer than the installed OpenBLAS knows, its own detection falls back to
# an old core (0.3.21 on Emerald Rapids: Prescott, SSE3 only), so with
# --openblas-core host (the default) a core that does not use the host's
# widest vectors is replaced by the one that does: Cooperlake (AVX-512 +
# BF16), SkylakeX (AVX-512) or Haswell (AVX2). --openblas-core auto keeps
# OpenBLAS's own choice; --openblas-core NAME forces NAME.
ob_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
probe_core() { # prints the core the baseline ends up with
  "${ob_env[@]}" "$baseline" 1 1 16 16 --reps 1 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("openblas_core","?"))'
}
detected=$(probe_core)
case "$openblas_core" in
  auto) ;;
  host)
    flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
    want=""
    if grep -qw avx512f <<<"$flags"; then
      if grep -qw avx512_bf16 <<<"$flags"; then want=Cooperlake; else want=SkylakeX; fi
      case "$detected" in SkylakeX|Cooperlake|SapphireRapids) want="" ;; esac
    elif grep -qw avx2 <<<"$flags"; then
      want=Haswell
      case "$detected" in Haswell|Zen|SkylakeX|Cooperlake|SapphireRapids) want="" ;; esac
    fi
    if [ -n "$want" ]; then
      echo "run.sh: OpenBLAS detects this CPU as '$detected'; the host has" \
           "wider vectors, so the baseline runs with OPENBLAS_CORETYPE=$want" \
           "(--openblas-core auto to keep '$detected')" >&2
      ob_env+=("OPENBLAS_CORETYPE=$want")
    fi ;;
  *) ob_env+=("OPENBLAS_CORETYPE=$openblas_core") ;;
esac

# --- Memory guard ---------------------------------------------------------
# The unfused baseline keeps P for every head: B*H*S*S floats, plus an S*S
# scratch and the [B,H,S,D] tensors; attnc is given the same headroom.
mem_avail_mb=$(awk '/MemAvailable/ {print int($2/1024)}' /proc/meminfo 2>/dev/null || echo 0)
need_mb() { # S D
  echo $(( (8*$1*$1*4 + $1*$1*4 + 8*8*$1*$2*4) * 2 / 1048576 + 256 ))
}

# --- Runs -----------------------------------------------------------------
for S in $sizes; do
  for D in $dims; do
    for c in $causals; do
      case "$c" in yes|1|true|causal) causal=1 ;; *) causal=0 ;; esac
      need=$(need_mb "$S" "$D")
      if ((mem_avail_mb > 0 && need > mem_avail_mb)); then
        echo "run.sh: skipping S=$S D=$D (needs ~${need} MB, ${mem_avail_mb} MB available)" >&2
        continue
      fi
      t="tensor<1x8x${S}x${D}xf32>"
      l="tensor<1x8x${S}xf32>"
      mask=""; note=""
      if ((causal)); then mask=" causal"; note=", causal"; fi
      spec="$tmp/attn_s${S}_d${D}_c${causal}.mlir"
      cat >"$spec" <<EOF
// B=1, H=8, S=$S, D=$D$note: O = softmax(Q K^T / sqrt(D)) V.
func.func @attn(%q: $t, %k: $t, %v: $t) -> $t {
  %o, %lse = attn.attention %q, %k, %v$mask
      : $t, $t, $t -> $t, $l
  return %o : $t
}
EOF
      tag="S=$S D=$D causal=$c"
      cflag=()
      if ((causal)); then cflag=(--causal); fi
      if ((bf16)); then
        sed "s/x${S}x${D}xf32>/x${S}x${D}xbf16>/g" "$spec" >"${spec%.mlir}_bf16.mlir"
      fi
      a_outs=(); b_outs=(); c_outs=()
      for ((round = 1; round <= rounds; ++round)); do
        at="round $round/$rounds"
        echo "run.sh: $tag: attnc ($at)" >&2
        a_out="$tmp/attnc_s${S}_d${D}_c${causal}_r${round}.out"
        if "$attnc" bench "$spec" --threads "$threads" --reps "$reps" --json \
             >"$a_out" 2>"$a_out.err"; then :; else
          echo "run.sh:   attnc bench failed (rc $?): $(head -c 300 "$a_out.err" | head -n 2)" >&2
        fi
        c_out="$tmp/attnc_bf16_s${S}_d${D}_c${causal}_r${round}.out"
        : >"$c_out"
        if ((bf16)); then
          echo "run.sh: $tag: attnc bf16 ($at)" >&2
          if "$attnc" bench "${spec%.mlir}_bf16.mlir" --threads "$threads" \
               --reps "$reps" --json >"$c_out" 2>"$c_out.err"; then :; else
            echo "run.sh:   attnc bf16 bench failed (rc $?): $(head -c 300 "$c_out.err" | head -n 2)" >&2
          fi
        fi
        echo "run.sh: $tag: openblas ($at)" >&2
        b_out="$tmp/openblas_s${S}_d${D}_c${causal}_r${round}.out"
        if "${ob_env[@]}" "$baseline" --B 1 --H 8 --S "$S" --D "$D" "${cflag[@]}" \
             --threads "$threads" --reps "$reps" >"$b_out" 2>"$b_out.err"; then :; else
          echo "run.sh:   openblas baseline failed (rc $?): $(head -c 300 "$b_out.err" | head -n 2)" >&2
        fi
        a_outs+=("$a_out"); b_outs+=("$b_out"); c_outs+=("$c_out")
      done
      python3 - "$S" "$D" "$causal" "$rounds" "${a_outs[@]}" "${b_outs[@]}" \
        "${c_outs[@]}" >>"$results" <<'PY'
import json, sys

def last_json(path):
    """The last JSON object in a file (tolerates log lines around it)."""
    try:
        text = open(path).read()
    except OSError:
        return None
    try:
        v = json.loads(text)
        return v if isinstance(v, dict) else None
    except ValueError:
        pass
    dec = json.JSONDecoder()
    found = None
    i = text.find("{")
    while i != -1:
        try:
            v, end = dec.raw_decode(text, i)
            if isinstance(v, dict):
                found = v
            i = text.find("{", end)
        except ValueError:
            i = text.find("{", i + 1)
    return found

S, D, causal = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
n = int(sys.argv[4])
outs = sys.argv[5:]
# One list per implementation, one entry per round (None where a run failed).
print(json.dumps({"S": S, "D": D, "causal": causal,
                  "attnc": [last_json(p) for p in outs[:n]],
                  "openblas": [last_json(p) for p in outs[n:2 * n]],
                  "attnc_bf16": [last_json(p) for p in outs[2 * n:3 * n]]}))
PY
    done
  done
done

# --- Table ----------------------------------------------------------------
python3 - "$results" "$threads" "$reps" "$rounds" <<'PY'
import json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
threads, reps, rounds = sys.argv[2], sys.argv[3], sys.argv[4]

def num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None

def flops(S, D, causal, B=1, H=8):
    # The project's convention: 4*B*H*S*S*D forward, causal counts the
    # unmasked pairs S*(S+1)/2; forward+backward = 3.5 x forward.
    pairs = S * (S + 1) / 2 if causal else S * S
    return 4.0 * B * H * D * pairs

def gflops(res, key, f):
    """GFLOP/s from median_ms with the convention above; the reported value
    when the time is missing."""
    if not isinstance(res, dict) or not isinstance(res.get(key), dict):
        return None
    ms = num(res[key].get("median_ms"))
    if ms and ms > 0:
        return f / (ms * 1e6)
    return num(res[key].get("gflops"))

def fraction(res, key):
    if not isinstance(res, dict) or not isinstance(res.get(key), dict):
        return None
    return num(res[key].get("fraction"))

def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

def ratio(a, b):
    return a / b if a is not None and b else None

def fmt(x, spec="{:.1f}"):
    return "n/a" if x is None else spec.format(x)

def runs(r, name):
    v = r.get(name)
    return v if isinstance(v, list) else [v]

def each(r, name):
    return [x for x in runs(r, name) if isinstance(x, dict)]

cores = sorted({o.get("openblas_core", "?") for r in rows for o in each(r, "openblas")})
peaks = [num(a.get("peak_gflops")) for r in rows for a in each(r, "attnc")]
peaks = [p for p in peaks if p is not None]
print()
print(f"B=1 H=8 f32, {threads} thread(s), median of {reps} reps in each of {rounds} "
      "alternating rounds; GFLOP/s with 4*B*H*S*S*D forward (causal: S*(S+1)/2 "
      "pairs), fwd+bwd = 3.5x forward; GFLOP/s and %peak: medians over the "
      "rounds; ratios: medians of the per-round ratios")
print("OpenBLAS core: " + (", ".join(cores) if cores else "n/a") +
      "   attnc measured peak: " +
      (f"{min(peaks):.1f} to {max(peaks):.1f} GFLOP/s over {len(peaks)} probes"
       if peaks else "n/a"))
hdr = ["S", "D", "causal", "attnc fwd", "oblas fwd", "ratio",
       "attnc f+b", "oblas f+b", "ratio", "attnc %peak fwd", "f+b"]
with_bf16 = any(each(r, "attnc_bf16") for r in rows)
if with_bf16:
    hdr += ["bf16 fwd", "bf16/f32"]
table = []
warn = []
for r in rows:
    S, D, c = r["S"], r["D"], r["causal"]
    f = flops(S, D, c)
    A, B, H = runs(r, "attnc"), runs(r, "openblas"), runs(r, "attnc_bf16")
    af = [gflops(a, "forward", f) for a in A]
    bf = [gflops(b, "forward", f) for b in B]
    afb = [gflops(a, "forward_backward", 3.5 * f) for a in A]
    bfb = [gflops(b, "forward_backward", 3.5 * f) for b in B]
    for a, key, mine in [(a, "forward", x) for a, x in zip(A, af)] + \
                        [(a, "forward_backward", x) for a, x in zip(A, afb)]:
        rep = (num(a[key].get("gflops")) if isinstance(a, dict)
               and isinstance(a.get(key), dict) else None)
        if rep and mine and abs(rep / mine - 1) > 0.02:
            warn.append(f"S={S} D={D} causal={c}: attnc reports {rep:.1f} "
                        f"GFLOP/s for {key}, the convention gives {mine:.1f}")
    frf = median(fraction(a, "forward") for a in A)
    frb = median(fraction(a, "forward_backward") for a in A)
    table.append([str(S), str(D), "yes" if c else "no", fmt(median(af)),
                  fmt(median(bf)), fmt(median(map(ratio, af, bf)), "{:.2f}x"),
                  fmt(median(afb)), fmt(median(bfb)),
                  fmt(median(map(ratio, afb, bfb)), "{:.2f}x"),
                  fmt(None if frf is None else 100 * frf, "{:.1f}%"),
                  fmt(None if frb is None else 100 * frb, "{:.1f}%")])
    if with_bf16:
        hf = [gflops(h, "forward", f) for h in H]
        table[-1] += [fmt(median(hf)), fmt(median(map(ratio, hf, af)), "{:.2f}x")]
w = [max(len(h), *(len(t[i]) for t in table)) if table else len(h)
     for i, h in enumerate(hdr)]
print("  ".join(h.rjust(w[i]) for i, h in enumerate(hdr)))
for t in table:
    print("  ".join(x.rjust(w[i]) for i, x in enumerate(t)))
for m in warn:
    print("note: " + m)
if any(not each(r, "attnc") for r in rows):
    print("note: n/a under attnc: `attnc bench` failed or printed no JSON "
          "(see the messages above)")
PY
