//! The sm_90 bf16 GEMM (`ferrocuda-kernels-hopper`'s `gemm_bf16_tn`: TMA, mbarrier ring,
//! `wgmma` m64n256k16, producer and consumer warpgroups) on the CPU executor with the Hopper
//! instructions emulated, against an `f64` reference: every entry of `C`, including the
//! partial tiles at the M, N and K edges (read as zeros by the copy engine, stored with
//! guards), and the shapes it refuses, by name.

use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_kernels::KernelsError;
use ferrocuda_kernels::cpu;
use ferrocuda_kernels::gemm::HopperSchedule;
use ferrocuda_kernels_hopper::gemm::{grouped_unit, reference_entry, within_bound};
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
    check_with(HopperSchedule::PLAIN, m, n, k, grid);
}

/// [`check`] with the schedule `schedule`.
fn check_with(schedule: HopperSchedule, m: usize, n: usize, k: usize, grid: u32) {
    let (a, b) = (values(m as u64 * 31 + k as u64, m * k), values(n as u64 * 17 + 5, n * k));
    // NaN everywhere first: an entry the kernel does not write fails.
    let mut c = vec![bf16::NAN; m * n];
    cpu::hopper_gemm_bf16_with(&CpuExecutor::new(), schedule, &a, &b, &mut c, m, n, k, grid).unwrap();
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

/// The grouped tile order is a bijection onto the tiles for every band height (including 0,
/// taken as 1, and heights past the grid), and a band of `units_m` is plain column-major order.
#[test]
fn sm90_gemm_grouped_order_visits_every_tile_once() {
    for (units_m, units_n) in [(1, 1), (3, 5), (7, 2), (16, 8), (5, 16)] {
        for group in [0, 1, 2, 3, 4, 8, 100] {
            let mut seen = vec![false; (units_m * units_n) as usize];
            for unit in 0..units_m * units_n {
                let (um, un) = grouped_unit(unit, units_m, units_n, group);
                assert!(um < units_m && un < units_n, "{units_m}x{units_n} group {group}: unit {unit} -> ({um}, {un})");
                let at = (um * units_n + un) as usize;
                assert!(!seen[at], "{units_m}x{units_n} group {group}: ({um}, {un}) twice");
                seen[at] = true;
            }
        }
        for unit in 0..units_m * units_n {
            assert_eq!(grouped_unit(unit, units_m, units_n, units_m), (unit % units_m, unit / units_m));
        }
    }
    // Bands of 2 on a 3 x 2 grid: (0,0) (1,0) (0,1) (1,1), then the short band (2,0) (2,1).
    let order: Vec<_> = (0..6).map(|u| grouped_unit(u, 3, 2, 2)).collect();
    assert_eq!(order, [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]);
}

/// A grouped order on several persistent blocks: 3 x 3 tiles (ragged M and N edges) in bands
/// of 2, on 2 blocks.
#[test]
fn sm90_gemm_grouped_order_matches_f64() {
    let schedule = HopperSchedule { group: 2, ..HopperSchedule::PLAIN };
    check_with(schedule, 300, 600, 64, 2);
}

/// The cluster kernel (B halves multicast to both blocks of a pair, each stage released by
/// the consumers of both): 4 x 2 tiles with ragged M (the last tile pair crosses M) and N
/// edges, one cluster walking all four tile pairs (the ring wraps across them), then two
/// clusters in bands of 1.
#[test]
fn sm90_gemm_cluster_pairs_match_f64() {
    let schedule = HopperSchedule { cluster: true, ..HopperSchedule::PLAIN };
    check_with(schedule, 500, 300, 136, 2);
    check_with(HopperSchedule { group: 1, ..schedule }, 256, 512, 64, 4);
}

/// A cluster schedule with an odd number of 128-row tiles runs the plain kernel (same result).
#[test]
fn sm90_gemm_cluster_schedule_with_odd_tiles_falls_back_to_the_plain_kernel() {
    check_with(HopperSchedule { cluster: true, group: 2, balanced_grid: true, ..HopperSchedule::PLAIN }, 130, 256, 32, 2);
}

/// The grid: one block per SM and per tile, or (balanced) as few as keep the number of waves
/// (2048 tiles on 132 SMs: 16 waves of 128); an even number of blocks for clusters.
#[test]
fn sm90_gemm_grids_keep_the_waves_and_pair_the_clusters() {
    let plain = HopperSchedule::PLAIN;
    let balanced = HopperSchedule { balanced_grid: true, ..plain };
    let cluster = HopperSchedule { cluster: true, ..balanced };
    assert_eq!(plain.grid(2048, 132), 132);
    assert_eq!(balanced.grid(2048, 132), 128);
    assert_eq!(balanced.grid(512, 132), 128);
    assert_eq!(balanced.grid(128, 132), 128);
    assert_eq!(plain.grid(5, 132), 5);
    assert_eq!(cluster.grid(2048, 132), 128);
    assert_eq!(cluster.grid(128, 132), 128);
    assert_eq!(HopperSchedule { cluster: true, ..plain }.grid(2048, 132), 132);
    assert_eq!(cluster.grid(2, 132), 2);
    for tiles in 1..600 {
        for schedule in [plain, balanced, cluster] {
            let grid = schedule.grid(tiles, 132);
            assert!((1..=132).contains(&grid), "{schedule:?} {tiles}: {grid}");
            let width = if schedule.cluster { 2 } else { 1 };
            assert_eq!(grid % width, 0);
            // Never more waves than one block per SM would take.
            let units = (tiles / width).max(1);
            assert_eq!(units.div_ceil(grid / width), units.div_ceil(132 / width), "{schedule:?} {tiles}: {grid}");
        }
    }
}

/// The copy-engine epilogue (`stmatrix` into the swizzled staging buffer, TMA stores clipped
/// at C's edges), both ring depths, plain and in clusters: ragged M and N (N a multiple of 8,
/// as TMA's row stride needs), persistent blocks walking several tiles (the staging buffer is
/// reused only after the previous tile's stores read it), and an N that is not a multiple of 8
/// (the direct stores run instead).
#[test]
fn s16_sm90_gemm_copy_engine_epilogue_matches_f64() {
    use ferrocuda_kernels::gemm::HopperStore;
    for store in [HopperStore::Tma, HopperStore::Tma3] {
        let schedule = HopperSchedule { store, ..HopperSchedule::PLAIN };
        check_with(schedule, 200, 312, 72, 1);
        check_with(HopperSchedule { group: 2, ..schedule }, 300, 520, 64, 2);
        check_with(HopperSchedule { cluster: true, ..schedule }, 500, 296, 136, 2);
        check_with(schedule, 70, 30, 16, 1);
    }
}
