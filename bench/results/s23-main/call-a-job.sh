#!/bin/bash
# Session 23, call A: helpers' READY jobs (timing first, alone), then merged main's full GPU suite.
set -u
root=$PWD
O=${OUT:-/tmp/call23a}; mkdir -p "$O"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > "$O/gpu.txt"
j() { local n=$1 l=$2; local s=$(date +%s); ( cd "$root" && OUT="$O" timeout -k 5 $l bash .device-bin/$n/job.sh > "$O/$n.stdout" 2>&1; echo "$n rc=$? $(( $(date +%s) - s ))s" | tee -a "$O/calls.txt" ); }
for n in $JOBS_LIST; do
  case $n in gaps) l=60;; port) l=80;; review) l=35;; sound) l=55;; attn) l=110;; *) l=60;; esac
  [ -f ".device-bin/$n/job.sh" ] && j $n $l
done
s=$(date +%s)
( cd .device-bin/full23 && JOBS=6 SKIP_BENCH=1 OUT="$O/tests" timeout 420 ./run.sh > "$O/run.txt" 2>&1; echo "run.sh rc=$? $(( $(date +%s) - s ))s" >> "$O/run.txt" )
tail -5 "$O/run.txt"
cd "$O" && tar cJf tests.tar.xz tests && rm -rf tests
ls -la "$O"
