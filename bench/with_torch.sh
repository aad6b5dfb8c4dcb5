#!/usr/bin/env bash
# Runs a bench script against torch: installs torch from PyPI into a virtual
# environment (bench/.venv, or $VENV) the first time, builds attnc unless
# --no-build, then runs SCRIPT --attnc build/bin/attnc with the other
# arguments (bench/decode/run.sh and bench/train/run.sh).
#
#   bash bench/with_torch.sh SCRIPT.py [--no-build] [script options...]
set -euo pipefail
cd "$(dirname "$0")/.."
script=$1
shift
build=${ATTNC_BUILD_DIR:-build}
venv=${VENV:-bench/.venv}
if [[ "${1:-}" == "--no-build" ]]; then
  shift
else
  bash tools/scripts/build.sh >/dev/null
fi
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch
fi
exec "$venv/bin/python" "$script" --attnc "$build/bin/attnc" "$@"
