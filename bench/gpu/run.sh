#!/usr/bin/env bash
# The GPU check and benchmark of attnc's CUDA target, on the machine with the
# GPU (python3 with torch; no attnc needed): runs bench/gpu/bench.py on the
# libraries prepare.sh built into bench/gpu/prebuilt/. See bench/gpu/README.md.
#
#   bash bench/gpu/run.sh [bench.py options: --part check|timing, --no-flex, --budget S, --cap S]
#
# When prebuilt/ is missing and attnc is on hand (build/bin/attnc, $ATTNC or
# PATH), prepare.sh runs first. The report goes to stdout and, when $OUT is
# set, to $OUT/gpu_report.txt. Never runs longer than 450 s (+10 s to kill).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo" || exit 2

if [ ! -f "$here/prebuilt/manifest.json" ]; then
  if [ -x "${ATTNC:-$repo/build/bin/attnc}" ] || command -v attnc >/dev/null 2>&1; then
    echo "run.sh: no bench/gpu/prebuilt/manifest.json: running prepare.sh first"
    bash "$here/prepare.sh" || echo "run.sh: prepare.sh failed (status $?); going on with what it built"
  else
    echo "run.sh: no bench/gpu/prebuilt/manifest.json and no attnc to build it:" \
         "run bash bench/gpu/prepare.sh where attnc is, and copy bench/gpu/prebuilt/ here"
    exit 2
  fi
fi

export PYTHONUNBUFFERED=1
timeout --kill-after=10 450 python3 "$here/bench.py" "$@"
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "run.sh: bench.py ran past 450 s and was stopped (status $rc)"
  [ -n "${OUT:-}" ] && echo "run.sh: bench.py ran past 450 s and was stopped (status $rc)" \
    >> "$OUT/gpu_report.txt" 2>/dev/null
fi
exit "$rc"
