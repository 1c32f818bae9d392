#!/bin/bash
# Stages helper fixrev's GPU job (job.sh beside this file) in /work/main/.device-bin/fixrev/ (or
# $1): the review's job (audit/2026-11-29f/device-job/stage.sh: the G23R op crate's wheel, with
# nested_calls, and G24R-2's op crate's wheel, both built from this checkout) in review/, and the
# two regression test files. Run from the checkout's root once its target/ holds a device build.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
dest=${1:-/work/main/.device-bin/fixrev}
rm -rf "$dest" && mkdir -p "$dest"
bash "$root/audit/2026-11-29f/device-job/stage.sh" "$dest/review"
cp "$root/python/ferrocuda-torch/tests/test_g24r_fixes.py" "$root/python/ferrocuda-torch/tests/test_g23r_fixes.py" "$dest/"
cp "$root/bench/results/s24-fixrev/job.sh" "$dest/job.sh"
git -C "$root" rev-parse HEAD > "$dest/commit.txt"
echo "staged in $dest ($(du -sh "$dest" | cut -f1))"
