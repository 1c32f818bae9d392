#!/bin/bash
# Stages fixpy's session-21 GPU job into /work/main/.device-bin/fixpy/ (git ignores it): the
# wheel of this worktree, main's wheel of e62e36e as the baseline, pytest's wheels, the
# package's tests, the review's repros (audit/2026-11-29), the probe and job.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
dest=/work/main/.device-bin/fixpy
pywheels=$(mktemp -d); cp "$dest"/pywheels/*.whl "$pywheels"/ 2>/dev/null || true
rm -rf "$dest"; mkdir -p "$dest"/{wheel,baseline,pywheels,audit}
cp "$pywheels"/*.whl "$dest/pywheels/"; rm -rf "$pywheels"
"$root/scripts/build-python-wheel.sh" "$dest/wheel" >/dev/null
cp /work/main/target/wheels/ferrocuda_torch-0.1.0-*.whl "$dest/baseline/"
cp -r "$root/python/ferrocuda-torch/tests" "$dest/tests"
a=$root/audit/2026-11-29
cp "$a/G21R-1/repro.py" "$a/G21R-2/repro_real_torch.py" "$a/open-gc-finalizers/repro_torch.py" "$dest/audit/"
cp "$here/job.sh" "$here/probe.py" "$dest/"
(cd "$root" && git rev-parse HEAD) > "$dest/commit.txt"
du -sh "$dest"
