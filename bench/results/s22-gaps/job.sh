#!/usr/bin/env bash
# Session 22, helper gaps (issue 30 item 2): is `KernelBuilder::runtime_unroll(4)` worth making
# the builder's default? The same benches built twice on the build machine (main's tree at the
# commit in commit.txt): `.base` with the builder's default flags, `.ru4` with every kernel
# crate of the bench built with `runtime_unroll(4)` (flags -unroll-max-count=4
# -unroll-partial-threshold=200 -unroll-runtime-multi-exit=true). Twin cubins built here by
# nvcc 13.0.88 with each bench's own flags (ports8/ports9 gpu-job.sh, kernels' stage-kernels.sh).
# Run on the GPU machine from the repository root:  bash .device-bin/gaps/job.sh
# Prints, and writes to $OUT/gaps/: rows-{base,ru4}.txt (the kernel library's row kernels
# beside their CUDA C++ twins: `pair` lines, op, shape, ours us, twin us), ports9-ru4.txt
# (twin/ours per kernel: L4, L5, V2; base = session 21's figures). About 42 s at most (38 s of timeouts, after xz -d of two 41 MB binaries); bench_rows runs its
# whole table (norms, softmax, activations, AdamW last), cut by its timeout if slower than 16 s: every step has its own timeout. (bench/ports8
# is left out: under runtime_unroll(4) its vLLM kernels' SASS does not change, and its llm.c crate
# was timed both ways in session 21, bench/results/s21-gaps.)
cd "$(dirname "$0")" || exit 1
OUT=${OUT:-$(pwd)/out}
R=$OUT/gaps; mkdir -p "$R"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for f in *.xz; do [ -f "$f" ] && xz -dkf "$f" && chmod +x "${f%.xz}"; done
{
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "commit: $(cat commit.txt)"
start=$SECONDS
step() { # name timeout command...
  local name=$1 t=$2; shift 2
  local s=$SECONDS
  timeout "$t" "$@" > "$R/$name.txt" 2>&1; local rc=$?
  echo "== $name rc=$rc $((SECONDS - s)) s"
}
step rows-base 16 ./bench_rows.base rows_twins.cubin
step rows-ru4 16 ./bench_rows.ru4 rows_twins.cubin
# ports9: the kernels runtime_unroll(4) changes (L4, L5; V2's `poly_norm_kernel_fixed`) and V2
# (this branch's MultiBlockReduce: its first figure). Only the ru4 build is staged (the build
# machine's time ran out): "base" is session 21's bench run 1 of the same kernels on an H200
# (bench/results/s21-gaps2/gpu-h200/bench1.txt), the old MultiBlockReduce for V2's row.
export PORTS9_ONLY=L4,L5,V2
cp ports9-s21-bench1.txt "$R/ports9-base.txt"
step ports9-ru4 6 ./ports9_bench.ru4 p9_llmc.cubin p9_llmc_nofast.cubin p9_vllm.cubin
echo "total $((SECONDS - start)) s"
python3 compare.py "$R" 2>&1 || true
} 2>&1 | tee "$R/job.txt"
