//! What the ports compile to after issue 30's library fixes, read from their sm_90 PTX (no GPU
//! needed): each assertion pins one cause of a first-try slowdown found on the GPU
//! (bench/results/h200-2026-11-27-s9-ports-run1.txt).

#[path = "../../../tests/common/ptx.rs"]
mod ptx_text;
use ptx_text::{entry_body, opcodes};

/// The kernel's opcodes, a 16-byte access written `.b128` whichever form LLVM chose for it
/// (`.v2.b64` or `.v4.b32`).
fn ops(kernel: &str) -> Vec<String> {
    let ptx = ports::KERNELS.ptx_for(90).expect("the ports are built for sm_90");
    opcodes(entry_body(ptx, kernel)).into_iter().map(|op| op.replace(".v2.b64", ".b128").replace(".v4.b32", ".b128")).collect()
}

fn count(ops: &[String], op: &str) -> usize {
    ops.iter().filter(|o| **o == op).count()
}

/// `vector::store16` inside a row loop (the int8 quantiser's 16 values per step) was four
/// `st.global.b32`: LLVM could not prove the loop's pointer 16-byte aligned to join them. It is
/// now one 128-bit store whatever the pointer's provenance; the loads likewise.
#[test]
fn store16_in_a_row_loop_is_one_16_byte_store() {
    let q = ops("dynamic_scaled_int8_quant");
    assert_eq!(count(&q, "st.global.b128"), 1, "{q:?}");
    assert_eq!(count(&q, "st.global.b32"), 1, "only the scale is a 4-byte store: {q:?}");
    assert_eq!(count(&q, "ld.global.nc.b128"), 4, "two 16-byte loads in each of the two passes: {q:?}");
    let e = ops("encoder_forward");
    assert_eq!(count(&e, "st.global.b128"), 1, "{e:?}");
}

/// `x.to_i8_rn_sat()` is vLLM's `cvt.rni.sat.s8.f32`, one per value (Rust's
/// `x.round_ties_even() as i8` was a clamp, a NaN test and a truncating conversion: 0.78x).
#[test]
fn int8_conversion_is_one_cvt_per_value() {
    let q = ops("dynamic_scaled_int8_quant");
    assert_eq!(count(&q, "cvt.rni.sat.s8.f32"), 16, "{q:?}");
    assert!(!q.iter().any(|o| o.starts_with("cvt.rzi")), "{q:?}");
}

/// The precise `exp` and `erf` are nvcc's `expf`/`erff`: one `ex2.approx` each, no call into
/// libm's software functions (0.57x and 0.31x nvcc on the first try).
#[test]
fn precise_exp_and_erf_are_nvccs_ex2_sequences() {
    let softmax = ops("moe_softmax");
    assert_eq!(count(&softmax, "ex2.approx.ftz.f32"), 2, "one exp in each of the two passes that take it: {softmax:?}");
    assert!(softmax.iter().any(|o| o == "fma.rm.f32") && softmax.iter().any(|o| o == "fma.rn.sat.f32"), "nvcc's range reduction: {softmax:?}");
    let gelu = ops("gelu_and_mul");
    assert_eq!(count(&gelu, "ex2.approx.ftz.f32"), 1, "{gelu:?}");
    for kernel in ["moe_softmax", "gelu_and_mul"] {
        let body = ops(kernel);
        assert!(!body.iter().any(|o| o.starts_with("call")), "{kernel}: no calls (libm's expf/erff were inlined software with branches): {body:?}");
    }
}

/// `LaneRow::zip_inputs` checks every input row once: the loops of `gelu_and_mul` (two halves)
/// and `moe_sum` (two expert rows) have no 64-bit bound test per element, so neither kernel can
/// panic (no `call` to a panic path at all).
#[test]
fn zip_inputs_leaves_no_bound_check_in_the_row_loop() {
    for kernel in ["gelu_and_mul", "moe_sum"] {
        let body = ops(kernel);
        assert!(!body.iter().any(|o| o.starts_with("call")), "{kernel}: {body:?}");
        assert_eq!(body.iter().filter(|o| o.starts_with("ld.global")).count(), 2, "{kernel}: {body:?}");
    }
}

/// A bf16 `+=` and `*` as `__nv_bfloat16`'s operators are one sm_90 instruction each
/// (`HalfFloat::add_rn`/`mul_rn`): `moe_sum`'s two adds are `add.rn.bf16` (SASS
/// `HADD2.BF16`, as nvcc's twin) with no widening `f32` add and `cvt` around them (0.935x
/// nvcc in session 9), and `gelu_and_mul`'s product is one `mul.rn.bf16`.
#[test]
fn bf16_arithmetic_is_the_native_sm90_instruction() {
    let sum = ops("moe_sum");
    assert_eq!(count(&sum, "add.rn.bf16"), 2, "{sum:?}");
    assert!(!sum.iter().any(|o| o.starts_with("cvt.rn.bf16") || o.ends_with(".f32")), "no rounding from f32, no f32 arithmetic: {sum:?}");
    let gelu = ops("gelu_and_mul");
    assert_eq!(count(&gelu, "mul.rn.bf16"), 1, "{gelu:?}");
    assert_eq!(count(&gelu, "cvt.rn.bf16.f32"), 1, "only the GELU's own rounding: {gelu:?}");
}

/// The block reductions' `max` is one `max.f32` a step (CUB's `cuda::maximum` and a compare
/// and select were two SASS instructions), and a block of a power-of-two warp count folds
/// the warps' partials by butterfly: the int8 quantiser (1024 threads) and `moe_softmax`
/// (256) take no compare-and-select for their maxima.
#[test]
fn block_max_is_one_max_instruction_a_step() {
    for kernel in ["dynamic_scaled_int8_quant", "moe_softmax"] {
        let body = ops(kernel);
        assert!(body.iter().any(|o| o == "max.f32"), "{kernel}: {body:?}");
        assert!(!body.iter().any(|o| o.starts_with("setp.gt.f32") || o.starts_with("setp.lt.f32")), "{kernel}: a compare for a maximum: {body:?}");
    }
}

/// `row.zip_input(x.as_chunks::<2>().0)` walks two input packs per output pack with one bound:
/// the int8 quantiser has no bound check left and so no panic path (no `call`; the first try's
/// `x[2 * i]` beside a counter had one).
#[test]
fn int8_quant_row_loop_has_no_panic_path() {
    let q = ops("dynamic_scaled_int8_quant");
    assert!(!q.iter().any(|o| o.starts_with("call") || o == "trap"), "{q:?}");
}
