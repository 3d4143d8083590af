#!/usr/bin/env bash
# Make this checkout small enough to travel to a lent GPU machine beside a carried .devN folder, and put it
# back. A call carries at most 64 MiB: the tracked tree plus the carried folder. The tracked leaderboards/
# (~12 MB) does not fit beside a 60 MB .devN folder, and the device does not need it.
#
#   bash bench/device_tree.sh hide      # before the device calls: leaderboards/ untracked and ignored (files stay)
#   bash bench/device_tree.sh restore   # after them: tracked again, exactly as before
#   bash bench/device_tree.sh size      # what a call would carry besides its .devN folder
#
# Commit nothing between hide and restore: a commit then would delete leaderboards/ from the repository.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
EXCLUDE=.git/info/exclude
LINE=/leaderboards/
case "${1:?hide, restore or size}" in
  hide)
    git diff --quiet -- leaderboards && git diff --cached --quiet -- leaderboards \
      || { echo "leaderboards/ has uncommitted changes: commit them first"; exit 2; }
    git rm -r -q --cached leaderboards
    grep -qxF "$LINE" "$EXCLUDE" || echo "$LINE" >> "$EXCLUDE"
    echo "leaderboards/ hidden; run 'bash bench/device_tree.sh restore' after the device calls"
    ;;
  restore)
    grep -vxF "$LINE" "$EXCLUDE" > "$EXCLUDE.tmp" || true
    mv "$EXCLUDE.tmp" "$EXCLUDE"
    git reset -q -- leaderboards
    git diff --quiet -- leaderboards || echo "note: leaderboards/ differs from HEAD (unpacked records?)"
    git status --short -- leaderboards | head -3
    echo "leaderboards/ tracked again"
    ;;
  size)  # tracked files and untracked ones git does not ignore: what travels
    git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null \
      | awk '{s += $1} END {printf "%d bytes travel besides the carried folders (a call carries 67108864)\n", s}'
    ;;
  *) echo "hide, restore or size"; exit 2 ;;
esac
