//! The code issue 30's fixes compile to, checked without a GPU on the fixture kernels of
//! tests/kernels/src/port_patterns.rs: the PTX (always) and the SASS of the sm_90 cubin (where
//! the build had `ptxas` and `nvdisasm` is installed).

#[path = "common/ptx.rs"]
mod ptx_text;
use ptx_text::{entry_body, sass_function, sass_instructions, sass_listing};

fn ptx(arch: u32) -> &'static str {
    test_kernels::KERNELS.ptx_for(arch).unwrap_or_else(|| panic!("test_kernels is built for sm_{arch}"))
}

/// The sm_90 SASS listing of the test kernels, or `None` (printed) without a cubin or nvdisasm.
fn sass() -> Option<&'static str> {
    static LISTING: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    LISTING
        .get_or_init(|| {
            let Some(&(_, cubin)) = test_kernels::KERNELS.cubins.iter().find(|(arch, _)| *arch == 90) else {
                eprintln!("SKIPPED the SASS checks: no sm_90 cubin (ptxas was not found at build time)");
                return None;
            };
            sass_listing(cubin, "port-patterns-sass")
        })
        .as_deref()
}

/// Regression p30_1: the kernel tag is declared `.align 16`, the width of its one
/// `st.shared.v2.u64`; with `.align 8`, ptxas put it at offset 8 after a 4-byte
/// `shared_array!` (`STS.128 [UR4+0x8]`) and every launch faulted. In the SASS every 16-byte
/// shared access of the kernel is at a multiple of 16.
#[test]
fn p30_1_the_kernel_tag_is_16_byte_aligned_after_a_4_byte_shared_array() {
    const KERNEL: &str = "p30_small_shared_first_can_panic";
    for arch in [80, 90] {
        assert!(ptx(arch).contains(".shared .align 16 .u64 __ferrocuda_kernel_tag[2];"), "sm_{arch}: the tag's declaration");
        let body = entry_body(ptx(arch), KERNEL);
        assert!(body.contains("st.shared.v2.u64 [t]"), "sm_{arch}: the kernel can panic, so it keeps the tag store:\n{body}");
    }
    let Some(listing) = sass() else { return };
    let wide: Vec<_> = sass_instructions(sass_function(listing, KERNEL))
        .into_iter()
        .filter(|(op, _)| op.ends_with(".128") && (op.starts_with("STS") || op.starts_with("LDS")))
        .collect();
    assert!(!wide.is_empty(), "the tag's STS.128 is in the SASS");
    for (op, operands) in wide {
        let address = operands.split(['[', ']']).nth(1).unwrap_or_else(|| panic!("{op} {operands}"));
        let offset = address.split_once("+0x").map_or(0, |(_, hex)| u64::from_str_radix(hex, 16).unwrap());
        assert!(offset.is_multiple_of(16), "{op} {operands}: a 16-byte access at offset {offset:#x} (base aligned to 16 or more)");
    }
}

