//! The CPU executor as a sanitizer (issue 20 part 5): each mistake that races, hangs or faults
//! on a GPU ends a CPU launch with an error naming it, and its control (the same kernel
//! without the mistake) runs. Kernels: tests/kernels/src/sanitizer.rs. Audit ids (2026-11-24
//! FINDINGS.md) are in the test names.

use ferrocuda::Dim3;
use ferrocuda_device::cpu::{CpuError, CpuExecutor, GlobalMemoryRace, LaunchConfig, RaceKind, SharedMemoryRace, UninitialisedSharedRead, WarpDeadlock};
use test_kernels::sanitizer;

fn dim(x: u32) -> Dim3 {
    Dim3 { x, y: 0, z: 0 }
}

fn global_race(result: Result<(), CpuError>) -> GlobalMemoryRace {
    match result {
        Err(CpuError::GlobalMemoryRace(race)) => race,
        other => panic!("expected a GlobalMemoryRace, got {other:?}"),
    }
}

#[test]
fn two_threads_writing_one_output_element_through_get_unchecked_mut_is_a_race() {
    let mut y = vec![0u32; 4];
    let race = global_race(sanitizer::unchecked_overlap::launch_cpu(&CpuExecutor::deterministic(), (1u32, 4u32), 2, &mut y));
    assert_eq!(race.kind, RaceKind::WriteAfterWrite);
    assert_eq!((race.index, race.element_bytes), (0, 4));
    assert_eq!((race.first_block, race.first_thread), (dim(0), dim(0)));
    assert_eq!((race.second_block, race.second_thread), (dim(0), dim(1)));
    assert_eq!(race.address, y.as_ptr() as usize);
    let message = CpuError::GlobalMemoryRace(race).to_string();
    assert!(message.contains("unchecked_overlap") && message.contains("AtomicSlice"), "{message}");

    // The control: one element per thread, and the next launch starts with a clean shadow
    // (the same elements, taken again by the same threads, are no race across launches).
    let mut y = vec![0u32; 4];
    for _ in 0..2 {
        sanitizer::unchecked_overlap::launch_cpu(&CpuExecutor::deterministic(), (1u32, 4u32), 1, &mut y).unwrap();
    }
    assert_eq!(y, [2, 2, 2, 2]);
}

#[test]
fn two_threads_writing_one_output_element_through_as_mut_slice_and_as_mut_ptr_is_a_race() {
    for executor in [CpuExecutor::deterministic(), CpuExecutor::new().with_workers(2)] {
        let mut y = vec![0u32; 4];
        let race = global_race(sanitizer::raw_view_overlap::launch_cpu(&executor, (1u32, 4u32), 2, &mut y));
        assert_eq!(race.kind, RaceKind::WriteAfterWrite);
        assert_eq!(race.address, y.as_ptr() as usize, "the report names the output's address, not the mirror's");
        assert!(race.index < 2, "{race:?}");
    }
    // Four blocks of one thread, on two workers, all write element 0 through raw views.
    let mut y = vec![0u32; 4];
    let race = global_race(sanitizer::raw_view_overlap::launch_cpu(&CpuExecutor::new().with_workers(2), (4u32, 1u32), 4, &mut y));
    assert_eq!((race.kind, race.index), (RaceKind::WriteAfterWrite, 0));
    assert_ne!(race.first_block, race.second_block);
    // The control: each thread writes its own element through a raw view; the writes reach
    // the output (copied from the mirrors when each thread returns), and nothing is unchecked.
    let mut y = vec![5u32; 4];
    sanitizer::raw_view_overlap::launch_cpu(&CpuExecutor::new().with_workers(2), (2u32, 2u32), 1, &mut y).unwrap();
    assert_eq!(y, [6, 6, 6, 6]);
    assert_eq!(ferrocuda_device::cpu::unchecked_raw_views(), 0);
}

#[test]
fn an_element_written_through_as_mut_ptr_and_read_by_another_thread_is_a_race() {
    let (mut y, mut out) = (vec![7u32, 8], vec![0u32; 2]);
    let race = global_race(sanitizer::raw_write_checked_read::launch_cpu(&CpuExecutor::deterministic(), (1u32, 2u32), true, &mut y, &mut out));
    // Thread 0 returns first (its mirror is recorded then), thread 1 reads after.
    assert_eq!((race.kind, race.index), (RaceKind::ReadAfterWrite, 1));
    assert_eq!((race.first_thread, race.second_thread), (dim(0), dim(1)));

    // The control: thread 0 reads back its own raw write (program order through its mirror).
    let (mut y, mut out) = (vec![7u32, 8], vec![0u32; 2]);
    sanitizer::raw_write_checked_read::launch_cpu(&CpuExecutor::deterministic(), (1u32, 2u32), false, &mut y, &mut out).unwrap();
    assert_eq!((y, out), (vec![50, 8], vec![50, 8]));
}

