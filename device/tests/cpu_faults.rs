//! Regression tests of the CPU executor's fault reports (audit 2026-11: C1, H1, W3, E7): a
//! stack overflow, a launch that never ends, a shuffle from exited lanes and a launch from
//! inside a kernel each end with a message naming the kernel and what to do, never with a bare
//! SIGSEGV, a hang or a panic at `<unknown>:0:0`.
//!
//! Kernel bodies are closures given to `CpuExecutor::run`, which is what the `launch_cpu` that
//! `#[kernel]` generates calls. Checks that end the process run in a child: the test runs its
//! own binary again with `FERROCUDA_FAULT_CHILD` set, and asserts on the child's exit status
//! and stderr.

use std::hint::black_box;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ferrocuda_device::cpu::{CpuError, CpuExecutor, LaunchConfig, ThreadActivity};
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{index_1d, thread_idx_x};
use ferrocuda_device::warp;

const CHILD: &str = "FERROCUDA_FAULT_CHILD";

/// Runs this test binary's test `name` in a child process with `CHILD=name`; returns its exit
/// success and stderr.
fn run_child(name: &str) -> (bool, String) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, name)
        .output()
        .expect("run the test binary again");
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn in_child(name: &str) -> bool {
    std::env::var(CHILD).is_ok_and(|v| v == name)
}

/// The audit's `big_local`: a 320 KiB local array, which a GPU thread has room for.
fn big_local(out: &[AtomicU32]) {
    let mut a = [0u32; 80_000];
    let i = index_1d();
    let len = a.len();
    a[(i * 7919 + 5) % len] = 5;
    let a = black_box(&mut a);
    let s = a.iter().take(5).fold(0u32, |s, v| s.wrapping_add(*v));
    if let Some(o) = out.get(i) {
        o.store(s, Ordering::Relaxed);
    }
}

#[test]
fn a_big_local_array_fits_the_default_stack() {
    let out: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(u32::MAX)).collect();
    CpuExecutor::new().run("big_local", LaunchConfig::new(2u32, 32u32), &|| big_local(&out)).unwrap();
    assert!(out.iter().all(|o| o.load(Ordering::Relaxed) != u32::MAX), "every thread ran to the end");
}

#[test]
fn a_stack_overflow_names_the_kernel_and_with_stack_size() {
    const NAME: &str = "a_stack_overflow_names_the_kernel_and_with_stack_size";
    if in_child(NAME) {
        let out: Vec<AtomicU32> = (0..32).map(|_| AtomicU32::new(0)).collect();
        // 256 KiB of stack (the old default) for a 320 KiB array.
        let r = CpuExecutor::new().with_stack_size(256 << 10).run("big_local", LaunchConfig::new(1u32, 32u32), &|| big_local(&out));
        panic!("the launch returned {r:?} instead of overflowing");
    }
    let (success, stderr) = run_child(NAME);
    assert!(!success, "the child should abort; stderr:\n{stderr}");
    assert!(stderr.contains("kernel `big_local` overflowed its stack in block (0, 0, 0), thread (0, 0, 0)"), "stderr:\n{stderr}");
    assert!(stderr.contains("256 KiB of stack"), "stderr:\n{stderr}");
    assert!(stderr.contains("with_stack_size"), "stderr:\n{stderr}");
}

#[test]
fn a_stack_overflow_on_a_worker_thread_is_reported_too() {
    const NAME: &str = "a_stack_overflow_on_a_worker_thread_is_reported_too";
    if in_child(NAME) {
        let out: Vec<AtomicU32> = (0..256).map(|_| AtomicU32::new(0)).collect();
        let executor = CpuExecutor::new().with_workers(4).with_stack_size(128 << 10);
        let r = executor.run("big_local_parallel", LaunchConfig::new(8u32, 32u32), &|| big_local(&out));
        panic!("the launch returned {r:?} instead of overflowing");
    }
    let (success, stderr) = run_child(NAME);
    assert!(!success, "the child should abort; stderr:\n{stderr}");
    assert!(stderr.contains("kernel `big_local_parallel` overflowed its stack"), "stderr:\n{stderr}");
    assert!(stderr.contains("128 KiB of stack"), "stderr:\n{stderr}");
}

/// The audit's `spin_until`: waits for a flag nobody sets (read atomically, so it is re-read).
fn spin_until(flag: &AtomicU32, out: &[AtomicU32]) {
    while flag.load(Ordering::Relaxed) == 0 {}
    if let Some(o) = out.get(index_1d()) {
        o.store(1, Ordering::Relaxed);
    }
}

