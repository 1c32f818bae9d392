#!/usr/bin/env bash
# The check to run before saying "a new user can build this": clones this repository (its
# committed HEAD) into a temporary directory, REMOVES the device toolchain from this machine
# (Debian's rustc-web cargo-web rust-web-src, the ptxas and nvdisasm links and their pip packages, rustup's
# nightly toolchain and the host toolchain's rust-src), then runs README.md's two Quick start
# commands exactly as written, timing each, and prints a summary.
#
#   scripts/fresh-machine-check.sh [--path debian|rustup] [--host-src installed|without]
#                                  [--all] [--no-remove] [--dry-run] [--keep]
#
#   --path debian   the install script may use apt (default; it prefers Debian's packages; it
#                   takes apt's rustc-web when the candidate is 1.95 or newer, else refuses it
#                   and adds rust-src to the host toolchain: the summary says which happened)
#   --path rustup   the install script is told to use rustup (FERROCUDA_INSTALL_PREFER=rustup)
#   --host-src installed  run command 2 with the host toolchain as command 1 left it (default)
#   --host-src without    before command 2, take rust-src off the host toolchain and build the
#                   kernels with another toolchain (scripts/host-without-rust-src.sh): the
#                   state of a new user whose apt offered rustc-web 1.96 (issue 28), on any mirror
#   --all           run the four combinations of --path and --host-src, one after another
#   --no-remove     leave the installed toolchain alone (checks the clone and the commands only)
#   --dry-run       print what would be removed and run, change nothing
#   --keep          keep the clone (its path is printed)
#
# It needs root (or sudo) to remove packages, and internet for the install script to put the
# toolchain back. Do not run it on a machine where others are building with that toolchain.
set -euo pipefail

path=debian host_src=installed remove=1 dry=0 keep=0 all=0
args=("$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --host-src) host_src=${2:?--host-src needs installed or without}; shift 2 ;;
    --host-src=*) host_src=${1#--host-src=}; shift ;;
    --all) all=1; shift ;;
    --path) path=${2:?--path needs debian or rustup}; shift 2 ;;
    --path=*) path=${1#--path=}; shift ;;
    --no-remove) remove=0; shift ;;
    --dry-run) dry=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$path" in debian|rustup) ;; *) echo "--path must be debian or rustup, not '$path'" >&2; exit 2 ;; esac
case "$host_src" in installed|without) ;; *) echo "--host-src must be installed or without, not '$host_src'" >&2; exit 2 ;; esac
if [ "$all" = 1 ]; then
  rest=()
  for a in "${args[@]}"; do [ "$a" = --all ] || rest+=("$a"); done
  summary=() status=0
  for p in debian rustup; do
    for h in installed without; do
      if out=$("$0" "${rest[@]}" --path "$p" --host-src "$h" 2>&1); then r=PASS; else r=FAIL; status=1; fi
      printf '%s\n' "$out"
      summary+=("$r  --path $p --host-src $h" "$(grep -A12 '^== fresh-machine check' <<<"$out" | sed 1d)")
    done
  done
  echo; echo "== fresh-machine check, all four combinations =="; printf '%s\n' "${summary[@]}"
  exit $status
fi

say() { printf 'fresh-machine-check: %s\n' "$*"; }
act() {   # runs a command that changes the machine, or only prints it with --dry-run
  say "+ $*"
  [ "$dry" = 1 ] || "$@"
}
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

source_repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
readme="$source_repo/README.md"
# The two Quick start commands, read from the README so that the check runs what it says.
mapfile -t commands < <(awk '/^## Quick start/{on=1} on && /^```sh/{code=1; next} code && /^```/{exit} code' "$readme" | sed 's/[[:space:]]*#.*$//' | sed '/^[[:space:]]*$/d')
[ "${#commands[@]}" -ge 2 ] || { say "could not read two commands from README.md's Quick start"; exit 1; }

say "path: $path; host rust-src for command 2: $host_src; remove the device toolchain: $([ "$remove" = 1 ] && echo yes || echo no)$([ "$dry" = 1 ] && echo ' (dry run)')"
for c in "${commands[@]}"; do say "README command: $c"; done

