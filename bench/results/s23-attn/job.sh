#!/usr/bin/env bash
# Session 23 s23-attn GPU job (one H200, about 60-80 s): issue 31's short-sequence forward and
# D 256 trials, each beside the pick in the same call.
# 1. gpu_kernels_lib (REQUIRE_GPU=1): `attention_forward_persistent_kernels_match_their_twins_and_f64`
#    (every sm_90 forward instance of D 64/128 shapes, the new `_chain` ones included, against
#    f64 and the pick) and `s22_d256_forward_and_backward_on_the_gpu_match_f64` (every D 256
#    instance, `_pingpong` included, against f64).
# 2. bench_attention (this branch): D 128, S 512-4k, causal or not, forward only: the pick, its
#    twin and the `_chain` trials (BENCH_FWD_FILTER=chain); D 256, S 1k-4k: every schedule
#    (the pick, `_serial`, `_pingpong`).
#    Both again after 3 (d128b, d256b: a second run in the same call).
# 3. bench_attention_base (main's binary, when staged): D 128 the same shapes (pick and twin), so
#    the run-to-run spread of an unchanged kernel is read in the same call; D 256 (main's
#    `attention_d256` with its loop spills, against this branch's without).
# 4. Fixed costs: D 128 S 512 with B·S = 512 (BENCH_TOKENS: 64 query tiles, fewer than the
#    SMs: a call is about one tile's latency plus the call's fixed costs), ours and cuDNN.
# 5. PyTorch SDPA (cuDNN, FA2) on the shapes of 2 and 4; then one table, ours / cuDNN.
# 6. NCU=1 (default 1): Nsight Compute's duration and SM clock of the D 128 S 512 pick and of
#    `attention_d128_pingpong_persistent_chain_q2` (kernel time without the call's other work).
# Staged by bench/results/s23-attn/stage.sh into .device-bin/attn (from the s23-attn tree).
# Run from the repository root: `bash .device-bin/attn/job.sh`; results under $OUT/attn/.
cd "$(dirname "$0")" || exit 1
for f in *.xz; do [ -f "$f" ] && xz -dkf "$f" && chmod +x "${f%.xz}"; done
export REQUIRE_GPU=1 RUST_BACKTRACE=1
out=${OUT:-out}/attn
mkdir -p "$out"
python=${TORCH_PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$python" ] || python=python3
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
echo "commit $(cat commit.txt)"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 200 > "$out/clocks.csv" 2>/dev/null &
smi=$!
start=$SECONDS
timeout "${TESTS_S:-30}" ./gpu_kernels_lib attention_forward_persistent_kernels_match_their_twins_and_f64 s22_d256 --test-threads=1 --nocapture > "$out/tests.txt" 2>&1
echo "GPU tests rc=$? ($((SECONDS - start)) s)"
grep -h "^test \|test result\|panicked\|agree" "$out/tests.txt" | cut -c1-300 | head -24
run() { # TAG BINARY ENV...: bench_attention into $out/TAG.json / .txt
  local tag=$1 bin=$2; shift 2
  [ -x "$bin" ] || { echo "$tag: no $bin"; return; }
  start=$SECONDS
  env BENCH_FWD_ONLY=1 BENCH_REPEAT="${REPEAT:-3}" "$@" timeout "${BENCH_S:-12}" ./"$bin" "$out/$tag.json" > "$out/$tag.txt" 2>&1
  echo "$tag rc=$? ($((SECONDS - start)) s)"
  grep "^D" "$out/$tag.txt" | cut -c1-420
}
run d128 bench_attention BENCH_D=128 BENCH_MAX_S=4096 BENCH_FWD_ALL=1 BENCH_FWD_FILTER=chain
run d256 bench_attention BENCH_D=256 BENCH_D256=1 BENCH_MIN_S=1024 BENCH_MAX_S=4096 BENCH_D256_MAX_S=4096 BENCH_FWD_ALL=1
run base bench_attention_base BENCH_D=128 BENCH_MAX_S=4096
# Second runs of this branch's (a pick moves only on two runs that agree).
run d128b bench_attention BENCH_D=128 BENCH_MAX_S=4096 BENCH_FWD_ALL=1 BENCH_FWD_FILTER=chain
run d256b bench_attention BENCH_D=256 BENCH_D256=1 BENCH_MIN_S=1024 BENCH_MAX_S=4096 BENCH_D256_MAX_S=4096 BENCH_FWD_ALL=1
run base256 bench_attention_base BENCH_D=256 BENCH_D256=1 BENCH_MIN_S=1024 BENCH_MAX_S=4096 BENCH_D256_MAX_S=4096
run small512 bench_attention BENCH_ONLY=128,512,0 BENCH_TOKENS=512 BENCH_FWD_ALL=1 BENCH_FWD_FILTER=chain
sdpa() { # TAG ENV...
  local tag=$1; shift
  start=$SECONDS
  env BENCH_FWD_ONLY=1 BENCH_REPEAT="${REPEAT:-3}" "$@" timeout "${SDPA_S:-25}" "$python" attention_sdpa.py "$out/$tag.json" > "$out/$tag.txt" 2>&1
  echo "$tag rc=$? ($((SECONDS - start)) s)"
}
sdpa sdpa BENCH_D=128 BENCH_MAX_S=4096
sdpa sdpa256 BENCH_D=256 BENCH_D256=1 BENCH_MIN_S=1024 BENCH_MAX_S=4096
sdpa sdpa-small512 BENCH_D=128 BENCH_MAX_S=512 BENCH_TOKENS=512
grep -h "^D" "$out"/sdpa*.txt | head -40
if [ "${NCU:-1}" = 1 ] && [ -x /usr/local/cuda/bin/ncu ]; then
  for k in attention_d128_pingpong_persistent attention_d128_pingpong_persistent_chain_q2; do
    start=$SECONDS
    BENCH_ONLY=128,512,0 BENCH_FWD_ONLY=1 BENCH_FWD_ALL=1 BENCH_FWD_FILTER=chain BENCH_REPEAT=1 timeout "${NCU_S:-15}" /usr/local/cuda/bin/ncu --clock-control none \
      --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed \
      --kernel-name "regex:^${k}\$" --launch-skip 2 --launch-count 1 ./bench_attention > "$out/ncu-$k.txt" 2>&1
    echo "ncu $k rc=$? ($((SECONDS - start)) s)"; grep -E "gpu__time|per_second|sm__throughput|hmma" "$out/ncu-$k.txt" | head -4
  done
fi
kill "$smi" 2>/dev/null
"$python" - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
def rows(name):
    p = os.path.join(d, name)
    return [json.loads(l) for l in open(p) if l.strip()] if os.path.exists(p) else []
for ours_name, ref_name, title in (("d128.json", "sdpa.json", "D 128"), ("d128b.json", "sdpa.json", "D 128, run 2"), ("d256.json", "sdpa256.json", "D 256"), ("d256b.json", "sdpa256.json", "D 256, run 2"), ("base.json", "sdpa.json", "D 128, main's binary"), ("base256.json", "sdpa256.json", "D 256, main's binary"),
                                   ("small512.json", "sdpa-small512.json", "D 128 S 512, B 1 (64 query tiles)")):
    ref = {(r["impl"], r["head_dim"], r["seq"], r["causal"]): r for r in rows(ref_name)}
    print(f"== {title}: TFLOP/s (ms), / cuDNN")
    for r in rows(ours_name):
        key = (r["head_dim"], r["seq"], r["causal"])
        cu = ref.get(("cudnn",) + key, {})
        c, cms = cu.get("fwd_tflops", float("nan")), cu.get("fwd_ms", float("nan"))
        runs = [(r["fwd_path"], r["fwd_tflops"], r["fwd_ms"])]
        if "fwd_twin_path" in r:
            runs.append((r["fwd_twin_path"], r["fwd_twin_tflops"], r.get("fwd_twin_ms", float("nan"))))
        runs += [(k, v[1], v[0]) for k, v in r.get("fwd_all", {}).items()]
        print(f"S {key[1]:5} {'causal' if key[2] else 'none  '} cuDNN {c:6.1f} ({cms:.4f})")
        for name, tf, ms in runs:
            print(f"    {name.replace('attention_', ''):44} {tf:6.1f} ({ms:.4f})  {tf / c:.3f}")
PY
echo "job: $((SECONDS)) s"