#[test]
fn n1_an_output_element_read_by_one_thread_and_written_by_another_after_a_barrier_is_a_race() {
    let (mut y, mut out) = (vec![7u32; 2], vec![0u32; 2]);
    let race = global_race(sanitizer::write_after_barrier::launch_cpu(&CpuExecutor::deterministic(), (1u32, 2u32), true, &mut y, &mut out));
    assert_eq!(race.kind, RaceKind::WriteAfterRead);
    assert_eq!((race.first_thread, race.second_thread, race.index), (dim(0), dim(1), 0));

    let (mut y, mut out) = (vec![7u32; 2], vec![0u32; 2]);
    sanitizer::write_after_barrier::launch_cpu(&CpuExecutor::deterministic(), (1u32, 2u32), false, &mut y, &mut out).unwrap();
    assert_eq!((y, out), (vec![7, 100], vec![7, 0]));
}

#[test]
fn blocks_on_different_workers_writing_one_output_element_is_a_race() {
    for executor in [CpuExecutor::deterministic(), CpuExecutor::new().with_workers(4)] {
        let mut y = vec![0u32; 64];
        let race = global_race(sanitizer::one_element_per_block::launch_cpu(&executor, (64u32, 32u32), 1, &mut y));
        assert_eq!((race.kind, race.index), (RaceKind::WriteAfterWrite, 0));
        assert_ne!(race.first_block, race.second_block);
        assert_eq!((race.first_thread, race.second_thread), (dim(0), dim(0)));

        let mut y = vec![0u32; 64];
        sanitizer::one_element_per_block::launch_cpu(&executor, (64u32, 32u32), 2, &mut y).unwrap();
        assert_eq!(y, (1..=64).collect::<Vec<u32>>());
    }
}

#[test]
fn atomics_and_own_elements_are_no_race_and_detection_can_be_turned_off() {
    let (mut counts, mut y) = (vec![0u32; 1], vec![0u32; 1000]);
    sanitizer::atomics_and_own_elements::launch_cpu(&CpuExecutor::new(), LaunchConfig::for_elements(1000, 128), &mut counts, &mut y).unwrap();
    assert_eq!(counts[0], 1024);
    assert!(y.iter().all(|&v| v == 1));
    // Without race detection the racy kernel runs (and loses nothing here: one OS thread).
    let mut y = vec![0u32; 4];
    sanitizer::unchecked_overlap::launch_cpu(&CpuExecutor::deterministic().with_race_detection(false), (1u32, 4u32), 2, &mut y).unwrap();
    assert_eq!(y, [2, 2, 0, 0]);
}

fn warp_deadlock(result: Result<(), CpuError>) -> WarpDeadlock {
    match result {
        Err(CpuError::WarpDeadlock(deadlock)) => deadlock,
        other => panic!("expected a WarpDeadlock, got {other:?}"),
    }
}

#[test]
fn n7_lanes_in_a_shuffle_and_a_ballot_are_a_warp_deadlock() {
    let mut out = vec![0u32; 32];
    let deadlock = warp_deadlock(sanitizer::n7_warp_mixed_ops::launch_cpu(&CpuExecutor::deterministic(), (1u32, 32u32), true, &mut out));
    assert_eq!((deadlock.warp, deadlock.waiting.clone(), deadlock.at_barrier.clone()), (0, vec![dim(0)], vec![]));
    assert_eq!(deadlock.other_operation, (1..32).map(dim).collect::<Vec<_>>());
    let message = CpuError::WarpDeadlock(deadlock).to_string();
    assert!(message.contains("different warp operation") && message.contains("hangs"), "{message}");

    sanitizer::n7_warp_mixed_ops::launch_cpu(&CpuExecutor::deterministic(), (1u32, 32u32), false, &mut out).unwrap();
    assert_eq!(out, vec![0b10; 32]);
}

