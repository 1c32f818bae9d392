#!/usr/bin/env bash
# Session 23 s23-attn GPU job for the final call (one H200, about 50-60 s): issue 31's chained
# persistent forward beside the picks, and the D 256 kernels without loop spills, twice each in
# one call (a pick moves only on two runs that agree).
# 1. gpu_kernels_lib (REQUIRE_GPU=1): `attention_forward_persistent_kernels_match_their_twins_and_f64`
#    (every sm_90 forward instance of D 64/128 shapes, the `_chain` ones included, against f64
#    and the pick) and `s22_d256_forward_and_backward_on_the_gpu_match_f64` (every D 256
#    instance against f64).
# 2. bench_attention (this branch), twice: D 128, S 512-4k, causal or not, forward only: the
#    pick, its twin and the `_chain` instances (BENCH_FWD_FILTER=chain); D 256, S 1k-4k: the
#    pick and its `_serial` form.
# 3. bench_attention_base (session 22's main, when staged): D 128 and D 256 picks (D 256 with
#    its loop spills, 84-104 bytes).
# 4. PyTorch SDPA (cuDNN, FA2) on the same shapes; then the tables (ours / cuDNN) and the
#    VERDICT lines: each `_chain` instance over the pick in both runs.
# Everything under $OUT/attn/ is packed into $OUT/attn.tar.xz; stdout has the tables.
# Staged by bench/results/s23-attn/stage.sh into .device-bin/attn (from the s23-attn tree).
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
timeout "${TESTS_S:-30}" ./gpu_kernels_lib attention_forward_persistent_kernels_match_their_twins_and_f64 s22_d256 --test-threads=1 --nocapture > "$out/tests.txt" 2>&1
echo "GPU tests rc=$? ($((SECONDS - start)) s)"
grep -h "^test \|test result\|panicked" "$out/tests.txt" | cut -c1-200 | head -12
run() { # TAG BINARY ENV...: bench_attention into $out/TAG.json / .txt
  local tag=$1 bin=$2; shift 2
  [ -x "$bin" ] || { echo "$tag: no $bin"; return; }
  start=$SECONDS
  env BENCH_FWD_ONLY=1 BENCH_REPEAT="${REPEAT:-3}" "$@" timeout "${BENCH_S:-12}" ./"$bin" "$out/$tag.json" > "$out/$tag.txt" 2>&1
  echo "$tag rc=$? ($((SECONDS - start)) s)"
}
d128=(BENCH_D=128 BENCH_MAX_S=4096 BENCH_FWD_ALL=1 BENCH_FWD_FILTER=chain)
d256=(BENCH_D=256 BENCH_D256=1 BENCH_MIN_S=1024 BENCH_MAX_S=4096 BENCH_D256_MAX_S=4096 BENCH_FWD_ALL=1)
run d128 bench_attention "${d128[@]}"
run d256 bench_attention "${d256[@]}"
run base bench_attention_base BENCH_D=128 BENCH_MAX_S=4096
run base256 bench_attention_base BENCH_D=256 BENCH_D256=1 BENCH_MIN_S=1024 BENCH_MAX_S=4096 BENCH_D256_MAX_S=4096
run d128b bench_attention "${d128[@]}"
run d256b bench_attention "${d256[@]}"
sdpa() { # TAG ENV...
  local tag=$1; shift
  start=$SECONDS
  env BENCH_FWD_ONLY=1 BENCH_REPEAT="${REPEAT:-3}" "$@" timeout "${SDPA_S:-25}" "$python" attention_sdpa.py "$out/$tag.json" > "$out/$tag.txt" 2>&1
  echo "$tag rc=$? ($((SECONDS - start)) s)"
}
sdpa sdpa BENCH_D=128 BENCH_MAX_S=4096
sdpa sdpa256 BENCH_D=256 BENCH_D256=1 BENCH_MIN_S=1024 BENCH_MAX_S=4096
kill "$smi" 2>/dev/null
"$python" - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
def rows(name):
    p = os.path.join(d, name)
    return [json.loads(l) for l in open(p) if l.strip()] if os.path.exists(p) else []
def runs(r):
    x = [(r["fwd_path"], r["fwd_tflops"], r["fwd_ms"])]
    if "fwd_twin_path" in r:
        x.append((r["fwd_twin_path"], r["fwd_twin_tflops"], r.get("fwd_twin_ms", float("nan"))))
    return x + [(k, v[1], v[0]) for k, v in r.get("fwd_all", {}).items()]
for ours_name, ref_name, title in (("d128.json", "sdpa.json", "D 128, run 1"), ("d128b.json", "sdpa.json", "D 128, run 2"), ("base.json", "sdpa.json", "D 128, session 22's binary"),
                                   ("d256.json", "sdpa256.json", "D 256, run 1"), ("d256b.json", "sdpa256.json", "D 256, run 2"), ("base256.json", "sdpa256.json", "D 256, session 22's binary")):
    ref = {(r["impl"], r["head_dim"], r["seq"], r["causal"]): r for r in rows(ref_name)}
    print(f"== {title}: TFLOP/s (ms), / cuDNN")
    for r in rows(ours_name):
        key = (r["head_dim"], r["seq"], r["causal"])
        cu = ref.get(("cudnn",) + key, {})
        fa = ref.get(("fa2",) + key, {})
        c = cu.get("fwd_tflops", float("nan"))
        print(f"S {key[1]:5} {'causal' if key[2] else 'none  '} cuDNN {c:6.1f} ({cu.get('fwd_ms', float('nan')):.4f}) FA2 {fa.get('fwd_tflops', float('nan')):6.1f}")
        for name, tf, ms in runs(r):
            print(f"    {name.replace('attention_', ''):44} {tf:6.1f} ({ms:.4f})  {tf / c:.3f}")
# Each `_chain` instance over the pick, per shape, in both runs.
both = [{(r["seq"], r["causal"]): r for r in rows(n)} for n in ("d128.json", "d128b.json")]
print("== VERDICT (D 128): each _chain instance / the pick, run 1, run 2")
for key in sorted(both[0]):
    r1, r2 = both[0][key], both[1].get(key)
    pick = r1["fwd_path"]
    for name, tf, _ in runs(r1):
        if "_chain" not in name:
            continue
        t2 = dict((n, t) for n, t, _ in runs(r2)).get(name) if r2 else None
        p2 = r2["fwd_tflops"] if r2 else None
        a = tf / r1["fwd_tflops"]
        b = (t2 / p2) if (t2 and p2) else float("nan")
        flag = "FASTER in both" if a > 1.02 and b > 1.02 else ("slower in both" if a < 0.98 and b < 0.98 else "mixed or within 2%")
        print(f"S {key[0]:5} {'causal' if key[1] else 'none  '} {name.replace('attention_', ''):40} / {pick.replace('attention_', '')}: {a:.3f} {b:.3f}  {flag}")
PY
tar -C "$top" -cJf "$top/attn.tar.xz" attn && rm -rf "$out"
echo "job: $((SECONDS)) s"
