//! The CPU executor at the seams the held-out review of 2026-11-27c found (F2, F3, F7), with
//! kernel bodies written as closures (no kernel crate): each test is named for its finding and
//! has a control that follows the rule.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ferrocuda_device::atomic::Atomic;
use ferrocuda_device::cpu::{CpuError, CpuExecutor, LaunchConfig, RaceKind};
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_idx_x, grid_dim_x, thread_idx_x};
use ferrocuda_types::LaunchProblem;

/// F3 (audit 2026-11-27c, `r10_store_vs_atomic`): thread 1 stores to a shared word while the
/// other threads `fetch_add` it, between the same two barriers. A plain store and an atomic of
/// one word that nothing orders are a data race in PTX's memory model (the GPU gave 131, the
/// executor 130, and neither said anything); the executor now reports it, naming both kinds.
#[test]
fn f3_a_plain_shared_store_racing_a_shared_atomic_is_a_data_race() {
    let body = || {
        let s = dynamic_shared::<u32>();
        let tid = thread_idx_x();
        if tid == 0 {
            s.set(0, 0);
        }
        sync_threads();
        if tid == 1 {
            s.set(0, 100);
        } else {
            s.fetch_add(0, 1);
        }
        sync_threads();
        let _ = s.get(0);
    };
    let error = CpuExecutor::deterministic().run("r10_store_vs_atomic", LaunchConfig::new(1u32, 32u32).with_shared_bytes(4), &body).unwrap_err();
    let CpuError::SharedMemoryRace(race) = &error else { panic!("expected a shared-memory race, got {error:?}") };
    // Thread 0's atomic runs first (rank order), then thread 1's store.
    assert_eq!((race.kind, race.first.x, race.second.x), (RaceKind::WriteAfterAtomic, 0, 1), "{error}");
    let message = error.to_string();
    assert!(message.contains("updated it atomically and then thread (1, 0, 0) wrote it") && message.contains("both atomic"), "{message}");

    // The other orders: a plain read racing an atomic, and an atomic after a plain store.
    let read_after = || {
        let s = dynamic_shared::<u32>();
        let tid = thread_idx_x();
        if tid == 0 {
            s.set(0, 0);
        }
        sync_threads();
        if tid == 0 {
            s.fetch_add(0, 1);
        } else if tid == 1 {
            let _ = s.get(0);
        }
    };
    let error = CpuExecutor::deterministic().run("read_vs_atomic", LaunchConfig::new(1u32, 32u32).with_shared_bytes(4), &read_after).unwrap_err();
    assert!(matches!(&error, CpuError::SharedMemoryRace(r) if r.kind == RaceKind::ReadAfterAtomic), "{error:?}");
    let atomic_after = || {
        let s = dynamic_shared::<u32>();
        let tid = thread_idx_x();
        if tid == 0 {
            s.set(0, 0);
        }
        if tid == 1 {
            s.fetch_add(0, 1);
        }
    };
    let error = CpuExecutor::deterministic().run("atomic_vs_store", LaunchConfig::new(1u32, 32u32).with_shared_bytes(4), &atomic_after).unwrap_err();
    assert!(matches!(&error, CpuError::SharedMemoryRace(r) if r.kind == RaceKind::AtomicAfterWrite), "{error:?}");
}

/// F3's controls: atomics of many threads never race with each other, and a store, a barrier,
/// atomics, a barrier and plain reads (a block-local histogram) are ordered.
#[test]
fn f3_atomics_among_themselves_and_barrier_ordered_plain_accesses_are_no_race() {
    let histogram = || {
        let s = dynamic_shared::<u32>();
        let tid = thread_idx_x();
        if tid < 4 {
            s.set(tid as usize, 0);
        }
        sync_threads();
        s.fetch_add((tid % 4) as usize, 1);
        s.fetch_add((tid % 4) as usize, 1);
        sync_threads();
        assert_eq!(s.get((tid % 4) as usize), 2 * 64 / 4);
        sync_threads();
        // A plain store after the reads and the atomics, ordered by the barrier.
        if tid == 5 {
            s.set(0, 7);
        }
    };
    for workers in [1, 2] {
        CpuExecutor::new().with_workers(workers).run("histogram", LaunchConfig::new(3u32, 64u32).with_shared_bytes(16), &histogram).unwrap();
    }
}