#[test]
fn n7_sync_warp_with_different_masks_is_a_warp_deadlock() {
    let mut out = vec![0u32; 32];
    let deadlock = warp_deadlock(sanitizer::n7_warp_sync_masks::launch_cpu(&CpuExecutor::deterministic(), (1u32, 32u32), 0x3, 0x7, &mut out));
    assert_eq!((deadlock.waiting, deadlock.other_operation), (vec![dim(0)], vec![dim(1), dim(2)]));
    // The same masks: lanes 0..3 meet.
    sanitizer::n7_warp_sync_masks::launch_cpu(&CpuExecutor::deterministic(), (1u32, 32u32), 0x7, 0x7, &mut out).unwrap();
    // Lane 0 alone (mask 0x1) and lanes 1, 2 together (mask 0x6): two groups, both complete.
    sanitizer::n7_warp_sync_masks::launch_cpu(&CpuExecutor::deterministic(), (1u32, 32u32), 0x1, 0x6, &mut out).unwrap();
}

#[test]
fn sync_warp_always_includes_the_calling_lane() {
    let mut out = vec![0u32; 32];
    // Lane 0 passes 0x2: it waits with 0x3 for lane 1, which passed 0x2, went on alone and
    // waits in the ballot.
    let deadlock = warp_deadlock(sanitizer::n7_sync_warp_without_own_lane::launch_cpu(&CpuExecutor::deterministic(), (1u32, 32u32), 0x2, &mut out));
    assert!(deadlock.waiting.contains(&dim(0)) || deadlock.other_operation.contains(&dim(0)), "{deadlock:?}");
    sanitizer::n7_sync_warp_without_own_lane::launch_cpu(&CpuExecutor::deterministic(), (1u32, 32u32), 0x3, &mut out).unwrap();
    assert_eq!(out, vec![u32::MAX; 32]);
    // On the GPU: the lane's own bit is or-ed in (`%lanemask_eq`), folded away for the full mask.
    let ptx = test_kernels::KERNELS.ptx_for(80).expect("test-kernels is built for sm_80");
    let body = ptx.split(".entry n7_sync_warp_without_own_lane(").nth(1).expect("the kernel is in the sm_80 PTX");
    let body = &body[..body.find("\n}").expect("the kernel's end")];
    assert!(body.contains("%lanemask_eq") && body.contains("bar.warp.sync"), "{body}");
    let body = ptx.split(".entry n7_subgroup_then_shuffle(").nth(1).expect("the kernel is in the sm_80 PTX");
    let body = &body[..body.find("\n}").expect("the kernel's end")];
    assert!(body.contains("%lanemask_eq"), "a mask other than the full one (here !1) keeps the or:\n{body}");
    let body = ptx.split(".entry warp_ops(").nth(1).expect("the kernel is in the sm_80 PTX");
    let body = &body[..body.find("\n}").expect("the kernel's end")];
    assert!(body.contains("bar.warp.sync") && !body.contains("%lanemask_eq"), "the full mask costs nothing (the or is folded):\n{body}");
}

#[test]
fn n7_a_lane_may_wait_in_a_shuffle_while_the_others_complete_a_sync_warp() {
    let mut out = vec![0u32; 32];
    sanitizer::n7_subgroup_then_shuffle::launch_cpu(&CpuExecutor::deterministic(), (1u32, 32u32), &mut out).unwrap();
    assert_eq!(out, vec![310; 32]);
}

#[test]
fn n7_threads_at_sync_threads_and_sync_threads_count_are_an_error() {
    let mut out = vec![0u32; 64];
    match sanitizer::n7_mixed_barriers::launch_cpu(&CpuExecutor::deterministic(), (1u32, 64u32), true, &mut out) {
        Err(CpuError::MixedBarriers(mixed)) => {
            assert_eq!((mixed.first_kind, mixed.second_kind), ("sync_threads", "sync_threads_count"));
            assert_eq!((mixed.first.clone(), mixed.second.len()), (vec![dim(0)], 63));
            let message = CpuError::MixedBarriers(mixed).to_string();
            assert!(message.contains("same barrier function"), "{message}");
        }
        other => panic!("expected MixedBarriers, got {other:?}"),
    }
    sanitizer::n7_mixed_barriers::launch_cpu(&CpuExecutor::deterministic(), (1u32, 64u32), false, &mut out).unwrap();
    assert_eq!(out, vec![64; 64]);
}

fn shared_race(result: Result<(), CpuError>) -> SharedMemoryRace {
    match result {
        Err(CpuError::SharedMemoryRace(race)) => race,
        other => panic!("expected a SharedMemoryRace, got {other:?}"),
    }
}

