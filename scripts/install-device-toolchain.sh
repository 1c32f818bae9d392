#!/usr/bin/env bash
# Installs what building ferrocuda's kernels needs, skipping what is already there:
#   1. a Rust toolchain that can build `core` for nvptx64-nvidia-cuda (it needs rust-src), in
#      the builder's order: FERROCUDA_DEVICE_RUSTC; Debian's rustc-web + cargo-web +
#      rust-web-src; a rustup nightly with rust-src; the host toolchain with rust-src. When none
#      is there it installs Debian's packages (running `apt-get update` first when the package
#      lists are empty or have no candidate), else `rustup component add rust-src` for the
#      toolchain this repository builds with, else a rustup nightly with rust-src;
#   2. NVIDIA's ptxas (PyPI's nvidia-cuda-nvcc), optional: for cubins and the PTX checks;
#   3. nvdisasm (PyPI's nvidia-cuda-nvdisasm), optional: SASS listings for `ferrocuda-inspect sass`.
# Safe to run again: each step checks first. It prints what it found and what it changed.
#
# Environment: FERROCUDA_SKIP_PTXAS=1 skips steps 2 and 3, FERROCUDA_SKIP_NVDISASM=1 step 3; FERROCUDA_INSTALL_PREFER=rustup tries rustup
# before apt. For tests (scripts/test-install-device-toolchain.sh):
# FERROCUDA_INSTALL_ROOT=<dir> prefixes every system path the script checks or writes
# (/usr/bin/rustc, /usr/lib/rustlib, /var/lib/apt/lists, /usr/local/bin/ptxas, ...).
set -euo pipefail
cd "$(dirname "$0")/.."   # rustup picks this repository's toolchain (rust-toolchain.toml) here

root=${FERROCUDA_INSTALL_ROOT:-}
changed=()
say() { printf 'install-device-toolchain: %s\n' "$*"; }
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    say "cannot run '$*': not root and no sudo"; return 1; fi
}
has_core_src() { [ -f "$1/lib/rustlib/src/rust/library/core/src/lib.rs" ]; }

# Each check prints a description of what it found and succeeds, or fails silently.
# Outputs are captured into variables before they are tested: no `cmd | grep -q` pipelines,
# whose early-exiting reader kills the writer with SIGPIPE and fails the pipeline under pipefail.
# The oldest rustc the device crates build with (the workspace's rust-version); the builder
# skips an older one too (builder/src/toolchain.rs, MIN_DEVICE_RUSTC). Debian 12's main archive
# has rustc-web 1.85, its security archive had 1.96: which one apt offers depends on the mirror.
min_minor=95
# Succeeds when the version in "rustc 1.96.0 (...)" or "1.96.0+dfsg1-1~deb12u1" is new enough.
new_enough() {
  local text=$1 minor
  [[ $text =~ (^|[^0-9.])1\.([0-9]+)\. ]] || return 0   # no version to judge: not refused here
  minor=${BASH_REMATCH[2]}
  [ "$minor" -ge "$min_minor" ]
}
debian_toolchain() {
  [ -x "$root/usr/bin/rustc" ] && [ -x "$root/usr/bin/cargo" ] && has_core_src "$root/usr" || return 1
  local version
  version=$("$root/usr/bin/rustc" --version 2>/dev/null) || version="rustc (version unknown)"
  new_enough "$version" || return 1
  echo "$version from Debian rustc-web ($root/usr/bin/rustc) with rust-web-src"
}
rustup_nightly_toolchain() {
  command -v rustup >/dev/null || return 1
  local rustc sysroot
  rustc=$(rustup which --toolchain nightly rustc 2>/dev/null) || return 1
  sysroot=$("$rustc" --print sysroot 2>/dev/null) || return 1
  has_core_src "$sysroot" || return 1
  echo "$("$rustc" --version 2>/dev/null) from rustup nightly with rust-src"
}
host_toolchain() {
  command -v rustc >/dev/null || return 1
  local sysroot
  sysroot=$(rustc --print sysroot 2>/dev/null) || return 1
  has_core_src "$sysroot" || return 1
  echo "$(rustc --version 2>/dev/null) (the host toolchain, $sysroot) with rust-src"
}
device_toolchain() {
  if [ -n "${FERROCUDA_DEVICE_RUSTC:-}" ]; then echo "FERROCUDA_DEVICE_RUSTC=$FERROCUDA_DEVICE_RUSTC (not checked here)"; return 0; fi
  debian_toolchain || rustup_nightly_toolchain || host_toolchain
}

