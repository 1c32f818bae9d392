#!/usr/bin/env bash
# The PyTorch agreement job of the GPT-2 trainer on one GPU (staged by stage-gpu.sh beside
# gpt2, gpu_torch_agreement and gpt2_torch.py; about 2 minutes):
#   - the agreement tests (f32 against PyTorch f32; bf16 against PyTorch's bf16 family: the
#     same scheme as ours with the f32 math attention and with SDPA, and torch.autocast; ours
#     eager twice and with --graph twice), with GPT2_TRACE=1: PyTorch's runs and the first of
#     ours's runs of each kind print a diagnostics line per step (largest per-token losses,
#     activation magnitudes, a second forward pass's difference) and ours an f64 audit of
#     every operation at the two worst rows (`audit N row ...`, see src/audit.rs);
#     The bf16 test samples PyTorch's bf16 family over seeds of `--perturb` (a one-rounding
#     noise on every gradient): the loss at hard batches is hypersensitive to it.
#   - beside them: ours f32 a second time, ours bf16 eager and with --graph a third time.
# Every run's output is kept in $OUT/logs/<name>.txt; the tests' tables in $OUT/test.txt;
# `losses.tsv` has every run's 20 losses side by side.
set -u
cd "$(dirname "$0")"; here=$PWD
for f in gpt2 gpu_torch_agreement; do [ -e "$f.xz" ] && xz -dkf "$f.xz"; chmod +x "$f"; done
OUT=${OUT:-$here/out}; mkdir -p "$OUT/logs"
python=${PYTHON:-/opt/torch/.venv/bin/python3}; [ -x "$python" ] || python=python3
export REQUIRE_GPU=1 RUST_BACKTRACE=1 GPT2_BIN=$here/gpt2 GPT2_TORCH=$here/gpt2_torch.py PYTHON=$python
nvidia-smi -L > "$OUT/device.txt" 2>&1; cat "$OUT/device.txt"
GPT2_TRACE=1 GPT2_AGREEMENT_LOGS=$OUT/logs timeout ${TEST_TIMEOUT:-260} ./gpu_torch_agreement --nocapture --test-threads=3 > "$OUT/test.txt" 2>&1 &
tests=$!
work=$(mktemp -d)
./gpt2 init --config 124m --seed 42 --out "$work/model.bin" > /dev/null
./gpt2 make-shard --tokens 200000 --alphabet 256 --seed 3 --out "$work/shard.bin" > /dev/null
common="--checkpoint $work/model.bin --data $work/shard.bin --batch 4 --seq 256 --steps 20 --lr 3e-4"
timeout 40 ./gpt2 $common --dtype f32 > "$OUT/logs/extra-ours-f32-2.txt" 2>&1
timeout 40 ./gpt2 $common --dtype bf16 > "$OUT/logs/extra-ours-bf16-3.txt" 2>&1
timeout 40 ./gpt2 $common --dtype bf16 --graph > "$OUT/logs/extra-ours-bf16-graph-3.txt" 2>&1
wait $tests; echo "tests rc=$?"
rm -rf "$work"
grep -E "^test |^test result|panicked|outside|did not|nearest|largest" "$OUT/test.txt"
# Every run's losses, one column per run.
(cd "$OUT/logs" && for f in *.txt; do
  awk -v n="${f%.txt}" 'BEGIN { printf "%s", n } /^step / { for (i = 1; i < NF; i++) if ($i == "loss") printf "\t%s", $(i + 1) } END { print "" }' "$f"
done) | awk -F'\t' 'NF > 2' > "$OUT/losses.tsv"
cut -c1-200 "$OUT/losses.tsv" | head -30
grep -h "^trace 11 \|^audit 11 " "$OUT"/logs/*.txt | cut -c1-400 | head -30
