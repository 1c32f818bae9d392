//! Session 24's gaps round (issue 30, bench/results/s24-gaps/), on the CPU executor (race
//! detector on): a block sum with one barrier, CUB's and llm.c's form, is sound only where its
//! slots are not written again before warp 0 has read them (docs/kernel-model.md, "Block
//! reductions: which barriers a reusable scratch needs").

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::block::RuntimeBlockReduce;
use ferrocuda_device::block_scratch;
use ferrocuda_device::cpu::{CpuError, CpuExecutor, LaunchConfig, RaceKind};
use ferrocuda_device::shared_array;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, thread_idx_x};
use ferrocuda_device::warp;

/// The two-level block sum written out (bench/ports11's `s24_row_sum_one_barrier`): warp
/// butterflies, lane 0 stores its warp's sum in slot `w`, a barrier, warp 0 folds the slots;
/// `trailing`: a barrier after warp 0's reads. `passes` sums, each on the same slots (one
/// `shared_array!` site). The total in thread 0.
fn block_sums(passes: u32, trailing: bool) -> u32 {
    let slots = shared_array![u32; 32];
    let tid = thread_idx_x();
    let (lane, warp_id) = (tid % 32, tid / 32);
    let warps = block_dim_x().div_ceil(32);
    let mut total = 0;
    for pass in 0..passes {
        let partial = warp::reduce_sum(tid + pass);
        if lane == 0 {
            slots.set(warp_id as usize, partial);
        }
        sync_threads();
        if warp_id == 0 {
            total += warp::reduce_sum(if lane < warps { slots.get(lane as usize) } else { 0 });
        }
        if trailing {
            sync_threads();
        }
    }
    total
}

/// Item 4: the one-barrier block sum run twice on one site (a loop) races: the second pass's
/// warps store their partials while warp 0 may still read the first pass's. The race detector
/// reports it (a write after warp 0's read of the slot, nothing ordering them); with the
/// trailing barrier (the library's), and in one pass, it runs clean and the sums are right.
#[test]
fn s24_one_barrier_block_sum_in_a_loop_is_reported() {
    for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
        let error = executor.run("s24_one_barrier_twice", LaunchConfig::new(1u32, 128u32), &|| {
            let _ = block_sums(2, false);
        });
        let Err(CpuError::SharedMemoryRace(race)) = &error else { panic!("expected a shared-memory race, got {error:?}") };
        assert!(matches!(race.kind, RaceKind::WriteAfterRead | RaceKind::ReadAfterWrite | RaceKind::WriteAfterWrite), "{race:?}");
        for (passes, trailing) in [(1, false), (1, true), (3, true)] {
            let got = AtomicU32::new(u32::MAX);
            executor
                .run("s24_block_sums", LaunchConfig::new(1u32, 128u32), &|| {
                    let total = block_sums(passes, trailing);
                    if thread_idx_x() == 0 {
                        got.store(total, Ordering::Relaxed);
                    }
                })
                .unwrap_or_else(|e| panic!("{passes} passes, trailing {trailing}: {e}"));
            // Pass p sums tid + p over 128 threads.
            let want: u32 = (0..passes).map(|p| (0..128).map(|t| t + p).sum::<u32>()).sum();
            assert_eq!(got.load(Ordering::Relaxed), want, "{passes} passes, trailing {trailing}");
        }
    }
}

/// The library's `RuntimeBlockReduce::sum` made at one site in a loop (a new reducer each pass,
/// the same slots): ordered by its trailing barrier, the sums right in thread 0.
#[test]
fn s24_runtime_block_reduce_in_a_loop_keeps_its_trailing_barrier() {
    let got = AtomicU32::new(u32::MAX);
    CpuExecutor::new()
        .run("s24_library_sums", LaunchConfig::new(1u32, 1024u32), &|| {
            let mut total = 0;
            for pass in 0..3 {
                let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
                if let Some(sum) = reduce.sum(thread_idx_x() + pass) {
                    total += sum;
                }
            }
            if thread_idx_x() == 0 {
                got.store(total, Ordering::Relaxed);
            }
        })
        .unwrap();
    let want: u32 = (0..3).map(|p| (0..1024).map(|t| t + p).sum::<u32>()).sum();
    assert_eq!(got.load(Ordering::Relaxed), want);
}