#[test]
fn n8_reads_by_many_threads_then_a_write_without_a_barrier_is_a_race() {
    let mut out = vec![0u32; 64];
    let race = shared_race(sanitizer::n8_broadcast_then_update::launch_cpu(&CpuExecutor::deterministic(), (1u32, 64u32), false, &mut out));
    assert_eq!((race.kind, race.second), (RaceKind::WriteAfterRead, dim(63)));
    assert_ne!(race.first, dim(63), "the race is with another thread's read, not thread 63's own");
    sanitizer::n8_broadcast_then_update::launch_cpu(&CpuExecutor::deterministic(), (1u32, 64u32), true, &mut out).unwrap();
    assert_eq!(out, vec![1; 64]);
}

#[test]
fn n8_a_sync_warp_orders_only_the_lanes_in_its_group() {
    let mut out = vec![0u32; 32];
    let race = shared_race(sanitizer::n8_partial_warp_sync::launch_cpu(&CpuExecutor::deterministic(), (1u32, 32u32), 0x1, 0x2, &mut out));
    assert_eq!((race.kind, race.first, race.second), (RaceKind::ReadAfterWrite, dim(1), dim(0)));
    sanitizer::n8_partial_warp_sync::launch_cpu(&CpuExecutor::deterministic(), (1u32, 32u32), 0x3, 0x3, &mut out).unwrap();
    assert_eq!(out[0], 42);
}

#[test]
fn n8_sync_warps_order_transitively_through_a_common_lane() {
    let mut out = vec![0u32; 32];
    sanitizer::n8_warp_sync_chain::launch_cpu(&CpuExecutor::deterministic(), (1u32, 32u32), true, &mut out).unwrap();
    assert_eq!(out[0], 42);
    // Lane 0 waits nowhere, so it reads before lane 1 (next in rank order) writes.
    let race = shared_race(sanitizer::n8_warp_sync_chain::launch_cpu(&CpuExecutor::deterministic(), (1u32, 32u32), false, &mut out));
    assert_eq!((race.kind, race.first, race.second), (RaceKind::WriteAfterRead, dim(0), dim(1)));
}

/// N13, then G14-4 (audit 2026-11-28b): the other threads of a failed block are unwound, so a
/// destructor that panics during that unwinding aborts the process (N13 had them abandoned
/// instead, which let a `std::thread::scope` they waited in outlive the launch: a write into
/// freed memory from safe code, `device/tests/g14_review.rs`). What stays promised: the
/// launch's first error is said on stderr before the abort. In a child process (this test
/// binary again, with `FERROCUDA_N13_CHILD` set).
#[test]
fn n13_g14_4_a_destructor_panicking_while_a_failed_block_is_unwound_aborts_after_saying_the_first_error() {
    const TEST: &str = "n13_g14_4_a_destructor_panicking_while_a_failed_block_is_unwound_aborts_after_saying_the_first_error";
    let mut out = vec![0u32; 2];
    if std::env::var("FERROCUDA_N13_CHILD").is_ok() {
        let result = sanitizer::n13_drop_bomb::launch_cpu(&CpuExecutor::deterministic(), (1u32, 2u32), true, &mut out);
        println!("N13 CHILD RETURNED: {result:?}");
        return;
    }
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env("FERROCUDA_N13_CHILD", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&child.stdout), String::from_utf8_lossy(&child.stderr));
    assert!(!child.status.success() && !stdout.contains("N13 CHILD RETURNED"), "the child should abort: {:?}\n{stdout}\n{stderr}", child.status);
    assert!(
        stderr.contains("a Bomb was dropped") && stderr.contains("the launch's error: kernel `n13_drop_bomb` panicked at") && stderr.contains("thread 1 fails"),
        "the destructor's panic and the launch's first error, in:\n{stderr}"
    );

    // The control: both threads pass the barrier and drop defused Bombs.
    sanitizer::n13_drop_bomb::launch_cpu(&CpuExecutor::deterministic(), (1u32, 2u32), false, &mut out).unwrap();
    assert_eq!(out, [1, 1]);
}

fn cluster_of_two() -> LaunchConfig {
    LaunchConfig::new(2u32, 32u32).with_cluster(2u32)
}

