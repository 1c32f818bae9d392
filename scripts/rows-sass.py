#!/usr/bin/env python3
"""SASS of the row kernels beside their CUDA C++ twins (issue 31), without a GPU.

Compiles ferrocuda-kernels-device's sm_90 PTX with ptxas and kernels/bench/rows_twins.cu with
nvcc (-O3 -arch=sm_90), then prints per kernel pair: registers, spills, shared memory (ptxas -v),
and from nvdisasm the instruction count of the whole kernel, of its hottest loop (the largest
body closed by a backward branch, when there is one) and of a few instruction classes (global
loads/stores with their widths, shuffles, barriers, MUFU, conversions, FP and integer ALU,
branches). Usage:

    scripts/rows-sass.py [PTX] > bench/results/s11-rows-sass.txt

PTX defaults to the newest target/release/build/ferrocuda-kernels-device-*/out/*.sm_90.ptx.
Environment: NVCC (default /work/cuda13-candle/nvidia/cu13/bin/nvcc, else `nvcc`), PTXAS, NVDISASM.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAIRS = [
    # (our instance, twin symbol)
    "rmsnorm_forward_packed_bf16",
    "rmsnorm_forward_packed16_bf16",
    "add_rmsnorm_forward_packed_bf16",
    "layernorm_forward_packed16_bf16",
    "layernorm_backward_fused_packed_bf16",
    "rmsnorm_backward_fused_packed_bf16",
    "sum_column_pairs_split",
    "sum_column_partials_split",
    "softmax_forward_packed_bf16",
    "cross_entropy_forward_backward_bf16",
    "cross_entropy_forward_bf16",
    "cross_entropy_backward_packed_bf16",
    "gelu_forward_packed_bf16",
    "gelu_backward_packed_bf16",
    "silu_and_mul_forward_packed_bf16",
    "silu_and_mul_backward_packed_bf16",
    "rotary_embedding_packed_bf16",
    "adamw_step_packed_f32",
    "sum_of_squares_packed_f32",
    # Session 14 (2): the library's kernels compiled for one block (`reqntid`) beside the same twin.
    ("softmax_forward_packed_t512_bf16", "softmax_forward_packed_bf16"),
    ("rmsnorm_forward_packed_t96_bf16", "rmsnorm_forward_packed_bf16"),
    ("rmsnorm_forward_packed_t128_bf16", "rmsnorm_forward_packed_bf16"),
    ("add_rmsnorm_forward_packed_t512_bf16", "add_rmsnorm_forward_packed_bf16"),
    ("layernorm_forward_packed16_t256_bf16", "layernorm_forward_packed16_bf16"),
]


def tool(env, *candidates):
    for c in (os.environ.get(env),) + candidates:
        if c and (os.path.exists(c) or shutil.which(c)):
            return c
    sys.exit(f"rows-sass: {env} not found")


def ptxas_info(text):
    """{kernel: 'NN regs, S spill bytes, M smem'} from ptxas -v output."""
    info, current = {}, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            smem = re.search(r"(\d+) bytes smem", line)
            info.setdefault(current, {})["regs"] = int(m.group(1))
            info[current]["smem"] = int(smem.group(1)) if smem else 0
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and current:
            info.setdefault(current, {})["spill"] = int(m.group(1)) + int(m.group(2))
    return info


def functions(sass):
    """{kernel: [(label or None, opcode line)]} from nvdisasm -c."""
    out, current = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s*\.text\.(\w+):", line)
        if m:
            current = m.group(1)
            out[current] = []
            continue
        if current is None:
            continue
        m = re.match(r"(\.L_x_\d+):", line.strip())
        if m:
            out[current].append(("label", m.group(1)))
            continue
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(.*?);", line)
        if m:
            out[current].append(("insn", m.group(1).strip()))
    return out


def opcode(insn):
    words = insn.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


CLASSES = [
    ("LDG", lambda o: o.startswith("LDG")),
    ("LDG.128", lambda o: o.startswith("LDG") and ".128" in o),
    ("STG", lambda o: o.startswith("STG")),
    ("STG.128", lambda o: o.startswith("STG") and ".128" in o),
    ("LDS/STS", lambda o: o.startswith(("LDS", "STS"))),
    ("SHFL", lambda o: o.startswith("SHFL")),
    ("BAR", lambda o: o.startswith("BAR")),
    ("MUFU", lambda o: o.startswith("MUFU")),
    ("F2F/F2FP", lambda o: o.startswith(("F2F", "F2FP", "I2F", "F2I"))),
    ("FP", lambda o: o.startswith(("FFMA", "FMUL", "FADD", "FMNMX", "FSEL", "FSETP", "FCHK"))),
    ("INT", lambda o: o.startswith(("IMAD", "IADD", "LOP", "SHF", "LEA", "ISETP", "SEL", "VIADD", "PRMT", "MOV", "IABS", "UIMAD", "UIADD", "ULOP", "USHF", "ULEA", "UMOV", "ISETP", "ULDC", "LDC", "S2R", "S2UR", "CS2R", "IMNMX", "VIMNMX", "HFMA2"))),
    ("BRA", lambda o: o.startswith(("BRA", "BSSY", "BSYNC", "CALL", "RET", "EXIT"))),
]


def counts(body):
    ops = [opcode(i) for kind, i in body if kind == "insn" and opcode(i) not in ("NOP",)]
    c = Counter()
    for o in ops:
        for name, test in CLASSES:
            if test(o):
                c[name] += 1
    return len(ops), c


def trim(body):
    """Drops the trailing `BRA self` padding loop after the last EXIT."""
    last = max((k for k, (kind, i) in enumerate(body) if kind == "insn" and opcode(i) == "EXIT"), default=len(body) - 1)
    return body[: last + 1] + [e for e in body[last + 1 :] if e[0] == "label" or opcode(e[1]) not in ("BRA", "NOP")]


def hottest_loop(body):
    """The largest span from a label to a later branch back to it (a loop body) among those
    with a 16-byte global access (the aligned path: the Rust kernels also hold an
    element-by-element copy of their loops for misaligned views), else the largest; or None."""
    positions = {e[1]: k for k, e in enumerate(body) if e[0] == "label"}
    best = None
    for k, (kind, i) in enumerate(body):
        if kind != "insn" or not opcode(i).startswith("BRA"):
            continue
        m = re.search(r"`\((\.L_x_\d+)\)", i)
        if m and m.group(1) in positions and positions[m.group(1)] < k:
            span = body[positions[m.group(1)] : k + 1]
            n, c = counts(span)
            key = (c["LDG.128"] + c["STG.128"] > 0, n)
            if best is None or key > best[0]:
                best = (key, n, span)
    return best and best[1:]


def main():
    ptx = sys.argv[1] if len(sys.argv) > 1 else max(glob.glob(f"{ROOT}/target/release/build/ferrocuda-kernels-device-*/out/ferrocuda_kernels_device.sm_90.ptx"), key=os.path.getmtime)
    nvcc = tool("NVCC", "/work/cuda13-candle/nvidia/cu13/bin/nvcc", "/usr/local/cuda/bin/nvcc", "nvcc")
    ptxas = tool("PTXAS", "ptxas", "/usr/local/bin/ptxas")
    nvdisasm = tool("NVDISASM", "nvdisasm", "/usr/local/bin/nvdisasm")
    work = tempfile.mkdtemp()
    ours_cubin, twin_cubin = f"{work}/ours.cubin", f"{work}/twins.cubin"
    r1 = subprocess.run([ptxas, "-arch=sm_90", "-O3", "-v", ptx, "-o", ours_cubin], capture_output=True, text=True, check=True)
    r2 = subprocess.run([nvcc, "-cubin", "-O3", "-arch=sm_90", "-Xptxas", "-v", f"{ROOT}/kernels/bench/rows_twins.cu", "-o", twin_cubin], capture_output=True, text=True, check=True)
    info = {"ours": ptxas_info(r1.stderr + r1.stdout), "twin": ptxas_info(r2.stderr + r2.stdout)}
    sass = {
        "ours": functions(subprocess.run([nvdisasm, "-c", ours_cubin], capture_output=True, text=True, check=True).stdout),
        "twin": functions(subprocess.run([nvdisasm, "-c", twin_cubin], capture_output=True, text=True, check=True).stdout),
    }
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    print(f"# Row kernels: ours (ptxas -O3 -arch=sm_90 of {os.path.relpath(ptx, ROOT)}) vs CUDA C++ twins (nvcc -O3 -arch=sm_90 kernels/bench/rows_twins.cu; {version})")
    print("# regs/spill/smem from ptxas -v; counts from nvdisasm (all = every instruction but NOPs, both the aligned and the\n# element-wise paths of ours; loop = the largest backward-branch body with a 16-byte access, else the largest)")
    cols = [name for name, _ in CLASSES]
    print(f"{'kernel':<40} {'side':<5} {'regs':>4} {'spill':>5} {'smem':>5} {'all':>5} {'loop':>5} " + " ".join(f"{c:>8}" for c in cols))
    for pair in PAIRS:
        ours, twin = (pair, pair) if isinstance(pair, str) else pair
        for side in ("ours", "twin"):
            k = ours if side == "ours" else twin
            body = sass[side].get(k)
            if body is None:
                print(f"{k:<40} {side:<5} (absent)")
                continue
            body = trim(body)
            n, c = counts(body)
            loop = hottest_loop(body)
            i = info[side].get(k, {})
            print(
                f"{k:<40} {side:<5} {i.get('regs', '?'):>4} {i.get('spill', 0):>5} {i.get('smem', '?'):>5} {n:>5} {loop[0] if loop else '-':>5} "
                + " ".join(f"{c[name]:>8}" for name in cols)
            )
            if loop:
                _, lc = counts(loop[1])
                print(f"{'':<40} {'loop':<5} {'':>4} {'':>5} {'':>5} {'':>5} {loop[0]:>5} " + " ".join(f"{lc[name]:>8}" for name in cols))
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
