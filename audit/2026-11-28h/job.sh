#!/bin/bash
# Held-out review (session 20): GPU repros of audit/2026-11-28h. Results under $OUT/review/.
# Each repro prints REPRODUCED / NOT REPRODUCED / SKIPPED; exit codes 0 / 1 / 2.
set -u
export REQUIRE_GPU=1 PYTHONDONTWRITEBYTECODE=1
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/review"
LOG="$OUT/review/results.txt"
nvidia-smi -L > "$LOG" 2>&1
# Big binaries travel compressed: unpack them into a scratch folder.
BIN=$(mktemp -d)
for f in "$HERE"/*; do
  case "$f" in
    *.xz) xz -dc "$f" > "$BIN/$(basename "$f" .xz)"; chmod +x "$BIN/$(basename "$f" .xz)" ;;
    *) [ -x "$f" ] && [ ! -d "$f" ] && cp "$f" "$BIN/" ;;
  esac
done
for bin in g20r1-peer g20r4-created-context g20r5-module-constants; do
  [ -x "$BIN/$bin" ] || continue
  echo "== $bin" >> "$LOG"
  timeout 15 "$BIN/$bin" >> "$LOG" 2>&1
  echo "rc=$?" >> "$LOG"
done
py=/opt/torch/.venv/bin/python; [ -x "$py" ] || py=python3
if ls "$HERE"/wheel/*.whl >/dev/null 2>&1; then
  echo "== g20r2 (torch op, side-stream input)" >> "$LOG"
  lib=$(mktemp -d)
  "$py" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --no-index --target "$lib" "$HERE"/wheel/*.whl >> "$LOG" 2>&1 || "$py" -m zipfile -e "$HERE"/wheel/*.whl "$lib"
  PYTHONPATH="$lib" timeout 20 "$py" "$HERE/g20r2.py" >> "$LOG" 2>&1
  echo "rc=$?" >> "$LOG"
  echo "== g20r3 (DLPack: an imported array re-pointed by a later producer)" >> "$LOG"
  PYTHONPATH="$lib" timeout 20 "$py" "$HERE/g20r3.py" >> "$LOG" 2>&1
  echo "rc=$?" >> "$LOG"
fi
cat "$LOG"
