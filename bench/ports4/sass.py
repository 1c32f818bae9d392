#!/usr/bin/env python3
"""Registers and SASS instruction counts of the ports (our PTX through ptxas) beside their
CUDA C++ twins (nvcc), for sm_90. No GPU needed.

Usage: python3 bench/ports4/sass.py OUR_PTX_DIR... -- bench/ports4/cuda/ports4.cu
  e.g. python3 bench/ports4/sass.py target/release/build/ferrocuda-ports4-*/out \
       target/release/build/ferrocuda-ports4-llmc-*/out -- bench/ports4/cuda/ports4.cu
Counts: instructions in the kernel's .text section (the functions ptxas compiled into it
included), without NOPs; registers from ptxas -v (ours: our PTX; twins: nvcc -Xptxas -v with
each project's flags, NVCC to override the nvcc used).
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

KERNELS = [
    "gelu_forward_kernel2",
    "softmax_autoregressive_backward_inplace_kernel",
    "unpermute_kernel",
    "encoder_backward_kernel1",
    "fused_residual_forward3",
    "silu_and_mul_kernel",
    "rms_norm_kernel",
    "segmented_max_reduction",
    "softmax_autoregressive_backward_inplace_kernel_fixed",
    "rms_norm_kernel_fixed",
    "softmax_autoregressive_backward_inplace_kernel_reqntid",
    "softmax_autoregressive_backward_inplace_kernel_fixed_reqntid",
]
TWIN_NAME = {
    "softmax_autoregressive_backward_inplace_kernel": "softmax_autoregressive_backward_inplace_kernel_twin",
    "fused_residual_forward3": "fused_residual_forward3_twin",
    "softmax_autoregressive_backward_inplace_kernel_fixed": "softmax_autoregressive_backward_inplace_kernel_twin",
    "rms_norm_kernel_fixed": "rms_norm_kernel",
    "softmax_autoregressive_backward_inplace_kernel_reqntid": "softmax_autoregressive_backward_inplace_kernel_twin",
    "softmax_autoregressive_backward_inplace_kernel_fixed_reqntid": "softmax_autoregressive_backward_inplace_kernel_twin",
}


def sass_counts(cubin):
    """{kernel: instruction count} from nvdisasm's listing of each .text section."""
    text = subprocess.run(["nvdisasm", "-c", cubin], capture_output=True, text=True, check=True).stdout
    counts, current = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*\.section\s+\.text\.(\S+?),", line)
        if m:
            current = m.group(1)
            counts[current] = 0
            continue
        if current and re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+", line):
            ins = re.sub(r"^\s*/\*[0-9a-f]+\*/\s*", "", line)
            if not ins.startswith("NOP"):
                counts[current] += 1
    return counts


def ptxas_registers(stderr):
    """{kernel: registers} from ptxas -v's report."""
    regs, fn = {}, None
    for line in stderr.splitlines():
        m = re.search(r"(?:Compiling entry function|Function properties for) '?([A-Za-z_][A-Za-z0-9_]*)'?", line)
        if m:
            fn = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and fn:
            regs[fn] = int(m.group(1))
    return regs


NVCC = os.environ.get("NVCC", "/work/cuda13-candle/nvidia/cu13/bin/nvcc")


def main():
    args = sys.argv[1:]
    split = args.index("--")
    ptx_dirs, cu = args[:split], args[split + 1]
    ours_sass, ours_regs, twin_sass, twin_regs = {}, {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for d in ptx_dirs:
            for ptx in glob.glob(os.path.join(d, "*.sm_90.ptx")):
                cubin = os.path.join(tmp, os.path.basename(ptx) + ".cubin")
                v = subprocess.run(["ptxas", "-arch=sm_90", "-O3", "-v", ptx, "-o", cubin], capture_output=True, text=True, check=True)
                ours_regs.update(ptxas_registers(v.stderr))
                ours_sass.update(sass_counts(cubin))
        for define, flags in (("PORTS4_LLMC", ["--use_fast_math"]), ("PORTS4_VLLM", [])):
            cubin = os.path.join(tmp, define + ".cubin")
            v = subprocess.run([NVCC, "-cubin", "-O3", "-arch=sm_90", "-D" + define, *flags, "-Xptxas", "-v", cu, "-o", cubin],
                               capture_output=True, text=True, check=True)
            twin_regs.update(ptxas_registers(v.stderr))
            twin_sass.update(sass_counts(cubin))
    print(f"{'kernel':<54} {'regs ours':>9} {'regs nvcc':>9} {'SASS ours':>9} {'SASS nvcc':>9}")
    for k in KERNELS:
        t = TWIN_NAME.get(k, k)
        print(f"{k:<54} {ours_regs.get(k, '-'):>9} {twin_regs.get(t, '-'):>9} {ours_sass.get(k, '-'):>9} {twin_sass.get(t, '-'):>9}")


if __name__ == "__main__":
    main()