#[test]
fn a_thread_that_never_yields_is_named_by_the_watchdog() {
    const NAME: &str = "a_thread_that_never_yields_is_named_by_the_watchdog";
    if in_child(NAME) {
        let flag = AtomicU32::new(0);
        let out: Vec<AtomicU32> = (0..32).map(|_| AtomicU32::new(0)).collect();
        let executor = CpuExecutor::deterministic().with_watchdog(Duration::from_millis(200));
        let r = executor.run("spin_until", LaunchConfig::new(1u32, 32u32), &|| spin_until(&flag, &out));
        panic!("the launch returned {r:?}");
    }
    let start = Instant::now();
    let (success, stderr) = run_child(NAME);
    assert!(!success, "the child should abort; stderr:\n{stderr}");
    assert!(stderr.contains("kernel `spin_until` ran for"), "stderr:\n{stderr}");
    assert!(stderr.contains("past the watchdog's limit of 200.00ms"), "stderr:\n{stderr}");
    assert!(stderr.contains("block (0, 0, 0) thread (0, 0, 0) (running, never yielded)"), "stderr:\n{stderr}");
    assert!(start.elapsed() < Duration::from_secs(20), "the watchdog took {:?}", start.elapsed());
}

#[test]
fn spinning_threads_on_several_workers_are_all_named_by_the_watchdog() {
    const NAME: &str = "spinning_threads_on_several_workers_are_all_named_by_the_watchdog";
    if in_child(NAME) {
        let flag = AtomicU32::new(0);
        let out: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
        let executor = CpuExecutor::new().with_workers(2).with_watchdog(Duration::from_millis(300));
        let r = executor.run("spin_two", LaunchConfig::new(2u32, 32u32), &|| spin_until(&flag, &out));
        panic!("the launch returned {r:?}");
    }
    let (success, stderr) = run_child(NAME);
    assert!(!success, "the child should abort; stderr:\n{stderr}");
    assert!(stderr.contains("kernel `spin_two` ran for"), "stderr:\n{stderr}");
    // One worker per block, each stuck in its block's first thread.
    assert!(stderr.contains("block (0, 0, 0) thread (0, 0, 0) (running, never yielded)"), "stderr:\n{stderr}");
    assert!(stderr.contains("block (1, 0, 0) thread (0, 0, 0) (running, never yielded)"), "stderr:\n{stderr}");
}

#[test]
fn a_launch_looping_at_barriers_is_stopped_by_the_watchdog() {
    let flag = AtomicU32::new(0);
    let executor = CpuExecutor::new().with_workers(2).with_watchdog(Duration::from_millis(100));
    let body = || {
        while flag.load(Ordering::Relaxed) == 0 {
            sync_threads();
        }
    };
    let start = Instant::now();
    let error = executor.run("barrier_loop", LaunchConfig::new(4u32, 64u32), &body).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(5), "stopped after {:?}", start.elapsed());
    let CpuError::Watchdog(report) = &error else { panic!("expected a watchdog report, got {error}") };
    assert_eq!(report.kernel, "barrier_loop");
    assert_eq!(report.limit, Duration::from_millis(100));
    assert!(report.elapsed >= report.limit);
    // The blocks the two workers had started (two, or one on a loaded machine), every thread
    // of each, waiting or ready.
    assert!(report.stuck.len() == 64 || report.stuck.len() == 2 * 64, "{error}");
    assert!(report.stuck.iter().all(|t| t.block.x < 2), "only blocks 0 and 1 had started: {error}");
    assert!(report.stuck.iter().all(|t| matches!(t.activity, ThreadActivity::BlockBarrier | ThreadActivity::Runnable)), "{error}");
    assert!(error.to_string().contains("past the watchdog's limit"), "{error}");
    // The executor works again afterwards.
    let out: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
    executor.run("after", LaunchConfig::new(2u32, 32u32), &|| out[index_1d()].store(1, Ordering::Relaxed)).unwrap();
    assert!(out.iter().all(|o| o.load(Ordering::Relaxed) == 1));
}

