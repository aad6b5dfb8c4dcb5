#!/usr/bin/env bash
# Compiles the GPU benchmark's specs for --target=cuda and links each into a
# self-contained shared library in bench/gpu/prebuilt/ (+ manifest.json).
# Runs where attnc and the CUDA toolkit (ptxas) are; needs no GPU. See
# bench/gpu/README.md.
#
#   bash bench/gpu/prepare.sh [--gpu-arch sm_90a] [--attnc PATH] [--runtime PATH]
#                             [--out DIR] [--only SUBSTRING] [--keep-objects]
#                             [--no-ptxas-stats] [--no-glibc-compat]
#
# attnc: --attnc, else $ATTNC, else build/bin/attnc, else attnc on PATH.
# libattnc_rt.a: --runtime, else $ATTNC_RT, else the first one under build/
# (it must have the CUDA part: attnc_cuda_launch). The GPU architecture:
# --gpu-arch, else $GPU_ARCH, else sm_90a (H100/H200).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${ATTNC_BUILD_DIR:-$repo/build}

attnc=${ATTNC:-}
runtime=${ATTNC_RT:-}
arch=${GPU_ARCH:-sm_90a}
pass=()
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
  case "$1" in
    --gpu-arch) arch=$2; shift ;;
    --gpu-arch=*) arch=${1#*=} ;;
    --attnc) attnc=$2; shift ;;
    --runtime) runtime=$2; shift ;;
    --out|--only) pass+=("$1" "$2"); shift ;;
    --keep-objects|--no-ptxas-stats|--no-glibc-compat) pass+=("$1") ;;
    -h|--help) usage 0 ;;
    *) echo "prepare.sh: unknown option $1" >&2; usage 2 ;;
  esac
  shift
done

if [ -z "$attnc" ]; then
  if [ -x "$build/bin/attnc" ]; then attnc=$build/bin/attnc
  else attnc=$(command -v attnc || true); fi
fi
if [ -z "$attnc" ] || [ ! -x "$attnc" ]; then
  echo "prepare.sh: no attnc (build it, or give --attnc / \$ATTNC)" >&2
  exit 1
fi
if [ -z "$runtime" ]; then
  runtime=$(find "$build" -name libattnc_rt.a -not -path '*/package-test/*' 2>/dev/null | head -1)
  [ -n "$runtime" ] || runtime=$(find "$build" -name libattnc_rt.a 2>/dev/null | head -1)
fi
if [ -z "$runtime" ] || [ ! -f "$runtime" ]; then
  echo "prepare.sh: no libattnc_rt.a under $build (ninja -C $build attnc_rt, or --runtime)" >&2
  exit 1
fi
if ! nm "$runtime" 2>/dev/null | grep ' T attnc_cuda_launch$' >/dev/null; then
  echo "prepare.sh: $runtime has no CUDA part (attnc_cuda_launch); rebuild it:" \
       "ninja -C $build attnc_rt" >&2
  exit 1
fi
echo "prepare: attnc $attnc, runtime $runtime, --gpu-arch=$arch"
exec python3 "$here/prepare.py" --attnc "$attnc" --runtime "$runtime" \
  --gpu-arch "$arch" "${pass[@]+"${pass[@]}"}"
