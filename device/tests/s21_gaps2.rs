//! Session 21's gaps round after issue 30's ninth held-out port (bench/ports9/RESULTS.md), on
//! the CPU executor (race detector on; the deterministic schedule too):
//! `block::MultiBlockReduce` (V2, vLLM's `poly_norm`: a block reduction of three values in 2
//! barriers) and `PerBlockTile::tile_clipped_mut`'s row count without a per-thread 64-bit
//! division (L2).

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig};
use ferrocuda_device::global::{KernelOutput, PerBlockTile, block_tile};
use ferrocuda_device::multi_block_reduce;
use ferrocuda_device::thread::{block_idx_x, block_size, rank_in_block};

/// Every thread gets `then` of the block's three sums (exact in `u32`), `then` runs once per
/// block, at block sizes of one thread, partial warps, whole warps and 1024, 1-D and 3-D.
#[test]
fn s21_v2_multi_block_reduce_hands_three_sums_to_every_thread_at_any_block_size() {
    for (x, y, z) in [(1u32, 1u32, 1u32), (7, 1, 1), (32, 1, 1), (33, 1, 1), (100, 1, 1), (256, 1, 1), (1000, 1, 1), (1024, 1, 1), (8, 4, 3)] {
        for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
            let calls = AtomicU32::new(0);
            let wrong = AtomicU32::new(0);
            executor
                .run("s21_multi_block_reduce", LaunchConfig::new(2u32, (x, y, z)), &|| {
                    let reduce = multi_block_reduce!(u32; 3);
                    let r = rank_in_block();
                    let got = reduce.sum_broadcast([1, r, r * r + block_idx_x()], |[a, b, c]| {
                        calls.fetch_add(1, Ordering::Relaxed);
                        [a, b + 1, c * 2]
                    });
                    let n = block_size();
                    let squares: u32 = (0..n).map(|i| i * i).sum();
                    let want = [n, n * (n - 1) / 2 + 1, 2 * (squares + n * block_idx_x())];
                    if got != want {
                        wrong.fetch_add(1, Ordering::Relaxed);
                    }
                })
                .unwrap();
            assert_eq!(calls.load(Ordering::Relaxed), 2, "block ({x}, {y}, {z}): `then` runs once per block");
            assert_eq!(wrong.load(Ordering::Relaxed), 0, "block ({x}, {y}, {z}): a thread got another value");
        }
    }
}

/// No trailing barrier, yet one reducer in a loop of rows (as a row kernel's), and two on one
/// site's slots in turn, give every round's values with no race reported; `f32` sums of small
/// integers are exact, so every thread has the same bits.
#[test]
fn s21_v2_multi_block_reduce_in_a_loop_reuses_its_slots_without_a_race() {
    for threads in [64u32, 96, 1024] {
        let wrong = AtomicU32::new(0);
        let body = || {
            let reduce = multi_block_reduce!(f32; 2);
            let n = block_size() as f32;
            for round in 0..4u32 {
                let v = round as f32;
                let [s, t] = reduce.sum_all([v, 1.0]);
                let [m, k] = reduce.reduce_broadcast([rank_in_block() as f32, v], f32::max, |[m, k]| [m + 1.0, k]);
                if s != v * n || t != n || m != n || k != v {
                    wrong.fetch_add(1, Ordering::Relaxed);
                }
            }
        };
        for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
            executor.run("s21_multi_block_reduce_loop", LaunchConfig::new(3u32, threads), &body).unwrap();
        }
        assert_eq!(wrong.load(Ordering::Relaxed), 0, "{threads} threads");
    }
}

/// A thread that returned before the reduction is reported (its warp's stale partials would
/// be folded in: G13R-2), as for the one-value reductions.
#[test]
fn s21_v2_multi_block_reduce_reports_a_returned_warp() {
    let result = CpuExecutor::new().run("s21_multi_block_reduce_returned", LaunchConfig::new(1u32, 64u32), &|| {
        if rank_in_block() >= 32 {
            return;
        }
        let reduce = multi_block_reduce!(u32; 2);
        let _ = reduce.sum_all([1, 2]);
    });
    let error = result.expect_err("a warp returned before the collective");
    assert!(format!("{error}").contains("did not reach this block collective"), "{error}");
}

/// The output handle every thread rebuilds, as `launch_cpu` does (a pointer and a length).
struct Buffer<T>(*mut T, usize);
// SAFETY: the threads reach the buffer only through the output each rebuilds from it, as in a
// generated `launch_cpu`.
unsafe impl<T> Sync for Buffer<T> {}

impl<T> Buffer<T> {
    fn start(&self) -> *mut T {
        self.0
    }
}

/// `tile_clipped_mut`'s rows: whole tiles (no division), a last tile row cut by the buffer's
/// end (the division, for a buffer whose last row is partial too: that row left out), and
/// columns cut by the width. Tiles of 3 rows x 8 columns, blocks of 8 threads (a thread, a
/// column, three rows: the L2 shape), every element written once and nothing past the edge.
#[test]
fn s21_l2_tile_clipped_rows_are_whole_rows_inside_the_buffer() {
    // (cols, len): 7 full rows of 10 (the last tile row 1 of 3), 8 rows and a partial row of
    // 4, exactly 9 rows (3 tile rows, no cut).
    for (cols, len) in [(10u32, 70usize), (10, 84), (10, 90), (5, 5 * 6 + 2)] {
        let mut data = vec![0u32; len];
        let buffer = Buffer(data.as_mut_ptr(), len);
        let rows = len / cols as usize;
        let grid = (cols.div_ceil(8), (len as u32).div_ceil(3 * cols).max(1));
        let body = || {
            // SAFETY: a live buffer of `len` elements borrowed for the launch; blocks of exactly
            // (8, 1, 1) in a grid with z = 1 (the partition's requirement).
            let mut out: PerBlockTile<u32, 3, 8, 8, 1> = unsafe { KernelOutput::from_raw_parts(buffer.start(), buffer.1, cols) };
            let Some(mut tile) = out.tile_clipped_mut(block_tile()) else { return };
            for k in 0..3 {
                let (r, c) = (tile.row(k), tile.col(0));
                if let Some(o) = tile.get_mut(k, 0) {
                    *o += 1 + r * 1000 + c;
                }
            }
        };
        for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
            data.iter_mut().for_each(|v| *v = 0);
            executor.run("s21_tile_clipped", LaunchConfig::new(grid, 8u32), &body).unwrap();
            for (i, &v) in data.iter().enumerate() {
                let (r, c) = (i / cols as usize, i % cols as usize);
                let want = if r < rows { 1 + r as u32 * 1000 + c as u32 } else { 0 };
                assert_eq!(v, want, "cols {cols}, len {len}: element {i} (row {r}, col {c})");
            }
        }
    }
}
