#!/usr/bin/env bash
# The GPU job of the GPT-2 trainer (staged by stage-gpu.sh): `gpu-run.sh one` on one GPU
# (PyTorch agreement test, a training run, the speed benchmark of ours, PyTorch eager and
# torch.compile, and llm.c when its sources were staged), `gpu-run.sh two` on two GPUs,
# `gpu-run.sh both` (one call on a two-GPU machine: tests, profile, one and two GPUs at B 64).
# Logs go to $OUT (at most 8 files).
set -u
cd "$(dirname "$0")"; here=$PWD
for f in *.xz; do [ -e "$f" ] && [ "$f" != llmc.tar.xz ] && xz -dkf "$f"; done
chmod +x gpt2 gpu_torch_agreement gpu_kernels_lib 2>/dev/null
export REQUIRE_GPU=1 NCCL_NVLS_ENABLE=0 RUST_BACKTRACE=1 LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export GPT2_BIN=$here/gpt2 GPT2_TORCH=$here/gpt2_torch.py PYTHON=python3 PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi -L   # printed, not saved: $OUT returns at most 8 files
started=$(date +%s); left() { echo $(( ${1} - ($(date +%s) - started) )); }
llmc_build() {
  mkdir -p llmc && tar -xJf llmc.tar.xz -C llmc && cd llmc &&
  sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' llmc/cuda_utils.cuh &&
  make train_gpt2cu GPU_COMPUTE_CAPABILITY=90 NO_MULTI_GPU=1 NO_USE_MPI=1 > "$OUT/llmc-build.txt" 2>&1
}
if [ "${1:-one}" = one ]; then
  [ -e llmc.tar.xz ] && (llmc_build) & builder=$!
  timeout 170 ./gpu_torch_agreement gpt2_124m_ --nocapture --test-threads=2 > "$OUT/agreement.txt" 2>&1
  echo "agreement rc=$? $(grep -h '^test result' "$OUT/agreement.txt")"; grep -E "^(f32|ours|torch)[^|]*:|panicked|outside" "$OUT/agreement.txt"
  timeout 40 ./gpt2 --config 124m --batch 8 --seq 1024 --steps 30 --lr 6e-4 --alphabet 512 > "$OUT/train.txt" 2>&1; echo "train rc=$?"
  grep -E "step +(1|10|20|30)/|summary|gpt2:" "$OUT/train.txt"
  timeout 30 ./gpt2 --profile --config 124m --batch 16 --seq 1024 --steps 6 > "$OUT/profile.txt" 2>&1; echo "profile rc=$?"; grep -E "^\|" "$OUT/profile.txt"
  timeout 75 ./gpt2 --bench --config 124m --batch 64 --seq 1024 --steps ${BENCH_STEPS:-12} > "$OUT/bench-ours.txt" 2>&1; echo "ours rc=$?"; grep -E "summary|step +(1|11|12|30)/|gpt2:" "$OUT/bench-ours.txt"
  timeout 45 python3 gpt2_torch.py --bench --batch 64 --seq 1024 --steps 30 > "$OUT/bench-torch-eager.txt" 2>&1; echo "eager rc=$?"; tail -1 "$OUT/bench-torch-eager.txt"
  wait $builder 2>/dev/null
  if [ -x llmc/train_gpt2cu ] && [ "$(left 200)" -gt 25 ]; then
    ./gpt2 make-shard --tokens 4200000 --out shard.bin > /dev/null
    (cd llmc && timeout $(left 200) ./train_gpt2cu -i ../shard.bin -j ../shard.bin -e d12 -b 64 -t 1024 -x 30 -v 1000 -s 0 -n 0 -h 0 > "$OUT/bench-llmc.txt" 2>&1; echo "llmc rc=$?")
    grep -E "^step +(11|30)/" "$OUT/bench-llmc.txt"
    awk '/^step +[0-9]+\/30/ { split($2, s, "/"); if (s[1] >= 11 && s[1] <= 30) { for (i = 1; i <= NF; i++) if ($i == "ms") { sum += $(i-1); n++ } } } END { if (n) printf "llm.c mean %.2f ms/step over %d steps (11-30) = %.0f tok/s\n", sum/n, n, 65536/(sum/n/1000) }' "$OUT/bench-llmc.txt" | tee -a "$OUT/bench-llmc.txt"
  else
    echo "llm.c: not built or no time left ($(left 200) s)"; tail -5 "$OUT/llmc-build.txt" 2>/dev/null
  fi
  if [ "$(left 230)" -gt 60 ]; then
    timeout $(left 232) python3 gpt2_torch.py --bench --compile --batch 64 --seq 1024 --steps 30 > "$OUT/bench-torch-compile.txt" 2>&1; echo "compile rc=$?"; tail -1 "$OUT/bench-torch-compile.txt"
  else
    echo "torch.compile: no time left"
  fi