#[test]
fn n6_reading_the_shared_memory_of_an_exited_cluster_block_is_an_error() {
    let mut out = vec![0u32; 64];
    // The executor runs rank 0 before rank 1, so rank 0 reads while rank 1 still waits to
    // run; on a GPU rank 1 may exit first. The error comes at rank 1's exit.
    match sanitizer::n6_read_exited_peer::launch_cpu(&CpuExecutor::deterministic(), cluster_of_two(), false, false, &mut out) {
        Err(CpuError::ExitedPeerAccess(exited)) => {
            assert_eq!((exited.block, exited.reader_block, exited.reader), (dim(1), dim(0), dim(31)));
            let message = CpuError::ExitedPeerAccess(exited).to_string();
            assert!(message.contains("cluster::sync()"), "{message}");
        }
        other => panic!("expected ExitedPeerAccess, got {other:?}"),
    }
    // Here rank 1 has run to its end before rank 0 reads: the read itself fails, at its line.
    match sanitizer::n6_read_exited_peer::launch_cpu(&CpuExecutor::deterministic(), cluster_of_two(), false, true, &mut out) {
        Err(CpuError::KernelPanic(panic)) => {
            assert_eq!((panic.block, panic.thread), ([0, 0, 0], [0, 0, 0]));
            assert!(panic.message.contains("cluster block 1, which has exited") && panic.message.contains("cluster::sync()"), "{}", panic.message);
            assert!(panic.file.ends_with("sanitizer.rs"), "the kernel's line: {}", panic.file);
        }
        other => panic!("expected a KernelPanic about the exited block, got {other:?}"),
    }
    for reader_syncs_first in [false, true] {
        sanitizer::n6_read_exited_peer::launch_cpu(&CpuExecutor::deterministic(), cluster_of_two(), true, reader_syncs_first, &mut out).unwrap();
    }
    assert_eq!(&out[..32], (0..32).map(|t| 0xC0DE_0000 + t).collect::<Vec<u32>>());
}

#[test]
fn n6_a_peer_read_without_a_cluster_barrier_after_the_write_is_a_race() {
    let mut out = vec![0u32; 64];
    let race = shared_race(sanitizer::n6_peer_read_race::launch_cpu(&CpuExecutor::deterministic(), cluster_of_two(), false, &mut out));
    // Rank 0 runs first: it reads rank 1's word 0 before rank 1 writes it.
    assert_eq!((race.kind, race.address), (RaceKind::WriteAfterRead, race.address));
    assert_eq!((race.block, race.first_block, race.first, race.second_block, race.second), (dim(1), dim(0), dim(0), dim(1), dim(0)));
    let message = CpuError::SharedMemoryRace(race).to_string();
    assert!(message.contains("thread (0, 0, 0) of block (0, 0, 0)") && message.contains("cluster::sync"), "{message}");

    sanitizer::n6_peer_read_race::launch_cpu(&CpuExecutor::deterministic(), cluster_of_two(), true, &mut out).unwrap();
    assert_eq!(&out[..32], (0..32).map(|t| 0xBEEF_0000 + t).collect::<Vec<u32>>());
}

#[test]
fn n9_two_shared_arrays_from_one_macro_call_are_two_arrays() {
    let mut out = vec![0u32; 64];
    sanitizer::n9_two_arrays_from_one_macro_call::launch_cpu(&CpuExecutor::deterministic(), (2u32, 32u32), &mut out).unwrap();
    assert_eq!(out, vec![12; 64]);
}

#[test]
fn n9_the_device_build_declares_two_shared_variables_for_two_arrays_from_one_macro_call() {
    let ptx = test_kernels::KERNELS.ptx_for(80).expect("test-kernels is built for sm_80");
    let body = ptx.split(".entry n9_two_arrays_from_one_macro_call(").nth(1).expect("the kernel is in the sm_80 PTX");
    let body = &body[..body.find("\n}").expect("the kernel's end")];
    let mut arrays: Vec<&str> =
        body.match_indices("__ferrocuda_shared_").map(|(at, _)| body[at..].split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap()).collect();
    arrays.sort_unstable();
    arrays.dedup();
    assert_eq!(arrays.len(), 2, "the kernel uses {arrays:?}");
    for array in arrays {
        assert_eq!(ptx.matches(&format!(".b8 {array}[")).count(), 1, "{array} is declared once");
    }
}

fn uninitialised(result: Result<(), CpuError>) -> UninitialisedSharedRead {
    match result {
        Err(CpuError::UninitialisedSharedRead(read)) => read,
        other => panic!("expected an uninitialised shared read, got {other:?}"),
    }
}

