#!/usr/bin/env bash
# The ferrocuda-kernels GPU job (issue 31): the attention GPU tests, the attention forward beside
# PyTorch SDPA (cuDNN, FA2), the row kernels beside their CUDA C++ twins, in one job. One job for
# every attention and row-kernel run (it replaces sessions 13-14's attn-s13-job.sh,
# attn-s14-job.sh, rows.sh and rows-s14.sh; the backward's own job,
# kernels/bench/attention_gpu_job.sh, runs from it with BWD=1). Staged by
# scripts/gpu-run/stage-kernels.sh DEST; on the GPU machine: `bash DEST/kernels-job.sh`.
# Everything it prints goes to $OUT/kernels.txt, raw logs to $OUT/kernels.tar.gz.
#
# The default run (about 60-80 s on an H100; session 15's questions):
#  1. TESTS=attention: every attention GPU test of gpu_kernels_lib with REQUIRE_GPU=1 (among them
#     attention_forward_persistent_kernels_match_their_twins_and_f64, which runs every forward
#     instance, the `_poly` ones included, against f64 and against the pick).
#     TESTS=forward: only `attention_forward*`; TESTS=backward: the backward's (every test
#     named `*attention_backward*`, and session 17's `s17_persistent_backward*`);
#     TESTS=s17: only the latter; TESTS=0: none.
#  2. ATTN=s15: the D 64 forward at S 2k and 4k, causal or not (BENCH_D=64, forward only): the
#     pick (`ex2.approx` for every exponential), its twin and the `_poly4` / `_poly6` kernels
#     (4 or 6 of each row's 16 column pairs through the FMA-pipe polynomial), beside cuDNN and
#     FA2 on the same shapes; a table "fwd s15" (TFLOP/s and ratio to cuDNN per kernel, the best
#     poly / the pick). ATTN=full: the whole forward/backward table (D 64 and 128, S 512 to
#     MAX_S, every schedule up to ALL_MAX_S, the previous binary beside it when staged: BASE=1)
#     as session 14 ran it; ATTN=0: none.
#  3. ROWS=rotary: the rotary embedding beside its twin (BENCH_ROWS_VARIANTS=rotary: 3 repeats of
#     7 rounds, `cand` lines; on the library's grid and with a thread a chunk, the library's
#     kernel and session 16's `packed::rotary_trials`, each beside the twin on the same grid;
#     `library` on the library grid is the figure, 0.98-0.99 on an H200). ROWS=full: every
#     row kernel (candidates, the whole table, the rows' GPU tests, PyTorch eager, rows-table.md);
#     ROWS=0: none.
# BENCH_TRIAL=1 (passed through to bench_attention): the backward's trial instance beside the
# pick (`_late_lpt` causal, `_persistent` otherwise: the table's "bwd trial" column).
# More: BWD=1 (then the backward job, kernels/bench/attention_gpu_job.sh, with its knobs),
# CHECK=1 (the f64/cuDNN gradient check), NCU=1 (Nsight speed of light of the D 128 forward pick
# at S 512 and 4k, or NCU_SHAPES="D,S,causal ..."), REPEAT (default 5 for ATTN=s15, 3 else).
# Look for: "tests rc=0", the "fwd s15" table, the rotary `cand` lines (ours/twin), "FAIL".
cd "$(dirname "$0")" || exit 1
here=$(pwd)
for f in *.xz; do [ -f "$f" ] && xz -dkf "$f" && chmod +x "${f%.xz}"; done
export REQUIRE_GPU=1 RUST_BACKTRACE=1 LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
OUT=${OUT:-$here/out}
R=$OUT/kernels; mkdir -p "$R"
exec > >(tee "$OUT/kernels.txt") 2>&1
python=${TORCH_PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$python" ] || python=python3
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
echo "commit: $(cat commit.txt 2>/dev/null)"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 100 > "$R/clocks.csv" 2>/dev/null &
smi=$!
clock() { # median SM clock and power since line $1 of clocks.csv
  local rows power
  rows=$(tail -n +"$1" "$R/clocks.csv" | awk -F', ' '{gsub(/ MHz/,"",$2); gsub(/ W/,"",$3); print $2, $3}')
  power=$(echo "$rows" | awk '{print $2}' | sort -n | awk '{p[NR]=$1} END{if (NR) print p[int((NR+1)/2)]}')
  echo "$rows" | sort -n | awk -v w="$power" '{a[NR]=$1} END{if (NR) printf "  SM clock median %s MHz (%s..%s), power median %s W, %d samples\n", a[int((NR+1)/2)], a[1], a[NR], w, NR}'
}
mark() { wc -l < "$R/clocks.csv"; }
rc_all=0
fail() { rc_all=1; }
job_start=$SECONDS

# 1. The attention GPU tests.
case ${TESTS:-attention} in
  0) ;;
  forward) filters=attention_forward ;;
  backward) filters="attention_backward s17_persistent_backward" ;;
  s17) filters=s17_persistent_backward ;;
  *) filters=attention ;;
