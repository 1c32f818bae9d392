//! The CPU executor as a sanitizer (issue 20 part 5): each mistake that races, hangs or faults
//! on a GPU ends a CPU launch with an error naming it, and its control (the same kernel
//! without the mistake) runs. Kernels: tests/kernels/src/sanitizer.rs. Audit ids (2026-11-24
//! FINDINGS.md) are in the test names.

use ferrocuda::Dim3;
use ferrocuda_device::cpu::{CpuError, CpuExecutor, GlobalMemoryRace, LaunchConfig, RaceKind};
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
