#!/usr/bin/env bash
# Installs what building ferrocuda's kernels needs, skipping what is already there:
#   1. a Rust toolchain that can build `core` for nvptx64-nvidia-cuda (it needs rust-src):
#      Debian's rustc-web + cargo-web + rust-web-src, or else a rustup nightly with rust-src;
#   2. optionally NVIDIA's ptxas (from PyPI's nvidia-cuda-nvcc), for cubins and PTX checks.
#   3. optionally nvdisasm (from PyPI's nvidia-cuda-nvdisasm), for `ferrocuda-inspect sass`.
# Safe to run again: each step checks first. Set FERROCUDA_SKIP_PTXAS=1 to skip step 2.
set -euo pipefail

say() { printf 'install-device-toolchain: %s\n' "$*"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }

has_debian_toolchain() { [ -x /usr/bin/rustc ] && [ -x /usr/bin/cargo ] && [ -f /usr/lib/rustlib/src/rust/library/core/src/lib.rs ]; }
has_rustup_nightly() {
  command -v rustup >/dev/null && local sysroot && sysroot=$(rustup run nightly rustc --print sysroot 2>/dev/null) &&
    [ -f "$sysroot/lib/rustlib/src/rust/library/core/src/lib.rs" ]
}

if [ -n "${FERROCUDA_DEVICE_RUSTC:-}" ]; then
  say "FERROCUDA_DEVICE_RUSTC is set ($FERROCUDA_DEVICE_RUSTC): using it"
elif has_debian_toolchain; then
  say "device toolchain present: $(/usr/bin/rustc --version) with rust-src"
elif has_rustup_nightly; then
  say "device toolchain present: rustup nightly with rust-src"
elif command -v apt-get >/dev/null && apt-cache policy rustc-web 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  say "installing Debian's rustc-web, cargo-web, rust-web-src"
  as_root apt-get install -y -q rustc-web cargo-web rust-web-src || {
    as_root apt-get update -q && as_root apt-get install -y -q rustc-web cargo-web rust-web-src; }
elif command -v apt-get >/dev/null && as_root apt-get update -q >/dev/null && apt-cache policy rustc-web | grep -q 'Candidate: [0-9]'; then
  say "installing Debian's rustc-web, cargo-web, rust-web-src"
  as_root apt-get install -y -q rustc-web cargo-web rust-web-src
elif command -v rustup >/dev/null; then
  say "installing a rustup nightly with rust-src (needs internet)"
  rustup toolchain install nightly --profile minimal --component rust-src
else
  say "no way to install a device toolchain found. Install Debian's rustc-web cargo-web rust-web-src,"
  say "or rustup with 'rustup toolchain install nightly --component rust-src'."
  exit 1
fi

# ptxas: optional for building, used for cubins (no JIT at load time) and by the PTX tests.
if [ "${FERROCUDA_SKIP_PTXAS:-0}" = 1 ]; then
  say "skipping ptxas (FERROCUDA_SKIP_PTXAS=1)"
elif [ -n "${FERROCUDA_PTXAS:-}" ] || command -v ptxas >/dev/null || [ -x /usr/local/cuda/bin/ptxas ]; then
  say "ptxas present: $(command -v ptxas || echo "${FERROCUDA_PTXAS:-/usr/local/cuda/bin/ptxas}")"
elif command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1; then
  say "installing ptxas from PyPI (nvidia-cuda-nvcc 13.0.88, matching CUDA 13.0 drivers)"
  python3 -m pip install -q nvidia-cuda-nvcc==13.0.88
  ptxas=$(python3 -c 'import nvidia, os; print(next(os.path.join(p, "cu13/bin/ptxas") for p in nvidia.__path__ if os.path.exists(os.path.join(p, "cu13/bin/ptxas"))))')
  if as_root ln -sf "$ptxas" /usr/local/bin/ptxas 2>/dev/null; then
    say "linked /usr/local/bin/ptxas -> $ptxas"
  else
    mkdir -p "$HOME/.local/bin" && ln -sf "$ptxas" "$HOME/.local/bin/ptxas"
    say "linked ~/.local/bin/ptxas -> $ptxas (make sure ~/.local/bin is on PATH)"
  fi
else
  say "no ptxas and no pip: kernels are still built to PTX (the driver JIT-compiles them); no cubins"
fi

# nvdisasm (optional; owned by the tools helper, issue 15): SASS listings for
# `ferrocuda-inspect sass`. PyPI's nvidia-cuda-nvdisasm starts at 13.2 (there is no 13.0 wheel);
# a newer disassembler reads cubins of older toolkits, so the oldest cu13 one is pinned.
# It lands in the same nvidia/cu13/bin as ptxas, where ferrocuda-inspect looks (beside ptxas).
if [ "${FERROCUDA_SKIP_NVDISASM:-0}" = 1 ] || [ "${FERROCUDA_SKIP_PTXAS:-0}" = 1 ]; then
  say "skipping nvdisasm"
elif [ -n "${FERROCUDA_NVDISASM:-}" ] || command -v nvdisasm >/dev/null || command -v cuobjdump >/dev/null || [ -x /usr/local/cuda/bin/nvdisasm ]; then
  say "a disassembler is present"
elif command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1; then
  say "installing nvdisasm from PyPI (nvidia-cuda-nvdisasm 13.2.51)"
  if python3 -m pip install -q nvidia-cuda-nvdisasm==13.2.51; then
    nvdisasm=$(python3 -c 'import nvidia, os; print(next(os.path.join(p, "cu13/bin/nvdisasm") for p in nvidia.__path__ if os.path.exists(os.path.join(p, "cu13/bin/nvdisasm"))))')
    if as_root ln -sf "$nvdisasm" /usr/local/bin/nvdisasm 2>/dev/null; then
      say "linked /usr/local/bin/nvdisasm -> $nvdisasm"
    else
      mkdir -p "$HOME/.local/bin" && ln -sf "$nvdisasm" "$HOME/.local/bin/nvdisasm"
      say "linked ~/.local/bin/nvdisasm -> $nvdisasm"
    fi
  else
    say "could not install nvdisasm (optional: only \`ferrocuda-inspect sass\` needs it)"
  fi
else
  say "no nvdisasm and no pip: \`ferrocuda-inspect sass\` will ask for one"
fi