# "yes" when apt has an installable candidate for every package named.
apt_candidates() {
  local policy package
  policy=$(apt-cache policy "$@" 2>/dev/null) || return 1
  for package in "$@"; do
    # The block of `package:` up to the next unindented line, then its Candidate line.
    local block
    block=$(awk -v p="$package:" '$0 == p {on = 1; next} /^[^ ]/ {on = 0} on' <<<"$policy")
    [[ $block =~ Candidate:\ [0-9] ]] || return 1
  done
}
apt_lists_empty() {
  local lists
  lists=$(find "$root/var/lib/apt/lists" -maxdepth 1 -name '*_Packages*' 2>/dev/null) || true
  [ -z "$lists" ]
}
install_debian() {
  command -v apt-get >/dev/null && command -v apt-cache >/dev/null || { say "no apt-get: not a Debian/Ubuntu machine"; return 1; }
  local packages=(rustc-web cargo-web rust-web-src)
  if apt_lists_empty || ! apt_candidates "${packages[@]}"; then
    say "apt has no candidate for ${packages[*]} (package lists $(apt_lists_empty && echo empty || echo present)): running apt-get update"
    as_root apt-get update -q || { say "apt-get update failed (no network?)"; return 1; }
    changed+=("apt-get update")
  fi
  if ! apt_candidates "${packages[@]}"; then
    say "this distribution has no ${packages[*]} (they are in Debian 12's security archive)"
    return 1
  fi
  local policy candidate
  policy=$(apt-cache policy rustc-web 2>/dev/null) || policy=""
  candidate=$(awk '/Candidate:/ {print $2; exit}' <<<"$policy")
  if ! new_enough "$candidate"; then
    say "apt's rustc-web is $candidate, older than 1.$min_minor (the oldest rustc the device crates build with): not installing it"
    return 1
  fi
  say "installing Debian's ${packages[*]}"
  as_root apt-get install -y -q "${packages[@]}" || { say "apt-get install failed"; return 1; }
  changed+=("apt-get install ${packages[*]}")
}
install_rustup() {
  command -v rustup >/dev/null || { say "no rustup"; return 1; }
  local active
  active=$(rustup show active-toolchain 2>/dev/null) || active=""
  active=${active%% *}
  if [ -n "$active" ]; then
    say "adding rust-src to the active rustup toolchain $active (needs internet)"
    if rustup component add rust-src --toolchain "$active"; then
      changed+=("rustup component add rust-src --toolchain $active")
      return 0
    fi
    say "rustup component add rust-src failed"
  fi
  say "installing a rustup nightly with rust-src (needs internet)"
  rustup toolchain install nightly --profile minimal --component rust-src || { say "rustup toolchain install nightly failed"; return 1; }
  changed+=("rustup toolchain install nightly --component rust-src")
}

# 1. The device toolchain.
if found=$(device_toolchain); then
  say "device toolchain present: $found"
else
  say "no device toolchain (a rustc whose sysroot has rust-src) found"
  if [ "${FERROCUDA_INSTALL_PREFER:-debian}" = rustup ]; then
    say "FERROCUDA_INSTALL_PREFER=rustup: trying rustup first"
    install_rustup || install_debian
  else
    install_debian || install_rustup
  fi || {
    say "could not install a device toolchain. Install Debian's rustc-web cargo-web rust-web-src,"
    say "or with rustup and internet: 'rustup component add rust-src' (or nightly with rust-src),"
    say "or set FERROCUDA_DEVICE_RUSTC to a rustc whose sysroot has rust-src."
    exit 1
  }
  found=$(device_toolchain) || { say "installed, but still no device toolchain found: please report this"; exit 1; }
  say "device toolchain now: $found"
