//! Warnings for kernels whose register count is just over an occupancy cliff (issue 30,
//! seventh held-out port).
//!
//! vLLM's static int8 quantiser, ported on the first try, took 38 registers where nvcc's took
//! 32. At vLLM's 1024-thread blocks that is one resident block per SM instead of two (65536
//! registers per SM, allocated 8 per thread at a time): 0.62x nvcc, with fewer SASS
//! instructions than nvcc and nothing in the build to say so. The builder warned about spills
//! only. Here it also warns when a kernel's registers leave **one** block of a block size per
//! SM where one allocation step fewer (8 registers) would fit two: at the block size the kernel
//! declares (`launch_bounds`), or, without a declaration, at the common sizes 1024, 512 and 256
//! (more than 32, 64 and 128 registers). One resident block also means no other block's loads
//! overlap a block's barriers: the cliff costs more than the halved occupancy suggests.

use std::collections::BTreeMap;

use crate::ptx_text::function_header;
use crate::ptxas::KernelResources;

/// 32-bit registers per SM on every architecture the builder compiles for (sm_75 to sm_120).
const REGISTERS_PER_SM: u32 = 65536;
/// ptxas allocates a warp's registers in units of 256 (8 per thread).
const REGISTERS_PER_THREAD_UNIT: u32 = 8;
/// The block sizes checked for a kernel that declares none.
const COMMON_BLOCKS: [u32; 3] = [1024, 512, 256];

/// Resident warps per SM on `arch` (sm_86, sm_89 and sm_120: 48; the others: 64).
fn max_warps(arch: u32) -> u32 {
    match arch {
        86 | 87 | 89 | 120 | 121 => 48,
        _ => 64,
    }
}

/// Blocks of `threads` threads that fit on one SM of `arch` with `registers` registers per
/// thread, counting registers and resident warps (not shared memory: the builder does not
/// know a launch's dynamic shared memory).
pub fn blocks_per_sm(arch: u32, registers: u32, threads: u32) -> u32 {
    let warps = threads.div_ceil(32).max(1);
    let per_warp = registers.max(1).next_multiple_of(REGISTERS_PER_THREAD_UNIT) * 32;
    let warps_by_registers = REGISTERS_PER_SM / per_warp;
    (warps_by_registers / warps).min(max_warps(arch) / warps)
}

/// The block size each kernel of `ptx` declares with `.maxntid` or `.reqntid` (the launch
/// bounds the builder wrote), and its `.minnctapersm` (0 when none).
pub fn declared_blocks(ptx: &str) -> BTreeMap<String, (u32, u32)> {
    let mut declared = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in ptx.lines() {
        let trimmed = line.trim();
        if let Some((name, true)) = function_header(trimmed) {
            current = Some(name);
            continue;
        }
        let Some(kernel) = &current else { continue };
        if trimmed == "{" {
            current = None;
        } else if let Some(dims) = trimmed.strip_prefix(".maxntid").or_else(|| trimmed.strip_prefix(".reqntid")) {
            let threads = dims.split(',').map(|d| d.trim().parse::<u32>().unwrap_or(1)).product();
            declared.entry(kernel.clone()).or_insert((0, 0)).0 = threads;
        } else if let Some(min) = trimmed.strip_prefix(".minnctapersm") {
            declared.entry(kernel.clone()).or_insert((0, 0)).1 = min.trim().parse().unwrap_or(0);
        }
    }
    declared
}

