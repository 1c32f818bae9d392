//! What the fix round of issue 30's second held-out port changed in the generated code, pinned
//! on the PTX the builds embed (no GPU needed): see bench/ports2/RESULTS.md, "Fix rounds".

#[path = "../../../tests/common/ptx.rs"]
mod ptx_text;
use ptx_text::{entry_body, opcodes};

fn ops(kernel: &str) -> Vec<String> {
    let ptx = ports2_llmc::KERNELS.ptx_for(90).expect("the llm.c ports are built for sm_90");
    opcodes(entry_body(ptx, kernel)).into_iter().map(|op| op.replace(".v2.b64", ".b128").replace(".v4.b32", ".b128")).collect()
}

fn count(ops: &[String], op: &str) -> usize {
    ops.iter().filter(|o| **o == op).count()
}

#[test]
fn fast_math_divisions_and_reciprocals_flush_denormals_as_nvccs_do() {
    for kernel in ["gelu_backward_inplace_kernel", "gelu_backward_inplace_fixed", "adamw_kernel3", "layernorm_forward_kernel3"] {
        let body = ops(kernel);
        for slow in ["div.approx.f32", "rcp.approx.f32"] {
            assert_eq!(count(&body, slow), 0, "{kernel}: {slow} (ptxas wraps it in a denormal check): {body:?}");
        }
    }
    let gelu = ops("gelu_backward_inplace_kernel");
    assert_eq!(count(&gelu, "rcp.approx.ftz.f32"), 8, "1.0f / (cosh * cosh), one per value: {gelu:?}");
    assert_eq!(count(&gelu, "div.approx.ftz.f32"), 8, "coshf's 1 / (4h), one per value: {gelu:?}");
}

#[test]
fn fast_cosh_builds_its_power_of_two_without_a_float_to_int_conversion() {
    let gelu = ops("gelu_backward_inplace_kernel");
    assert_eq!(count(&gelu, "ex2.approx.ftz.f32"), 8, "{gelu:?}");
    assert!(!gelu.iter().any(|o| o.starts_with("cvt.rzi.u32") || o.starts_with("cvt.rni.u32")), "an F2I per coshf: {gelu:?}");
}

#[test]
fn gelu_fixed_rounds_to_bf16_in_pairs() {
    let fixed = ops("gelu_backward_inplace_fixed");
    assert_eq!(count(&fixed, "cvt.rn.bf16x2.f32"), 4, "{fixed:?}");
    assert_eq!(count(&fixed, "cvt.rn.bf16.f32"), 0, "{fixed:?}");
    let first = ops("gelu_backward_inplace_kernel");
    assert_eq!(count(&first, "cvt.rn.bf16.f32"), 8, "the first try: one conversion per value: {first:?}");
}

/// llm.c's layer norm, last loop. The first try's `for` over `zip_inputs([x, weight, bias])`
/// read `weight` and `bias` with plain `ld.global` (RESULTS.md, fix round 2; x is a
/// `cache::load` streaming read, `.cs` by design); since `LaneRowZipN` builds its item's array
/// without a loop (`refs_at`) the same loop reads them `.nc` too, with the nightly toolchain
/// here (the three-input fixture `loop_for_zip_inputs_warp`, whose `x` is a plain read, still
/// does not: see below). The fix round's `for_each` reads them `.nc` as well.
#[test]
fn zip_inputs_for_each_reads_its_inputs_read_only_and_now_the_first_trys_for_loop_too() {
    let first = ops("layernorm_forward_kernel3");
    assert_eq!(count(&first, "ld.global.u16") + count(&first, "ld.global.b16"), 0, "weight and bias: {first:?}");
    assert_eq!(count(&first, "ld.global.nc.u16") + count(&first, "ld.global.nc.b16"), 4, "two in the reductions, weight and bias in the last loop: {first:?}");
    let fixed = ops("layernorm_forward_fixed");
    assert_eq!(count(&fixed, "ld.global.u16") + count(&fixed, "ld.global.b16"), 0, "weight and bias through for_each are .nc: {fixed:?}");
}

#[test]
fn permute_fixed_has_no_panic_path() {
    let fixed = ops("permute_fixed");
    assert!(!fixed.iter().any(|o| o.starts_with("call")), "{fixed:?}");
    assert_eq!(count(&fixed, "ld.global.cs.u16") + count(&fixed, "ld.global.cs.b16"), 3, "{fixed:?}");
    let first = ops("permute_kernel");
    assert!(first.iter().any(|o| o.starts_with("call")), "the first try's three indexings keep the panic report: {first:?}");
}

