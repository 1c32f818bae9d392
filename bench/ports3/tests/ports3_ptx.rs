//! What the fix round of issue 30's third held-out port changed in the generated code, pinned
//! on the PTX the builds embed (no GPU needed): see bench/ports3/RESULTS.md, "Fix round".

#[path = "../../../tests/common/ptx.rs"]
mod ptx_text;
use ptx_text::{entry_body, opcodes, sass_function, sass_instructions, sass_listing};

fn llmc(kernel: &str) -> &'static str {
    let ptx = ferrocuda_ports3_llmc::KERNELS.ptx_for(90).expect("the llm.c ports are built for sm_90");
    entry_body(ptx, kernel)
}

fn count(ops: &[&str], op: &str) -> usize {
    ops.iter().filter(|o| **o == op).count()
}

/// `LastBlock::fold_column` on a 32-byte element: two `ld.relaxed.gpu.v4` per element (it
/// was eight 4-byte loads), four rows loaded before they are folded (it was one row at a
/// time: a full L2 latency per block, llm.c's layernorm backward at 0.33x nvcc). The loads
/// are inline asm, one line each.
#[test]
fn p30_handoff_fold_column_keeps_four_rows_of_16_byte_loads_in_flight() {
    // The first try's eight 4-byte loads are its dbias/dweight pairs (`AtomicSlice<u32>`); the
    // fixed variant reads them as `x128`s through `ByLastBlock` (16 bytes each).
    for (kernel, scalars) in [("layernorm_backward_kernel10", 8), ("layernorm_backward_kernel10_fixed", 0)] {
        let body = llmc(kernel);
        let lines: Vec<&str> = body.lines().map(str::trim).collect();
        let scalar = lines.iter().filter(|l| l.contains("ld.relaxed.gpu.global.b32")).count();
        assert_eq!(scalar, scalars, "{kernel}: only the 4-byte loads of dbias/dweight pairs (AtomicSlice<u32>) are scalar");
        // The longest run of 16-byte relaxed loads with no float add between them.
        let (mut run, mut longest) = (0, 0);
        for l in &lines {
            if l.contains("ld.relaxed.gpu.global.v4.b32") {
                run += 1;
                longest = longest.max(run);
            } else if l.starts_with("add.f32") || l.starts_with("add.rn.f32") {
                run = 0;
            }
        }
        assert!(longest >= 8, "{kernel}: four rows of two 16-byte loads before the first fold, found a run of {longest}");
    }
}

/// `thread::grid_stride_range` is CUDA's loop (compare, add): `slice[i]` on the slice it
/// counts has no bounds check left, so llm.c's global norm has no panic path (it was core's
/// `step_by`: a check and the panic call per element, 679 SASS instructions against nvcc's
/// 83). The fixed variant's `let .. else` slice also reads `.nc`; the first try's
/// `unwrap_or(&[])` does not (the trap in docs/performance.md).
#[test]
fn p30_grid_stride_range_leaves_no_bounds_check_and_let_else_keeps_the_read_only_path() {
    for kernel in ["global_norm_squared_kernel", "global_norm_squared_kernel_fixed"] {
        let ops = opcodes(llmc(kernel));
        assert!(!ops.iter().any(|o| o.starts_with("call")), "{kernel}: a call (the panic path): {ops:?}");
    }
    let fixed = opcodes(llmc("global_norm_squared_kernel_fixed"));
    assert_eq!(count(&fixed, "ld.global.nc.b16") + count(&fixed, "ld.global.nc.u16"), 1, "{fixed:?}");
    let first = opcodes(llmc("global_norm_squared_kernel"));
    assert_eq!(count(&first, "ld.global.b16") + count(&first, "ld.global.u16"), 1, "the trap is still there (pinned): {first:?}");
}

/// `thread::strided_range` over a row cut to its length: one exit, so the lane's loop is
/// unrolled (ptxas does it here: four 8-byte `.nc` loads in flight, nvcc's has eight 2-byte
/// ones); the first try's `while` with `x.get(i)` and a `break` kept one. Checked in the SASS
/// (nvdisasm on the build's sm_90 cubin).
#[test]
fn p30_strided_range_lets_the_lane_loop_unroll() {
    let Some(&(_, cubin)) = ferrocuda_ports3_llmc::KERNELS.cubins.iter().find(|(arch, _)| *arch == 90) else {
        eprintln!("SKIPPED p30_strided_range_lets_the_lane_loop_unroll: no sm_90 cubin (ptxas was not found at build time)");
        return;
    };
    let Some(listing) = sass_listing(cubin, "ports3-sass") else { return };
    let loads = |kernel: &str| sass_instructions(sass_function(&listing, kernel)).iter().filter(|(op, _)| *op == "LDG.E.64.CONSTANT").count();
    assert_eq!(loads("softmax_forward_kernel5"), 1, "the first try: one 8-byte load in its loop");
    assert!(loads("softmax_forward_kernel5_fixed") >= 4, "the fixed loop unrolled: {} 8-byte loads", loads("softmax_forward_kernel5_fixed"));
}

