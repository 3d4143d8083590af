#!/usr/bin/env bash
# Copy (merge, never delete) the JSON records of run*.sh (not the run folders with saved encoders) and render the table.
set -euo pipefail
OUT=${OUT:-/tmp/tenc-results}
DST=leaderboards/tenc/records
mkdir -p "$DST"  # merge: records of earlier sessions stay
(cd "$OUT" && find . -path ./runs -prune -o -name '*.json' -print) | while read -r f; do
  mkdir -p "$DST/$(dirname "$f")"; cp "$OUT/$f" "$DST/$f"; done
benchbench table --output "$DST" --tasks sts,qnli,mrpc-pairs --columns scored_by,transductive,train.seconds > leaderboards/tenc/table.md
cat leaderboards/tenc/table.md