/// Q6 (audit 2026-11-27b): a kernel read shared memory that no thread of its block had
/// written; on an H100 it read the previous kernel's values (`0xab00`, `0xab01`), the executor
/// read its poison (`0xffffffff`) and said nothing. Now the read is reported, naming the
/// kernel, the block, the thread and the offset; the same kernel writing first (then a
/// barrier) passes, in every block.
#[test]
fn q6_a_shared_read_before_any_write_of_the_block_is_reported() {
    let mut out = vec![0u32; 512];
    let read = uninitialised(sanitizer::q6_shared_leftover::launch_cpu(&CpuExecutor::deterministic(), (2u32, 256u32), 1, 0xab00, &mut out));
    assert_eq!(read.kernel, "q6_shared_leftover");
    assert_eq!((read.block, read.thread, read.reader_block), (dim(0), dim(0), dim(0)), "{read:?}");
    assert_eq!((read.bytes, read.dynamic, read.offset, read.array_bytes), (4, false, 0, 1024), "{read:?}");
    let text = CpuError::UninitialisedSharedRead(read).to_string();
    assert!(text.contains("kernel `q6_shared_leftover`, block (0, 0, 0), thread (0, 0, 0)"), "{text}");
    assert!(text.contains("byte 0 of a `shared_array!` of 1024 bytes") && text.contains("no thread of block (0, 0, 0) had written"), "{text}");
    assert!(text.contains("stale value") && text.contains("Write the memory before reading it"), "{text}");
    // Parallel workers too: the first block to finish reports it.
    assert!(matches!(
        sanitizer::q6_shared_leftover::launch_cpu(&CpuExecutor::new(), (8u32, 256u32), 1, 0, &mut vec![0u32; 2048]),
        Err(CpuError::UninitialisedSharedRead(_))
    ));
    // Written first (write, barrier, read), in every block: no report, the block's own values.
    sanitizer::q6_shared_leftover::launch_cpu(&CpuExecutor::new(), (2u32, 256u32), 0, 0xab00, &mut out).unwrap();
    assert_eq!((out[0], out[255], out[256], out[511]), (0xab00, 0xab00, 0xab01, 0xab01));
    // A block does not inherit another block's writes: each reads before writing (the
    // executor's own test kernel), and the first block is reported.
    let read = uninitialised(test_kernels::cpu_examples::shared_uninitialized::launch_cpu(&CpuExecutor::deterministic(), (3u32, 64u32), &mut vec![0u32; 192]));
    assert_eq!((read.block, read.thread), (dim(0), dim(0)), "{read:?}");
}

/// Q6's legitimate patterns: a shared counter zeroed by one thread, then a barrier, then
/// atomics by all, is not reported; the same atomics on a counter nobody zeroed are (they
/// read whatever was there). Without race detection nothing is checked.
#[test]
fn q6_atomics_on_initialised_shared_memory_are_not_reported_but_on_uninitialised_are() {
    let mut out = vec![0u32; 128];
    sanitizer::q6_shared_counter::launch_cpu(&CpuExecutor::new(), (2u32, 64u32), 1, &mut out).unwrap();
    assert!(out.iter().all(|&v| v == 64), "{out:?}");
    let read = uninitialised(sanitizer::q6_shared_counter::launch_cpu(&CpuExecutor::new(), (2u32, 64u32), 0, &mut out));
    assert_eq!(read.kernel, "q6_shared_counter");
    sanitizer::q6_shared_counter::launch_cpu(&CpuExecutor::new().with_race_detection(false), (2u32, 64u32), 0, &mut out).unwrap();
}

/// Q6 keeps the race report first: a missing barrier between a write by one thread and a read
/// by another is a race (the read may come before or after the write on a GPU), reported as
/// one although the read also found the word unwritten.
#[test]
fn q6_a_race_is_reported_before_an_uninitialised_read() {
    let x: Vec<f32> = (0..512).map(|i| i as f32).collect();
    let mut out = vec![0.0f32; 512];
    let error = test_kernels::cpu_examples::shared_race_missing_barrier::launch_cpu(&CpuExecutor::new(), (2u32, 256u32), &x, &mut out).unwrap_err();
    assert!(matches!(error, CpuError::SharedMemoryRace(_)), "{error:?}");
}

