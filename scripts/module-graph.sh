#!/usr/bin/env bash
# Prints the import graph inside each crate (host, types, device, macros, builder) and fails
# on a cycle other than parent/child pairs and the documented exceptions (tests/module_graph.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test --release -p ferrocuda --test module_graph -- --nocapture --test-threads=1
