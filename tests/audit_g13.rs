//! Regression tests of the held-out review of 2026-11-28 (`audit/2026-11-28/FINDINGS.md`)
//! that run on the CPU executor (CI).

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig};
use test_kernels::audit_g13::{g13_1_output_in_a_struct, g13_1_stash_witness, stash};

/// G13-1: an output handle kept past its launch. Before the fix, a launch that ran on the
/// calling thread left what its kernel put in a host thread-local on that thread, and a
/// `Box::leak`ed handle handed a `&'static` element to a host thread that wrote after the
/// launch: both wrote the caller's freed buffer. The output types now carry the launch's
/// borrow of the buffer (`DisjointSlice<'a, T, P>`), so neither form compiles
/// (`tests/compile_fail/kernel_model/g13_1_output_outlives_its_launch.rs`; an output written
/// with a `'static` lifetime is refused by `#[kernel]`:
/// `tests/compile_fail/kernel/g13_1_output_with_a_static_lifetime.rs`). What stays allowed,
/// and must keep working: the output in a struct naming its lifetime, and an element lent to
/// a scoped thread that ends inside the body (here on the deterministic executor, one worker,
/// a grid of one block and a cooperative launch: the shapes that once ran on the caller's
/// thread).
#[test]
fn g13_1_an_output_used_within_its_launch_still_works() {
    for (name, executor, config, blocks) in [
        ("deterministic", CpuExecutor::deterministic(), LaunchConfig::new(2u32, 32u32), 2),
        ("one worker", CpuExecutor::new().with_workers(1), LaunchConfig::new(3u32, 32u32), 3),
        ("one block", CpuExecutor::new(), LaunchConfig::new(1u32, 32u32), 1),
        ("cooperative", CpuExecutor::new(), LaunchConfig::new(2u32, 32u32).cooperative(), 2),
    ] {
        let threads = blocks * 32;
        let mut counts = vec![0u32; 2];
        let mut own = vec![0u32; threads as usize];
        g13_1_output_in_a_struct::launch_cpu(&executor, config, &mut counts, &mut own).unwrap();
        assert_eq!(counts, [threads, blocks], "{name}: one add per thread, one per block's scoped thread");
        assert!(own.iter().all(|&o| o == 1), "{name}");
    }
}

/// G13-1, the witness form: a `ThreadIndex` kept in a thread-local by launch 1 (thread 5's
/// grid-stride index 69 of 64 threads) passed the owner check in launch 2 (96 threads, where
/// index 69 is thread 69's) on the same OS thread, because the owner is the 1-D thread index,
/// which every launch repeats: two GPU threads wrote one element (reported as a race with race
/// detection on, silent with it off). With launches on threads of their own nothing carries
/// over, and launch 2 is clean on both settings.
#[test]
fn g13_1_a_witness_kept_in_a_thread_local_does_not_reach_a_later_launch() {
    for detection in [true, false] {
        let executor = CpuExecutor::deterministic().with_race_detection(detection);
        let mut first = vec![0u32; 128];
        g13_1_stash_witness::launch_cpu(&executor, LaunchConfig::new(1u32, 64u32), &mut first, 0).unwrap();
        assert_eq!(first, [1; 128]);
        let mut second = vec![0u32; 128];
        let result = g13_1_stash_witness::launch_cpu(&executor, LaunchConfig::new(1u32, 96u32), &mut second, 1);
        assert!(result.is_ok(), "race detection {detection}: a witness of launch 1 reached launch 2: {result:?}");
        assert_eq!(second, [1; 128], "race detection {detection}");
        // Nothing is left on this thread for a third launch either.
        assert!(stash::WITNESS.with(|w| w.borrow().is_none()));
    }
}