fi

# 2. and 3.: NVIDIA's command-line tools from PyPI, linked into /usr/local/bin (or ~/.local/bin).
# The first of: the override variable's value, `command -v` of each name, the usual paths.
tool_path() { # override, name...
  local override=$1; shift
  if [ -n "$override" ]; then echo "$override"; return 0; fi
  local name candidate
  for name in "$@"; do command -v "$name" 2>/dev/null && return 0; done
  for candidate in "$root/usr/local/bin/$1" "$root/usr/local/cuda/bin/$1"; do
    if [ -x "$candidate" ]; then echo "$candidate"; return 0; fi
  done
  return 1
}
# Installs `package` (pinned) with pip and links its `nvidia/cu13/bin/<tool>`; never fails the
# script (the tools are optional), but says why one is missing.
install_from_pypi() { # package==version, tool, what is lost without it
  local package=$1 tool=$2 without=$3
  command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1 || {
    say "no $tool and no pip: $without"; return 0; }
  say "installing $tool from PyPI ($package)"
  python3 -m pip install -q "$package" || { say "pip install $package failed (no network?): $without"; return 0; }
  changed+=("pip install $package")
  local path
  path=$(python3 -c 'import nvidia, os, sys; t = "cu13/bin/" + sys.argv[1]; print(next(os.path.join(p, t) for p in nvidia.__path__ if os.path.exists(os.path.join(p, t))))' "$tool") || {
    say "${package%%==*} is installed but its $tool was not found"; return 0; }
  if as_root mkdir -p "$root/usr/local/bin" && as_root ln -sf "$path" "$root/usr/local/bin/$tool"; then
    say "linked $root/usr/local/bin/$tool -> $path"
    changed+=("ln -s $path $root/usr/local/bin/$tool")
  else
    mkdir -p "$HOME/.local/bin" && ln -sf "$path" "$HOME/.local/bin/$tool"
    say "linked ~/.local/bin/$tool -> $path (make sure ~/.local/bin is on PATH)"
    changed+=("ln -s $path ~/.local/bin/$tool")
  fi
}

# 2. ptxas: optional for building, used for cubins (no JIT at load time) and by the PTX tests;
# 13.0.88 matches the CUDA 13.0 drivers of the GPU machines.
if [ "${FERROCUDA_SKIP_PTXAS:-0}" = 1 ]; then
  say "skipping ptxas (FERROCUDA_SKIP_PTXAS=1)"
elif found_ptxas=$(tool_path "${FERROCUDA_PTXAS:-}" ptxas); then
  say "ptxas present: $found_ptxas"
else
  install_from_pypi nvidia-cuda-nvcc==13.0.88 ptxas "kernels are still built to PTX (the driver JIT-compiles them); no cubins"
fi

# 3. nvdisasm: optional, for `ferrocuda-inspect sass`. PyPI's nvidia-cuda-nvdisasm starts at 13.2
# (there is no 13.0 wheel); a newer disassembler reads older toolkits' cubins, so the oldest cu13
# one is pinned. It lands in the same nvidia/cu13/bin as ptxas. cuobjdump serves as well.
if [ "${FERROCUDA_SKIP_NVDISASM:-0}" = 1 ] || [ "${FERROCUDA_SKIP_PTXAS:-0}" = 1 ]; then
  say "skipping nvdisasm"
elif found_nvdisasm=$(tool_path "${FERROCUDA_NVDISASM:-}" nvdisasm cuobjdump); then
  say "disassembler present: $found_nvdisasm"
else
  install_from_pypi nvidia-cuda-nvdisasm==13.2.51 nvdisasm "\`ferrocuda-inspect sass\` will ask for one"
fi

if [ ${#changed[@]} -eq 0 ]; then
  say "done: nothing to change"
else
  say "done; changed: $(printf '%s; ' "${changed[@]}")"
fi
