#!/usr/bin/env bash
# Decode attention, attnc against torch SDPA (enable_gqa), in the same run:
# installs torch from PyPI into a virtual environment (bench/.venv, or
# $VENV) the first time, builds attnc unless --no-build, then runs
# decode.py (its options pass through; see decode.py's docstring).
#
#   bash bench/decode/run.sh [--no-build] [--threads N] [--keys "4096"] ...
set -euo pipefail
cd "$(dirname "$0")/../.."
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
exec "$venv/bin/python" bench/decode/decode.py --attnc "$build/bin/attnc" "$@"
