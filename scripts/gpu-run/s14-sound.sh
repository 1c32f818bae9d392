#!/usr/bin/env bash
# Stages the GPU checks of session 14's soundness fixes (audit 2026-11-28: S1 on the GPU; G13-1
# and G13R-3 are CPU-only and run in CI) into one folder, for a GPU machine without cargo.
# Usage, from the repository root on a build machine:
#   scripts/gpu-run/s14-sound.sh .device-bin/s14-sound      # a folder git ignores
# then on the GPU machine (about a minute on an H100):
#   cd .device-bin/s14-sound && bash run-s14-sound.sh
# Look for, in $OUT/s14-sound.txt (or ./out/s14-sound.txt):
# - gpu_host_seams: "s1 threads: N maps copied, M refused during K captures, 0 graphs with a
#   node" and `s1_a_capture_begun_on_another_thread_never_records_a_call_scoped_copy ... ok`
#   (before the fix some graphs held the other thread's copy, or an empty capture failed);
#   the p2 test beside it still ok;
# - gpu_kernels_lib: `s1_hopper_gemm_beside_captures_on_another_thread_records_nothing_into_them
#   ... ok` with "s1 hopper_gemm_bf16: N ran, M refused during K captures, 0 graphs with a node"
#   (sm_90); every other test ok (the sm_90 attention forward/backward, hopper_gemm_bf16 and
#   the norm backwards now hold `Stream::hold_off_capture` over their call-scoped memory;
#   `..._is_captured_into_a_graph` and f12_4 exercise them inside captures).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: s14-sound.sh <dest>}
cd "$root"
mkdir -p "$dest"
executables() { # package, test target
  cargo test --release -p "$1" --test "$2" --no-run --message-format=json 2>/dev/null |
    scripts/gpu-run/cargo-executable.py "$2"
}
rm -f "$dest"/*.xz
cp "$(executables ferrocuda-main gpu_host_seams)" "$dest/gpu_host_seams"
cp "$(executables ferrocuda-kernels gpu_kernels_lib)" "$dest/gpu_kernels_lib"
(cd "$dest" && xz -T0 -6 -f gpu_host_seams gpu_kernels_lib)
cat > "$dest/run-s14-sound.sh" <<'EOF'
#!/usr/bin/env bash
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
cd "$here"
for b in gpu_host_seams gpu_kernels_lib; do xz -dkf "$b.xz" && chmod +x "$b"; done
export REQUIRE_GPU=1 RUST_BACKTRACE=1
{
  echo "== gpu_host_seams (S1)"; timeout 300 ./gpu_host_seams --test-threads=1 --nocapture 2>&1 | tail -40; echo "rc=${PIPESTATUS[0]}"
  echo "== gpu_kernels_lib"; timeout 600 ./gpu_kernels_lib --test-threads=1 --nocapture 2>&1 | grep -E "^test |test result|panicked|^s1 " ; echo "rc=${PIPESTATUS[0]}"
} | tee "$out/s14-sound.txt"
EOF
du -sh "$dest"