/// The `cargo:warning` lines for the kernels among `resources` (one cubin's `ptxas -v`, for
/// `arch`) whose registers leave one block per SM where 8 fewer would fit two, at the block
/// size `declared` gives them (from [`declared_blocks`]), or else at `default_block` (the
/// crate's launch size, when its build names one) or at 1024, 512 and 256 threads.
/// Kernels in `expected` (names, or prefixes ending in `*`) are not named.
pub fn warnings(
    arch: u32,
    resources: &[KernelResources],
    declared: &BTreeMap<String, (u32, u32)>,
    default_block: Option<u32>,
    expected: &[String],
) -> Vec<String> {
    let mut by_kernel: BTreeMap<&str, &KernelResources> = BTreeMap::new();
    for r in resources {
        by_kernel.insert(&r.kernel, r);
    }
    let vouched = |kernel: &str| {
        expected.iter().any(|e| match e.strip_suffix('*') {
            Some(prefix) => kernel.starts_with(prefix),
            None => e == kernel,
        })
    };
    let mut lines = Vec::new();
    for r in by_kernel.into_values().filter(|r| !vouched(&r.kernel)) {
        let own = declared.get(&r.kernel).filter(|(threads, _)| *threads > 0).map(|&(threads, _)| threads).or(default_block);
        let sizes: Vec<u32> = match own {
            Some(threads) => vec![threads],
            None => COMMON_BLOCKS.to_vec(),
        };
        // The largest size with a cliff: one at 1024 threads is the one a port of a 1024-thread
        // kernel needs to hear about; smaller ones are named with it.
        let cliffs: Vec<(u32, u32)> = sizes
            .into_iter()
            .filter_map(|threads| {
                let fewer = r.registers.next_multiple_of(REGISTERS_PER_THREAD_UNIT).saturating_sub(REGISTERS_PER_THREAD_UNIT);
                let cliff = blocks_per_sm(arch, r.registers, threads) == 1 && fewer > 0 && blocks_per_sm(arch, fewer, threads) >= 2;
                cliff.then_some((threads, fewer))
            })
            .collect();
        let Some(&(threads, fewer)) = cliffs.first() else { continue };
        let at = cliffs.iter().map(|(t, _)| format!("{t}")).collect::<Vec<_>>().join(", ");
        let whose = if own.is_some() { "at its" } else { "if launched with" };
        lines.push(format!(
            "kernel `{}` uses {} registers per thread (ptxas -v, sm_{arch}): {whose} {at}-thread blocks, ONE block fits per SM where {fewer} registers would fit two (half the occupancy, and no other block to hide its barriers). \
             Fewer values live at once (keep 16-bit packs packed until used: `Bf16x2` arithmetic, not eight f32), or cap the registers with `#[kernel(launch_bounds({threads}, 2))]` and check that the build reports no spills{} (docs/performance.md, \"registers and occupancy\")",
            r.kernel,
            r.registers,
            if own.is_some() {
                String::new()
            } else {
                // Session 21 (issue 30's ninth port, L3): "declare the block size" read as harmless
                // and was followed with a bare `launch_bounds(256)`, whose `.maxntid` without a
                // block count let ptxas cap the registers for full occupancy (39 -> 32 and a
                // 16-byte spill).
                per_kernel_remedies(arch, r.registers)
            },
        ));
    }
    lines
}

