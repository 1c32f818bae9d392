#!/bin/bash
# Stages the G24S-1 GPU job: build (see kernels/Cargo.toml), then run from the worktree root.
set -eu
d=/work/main/.device-bin/review2; mkdir -p "$d"
xz -T1 -6 -c target/release/g24s1-host > "$d/g24s1-host.xz"
cp audit/2026-11-29g/job.sh "$d/job.sh"
touch "$d/READY"