/// F7 (audit 2026-11-27c, `r22_static_plus_dynamic`): 48000 bytes of `shared_array!` plus
/// 190 KiB of dynamic shared memory (238 KiB, over the 227 KiB a block may have) ran on the
/// executor (`Ok: 3`), while every GPU refuses it. Now the launch fails with the GPU launch
/// path's error, naming both parts and the limit; what fits still runs.
#[test]
fn f7_static_plus_dynamic_shared_memory_over_the_block_limit_is_refused() {
    let body = || {
        let big = ferrocuda_device::shared_array![u32; 12000];
        let s = dynamic_shared::<u32>();
        let tid = thread_idx_x() as usize;
        big.set(tid, 1);
        s.set(tid, 2);
    };
    let config = LaunchConfig::new(1u32, 32u32).with_shared_bytes(190 * 1024);
    let error = CpuExecutor::deterministic().run("r22_static_plus_dynamic", config, &body).unwrap_err();
    let CpuError::InvalidConfig { problem, .. } = &error else { panic!("expected the launch's error, got {error:?}") };
    assert_eq!(*problem, LaunchProblem::SharedMemoryTotalTooLarge { static_bytes: 48000, dynamic_bytes: 190 * 1024, max: 227 * 1024 });
    let message = error.to_string();
    assert!(message.contains("48000 bytes of static shared memory") && message.contains("max shared memory per block (232448 bytes"), "{message}");
    // The same kernel with the dynamic shared memory that fits beside its arrays runs.
    let fits = LaunchConfig::new(1u32, 32u32).with_shared_bytes(227 * 1024 - 48000);
    CpuExecutor::deterministic().run("r22_static_plus_dynamic", fits, &body).unwrap();
}

/// `N` zeroed host atomics, for the kernels' flags and counters.
fn zeroed<const N: usize>() -> [AtomicU32; N] {
    std::array::from_fn(|_| AtomicU32::new(0))
}

/// Their values.
fn values(cells: &[AtomicU32]) -> Vec<u32> {
    cells.iter().map(|c| c.load(Ordering::Relaxed)).collect()
}

/// Their address, for the kernels' closures.
fn address(cells: &[AtomicU32]) -> usize {
    cells.as_ptr() as usize
}

/// Element `i` of the host array at `base` as a device atomic.
fn at(base: usize, i: usize) -> &'static Atomic<u32> {
    // SAFETY: `base` is a live `[AtomicU32]` of the test (outliving the launch that uses it)
    // with more than `i` elements, accessed only atomically.
    unsafe { Atomic::from_ptr((base as *mut u32).add(i)) }
}

/// `r4_cross_block_flag`: block 0's thread 0 spins until block 1 sets `flag[0]`, then sets
/// `flag[1] = 7`.
fn r4_body(base: usize) -> impl Fn() + Sync {
    move || {
        if thread_idx_x() != 0 {
            return;
        }
        if block_idx_x() == 0 {
            while at(base, 0).load() == 0 {}
            at(base, 1).store(7);
        } else {
            at(base, 0).store(1);
        }
    }
}

/// `r20_grid_barrier`: each block's thread 0 arrives at a counter and spins until every block
/// has, then the block syncs (a hand-written grid barrier).
fn r20_body(base: usize) -> impl Fn() + Sync {
    move || {
        if thread_idx_x() == 0 {
            at(base, 0).fetch_add(1);
            while at(base, 0).load() < grid_dim_x() {}
        }
        sync_threads();
    }
}

/// F2 (audit 2026-11-27c, r4): in an ordinary launch a block that spins on a flag another
/// block sets relies on the two running together, which CUDA does not promise (only a
/// cooperative launch does). With one worker the executor used to run until its watchdog and
/// call it a GPU hang (the GPU gave `[1, 7]`); it now ends the launch with a
/// `CrossBlockWait` that names the rule and the cooperative launch, not a hang.
#[test]
fn f2_a_block_spinning_on_another_block_in_an_ordinary_launch_is_a_cross_block_wait_not_a_hang() {
    let flag = zeroed::<2>();
    let body = r4_body(address(&flag));
    let executor = CpuExecutor::deterministic().with_watchdog(Duration::from_secs(20));
    let error = executor.run("r4_cross_block_flag", LaunchConfig::new(2u32, 32u32), &body).unwrap_err();
    let CpuError::CrossBlockWait(wait) = &error else { panic!("expected a cross-block wait, got {error}") };
    assert_eq!((wait.block.x, wait.threads.len(), wait.threads[0].x, wait.cooperative), (0, 1, 0, false), "{error}");
    assert_eq!(wait.spun, vec![(address(&flag), 0)], "{error}");
    let message = error.to_string();
    assert!(message.contains("threads in other thread-block clusters are not guaranteed") && message.contains("cooperative()"), "{message}");
    assert!(!message.contains("watchdog"), "{message}");
}