/// The first try's `for o in 0..2` over `[f32; 8]` arrays, with barriers inside, kept the
/// arrays in local memory (a `.local` depot of 128 bytes) under LLVM's unroll threshold of
/// 300: the loop holds another loop (`for j in 1..warps_in_block`), so LLVM's unroller
/// skipped the analysis that counts the arrays' promotion to registers. With the builder's
/// `-unroll-threshold=400` (`KernelBuilder::unroll_threshold`) it unrolls: no depot, the
/// loop's two barriers twice (four `barrier.sync 0` from it, beside the kernel's others).
#[test]
fn p30_a_loop_with_barriers_over_register_arrays_unrolls_under_the_builders_threshold() {
    let depot = |kernel: &str| llmc(kernel).lines().find(|l| l.contains("__local_depot")).map(str::to_string);
    assert_eq!(depot("layernorm_backward_kernel10"), None, "the first try's arrays are in registers");
    assert_eq!(depot("layernorm_backward_kernel10_fixed"), None);
    let barriers = |kernel: &str| llmc(kernel).matches("barrier.sync 0;").count();
    assert_eq!(barriers("layernorm_backward_kernel10"), barriers("layernorm_backward_kernel10_fixed"), "the `for` loop unrolled as `unroll::<2>`");
}

/// The fix round's variants: `softmax_forward_kernel5_fixed` takes its row from the reversed
/// slot (`gridDim.x - 1 - blockIdx.x`: a `not`/add of `%nctaid.x`), and
/// `fused_classifier_kernel5_fixed` is in place (one `barrier.sync 4`, the phase barrier, in
/// the place of the first try's `sync_threads()` before the gradient; both now have the
/// library's block reductions); `layernorm_backward_kernel10_fixed`'s last block writes
/// `dbias`/`dweight` with 16-byte relaxed accesses (`st.relaxed.gpu.global.v4.b32`), where the
/// first try made four 4-byte ones per chunk.
#[test]
fn p30_fixed_variants_use_the_new_outputs() {
    let classifier = llmc("fused_classifier_kernel5_fixed");
    assert_eq!(classifier.matches("barrier.sync 4;").count(), 1, "{classifier}");
    let first = llmc("fused_classifier_kernel5");
    let plain = |body: &str| body.matches("barrier.sync 0;").count();
    assert_eq!(plain(classifier) + 1, plain(first), "the phase barrier replaces one `sync_threads`");
    // Session 14: the paired reduction (`max_then_sum_all`) leaves out the two reductions'
    // trailing barriers (llm.c's 2 for the pair), in blocks of whole warps; a partial last warp
    // keeps `max_all` + `sum_all`, so the paired kernel holds both paths.
    let paired = llmc("fused_classifier_kernel5_paired");
    assert_eq!(paired.matches("barrier.sync 4;").count(), 1, "{paired}");
    assert!(paired.contains("__ferrocuda_shared_"), "{paired}");
    let ln = llmc("layernorm_backward_kernel10_fixed");
    let wide_stores = |body: &str| body.matches("st.relaxed.gpu.global.v4.b32").count();
    assert_eq!(wide_stores(llmc("layernorm_backward_kernel10")) + 2, wide_stores(ln), "dbias and dweight, one 16-byte store each:\n{ln}");
}

/// The docs' spellings compile: the partitions from `global`, the 16-bit conversions from the
/// prelude (the first try needed `global::partition` and a second import, E0432 and E0599).
#[test]
fn p30_docs_spellings_of_partitions_and_bf16_conversions_compile() {
    use ferrocuda_device::global::{BlockRows, Cells3d, DisjointSlice, Handoff, RotaryPairs};
    use ferrocuda_device::prelude::*;
    fn _named(
        _: Option<DisjointSlice<f32, BlockRows>>,
        _: Option<DisjointSlice<f32, Handoff>>,
        _: Option<DisjointSlice<f32, Cells3d>>,
        _: Option<DisjointSlice<f32, RotaryPairs<64, 32>>>,
    ) {
    }
    assert_eq!(1.5f32.to_bf16(), bf16::from_f32(1.5));
    assert_eq!(bf16::from_f32(2.0).widen(), 2.0);
    assert_eq!(Bf16x2::from_f32s(1.0, 2.0).to_f32s(), (1.0, 2.0));
}

