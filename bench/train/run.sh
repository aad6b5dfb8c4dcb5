#!/usr/bin/env bash
# Training shapes, attnc against torch SDPA, forward and forward+backward,
# in the same run (bench/with_torch.sh installs torch and builds attnc;
# train.py's options pass through, see its docstring).
#
#   bash bench/train/run.sh [--no-build] [--threads N] [--dims "128"] ...
exec bash "$(dirname "$0")/../with_torch.sh" bench/train/train.py "$@"
