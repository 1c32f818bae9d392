#!/bin/bash
# GPU checks of ferrocuda-collectives (issue 14), for a machine with 2 (or more) GPUs and
# libnccl: the tests under REQUIRE_GPU=1, the data-parallel example (one process per GPU),
# and the all-reduce benchmark next to a C++ program on the same libnccl and PyTorch's
# torch.distributed. Run from the folder that `stage.sh` filled; logs go to $OUT (default
# ./out): log.txt (everything), bench_raw.txt, bench.md (the table for BENCHMARKS.md).
set -u
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
# NVLink multicast stays off (it can take shared GPUs out of service).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export REQUIRE_GPU=1 RUST_BACKTRACE=1 PYTHONUNBUFFERED=1
exec > >(tee "$OUT/log.txt") 2>&1

echo "== machine"; date -u; nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -5
ls -la /usr/lib/x86_64-linux-gnu/libnccl* 2>/dev/null
export REQUIRE_GPUS=$(nvidia-smi -L | wc -l)
summary=()
step() { # name timeout command...
  local name=$1 limit=$2; shift 2
  echo; echo "== $name: $*"
  timeout "$limit" "$@"; local rc=$?
  if [ $rc -eq 0 ]; then summary+=("PASS  $name"); else summary+=("FAIL  $name (exit $rc)"); fi
}

step "tests: NCCL + peer kernel on the GPUs" 240 ./gpu_nccl --test-threads=1 --nocapture
step "tests: thread backend" 60 ./thread_group
step "tests: rendezvous" 60 ./rendezvous
step "tests: peer kernel on the CPU executor" 60 ./peer_cpu
step "tests: NCCL loading" 60 ./nccl_loading
step "tests: unit" 60 ./unittests
step "example: data-parallel step, one process per GPU" 120 ./data_parallel --steps 20
step "example: data-parallel step, Rust peer kernel over CUDA IPC" 120 ./data_parallel --steps 20 --peer
step "example: data-parallel step on the CPU" 60 ./data_parallel --cpu --ranks 4

if [ "$REQUIRE_GPUS" -lt 2 ]; then
  summary+=("SKIP  benchmarks (they need 2 GPUs; this machine has $REQUIRE_GPUS)")
else
  : > "$OUT/bench_raw.txt"
  step "bench: ferrocuda (NCCL + peer kernel)" 240 bash -c "set -o pipefail; ./allreduce_bench | tee -a '$OUT/bench_raw.txt'"
  # The C++ reference links the system's libnccl by name (nvcc takes no .so path as an input
  # file); a reference that cannot be built is a FAIL, not a missing row.
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  nccl_dir=$(dirname "$(ldconfig -p | awk '/libnccl\.so\.2 / {print $NF; exit}')")
  step "bench: build the C++ reference (nvcc $nvcc, libnccl in $nccl_dir)" 120 "$nvcc" -O2 -std=c++20 -o nccl_allreduce_ref nccl_allreduce_ref.cu -L"$nccl_dir" -l:libnccl.so.2 -lpthread
  if [ -x nccl_allreduce_ref ]; then
    step "bench: C++ reference on libnccl" 240 bash -c "set -o pipefail; ./nccl_allreduce_ref | tee -a '$OUT/bench_raw.txt'"
  else
    summary+=("FAIL  bench: C++ reference on libnccl (not built)")
  fi
  step "bench: torch.distributed reference" 240 bash -c "set -o pipefail; python3 torch_allreduce_ref.py | tee -a '$OUT/bench_raw.txt'"
  python3 merge_results.py "$OUT/bench_raw.txt" > "$OUT/bench.md" && cat "$OUT/bench.md"
fi

echo; echo "== summary"
printf '%s\n' "${summary[@]}"
! printf '%s\n' "${summary[@]}" | grep -q '^FAIL'