#[test]
fn a_huge_grid_is_stopped_by_the_watchdog_between_blocks() {
    // The audit's 2^31 - 1 blocks, which would run for hours.
    let executor = CpuExecutor::new().with_watchdog(Duration::from_millis(200));
    let ran = AtomicU32::new(0);
    let start = Instant::now();
    let error = executor
        .run("big_grid", LaunchConfig::new(i32::MAX as u32, 1u32), &|| {
            ran.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(10), "stopped after {:?}", start.elapsed());
    let CpuError::Watchdog(report) = &error else { panic!("expected a watchdog report, got {error}") };
    assert_eq!(report.kernel, "big_grid");
    assert!(ran.load(Ordering::Relaxed) > 0 && ran.load(Ordering::Relaxed) < i32::MAX as u32);
}

#[test]
fn a_watchdog_lets_a_launch_that_finishes_return_at_once() {
    let executor = CpuExecutor::new().with_watchdog(Duration::from_secs(30));
    let count = AtomicU32::new(0);
    let start = Instant::now();
    executor
        .run("count", LaunchConfig::new(16u32, 128u32), &|| {
            sync_threads();
            count.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    assert_eq!(count.load(Ordering::Relaxed), 16 * 128);
    assert!(start.elapsed() < Duration::from_secs(10), "the launch waited for the watchdog: {:?}", start.elapsed());
}

#[test]
fn a_shuffle_from_exited_lanes_is_an_error() {
    let out: Vec<AtomicU32> = (0..32).map(|_| AtomicU32::new(u32::MAX)).collect();
    // The audit's `half_warp_shuffle`: lanes 16..32 return, lanes 0..16 read them.
    let body = || {
        let t = thread_idx_x();
        if t < 16 {
            let v = warp::shuffle_xor(t, 16);
            out[t as usize].store(v, Ordering::Relaxed);
        }
    };
    for executor in [CpuExecutor::deterministic(), CpuExecutor::new()] {
        let error = executor.run("half_warp_shuffle", LaunchConfig::new(1u32, 32u32), &body).unwrap_err();
        let CpuError::ExitedLaneShuffle(report) = &error else { panic!("expected an exited-lane shuffle, got {error}") };
        assert_eq!(report.kernel, "half_warp_shuffle");
        assert_eq!(report.warp, 0);
        assert_eq!(report.readers, (0..16).collect::<Vec<_>>());
        assert_eq!(report.exited, (16..32).collect::<Vec<_>>());
        let message = error.to_string();
        assert!(message.contains("kernel `half_warp_shuffle`, block (0, 0, 0), warp 0"), "{message}");
        assert!(out.iter().all(|o| o.load(Ordering::Relaxed) == u32::MAX), "no lane got a value");
    }
}

#[test]
fn a_shuffle_among_live_lanes_is_fine_after_other_lanes_exit() {
    // CUDA allows exited lanes in a shuffle's mask; only reading one is undefined.
    let out: Vec<AtomicU32> = (0..32).map(|_| AtomicU32::new(u32::MAX)).collect();
    let body = || {
        let t = thread_idx_x();
        if t >= 16 {
            return;
        }
        out[t as usize].store(warp::shuffle_xor(t, 1), Ordering::Relaxed);
    };
    CpuExecutor::deterministic().run("live_pairs", LaunchConfig::new(1u32, 32u32), &body).unwrap();
    let got: Vec<u32> = out.iter().take(16).map(|o| o.load(Ordering::Relaxed)).collect();
    assert_eq!(got, (0..16u32).map(|t| t ^ 1).collect::<Vec<_>>());
}

#[test]
fn a_launch_inside_a_kernel_is_a_nested_launch_error() {
    let inner_result = Mutex::new(None);
    let after_barrier = AtomicU32::new(0);
    let executor = CpuExecutor::deterministic();
    let body = || {
        if thread_idx_x() == 0 {
            *inner_result.lock().unwrap() = Some(executor.run("inner", LaunchConfig::new(1u32, 32u32), &|| {}));
        }
        // The outer launch's barrier still works after the refused launch.
        sync_threads();
        after_barrier.fetch_add(1, Ordering::Relaxed);
    };
    executor.run("outer", LaunchConfig::new(1u32, 64u32), &body).unwrap();
    assert_eq!(after_barrier.load(Ordering::Relaxed), 64);
    let inner = inner_result.into_inner().unwrap().expect("thread 0 tried the launch");
    let error = inner.unwrap_err();
    assert_eq!(error, CpuError::NestedLaunch { kernel: "inner".into() });
    assert!(error.to_string().contains("from inside a kernel"), "{error}");
}

#[test]
fn an_unwrapped_nested_launch_is_a_panic_at_the_kernels_line() {
    let executor = CpuExecutor::new();
    let line = line!() + 1;
    let body = || executor.run("inner", LaunchConfig::new(1u32, 1u32), &|| {}).unwrap();
    let error = executor.run("outer", LaunchConfig::new(1u32, 32u32), &body).unwrap_err();
    let CpuError::KernelPanic(panic) = &error else { panic!("expected a kernel panic, got {error}") };
    assert_eq!(panic.kernel, "outer");
    assert!(panic.file.ends_with("cpu_faults.rs"), "{error}");
    assert_eq!(panic.line, line, "{error}");
    assert!(panic.message.contains("NestedLaunch"), "{error}");
}

/// The cost of the 16 MiB default: a fresh executor's first launch of 1024-thread blocks maps
/// 1024 stacks; printed for the record next to the old 256 KiB default (run with
/// `--nocapture`), and bounded loosely (build machines are shared).
#[test]
fn a_block_of_1024_threads_starts_quickly_with_the_default_stacks() {
    for stack in [256 << 10, ferrocuda_device::cpu::DEFAULT_STACK_SIZE] {
        let executor = CpuExecutor::deterministic().with_stack_size(stack);
        let count = AtomicU32::new(0);
        let body = || {
            sync_threads();
            count.fetch_add(1, Ordering::Relaxed);
        };
        let start = Instant::now();
        executor.run("first", LaunchConfig::new(1u32, 1024u32), &body).unwrap();
        let first = start.elapsed();
        let start = Instant::now();
        executor.run("reused", LaunchConfig::new(8u32, 1024u32), &body).unwrap();
        let reused = start.elapsed() / 8;
        println!("1024-thread block, {} KiB stacks: first block {first:?} (maps the stacks), then {reused:?} per block", stack >> 10);
        assert_eq!(count.load(Ordering::Relaxed), 9 * 1024);
        assert!(first < Duration::from_secs(2), "{first:?}");
    }
}

/// D5 (audit 2026-11-27d): in a block of 48 threads, lanes 32..48 form a partial last warp of
/// 16 lanes. A shuffle reading lanes 16..32 of that warp reads lanes that do not exist: an H200
/// gave 0, the executor used to give the lane's own value, silently. It is reported now, with
/// the lanes named; shuffles within the 16 lanes (and from full warps) still run.
#[test]
fn d5_a_shuffle_from_lanes_past_the_blocks_end_is_an_error() {
    use ferrocuda_device::cpu::MissingLaneShuffle;
    let out: Vec<AtomicU32> = (0..48).map(|_| AtomicU32::new(u32::MAX)).collect();
    for (mode, readers, missing) in [(0u32, (0..16).collect::<Vec<u32>>(), (16..32).collect::<Vec<u32>>()), (1, (8..16).collect(), (16..24).collect())] {
        let body = || {
            let t = thread_idx_x();
            let v = if mode == 0 { warp::shuffle_xor(t, 16) } else { warp::shuffle_down(t, 8) };
            out[t as usize].store(v, Ordering::Relaxed);
        };
        for executor in [CpuExecutor::deterministic(), CpuExecutor::new()] {
            let error = executor.run("partial_warp", LaunchConfig::new(1u32, 48u32), &body).unwrap_err();
            let CpuError::MissingLaneShuffle(report) = &error else { panic!("mode {mode}: expected a missing-lane shuffle, got {error}") };
            assert_eq!(
                report,
                &MissingLaneShuffle {
                    kernel: "partial_warp".into(),
                    block: report.block,
                    warp: 1,
                    lanes: 16,
                    readers: readers.clone(),
                    missing: missing.clone()
                }
            );
            let message = error.to_string();
            assert!(message.contains("do not exist") && message.contains("lanes 0..16") && message.contains("multiple of 32"), "{message}");
            assert!((32..48).all(|t| out[t].load(Ordering::Relaxed) == u32::MAX), "mode {mode}: no lane of the partial warp got a value");
        }
    }
    // Within the partial warp's 16 lanes (and across the full warp 0), shuffles are defined.
    let body = || {
        let t = thread_idx_x();
        let v = warp::shuffle_xor(t, 8);
        out[t as usize].store(v, Ordering::Relaxed);
    };
    CpuExecutor::new().run("partial_warp_ok", LaunchConfig::new(1u32, 48u32), &body).unwrap();
    assert!((0..48).all(|t| out[t as usize].load(Ordering::Relaxed) == t ^ 8));
}

/// D5: the device library's own partial-warp reduction (`RuntimeBlockReduce`, any block size)
/// read lanes past the block's end and discarded the values (defined on a GPU only by luck:
/// the value is undefined there); it clamps its shuffles now, so the executor, which reports
/// such reads, runs it in blocks of 1 to 100 threads with the right sums.
#[test]
fn d5_a_runtime_block_reduce_reads_no_lane_past_the_blocks_end() {
    use ferrocuda_device::block::RuntimeBlockReduce;
    use ferrocuda_device::block_scratch;
    for threads in [1u32, 7, 33, 48, 65, 100] {
        let total = AtomicU32::new(0);
        let body = || {
            let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
            if let Some(sum) = reduce.sum(thread_idx_x() + 1) {
                total.store(sum, Ordering::Relaxed);
            }
        };
        CpuExecutor::new().run("runtime_block_reduce", LaunchConfig::new(1u32, threads), &body).unwrap_or_else(|e| panic!("{threads} threads: {e}"));
        assert_eq!(total.load(Ordering::Relaxed), threads * (threads + 1) / 2, "{threads} threads");
    }
}
