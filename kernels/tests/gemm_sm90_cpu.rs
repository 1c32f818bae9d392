//! The sm_90 bf16 GEMM (`ferrocuda-kernels-hopper`'s `gemm_bf16_tn`: TMA, mbarrier ring,
//! `wgmma` m64n256k16, producer and consumer warpgroups) on the CPU executor with the Hopper
//! instructions emulated, against an `f64` reference: every entry of `C`, including the
//! partial tiles at the M, N and K edges (read as zeros by the copy engine, stored with
//! guards), and the shapes it refuses, by name.

use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_kernels::KernelsError;
use ferrocuda_kernels::cpu;
use ferrocuda_kernels_hopper::gemm::{reference_entry, within_bound};
use half::bf16;

/// Deterministic bf16 values in [-1, 1) (xorshift64*).
fn values(seed: u64, len: usize) -> Vec<bf16> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let unit = (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32 / (1u64 << 24) as f32;
            bf16::from_f32(2.0 * unit - 1.0)
        })
        .collect()
}

/// Runs the kernel at `m x n x k` with `grid` blocks and checks every entry against f64.
fn check(m: usize, n: usize, k: usize, grid: u32) {
    let (a, b) = (values(m as u64 * 31 + k as u64, m * k), values(n as u64 * 17 + 5, n * k));
    // NaN everywhere first: an entry the kernel does not write fails.
    let mut c = vec![bf16::NAN; m * n];
    cpu::hopper_gemm_bf16(&CpuExecutor::new(), &a, &b, &mut c, m, n, k, grid).unwrap();
    for i in 0..m {
        for j in 0..n {
            let reference = reference_entry(&a, &b, k, i, j);
            let got = c[i * n + j].to_f32();
            assert!(within_bound(got, reference), "{m}x{n}x{k}: C[{i}][{j}] = {got}, expected {} (f64)", reference.0);
        }
    }
}

/// One whole 128 x 256 tile, two K steps (the ring's first rounds).
#[test]
fn sm90_gemm_one_tile_matches_f64() {
    check(128, 256, 128, 1);
}

/// Partial tiles at every edge: M 200 (a tile and 72 rows), N 300 (a tile and 44 columns), K
/// 72 (a full K step and 8 of the next, the rest zeros); one block walks all four tiles, so
/// the ring's phases carry across tiles.
#[test]
fn sm90_gemm_ragged_edges_match_f64_with_one_persistent_block() {
    check(200, 300, 72, 1);
}

/// Four whole tiles on three persistent blocks (block 0 takes two), three K steps per tile:
/// the 4-stage ring wraps across tiles.
#[test]
fn sm90_gemm_four_tiles_on_three_blocks_match_f64() {
    check(256, 512, 192, 3);
}

/// Fewer rows than a consumer warpgroup's 64 and a K of one 16-wide `wgmma` step: most of the
/// tile is zeros and unstored; two blocks, one with no tile.
#[test]
fn sm90_gemm_tiny_shape_matches_f64() {
    check(5, 6, 16, 2);
}

/// The shapes the kernel refuses, each named: K not a multiple of 8, N odd, an empty side,
/// and operands of the wrong length.
#[test]
fn sm90_gemm_refuses_shapes_it_cannot_take_naming_the_parameter() {
    let e = CpuExecutor::new();
    let x = vec![bf16::ZERO; 1024];
    let mut c = vec![bf16::ZERO; 1024];
    let parameter = |err: KernelsError| match err {
        KernelsError::Unsupported { parameter, .. } | KernelsError::Shape { operand: parameter, .. } => parameter,
        other => panic!("unexpected error {other}"),
    };
    assert_eq!(parameter(cpu::hopper_gemm_bf16(&e, &x[..4 * 12], &x[..4 * 12], &mut c[..16], 4, 4, 12, 1).unwrap_err()), "k");
    assert_eq!(parameter(cpu::hopper_gemm_bf16(&e, &x[..32], &x[..24], &mut c[..12], 4, 3, 8, 1).unwrap_err()), "n");
    assert_eq!(parameter(cpu::hopper_gemm_bf16(&e, &x[..0], &x[..32], &mut c[..0], 0, 4, 8, 1).unwrap_err()), "m");
    assert_eq!(parameter(cpu::hopper_gemm_bf16(&e, &x[..31], &x[..32], &mut c[..16], 4, 4, 8, 1).unwrap_err()), "a");
    assert_eq!(parameter(cpu::hopper_gemm_bf16(&e, &x[..32], &x[..33], &mut c[..16], 4, 4, 8, 1).unwrap_err()), "b");
    assert_eq!(parameter(cpu::hopper_gemm_bf16(&e, &x[..32], &x[..32], &mut c[..15], 4, 4, 8, 1).unwrap_err()), "c");
}
