//! The GEMM's host-side plan (no GPU): every length is checked against the row-major shape,
//! naming the operand, and the row-major product becomes the column-major `cᵀ = op(b)ᵀ ·
//! op(a)ᵀ` with the right transposes and batch strides.

use ferrocuda_kernels::KernelsError;
use ferrocuda_kernels::gemm::{
    GemmPath, GemmShape, HOPPER_MIN_TILES, HopperSchedule, HopperStore, gemm_path, hopper_gemm_fits, hopper_gemm_ratio, hopper_gemm_refusal, hopper_schedule,
    plan,
};
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

/// The path table: batches on cuBLAS, single GEMMs on cuBLASLt unless the sm_90 kernel takes
/// the call (bf16 `x · Wᵀ`, K a multiple of 8, N even, sm_90, no epilogue) and the measured
/// ratio nearest to the shape is at least 1; shapes far from every measurement stay on cuBLAS.
#[test]
fn gemm_paths_follow_the_shape_and_the_measured_table() {
    let linear = GemmShape { transpose_b: true, ..GemmShape::new(8192, 8192, 8192) };
    assert_eq!(gemm_path(GemmShape { batch: 4, ..linear }, false), GemmPath::CublasStridedBatched);
    assert_eq!(gemm_path(linear, false), GemmPath::CublasLt, "a call the kernel does not take");
    assert!(hopper_gemm_fits(linear, true, false, 90));
    assert!(!hopper_gemm_fits(linear, true, false, 80), "sm_90 only");
    assert!(!hopper_gemm_fits(linear, false, false, 90), "bf16 only");
    assert!(!hopper_gemm_fits(linear, true, true, 90), "no epilogue");
    assert!(!hopper_gemm_fits(GemmShape::new(8192, 8192, 8192), true, false, 90), "B must be K-major (transpose_b)");
    assert!(hopper_gemm_fits(GemmShape { m: 8192 + 1, n: 8192 + 2, ..linear }, true, false, 90), "ragged M and N");
    assert_eq!(hopper_gemm_refusal(GemmShape { k: 8192 + 4, ..linear }).map(|r| r.0), Some("k"), "K a multiple of 8");
    assert_eq!(hopper_gemm_refusal(GemmShape { n: 8192 + 1, ..linear }).map(|r| r.0), Some("n"), "N even");
    assert_eq!(hopper_gemm_refusal(GemmShape { m: 0, ..linear }).map(|r| r.0), Some("m"), "no empty side");
    assert_eq!(hopper_gemm_refusal(GemmShape { batch: 2, ..linear }).map(|r| r.0), Some("batch"));
    // Where the table measured a win the kernel runs, elsewhere cuBLASLt.
    for side in [4096, 8192] {
        let shape = GemmShape { m: side, n: side, k: side, ..linear };
        let ratio = hopper_gemm_ratio(shape).expect("a measured side");
        let expected = if ratio >= 1.0 { GemmPath::Hopper } else { GemmPath::CublasLt };
        assert_eq!(gemm_path(shape, true), expected, "side {side}, ratio {ratio}");
    }
    assert_eq!(hopper_gemm_ratio(GemmShape { m: 256, n: 256, k: 256, ..linear }), None, "no measurement within a factor of 2");
    assert_eq!(gemm_path(GemmShape { m: 256, n: 256, k: 256, ..linear }, true), GemmPath::CublasLt);
}

/// Session 16's measured picks (H200, bench/results/s16-gemm/run3): the copy-engine epilogue
/// in bands of 16 tiles at 2048³, 4096³ and 8192³, where it leads cuBLAS in every mode (lowest
/// ratios 1.045, 1.031 and 1.017), so `gemm` runs the sm_90 kernel there; a shape with fewer
/// than `HOPPER_MIN_TILES` output tiles (no split-K in the kernel) stays on cuBLASLt even
/// where the nearest measured side leads.
#[test]
fn s16_measured_table_picks_the_copy_engine_epilogue_where_it_leads_cublas() {
    let linear = |side: usize| GemmShape { transpose_b: true, ..GemmShape::new(side, side, side) };
    let tma_g16 = HopperSchedule { cluster: false, group: 16, balanced_grid: true, store: HopperStore::Tma };
    for side in [2048, 4096, 7000, 8192] {
        assert_eq!(hopper_schedule(linear(side)), tma_g16, "side {side}");
    }
    for (side, ratio) in [(2048, 1.045), (4096, 1.031), (8192, 1.017)] {
        assert_eq!(hopper_gemm_ratio(linear(side)), Some(ratio));
        assert_eq!(gemm_path(linear(side), true), GemmPath::Hopper, "side {side}");
    }
    // A shape the kernel cannot take stays on cuBLASLt whatever the table says.
    assert_eq!(gemm_path(linear(8192), false), GemmPath::CublasLt);
    // 1000 x 768 (8 x 3 = 24 tiles), K 3072: the nearest side (2048) leads, but 24 tiles
    // would leave most SMs idle.
    let narrow = GemmShape { transpose_b: true, ..GemmShape::new(1000, 768, 3072) };
    assert!(hopper_gemm_ratio(narrow).is_some_and(|r| r >= 1.0));
    assert_eq!(gemm_path(narrow, true), GemmPath::CublasLt);
    // 2048 x 2048 is exactly 128 tiles: the sm_90 kernel; 2048 x 1792 (112) is not.
    assert_eq!(HOPPER_MIN_TILES, 128);
    assert_eq!(gemm_path(GemmShape { transpose_b: true, ..GemmShape::new(2048, 1792, 2048) }, true), GemmPath::CublasLt);
}
