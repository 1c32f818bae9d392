#!/usr/bin/env bash
# Runs the staged GPU checks (see stage.sh) on a GPU machine: every GPU-facing test binary with
# REQUIRE_GPU=1 (so nothing skips silently), the examples, the main job and the benchmark,
# and prints a summary. Logs go to $OUT (or ./out). NVLink multicast stays off for NCCL.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
work=$(mktemp -d)
tar -xJf "$here/bins.tar.xz" -C "$work"
cd "$work/bin"
export REQUIRE_GPU=1 NCCL_NVLS_ENABLE=0 RUST_BACKTRACE=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; echo "commit $(cat "$here/commit.txt" 2>/dev/null)"; } | tee "$out/gpus.txt"
summary="$out/summary.txt"; : > "$summary"
# With two or more GPUs the multi-GPU tests must run (they skip with fewer unless told not to).
gpus=$(nvidia-smi -L | wc -l)
if [ "$gpus" -ge 2 ]; then export REQUIRE_GPUS=$gpus REQUIRE_MULTI_GPU=1; fi
echo "GPUs: $gpus${REQUIRE_GPUS:+ (REQUIRE_GPUS=$REQUIRE_GPUS REQUIRE_MULTI_GPU=1)}" | tee -a "$summary"
run() { # name, timeout, command...
  local name=$1 limit=$2; shift 2
  local start=$(date +%s)
  timeout "$limit" "$@" > "$out/$name.log" 2>&1; local rc=$?
  # cargo's "test result" lines, or pytest's last line ("176 passed, 2 skipped in 30.1s").
  local results=$(grep -E '^test result|^=* ?[0-9]+ (passed|failed|error)' "$out/$name.log" | sed -E 's/test result: //; s/; finished.*//; s/^=+ //; s/ =+$//' | tr '\n' ' ')
  printf '%-26s rc=%-3s %4ss %s\n' "$name" "$rc" "$(( $(date +%s) - start ))" "${results:0:110}" | tee -a "$summary"
}
# Every test binary stage.sh found reaching a GPU (gpu-tests.txt), JOBS at a time (default 1:
# some tests time their work, and eight at once share one GPU).
mapfile -t gpu_tests < gpu-tests.txt
mapfile -t gpu_tests_alone < gpu-tests-alone.txt
export GPT2_BIN=$PWD/gpt2 # gpu_torch_agreement runs the staged model binary
jobs_at_once=${JOBS:-1}
for t in "${gpu_tests[@]}"; do
  [ -x "$t" ] || continue
  [ "$t" = cpu_main_job ] && continue # needs the main job binary: run below
  run "$t" 200 "./$t" --test-threads=1 &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_at_once" ]; do wait -n; done
done
wait
for t in "${gpu_tests_alone[@]}"; do
  [ -x "$t" ] && run "$t" 200 "./$t" --test-threads=1
done
for e in contexts streams_events graphs cublas_interop cublas_gemm modules cufft module_load launch_overhead port_patterns_bench; do
  [ -x "ex_$e" ] && run "ex_$e" 120 "./ex_$e"
done
# The ported public kernels (bench/ports) against their nvcc-built twins (issue 30): the twins
# are compiled here, with the flags their projects use.
if [ -x ex_ports_bench ] && command -v /usr/local/cuda/bin/nvcc > /dev/null; then
  mkdir -p twins
  /usr/local/cuda/bin/nvcc -cubin -O3 -arch=sm_90 -DPORTS_VLLM ports.cu -o twins/ports_vllm.cubin > "$out/ports_nvcc.log" 2>&1
  /usr/local/cuda/bin/nvcc -cubin -O3 -arch=sm_90 -DPORTS_LLMC --use_fast_math ports.cu -o twins/ports_llmc.cubin >> "$out/ports_nvcc.log" 2>&1
  run ex_ports_bench 120 ./ex_ports_bench twins
fi
# Several GPUs: the data-parallel example in both modes (NCCL; the Rust peer kernel over CUDA
# IPC) and the all-reduce benchmark (collectives/bench/run-on-gpu.sh adds the C++ and torch
# references beside it).
if [ "$gpus" -ge 2 ]; then
  run ex_data_parallel_nccl 120 ./ex_data_parallel --steps 20
  run ex_data_parallel_peer 120 ./ex_data_parallel --steps 20 --peer
  [ -n "${SKIP_BENCH:-}" ] || run ex_allreduce_bench 240 ./ex_allreduce_bench
else
  echo "SKIPPED multi-GPU examples (data_parallel, allreduce_bench): $gpus GPU" | tee -a "$summary"
fi
# The Python package's tests (stage.sh's python/ folder) with this machine's PyTorch: every test
# file in one pytest process, the g23r_op test extension importable beside ferrocuda_torch
# (G23R_OP_PATH; two extensions built on ferrocuda-torch in one process is G23L-1's case).
if [ -d "$work/python" ]; then
  py=/opt/torch/.venv/bin/python; [ -x "$py" ] || py=python3
  mkdir -p "$work/python/lib" "$work/python/oplib"
  for w in "$work"/python/wheel/*.whl "$work"/python/pywheels/*.whl; do "$py" -m zipfile -e "$w" "$work/python/lib"; done
  for w in "$work"/python/op/*.whl; do [ -f "$w" ] && "$py" -m zipfile -e "$w" "$work/python/oplib"; done
  run python_torch 300 env PYTHONPATH="$work/python/lib:$work/python/oplib" G23R_OP_PATH="$work/python/oplib" PYTHONDONTWRITEBYTECODE=1 \
    bash -c 'cd "$1" && "$2" -m pytest -q -rs -p no:cacheprovider .' _ "$work/python/tests" "$py"
else
  echo "SKIPPED the Python package's tests: not staged (STAGE_PYTHON=0)" | tee -a "$summary"
fi
run main_job 120 ./ferrocuda
# The main job's test, on the staged binary (its build-machine path would not exist here).
[ -x cpu_main_job ] && run cpu_main_job 150 env FERROCUDA_MAIN_JOB=./ferrocuda ./cpu_main_job
[ -n "${SKIP_BENCH:-}" ] || run bench 300 ./ferrocuda-bench
echo "---- failed tests:" | tee -a "$summary"
grep -h -E "^test .* FAILED|^SKIPPED|^FAILED " "$out"/*.log | sort | uniq | head -40 | tee -a "$summary"
echo "---- launch overhead:" | tee -a "$summary"
grep -E "typed - raw|buffer" "$out/ex_launch_overhead.log" | tail -8 | tee -a "$summary"
echo "---- module load:" | tee -a "$summary"
grep -E "JIT|load" "$out/ex_module_load.log" | tee -a "$summary"
echo "---- main job:" | tee -a "$summary"
tail -20 "$out/main_job.log" | tee -a "$summary"
rm -rf "$work"