/// The tail of a warning for a kernel that declares no block size: how to name the size it is
/// launched with **for this kernel** (issue 30, tenth port, gap 6: a crate launching at 256, 512
/// and 1024 threads was told only of the crate-wide `launch_block_threads`). Each remedy is
/// given with the block count that keeps the `registers` ptxas chose, worked out for 256 and
/// 512 threads, so no register cap comes with it.
fn per_kernel_remedies(arch: u32, registers: u32) -> String {
    let keep = |threads: u32| blocks_per_sm(arch, registers, threads).max(1);
    format!(
        "; to have this check use the size this kernel is launched with, declare it on the kernel: `#[kernel(launch_bounds(N, k))]` with `k = 65536 / (N x {registers})` rounded down, which keeps these {registers} registers (`launch_bounds(256, {k256})`, `launch_bounds(512, {k512})`; a bare `launch_bounds(N)`, `.maxntid` without a block count, lets ptxas cap the registers for full occupancy and spill), or `#[kernel(reqntid(N))]` when every launch uses N threads (its `__assume_reqntid::<N>()` makes the block size a constant in the kernel; a GPU refuses other sizes; like a bare `launch_bounds(N)` it has no block count, so check the registers ptxas -v reports then); crate-wide, `KernelBuilder::launch_block_threads(N)` (no cap) names one size for every kernel of the crate",
        k256 = keep(256),
        k512 = keep(512),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptxas::parse_resources;

    /// `ptxas -v` as CUDA 13 writes it for the seventh port's static int8 quantiser (38
    /// registers), its fix (31) and a 256-thread kernel with launch bounds.
    const PTXAS: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'static_scaled_int8_quant' for 'sm_90'
ptxas info    : Function properties for static_scaled_int8_quant
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 38 registers, used 0 barriers, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'static_scaled_int8_quant_fixed' for 'sm_90'
ptxas info    : Function properties for static_scaled_int8_quant_fixed
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 31 registers, used 0 barriers, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'bounded' for 'sm_90'
ptxas info    : Function properties for bounded
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 130 registers, used 1 barriers, 400 bytes cmem[0]
";

    #[test]
    fn p30_ports7_occupancy_blocks_per_sm_follow_the_register_file() {
        assert_eq!(blocks_per_sm(90, 32, 1024), 2);
        assert_eq!(blocks_per_sm(90, 38, 1024), 1, "38 rounds to 40: 51 warps of registers");
        assert_eq!(blocks_per_sm(90, 64, 512), 2);
        assert_eq!(blocks_per_sm(90, 65, 512), 1);
        assert_eq!(blocks_per_sm(90, 128, 256), 2);
        assert_eq!(blocks_per_sm(90, 16, 256), 8, "warps cap it: 64 / 8");
        assert_eq!(blocks_per_sm(89, 16, 1024), 1, "48 warps on sm_89: never two 1024-thread blocks");
    }

    #[test]
    fn p30_ports7_occupancy_cliff_at_1024_threads_is_named_with_the_fix() {
        let resources = parse_resources(PTXAS);
        assert_eq!(resources.len(), 3, "{resources:?}");
        let lines = warnings(90, &resources, &BTreeMap::new(), None, &[]);
        let quant: Vec<_> = lines.iter().filter(|l| l.contains("`static_scaled_int8_quant`")).collect();
        assert_eq!(quant.len(), 1, "{lines:?}");
        let line = quant[0];
        assert!(line.contains("38 registers") && line.contains("1024-thread blocks") && line.contains("32 registers would fit two"), "{line}");
        assert!(line.contains("keep 16-bit packs packed") && line.contains("launch_bounds(1024, 2)"), "the warning names both fixes: {line}");
        assert!(!lines.iter().any(|l| l.contains("`static_scaled_int8_quant_fixed`")), "31 registers fit two: {lines:?}");
        // 130 registers without a declaration: 1 block of 256 where 128 fit 2.
        let bounded: Vec<_> = lines.iter().filter(|l| l.contains("`bounded`")).collect();
        assert!(bounded.len() == 1 && bounded[0].contains("if launched with 256-thread blocks"), "{lines:?}");
    }

    /// Issue 30, tenth port, gap 6: llm.c's `layernorm_backward_kernel1` (40 registers, no
    /// declared size) drew a warning at 1024 threads whose only remedy was the crate-wide
    /// `launch_block_threads`, in a crate that launches at 256, 512 and 1024. The warning names
    /// the per-kernel forms, with the block count that keeps the 40 registers (6 at 256).
    #[test]
    fn p30_ports10_gap6_occupancy_warning_names_the_per_kernel_remedies() {
        let ptxas = "\
ptxas info    : Compiling entry function 'layernorm_backward_kernel1' for 'sm_90'
ptxas info    : Function properties for layernorm_backward_kernel1
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 432 bytes cmem[0]
";
        let lines = warnings(90, &parse_resources(ptxas), &BTreeMap::new(), None, &[]);
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        assert!(line.contains("if launched with 1024-thread blocks") && line.contains("32 registers would fit two"), "{line}");
        assert!(line.contains("declare it on the kernel"), "per kernel first: {line}");
        assert!(line.contains("`launch_bounds(256, 6)`") && line.contains("`launch_bounds(512, 3)`"), "counts that keep 40 registers: {line}");
        assert!(line.contains("`#[kernel(reqntid(N))]`") && line.contains("`__assume_reqntid::<N>()`"), "{line}");
        assert!(line.contains("`KernelBuilder::launch_block_threads(N)`"), "the crate-wide form stays, named as such: {line}");
        // A kernel that declares its size is told none of this: its size is the one checked.
        let declared = BTreeMap::from([("layernorm_backward_kernel1".to_string(), (1024, 0))]);
        let own = warnings(90, &parse_resources(ptxas), &declared, None, &[]);
        assert!(own.len() == 1 && !own[0].contains("declare it on the kernel"), "{own:?}");
    }

    #[test]
    fn p30_ports7_occupancy_a_declared_block_size_is_the_one_checked() {
        let ptx = "\
.visible .entry bounded(
\t.param .u64 bounded_param_0
)
.maxntid 128, 1, 1
{
\tret;
}
.visible .entry static_scaled_int8_quant()
.maxntid 1024, 1, 1
.minnctapersm 1
{
\tret;
}
";
        let declared = declared_blocks(ptx);
        assert_eq!(declared.get("bounded"), Some(&(128, 0)));
        assert_eq!(declared.get("static_scaled_int8_quant"), Some(&(1024, 1)));
        let lines = warnings(90, &parse_resources(PTXAS), &declared, None, &[]);
        // `bounded` at 128 threads: 130 registers fit 3 blocks; no cliff there.
        assert!(!lines.iter().any(|l| l.contains("`bounded`")), "{lines:?}");
        let quant = lines.iter().find(|l| l.contains("`static_scaled_int8_quant`")).expect("the declared 1024 is checked");
        assert!(quant.contains("at its 1024-thread blocks") && !quant.contains("declaring the block size"), "{quant}");
    }

    #[test]
    fn p30_ports7_occupancy_vouched_for_kernels_are_quiet() {
        let lines = warnings(90, &parse_resources(PTXAS), &BTreeMap::new(), None, &["static_*".into(), "bounded".into()]);
        assert!(lines.is_empty(), "{lines:?}");
    }

    /// A crate that names its launch size (the kernel library: 256) is checked at that size
    /// alone: 38 registers fit 6 blocks of 256, 130 registers one where 128 fit two.
    #[test]
    fn p30_ports7_occupancy_the_crates_launch_size_replaces_the_common_ones() {
        let lines = warnings(90, &parse_resources(PTXAS), &BTreeMap::new(), Some(256), &[]);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("`bounded`") && lines[0].contains("at its 256-thread blocks"), "{}", lines[0]);
    }
}
