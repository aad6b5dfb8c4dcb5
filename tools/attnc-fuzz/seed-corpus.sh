#!/usr/bin/env bash
# Writes attnc-fuzz's seed corpus into DIR (created; existing files kept):
# every .mlir under examples/ and test/, cut at `// -----` (the
# --split-input-file separator) into one spec per file, without its
# whole-line comments (RUN/CHECK lines), deduplicated, each at most 16 KiB
# (attnc-fuzz's input cap). Nothing is committed: the specs are the seeds.
#   tools/attnc-fuzz/seed-corpus.sh build-san/fuzz-seeds
set -euo pipefail
out=${1:?usage: seed-corpus.sh DIR}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
find examples test -name '*.mlir' -print0 | sort -z |
  python3 -c '
import hashlib, os, re, sys
out = sys.argv[1]
count = 0
for path in sys.stdin.buffer.read().split(b"\0"):
    if not path:
        continue
    text = open(path, "rb").read()
    for chunk in re.split(rb"(?m)^// -----.*\n?", text):
        lines = [l for l in chunk.splitlines(True)
                 if not l.lstrip().startswith(b"//")]
        spec = b"".join(lines).strip() + b"\n"
        if len(spec) < 8 or len(spec) > 16384:
            continue
        name = os.path.join(out, hashlib.sha1(spec).hexdigest())
        if not os.path.exists(name):
            open(name, "wb").write(spec)
            count += 1
print("attnc-fuzz: %d new seeds in %s" % (count, out))
' "$out"
