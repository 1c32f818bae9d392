//! The CPU executor agrees with the GPU, and rules only a GPU enforced are refused (issue 29,
//! classes 5 and 6; audit 2026-11-27 findings P4, P7, P8, P9, P11; P10 is in
//! tests/gpu_rules_build.rs). Kernels: tests/kernels/src/gpu_rules.rs; the GPU side:
//! tests/gpu_rules.rs. Each test is named for the finding it guards.

use std::time::Duration;

#[path = "common/ptx.rs"]
mod ptx_text;

use ferrocuda::LaunchProblem;
use ferrocuda_device::cpu::{CpuError, CpuExecutor, RaceKind, ThreadActivity};
use test_kernels::gpu_rules;

fn executors() -> [CpuExecutor; 2] {
    [CpuExecutor::deterministic(), CpuExecutor::new().with_workers(2)]
}

/// P4: one warp at `sync_threads()`, the other at `sync_threads_count()` (or `_and` beside
/// `_or`) faulted an H100 (`CUDA_ERROR_ILLEGAL_INSTRUCTION`, "unpredictable" in PTX). Each
/// kind now has its own hardware barrier, so such a block waits for ever on a GPU, and the CPU
/// executor reports the deadlock naming both groups; the uniform uses give CUDA's results.
#[test]
fn p4_mixed_block_barrier_kinds_are_a_reported_deadlock_and_uniform_ones_reduce() {
    for (mode, first, second) in [(0u32, "sync_threads", "sync_threads_count"), (1, "sync_threads_and", "sync_threads_or")] {
        let mut out = vec![0u32; 128];
        let error = gpu_rules::p4_mixed_barriers::launch_cpu(&CpuExecutor::new(), (1u32, 64u32), mode, &mut out).unwrap_err();
        let CpuError::MixedBarriers(mixed) = &error else { panic!("mode {mode}: expected MixedBarriers, got {error:?}") };
        assert_eq!((mixed.first_kind, mixed.second_kind), (first, second));
        assert_eq!(mixed.first.iter().map(|t| t.x).collect::<Vec<_>>(), (0..32).collect::<Vec<_>>());
        assert_eq!(mixed.second.iter().map(|t| t.x).collect::<Vec<_>>(), (32..64).collect::<Vec<_>>());
        let text = error.to_string();
        assert!(text.contains("its own hardware barrier") && text.contains("a GPU hangs here"), "{text}");
        assert_eq!(out[64..].iter().sum::<u32>(), 0, "no thread passed a barrier");
    }
    let mut out = vec![0u32; 128];
    gpu_rules::p4_mixed_barriers::launch_cpu(&CpuExecutor::new(), (1u32, 64u32), 2, &mut out).unwrap();
    assert_eq!(out[..64], [10; 64]);
    assert_eq!(out[64..], [1; 64]);
    gpu_rules::p4_mixed_barriers::launch_cpu(&CpuExecutor::new(), (1u32, 64u32), 3, &mut out).unwrap();
    assert_eq!(out[..64], [11; 64], "and(true) = 1, or(one true) = 1");
}

/// P7: the named-barrier producer/consumer idiom (the ordering named_barrier.rs documents, and
/// FlashAttention-3's) was reported as a `SharedMemoryRace`; the GPU gives the right values and
/// compute-sanitizer's racecheck finds no hazard. A completed phase now orders each arriving
/// thread's earlier accesses before the waiting threads' later ones; a read before the wait,
/// or a write after the arrival, is still a race.
#[test]
fn p7_named_barrier_producer_consumer_is_ordered_and_its_misuses_are_races() {
    for executor in executors() {
        let mut out = vec![0u32; 64];
        gpu_rules::p7_named_producer_consumer::launch_cpu(&executor, (64u32, 64u32), 0, &mut out).unwrap();
        assert_eq!(out, (0..64).map(|b| 42 + b).collect::<Vec<u32>>());

        let mut out = vec![0u32; 64];
        gpu_rules::p7_ping_pong::launch_cpu(&executor, (32u32, 64u32), &mut out).unwrap();
        let expected: Vec<u32> = (0..32).flat_map(|b| [100 + b, 200 + b]).collect();
        assert_eq!(out, expected);
    }
    for mode in [1u32, 2] {
        let mut out = vec![0u32; 64];
        let error = gpu_rules::p7_named_producer_consumer::launch_cpu(&CpuExecutor::deterministic(), (2u32, 64u32), mode, &mut out).unwrap_err();
        let CpuError::SharedMemoryRace(race) = &error else { panic!("mode {mode}: expected a SharedMemoryRace, got {error:?}") };
        let mut pair = [race.first.x, race.second.x];
        pair.sort();
        assert_eq!(pair, [0, 32], "mode {mode}: {error}");
        let expected = if mode == 1 { RaceKind::WriteAfterRead } else { RaceKind::ReadAfterWrite };
        assert_eq!(race.kind, expected, "mode {mode}: {error}");
    }
}

