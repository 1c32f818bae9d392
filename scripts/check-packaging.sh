#!/usr/bin/env bash
# Checks that every published crate of the workspace packages for crates.io:
#   - metadata: description, license, repository, readme, [package.metadata.docs.rs];
#   - the docs of each crate build alone with its default features, as docs.rs builds them;
#   - the .crate holds LICENSE-MIT, LICENSE-APACHE and its README;
#   - `cargo package` succeeds for all of them together (versions on every path dependency);
#   - `cargo package` with verification (an unpacked build of each .crate) for the crates
#     whose build does not compile kernels.
# Crates with `publish = false` (benchmarks, test fixtures, templates) are skipped.
#
# Why some crates are packaged with --no-verify: verification builds the unpacked .crate, and
# for a kernel crate (ferrocuda-collectives-kernels, ferrocuda-kernels-device, ferrocuda-kernels-hopper, and the crates on
# them: ferrocuda-collectives, ferrocuda-kernels) that runs ferrocuda-builder's device build, a second cargo on the unpacked manifest. That inner cargo
# cannot see cargo package's local registry of the not-yet-published ferrocuda crates, so it
# cannot resolve `ferrocuda-device = "0.1"` until those are on crates.io. Their host builds
# are what the workspace tests compile anyway.
# VERIFY=0 skips the verification step (it compiles the verified crates once more).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "check-packaging: $*" >&2; exit 1; }

# `cargo package` verifies each .crate against the others through a local registry, and cargo
# treats a registry crate of a given name and version as immutable: it unpacks it once and
# reuses its compiled artifacts. A second run after a change (same version 0.1.0) verified
# ferrocuda-host against the first run's ferrocuda-types and failed (2026-11-23). So the
# verification builds in its own folder, `target/package-verify`, where every ferrocuda crate
# comes from the local registry: their unpacked copies and artifacts are removed before each
# run (third-party crates stay built), and so are the unpacked copies cargo keeps under
# CARGO_HOME for local registries (directories named `-<hash>`; crates.io's is `index.crates.io-*`).
verify_dir=target/package-verify
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/ferrocuda-* "$verify_dir/package" \
  "$verify_dir"/debug/.fingerprint/ferrocuda-* "$verify_dir"/debug/deps/*ferrocuda_* "$verify_dir"/debug/build/ferrocuda-*

# The metadata goes through a file: as one environment variable or argument it passed Linux's
# 128 KiB limit on a single string once the workspace grew (CI, 2026-11-29: "Argument list too long").
meta_file=$(mktemp)
trap 'rm -f "$meta_file"' EXIT
cargo metadata --no-deps --format-version 1 >"$meta_file"
mapfile -t published < <(python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["publish"] != []:
        print(p["name"])' <"$meta_file")
mapfile -t unpublished < <(python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["publish"] == []:
        print(p["name"])' <"$meta_file")
echo "check-packaging: published: ${published[*]}; not published: ${unpublished[*]:-none}"

# Metadata crates.io and docs.rs use.
CARGO_METADATA_FILE="$meta_file" python3 - "${published[@]}" <<'PY' || fail "missing metadata (see above)"
import json, os, sys
with open(os.environ["CARGO_METADATA_FILE"]) as f:
    packages = {p["name"]: p for p in json.load(f)["packages"]}
bad = False
for name in sys.argv[1:]:
    p = packages[name]
    for field in ("description", "license", "repository", "readme"):
        if not p.get(field):
            print(f"{name}: no `{field}` in Cargo.toml"); bad = True
    if "rs" not in ((p.get("metadata") or {}).get("docs") or {}):
        print(f"{name}: no [package.metadata.docs.rs]"); bad = True
sys.exit(1 if bad else 0)
PY

# Docs as a registry's doc builder makes them: each crate alone, with its default features only
# (in the workspace, another member can switch a feature on: `ferrocuda-types` documented only
# with `std`, issue 28), with DOCS_RS set (kernel crates' builds skip the device build there).
for crate in "${published[@]}"; do
  DOCS_RS=1 RUSTDOCFLAGS=-Dwarnings cargo doc --no-deps -q -p "$crate" ||
    fail "$crate: its docs do not build alone with its default features (as docs.rs builds them)"
done

# What each .crate contains.
for crate in "${published[@]}"; do
  list=$(cargo package --list --allow-dirty -p "$crate" 2>/dev/null) || fail "cargo package --list -p $crate failed"
  for file in LICENSE-MIT LICENSE-APACHE README.md; do
    grep -qx "$file" <<<"$list" || fail "$crate: $file is not in the package (add it, or a symlink to the root one, beside its Cargo.toml)"
  done
done

# Everything together: path dependencies resolve to the packages being made.
excludes=()
for crate in "${unpublished[@]}"; do excludes+=(--exclude "$crate"); done
cargo package --workspace "${excludes[@]}" --no-verify --allow-dirty

# Verified builds of the crates that do not build kernels.
if [ "${VERIFY:-1}" = 1 ]; then
  verify=()
  for crate in "${published[@]}"; do
    case "$crate" in ferrocuda-collectives|ferrocuda-collectives-kernels|ferrocuda-kernels|ferrocuda-kernels-device|ferrocuda-kernels-hopper) ;; *) verify+=(-p "$crate") ;; esac
  done
  CARGO_TARGET_DIR="$verify_dir" cargo package "${verify[@]}" --allow-dirty
fi
echo "check-packaging: ${#published[@]} crates package"
