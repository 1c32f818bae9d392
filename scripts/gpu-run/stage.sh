#!/usr/bin/env bash
# Stages everything the GPU checks need into one folder, for a GPU machine without cargo:
# the workspace's test binaries, the examples, the main job and the benchmark, built here, plus
# run.sh beside them. Usage: scripts/gpu-run/stage.sh <dest> (e.g. .device-bin/final, a folder
# that git ignores), then on the GPU machine: `cd <dest> && ./run.sh` (logs in $OUT or ./out).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: stage.sh <dest>}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cd "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"

# Test binaries: `cargo test --no-run` prints each executable in its JSON messages. Those whose
# source reaches a GPU (gpu_or_skip, REQUIRE_GPU, a Backend, a Context, ...) are staged and listed
# in gpu-tests.txt (or gpu-tests-alone.txt, for sources marked `ferrocuda-gpu-run: alone`), which
# run.sh runs: a new GPU test is picked up without editing a list (CPU-only tests and the
# `*_build` tests, which need cargo, run in CI).
cargo test --release --workspace --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, re, sys, shutil
gpu = re.compile(r"gpu_or_skip|gpu_required|REQUIRE_GPU|Backend::|backends\(|Context::new|cuInit")
listed, alone = [], []
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        kind = m["target"]["kind"][0]
        name = m["target"]["name"]
        try: text = open(m["target"]["src_path"]).read()
        except OSError: text = ""
        # `*_build` tests run cargo and the device toolchain: CI runs them.
        if kind == "test" and not name.endswith("_build") and (name.startswith("gpu_") or name in ("cpu_main_job", "nccl_loading") or gpu.search(text)):
            shutil.copy(m["executable"], sys.argv[1] + "/" + name)
            # A test that measures the free memory of the GPU says so: it runs after the others, alone.
            (alone if "ferrocuda-gpu-run: alone" in text else listed).append(name)
open(sys.argv[1] + "/gpu-tests.txt", "w").write("\n".join(sorted(set(listed))) + "\n")
open(sys.argv[1] + "/gpu-tests-alone.txt", "w").write("\n".join(sorted(set(alone))) + "\n")
' "$work/bin"
# The examples, the main job and the benchmark.
cargo build --release --workspace --examples --bins --message-format=json 2>/dev/null |
  python3 -c '
import json, sys, shutil
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        kind = m["target"]["kind"][0]
        name = ("ex_" if kind == "example" else "") + m["target"]["name"]
        shutil.copy(m["executable"], sys.argv[1] + "/" + name)
' "$work/bin"
# The Python package (python/ferrocuda-torch) and its tests, run there with the machine's PyTorch:
# its wheel built by scripts/build-python-wheel.sh (as scripts/check-python.sh builds it), the
# test extension g23r_op (tests/g23r_op: the G23R tests' op crate, G23L-1's second extension; a
# wheel of its own, as check-python.sh builds it) and pytest's wheels (the GPU machine has no
# network). run.sh runs every test file in one pytest process, with both extensions importable.
# STAGE_PYTHON=0 leaves it out.
if [ "${STAGE_PYTHON:-1}" != 0 ]; then
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
  export FERROCUDA_PYTHON_VENV="${FERROCUDA_PYTHON_VENV:-$CARGO_TARGET_DIR/python-venv}"
  venv=$FERROCUDA_PYTHON_VENV
  mkdir -p "$work/python/pywheels" "$work/python/op"
  "$root/scripts/build-python-wheel.sh" "$work/python/wheel" >/dev/null
  "$venv/bin/maturin" build --release --quiet -m "$root/python/ferrocuda-torch/tests/g23r_op/Cargo.toml" --out "$work/python/op"
  "$venv/bin/pip" download --quiet --disable-pip-version-check --only-binary=:all: --dest "$work/python/pywheels" pytest
  cp -r "$root/python/ferrocuda-torch/tests" "$work/python/tests"
  # The op crate's sources stay here: beside the tests, `import g23r_op` would find them (a
  # namespace package) instead of the built module.
  rm -rf "$work/python/tests/g23r_op"
fi
# The CUDA C++ twins of the ported kernels (examples/ports_bench.rs), built by nvcc there.
cp "$root/bench/cuda/ports.cu" "$root/bench/cuda/llmc_cuda_utils.cuh" "$work/bin/"
# One xz stream with a dictionary larger than the folder (the test binaries share most of their
# code): about 17 MB where tar -J (xz -6, 8 MiB dictionary) gave 71 MB, above `run`'s 64 MiB carry.
# STAGE_XZ_PRESET=6 packs several times faster (a little larger) when time is short.
tar -C "$work" -cf - bin $( [ -d "$work/python" ] && echo python) | xz -T1 --lzma2=preset=${STAGE_XZ_PRESET:-9e},dict=384MiB > "$dest/bins.tar.xz"
cp "$root/scripts/gpu-run/run.sh" "$dest/run.sh"
git -C "$root" rev-parse HEAD > "$dest/commit.txt"
echo "staged $(ls "$work/bin" | wc -l) binaries$( [ -d "$work/python" ] && echo " and the Python package") of $(cat "$dest/commit.txt") in $dest ($(du -sh "$dest" | cut -f1))"
