//! Regression tests of the held-out review of 2026-11-28 (`audit/2026-11-28/FINDINGS.md`)
//! that run on the CPU executor (CI).

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig};
use test_kernels::audit_g13::{g13_1_stash_output, g13_1_stash_witness, stash};

/// G13-1: a launch that runs on the calling thread (the deterministic executor, one worker, a
/// grid of one block, a cooperative launch) used to leave what its kernel put in a host
/// thread-local on that thread: an output handle (`AtomicSlice`, `DisjointSlice`, no lifetime)
/// then outlived the launch and the buffer it points into, and safe host code wrote through
/// it after the buffer was freed. Every launch now runs its blocks on threads of its own that
/// end (thread-locals and all) before the launch returns.
#[test]
fn g13_1_an_output_handle_kept_in_a_thread_local_does_not_outlive_its_launch() {
    for (name, executor, config) in [
        ("deterministic", CpuExecutor::deterministic(), LaunchConfig::new(1u32, 32u32)),
        ("one block", CpuExecutor::new(), LaunchConfig::new(1u32, 32u32)),
        ("cooperative", CpuExecutor::new(), LaunchConfig::new(2u32, 32u32).cooperative()),
    ] {
        let mut buffer = vec![0u32; 64];
        g13_1_stash_output::launch_cpu(&executor, config, &mut buffer).unwrap();
        assert_eq!(buffer[0], 1, "{name}: the kernel ran");
        let freed = buffer.as_ptr() as usize;
        drop(buffer);
        let victim = vec![7u32; 64];
        if let Some(stale) = stash::take_output() {
            // The use after free itself (reached only while the finding is open).
            stale.store(0, 0xdead);
            panic!(
                "{name}: the kernel's output handle outlived its launch on the calling thread; a store through it after the \
                 buffer was freed {} (victim[0] = {:#x}, freed {freed:#x}, victim {:#x})",
                if victim[0] == 0xdead { "wrote a newer allocation" } else { "wrote freed memory" },
                victim[0],
                victim.as_ptr() as usize
            );
        }
        assert_eq!(victim, [7; 64], "{name}");
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

/// G13-1, the lifetime form: output handles carry no lifetime, so a kernel body run by the
/// CPU executor can leak one (`Box::leak`) and hand a `&'static` element to a host thread that
/// writes after the launch returned, into memory the caller freed and reallocated. Open
/// (needs a lifetime on the output types: audit/2026-11-28/FINDINGS.md); `--ignored` runs the
/// repro, which fails while the finding is open.
#[test]
#[ignore = "G13-1 is open: output handles need a lifetime (audit/2026-11-28/FINDINGS.md); run with --ignored to see the use after free"]
fn g13_1_a_leaked_output_handle_cannot_write_after_its_launch() {
    use test_kernels::audit_g13::g13_1_leak_output;
    let executor = CpuExecutor::new();
    let mut buffer = vec![0u32; 64];
    g13_1_leak_output::launch_cpu(&executor, LaunchConfig::new(4u32, 32u32), &mut buffer, 0xdead, 200).unwrap();
    assert_eq!(buffer[0], 1, "the kernel ran");
    let freed = buffer.as_ptr() as usize;
    drop(buffer);
    let victim = vec![7u32; 64];
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert_eq!(
        victim[0],
        7,
        "a store through the kernel's leaked output handle landed after the launch, in memory the caller had freed (freed {freed:#x}, victim {:#x})",
        victim.as_ptr() as usize
    );
}