esac
if [ "${TESTS:-attention}" != 0 ]; then
  start=$SECONDS
  timeout "${TESTS_S:-80}" ./gpu_kernels_lib $filters --test-threads=1 > "$R/tests.txt" 2>&1; rc=$?
  echo "tests rc=$rc ($((SECONDS - start)) s)"; [ $rc = 0 ] || fail
  grep -h "^test \|test result\|panicked" "$R/tests.txt" | head -30
fi

# bench BIN TAG ENV...: bench_attention into $R/TAG.jsonl / .txt, with the clock beside it.
bench() {
  local bin=$1 tag=$2 m rc; shift 2
  start=$SECONDS; m=$(mark)
  env BENCH_MMA=0 BENCH_WG=0 "$@" timeout "${BENCH_S:-120}" ./"$bin" "$R/$tag.jsonl" > "$R/$tag.txt" 2> "$R/$tag.err"; rc=$?
  echo "$tag rc=$rc ($((SECONDS - start)) s)"; [ $rc = 0 ] || fail
  clock "$m"
  grep "^D" "$R/$tag.txt" | cut -c1-400
}
sdpa() { # TAG ENV...: PyTorch SDPA into $R/TAG.jsonl
  local tag=$1 m rc; shift
  start=$SECONDS; m=$(mark)
  env "$@" timeout "${SDPA_S:-90}" "$python" attention_sdpa.py "$R/$tag.jsonl" > "$R/$tag.txt" 2> "$R/$tag.err"; rc=$?
  echo "$tag rc=$rc ($((SECONDS - start)) s)"; [ $rc = 0 ] || fail
  clock "$m"
  grep "^D" "$R/$tag.txt"
}

# 2. The attention forward.
case ${ATTN:-s15} in
  s15)
    s15_env=(BENCH_D=64 BENCH_MIN_S=2048 BENCH_MAX_S=4096 BENCH_FWD_ONLY=1 BENCH_REPEAT="${REPEAT:-5}")
    bench bench_attention ours "${s15_env[@]}" BENCH_FWD_ALL=1 BENCH_FWD_FILTER=poly
    sdpa sdpa "${s15_env[@]}"
    # Every kernel timed per shape, TFLOP/s and / cuDNN; then the best `_poly` / the pick.
    python3 - "$R/ours.jsonl" "$R/sdpa.jsonl" <<'PY'
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
ref = {}
for r in map(json.loads, open(sys.argv[2])):
    ref.setdefault((r["head_dim"], r["seq"], r["causal"]), {})[r["impl"]] = r["fwd_tflops"]
print("== fwd s15 (TFLOP/s, / cuDNN): the pick, its twin, the _poly kernels")
for r in ours:
    key = (r["head_dim"], r["seq"], r["causal"])
    c, fa2 = ref.get(key, {}).get("cudnn", float("nan")), ref.get(key, {}).get("fa2", float("nan"))
    runs = [(r["fwd_path"], r["fwd_tflops"])] + ([(r["fwd_twin_path"], r["fwd_twin_tflops"])] if "fwd_twin_path" in r else [])
    runs += [(k, v[1]) for k, v in r.get("fwd_all", {}).items()]
    poly = [x for x in runs if "poly" in x[0]]
    best = max(poly, key=lambda x: x[1]) if poly else (None, float("nan"))
    label = f"D{key[0]} S{key[1]} {'causal' if key[2] else 'full  '}"
    print(f"{label} cuDNN {c:.0f} FA2 {fa2:.0f} | " + " ".join(f"{n.replace('attention_', '')} {t:.0f} ({t / c:.3f})" for n, t in runs)
          + f" | best poly {str(best[0]).replace('attention_', '')}: {best[1] / runs[0][1]:.3f}x the pick, {best[1] / c:.3f}x cuDNN")
PY
    ;;
  full)
    bench bench_attention ours BENCH_FWD_ALL="${ALL:-1}" BENCH_FWD_ALL_MAX_S="${ALL_MAX_S:-1000000}" BENCH_D256="${D256:-0}" BENCH_REPEAT="${REPEAT:-3}" BENCH_MAX_S="${MAX_S:-8192}"
    sdpa sdpa BENCH_REPEAT="${REPEAT:-3}" BENCH_MAX_S="${MAX_S:-8192}" BENCH_D256="${D256:-0}"
    python3 attention_table.py "$R/ours.jsonl" "$R/sdpa.jsonl" "$R/table.json" "$R/table.md" "$gpu" > /dev/null && { echo "== ours"; grep "^|" "$R/table.md"; }
    python3 - "$R/ours.jsonl" "$R/sdpa.jsonl" <<'PY'
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
cudnn = {(r["head_dim"], r["seq"], r["causal"]): r["fwd_tflops"] for r in map(json.loads, open(sys.argv[2])) if r["impl"] == "cudnn"}
print("== fwd all (TFLOP/s, /cuDNN)")
for r in ours:
    c = cudnn.get((r["head_dim"], r["seq"], r["causal"]), float("nan"))
    runs = [(r["fwd_path"], r["fwd_tflops"])] + ([(r["fwd_twin_path"], r["fwd_twin_tflops"])] if "fwd_twin_path" in r else []) + [(k, v[1]) for k, v in r.get("fwd_all", {}).items()]
    best = max(runs, key=lambda x: x[1])
    print(f"D{r['head_dim']} S{r['seq']} {'causal' if r['causal'] else 'full  '} cuDNN {c:.0f} | " + " ".join(f"{n.replace('attention_', '')} {t:.0f} ({t / c:.2f})" for n, t in runs) + f" | best {best[0].replace('attention_', '')} {best[1] / c:.3f}")
