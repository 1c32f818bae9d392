#!/bin/bash
# Session 23 "sound": the GPU checks of the soundness round (branch s23-sound, commit in COMMIT).
#   bash .device-bin/sound/job.sh       (from the repository root on the GPU machine; ~25 s, cap 40)
# Two lanes at once (separate processes, one GPU), each test under its own timeout, REQUIRE_GPU=1
# (a skip is a failure):
#   lane 1: g22s_2        G22S-2 fixed: the panic record is per context; 4 variants in child
#                         processes (first load in a created / primary context that then dies,
#                         created then created, two alive); prints "G22S-2 <variant>: REPORTED"
#           gpu_fault     kernel panics reported (children)
#           audit_g22r    G22R-1 names table / forged tag (children)
#           gpu_g20r      g20r4/g21 (current context: the bind changed), g20r5 (globals)
#   lane 2: gpu_s23_sound G23S-1 (a push_current guard dropped inside / returned out of a door
#                         call's work leaves no context current) and `.const` globals writable
#                         only when named
#           gpu_s23_sound_before  the two G23S-1 tests built from main before the fix (6ca5407):
#                         expected to FAIL (the before picture); printed as BEFORE, not counted
#           gpu_s22       calls on a primary context leave the current context; bind cost printed
#           gpu_contexts  contexts, push/pop, recovery in child processes
#           launch_modules module globals (a named .global written, a .const table read)
# Prints one PASS/FAIL line per test and the key lines; every log is in ONE file,
# $OUT/sound/sound-logs.tar.xz.
set -u
here=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/sound23}/sound
L=$(mktemp -d)/logs
mkdir -p "$O" "$L"
w=$(mktemp -d)
tar -xJf "$here/bins.tar.xz" -C "$w"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1; echo "commit $(cat "$here/COMMIT" 2>/dev/null)"; } > "$L/gpu.txt"
cat "$L/gpu.txt"
run() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  REQUIRE_GPU=1 RUST_BACKTRACE=1 timeout -k 2 "$limit" "$w/$name" "$@" --nocapture --test-threads=1 > "$L/$name.txt" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && ! grep -q '^SKIPPED' "$L/$name.txt"; then
    echo "$name PASS ($(grep -o 'test result: .*passed' "$L/$name.txt" | tail -1); $((SECONDS - t0)) s)"
  else
    echo "$name FAIL (exit $rc; $((SECONDS - t0)) s)"; grep -E '^(test .* FAILED|thread .* panicked|SKIPPED|G22S-2 .*NOT REPORTED)' "$L/$name.txt" | head -6
  fi
}
before() {
  REQUIRE_GPU=1 RUST_BACKTRACE=0 timeout -k 2 6 "$w/gpu_s23_sound_before" --nocapture --test-threads=1 > "$L/gpu_s23_sound_before.txt" 2>&1
  echo "BEFORE (main 6ca5407, exit $?; expected to fail): $(grep -o 'test result: .*failed' "$L/gpu_s23_sound_before.txt")"
  grep -oE "(the guard's drop popped|the door's push was left|the guard returned out)[^\"]*" "$L/gpu_s23_sound_before.txt" | head -3 | cut -c1-160
}
lane1() { run g22s_2 14; grep -o 'G22S-2 [a-z_]*: [A-Z ]*$' "$L/g22s_2.txt"; grep -o 'G22S-2 two_alive: the primary.*' "$L/g22s_2.txt" | cut -c1-200
  run gpu_fault 12; run audit_g22r 10; run gpu_g20r 12 g20r4 g21_ g20r5; grep -oE 'G21 READ-ONLY [a-z]+' "$L/gpu_g20r.txt" | head -1; }
lane2() { run gpu_s23_sound 8; grep -oE '(G23S-1|S23) [^:]*:? ?.{0,110}' "$L/gpu_s23_sound.txt" | cut -c1-170; before
  run gpu_s22 10; grep -o 's22 bind cost: .*' "$L/gpu_s22.txt" | head -2; run gpu_contexts 16; run launch_modules 8 module_globals; }
lane1 > "$L/lane1.txt" 2>&1 &
lane2 > "$L/lane2.txt" 2>&1
wait
cat "$L/lane1.txt" "$L/lane2.txt" > "$L/summary.txt"
cat "$L/summary.txt"
fails=$(grep -c ' FAIL (' "$L/summary.txt")
echo "sound job: $fails test binaries failed ($SECONDS s)"
tar -C "$(dirname "$L")" -cJf "$O/sound-logs.tar.xz" logs
rm -rf "$w" "$(dirname "$L")"
[ "$fails" -eq 0 ]
