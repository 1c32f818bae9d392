#!/usr/bin/env bash
# session 18 `sound`: G16-2 on the GPU. Host test binaries only.
set -u
H=$(cd "$(dirname "$0")" && pwd); for b in gpu_s18 gpu_g15r gpu_g16r gpu_g14r; do [ -x "$H/$b" ] || { xz -dkc "$H/$b.xz" > "$H/$b" && chmod +x "$H/$b"; }; done; O=${OUT:-$H/out}; mkdir -p "$O/logs"; L=$O/logs
export REQUIRE_GPU=1 RUST_BACKTRACE=0
start=$(date +%s); left() { echo $(( 108 - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/gpu.txt" 2>&1
sum=$O/summary.txt; : > "$sum"
run() { # name timeout cmd...
  local n=$1 t=$2; shift 2
  [ "$(left)" -gt "$t" ] || { echo "$n NOT RUN (time)" >> "$sum"; return; }
  timeout -k 2 "$t" "$@" --nocapture --test-threads=1 > "$L/$n.txt" 2>&1; local rc=$?
  echo "$n rc=$rc $(grep -E '^test result' "$L/$n.txt" | tail -1 | cut -c1-60) $(grep -E 'G16-2 race:|G16-1: [0-9]|G16-2 probe|G16-2 across' "$L/$n.txt" | cut -c1-260 | tr '\n' ' ')" >> "$sum"
}
run s18_all 20 "$H/gpu_s18"
for i in 1 2 3 4 5 6; do run s18_race_$i 8 "$H/gpu_s18" g16_2_a_wait_racing; done
run g15r_all 15 "$H/gpu_g15r"
for i in $(seq 1 12); do run g16_1_$i 8 "$H/gpu_g15r" g16_1_a_wait_or_query; done
run g14r_all 15 "$H/gpu_g14r"
run g16r_all 20 "$H/gpu_g16r"
run s18_probe_destroyed 8 "$H/gpu_s18" g16_2_probe_a_wait_on_an_event_whose_captures_graph_was_destroyed --exact --ignored
cat "$L/gpu.txt" >> "$sum"
cat "$sum"
tar -C "$O" -cJf "$O/logs.tar.xz" logs && rm -rf "$L"