/// P8: a thread spinning on an `AtomicSlice` flag that another warp sets completes on a GPU;
/// the CPU executor hung (it switched threads only at barriers and warp operations), and its
/// watchdog then claimed such a thread "hangs a GPU too". A run of atomic accesses now yields
/// to the block's other threads.
#[test]
fn p8_spin_waits_on_atomics_set_by_another_warp_complete() {
    for executor in executors() {
        let executor = executor.with_watchdog(Duration::from_secs(20));
        let mut flag = vec![0u32; 4];
        gpu_rules::p8_spin_flag::launch_cpu(&executor, (1u32, 64u32), &mut flag).unwrap();
        assert_eq!(flag, [1, 7, 0, 0]);
        let mut flag = vec![0u32; 4];
        gpu_rules::p8_spin_lock::launch_cpu(&executor, (3u32, 128u32), 4, &mut flag).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(flag[..2], [0, 12], "every warp of every block took the lock once");
    }
}

/// P8, F2: a spin on a flag that no thread sets (a block of 32: thread 32, the writer, does not
/// exist) hangs a GPU. The watchdog stopped it (P8); now the executor sees the spin itself (the
/// same unchanged value polled for 100 ms with nothing else to run) and ends the launch with a
/// `CrossBlockWait` before any watchdog: only another block could set the flag, and with none
/// to set it, it hangs a GPU too. A watchdog shorter than that still stops it, and lists the
/// thread as polling atomics (it said "in a warp operation").
#[test]
fn p8_f2_a_spin_on_a_flag_nobody_sets_is_reported_without_a_watchdog() {
    let mut flag = vec![0u32; 4];
    let executor = CpuExecutor::deterministic().with_watchdog(Duration::from_secs(20));
    let error = gpu_rules::p8_spin_flag::launch_cpu(&executor, (1u32, 32u32), &mut flag).unwrap_err();
    let CpuError::CrossBlockWait(wait) = &error else { panic!("expected a cross-block wait, got {error:?}") };
    assert_eq!((wait.threads.len(), wait.threads[0].x, wait.cooperative), (1, 0, false), "{error}");
    assert!(error.to_string().contains("hangs a GPU too"), "{error}");
    let executor = CpuExecutor::deterministic().with_watchdog(Duration::from_millis(30));
    let error = gpu_rules::p8_spin_flag::launch_cpu(&executor, (1u32, 32u32), &mut flag).unwrap_err();
    let CpuError::Watchdog(watchdog) = &error else { panic!("expected the watchdog's error, got {error:?}") };
    let thread0 = watchdog.stuck.iter().find(|t| t.thread.x == 0).expect("thread 0 is named");
    assert_eq!(thread0.activity, ThreadActivity::Polling, "{error}");
    let text = error.to_string();
    assert!(text.contains("waits for what no thread of the launch will do any more") && text.contains("polling atomics"), "{text}");
    assert_eq!(flag[1], 0);
}

