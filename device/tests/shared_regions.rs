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

/// `carve_checked` (issue 30's eighth port, gap 1): the regions `carve` gives when the memory
/// suffices (same addresses and lengths), `None` instead of `carve`'s panic when it does not or
/// when `N * each` overflows, in every thread of the block, so a kernel returning on it ends
/// the whole block and the launch reports no error.
#[test]
fn p30_s20_ports8_gap1_carve_checked_is_carve_or_none_never_a_panic() {
    let executor = CpuExecutor::new();
    let config = LaunchConfig::new(1u32, 32u32).with_shared_bytes(19 * 16 + 4);
    executor
        .run("p30_carve_checked", config, &|| {
            let all = dynamic_shared_x4::<u32>();
            let Some(([a, b], rest)) = all.carve_checked::<2>(8) else { panic!("19 vectors hold 2 x 8") };
            let ([ca, cb], crest) = all.carve::<2>(8);
            assert_eq!((a.len(), b.len(), rest.len()), (8, 8, 3));
            for (x, y) in [(a, ca), (b, cb), (rest, crest)] {
                assert_eq!((x.shared_address(), x.len()), (y.shared_address(), y.len()));
            }
            // Exactly full: the rest is empty; one vector more: None.
            let Some(([_, _, _], rest)) = all.carve_checked::<3>(6) else { panic!("19 vectors hold 3 x 6") };
            assert_eq!(rest.len(), 1);
            assert!(all.carve_checked::<1>(19).is_some_and(|(_, rest)| rest.is_empty()));
            assert!(all.carve_checked::<1>(20).is_none());
            assert!(all.carve_checked::<2>(10).is_none());
            assert!(all.carve_checked::<4>(usize::MAX / 2).is_none(), "N * each wraps: refused, not wrapped");
            assert!(all.carve_checked::<0>(usize::MAX).is_some_and(|([], rest)| rest.len() == 19));
            let t = thread_idx_x() as usize;
            if t < 8 {
                b.set(t, [t as u32; 4]);
            }
            sync_threads();
            if t < 8 {
                assert_eq!(cb.get(t), [t as u32; 4]);
            }
        })
        .unwrap();
    // A launch with too little memory: every thread returns on `None`; no panic, no error.
    let short = LaunchConfig::new(2u32, 64u32).with_shared_bytes(5 * 16);
    executor
        .run("p30_carve_checked_short", short, &|| {
            let Some(([a, _], _)) = dynamic_shared_x4::<f32>().carve_checked::<2>(3) else { return };
            a.set(0, [1.0; 4]);
            unreachable!("5 vectors do not hold 2 x 3");
        })
        .unwrap();
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

/// A per-thread view of a *static* shared array (issue 30's eighth port, gap 7: vLLM's
/// `__shared__ float cache[1024]` max tree in `segmented_max_reduction`, no dynamic bytes at
/// the launch): the tree over `shared_array![f32; 1024].per_thread::<1>()` gives the block's
/// maximum in slot 0 for blocks of 1024, 256 and 96 threads (an array of 1024 holds one slot
/// for every thread of any block, so it is always `Some`); a smaller array is `None` for a
/// block larger than it, in every thread, and the kernel that returns on it ends cleanly.
#[test]
fn p30_s20_ports8_gap7_per_thread_view_of_a_static_array_reduces_without_dynamic_bytes() {
    use ferrocuda_device::shared_array;
    use std::sync::Mutex;
    let executor = CpuExecutor::new();
    for threads in [1024u32, 256, 96] {
        let seen = Mutex::new(Vec::new());
        // No dynamic shared memory.
        let config = LaunchConfig::new(2u32, threads);
        executor
            .run("p30_static_per_thread", config, &|| {
                let Some(cache) = shared_array![f32; 1024].per_thread::<1>() else { panic!("1024 slots hold any block") };
                assert_eq!(cache.threads(), block_dim_x());
                let me = cache.mine();
                // A value whose maximum is thread (block_dim - 3)'s.
                let t = thread_idx_x();
                cache.set(me, 0, if t == block_dim_x() - 3 { 1.0e6 } else { (t % 7) as f32 });
                // CUDA's `for (s = blockDim.x / 2; s > 0; s >>= 1)` over a power of two; 96
                // threads start at 64 with the top 32 folded in first.
                let mut stride = block_dim_x().next_power_of_two() / 2;
                while stride >= 1 {
                    sync_threads();
                    if let Some(p) = cache.partner(stride) {
                        cache.set(me, 0, cache.get(me, 0).max(cache.get(p, 0)));
                    }
                    stride /= 2;
                }
                sync_threads();
                if t == 0 {
                    seen.lock().unwrap().push(cache.get(cache.first(), 0));
                }
            })
            .unwrap();
        assert_eq!(*seen.lock().unwrap(), vec![1.0e6f32; 2], "{threads} threads");
    }
    // An array of 64 for a block of 128: None everywhere (two planes of 32 for 32 threads fit).
    executor
        .run("p30_static_per_thread_short", LaunchConfig::new(1u32, 128u32), &|| {
            assert!(shared_array![u32; 64].per_thread::<1>().is_none());
        })
        .unwrap();
    executor
        .run("p30_static_per_thread_planes", LaunchConfig::new(1u32, 32u32), &|| {
            let Some(two) = shared_array![u32; 64].per_thread::<2>() else { panic!("2 x 32 fit in 64") };
            two.set(two.mine(), 1, thread_idx_x() + 5);
            sync_threads();
            let other = two.slot((thread_idx_x() + 1) % 32).unwrap();
            assert_eq!(two.get(other, 1), (thread_idx_x() + 1) % 32 + 5);
        })
        .unwrap();
}
