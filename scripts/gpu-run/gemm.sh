#!/usr/bin/env bash
# Issue 31's GEMM on an H100/H200: the library's sm_90 bf16 GEMM (ferrocuda_kernels::gemm,
# kernels ferrocuda_kernels_hopper::gemm::{gemm_bf16_tn, gemm_bf16_tn_cluster2}) checked, and
# timed beside cuBLAS and fast.cu's kernel 12 in one job.
#
#   scripts/gpu-run/gemm.sh stage DEST   (here, with cargo) builds and stages into DEST (a folder
#                                         git ignores, e.g. .device-bin/gemm): the GEMM tests of
#                                         kernels/tests/gpu_kernels_lib.rs and the hopper-gemm
#                                         benchmark, xz-compressed, this script, the commit, the
#                                         fast.cu harness (scripts/gpu-run/gemm-fastcu-harness.cu)
#                                         and fast.cu's examples/matmul/matmul_12.cuh + LICENSE,
#                                         read from the git mirror that the `fetch` tool makes of
#                                         github:pranjalssh/fast.cu (FASTCU_GIT, default
#                                         /work/.mirror/pranjalssh+fast.cu/repo; never committed).
#   DEST/gemm.sh run                      (on the GPU machine, about 150-200 s; T_TESTS, T_BENCH,
#                                         T_FASTCU: each step's time limit, default 120, 150, 60 s) runs:
#     1. (in the background) nvcc 13.0 builds the fast.cu harness with kernel 12
#        (-gencode arch=compute_90a,code=sm_90a; nvcc.log);
#     2. gpu_kernels_lib, the tests whose names contain "gemm", with REQUIRE_GPU=1: cuBLAS(Lt)
#        paths, hopper_gemm_bf16 at ragged shapes against f64 and cuBLAS, every schedule of the
#        engine's cached path against f64, the map cache (reuse, reallocated buffers, views,
#        bound), the refusals, gemm() on the path the table picks. Look for
#        "test result: ok. 4 passed".
#     3. hopper-gemm --sizes ${SIZES:-2048,4096,8192} --runs ${RUNS:-10} [--schedules $GEMM_SCHEDULES]: probes (PASS lines),
#        then per size: PASS lines for `library` (per-call maps), each schedule (cached maps:
#        plain, bal, g8-bal, g16-bal, cl2-bal, cl2-g4-bal, cl2-g8-bal) and the CUDA C++ twin;
#        isolated and steady timings (% of cuBLAS); burst (20 launches after 1 s idle) and
#        sustained (400 per event pair) with the SM clock and power sampled during each window.
#     4. the fast.cu harness at ${FASTCU_SIZES:-4096,8192}: kernel 12 and cuBLAS checked on
#        samples against f64, then steady, burst and sustained lines ("fastcu ..."), clocks and
#        power beside each.
# Logs go to $OUT (or DEST/out/): gemm-gpu.txt (summary), gemm-tests.log, hopper-gemm.log,
# hopper-gemm.json, fastcu.log, nvcc.log.
set -u
mode=${1:?usage: gemm.sh stage DEST | gemm.sh run}
if [ "$mode" = stage ]; then
  set -euo pipefail
  root=$(cd "$(dirname "$0")/../.." && pwd)
  dest=${2:?usage: gemm.sh stage DEST}
  fastcu=${FASTCU_GIT:-/work/.mirror/pranjalssh+fast.cu/repo}
  mkdir -p "$dest/fastcu"
  dest=$(cd "$dest" && pwd)
  cd "$root"
  pick() { # cargo JSON on stdin; copies the executable of target $2 (test or bin) to $1/$2
    local exe; exe=$(scripts/gpu-run/cargo-executable.py "$2"); [ -z "$exe" ] || cp "$exe" "$1/$2"
  }
  cargo test --release -p ferrocuda-kernels --test gpu_kernels_lib --no-run --message-format=json 2>/dev/null | pick "$dest" gpu_kernels_lib
  cargo build --release -p hopper-kernels --bin hopper-gemm --message-format=json 2>/dev/null | pick "$dest" hopper-gemm
  for b in gpu_kernels_lib hopper-gemm; do
    test -x "$dest/$b" || { echo "gemm.sh stage: $b did not build (run the cargo command without --message-format)"; exit 1; }
    xz -9e -T0 -f "$dest/$b"
  done
  cp "$root/scripts/gpu-run/gemm.sh" "$root/scripts/gpu-run/gemm-fastcu-harness.cu" "$dest/"
  if git --git-dir="$fastcu" rev-parse HEAD > "$dest/fastcu/SOURCE" 2>/dev/null || git -C "$fastcu" rev-parse HEAD > "$dest/fastcu/SOURCE"; then
    g() { git --git-dir="$fastcu" show "HEAD:$1" 2>/dev/null || git -C "$fastcu" show "HEAD:$1"; }
    g examples/matmul/matmul_12.cuh > "$dest/fastcu/matmul_12.cuh"
    g LICENSE > "$dest/fastcu/LICENSE"
    sed -i '1s|^|github:pranjalssh/fast.cu commit |' "$dest/fastcu/SOURCE"
  else
    echo "gemm.sh stage: no fast.cu mirror at $fastcu (fetch github:pranjalssh/fast.cu first); the kernel-12 comparison will be skipped"
  fi
  git rev-parse HEAD > "$dest/commit.txt"
  ls -la "$dest" "$dest/fastcu"
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
bin=$(mktemp -d)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
summary="$out/gemm-gpu.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee "$summary"
echo "commit: $(cat "$here/commit.txt" 2>/dev/null); fast.cu: $(cat "$here/fastcu/SOURCE" 2>/dev/null || echo absent)" | tee -a "$summary"
# 1. fast.cu's kernel 12 in the harness, built while the tests run.
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -f "$here/fastcu/matmul_12.cuh" ]; then
  ( $nvcc --version | tail -2; \
    $nvcc -std=c++17 -O3 -DNDEBUG -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -w -I"$here/fastcu" \
      "$here/gemm-fastcu-harness.cu" -lcublas -lcuda -o "$bin/gemm-fastcu" ) > "$out/nvcc.log" 2>&1 &
  nvcc_pid=$!
