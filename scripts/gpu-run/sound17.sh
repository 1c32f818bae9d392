#!/usr/bin/env bash
# Session 17, helper `sound` (branch s17-sound): the GPU tests of the host soundness items.
#   - host/tests/gpu_s17.rs (new; host crate only, the kernel is inline PTX): the lock order of
#     `Stream::will_use_for`'s held records (s17_*) and G16S-4 (g16s_4_*); each case that could
#     hang runs in a child process with a 20 s deadline.
#   - gpu_g15r (host crate): G15R-5/-6 and G16-1/G16-2 run through the changed door and
#     `wait_event` (the exclusive gate now takes the operation's name and refuses inside a
#     holding `will_use_for`).
#   - with `stage-all`, also the root package's d2_/e8_ tests of gpu_host_threads (will_use_for
#     and split buffers) and s1_ of gpu_host_safety (the module globals gate, now taken after the
#     launch's records); these need the root package's test build (kernels), minutes cold.
#
# Stage on the build machine, from the repository root (a folder git ignores):
#   scripts/gpu-run/sound17.sh stage .device-bin/sound        (gpu_s17 + gpu_g15r)
#   scripts/gpu-run/sound17.sh stage-all .device-bin/sound    (and the two root-package binaries)
# then on the GPU machine (carry the folder; about 30 s with the fixes, gpu_s17 about 10 s of it):
#   bash .device-bin/sound/run-sound17.sh
# Output in $OUT/<name>.txt (or <dest>/<name>/out/<name>.txt) per binary, and the summary lines
# at the end, one per binary: "<name> PASS" or "<name> FAIL (...)". Expect for gpu_s17
# ("sound17"): "test result: ok. 4 passed" and the lines
#   s17 crossed: inner declarations ["Err(SharedDeclarationWhileHeld ...)", "Err(SharedDeclarationWhileHeld ...)"]
#   s17 crossed: 200 rounds ok
#   s17 gate: holder Ok("Ok(())"), waiting launch Ok("launched"), global write Ok("written")   then  s17 gate: ok ([9, 9]) (1s possible)
#   s17 stretch: begin_capture Err(WaitWhileDeclarationHeld { operation: "Stream::begin_capture" }); wait_event Err(...); the stretch's declaration Ok(())
#   g16s-4: 2000 rounds, releases postponed for the capture P, freed at once F; ...   then  g16s-4: leaked 0, pending 0
# (a HUNG line, a child killed at its deadline, is the deadlock the fixes close). For gpu_g15r
# ("sound17-g15r"): "test result: ok. 11 passed" and the G16-1 line
#   G16-1: ... calls Ok, ... refused, N waits answered INVALID_VALUE (G16-2) after R waits made again, 0 other errors []
# (G16-2's retry, session 17: R > 0 with N = 0 says the driver's error is transient and the retry
# hides it; N > 0 says some persist; R = 0 says the race did not hit in that run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
stage_one() { # DEST NAME PACKAGE TEST LIMIT [FILTER [NOTE]]
  local dest=$1 name=$2
  shift 2
  "$here/test-repro.sh" stage "$name" "$1" "$2" "$3" "$dest/$name" "${4:-}" "${5:-}"
  printf 'bash "$here/%s/run-%s.sh" > "$log" 2>&1 || rc=1; cat "$log"; tail -n 1 "$log" >> "$summary"\n' "$name" "$name" >> "$dest/run-sound17.sh"
}
case "${1:-}" in
stage | stage-all)
  dest=${2:?usage: sound17.sh stage|stage-all <dest>}
  mkdir -p "$dest"
  printf '#!/usr/bin/env bash\n# Runs the binaries staged by scripts/gpu-run/sound17.sh; the last lines are their summaries.\nhere=$(cd "$(dirname "$0")" && pwd)\nrc=0\nlog=$(mktemp)\nsummary=$(mktemp)\n' > "$dest/run-sound17.sh"
  stage_one "$dest" sound17 ferrocuda-host gpu_s17 120 '' 'g16s-4: [0-9]+ rounds, releases postponed for the capture [0-9]+'
  stage_one "$dest" sound17-g15r ferrocuda-host gpu_g15r 100 '' 'G16-1: .* waits made again'
  if [ "$1" = stage-all ]; then
    stage_one "$dest" sound17-threads ferrocuda-main gpu_host_threads 120 'd2_ e8_'
    stage_one "$dest" sound17-safety ferrocuda-main gpu_host_safety 120 's1_'
  fi
  printf 'echo "== sound17 summary =="; cat "$summary"; rm -f "$log" "$summary"\nexit $rc\n' >> "$dest/run-sound17.sh"
  echo "staged $dest; run: bash $dest/run-sound17.sh"
  ;;
*)
  echo "usage: sound17.sh stage|stage-all <dest>; then, on the GPU machine, bash <dest>/run-sound17.sh" >&2
  exit 2
  ;;
esac
