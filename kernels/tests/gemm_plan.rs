//! The GEMM's host-side plan (no GPU): every length is checked against the row-major shape,
//! naming the operand, and the row-major product becomes the column-major `cᵀ = op(b)ᵀ ·
//! op(a)ᵀ` with the right transposes and batch strides.

use ferrocuda_kernels::KernelsError;
use ferrocuda_kernels::gemm::{GemmPath, GemmShape, gemm_path, hopper_gemm_fits, hopper_gemm_ratio, plan};
use half::bf16;

#[test]
fn gemm_plans_map_row_major_onto_column_major_and_name_wrong_operands() {
    let s = GemmShape { m: 6, n: 5, k: 4, batch: 1, transpose_a: false, transpose_b: true };
    let g = plan::<bf16, bf16>(s, 24, 20, 30, Some(5)).unwrap();
    // cᵀ (n x m) = op(b)ᵀ (n x k) · op(a)ᵀ (k x m).
    assert_eq!(g.shape(), (5, 6, 4));
    let [first, second, c] = g.layouts();
    assert!(first.transpose && !second.transpose && !c.transpose);
    assert_eq!((c.rows, c.cols), (5, 6));

    let err = plan::<bf16, bf16>(s, 23, 20, 30, None).unwrap_err();
    assert!(matches!(err, KernelsError::Shape { operand: "a", got: 23, .. }), "{err}");
    assert!(err.to_string().contains("m 6 x k 4"), "{err}");
    let err = plan::<bf16, f32>(s, 24, 20, 31, None).unwrap_err();
    assert!(matches!(err, KernelsError::Shape { operand: "c", .. }), "{err}");
    let err = plan::<bf16, bf16>(s, 24, 20, 30, Some(6)).unwrap_err();
    assert!(matches!(err, KernelsError::Shape { operand: "bias", .. }), "{err}");

    let batched = GemmShape { batch: 3, ..s };
    let g = plan::<f32, f32>(batched, 72, 60, 90, None).unwrap();
    let batch = g.batch().unwrap();
    assert_eq!((batch.count, batch.stride_a, batch.stride_b, batch.stride_c), (3, 20, 24, 30));
    let err = plan::<f32, f32>(batched, 72, 60, 90, Some(5)).unwrap_err();
    assert!(matches!(err, KernelsError::Unsupported { parameter: "batch", .. }), "{err}");
    let err = plan::<f32, f32>(GemmShape { batch: 0, ..s }, 0, 0, 0, None).unwrap_err();
    assert!(matches!(err, KernelsError::Unsupported { parameter: "batch", .. }), "{err}");
}

/// The path table: batches on cuBLAS, single GEMMs on cuBLASLt; the sm_90 kernel's fit
/// (bf16 `x · Wᵀ`, tile multiples, sm_90) and the measured ratios that keep every shape on
/// cuBLAS for now (below 1 at 4096 and 8192).
#[test]
fn gemm_paths_follow_the_shape_and_the_measured_table() {
    let linear = GemmShape { transpose_b: true, ..GemmShape::new(8192, 8192, 8192) };
    assert_eq!(gemm_path(linear), GemmPath::CublasLt);
    assert_eq!(gemm_path(GemmShape { batch: 4, ..linear }), GemmPath::CublasStridedBatched);
    assert!(hopper_gemm_fits(linear, true, false, 90));
    assert!(!hopper_gemm_fits(linear, true, false, 80), "sm_90 only");
    assert!(!hopper_gemm_fits(linear, true, true, 90), "no epilogue");
    assert!(!hopper_gemm_fits(GemmShape::new(8192, 8192, 8192), true, false, 90), "B must be K-major (transpose_b)");
    assert!(!hopper_gemm_fits(GemmShape { n: 8192 + 128, ..linear }, true, false, 90), "N a multiple of 256");
    assert!(hopper_gemm_ratio(linear).is_some_and(|r| r < 1.0));
    assert!(hopper_gemm_ratio(GemmShape { m: 4096, n: 4096, k: 4096, ..linear }).is_some_and(|r| r < 1.0));
}