else
  echo "fast.cu not staged" > "$out/nvcc.log"; nvcc_pid=
fi
for b in gpu_kernels_lib hopper-gemm; do
  xz -dc "$here/$b.xz" > "$bin/$b" && chmod +x "$bin/$b"
done
cd "$bin"
# 2. The tests.
REQUIRE_GPU=1 timeout "${T_TESTS:-120}" ./gpu_kernels_lib gemm --test-threads 1 > "$out/gemm-tests.log" 2>&1; rc_tests=$?
tail -3 "$out/gemm-tests.log"
# 3. Ours and cuBLAS.
timeout "${T_BENCH:-150}" ./hopper-gemm --sizes "${SIZES:-2048,4096,8192}" --runs "${RUNS:-10}" --json "$out/hopper-gemm.json" --twin-cubin "$bin/twin.cubin" ${GEMM_SCHEDULES:+--schedules "$GEMM_SCHEDULES"} \
  > "$out/hopper-gemm.log" 2>&1; rc_bench=$?
# 4. fast.cu's kernel 12 and cuBLAS.
rc_fastcu=skipped
if [ -n "$nvcc_pid" ]; then
  wait "$nvcc_pid"
  if [ -x "$bin/gemm-fastcu" ]; then
    timeout "${T_FASTCU:-60}" ./gemm-fastcu "${FASTCU_SIZES:-4096,8192}" > "$out/fastcu.log" 2>&1; rc_fastcu=$?
  else
    rc_fastcu="no binary (see nvcc.log)"
  fi
fi
cd "$here"
rm -rf "$bin"
echo "gpu_kernels_lib (gemm) rc=$rc_tests, hopper-gemm rc=$rc_bench, fast.cu kernel 12 rc=$rc_fastcu" | tee -a "$summary"
grep -hE "^(PASS|FAIL)|TFLOP|test result|registers|GemmEngine|fastcu" "$out/gemm-tests.log" "$out/hopper-gemm.log" "$out/fastcu.log" 2>/dev/null >> "$summary"
[ "$rc_tests" = 0 ] && [ "$rc_bench" = 0 ] && [ "$rc_fastcu" = 0 ]
