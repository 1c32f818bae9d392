#!/bin/bash
# Session 22 final call (one H200; the session's only GPU call, ~400 s of device time left):
# each helper's staged job, built on its branch (bench/results/s22-final/README.md says which).
set -u
root=$PWD
O=${OUT:-/tmp/final-out}
T=$(mktemp -d)
mkdir -p "$O"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > "$O/gpu.txt"
part() { # name limit script
  local s=$SECONDS
  ( cd "$root" && OUT="$T" timeout -k 3 "$2" bash "$3" ) > "$T/$1.log" 2>&1
  echo "== $1 rc=$? $((SECONDS - s)) s" | tee -a "$O/summary.txt"
}
part sound 120 .device-bin/sound/job.sh
part fixshared 28 .device-bin/fixshared/job.sh
part port 60 .device-bin/port/job.sh
part attn 55 .device-bin/attn/job.sh
part gaps 48 .device-bin/gaps/job.sh
part review 28 .device-bin/review22/job.sh
cd "$T" && tar cJf "$O/results.tar.xz" . && ls -la "$O"
tail -n 22 "$T"/sound.log "$T"/fixshared.log "$T"/port.log "$T"/attn.log "$T"/gaps.log "$T"/review.log
