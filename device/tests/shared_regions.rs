//! `SharedSliceX4` (issue 30, session 15): dynamic shared memory cut into regions of 16-byte
//! vectors, aligned by construction, on the CPU executor (which checks every shared access's
//! bounds and alignment and races between threads).
//!
//! Kernel bodies are closures given to `CpuExecutor::run`, the call every generated
//! `name::launch_cpu` makes with the kernel's body.

use ferrocuda_device::cpu::{CpuError, CpuExecutor, LaunchConfig};
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::shared_vector::dynamic_shared_x4;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, strided_range, thread_idx_x};

fn panic_message(result: Result<(), CpuError>) -> String {
    match result {
        Err(CpuError::KernelPanic(p)) => p.message,
        other => panic!("expected a kernel panic, got {other:?}"),
    }
}

/// `carve::<2>(n)` gives two regions of `n` vectors, back to back from the start of the
/// dynamic shared memory, then the rest; every region starts 16-byte aligned, and a write to
/// one is read back from it (not from the other).
#[test]
fn p30_carve_gives_adjacent_aligned_regions_of_one_length() {
    let executor = CpuExecutor::new();
    // 2 * 8 + 3 vectors (304 bytes) and 4 bytes of tail.
    let config = LaunchConfig::new(1u32, 32u32).with_shared_bytes(19 * 16 + 4);
    executor
        .run("p30_carve", config, &|| {
            let all = dynamic_shared_x4::<u32>();
            assert_eq!(all.len(), 19, "a tail below 16 bytes is not a vector");
            let ([a, b], rest) = all.carve::<2>(8);
            assert_eq!((a.len(), b.len(), rest.len()), (8, 8, 3));
            assert_eq!(b.shared_address(), a.shared_address() + 128);
            assert_eq!(rest.shared_address(), a.shared_address() + 256);
            for r in [a, b, rest] {
                assert_eq!(r.shared_address() % 16, 0);
            }
            let t = thread_idx_x() as usize;
            if t < 8 {
                a.set(t, [t as u32; 4]);
                b.set(t, [100 + t as u32, 1, 2, 3]);
            }
            sync_threads();
            if t < 8 {
                assert_eq!(a.get(t), [t as u32; 4]);
                assert_eq!(b.get(t), [100 + t as u32, 1, 2, 3]);
                // The same memory as elements.
                assert_eq!(b.to_scalars().get(4 * t), 100 + t as u32);
                assert_eq!(dynamic_shared::<u32>().get(32 + 4 * t), 100 + t as u32);
            }
        })
        .unwrap();
}

/// The one check of `carve`: regions that need more than the launch gave panic there, with
/// the advice, before any access.
#[test]
fn p30_carving_more_than_the_launch_gave_panics_at_the_carve() {
    let executor = CpuExecutor::new();
    let config = LaunchConfig::new(1u32, 1u32).with_shared_bytes(5 * 16);
    let message = panic_message(executor.run("p30_carve_short", config, &|| {
        let _ = dynamic_shared_x4::<f32>().carve::<2>(3);
    }));
    assert!(message.contains("carving 2 shared regions of 3 vectors each from 5 vectors") && message.contains("more dynamic shared memory"), "{message}");
    // `each * N` overflowing is the same refusal, not a wrap.
    let message = panic_message(executor.run("p30_carve_wrap", config, &|| {
        let _ = dynamic_shared_x4::<f32>().carve::<4>(usize::MAX / 2);
    }));
    assert!(message.contains("more dynamic shared memory"), "{message}");
}

/// An index at or past the region's length panics like slice indexing (it would be another
/// region's memory: the neighbour's first vector here).
#[test]
fn p30_a_region_index_past_its_length_panics() {
    let executor = CpuExecutor::new();
    let config = LaunchConfig::new(1u32, 1u32).with_shared_bytes(4 * 16);
    for write in [false, true] {
        let message = panic_message(executor.run("p30_region_oob", config, &|| {
            let ([a, _b], _) = dynamic_shared_x4::<f32>().carve::<2>(2);
            if write {
                a.set(2, [0.0; 4]);
            } else {
                let _ = a.get(2);
            }
        }));
        assert!(message.contains("out of bounds: elements 8..12 of 8"), "{message}");
    }
}

/// `SharedSlice::to_x4` tests the start's alignment once: a slice cut at a multiple of four
/// elements becomes vectors; one cut elsewhere is refused there, naming the fix.
#[test]
fn p30_to_x4_checks_the_slices_start_once() {
    let executor = CpuExecutor::new();
    let config = LaunchConfig::new(1u32, 1u32).with_shared_bytes(64);
    executor
        .run("p30_to_x4", config, &|| {
            let (_, tail) = dynamic_shared::<f32>().split_at(4);
            let v = tail.to_x4();
            assert_eq!((v.len(), v.shared_address()), (3, 16));
            v.set(2, [1.0, 2.0, 3.0, 4.0]);
            assert_eq!(tail.get(11), 4.0);
            // A tail of fewer than four elements is not a vector.
            let (_, short) = dynamic_shared::<f32>().split_at(8);
            assert_eq!(short.split_at(6).0.to_x4().len(), 1);
        })
        .unwrap();
    let message = panic_message(executor.run("p30_to_x4_misaligned", config, &|| {
        let _ = dynamic_shared::<f32>().split_at(2).1.to_x4();
    }));
    assert!(message.contains("not 16-byte aligned") && message.contains("split it at a multiple"), "{message}");
    let message = panic_message(executor.run("p30_split_past", config, &|| {
        let _ = dynamic_shared_x4::<f32>().split_at(5);
    }));
    assert!(message.contains("split point 5 beyond the shared region's length 4"), "{message}");
}

