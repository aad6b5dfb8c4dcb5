#!/usr/bin/env bash
# Installs what is missing (Debian 12 packages only), then configures and
# builds attnc into build/ (or $ATTNC_BUILD_DIR); ATTNC_JOBS: ninja's -j.
# ATTNC_SANITIZE=1: the ASan+UBSan build and the fuzzer attnc-fuzz
# (CMakeLists.txt's ATTNC_SANITIZE), into build-san/ by default; at -O1 and
# with assertions on (no -DNDEBUG), so that a misused cast<> or a broken
# invariant aborts rather than going on silently.
set -euo pipefail
cd "$(dirname "$0")/../.."

packages=(cmake ninja-build ccache mold clang-22 llvm-22-dev llvm-22-tools
          libmlir-22-dev mlir-22-tools libfmt-dev libgtest-dev libopenblas-dev
          python3 libvulkan-dev mesa-vulkan-drivers libcairo2-dev pkg-config)
sanitize=${ATTNC_SANITIZE:-0}
# compiler-rt: the ASan/UBSan runtimes and libFuzzer.
if [ "$sanitize" = 1 ]; then
  packages+=(libclang-rt-22-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  echo "attnc: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
    --no-install-recommends "${missing[@]}"
fi

build=${ATTNC_BUILD_DIR:-build}
config=(-DCMAKE_BUILD_TYPE=Release)
if [ "$sanitize" = 1 ]; then
  build=${ATTNC_BUILD_DIR:-build-san}
  config=(-DATTNC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Release
          -DCMAKE_C_FLAGS_RELEASE=-O1 -DCMAKE_CXX_FLAGS_RELEASE=-O1)
fi
export CCACHE_BASEDIR=$PWD
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S . -B "$build" "${config[@]}" \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
# ATTNC_JOBS: ninja's -j (default: ninja's own, cores + 2).
ninja -C "$build" ${ATTNC_JOBS:+-j "$ATTNC_JOBS"}