/// Regression p30_5: a 16-byte struct read from an input was two 8-byte loads without `.nc`
/// (`*o = *v`, pinned here so that the docs can drop the advice when LLVM changes); the safe
/// `vector::load16`/`store16` are one 16-byte `ld.global.nc` (`LDG.E.128.CONSTANT`) on an
/// input and one weak 16-byte `ld.global` (`LDG.E.128`, llm.c's load) on the thread's own
/// output, and one 16-byte `st.global` (`STG.E.128`): a single 128-bit access whose alignment
/// is in its type (`.v2.b64` or `.v4.b32` in the PTX, as LLVM splits the value for its uses). (They were four 4-byte accesses for LLVM's vectoriser to join, which it could not do
/// where the pointer was a loop's induction variable: issue 30's ports,
/// bench/ports/tests/ports_ptx.rs.)
#[test]
fn p30_5_load16_is_one_16_byte_load_nc_on_inputs_and_weak_elsewhere() {
    for arch in [80, 90] {
        let ops = |kernel: &str| -> Vec<&'static str> {
            ptx_text::opcodes(entry_body(ptx(arch), kernel)).into_iter().filter(|op| op.starts_with("ld.global") || op.starts_with("st.global")).collect()
        };
        // One 16-byte access each: `.v4.b32` or `.v2.b64` (LLVM picks the form from the uses).
        let sixteen = |ops: Vec<&'static str>| -> Vec<String> { ops.iter().map(|op| op.replace(".v4.b32", ".b128").replace(".v2.b64", ".b128")).collect() };
        assert_eq!(sixteen(ops("p30_load16_input")), ["ld.global.nc.b128", "st.global.b128"], "sm_{arch}");
        assert_eq!(sixteen(ops("p30_load16_in_place")), ["ld.global.b128", "st.global.b128"], "sm_{arch}");
        let copy = ops("p30_struct_copy");
        assert!(copy.iter().all(|op| !op.contains(".v4")), "LLVM now vectorises `*o = *v`: update docs/performance.md's float4 row ({copy:?})");
    }
    let Some(listing) = sass() else { return };
    let memory = |kernel: &str| -> Vec<&str> {
        sass_instructions(sass_function(listing, kernel)).into_iter().map(|(op, _)| op).filter(|op| op.starts_with("LDG") || op.starts_with("STG")).collect()
    };
    assert_eq!(memory("p30_load16_input"), ["LDG.E.128.CONSTANT", "STG.E.128"]);
    assert_eq!(memory("p30_load16_in_place"), ["LDG.E.128", "STG.E.128"]);
}

/// p30_5: each documented cache operator compiles to the SASS nvcc 13 gives its CUDA name on a
/// `float4` (sm_90; bench/results/cache-operators-nvcc.txt): `__ldca` is a strong SM-scope load
/// (`LDG.E.128.STRONG.SM`, not the default weak `LDG.E.128`), `__ldcg` a strong GPU-scope one,
/// `__ldcs` evict-first, `__ldlu` last-use; `vector::load16` the default (`.CONSTANT` on an input,
/// as `__ldg`).
#[test]
fn p30_5_cache_operators_compile_to_what_nvcc_gives_their_cuda_names() {
    let Some(listing) = sass() else { return };
    let mut loads: Vec<&str> =
        sass_instructions(sass_function(listing, "p30_wide_load_hints")).into_iter().map(|(op, _)| op).filter(|op| op.starts_with("LDG")).collect();
    loads.sort_unstable();
    loads.dedup();
    // nvcc: __ldg / const __restrict__, __ldca, __ldcg, __ldcs, __ldlu.
    let mut nvcc = vec!["LDG.E.128.CONSTANT", "LDG.E.128.STRONG.SM", "LDG.E.128.STRONG.GPU", "LDG.E.EF.128", "LDG.E.LU.128"];
    nvcc.sort_unstable();
    assert_eq!(loads, nvcc);
}

/// Registers of an sm_90 kernel of the test crate (ptxas's report at build time), or `None`
/// (printed) without ptxas.
fn registers(kernel: &str) -> Option<u32> {
    let found = test_kernels::KERNELS.resources.iter().find(|r| r.kernel == kernel && r.arch == 90).map(|r| r.registers);
    if found.is_none() {
        eprintln!("SKIPPED the register check of {kernel}: no ptxas report (ptxas was not found at build time)");
    }
    found
}