# 1. Remove the device toolchain.
if [ "$remove" = 1 ]; then
  installed=$(dpkg-query -W -f='${Package} ${Status}\n' rustc-web cargo-web rust-web-src 2>/dev/null || true)
  packages=()
  for p in rustc-web cargo-web rust-web-src; do
    [[ $installed == *"$p install ok installed"* ]] && packages+=("$p")
  done
  if [ ${#packages[@]} -gt 0 ]; then act as_root apt-get remove -y -q "${packages[@]}"; else say "no Debian device packages installed"; fi
  # ptxas and nvdisasm: the install script links both from PyPI packages.
  for link in /usr/local/bin/ptxas "$HOME/.local/bin/ptxas" /usr/local/bin/nvdisasm "$HOME/.local/bin/nvdisasm"; do
    if [ -L "$link" ]; then act as_root rm -f "$link"; fi
  done
  for package in nvidia-cuda-nvcc nvidia-cuda-nvdisasm; do
    pip_show=$(python3 -m pip show "$package" 2>/dev/null || true)
    if [ -n "$pip_show" ]; then act python3 -m pip uninstall -y -q "$package"; fi
  done
  if command -v rustup >/dev/null; then
    toolchains=$(rustup toolchain list 2>/dev/null || true)
    if [[ $toolchains == *nightly* ]]; then act rustup toolchain uninstall nightly; fi
    while read -r toolchain _; do
      [ -n "$toolchain" ] && [[ $toolchain != nightly* ]] || continue
      components=$(rustup component list --installed --toolchain "$toolchain" 2>/dev/null || true)
      if [[ $components == *rust-src* ]]; then act rustup component remove rust-src --toolchain "$toolchain"; fi
    done <<<"$toolchains"
  fi
  leftover=$(command -v ptxas || true)
  [ -z "$leftover" ] || [ "$dry" = 1 ] || say "note: a ptxas is still on PATH ($leftover); it is not one this check installed"
fi

# 2. A fresh clone.
clone=$(mktemp -d /tmp/ferrocuda-fresh.XXXXXX)
[ "$keep" = 1 ] || trap 'rm -rf "$clone"' EXIT
say "cloning $source_repo (HEAD $(git -C "$source_repo" rev-parse --short HEAD)) into $clone/ferrocuda"
git clone -q "$source_repo" "$clone/ferrocuda"

# 3. The README commands, as written, in the clone, timed.
export FERROCUDA_INSTALL_PREFER=$path
results=()
status_all=0
for i in "${!commands[@]}"; do
  c=${commands[$i]}
  log="$clone/command-$((i + 1)).log"
  if [ "$dry" = 1 ]; then say "would run in $clone/ferrocuda: $c"; results+=("dry run: $c"); continue; fi
  if [ "$i" = 1 ] && [ "$host_src" = without ]; then
    # Issue 28's state: the host toolchain without rust-src, kernels built by another one.
    exports=$(cd "$clone/ferrocuda" && ./scripts/host-without-rust-src.sh 2>>"$clone/host-src.log") ||
      { say "could not take rust-src off the host toolchain:"; cat "$clone/host-src.log"; exit 1; }
    cat "$clone/host-src.log"
    eval "$exports"
  fi
  sysroot=$(cd "$clone/ferrocuda" && rustc --print sysroot 2>/dev/null) || sysroot=""
  if [ -f "$sysroot/lib/rustlib/src/rust/library/core/src/lib.rs" ]; then host_state="has rust-src"; else host_state="has NO rust-src"; fi
  say "running: $c (log: $log); host toolchain $(cd "$clone/ferrocuda" && rustc --version) $host_state"
  start=$(date +%s.%N)
  times_before=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
  set +e
  (cd "$clone/ferrocuda" && bash -c "$c") >"$log" 2>&1
  status=$?
  set -e
  end=$(date +%s.%N)
  wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
  ticks=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
  cpu=$(awk -v a="$times_before" -v b="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", (b - a) / hz }')
  toolchain=$(grep -m1 -o 'device toolchain \(present\|now\): .*' "$log" || echo "device toolchain: ?")
  apt_said=$(grep -m1 -o "apt's rustc-web is .*: not installing it\|installing Debian's rustc-web.*" "$log" || true)
  [ -z "$apt_said" ] || toolchain="$toolchain; apt: $apt_said"
  results+=("$([ $status = 0 ] && echo PASS || echo "FAIL ($status)")  ${wall} s wall, ${cpu} s CPU (user+sys)  $c")
  results+=("      $toolchain")
  results+=("      host toolchain $host_state${FERROCUDA_DEVICE_RUSTC:+; FERROCUDA_DEVICE_RUSTC=$FERROCUDA_DEVICE_RUSTC}")
  [ "$i" = 1 ] && tests=$(grep -o '^test result: [a-z]*\. [0-9]* passed; [0-9]* failed; [0-9]* ignored' "$log" |
    awk '{p += $4; f += $6; i += $8} END {printf "%d passed, %d failed, %d ignored", p, f, i}') && results+=("      tests: $tests")
  if [ $status != 0 ]; then status_all=1; say "failed; last lines of $log:"; tail -n 30 "$log"; fi
done

echo
echo "== fresh-machine check ($path path, host rust-src $host_src, $(nproc) cores, $(date -u +%FT%TZ)) =="
for r in "${results[@]}"; do echo "  $r"; done
[ "$keep" = 1 ] && echo "  clone kept at $clone"
exit $status_all