PY
    # The previous binary (after the tables above, so that a run cut short keeps them).
    if [ "${BASE:-1}" = 1 ] && [ -x bench_attention_base ]; then
      bench bench_attention_base base BENCH_FWD_ALL="${ALL:-1}" BENCH_REPEAT="${REPEAT:-3}" BENCH_MAX_S="${BASE_MAX_S:-${MAX_S:-8192}}"
      python3 attention_table.py "$R/base.jsonl" "$R/sdpa.jsonl" "$R/base-table.json" "$R/base-table.md" "$gpu" > /dev/null && { echo "== base"; grep "^|" "$R/base-table.md"; }
    fi
    ;;
esac
cp "$R"/ours.jsonl "$R"/sdpa.jsonl "$OUT/" 2>/dev/null
if [ "${NCU:-0}" = 1 ]; then
  for shape in ${NCU_SHAPES:-128,512,0 128,4096,0}; do
    BENCH_ONLY=$shape BENCH_REPEAT=1 timeout "${NCU_S:-30}" /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight --kernel-name regex:attention_d --launch-count 1 ./bench_attention > "$R/ncu-$shape.txt" 2>&1
    echo "ncu $shape rc=$?"; grep -E "attention_d|Throughput|Duration|SM Frequency" "$R/ncu-$shape.txt" | head -12
  done
fi
if [ "${CHECK:-0}" = 1 ]; then
  mkdir -p /tmp/kernels-check && ./bench_attention --check /tmp/kernels-check > "$R/check.txt" 2>&1 && timeout 30 "$python" attention_check.py /tmp/kernels-check >> "$R/check.txt" 2>&1; rc=$?
  echo "check rc=$rc"; [ $rc = 0 ] || fail; tail -6 "$R/check.txt"
fi

# 3. The row kernels beside their twins (rebuilt here by nvcc when it is present).
if [ "${ROWS:-rotary}" != 0 ]; then
  cubin=$here/rows_twins.cubin
  if [ -x /usr/local/cuda/bin/nvcc ] && /usr/local/cuda/bin/nvcc -cubin -O3 -arch=sm_90 rows_twins.cu -o "$R/rows_twins.cubin" > "$R/rows-nvcc.log" 2>&1; then
    cubin=$R/rows_twins.cubin; echo "twins: built here ($(/usr/local/cuda/bin/nvcc --version | tail -1))"
  else
    echo "twins: the cubin built at staging ($(cat rows_twins.nvcc.txt 2>/dev/null))"
  fi
  start=$SECONDS; m=$(mark)
  if [ "${ROWS:-rotary}" = full ]; then
    BENCH_ROWS_VARIANTS=1 BENCH_ROWS_REPEATS=3 timeout 150 ./bench_rows "$cubin" > "$R/rows-ours.log" 2>&1; rc=$?
  else
    BENCH_ROWS_VARIANTS=rotary BENCH_ROWS_REPEATS=3 timeout 60 ./bench_rows "$cubin" > "$R/rows-ours.log" 2>&1; rc=$?
  fi
  echo "bench_rows rc=$rc ($((SECONDS - start)) s)"; [ $rc = 0 ] || fail
  clock "$m"
  grep -E "^(cand|pair|lib|device|check .*(FAIL|rotary))" "$R/rows-ours.log"
  if [ "${ROWS:-rotary}" = full ]; then
    timeout 90 ./gpu_kernels_lib --test-threads 1 row_kernels_on_the_gpu norms_at_4096 packed_kernels_on_misaligned > "$R/rows-tests.log" 2>&1; rc=$?
    echo "rows tests rc=$rc"; [ $rc = 0 ] || fail
    grep -E "^test |test result" "$R/rows-tests.log"
    timeout 90 "$python" torch_rows.py > "$R/rows-torch.log" 2>&1; rc=$?
    echo "torch rows rc=$rc"; [ $rc = 0 ] || fail
    python3 rows_table.py "$R/rows-ours.log" "$R/rows-torch.log" > "$R/rows-table.md"
    cat "$R/rows-table.md"
  fi
fi
kill "$smi" 2>/dev/null
echo "kernels-job: $((SECONDS - job_start)) s, $([ $rc_all = 0 ] && echo PASS || echo FAIL)"
tar -C "$OUT" -czf "$OUT/kernels.tar.gz" kernels && rm -rf "$R"
# 4. BWD=1: the backward's job (its own knobs; its results under $OUT too).
if [ "${BWD:-0}" = 1 ]; then
  bash attention_gpu_job.sh || rc_all=1
fi
exit $rc_all