/// P9: threads that return before a `sync_threads()` the others reach: an H100 runs it (PTX
/// `exit`: exited threads holding up a barrier release it), the CPU executor refused it
/// (`BarrierDivergence`). It now runs; a reducing barrier reduces over the threads that
/// arrived, as the H100 does (`sync_threads_count(true)` in 32 threads: 32).
#[test]
fn p9_threads_that_exit_before_a_sync_threads_release_it_as_on_a_gpu() {
    for executor in executors() {
        let mut out = vec![0u32; 64];
        gpu_rules::p9_exited_then_barrier::launch_cpu(&executor, (4u32, 64u32), 0, &mut out).unwrap();
        assert_eq!(out[..32], [1; 32]);
        assert_eq!(out[32..], [0; 32]);
        let mut out = vec![0u32; 64];
        gpu_rules::p9_exited_then_barrier::launch_cpu(&executor, (4u32, 64u32), 1, &mut out).unwrap();
        assert_eq!(out[..32], [32; 32], "the count of the threads that arrived");
    }
}

/// P9: an exited thread never arrives at the barrier, so the barrier does not order its
/// earlier writes before the others' later reads: the race detector reports it (the control
/// waits at the barrier before returning).
#[test]
fn p9_a_write_by_a_thread_that_exited_before_the_barrier_is_a_race() {
    let mut out = vec![0u32; 64];
    let error = gpu_rules::p9_exited_writer::launch_cpu(&CpuExecutor::deterministic(), (1u32, 64u32), 0, &mut out).unwrap_err();
    let CpuError::SharedMemoryRace(race) = &error else { panic!("expected a SharedMemoryRace, got {error:?}") };
    assert_eq!((race.first.x, race.kind), (32, RaceKind::ReadAfterWrite), "{error}");
    let mut out = vec![0u32; 64];
    gpu_rules::p9_exited_writer::launch_cpu(&CpuExecutor::deterministic(), (1u32, 64u32), 1, &mut out).unwrap();
    assert_eq!(out[..32], [5; 32]);
}

/// P11: a `launch_bounds(64)` kernel launched with 128 threads: the GPU driver answered
/// `CUDA_ERROR_INVALID_VALUE`, the CPU executor ran it. Every launcher now refuses it first,
/// naming the bound, and writes nothing; `reqntid(n)` likewise.
#[test]
fn p11_launch_bounds_and_reqntid_are_refused_by_launch_cpu_naming_the_bound() {
    let mut out = vec![0u32; 256];
    let error = gpu_rules::p11_bounded::launch_cpu(&CpuExecutor::new(), (2u32, 128u32), &mut out).unwrap_err();
    let CpuError::InvalidConfig { problem, .. } = &error else { panic!("expected InvalidConfig, got {error:?}") };
    assert_eq!(*problem, LaunchProblem::AboveKernelThreadLimit { threads: 128, max: 64, source: "launch_bounds" });
    assert!(error.to_string().contains("launch bounds of 64 threads per block"), "{error}");
    assert_eq!(out.iter().sum::<u32>(), 0, "nothing written");
    gpu_rules::p11_bounded::launch_cpu(&CpuExecutor::new(), (4u32, 64u32), &mut out).unwrap();
    assert_eq!(out.iter().sum::<u32>(), 256);

    let mut out = vec![0u32; 256];
    let error = gpu_rules::p11_exact::launch_cpu(&CpuExecutor::new(), (4u32, 64u32), &mut out).unwrap_err();
    assert!(matches!(&error, CpuError::InvalidConfig { problem: LaunchProblem::RequiredBlockThreads { .. }, .. }), "{error:?}");
    assert!(error.to_string().contains("reqntid(128)"), "{error}");
    gpu_rules::p11_exact::launch_cpu(&CpuExecutor::new(), (2u32, 128u32), &mut out).unwrap();
    assert_eq!(out, [2; 256]);
}