elif [ "$1" = both ]; then
  # One call on a two-GPU machine (about 150 s): the agreement tests (f32, bf16, bf16 with the
  # CUDA graph, two ranks), the profile, one GPU at B 64 eager and with --graph, two GPUs at
  # B 64 per rank, and the library's attention tests when gpu_kernels_lib was staged.
  nvidia-smi -L > "$OUT/device.txt" 2>&1
  REQUIRE_MULTI_GPU=1 timeout 170 ./gpu_torch_agreement --nocapture --test-threads=3 > "$OUT/tests.txt" 2>&1
  echo "tests rc=$? $(grep -h '^test result' "$OUT/tests.txt")"; grep -E "^(f32|ours|torch)[^|]*:|panicked|outside|^summary" "$OUT/tests.txt"
  timeout 30 ./gpt2 --profile --config 124m --batch 16 --seq 1024 --steps 6 > "$OUT/profile.txt" 2>&1; echo "profile rc=$?"; grep -E "^\||summary" "$OUT/profile.txt"
  for mode in eager graph; do
    flag=; [ $mode = graph ] && flag=--graph
    timeout 45 ./gpt2 --bench $flag --config 124m --batch 64 --seq 1024 --steps 30 > "$OUT/bench-one-$mode.txt" 2>&1; echo "one b64 $mode rc=$?"; grep -E "summary|^graph" "$OUT/bench-one-$mode.txt"
  done
  timeout 60 ./gpt2 --ranks 2 --bench --config 124m --batch 64 --seq 1024 --steps 30 > "$OUT/bench-two.txt" 2>&1; echo "two b64 rc=$?"; grep -E "summary" "$OUT/bench-two.txt"
  # Where the graph pays: a small step (B 4, T 256, launch-bound), eager and recorded.
  for flag in "" --graph; do
    timeout 25 ./gpt2 --bench $flag --config 124m --batch 4 --seq 256 --steps 30 2>&1 | grep -E "summary|^graph" | sed "s/^/b4 t256 ${flag:-eager}: /"
  done | tee "$OUT/bench-small.txt"
  if [ -x gpu_kernels_lib ]; then
    timeout 40 ./gpu_kernels_lib attention --test-threads=1 > "$OUT/kernels-attention.txt" 2>&1; echo "kernels attention rc=$? $(grep -h '^test result' "$OUT/kernels-attention.txt")"; grep -E "FAILED|panicked" "$OUT/kernels-attention.txt"
  fi
else
  timeout 150 ./gpu_torch_agreement gpt2_two_ranks --nocapture --test-threads=1 > "$OUT/two-ranks-test.txt" 2>&1
  echo "two-ranks test rc=$? $(grep -h '^test result' "$OUT/two-ranks-test.txt")"; grep -E "summary|panicked" "$OUT/two-ranks-test.txt"
  timeout 80 ./gpt2 --ranks 2 --bench --config 124m --batch 64 --seq 1024 --steps 30 > "$OUT/bench-two.txt" 2>&1; echo "two rc=$?"; grep -E "summary" "$OUT/bench-two.txt"
  timeout 60 ./gpt2 --bench --config 124m --batch 64 --seq 1024 --steps 30 > "$OUT/bench-one.txt" 2>&1; echo "one rc=$?"; grep -E "summary" "$OUT/bench-one.txt"
fi
