#!/usr/bin/env bash
# Issue 31's row kernels on a GPU: ours beside their CUDA C++ twins (kernels/bench/rows_twins.cu)
# in one process (kernels/examples/bench_rows.rs: a correctness check of both sides against the
# CPU executor, then the timings), then PyTorch eager on the same shapes
# (kernels/bench/torch_rows.py), then one table: op, shape, ours µs, twin µs, torch µs, ours vs
# twin (>= 0.97 asked), ours vs torch (>= 1.0 asked).
#
# Staged by `scripts/gpu-run/stage-rows.sh DEST` (bench_rows built here, the twins' source and a
# cubin nvcc built here, the scripts); on the GPU machine run `DEST/rows.sh` (about 60 s). The
# twins are rebuilt there with nvcc -O3 -arch=sm_90 when nvcc is present, else the carried
# cubin is used. Logs go to $OUT (or DEST/out/): rows-ours.log, rows-torch.log, rows-table.md.
# Look for: "check ... ok" for every op (a FAIL makes bench_rows exit 1), then the table.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv | tee "$out/rows-gpu.txt"
echo "commit: $(cat "$here/commit.txt" 2>/dev/null)" | tee -a "$out/rows-gpu.txt"
cubin="$here/rows_twins.cubin"
for nvcc in /usr/local/cuda/bin/nvcc "$(command -v nvcc 2>/dev/null)"; do
  if [ -n "$nvcc" ] && [ -x "$nvcc" ]; then
    if "$nvcc" -cubin -O3 -arch=sm_90 "$here/rows_twins.cu" -o "$out/rows_twins.cubin" > "$out/rows-nvcc.log" 2>&1; then
      cubin="$out/rows_twins.cubin"; echo "twins: built here by $nvcc ($("$nvcc" --version | tail -1))"
    else
      echo "twins: nvcc failed (rows-nvcc.log), using the carried cubin"; cat "$out/rows-nvcc.log"
    fi
    break
  fi
done
[ "$cubin" = "$here/rows_twins.cubin" ] && echo "twins: the cubin built at staging ($(cat "$here/rows_twins.nvcc.txt" 2>/dev/null))"
bench="$here/bench_rows"
if [ ! -x "$bench" ] && [ -f "$here/bench_rows.xz" ]; then
  bench="$out/bench_rows"; xz -dc "$here/bench_rows.xz" > "$bench" && chmod +x "$bench"
fi
timeout 300 "$bench" "$cubin" 2>&1 | tee "$out/rows-ours.log"; rc_ours=${PIPESTATUS[0]}
python=${TORCH_PYTHON:-/opt/torch/.venv/bin/python3}
timeout 300 "$python" "$here/torch_rows.py" 2>&1 | tee "$out/rows-torch.log"; rc_torch=${PIPESTATUS[0]}
echo "bench_rows rc=$rc_ours, torch_rows rc=$rc_torch" | tee -a "$out/rows-gpu.txt"
python3 "$here/rows_table.py" "$out/rows-ours.log" "$out/rows-torch.log" | tee "$out/rows-table.md"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader | sed 's/^/after: /' | tee -a "$out/rows-gpu.txt"
[ "$rc_ours" = 0 ] && [ "$rc_torch" = 0 ]