/// Session 15: `layernorm_backward_kernel10_regions` takes its dynamic shared memory as `f128`
/// regions (`dynamic_shared_x4().carve`), where the fixed variant cut `f32` slices with
/// `split_at` and used `get_x4`/`set_x4`. Pinned: no 16-byte alignment test is left (the fixed
/// variant tests each slice's start: `and.b32 .., 15`), two thirds of the panic calls are gone
/// (the fixed variant's 29 were 26 from the shared accesses), and warp 0's loop over the other
/// warps' slots, bounded by the region's length, unrolls in the SASS as nvcc's (at least 16
/// more `LDS.128` than the fixed variant's rolled loop; nvcc's twin has 39, the fixed variant
/// 15).
#[test]
fn p30_shared_regions_leave_no_alignment_test_and_let_warp_0s_column_loop_unroll() {
    let alignment_tests = |kernel: &str| llmc(kernel).lines().filter(|l| l.trim_start().starts_with("and.b") && l.trim_end().ends_with(", 15;")).count();
    let panics = |kernel: &str| llmc(kernel).matches("call.uni").count();
    assert!(alignment_tests("layernorm_backward_kernel10_fixed") > 0, "the fixed variant's per-access alignment test (pinned)");
    assert_eq!(alignment_tests("layernorm_backward_kernel10_regions"), 0, "{}", llmc("layernorm_backward_kernel10_regions"));
    let (fixed, regions) = (panics("layernorm_backward_kernel10_fixed"), panics("layernorm_backward_kernel10_regions"));
    assert!(regions + 15 <= fixed, "panic calls: regions {regions}, fixed {fixed}");
    let Some(&(_, cubin)) = ferrocuda_ports3_llmc::KERNELS.cubins.iter().find(|(arch, _)| *arch == 90) else {
        eprintln!("SKIPPED the SASS half of p30_shared_regions_..: no sm_90 cubin (ptxas was not found at build time)");
        return;
    };
    let Some(listing) = sass_listing(cubin, "ports3-sass") else { return };
    let lds128 = |kernel: &str| sass_instructions(sass_function(&listing, kernel)).iter().filter(|(op, _)| *op == "LDS.128").count();
    let (fixed, regions) = (lds128("layernorm_backward_kernel10_fixed"), lds128("layernorm_backward_kernel10_regions"));
    assert!(regions >= fixed + 16, "LDS.128: regions {regions}, fixed {fixed} (warp 0's loop unrolled by 4, twice)");
}

/// Session 16: the last block's `fold_column` as nvcc's, in the SASS. The PTX always had four
/// rows' loads before their folds (above), but with 64-bit row indices and bounds the loop's
/// live registers under `launch_bounds(512, 2)` left ptxas room for two rows: it folded the
/// first two rows before it issued the last two rows' loads (a run of 4 `LDG.E.128`, two L2
/// latencies per four rows, 66 of the 264 rows' latencies more than nvcc's). With one running
/// pointer and a 32-bit row count, all eight 16-byte loads of four 32-byte partials are issued
/// before the first add, as nvcc's unrolled loop (a run of 8 `LDG.E.128`). And the handoff's
/// fences are `fence.acq_rel.gpu` (`MEMBAR.ALL.GPU`), not `__threadfence()`'s `fence.sc.gpu`
/// (`MEMBAR.SC.GPU`), in every variant.
#[test]
fn p30_s16_handoff_fold_issues_four_rows_of_loads_before_folding_in_the_sass() {
    for kernel in ["layernorm_backward_kernel10", "layernorm_backward_kernel10_fixed", "layernorm_backward_kernel10_regions"] {
        let body = llmc(kernel);
        assert!(!body.contains("fence.sc.gpu"), "{kernel}: the handoff's fences are acq_rel");
        assert_eq!(body.matches("fence.acq_rel.gpu").count(), 2, "{kernel}: release before the ticket, acquire in the last block");
    }
    let Some(&(_, cubin)) = ferrocuda_ports3_llmc::KERNELS.cubins.iter().find(|(arch, _)| *arch == 90) else {
        eprintln!("SKIPPED the SASS half of p30_s16_handoff_fold_..: no sm_90 cubin (ptxas was not found at build time)");
        return;
    };
    let Some(listing) = sass_listing(cubin, "ports3-sass") else { return };
    for kernel in ["layernorm_backward_kernel10_fixed", "layernorm_backward_kernel10_regions"] {
        let ops = sass_instructions(sass_function(&listing, kernel));
        // The longest run of strong 16-byte loads with no float add between them.
        let (mut run, mut longest) = (0, 0);
        for (op, _) in &ops {
            if *op == "LDG.E.128.STRONG.GPU" {
                run += 1;
                longest = longest.max(run);
            } else if op.starts_with("FADD") {
                run = 0;
            }
        }
        assert!(longest >= 8, "{kernel}: eight 16-byte loads (four rows) before the first add, found a run of {longest}");
        assert!(!ops.iter().any(|(op, _)| *op == "MEMBAR.SC.GPU"), "{kernel}: no MEMBAR.SC.GPU");
    }
}
