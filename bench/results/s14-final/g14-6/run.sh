#!/usr/bin/env bash
# G14-6: where does the G14-5 repro crash? gdb backtrace (if gdb exists), then compute-sanitizer.
cd "$(dirname "$0")"; xz -dkf gpu_g14.xz; chmod +x gpu_g14
export REQUIRE_GPU=1 RUST_BACKTRACE=1 LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
which gdb; nvidia-smi -L
for i in 1 2; do
  echo "== plain run $i"; timeout 30 ./gpu_g14 --ignored g14_5 --nocapture --test-threads=1 2>&1 | tail -5; echo "rc=${PIPESTATUS[0]}"
done
if which gdb >/dev/null; then
  echo "== gdb"; timeout 60 gdb -batch -ex "set pagination off" -ex run -ex "thread apply all bt 25" --args ./gpu_g14 --ignored g14_5 --nocapture --test-threads=1 2>&1 | grep -v "^\[New Thread\|^\[Thread .* exited" | tail -150
fi
echo "== catchsegv-like: dmesg"; dmesg 2>/dev/null | tail -3
