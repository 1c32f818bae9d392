#!/usr/bin/env python3
"""Registers and SASS instruction counts of issue 30's third held-out port (bench/ports3): the
Rust kernels' PTX (as built, sm_90) through ptxas 13 -v, and the CUDA C++ twins through nvcc
-cubin -Xptxas -v; instructions counted with nvdisasm per kernel (NOPs left out). No GPU.

  scripts/ports3-sass.py [--nvcc PATH] [--out FILE]

Run after `cargo build --release -p ferrocuda-ports3` (which builds both kernel crates).
"""
import argparse, glob, os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = [  # (crate, ours, twin symbol fragment, twin flags); `<ours>_fixed`: the fix round's variant
    ("llmc", "layernorm_backward_kernel10_fixed", "layernorm_backward_kernel10", "LLMC"),
    ("llmc", "layernorm_backward_kernel10_regions", "layernorm_backward_kernel10", "LLMC"),
    ("llmc", "global_norm_squared_kernel_fixed", "global_norm_squared_kernel", "LLMC"),
    ("llmc", "softmax_forward_kernel5_fixed", "softmax_forward_kernel5", "LLMC"),
    ("llmc", "softmax_forward_kernel5_prefix", "softmax_forward_kernel5", "LLMC"),
    ("llmc", "fused_classifier_kernel5_fixed", "fused_classifier_kernel5", "LLMC"),
    ("llmc", "fused_classifier_kernel5_paired", "fused_classifier_kernel5", "LLMC"),
    ("vllm", "dynamic_per_token_scaled_fp8_quant_kernel_fixed", "dynamic_per_token_scaled_fp8_quant_kernel", "VLLM"),
    ("llmc", "encoder_forward_kernel3", "encoder_forward_kernel3", "LLMC"),
    ("llmc", "global_norm_squared_kernel", "global_norm_squared_kernel", "LLMC"),
    ("llmc", "softmax_forward_kernel5", "softmax_forward_kernel5", "LLMC"),
    ("llmc", "fused_classifier_kernel5", "fused_classifier_kernel5", "LLMC"),
    ("llmc", "layernorm_backward_kernel10", "layernorm_backward_kernel10", "LLMC"),
    ("vllm", "merge_attn_states_kernel", "merge_attn_states_kernel", "VLLM"),
    ("vllm", "reshape_and_cache_flash_kernel", "reshape_and_cache_flash_kernel", "VLLM"),
    ("vllm", "dynamic_per_token_scaled_fp8_quant_kernel", "dynamic_per_token_scaled_fp8_quant_kernel", "VLLM"),
]


def newest(pattern):
    files = glob.glob(os.path.join(ROOT, pattern))
    if not files:
        sys.exit(f"no {pattern}: build with cargo build --release -p ferrocuda-ports3 first")
    return max(files, key=os.path.getmtime)


def ptxas_regs(log):
    regs, cur = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            cur = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            regs[cur] = int(m.group(1))
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", line)
        if m and cur and (int(m.group(1)) or int(m.group(2))):
            regs[cur + " spills"] = f"{m.group(1)} B stack, {m.group(2)} B spilled"
    return regs


def sass_counts(cubin):
    out = subprocess.run(["nvdisasm", "-c", cubin], capture_output=True, text=True, check=True).stdout
    counts, cur = {}, None
    calls = {}
    for line in out.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line) or re.match(r"\.section\s+\.text\.([^,\s]+)", line)
        if m:
            cur = m.group(1)
            counts.setdefault(cur, 0)
            continue
        if cur and re.search(r"/\*[0-9a-f]{4,}\*/", line) and "NOP" not in line:
            counts[cur] += 1
            if "CALL" in line:
                counts[cur + " calls"] = counts.get(cur + " calls", 0) + 1
    return counts


def find(d, frag):
    keys = [k for k in d if frag in k and not k.endswith(" spills") and not k.endswith(" calls")]
    if frag in keys:
        return frag
    keys = [k for k in keys if not re.search(frag + r"_[a-z]", k)]  # not `<name>_fixed`
    return keys[0] if keys else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvcc", default=os.environ.get("NVCC", "/work/cuda13-candle/nvidia/cu13/bin/nvcc"))
    ap.add_argument("--out")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    ours = {}
    for crate, ptx in (("llmc", "target/release/build/ferrocuda-ports3-llmc-*/out/ferrocuda_ports3_llmc.sm_90.ptx"),
                       ("vllm", "target/release/build/ferrocuda-ports3-[0-9a-f]*/out/ferrocuda_ports3.sm_90.ptx")):
        ptx = newest(ptx)
        cubin = os.path.join(tmp, crate + "_ours.cubin")
        log = subprocess.run(["ptxas", "-arch=sm_90", "-O3", "-v", ptx, "-o", cubin], capture_output=True, text=True, check=True).stderr
        ours[crate] = (ptxas_regs(log), sass_counts(cubin))
    twins = {}
    src = os.path.join(ROOT, "bench/ports3/cuda/ports3.cu")
    for m, flags in (("LLMC", ["--use_fast_math"]), ("VLLM", ["--expt-relaxed-constexpr"])):
        cubin = os.path.join(tmp, m + "_twin.cubin")
        log = subprocess.run([a.nvcc, "-cubin", "-O3", "-arch=sm_90", f"-DPORTS3_{m}", *flags, "-Xptxas", "-v", src, "-o", cubin],
                             capture_output=True, text=True)
        if log.returncode:
            sys.exit(log.stderr)
        twins[m] = (ptxas_regs(log.stderr), sass_counts(cubin))
    rows = ["| kernel | registers ours / nvcc | SASS instructions ours / nvcc | CALLs in ours (panic path, division slow path) |", "|---|---|---|---|"]
    for crate, name, frag, m in KERNELS:
        (r_o, s_o), (r_t, s_t) = ours[crate], twins[m]
        ko, kt = find(r_o, name), find(r_t, frag)
        if ko is None:
            continue
        so = r_o.get(f"{ko} spills")
        reg_o = f"{r_o.get(ko)}" + (f" ({so})" if so else "")
        so_k, st_k = find(s_o, name), find(s_t, frag)
        calls = s_o.get(f"{so_k} calls", 0)
        rows.append(f"| {name} | {reg_o} / {r_t.get(kt)} | {s_o.get(so_k)} / {s_t.get(st_k)} | {calls} |")
    text = "\n".join(rows)
    print(text)
    if a.out:
        open(a.out, "w").write(text + "\n")


main()
