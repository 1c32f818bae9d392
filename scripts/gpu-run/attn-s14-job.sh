#!/usr/bin/env bash
# Session 14's attention forward job (issue 31, branch s14-attn): the forward's new schedule
# (key tiles last first, the masked tile peeled, the wait for P·V at the top of the next step
# so that the softmax overlaps it) timed beside the previous binary (`bench_attention_base`,
# main before the branch) and PyTorch SDPA (cuDNN, FA2) in one job, every sm_90 forward
# schedule of each shape (BENCH_FWD_ALL=1), the SM clock sampled every 100 ms beside each
# phase, and the GPU tests of the attention forward. Staged by scripts/gpu-run/attn-s14.sh; on
# the GPU machine: `bash attn-s14-job.sh` (results under $OUT: summary.txt, s14.tar.gz).
# Knobs: BASE=0 (skip the previous binary; BASE_MAX_S its longest S), ALL=0 (only the pick and
# its twin; ALL_MAX_S: every schedule only up to that S), MAX_S (default
# 8192; 16384 adds S 16k), D256=1 (head dim 256: cuDNN/FA2 to MAX_S, ours to 1k), TESTS=full
# (every attention GPU test; default the forward ones), CHECK=1 (the f64 gradient check
# against cuDNN's), NCU=1 (speed of light of the D 128 forward pick at S 512 and 4k, or
# NCU_SHAPES="D,S,causal ..."), REPEAT
# (BENCH_REPEAT, default 3).
# Look for: "tests rc=0", the tables' fwd ours/cuDNN columns (base-table.md, table.md), the
# "fwd all" lines (every schedule's TFLOP/s), and the SM clock medians.
cd "$(dirname "$0")"; for f in *.xz; do xz -dkf "$f" && chmod +x "${f%.xz}"; done
export REQUIRE_GPU=1 RUST_BACKTRACE=1 LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
R=$OUT/s14; mkdir -p $R
exec > >(tee $OUT/summary.txt) 2>&1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 100 > $R/clocks.csv 2>/dev/null &
smi=$!
clock() { # median SM clock and power since line $1 of clocks.csv
  local rows=$(tail -n +$1 $R/clocks.csv | awk -F', ' '{gsub(/ MHz/,"",$2); gsub(/ W/,"",$3); print $2, $3}')
  local power=$(echo "$rows" | awk '{print $2}' | sort -n | awk '{p[NR]=$1} END{if (NR) print p[int((NR+1)/2)]}')
  echo "$rows" | sort -n | awk -v w="$power" '{a[NR]=$1} END{if (NR) printf "SM clock median %s MHz (%s..%s), power median %s W, %d samples\n", a[int((NR+1)/2)], a[1], a[NR], w, NR}'
}
mark() { wc -l < $R/clocks.csv; }
if [ "${TESTS:-fwd}" = full ]; then filters=attention; else filters="attention_forward"; fi
start=$SECONDS
timeout ${TESTS_S:-60} ./gpu_kernels_lib $filters --test-threads=1 > $R/tests.txt 2>&1; echo "tests rc=$? ($((SECONDS-start)) s)"
grep -h "^test \|test result\|panicked" $R/tests.txt | head -30
bench() { # $1 binary, $2 tag, then env
  local bin=$1 tag=$2; shift 2
  start=$SECONDS; local m=$(mark)
  env BENCH_MMA=0 BENCH_WG=0 BENCH_REPEAT=${REPEAT:-3} BENCH_MAX_S=${MAX_S:-8192} "$@" timeout ${BENCH_S:-90} ./$bin $R/$tag.jsonl > $R/$tag.txt 2>$R/$tag.err; echo "$tag rc=$? ($((SECONDS-start)) s)"; clock $m
  grep "^D" $R/$tag.txt | cut -c1-400
}
bench bench_attention ours BENCH_FWD_ALL=${ALL:-1} BENCH_FWD_ALL_MAX_S=${ALL_MAX_S:-1000000} BENCH_D256=${D256:-0}
start=$SECONDS; m=$(mark)
BENCH_REPEAT=${REPEAT:-3} BENCH_MAX_S=${MAX_S:-8192} BENCH_D256=${D256:-0} timeout ${SDPA_S:-90} python3 attention_sdpa.py $R/sdpa.jsonl > $R/sdpa.txt 2>$R/sdpa.err; echo "sdpa rc=$? ($((SECONDS-start)) s)"; clock $m
tail -2 $R/sdpa.err
cp $R/ours.jsonl $R/sdpa.jsonl $OUT/ 2>/dev/null
python3 attention_table.py $R/ours.jsonl $R/sdpa.jsonl $R/table.json $R/table.md "$gpu" > /dev/null; echo "== ours (s14)"; grep "^|" $R/table.md
# Every schedule per shape, ours / cuDNN.
python3 - $R/ours.jsonl $R/sdpa.jsonl <<'PY'
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
if [ "${BASE:-1}" = 1 ]; then
  bench bench_attention_base base BENCH_FWD_ALL=${ALL:-1} BENCH_MAX_S=${BASE_MAX_S:-${MAX_S:-8192}}
  python3 attention_table.py $R/base.jsonl $R/sdpa.jsonl $R/base-table.json $R/base-table.md "$gpu" > /dev/null && { echo "== base"; grep "^|" $R/base-table.md; }
fi
# NCU=1: Nsight Compute's speed-of-light section for the forward pick at D 128 S 512 and 4k
# (non-causal): what bounds the short sequences (clocks as found).
if [ "${NCU:-0}" = 1 ]; then
  for shape in ${NCU_SHAPES:-128,512,0 128,4096,0}; do
    BENCH_ONLY=$shape BENCH_REPEAT=1 timeout ${NCU_S:-30} /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight --kernel-name regex:attention_d --launch-count 1 ./bench_attention > $R/ncu-$shape.txt 2>&1
    echo "ncu $shape rc=$?"; grep -E "attention_d|Throughput|Duration|SM Frequency" $R/ncu-$shape.txt | head -12
  done
fi
if [ "${CHECK:-0}" = 1 ]; then
  mkdir -p /tmp/check && ./bench_attention --check /tmp/check > $R/check.txt 2>&1 && timeout 30 python3 attention_check.py /tmp/check >> $R/check.txt 2>&1; echo "check rc=$?"; tail -6 $R/check.txt
fi
kill $smi 2>/dev/null
tar -C $OUT -czf $OUT/s14.tar.gz s14 && rm -rf $R