/// Runs `elect_one` in a one-block grid of `threads` threads under the CPU executor, with
/// `shape`: 0 every thread elects; 1 threads 16.. of each warp return first; 2 threads 16.. of
/// each warp wait at `sync_threads()` instead while the others elect (divergent). Each thread
/// that elects writes 1 (elected) or 0 into its slot; the others leave 2.
fn e3_elect(threads: u32, shape: u32) -> (Result<(), CpuError>, Vec<u32>) {
    use ferrocuda_device::sync::sync_threads;
    use ferrocuda_device::warpgroup::elect_one;
    use std::sync::atomic::{AtomicU32, Ordering};
    let out: Vec<AtomicU32> = (0..threads).map(|_| AtomicU32::new(2)).collect();
    let body = || {
        let t = ferrocuda_device::thread::rank_in_block();
        let upper = t % 32 >= 16;
        if shape == 1 && upper {
            return;
        }
        if shape == 2 && upper {
            sync_threads();
            return;
        }
        let elected = elect_one();
        out[t as usize].store(elected as u32, Ordering::Relaxed);
        if shape == 2 {
            sync_threads();
        }
    };
    let result = CpuExecutor::deterministic().run("e3_elect", LaunchConfig::from((1u32, threads)), &body);
    (result, out.into_iter().map(AtomicU32::into_inner).collect())
}

/// E3 (audit 2026-11-27e): `warpgroup::elect_one()` (`elect.sync`, full mask) called by lanes
/// 0..16 while lanes 16..32 wait at a block barrier hangs a GPU (H200: timeout), and the CPU
/// executor used to return `Ok` with lane 0 elected. It is now a warp collective of the
/// executor: the divergent use is a `WarpDeadlock` naming the lanes, as for `warp::shuffle`;
/// the shapes that a GPU completes agree with the H200 (lanes that returned do not hold it up,
/// a partial last warp elects its lowest lane, every warp elects its lowest live lane).
#[test]
fn e3_elect_one_in_divergent_code_is_reported_by_the_executor() {
    let (result, _) = e3_elect(32, 2);
    let deadlock = warp_deadlock(result);
    assert_eq!(deadlock.waiting, (0..16).map(dim).collect::<Vec<_>>());
    assert_eq!(deadlock.at_barrier, (16..32).map(dim).collect::<Vec<_>>());
    let message = CpuError::WarpDeadlock(deadlock).to_string();
    assert!(message.contains("elect_one") && message.contains("a GPU hangs here"), "{message}");
    // The shapes a GPU completes (H200, audit 2026-11-27e G1b, G1c, G1d).
    let (result, out) = e3_elect(32, 0);
    result.unwrap();
    assert_eq!(out, (0..32).map(|t| (t == 0) as u32).collect::<Vec<_>>());
    let (result, out) = e3_elect(32, 1);
    result.unwrap();
    assert_eq!(out, (0..32).map(|t| if t < 16 { (t == 0) as u32 } else { 2 }).collect::<Vec<_>>());
    let (result, out) = e3_elect(48, 0);
    result.unwrap();
    assert_eq!(out, (0..48).map(|t| (t == 0 || t == 32) as u32).collect::<Vec<_>>());
    let (result, out) = e3_elect(64, 1);
    result.unwrap();
    assert_eq!(out, (0..64).map(|t| if t % 32 < 16 { (t == 0 || t == 32) as u32 } else { 2 }).collect::<Vec<_>>());
}

/// E7 (audit 2026-11-27e), the CPU executor's side: a kernel thread that panics with a payload
/// whose `Drop` panics again. The executor drops the payload (the kernel's code) under a second
/// `catch_unwind`, so the launch ends with the first panic reported, not a panic escaping the
/// executor's coroutine; the executor works on.
#[test]
fn e7_a_kernel_panic_payload_that_panics_when_dropped_is_reported() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("the payload's drop panics");
        }
    }
    let body = || {
        if ferrocuda_device::thread::rank_in_block() == 3 {
            std::panic::panic_any(Bomb);
        }
    };
    match CpuExecutor::deterministic().run("e7_bomb", LaunchConfig::from((1u32, 32u32)), &body) {
        Err(CpuError::KernelPanic(panic)) => assert_eq!(panic.thread, [3, 0, 0]),
        other => panic!("expected the thread's KernelPanic, got {other:?}"),
    }
    CpuExecutor::deterministic().run("e7_after", LaunchConfig::from((1u32, 32u32)), &|| {}).unwrap();
}
