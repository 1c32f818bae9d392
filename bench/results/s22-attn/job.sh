#!/usr/bin/env bash
# Session 22 s22-attn GPU job (one H200, about 45 s): issue 31's D 256 on sm_90.
# 1. gpu_kernels_lib's `s22_d256_forward_and_backward_on_the_gpu_match_f64` (REQUIRE_GPU=1): the
#    forward at D 256 through the safe call (sm_90: `attention_d256`, `attention_d256_causal`;
#    Bshd / GQA: the portable path) and the portable backward against f64, then B 2 H 40
#    S 1030 (many more query tiles than SMs), 64 sampled rows of each kernel against f64.
# 2. bench_attention: the D 256 forward, S 1k / 2k / 4k (B·S = 16k, H 8), causal or not, the
#    pick (the overlapped schedule) and its `_serial` form (BENCH_FWD_ALL=1).
# 3. PyTorch SDPA (cuDNN, FA2) on the same shapes, forward only; then ours / cuDNN per shape.
# Staged by bench/results/s22-attn/stage.sh into .device-bin/attn (from the s22-attn tree).
# Run from the repository root: `bash .device-bin/attn/job.sh`; results under $OUT/attn/.
cd "$(dirname "$0")" || exit 1
for f in gpu_kernels_lib.xz bench_attention.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
export REQUIRE_GPU=1 RUST_BACKTRACE=1
out=${OUT:-out}/attn
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$out/gpu.txt"
cat commit.txt
start=$SECONDS
timeout "${TESTS_S:-15}" ./gpu_kernels_lib s22_d256 --test-threads=1 --nocapture > "$out/tests.txt" 2>&1
echo "D 256 GPU test rc=$? ($((SECONDS - start)) s)"
grep -h "^test \|test result\|panicked\|sampled rows\|forward attention\|sm_" "$out/tests.txt" | head -20
export BENCH_D256=1 BENCH_D=256 BENCH_FWD_ONLY=1 BENCH_FWD_ALL=1 BENCH_MIN_S=1024 BENCH_MAX_S=4096 BENCH_D256_MAX_S=4096
start=$SECONDS
timeout "${BENCH_S:-10}" ./bench_attention "$out/ours.json" > "$out/ours.txt" 2>&1
echo "bench_attention rc=$? ($((SECONDS - start)) s)"
cat "$out/ours.txt"
start=$SECONDS
timeout "${SDPA_S:-20}" python3 attention_sdpa.py "$out/sdpa.json" > "$out/sdpa.txt" 2>&1
echo "attention_sdpa rc=$? ($((SECONDS - start)) s)"
cat "$out/sdpa.txt"
python3 - "$out" <<'PY'
import json, sys, os
d = sys.argv[1]
def rows(name):
    path = os.path.join(d, name)
    return [json.loads(l) for l in open(path) if l.strip()] if os.path.exists(path) else []
ours = {(r["seq"], r["causal"]): r for r in rows("ours.json")}
ref = {(r["impl"], r["seq"], r["causal"]): r for r in rows("sdpa.json")}
print("D 256 forward TFLOP/s: ours (kernel) / cuDNN / FA2, ours/cuDNN")
for (s, c), r in sorted(ours.items()):
    cu, fa = ref.get(("cudnn", s, c), {}).get("fwd_tflops"), ref.get(("fa2", s, c), {}).get("fwd_tflops")
    ratio = f"{r['fwd_tflops'] / cu:.3f}" if cu else "-"
    print(f"S {s:5} {'causal' if c else 'none  '} {r['fwd_tflops']:7.1f} ({r['fwd_path']}) / {cu or float('nan'):7.1f} / {fa or float('nan'):7.1f}  {ratio}")
    for name, (ms, tf) in r.get("fwd_all", {}).items():
        print(f"        {name}: {tf:7.1f}" + (f"  {tf / cu:.3f}" if cu else ""))
PY