/// P4 in the PTX: each block-barrier kind on its own hardware barrier (0 plain; 1, 2, 3 the
/// reductions: low ids, since ptxas reserves every barrier up to the highest id used and a
/// kernel using barrier 15 fitted 4 blocks of 32 threads per H100 SM instead of 32).
#[test]
fn p4_each_block_barrier_kind_has_its_own_low_hardware_barrier_in_the_ptx() {
    let ptx = test_kernels::KERNELS.ptx_for(90).expect("test_kernels is built for sm_90");
    let body = ptx_text::entry_body(ptx, "p4_mixed_barriers");
    for (instruction, id) in [("barrier.sync", "0"), ("barrier.red.popc.u32", "1"), ("barrier.red.and.pred", "2"), ("barrier.red.or.pred", "3")] {
        let uses: Vec<&str> = body.lines().filter(|l| l.contains(instruction)).collect();
        assert!(!uses.is_empty(), "no {instruction} in p4_mixed_barriers");
        for line in uses {
            let operand_id = line
                .split(instruction)
                .nth(1)
                .unwrap()
                .split([',', ';'])
                .map(str::trim)
                .find(|o| !o.is_empty() && o.chars().all(|c| c.is_ascii_digit()))
                .unwrap_or("?");
            assert_eq!(operand_id, id, "{instruction} must use barrier {id}: {line}");
        }
    }
}

/// Found by this ping-pong test on an H100: every launch of a kernel whose
/// `shared_array!`s came to 8 bytes (mod 16) faulted with CUDA_ERROR_MISALIGNED_ADDRESS. The
/// panic machinery's kernel tag is written with a 16-byte vector store
/// (`st.shared.v2.u64`) but was declared `.align 8`, and ptxas placed it right after the array.
#[test]
fn the_kernel_tag_that_a_16_byte_store_writes_is_16_byte_aligned() {
    for arch in [80, 90] {
        let ptx = test_kernels::KERNELS.ptx_for(arch).expect("test_kernels is built for sm_80 and sm_90");
        assert!(ptx.contains("st.shared.v2.u64 [t]"), "sm_{arch}: the tag's store changed");
        assert!(ptx.contains(".shared .align 16 .u64 __ferrocuda_kernel_tag[2];"), "sm_{arch}: the tag must be 16-byte aligned");
    }
}