/// Regression p30_3: a block reduction at 1024 threads took 40 registers (every thread folded
/// the 32 warps' partials; CUB's kernels 14-22, half the occupancy). `RuntimeBlockReduce`
/// (any block size at run time, the result in thread 0) takes no more than CUB's
/// `BlockReduce<float, 1024>` row sum (22 registers, bench/results/block-reduce-cub-registers.txt),
/// half of the compile-time reduce's.
#[test]
fn p30_3_runtime_block_reduce_needs_no_more_registers_than_cubs() {
    const CUB_ROW_SUM_1024: u32 = 22;
    let (Some(ours), Some(fixed)) = (registers("p30_row_sum_unchecked"), registers("p30_row_sum_fixed_1024")) else { return };
    println!("row sum: RuntimeBlockReduce {ours} registers, BlockReduce<f32, 1024> {fixed}, CUB's {CUB_ROW_SUM_1024}");
    assert!(ours <= CUB_ROW_SUM_1024, "RuntimeBlockReduce's row sum takes {ours} registers, CUB's {CUB_ROW_SUM_1024}");
    assert!(2 * ours <= fixed + 4, "{ours} registers against the compile-time reduce's {fixed}");
    // The first level: the butterfly for whole warps (5 `shfl.bfly`), 5 `shfl.down` steps that
    // skip missing lanes otherwise; the second level in warp 0: 5 `shfl.down` (straight-line:
    // for the result in thread 0 a butterfly loop measured 1.5% slower at 1024 threads on an
    // H200). No thread folds the slots one by one.
    let body = entry_body(ptx(90), "p30_row_sum_unchecked");
    assert_eq!(body.matches("shfl.sync.bfly.b32").count(), 5, "{body}");
    assert_eq!(body.matches("shfl.sync.down.b32").count(), 10, "{body}");
    assert_eq!(body.matches("ld.shared").count(), 1, "one slot read, by warp 0's lanes:\n{body}");
    // Two barriers (the trailing one lets the scratch be reused at once), for every reduction
    // since session 14's one set of slots.
    assert_eq!(body.matches("barrier.sync").count() + body.matches("bar.sync").count(), 2, "two barriers:\n{body}");
}

/// p30_3, llm.c's softmax count: `max_then_sum_all` and `sum_then_sum_all` take 2 barriers
/// each in a block of whole warps (`max_all` then `sum_all`: 4), plus the fallback's for a
/// partial last warp (`max_all` + `sum_all`: up to 3 + 3), and their second halves read the
/// library's own slots (a second `.shared` array, 32 x 4 bytes).
#[test]
fn p30_3_paired_max_then_sum_takes_llm_cs_two_barriers() {
    let body = entry_body(ptx(90), "p30_row_softmax_paired");
    let barriers = body.matches("barrier.sync").count() + body.matches("bar.sync").count();
    println!("p30_row_softmax_paired: {barriers} barrier instructions");
    // Whole warps: 2 + 2; a partial last warp: (3 + 3) twice; one warp: none.
    assert_eq!(barriers, 2 + 2 + 12, "barriers:\n{body}");
}

/// Issue 30's third port, what the new outputs compile to: the in-place row's phase barrier is
/// its own hardware barrier (`barrier.sync 4`, never `sync_threads`' 0) and its loads are plain;
/// the last block's write view is one 16-byte relaxed load and store per `[u32; 4]`
/// (`LDG.E.128.STRONG.GPU`/`STG.E.128.STRONG.GPU`); a 2-byte element at a computed index is one
/// `st.relaxed.gpu.global.b16`; the reversed row orders cost a subtraction, no check.
#[test]
fn p30_new_outputs_compile_to_one_instruction_per_access() {
    let body = entry_body(ptx(90), "in_place_rows_normalize");
    assert_eq!(body.matches("barrier.sync 4;").count(), 1, "the phase barrier:\n{body}");
    assert!(!body.contains("barrier.sync 0"), "no sync_threads:\n{body}");
    assert!(!body.contains("ld.global.nc"), "the row is written in the launch: no .nc loads:\n{body}");
    let body = entry_body(ptx(90), "last_block_finish");
    // (LLVM unrolls the `for j in 0..out.count()` loop by 4: one store per copy.)
    assert!(body.matches("st.relaxed.gpu.global.v4.b32").count() >= 1, "16-byte relaxed stores:\n{body}");
    assert!(body.matches("ld.relaxed.gpu.global.v4.b32").count() >= 2, "16-byte relaxed loads (partials and the output):\n{body}");
    let body = entry_body(ptx(90), "scatter_u16");
    assert_eq!(body.matches("st.relaxed.gpu.global.b16").count(), 2, "one 2-byte relaxed store per output:\n{body}");
    let Some(listing) = sass() else { return };
    let ops: Vec<String> = sass_instructions(sass_function(listing, "last_block_finish")).into_iter().map(|(op, _)| op.to_string()).collect();
    assert!(ops.iter().any(|op| op.starts_with("STG.E.128.STRONG.GPU")), "{ops:?}");
    let ops: Vec<String> = sass_instructions(sass_function(listing, "scatter_u16")).into_iter().map(|(op, _)| op.to_string()).collect();
    assert!(ops.iter().any(|op| op.starts_with("STG.E.U16.STRONG.GPU")), "{ops:?}");
}

