#!/usr/bin/env bash
# One test binary's GPU repros, staged here and run on the GPU machine with REQUIRE_GPU=1: what
# the held-out reviews' scripts (review15b.sh, review16.sh, review16s.sh, review16d.sh) run.
#
#   test-repro.sh stage NAME PACKAGE TEST LIMIT DEST [FILTER [NOTE]]
#       (here, from the repository root) builds `cargo test --release -p PACKAGE --test TEST
#       --no-run`, puts TEST.xz, repro.conf and this script as run-NAME.sh into DEST;
#   bash DEST/run-NAME.sh
#       (there) runs TEST [FILTER] --nocapture --test-threads=1 under `timeout LIMIT`, writes
#       what it prints to $OUT/NAME.txt (or DEST/out/NAME.txt), and ends with "NAME PASS", or
#       "NAME FAIL (exit N; failed: <tests>)". A SKIPPED line fails it too. NOTE, an extended
#       regular expression, picks a line of the output to quote in the summary.
set -euo pipefail
case "${1:-}" in
stage)
  name=${2:?usage: test-repro.sh stage NAME PACKAGE TEST LIMIT DEST [FILTER [NOTE]]}
  package=${3:?} test=${4:?} limit=${5:?} dest=${6:?} filter=${7:-} note=${8:-}
  root=$(cd "$(dirname "$0")/../.." && pwd)
  cd "$root"
  mkdir -p "$dest"
  exe=$(cargo test --release -p "$package" --test "$test" --no-run --message-format=json 2>/dev/null |
    python3 scripts/gpu-run/cargo-executable.py "$test")
  [ -n "$exe" ] || { echo "no $test executable built (run the cargo command without --message-format)" >&2; exit 1; }
  cp "$exe" "$dest/$test"
  (cd "$dest" && xz -T0 -6 -f "$test")
  printf 'name=%q\ntest=%q\nlimit=%q\nfilter=%q\nnote=%q\n' "$name" "$test" "$limit" "$filter" "$note" > "$dest/repro.conf"
  cp scripts/gpu-run/test-repro.sh "$dest/run-$name.sh"
  echo "staged $dest/$test.xz and $dest/run-$name.sh"
  ;;
*)
  here=$(cd "$(dirname "$0")" && pwd)
  # shellcheck source=/dev/null
  . "$here/repro.conf"
  out=${OUT:-$here/out}
  mkdir -p "$out"
  log="$out/$name.txt"
  bin=$here/$test
  [ -x "$bin" ] || { xz -dkc "$here/$test.xz" > "$bin" && chmod +x "$bin"; }
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$log" 2>&1 || true
  set +e
  # shellcheck disable=SC2086
  REQUIRE_GPU=1 RUST_BACKTRACE=0 timeout -k 2 "$limit" "$bin" $filter --nocapture --test-threads=1 >> "$log" 2>&1
  rc=$?
  set -e
  cat "$log"
  failed=$(sed -n '/^failures:$/,/^test result/p' "$log" | grep -E '^    [A-Za-z_][A-Za-z0-9_:]*$' | tr -d ' ' | tr '\n' ' ' || true)
  quoted=$([ -n "$note" ] && grep -o -E "$note" "$log" | head -1 || true)
  if [ $rc -eq 0 ] && ! grep -q '^SKIPPED' "$log"; then
    echo "$name PASS${quoted:+ ($quoted)}"
  else
    echo "$name FAIL (exit $rc; failed: ${failed:-?}${quoted:+; $quoted})"
    [ $rc -ne 0 ] || rc=1
  fi
  exit $rc
  ;;
esac