/// llm.c's layernorm backward pattern on regions: threads of warps 1.. write their slot
/// `t - 32`, then warp 0 folds its lane's column, `for k in strided_range(lane, tmp.len(),
/// 32)`, at several block sizes (the region is `blockDim.x - 32` vectors). Every slot of
/// another warp is read once, by the lane of its column; the race detector sees the barrier
/// order the writes before the reads.
#[test]
fn p30_a_lane_column_over_a_regions_length_reads_every_other_warps_slot() {
    for block in [64u32, 96, 512] {
        for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
            let config = LaunchConfig::new(1u32, block).with_shared_bytes(2 * (block - 32) * 16);
            executor
                .run("p30_lane_column", config, &|| {
                    let t = thread_idx_x();
                    let ([sums, counts], _) = dynamic_shared_x4::<u32>().carve::<2>((block_dim_x() - 32) as usize);
                    if t >= 32 {
                        sums.set((t - 32) as usize, [t, 2 * t, 3 * t, 4 * t]);
                        counts.set((t - 32) as usize, [1; 4]);
                    }
                    sync_threads();
                    if t < 32 {
                        let (mut s, mut n) = ([t; 4], [0u32; 4]);
                        for k in strided_range(t as usize, sums.len(), 32) {
                            let (v, c) = (sums.get(k), counts.get(k));
                            for i in 0..4 {
                                s[i] += v[i];
                                n[i] += c[i];
                            }
                        }
                        let warps = block_dim_x() / 32;
                        // Thread t's own value plus t + 32 j for j in 1..warps, times 1..4.
                        let want = t + (1..warps).map(|j| t + 32 * j).sum::<u32>();
                        assert_eq!(s, [want, t + 2 * (want - t), t + 3 * (want - t), t + 4 * (want - t)], "lane {t}");
                        assert_eq!(n, [warps - 1; 4], "lane {t}");
                    }
                })
                .unwrap();
        }
    }
}

/// Session 19: the same fold counted in `u32` (`strided_range(lane, sums.len_u32(), 32)`, as
/// llm.c's `int j`): `len_u32` is the region's length exactly, and the loop reads the same slots
/// in the same order as the `usize` one above, at every block size.
#[test]
fn p30_s19_a_u32_lane_column_over_len_u32_reads_what_the_usize_one_reads() {
    for block in [64u32, 96, 512] {
        let config = LaunchConfig::new(1u32, block).with_shared_bytes(2 * (block - 32) * 16);
        CpuExecutor::deterministic()
            .run("p30_s19_lane_column_u32", config, &|| {
                let t = thread_idx_x();
                let ([sums, _], rest) = dynamic_shared_x4::<u32>().carve::<2>((block_dim_x() - 32) as usize);
                assert_eq!(sums.len_u32() as usize, sums.len());
                assert_eq!(rest.len_u32(), 0);
                if t >= 32 {
                    sums.set((t - 32) as usize, [t, 2 * t, 3 * t, 4 * t]);
                }
                sync_threads();
                if t < 32 {
                    let wide: Vec<[u32; 4]> = strided_range(t as usize, sums.len(), 32).map(|k| sums.get(k)).collect();
                    let narrow: Vec<[u32; 4]> = strided_range(t, sums.len_u32(), 32).map(|k| sums.get(k as usize)).collect();
                    assert_eq!(narrow, wide, "lane {t}");
                    assert_eq!(narrow.len() as u32, block_dim_x() / 32 - 1, "lane {t}");
                }
            })
            .unwrap();
    }
}

/// Session 19: `strided_range` over `u32`s is CUDA's `for (int i = start; i < end; i += step)`:
/// the same indices as over `usize`s, a step of 0 counts as 1, an exact `size_hint`, and near
/// the top of the type it stops below `i32::MAX` instead of wrapping (a wrapped index would
/// restart at a small one: another lane's).
#[test]
fn p30_s19_strided_range_over_u32_matches_usize_and_never_wraps() {
    for (start, end, step) in [(0u32, 100u32, 32u32), (5, 100, 32), (31, 32, 32), (40, 32, 32), (3, 17, 1), (0, 7, 0)] {
        let narrow: Vec<usize> = strided_range(start, end, step).map(|i| i as usize).collect();
        let wide: Vec<usize> = strided_range(start as usize, end as usize, step as usize).collect();
        assert_eq!(narrow, wide, "({start}, {end}, {step})");
        let range = strided_range(start, end, step);
        assert_eq!(range.size_hint(), (wide.len(), Some(wide.len())), "({start}, {end}, {step})");
        assert_eq!(strided_range(start, end, step).fold(0usize, |n, _| n + 1), wide.len());
    }
    // Bounds past `i32::MAX` are clamped to it: the last index is below it, and a step as
    // large as the type never wraps back.
    let top: Vec<u32> = strided_range(i32::MAX as u32 - 3, u32::MAX, 2).collect();
    assert_eq!(top, [i32::MAX as u32 - 3, i32::MAX as u32 - 1]);
    let huge: Vec<u32> = strided_range(1, u32::MAX, u32::MAX).collect();
    assert_eq!(huge, [1]);
}
