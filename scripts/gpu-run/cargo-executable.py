#!/usr/bin/env python3
"""Prints the executable cargo built for the target NAME, read from cargo's JSON messages on
stdin (`cargo build/test ... --message-format=json`); nothing when it built none. The staging
scripts under scripts/gpu-run/ share it.

Usage: cargo test --release --test gpu_g15 --no-run --message-format=json |
           scripts/gpu-run/cargo-executable.py gpu_g15
"""
import json
import sys

name = sys.argv[1]
for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if message.get("reason") == "compiler-artifact" and message.get("executable") and message["target"]["name"] == name:
        print(message["executable"])
