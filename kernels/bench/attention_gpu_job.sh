#!/usr/bin/env bash
# The attention backward GPU job of branch s9-attn-bwd (issue 31): GPU tests, compute-sanitizer
# memcheck and racecheck of the tensor-core backward, the forward/backward benchmark beside
# PyTorch's SDPA (cuDNN, FA2), the table, the f64 gradient check, an ncu profile of one call.
# Stage it from a build machine (binaries built there, xz'd to fit the 64 MiB carry):
#   cargo test --release -p ferrocuda-kernels --test gpu_kernels_lib --no-run   # note the path
#   cargo build --release -p ferrocuda-kernels --example bench_attention
#   D=.device-bin/attn-bwd; mkdir -p $D; cp <gpu_kernels_lib path> $D/gpu_kernels_lib
#   cp target/release/examples/bench_attention kernels/bench/attention_*.py kernels/bench/attention_gpu_job.sh $D/
#   (cd $D && xz bench_attention gpu_kernels_lib)
# then on the GPU machine: bash $D/attention_gpu_job.sh (results under $OUT, at most 7 files).
cd "$(dirname "$0")"; for f in *.xz; do xz -dk "$f" && chmod +x "${f%.xz}"; done
export REQUIRE_GPU=1 RUST_BACKTRACE=1 LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi -L | tee $OUT/logs.txt
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
timeout 60 ./gpu_kernels_lib attention --test-threads=1 > /tmp/tests.log 2>&1; echo "tests rc=$? $(grep -h '^test result' /tmp/tests.log)"
grep -h "^test \|panicked\|FAILED" /tmp/tests.log | head -20; cat /tmp/tests.log >> $OUT/logs.txt
timeout 30 /usr/local/cuda/bin/compute-sanitizer --tool memcheck ./gpu_kernels_lib attention_backward_on_the_tensor_cores --test-threads=1 > /tmp/memcheck.log 2>&1; echo "memcheck rc=$? $(grep -h 'ERROR SUMMARY\|^test result' /tmp/memcheck.log | tr '\n' ' ')"; cat /tmp/memcheck.log >> $OUT/logs.txt
timeout ${BENCH_S:-70} ./bench_attention $OUT/ours.jsonl > $OUT/ours.txt 2>&1; echo "bench rc=$?"; cat $OUT/ours.txt
timeout ${SDPA_S:-55} python3 attention_sdpa.py $OUT/sdpa.jsonl > $OUT/sdpa.txt 2>&1; echo "sdpa rc=$?"; tail -3 $OUT/sdpa.txt
python3 attention_table.py $OUT/ours.jsonl $OUT/sdpa.jsonl /tmp/table.json $OUT/table.md "$gpu" 2>&1 | tail -30
mkdir -p /tmp/check && ./bench_attention --check /tmp/check > /tmp/check.log 2>&1 && timeout 40 python3 attention_check.py /tmp/check >> /tmp/check.log 2>&1; echo "check rc=$?"; cat /tmp/check.log; cat /tmp/check.log >> $OUT/logs.txt
timeout 40 /usr/local/cuda/bin/compute-sanitizer --tool racecheck ./gpu_kernels_lib attention_backward_on_the_tensor_cores --test-threads=1 > /tmp/race.log 2>&1; echo "racecheck rc=$? $(grep -h 'RACECHECK SUMMARY\|ERROR SUMMARY\|^test result' /tmp/race.log | tr '\n' ' ')"; cat /tmp/race.log >> $OUT/logs.txt
BENCH_ONLY=128,4096,0 timeout 40 $(command -v ncu || echo /usr/local/cuda/bin/ncu) -k regex:attention_backward -c 3 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats ./bench_attention > $OUT/ncu.txt 2>&1; echo "ncu rc=$?"
grep -E "^  attention_backward|Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Warp Cycles Per Issued" $OUT/ncu.txt | head -30
