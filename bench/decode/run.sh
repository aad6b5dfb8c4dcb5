#!/usr/bin/env bash
# Decode attention, attnc against torch SDPA (enable_gqa), in the same run
# (bench/with_torch.sh installs torch and builds attnc; decode.py's options
# pass through, see its docstring).
#
#   bash bench/decode/run.sh [--no-build] [--threads N] [--keys "4096"] ...
exec bash "$(dirname "$0")/../with_torch.sh" bench/decode/decode.py "$@"
