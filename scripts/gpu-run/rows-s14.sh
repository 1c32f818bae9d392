#!/usr/bin/env bash
# Session 14's row-kernel run (issue 31): bench_rows' candidates (`variants()`: the ops that were
# below 0.97x their twins, the library's kernel and any candidate beside the twin, 3 repeats of
# 7 rounds each: `cand` lines; BENCH_ROWS_VARIANTS=1), the whole `bench_rows` table, the rows'
# GPU tests (REQUIRE_GPU=1) and PyTorch eager, with the SM clock sampled every 250 ms beside it.
# Session 14 ran it once (commit 16c9e73, then with candidate kernels in `packed::s14`, since
# folded into the library or dropped): bench/results/s14-rows/. Staged by
# `scripts/gpu-run/stage-rows-s14.sh DEST`; on the GPU machine `DEST/rows-s14.sh` (about 90 s).
# Logs in $OUT (or DEST/out): rows-ours.log, gpu-tests.log, rows-torch.log, rows-table.md,
# clocks.csv, rows-gpu.txt. Look for: "check ... ok" lines (a FAIL makes bench_rows exit 1),
# `cand` lines, "test result: ok" in gpu-tests.log.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
start=$(date +%s)
stamp() { echo "$1 at $(( $(date +%s) - start )) s" | tee -a "$out/times.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv | tee "$out/rows-gpu.txt"
echo "commit: $(cat "$here/commit.txt" 2>/dev/null)" | tee -a "$out/rows-gpu.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 250 > "$out/clocks.csv" 2>&1 &
smi=$!
cubin="$here/rows_twins.cubin"
if [ -x /usr/local/cuda/bin/nvcc ] && /usr/local/cuda/bin/nvcc -cubin -O3 -arch=sm_90 "$here/rows_twins.cu" -o "$out/rows_twins.cubin" > "$out/rows-nvcc.log" 2>&1; then
  cubin="$out/rows_twins.cubin"; echo "twins: built here ($(/usr/local/cuda/bin/nvcc --version | tail -1))"
else
  echo "twins: the cubin built at staging ($(cat "$here/rows_twins.nvcc.txt" 2>/dev/null))"
fi
bin=$(mktemp -d)
for b in bench_rows gpu_kernels_lib; do xz -dc "$here/$b.xz" > "$bin/$b" && chmod +x "$bin/$b"; done
stamp unpacked
BENCH_ROWS_VARIANTS=1 BENCH_ROWS_REPEATS=3 timeout 150 "$bin/bench_rows" "$cubin" > "$out/rows-ours.log" 2>&1; rc_ours=$?
stamp "bench_rows rc=$rc_ours"
grep -E "^(cand|pair|lib|device|check .*FAIL)" "$out/rows-ours.log"
REQUIRE_GPU=1 timeout 90 "$bin/gpu_kernels_lib" --test-threads 1 row_kernels_on_the_gpu norms_at_4096 packed_kernels_on_misaligned > "$out/gpu-tests.log" 2>&1; rc_tests=$?
stamp "gpu tests rc=$rc_tests"
grep -E "^test |test result" "$out/gpu-tests.log"
python=${TORCH_PYTHON:-/opt/torch/.venv/bin/python3}
timeout 90 "$python" "$here/torch_rows.py" > "$out/rows-torch.log" 2>&1; rc_torch=$?
stamp "torch rc=$rc_torch"
kill "$smi" 2>/dev/null
python3 "$here/rows_table.py" "$out/rows-ours.log" "$out/rows-torch.log" > "$out/rows-table.md"
cat "$out/rows-table.md"
# The SM clock of the samples taken while a kernel ran (above 1000 MHz: the idle samples
# between the jobs read 345-435 MHz).
awk -F', ' 'NR>1 {v=$2+0; if (v>1000) {n++; s+=v; if (n==1||v<min) min=v; if (v>max) max=v}} END {printf "SM clock while busy: mean %.0f MHz, min %d, max %d (%d samples of 250 ms)\n", s/n, min, max, n}' "$out/clocks.csv" | tee -a "$out/rows-gpu.txt"
[ "$rc_ours" = 0 ] && [ "$rc_tests" = 0 ] && [ "$rc_torch" = 0 ]