/// p30_6: a shuffle with a width is one `shfl.sync` whose `c` operand is CUDA's
/// (`((32 - width) << 8) | clamp`), folded to an immediate by ptxas; `fetch_inc`/`fetch_dec`
/// are one `atom.inc`/`atom.dec` (`ATOMG.E.INC`/`DEC`).
#[test]
fn p30_6_width_shuffles_and_atomic_inc_are_single_instructions() {
    let body = entry_body(ptx(90), "p30_shuffle_width");
    // 2 + 1 + 1 + 1 + 1 + 4 shuffles (two width-4 butterfly steps, four width-16 ones).
    let shuffles = ptx_text::opcodes(body).into_iter().filter(|op| op.starts_with("shfl.sync")).count();
    assert_eq!(shuffles, 10, "{body}");
    let atomics = entry_body(ptx(90), "p30_atomic_inc_dec");
    // Inline-asm blocks (`{ .reg .u64 g; cvta...; atom... }`), so matched in the text.
    for op in ["atom.relaxed.gpu.global.inc.u32", "atom.relaxed.gpu.global.dec.u32"] {
        assert_eq!(atomics.matches(op).count(), 1, "{op}:\n{atomics}");
    }
    let Some(listing) = sass() else { return };
    let sass = sass_instructions(sass_function(listing, "p30_shuffle_width"));
    for (op, c) in [("SHFL.DOWN", "0x1c1f"), ("SHFL.UP", "0x1c00"), ("SHFL.IDX", "0x1c1f"), ("SHFL.BFLY", "0x1c1f"), ("SHFL.BFLY", "0x101f")] {
        assert!(sass.iter().any(|(o, operands)| *o == op && operands.ends_with(c)), "{op} with c = {c}: {sass:?}");
    }
    let atomics = sass_instructions(sass_function(listing, "p30_atomic_inc_dec"));
    assert!(atomics.iter().any(|(o, _)| o.starts_with("ATOMG.E.INC")) && atomics.iter().any(|(o, _)| o.starts_with("ATOMG.E.DEC")));
}

/// p30, a compile-time block size: under `reqntid(256)` the entry tells the compiler the
/// block's shape, so the kernel reads no `%ntid` (every `block_dim_x()` is 256), the strided
/// loop (`strided_range(tid, n, blockDim.x)`, whose add cannot wrap) has a trip count ptxas
/// computes, and ptxas unrolls it by 4: four loads in flight (`LDG.E.CONSTANT` at +0, +0x400,
/// +0x800, +0xc00), as nvcc over llm.c's `constexpr BlockSize`. (With `strided_range`'s old
/// `saturating_add` step the same loop kept one load.)
#[test]
fn p30_reqntid_makes_the_block_size_a_constant_and_strided_loops_unroll() {
    let body = entry_body(ptx(90), "p30_strided_sum_reqntid");
    assert!(!body.contains("%ntid"), "blockDim read at run time:\n{body}");
    assert!(body.contains(", 256;"), "the stride is the constant 256:\n{body}");
    let Some(listing) = sass() else { return };
    let loads = sass_instructions(sass_function(listing, "p30_strided_sum_reqntid")).iter().filter(|(op, _)| op.starts_with("LDG.E.CONSTANT")).count();
    println!("p30_strided_sum_reqntid: {loads} LDG.E.CONSTANT");
    assert!(loads >= 4, "the strided loop unrolled by ptxas: {loads} loads");
}
