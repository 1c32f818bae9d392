#!/usr/bin/env python3
"""SASS of each port beside its twin (the held-out ports, bench/ports6 on): instructions per
kernel (NOPs left out) and the counts of the opcodes that decide a memory-bound kernel's speed.
No GPU needed: nvdisasm reads the cubins.

usage: scripts/sass.py [--arch sm_90] [--nvcc-flags FLAGS] [--nvcc PATH] [--profile P] OURS TWIN port_name=twin_symbol ...

OURS  the port's cubin: a .cubin file; a .ptx file (compiled here with ptxas -O3 for --arch);
      or a kernel crate's package name (e.g. ferrocuda-ports7-llmc: the newest
      target/release/build/<package>-*/out/*.<arch>.cubin its build script wrote, the build the
      benches run; target/debug only when there is no release one, or with --profile debug.
      The file read is printed on stderr. The dev profile's device build keeps overflow checks:
      issue 30's tenth port read 400 SASS instructions there against 139 in release).
TWIN  the twin's cubin: a .cubin file, or a .cu file compiled here with nvcc -cubin for --arch
      and --nvcc-flags, which should be the GPU job's (bench/portsN/scripts/gpu-job.sh), e.g.
      --nvcc-flags "-O3 --use_fast_math -DPORTS7_LLMC" for ports7's llm.c twins.
port_name=twin_symbol  a kernel of OURS and its twin's symbol in TWIN (vLLM's are mangled:
      `nvdisasm -c TWIN.cubin | grep '.type.*@function'` lists them).

Examples (from the repository's root, after `cargo build --release -p ferrocuda-ports7`):
  scripts/sass.py ferrocuda-ports7-llmc bench/ports7/cuda/ports7.cu \\
      --nvcc-flags "-O3 --use_fast_math -DPORTS7_LLMC" residual_forward_kernel=residual_forward_kernel
  scripts/sass.py ours.sm_90.cubin ports6_llmc.sm_90.cubin rope_forward_kernel1=rope_forward_kernel1
"""
import argparse, collections, glob, os, re, shlex, shutil, subprocess, sys, tempfile

KEYS = ["LDG", "STG", "LDS", "STS", "BAR", "SHFL", "MUFU", "ATOM", "RED", "BRA", "CALL", "F2F", "F2FP", "I2F", "F2I", "DFMA", "DMUL", "FFMA", "HFMA2", "HMUL2", "HADD2", "IMAD", "LDL", "STL", "MEMBAR"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The CUDA 13 nvcc of this machine's pip tree (COMMON notes), where none is on PATH.
PIP_NVCC = "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc"


def fail(message):
    sys.exit(f"sass.py: {message}")


def crate_cubin(package, arch, profile=None):
    """The newest cubin for `arch` that the build script of `package` wrote in `profile`, or
    without one in release (what the benches run) and only where there is none in debug: a
    `cargo clippy` or `cargo test` without --release writes a newer dev-profile cubin, whose
    device build keeps overflow checks (issue 30, tenth port: 400 SASS instructions against
    the release build's 139 for one kernel), and "the newest of both" compared that one."""
    for candidate in [profile] if profile else ["release", "debug"]:
        found = glob.glob(os.path.join(ROOT, "target", candidate, "build", f"{package}-*", "out", f"*.{arch}.cubin"))
        if found:
            path = max(found, key=os.path.getmtime)
            print(f"sass.py: OURS is {os.path.relpath(path, ROOT)} ({candidate} profile)", file=sys.stderr)
            return path
    where = f"target/{profile}" if profile else "target/release or target/debug"
    fail(f"no {arch} cubin of the package {package} under {where}: build it first "
         f"(cargo build --release -p {package}), or pass a .cubin or .ptx file")


def ours_cubin(arg, arch, tmp, profile=None):
    if arg.endswith(".cubin"):
        return arg
    if arg.endswith(".ptx"):
        out = os.path.join(tmp, "ours.cubin")
        subprocess.run(["ptxas", "-O3", f"-arch={arch}", "-o", out, arg], check=True)
        return out
    return crate_cubin(arg, arch, profile)


def twin_cubin(arg, arch, nvcc, flags, tmp):
    if arg.endswith(".cubin"):
        return arg
    if not arg.endswith(".cu"):
        fail(f"TWIN {arg!r} is neither a .cubin nor a .cu file")
    nvcc = nvcc or shutil.which("nvcc") or PIP_NVCC
    out = os.path.join(tmp, "twin.cubin")
    # The pip nvcc finds its headers beside it (include/); a toolkit's nvcc ignores the -I.
    include = os.path.join(os.path.dirname(os.path.dirname(nvcc)), "include")
    cmd = [nvcc, "-cubin", f"-arch={arch}", f"-I{include}", *shlex.split(flags), "-o", out, arg]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"nvcc failed ({shlex.join(cmd)}):\n{result.stderr[-3000:]}")
    return out


def functions(cubin):
    text = subprocess.run(["nvdisasm", "-c", cubin], capture_output=True, text=True, check=True).stdout
    funcs, name = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line)
        if m:
            name = m.group(1)
            funcs[name] = []
            continue
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m and name:
            op = m.group(2)
            if op != "NOP":
                funcs[name].append(op)
    return funcs


def summary(ops):
    c = collections.Counter()
    for op in ops:
        base = op.split(".")[0]
        c[base] += 1
        if op.startswith("LDG") or op.startswith("STG"):
            c[op] += 1
    return c


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], usage=__doc__.split("\n\n")[1].removeprefix("usage: "))
    parser.add_argument("ours")
    parser.add_argument("twin")
    parser.add_argument("pairs", nargs="+", metavar="port_name=twin_symbol")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--nvcc", default=None)
    parser.add_argument("--nvcc-flags", default="-O3")
    parser.add_argument("--profile", choices=["release", "debug"], default=None,
                        help="the cargo profile whose cubin a package name means (default: release, else debug)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ours = functions(ours_cubin(args.ours, args.arch, tmp, args.profile))
        twin = functions(twin_cubin(args.twin, args.arch, args.nvcc, args.nvcc_flags, tmp))
    for pair in args.pairs:
        if "=" not in pair:
            fail(f"{pair!r}: write port_name=twin_symbol")
        a, b = pair.split("=", 1)
        if a not in ours:
            print(f"warning: no kernel {a} in OURS", file=sys.stderr)
        if b not in twin:
            print(f"warning: no kernel {b} in TWIN", file=sys.stderr)
        oa, ob = ours.get(a, []), twin.get(b, [])
        sa, sb = summary(oa), summary(ob)
        print(f"{a}: ours {len(oa)} instructions, twin {len(ob)}")
        for k in KEYS:
            if sa[k] or sb[k]:
                print(f"  {k:<7} {sa[k]:>4} {sb[k]:>4}")
        wide = sorted({k for k in list(sa) + list(sb) if k.startswith(("LDG.", "STG."))})
        for k in wide:
            print(f"  {k:<28} {sa[k]:>4} {sb[k]:>4}")


if __name__ == "__main__":
    main()
