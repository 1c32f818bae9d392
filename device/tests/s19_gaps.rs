//! Session 19's gap fixes from issue 30's seventh port (bench/ports7/RESULTS.md): shared
//! regions taken without a panic path (`split_at_checked`, `region`) and a row's elements with
//! their columns (`LaneRow::iter_cols_mut`), on the CPU executor (which checks every shared
//! access's bounds and every output write's owner).

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig};
use ferrocuda_device::global::partition::BlockRows;
use ferrocuda_device::global::{DisjointSlice, block_row};
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::shared_vector::dynamic_shared_x4;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_idx_x, strided_range, thread_idx_x};

/// `split_at_checked` is `split_at` where it fits and `None` past the end (no panic); `region`
/// is region `k` of `each` vectors, `None` past the end or where `k each` overflows; each
/// warp's region is its own memory (llm.c's `params + (2 + threadIdx.y) C`).
#[test]
fn p30_ports7_gap4_shared_regions_per_warp_without_panics() {
    let executor = CpuExecutor::new();
    // 2 shared rows of 3 vectors, then 2 warps' regions of 3: 12 vectors.
    let config = LaunchConfig::new(1u32, 64u32).with_shared_bytes(12 * 16);
    executor
        .run("p30_ports7_regions", config, &|| {
            let all = dynamic_shared_x4::<u32>();
            let (head, rest) = all.split_at_checked(6).expect("6 of 12 fit");
            assert_eq!((head.len(), rest.len()), (6, 6));
            assert_eq!(rest.shared_address(), all.shared_address() + 96);
            assert!(all.split_at_checked(13).is_none());
            assert!(all.split_at_checked(12).is_some_and(|(a, b)| a.len() == 12 && b.is_empty()));
            assert!(rest.region(2, 3).is_none(), "region 2 of 3 ends at 9 > 6");
            assert!(rest.region(usize::MAX / 2, 4).is_none(), "k each overflows: no wrap");
            assert!(rest.region(0, 7).is_none());
            assert!(rest.region(6, 0).is_some_and(|r| r.is_empty()));
            let warp = thread_idx_x() as usize / 32;
            let lane = thread_idx_x() as usize % 32;
            let mine = rest.region(warp, 3).expect("two warps' regions fit");
            assert_eq!(mine.shared_address(), rest.shared_address() + (48 * warp) as u32);
            for v in strided_range(lane, mine.len(), 32) {
                mine.set(v, [warp as u32, v as u32, 7, 7]);
            }
            sync_threads();
            for v in strided_range(lane, mine.len(), 32) {
                assert_eq!(mine.get(v), [warp as u32, v as u32, 7, 7], "the other warp did not write here");
            }
            // The scalar slice has the same two methods.
            let scalars = dynamic_shared::<u32>();
            assert!(scalars.split_at_checked(49).is_none());
            let (a, b) = scalars.split_at_checked(5).expect("5 of 48");
            assert_eq!((a.len(), b.len()), (5, 43));
            assert!(scalars.region(4, 12).is_none() && scalars.region(3, 12).is_some_and(|r| r.len() == 12));
        })
        .unwrap();
}

/// `iter_cols_mut` yields each of the thread's elements with its column: `lane, lane +
/// stride, ...` below the row's width, every column of the row exactly once across the block.
#[test]
fn p30_ports7_gap4_lane_row_columns_come_with_their_elements() {
    const ROWS: usize = 3;
    const COLS: u32 = 13;
    let mut out = vec![u32::MAX; ROWS * COLS as usize];
    let (pointer, len) = (out.as_mut_ptr() as usize, out.len());
    let executor = CpuExecutor::new();
    let config = LaunchConfig::new(ROWS as u32, 8u32);
    executor
        .run("p30_ports7_iter_cols", config, &|| {
            // SAFETY: the buffer outlives the launch (joined before `out` is read), the launch
            // is 1-D as `BlockRows` needs, and every thread passes the same width.
            let mut rows: DisjointSlice<u32, BlockRows> =
                unsafe { ferrocuda_device::global::__private::output(&*(pointer as *const core::cell::UnsafeCell<[u32; 0]>), len, COLS) };
            let me = block_row();
            let Some(row) = rows.row_mut(me) else { return };
            let mut expected = thread_idx_x() as usize;
            for (c, o) in row.iter_cols_mut() {
                assert_eq!(c, expected);
                *o = 100 * block_idx_x() + c as u32;
                expected += 8;
            }
            assert!(expected >= COLS as usize && expected < COLS as usize + 8);
        })
        .unwrap();
    for r in 0..ROWS {
        for c in 0..COLS as usize {
            assert_eq!(out[r * COLS as usize + c], 100 * r as u32 + c as u32, "row {r} column {c}");
        }
    }
}