/// F2 (audit 2026-11-27c, r20/r20b): a hand-written grid barrier over 4 blocks completes in a
/// cooperative launch (every block resident, on the GPU by contract and on the executor by
/// construction), with any worker count; in an ordinary launch the executor reports the
/// co-residency it relies on (`CrossBlockWait`), not a GPU hang.
#[test]
fn f2_a_grid_barrier_completes_cooperatively_and_is_a_cross_block_wait_otherwise() {
    for executor in executors() {
        let (mut counter, mut out) = (vec![0u32; 1], vec![0u32; 128]);
        let config = ferrocuda::LaunchConfig::new(4u32, 32u32).cooperative();
        gpu_rules::f2_grid_barrier::launch_cpu(&executor, config, &mut counter, &mut out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((counter[0], out.iter().all(|&v| v == 4)), (4, true), "{out:?}");
    }
    let (mut counter, mut out) = (vec![0u32; 1], vec![0u32; 128]);
    let executor = CpuExecutor::deterministic().with_watchdog(Duration::from_secs(20));
    let error = gpu_rules::f2_grid_barrier::launch_cpu(&executor, (4u32, 32u32), &mut counter, &mut out).unwrap_err();
    assert!(matches!(&error, CpuError::CrossBlockWait(w) if !w.cooperative), "{error}");
}

/// F7 (audit 2026-11-27c, r22): 48000 bytes of `shared_array!` plus 190 KiB of dynamic shared
/// memory is over the 227 KiB a block may have: `launch_cpu` refuses it with the GPU's problem
/// (from `ptxas`'s figure before the kernel runs, or when the array is reached); what fits runs.
#[test]
fn f7_static_plus_dynamic_shared_memory_over_the_block_limit_is_refused_by_launch_cpu() {
    let mut out = vec![0u32; 32];
    let config = ferrocuda::LaunchConfig::new(1u32, 32u32).with_shared_bytes(190 * 1024);
    let error = gpu_rules::f7_static_plus_dynamic::launch_cpu(&CpuExecutor::deterministic(), config, &mut out).unwrap_err();
    assert!(
        // 48000, or with `ptxas` at build time its figure, which counts the panic tag's 16 bytes.
        matches!(&error, CpuError::InvalidConfig { problem: LaunchProblem::SharedMemoryTotalTooLarge { static_bytes: 48000..=48016, max: 232448, .. }, .. }),
        "{error:?}"
    );
    let fits = ferrocuda::LaunchConfig::new(1u32, 32u32).with_shared_bytes(232448 - 48 * 1024);
    gpu_rules::f7_static_plus_dynamic::launch_cpu(&CpuExecutor::deterministic(), fits, &mut out).unwrap();
    assert_eq!(out, (1..=32).collect::<Vec<u32>>());
}

/// G8 (audit 2026-11-27d, c12): in a block of 48 threads, `sync_warp(u32::MAX)` waits only for
/// the lanes that exist (lanes 48..63 of the mask count as exited, as on the GPU), and
/// `sync_threads_count` counts the 48 threads; the GPU side is
/// `g8_barriers_in_a_partial_warp_agree_with_the_cpu_executor` (tests/gpu_rules.rs).
#[test]
fn g8_barriers_in_a_partial_warp_wait_only_for_the_lanes_that_exist() {
    for executor in executors().map(|e| e.with_watchdog(Duration::from_secs(10))) {
        for (mode, expected) in [(0u32, 1u32), (1, 48), (2, 24)] {
            let mut out = vec![u32::MAX; 48];
            gpu_rules::g8_partial_warp_barriers::launch_cpu(&executor, (1u32, 48u32), mode, &mut out).unwrap();
            assert_eq!(out, vec![expected; 48], "mode {mode}");
        }
    }
}

/// `cluster::sync()` in a grid of `blocks` x 32 threads in clusters of 2, where threads
/// `live..` of each block (all of block 1's when `block_one_returns`) return first; the others
/// write `100 + cluster::size()` after the barrier. Run under the CPU executor.
fn e4_cluster_exit(executor: &CpuExecutor, blocks: u32, live: u32, block_one_returns: bool) -> (Result<(), CpuError>, Vec<u32>) {
    use ferrocuda_device::cluster;
    use std::sync::atomic::{AtomicU32, Ordering};
    let out: Vec<AtomicU32> = (0..blocks * 32).map(|_| AtomicU32::new(0)).collect();
    let body = || {
        let t = ferrocuda_device::thread::rank_in_block();
        let b = ferrocuda_device::thread::block_idx().x;
        if t >= live || (block_one_returns && b % 2 == 1) {
            return;
        }
        cluster::sync();
        out[(b * 32 + t) as usize].store(100 + cluster::size(), Ordering::Relaxed);
    };
    let config = ferrocuda_device::cpu::LaunchConfig::new(blocks, 32u32).with_cluster(2u32);
    let result = executor.run("e4_cluster_exit", config, &body);
    (result, out.into_iter().map(AtomicU32::into_inner).collect())
}

/// E4 (audit 2026-11-27e): a `cluster::sync()` that only exited threads hold up. PTX `exit`
/// releases it ("... or to a barrier.cluster for all threads in the cluster. If the exiting
/// threads are holding up the barrier, the barrier is released"), and an H200 did (threads
/// 0..16 of both blocks wrote 102); the CPU executor refused it (`BarrierDivergence`). Now it
/// releases it too, also when a whole block of the cluster returned; the control (no thread
/// returns) is unchanged. The GPU twin is `e4_..` in tests/gpu_rules.rs.
#[test]
fn e4_a_cluster_barrier_after_exited_threads_is_released_on_both_back_ends() {
    for executor in executors() {
        let (result, out) = e4_cluster_exit(&executor, 2, 16, false);
        result.unwrap();
        assert_eq!(out, (0..64).map(|i| if i % 32 < 16 { 102 } else { 0 }).collect::<Vec<_>>());
        let (result, out) = e4_cluster_exit(&executor, 4, 32, true);
        result.unwrap();
        assert_eq!(out, (0..128).map(|i| if (i / 32) % 2 == 0 { 102 } else { 0 }).collect::<Vec<_>>());
        let (result, out) = e4_cluster_exit(&executor, 2, 32, false);
        result.unwrap();
        assert_eq!(out, vec![102; 64]);
    }
}
