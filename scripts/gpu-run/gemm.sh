#!/usr/bin/env bash
# Issue 31's GEMM on an H100/H200: the library's sm_90 bf16 GEMM (ferrocuda_kernels::gemm::
# hopper_gemm_bf16, kernel ferrocuda_kernels_hopper::gemm::gemm_bf16_tn) checked and timed.
#
#   scripts/gpu-run/gemm.sh stage DEST   (here, with cargo) builds and stages into DEST (a folder
#                                         git ignores, e.g. .device-bin/gemm): the GEMM tests of
#                                         kernels/tests/gpu_kernels_lib.rs and the hopper-gemm
#                                         benchmark, xz-compressed, this script and the commit.
#   DEST/gemm.sh run                      (on the GPU machine, about 60-90 s) runs them:
#     1. gpu_kernels_lib, the tests whose names contain "gemm", with REQUIRE_GPU=1: cuBLAS(Lt)
#        paths, hopper_gemm_bf16 at ragged shapes (1x2x8 .. 4096^3) against f64 and cuBLAS, the
#        refusals, and gemm() on the path the table picks. Look for "test result: ok. 3 passed".
#     2. hopper-gemm --sizes ${SIZES:-2048,4096,8192} --runs ${RUNS:-20}: the TMA/wgmma probes
#        (PASS lines), then per size: PASS lines for `library`, `kernel` and the CUDA C++ twin
#        (sampled f64 + whole C vs cuBLAS), isolated and steady-state timings (% of cuBLAS), and
#        burst/sustained figures with the SM clock and power beside each. The steady-state
#        "library" ratios are what kernels/src/gemm.rs's HOPPER_GEMM_TABLE records.
# Logs go to $OUT (or DEST/out/): gemm-tests.log, hopper-gemm.log, hopper-gemm.json, gemm-gpu.txt.
set -u
mode=${1:?usage: gemm.sh stage DEST | gemm.sh run}
if [ "$mode" = stage ]; then
  set -euo pipefail
  root=$(cd "$(dirname "$0")/../.." && pwd)
  dest=${2:?usage: gemm.sh stage DEST}
  mkdir -p "$dest"
  dest=$(cd "$dest" && pwd)
  cd "$root"
  pick() { # cargo JSON on stdin; copies the executable of target $2 (test or bin) to $1/$2
    python3 -c '
import json, sys, shutil
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[2]:
        shutil.copy(m["executable"], sys.argv[1] + "/" + sys.argv[2])
' "$1" "$2"
  }
  cargo test --release -p ferrocuda-kernels --test gpu_kernels_lib --no-run --message-format=json 2>/dev/null | pick "$dest" gpu_kernels_lib
  cargo build --release -p hopper-kernels --bin hopper-gemm --message-format=json 2>/dev/null | pick "$dest" hopper-gemm
  for b in gpu_kernels_lib hopper-gemm; do
    test -x "$dest/$b" || { echo "gemm.sh stage: $b did not build (run the cargo command without --message-format)"; exit 1; }
    xz -9e -T0 -f "$dest/$b"
  done
  cp "$root/scripts/gpu-run/gemm.sh" "$dest/"
  git rev-parse HEAD > "$dest/commit.txt"
  ls -la "$dest"
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv | tee "$out/gemm-gpu.txt"
echo "commit: $(cat "$here/commit.txt" 2>/dev/null)" | tee -a "$out/gemm-gpu.txt"
for b in gpu_kernels_lib hopper-gemm; do
  xz -dc "$here/$b.xz" > "$out/$b" && chmod +x "$out/$b"
done
cd "$out"
REQUIRE_GPU=1 timeout 90 ./gpu_kernels_lib gemm --test-threads 1 2>&1 | tee "$out/gemm-tests.log"; rc_tests=${PIPESTATUS[0]}
timeout 150 ./hopper-gemm --sizes "${SIZES:-2048,4096,8192}" --runs "${RUNS:-20}" --json "$out/hopper-gemm.json" --twin-cubin "$out/hopper-gemm-twin.cubin" \
  2>&1 | tee "$out/hopper-gemm.log"; rc_bench=${PIPESTATUS[0]}
rm -f "$out/gpu_kernels_lib" "$out/hopper-gemm"
echo "gpu_kernels_lib (gemm) rc=$rc_tests, hopper-gemm rc=$rc_bench" | tee -a "$out/gemm-gpu.txt"
grep -E "^(PASS|FAIL)|TFLOP|test result" "$out/hopper-gemm.log" "$out/gemm-tests.log" | tee -a "$out/gemm-gpu.txt" > /dev/null
[ "$rc_tests" = 0 ] && [ "$rc_bench" = 0 ]
