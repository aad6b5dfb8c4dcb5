#!/usr/bin/env bash
# A bounded attnc-fuzz run, as CI does it: fails (non-zero) on any crash,
# sanitizer report, assertion, timeout or out-of-memory; libFuzzer leaves the
# input that found it in DIR/artifacts/ (crash-*, timeout-*, oom-*,
# leak-*), and its log in DIR/fuzz.log.
#   tools/attnc-fuzz/run.sh [SECONDS] [BUILD_DIR]   (default 300, build-san)
# The corpus it grows stays in BUILD_DIR/fuzz/corpus for the next run; the
# seeds (tools/attnc-fuzz/seed-corpus.sh) are made anew each time.
set -euo pipefail
seconds=${1:-300}
cd "$(dirname "$0")/../.."
build=${2:-build-san}
dir=$build/fuzz
fuzzer=$build/bin/attnc-fuzz
[ -x "$fuzzer" ] || { echo "attnc-fuzz: no $fuzzer (ATTNC_SANITIZE=1 bash tools/scripts/build.sh)" >&2; exit 1; }
source tools/sanitize/env.sh
mkdir -p "$dir/corpus" "$dir/artifacts"
rm -rf "$dir/seeds"
tools/attnc-fuzz/seed-corpus.sh "$dir/seeds"
# -timeout: the slowest seed compiles in a few seconds under ASan; 60 s
#  is a hang, not a slow spec. -rss_limit_mb: a few GiB is a runaway.
# -max_len: attnc-fuzz rejects larger inputs anyway.
# -use_value_profile: comparisons of attnc's checks (dimension sizes,
#  keyword spellings) guide the mutations too.
status=0
"$fuzzer" -dict=tools/attnc-fuzz/attn.dict -max_len=16384 -timeout=60 \
  -rss_limit_mb=4096 -max_total_time="$seconds" -print_final_stats=1 \
  -use_value_profile=1 -artifact_prefix="$dir/artifacts/" \
  "$dir/corpus" "$dir/seeds" > "$dir/fuzz.log" 2>&1 || status=$?
grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::" "$dir/fuzz.log" || true
if [ "$status" -ne 0 ]; then
  echo "attnc-fuzz: FAILED (status $status); the end of $dir/fuzz.log:" >&2
  tail -n 80 "$dir/fuzz.log" >&2
  ls -l "$dir/artifacts" >&2
  exit 1
fi
echo "attnc-fuzz: no findings in ${seconds} s"