/// F2 (r4b, r20b): a cooperative launch has every block resident, so the same hand-off and a
/// hand-written grid barrier complete, with one worker or several (they used to be reported as
/// GPU hangs, the cooperative flag ignored).
#[test]
fn f2_a_cooperative_launch_runs_every_block_together_so_hand_offs_and_grid_barriers_complete() {
    for workers in [1, 2, 4] {
        let executor = CpuExecutor::new().with_workers(workers).with_watchdog(Duration::from_secs(20));
        let flag = zeroed::<2>();
        executor.run("r4_cross_block_flag", LaunchConfig::new(2u32, 32u32).cooperative(), &r4_body(address(&flag))).unwrap();
        assert_eq!(values(&flag), [1, 7]);
        let counter = zeroed::<1>();
        executor.run("r20_grid_barrier", LaunchConfig::new(4u32, 32u32).cooperative(), &r20_body(address(&counter))).unwrap();
        assert_eq!(values(&counter), [4]);
    }
}

/// F2 (r20): the grid barrier in an ordinary launch is a `CrossBlockWait` (the GPU promises
/// no co-residency for it), never a "GPU hang".
#[test]
fn f2_a_grid_barrier_in_an_ordinary_launch_is_a_cross_block_wait() {
    let counter = zeroed::<1>();
    let executor = CpuExecutor::deterministic().with_watchdog(Duration::from_secs(20));
    let error = executor.run("r20_grid_barrier", LaunchConfig::new(4u32, 32u32), &r20_body(address(&counter))).unwrap_err();
    assert!(matches!(&error, CpuError::CrossBlockWait(w) if !w.cooperative && w.block.x == 0), "{error}");
}

/// F2: in a cooperative launch (every block running), a spin on a flag nobody sets is a hang
/// on a GPU too, and is reported as one, without a watchdog; a grid larger than the executor
/// keeps resident is refused by name, as a GPU refuses one larger than it keeps resident.
#[test]
fn f2_a_cooperative_spin_nobody_ends_is_reported_and_an_oversized_cooperative_grid_is_refused() {
    let flag = zeroed::<1>();
    let base = address(&flag);
    let body = move || {
        if thread_idx_x() == 0 {
            while at(base, 0).load() == 0 {}
        }
    };
    let error = CpuExecutor::new().run("nobody_sets_it", LaunchConfig::new(3u32, 32u32).cooperative(), &body).unwrap_err();
    let CpuError::CrossBlockWait(wait) = &error else { panic!("expected a cross-block wait, got {error}") };
    assert!(wait.cooperative, "{error}");
    assert!(error.to_string().contains("hangs a GPU too"), "{error}");
    let error = CpuExecutor::new().run("too_many", LaunchConfig::new(65u32, 32u32).cooperative(), &|| ()).unwrap_err();
    assert!(matches!(&error, CpuError::InvalidConfig { problem: LaunchProblem::CooperativeGridTooLarge { blocks: 65, max: 64, .. }, .. }), "{error}");
    CpuExecutor::new().run("fits", LaunchConfig::new(64u32, 32u32).cooperative(), &|| ()).unwrap();
}

/// F2's control: a spin on a flag a thread of the same block sets still completes in an
/// ordinary launch (P8: the block's threads take turns), with no report.
#[test]
fn f2_a_spin_on_a_flag_of_the_same_block_completes() {
    let flag = zeroed::<4>();
    let base = address(&flag);
    let body = move || {
        let b = block_idx_x() as usize;
        match thread_idx_x() {
            0 => while at(base, b).load() == 0 {},
            63 => {
                // A warp of its own, after some work of its own.
                for _ in 0..1000 {
                    core::hint::black_box(0);
                }
                at(base, b).store(1);
            }
            _ => {}
        }
    };
    CpuExecutor::deterministic().run("same_block", LaunchConfig::new(4u32, 64u32), &body).unwrap();
    assert_eq!(values(&flag), [1, 1, 1, 1]);
}
