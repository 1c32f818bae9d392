#!/bin/bash
# Stages session 21 gaps' GPU call into /work/main/.device-bin/gaps (git ignores it): the
# "before" binaries (main e62e36e's target, saved before this branch's builds) must already
# be there as *.before.xz with the twins' cubins (built here with nvcc 13.0.88:
#   ports8: -O3 --use_fast_math -std=c++17 -DPORTS8_LLMC / -O3 -std=c++17 -DPORTS8_VLLM
#   ports7: -O3 --use_fast_math -DPORTS7_LLMC / -O3 -std=c++17 -DPORTS7_VLLM
#   ports6: as bench/ports6/scripts); this adds the "after" binaries and the job.
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
dest=/work/main/.device-bin/gaps
cp "$root/bench/results/s21-gaps/job.sh" "$dest/"
xz -6 -T1 -c "$root/target/release/examples/ports8_bench" > "$dest/ports8_bench.after.xz"
xz -6 -T1 -c "$root/target/release/ports7_bench" > "$dest/ports7_bench.after.xz"
[ -f "$root/target/release/ports6_bench" ] && xz -6 -T1 -c "$root/target/release/ports6_bench" > "$dest/ports6_bench.after.xz"
t=$(ls -t "$root"/target/release/deps/ports8-* | grep -v '\.d$' | head -1)
xz -6 -T1 -c "$t" > "$dest/ports8_tests.xz"
ls -la "$dest"; du -sh "$dest"
