#!/usr/bin/env python3
"""SASS comparison of bench/ports5's Rust kernels and their nvcc twins (no GPU needed).

Usage: scripts/ports5-sass.py [OUT.md]   (after `cargo build --release -p ferrocuda-ports5-llmc
-p ferrocuda-ports5-vllm`). Compiles our PTX with `ptxas -arch=sm_90 -v` (registers, stack,
spills), the twins with nvcc 13 (`-cubin -O3 -arch=sm_90`, llm.c's with --use_fast_math,
`-Xptxas -v`), disassembles both cubins with nvdisasm and prints, per kernel: registers,
spill/stack bytes, SASS instructions (no NOPs), global loads/stores by width, local memory
accesses, shuffles, barriers, SFU ops, calls and branches.
"""
import glob, os, re, subprocess, sys, tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
NVCC = os.environ.get("NVCC", "/work/cuda13-candle/nvidia/cu13/bin/nvcc")
PAIRS = [  # (crate, ours, twin)
    ("llmc", "residual_forward_kernel2", "twin_residual_forward_kernel2"),
    ("llmc", "crossentropy_forward_kernel1", "twin_crossentropy_forward_kernel1"),
    ("llmc", "crossentropy_softmax_backward_kernel1", "twin_crossentropy_softmax_backward_kernel1"),
    ("llmc", "copy_and_cast_kernel", "twin_copy_and_cast_kernel"),
    # After the port (issue 30): the output in llm.c's own partition, `GridSlices`.
    ("llmc", "copy_and_cast_kernel_slices", "twin_copy_and_cast_kernel"),
    ("vllm", "gelu_tanh_and_mul_kernel", "twin_gelu_tanh_and_mul_kernel"),
    ("vllm", "rms_norm_static_fp8_quant_kernel", "twin_rms_norm_static_fp8_quant_kernel"),
    ("vllm", "apply_repetition_penalties_kernel", "twin_apply_repetition_penalties_kernel"),
    ("vllm", "topk_gating_softmax_64", "twin_topk_gating_softmax_64"),
    # After the port (issue 30): vLLM's `finished` as `Option<&[u8]>`; the twin is the same.
    ("vllm", "topk_gating_softmax_64_finished", "twin_topk_gating_softmax_64"),
]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True)


def ptxas_info(text):
    """{kernel: (regs, stack, spill_stores, spill_loads)} from ptxas -v output."""
    info, name = {}, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            name = m.group(1)
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and name:
            info.setdefault(name, [0, 0, 0, 0])[1:] = [int(m.group(1)), int(m.group(2)), int(m.group(3))]
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            info.setdefault(name, [0, 0, 0, 0])[0] = int(m.group(1))
    return info


def sass(cubin):
    """{kernel: [instruction lines]} from nvdisasm."""
    out = run(["nvdisasm", "-c", cubin]).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"\s*\.text\.(\w+):", line)
        if m:
            cur = m.group(1)
            funcs[cur] = []
            continue
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if m and cur:
            ins = m.group(1).strip()
            if not re.match(r"(@!?U?P\w+\s+)?NOP\b", ins):
                funcs[cur].append(ins)
    return funcs


def summary(ins):
    c = lambda pat: sum(1 for i in ins if re.search(pat, i))
    ldg = {w: c(r"\bLDG\S*\.%s\b" % w) for w in ("128", "64")}
    ldg_any = c(r"\bLDG\b")
    stg = {w: c(r"\bSTG\S*\.%s\b" % w) for w in ("128", "64")}
    stg_any = c(r"\bSTG\b")
    return {
        "sass": len(ins),
        "LDG(128/64/other)": f"{ldg['128']}/{ldg['64']}/{ldg_any - ldg['128'] - ldg['64']}",
        "STG(128/64/other)": f"{stg['128']}/{stg['64']}/{stg_any - stg['128'] - stg['64']}",
        "LDL/STL": "%d/%d" % (c(r"\bLDL\b"), c(r"\bSTL\b")),
        "SHFL": c(r"\bSHFL\b"),
        "BAR": c(r"\bBAR\b"),
        "MUFU": c(r"\bMUFU\b"),
        "CALL": c(r"\bCALL\b"),
        "BRA": c(r"\bBRA\b"),
    }


def main():
    tmp = tempfile.mkdtemp(prefix="ports5-sass-")
    ours_info, ours_sass = {}, {}
    for crate in ("llmc", "vllm"):
        ptx = sorted(glob.glob(f"{ROOT}/target/release/build/ferrocuda-ports5-{crate}-*/out/ferrocuda_ports5_{crate}.sm_90.ptx"), key=os.path.getmtime)[-1]
        cubin = f"{tmp}/ours_{crate}.cubin"
        r = run(["ptxas", "-arch=sm_90", "-O3", "-v", ptx, "-o", cubin])
        ours_info.update(ptxas_info(r.stdout + r.stderr))
        ours_sass.update(sass(cubin))
    twin_info, twin_sass = {}, {}
    src = f"{ROOT}/bench/ports5/cuda/ports5.cu"
    for crate, flags in (("llmc", ["-DPORTS5_LLMC", "--use_fast_math"]), ("vllm", ["-DPORTS5_VLLM"])):
        cubin = f"{tmp}/twin_{crate}.cubin"
        r = run([NVCC, "-cubin", "-O3", "-arch=sm_90", "-Xptxas", "-v", *flags, src, "-o", cubin])
        twin_info.update(ptxas_info(r.stdout + r.stderr))
        twin_sass.update(sass(cubin))
    names = sorted(k for k in ours_sass if not k.startswith("twin_"))
    rows = []
    for name in names:
        base = re.sub(r"_(fixed|tiles|unchecked|rowtiles)$", "", name)
        twin = "twin_" + base
        for who, info, funcs, key in (("ours", ours_info, ours_sass, name), ("nvcc", twin_info, twin_sass, twin)):
            if key not in funcs:
                continue
            regs, stack, ss, sl = info.get(key, [0, 0, 0, 0])
            s = summary(funcs[key])
            if who == "nvcc" and name != base:
                continue  # the twin's row is printed once, beside the first try
            rows.append((name if who == "ours" else f"  nvcc {twin}", regs, f"{stack}/{ss}/{sl}", s))
    head = "| kernel | regs | stack/spill st/ld | SASS | LDG 128/64/other | STG 128/64/other | LDL/STL | SHFL | BAR | MUFU | CALL | BRA |"
    lines = [head, "|" + "---|" * 12]
    for name, regs, st, s in rows:
        lines.append(f"| {name} | {regs} | {st} | {s['sass']} | {s['LDG(128/64/other)']} | {s['STG(128/64/other)']} | {s['LDL/STL']} | {s['SHFL']} | {s['BAR']} | {s['MUFU']} | {s['CALL']} | {s['BRA']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if len(sys.argv) > 1:
        open(sys.argv[1], "w").write(text)
    print(f"(cubins and disassembly inputs in {tmp})", file=sys.stderr)


if __name__ == "__main__":
    main()
