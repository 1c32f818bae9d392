#!/bin/bash
# GPU job of helper fixrev (session 24): the fixes of G24R-1 and G24R-2 (audit 2026-11-29f).
# Staged by stage.sh (beside this file in bench/results/s24-fixrev/) into .device-bin/fixrev/:
#   review/   the review's own job (its two repros, with wheels built from this branch): every
#             case should print HELD, G24R-2's "nested calls" refused;
#   g23r_torch_op-*.whl (tests/g23r_op, with nested_calls), test_g24r_fixes.py and
#   test_g23r_fixes.py (its G23R-1/-2/-4 cases: G23R-3 needs the library wheel, not staged), run
#   with REQUIRE_GPU=1 (unittest, no pytest needed).
# At most ~60 s. Results under $OUT/fixrev/; stdout ends with a summary.
set -u
export PYTHONDONTWRITEBYTECODE=1
HERE=$(cd "$(dirname "$0")" && pwd)
R="$OUT/fixrev"; mkdir -p "$R"
py=/opt/torch/.venv/bin/python; [ -x "$py" ] || py=python3
# 1. The review's repros (writes $R/review/{gpu,g24r1,g24r2}.txt), at most ~25 s.
OUT="$R" timeout 32 bash "$HERE/review/job.sh" > "$R/review-stdout.txt" 2>&1
echo "review job rc=$?" >> "$R/review-stdout.txt"
# 2. The regression tests.
op=$(mktemp -d)
for w in "$HERE"/review/g23r_torch_op-*.whl; do "$py" -m zipfile -e "$w" "$op"; done
cd "$HERE"
G24R1_SECONDS=3 REQUIRE_GPU=1 G23R_OP_PATH="$op" timeout 30 "$py" -m unittest -v test_g24r_fixes > "$R/test_g24r.txt" 2>&1
echo "rc=$? test_g24r_fixes" >> "$R/test_g24r.txt"
REQUIRE_GPU=1 G23R_OP_PATH="$op" timeout 20 "$py" -m unittest -v test_g23r_fixes.G23R1 test_g23r_fixes.G23R2 test_g23r_fixes.G23R4 > "$R/test_g23r.txt" 2>&1
echo "rc=$? test_g23r_fixes" >> "$R/test_g23r.txt"
rm -rf "$op"
echo "== review repros (expect HELD everywhere, nested calls refused)"
grep -E "^(==|mode|HELD|UNSOUND|UNCLEAR|synchronize|rc=)|nested|one call|refused" "$R/review/g24r1.txt" "$R/review/g24r2.txt" | cut -c1-300
echo "== tests"
grep -E "G24R-1 \(|^(test_|Ran|OK|FAILED)|rc=" "$R/test_g24r.txt" "$R/test_g23r.txt" | cut -c1-300
