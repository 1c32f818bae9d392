#!/usr/bin/env bash
# Session 24 s24-attn GPU job for the final call (one H200, about 75-90 s): issue 31's
# epilogues through shared memory. The mid call (mid-h200/, its job.sh) moved three picks: the
# forward at D 128 without the mask up to S 1k to `_chain_ostg`, the backward at bf16 D 128 to
# `_obulk` (and `_late_obulk` with the mask). This job checks them and times the next trials,
# each beside the pick in the same process, twice (a pick moves only on two runs that agree).
# 1. gpu_kernels_lib (REQUIRE_GPU=1): `attention_forward_persistent_kernels_match_their_twins_and_f64`
#    (every sm_90 forward instance of D 64/128 shapes against f64 and the pick, the `_ostg`
#    trials among them), `attention_forward_takes_the_hopper_kernels_on_sm_90_and_matches_f64`
#    (the picks), `attention_backward_on_sm_90_matches_f64` (the new backward picks, the bulk
#    schedule as the first trial), `s24_staged_backward_epilogue_on_sm_90_matches_f64`.
# 2. bench_attention, D 64 and 128, S 512-4k, forward (BENCH_FWD_FILTER=_o: the pick, its twin
#    and the staged instances: D 128 causal `d128_causal_persistent_ostg`, D 64
#    `d64_persistent_ostg`, `d64_causal_pingpong_persistent_ostg`) and backward (the pick and
#    BENCH_TRIAL_FILTER=_o,bf16$,_late$,_red$: the schedules the picks stand for, `_ostg`, and
#    the D 64 `_red_obulk` trials), each twice.
# 3. PyTorch SDPA (cuDNN, FA2) on the same shapes, forward and backward.
# 4. The tables (ours / cuDNN) and VERDICT lines: each trial over the pick in both runs.
# Everything under $OUT/attn/ is packed into $OUT/attn.tar.xz; stdout has the tables.
# Staged by bench/results/s24-attn/stage.sh into .device-bin/attn (from the s24-attn tree).
# Run from the repository root: `bash .device-bin/attn/job.sh`.
cd "$(dirname "$0")" || exit 1
for f in *.xz; do [ -f "$f" ] && xz -dkf "$f" && chmod +x "${f%.xz}"; done
export REQUIRE_GPU=1 RUST_BACKTRACE=1
top=${OUT:-out}
out=$top/attn
mkdir -p "$out"
python=${TORCH_PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$python" ] || python=python3
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
echo "commit $(cat commit.txt)"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 200 > "$out/clocks.csv" 2>/dev/null &
smi=$!
start=$SECONDS
timeout "${TESTS_S:-25}" ./gpu_kernels_lib attention_forward_persistent_kernels_match_their_twins_and_f64 attention_forward_takes_the_hopper_kernels_on_sm_90_and_matches_f64 \
  attention_backward_on_sm_90_matches_f64 s24_staged --test-threads=4 --nocapture > "$out/tests.txt" 2>&1
echo "GPU tests rc=$? ($((SECONDS - start)) s)"
grep -h "^test \|test result\|panicked" "$out/tests.txt" | cut -c1-200 | head -12
run() { # TAG SECONDS ENV...: bench_attention into $out/TAG.json / .txt
  local tag=$1 limit=$2; shift 2
  start=$SECONDS
  env BENCH_REPEAT="${REPEAT:-3}" BENCH_MAX_S=4096 "$@" timeout "$limit" ./bench_attention "$out/$tag.json" > "$out/$tag.txt" 2>&1
  echo "$tag rc=$? ($((SECONDS - start)) s)"
}
fwd=(BENCH_FWD_ONLY=1 BENCH_FWD_ALL=1 BENCH_FWD_FILTER=_o)
bwd=(BENCH_TRIAL=1 'BENCH_TRIAL_FILTER=_o,bf16$,_late$,_red$')
run fwd1 "${FWD_S:-12}" "${fwd[@]}"
run bwd1 "${BWD_S:-18}" "${bwd[@]}"
run fwd2 "${FWD_S:-12}" "${fwd[@]}"
run bwd2 "${BWD_S:-18}" "${bwd[@]}"
start=$SECONDS
env BENCH_REPEAT="${REPEAT:-3}" BENCH_MAX_S=4096 timeout "${SDPA_S:-30}" "$python" attention_sdpa.py "$out/sdpa.json" > "$out/sdpa.txt" 2>&1
echo "sdpa rc=$? ($((SECONDS - start)) s)"
kill "$smi" 2>/dev/null
"$python" - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
def rows(name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return []
    out = []
    for line in open(p):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out
ref = {(r["impl"], r["head_dim"], r["seq"], r["causal"]): r for r in rows("sdpa.json")}
nan = float("nan")
def fwd_runs(r):
    x = [(r["fwd_path"], r["fwd_tflops"])]
    if "fwd_twin_path" in r:
        x.append((r["fwd_twin_path"], r["fwd_twin_tflops"]))
    return x + [(k, v[1]) for k, v in r.get("fwd_all", {}).items()]
def bwd_runs(r):
    return [(r["bwd_path"], r["bwd_tflops"])] + [(k, v[1]) for k, v in r.get("bwd_trials", {}).items()]
for kind, names, runs, col in (("forward", ("fwd1.json", "fwd2.json"), fwd_runs, "fwd_tflops"), ("backward", ("bwd1.json", "bwd2.json"), bwd_runs, "bwd_tflops")):
    # (head dim, S, causal) keys.
    both = [{(r["head_dim"], r["seq"], r["causal"]): r for r in rows(n)} for n in names]
    for i, table in enumerate(both):
        print(f"== {kind}, run {i + 1}: TFLOP/s, / cuDNN")
        for key in sorted(table):
            r = table[key]
            cu = ref.get(("cudnn",) + key, {}).get(col, nan)
            fa = ref.get(("fa2",) + key, {}).get(col, nan)
            print(f"D {key[0]:3} S {key[1]:5} {'causal' if key[2] else 'none  '} cuDNN {cu:6.1f} FA2 {fa:6.1f}")
            for name, tf in runs(r):
                print(f"    {name.replace('attention_', ''):48} {tf:6.1f}  {tf / cu:.3f}")
    print(f"== VERDICT ({kind}): each trial / the pick, run 1, run 2")
    for key in sorted(both[0]):
        r1, r2 = both[0][key], both[1].get(key)
        pick = runs(r1)[0]
        for name, tf in runs(r1)[1:]:
            if name == pick[0]:
                continue
            t2 = dict(runs(r2)).get(name) if r2 else None
            p2 = runs(r2)[0][1] if r2 else None
            a = tf / pick[1]
            b = (t2 / p2) if (t2 and p2) else nan
            flag = "FASTER in both" if a > 1.02 and b > 1.02 else ("slower in both" if a < 0.98 and b < 0.98 else "mixed or within 2%")
            print(f"D {key[0]:3} S {key[1]:5} {'causal' if key[2] else 'none  '} {name.replace('attention_', ''):44} / {pick[0].replace('attention_', '')}: {a:.3f} {b:.3f}  {flag}")
PY
grep -h "GPT-2" "$out"/bwd1.txt | cut -c1-300
tar -C "$top" -cJf "$top/attn.tar.xz" attn && rm -rf "$out"
echo "job: $((SECONDS)) s"
