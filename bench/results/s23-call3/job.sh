#!/bin/bash
# Session 23, a call over helpers' staged jobs: timing jobs first, one at a time; every output
# folder packed into one tar (the tool returns at most 8 files), stdout of each job beside it.
set -u
root=$PWD
O=${OUT:-/tmp/call23c}; mkdir -p "$O/all"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > "$O/gpu.txt"
for spec in $JOBS_LIST; do
  n=${spec%%:*}; l=${spec#*:}
  s=$(date +%s)
  ( cd "$root" && OUT="$O/all" timeout -k 5 $l bash .device-bin/$n/job.sh > "$O/all/$n.stdout" 2>&1; echo "$n rc=$? $(( $(date +%s) - s ))s" | tee -a "$O/calls.txt" )
done
cd "$O" && tar cJf all.tar.xz all && rm -rf all
ls -la "$O"