/// The loads of one kernel of the vLLM crate (no fast math), which also holds the loop
/// fixtures of `src/loops.rs`.
fn loads(kernel: &str) -> (usize, usize) {
    let ptx = ports2::KERNELS.ptx_for(90).expect("the vLLM ports are built for sm_90");
    let body = opcodes(entry_body(ptx, kernel));
    let nc = body.iter().filter(|o| o.starts_with("ld.global.nc")).count();
    // Plain global loads and generic `ld` (no state space: NVPTX could not even tell the
    // address is global) of the fixture's inputs.
    let plain = body
        .iter()
        .filter(|o| (o.starts_with("ld.global.") && !o.starts_with("ld.global.nc")) || o.starts_with("ld.b") || o.starts_with("ld.u") || o.starts_with("ld.f"))
        .count();
    (nc, plain)
}

/// Issue 30 (second port, item 2): the `for` loops the docs teach over row iterators and
/// slices read their inputs with `ld.global.nc`: one input beside the row (`zip_input`,
/// `zip_inputs([x])`, `as_chunks` + `zip_input`), rotary pairs beside `cos`/`sin` rows, and a
/// chunk zipped with an input slice. `zip_inputs([x])` lost it before `refs_at` (the array
/// was built by `map`, a loop LLVM unrolls too late to see the pointers).
#[test]
fn for_loops_over_one_input_and_a_row_read_the_input_read_only() {
    for (kernel, nc, plain) in [
        ("loop_for_zip_input_block", 1, 0),
        ("loop_for_zip_inputs_1", 1, 0),
        ("loop_for_as_chunks", 4, 0),
        ("loop_for_chunk_zip", 8, 0),
        // x and y are the output's own elements (read, then rewritten): plain by design.
        ("loop_for_rotary", 2, 2),
        ("loop_for_each_zip_inputs_3", 3, 0),
        ("loop_for_each_zip_inputs_warp", 3, 0),
    ] {
        assert_eq!(loads(kernel), (nc, plain), "{kernel}: (ld.global.nc, plain loads)");
    }
}

/// Issue 30 (second port, item 2), still open and pinned so that the docs change with it: a
/// `for` loop whose item holds three or more pointers (`zip_inputs` of two or more inputs, or
/// core's `zip` of a `zip_input` and another row's `iter_mut`) reads every input with plain
/// `ld.global` with the nightly rustc 1.97.0 of 2026-05-19 (the builder's toolchain on the
/// project's machines): LLVM keeps the item's pointers as phis merged with the `None` of
/// `next()`. rustc 1.95.0 compiles the `zip_inputs` loops clean (every input `.nc`); another
/// toolchain may do either, and the test says which. `for_each` (the row iterators' own
/// `fold`) keeps `.nc` with both; core's `Zip` has no `fold` of its own, so a zip of two row
/// iterators loses `.nc` with both, `for_each` or not.
#[test]
fn for_loops_over_two_or_more_inputs_lose_ld_global_nc_with_the_nightly_toolchain() {
    let toolchain = ports2::KERNELS.toolchain;
    for (kernel, inputs) in [("loop_for_zip_inputs_2", 2), ("loop_for_zip_inputs_3", 3), ("loop_for_zip_inputs_warp", 3)] {
        let got = loads(kernel);
        if toolchain.contains("1.97.0-nightly") {
            assert_eq!(got, (0, inputs), "{kernel} with {toolchain}: (ld.global.nc, plain loads); if .nc came back, update docs/performance.md's trap table");
        } else if toolchain.starts_with("rustc 1.95.") {
            assert_eq!(got, (inputs, 0), "{kernel} with {toolchain}: (ld.global.nc, plain loads)");
        } else {
            assert!(got == (0, inputs) || got == (inputs, 0), "{kernel} with {toolchain}: (ld.global.nc, plain loads) {got:?}: neither all nor none read-only");
            eprintln!("{kernel} with {toolchain}: {} of {inputs} inputs read with ld.global.nc", got.0);
        }
    }
    for kernel in ["loop_for_zip_input_zip_iter_mut", "loop_for_each_zip_input_zip_iter_mut"] {
        // w, and the other row's element (read-modify-write: plain by design).
        assert_eq!(loads(kernel), (0, 3), "{kernel} with {toolchain}: (ld.global.nc, plain loads)");
    }
}
