//! The kernel model (audit findings U1, U2) on both back ends: the correct forms of the
//! audit's `stale_read` and `count_plain`, data handed between threads across a barrier, and
//! every output witness. The unsound forms are compile-fail cases
//! (`tests/compile_fail/kernel_model/`); the CPU half of each test runs everywhere (CI), the
//! GPU half with a GPU (`REQUIRE_GPU=1` makes a missing GPU a failure).

#[path = "common/backend.rs"]
mod backend;
mod common;

use backend::{Backend, launch_on, on_both_backends};
use ferrocuda_device::cpu::{CpuError, CpuExecutor};
use test_kernels::kernel_model::{
    count_atomic, divide_by_nonzero, hygiene, neighbour_after_barrier, planes, saxpy_safe, smuggled_block_witness, smuggled_witness, stale_read, r#type,
    witnesses,
};

on_both_backends!(
    stale_read_sees_the_store_made_after_the_first_barrier,
    count_plain_rewritten_with_atomics_counts_every_thread,
    a_neighbours_store_is_seen_after_the_barrier,
    grid_stride_chunk_and_per_block_witnesses_cover_their_elements,
    parameters_named_like_generated_variables_arrive_intact,
    a_raw_identifier_kernel_launches_under_its_unraw_symbol,
    n1_per_thread_outputs_refuse_a_launch_that_is_not_1d,
    n1_per_thread_outputs_refuse_more_threads_than_u32,
    a_non_zero_divisor_arrives_and_divides,
    structure_of_arrays_planes_hold_each_index_once,
    same_len_slices_of_different_lengths_are_refused,
);

/// `#[kernel(same_len(x, y))]`: the device uses one length for both, so every launcher
/// refuses slices of different lengths (naming both) before anything runs; equal ones run.
fn same_len_slices_of_different_lengths_are_refused(backend: &Backend) {
    let x = backend.upload(&[1.0f32; 100]);
    let mut short = backend.upload(&[5.0f32; 99]);
    let error = launch_on!(backend, saxpy_safe, (1u32, 128u32), 2.0f32, &x, &mut short).unwrap_err();
    assert!(error.contains("`x`") && error.contains("`y`") && error.contains("100") && error.contains("99"), "{}: {error}", backend.name());
    assert_eq!(backend.download(&short), [5.0; 99], "{}: a refused launch wrote", backend.name());
    let mut y = backend.upload(&[5.0f32; 100]);
    launch_on!(backend, saxpy_safe, (1u32, 128u32), 2.0f32, &x, &mut y).unwrap();
    assert_eq!(backend.download(&y), [7.0; 100], "{}", backend.name());
}

/// N1 (the launch half): a kernel with per-thread outputs partitions them by the 1-D thread
/// index, which names one thread only in a 1-D launch, so every launcher refuses a 2-D grid
/// or block before anything runs, and writes nothing. A per-block output alone allows any
/// shape (`mark_blocks` in launch_kinds).
fn n1_per_thread_outputs_refuse_a_launch_that_is_not_1d(backend: &Backend) {
    let mut out = backend.upload(&[7u32; 64]);
    let mut per_block = backend.zeroed::<u32>(4);
    let mut pairs = backend.zeroed::<u32>(128);
    for (grid, block) in [((2u32, 2u32, 1u32), (16u32, 1u32, 1u32)), ((4, 1, 1), (8, 2, 1)), ((1, 1, 2), (32, 1, 1))] {
        let error = launch_on!(backend, witnesses, (grid, block), &mut out, &mut per_block, &mut pairs).unwrap_err();
        assert!(error.contains("per-thread output") && error.contains("1-D"), "{}: {error}", backend.name());
    }
    assert_eq!(backend.download(&out), [7; 64], "{}: a refused launch wrote", backend.name());
}

/// N1 / part 2: the 32-bit thread index is exact because the launch has at most `u32::MAX`
/// threads; one more is refused, naming the limit.
fn n1_per_thread_outputs_refuse_more_threads_than_u32(backend: &Backend) {
    let mut out = backend.zeroed::<u32>(4);
    let error = launch_on!(backend, r#type, ((u32::MAX / 1024) + 1, 1024u32), &mut out).unwrap_err();
    assert!(error.contains("4294967295"), "{}: {error}", backend.name());
    assert_eq!(backend.download(&out), [0; 4], "{}", backend.name());
}

/// A `NonZeroU32` parameter is accepted by value and divides without a zero check.
fn a_non_zero_divisor_arrives_and_divides(backend: &Backend) {
    let x: Vec<u32> = (0..300).map(|i| i * 7 + 3).collect();
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<u32>(2 * x.len());
    let d = core::num::NonZeroU32::new(11).unwrap();
    launch_on!(backend, divide_by_nonzero, (3u32, 128u32), d, &input, &mut out).unwrap();
    let out = backend.download(&out);
    for (i, v) in x.iter().enumerate() {
        assert_eq!(out[2 * i..2 * i + 2], [v / 11, v % 11], "{}: element {i}", backend.name());
    }
}

/// `DisjointPlanes<u32, 2>` over a buffer of `2 * n + 1`: plane length `n`, element `i` of
/// plane `p` at `p * n + i`, the last element in no plane.
fn structure_of_arrays_planes_hold_each_index_once(backend: &Backend) {
    let x: Vec<u32> = (0..1000).collect();
    let input = backend.upload(&x);
    let mut out = backend.upload(&vec![u32::MAX; 2 * x.len() + 1]);
    launch_on!(backend, planes, (2u32, 64u32), &input, &mut out).unwrap();
    let out = backend.download(&out);
    for i in 0..x.len() {
        assert_eq!((out[i], out[x.len() + i]), (x[i] + 1, x[i] * 2), "{}: index {i}", backend.name());
    }
    assert_eq!(out[2 * x.len()], u32::MAX, "{}", backend.name());
}

/// W1, E3: the user's `__x_arg` is 42 (not half of x's address), and parameters called
/// `stream`, `config`, `module`, `executor`, `params` are the user's values.
fn parameters_named_like_generated_variables_arrive_intact(backend: &Backend) {
    let x = backend.upload(&[5u32; 9]);
    let mut out = backend.zeroed::<u32>(3);
    launch_on!(backend, hygiene, (1u32, 1u32), &x, 42u32, 1u32, 20u32, 300u32, 4000u32, 50000u32, &mut out).unwrap();
    assert_eq!(backend.download(&out), [42, 9, 54321], "{}", backend.name());
}

/// W2: `r#type` was built but could never be launched (`SYMBOL` was `"r#type"`, the PTX entry
/// `type`).
fn a_raw_identifier_kernel_launches_under_its_unraw_symbol(backend: &Backend) {
    assert_eq!(r#type::SYMBOL, "type");
    let mut out = backend.zeroed::<u32>(4);
    launch_on!(backend, r#type, (1u32, 4u32), &mut out).unwrap();
    assert_eq!(backend.download(&out), [7; 4], "{}", backend.name());
}

#[test]
fn the_raw_identifier_kernel_is_the_ptx_entry_type() {
    let ptx = test_kernels::KERNELS.ptx_for(80).expect("test-kernels is built for sm_80");
    assert!(ptx.contains(".entry type("), "no `.entry type(` in the PTX");
    assert!(ptx.contains("__ferrocuda_fingerprint_type"), "no fingerprint global for `type`");
}

/// U2: with `&mut [u32]` 63 of 64 threads read the value from before the barrier.
fn stale_read_sees_the_store_made_after_the_first_barrier(backend: &Backend) {
    for before in [0u32, 41] {
        let mut flags = backend.upload(&[before]);
        let mut out = backend.zeroed::<u32>(64);
        launch_on!(backend, stale_read, (1u32, 64u32), &mut flags, &mut out).unwrap();
        let out = backend.download(&out);
        let stale = out.iter().filter(|&&v| v != before + 1).count();
        assert_eq!(stale, 0, "{}: {stale} of 64 threads read a stale flag: {out:?}", backend.name());
        assert_eq!(backend.download(&flags), [before + 1], "{}", backend.name());
    }
}

/// U2: `out[0] += 1` from every thread was a data race (4.81M of 5.12M on the CPU, 132 on a GPU).
fn count_plain_rewritten_with_atomics_counts_every_thread(backend: &Backend) {
    let mut out = backend.zeroed::<u32>(1);
    launch_on!(backend, count_atomic, (20_000u32, 256u32), &mut out).unwrap();
    assert_eq!(backend.download(&out), [20_000 * 256], "{}", backend.name());
}

fn a_neighbours_store_is_seen_after_the_barrier(backend: &Backend) {
    let (blocks, threads) = (40u32, 128u32);
    let n = (blocks * threads) as usize;
    let mut scratch = backend.zeroed::<u32>(n);
    let mut out = backend.zeroed::<u32>(n);
    launch_on!(backend, neighbour_after_barrier, (blocks, threads), 1000u32, &mut scratch, &mut out).unwrap();
    let out = backend.download(&out);
    for (i, &v) in out.iter().enumerate() {
        let (start, t) = (i - i % threads as usize, i % threads as usize);
        let neighbour = start + (t + 1) % threads as usize;
        assert_eq!(v, (1000 + neighbour as u32) * 2, "{}: out[{i}]", backend.name());
    }
}

fn grid_stride_chunk_and_per_block_witnesses_cover_their_elements(backend: &Backend) {
    // 7 blocks of 64 threads: the grid-stride loop covers 10_000 elements in several rounds.
    let (blocks, threads) = (7u32, 64u32);
    let mut out = backend.zeroed::<u32>(10_000);
    let mut per_block = backend.zeroed::<u32>(blocks as usize);
    let pairs_len = 2 * (blocks * threads) as usize + 1;
    let mut pairs = backend.upload(&vec![u32::MAX; pairs_len]);
    launch_on!(backend, witnesses, (blocks, threads), &mut out, &mut per_block, &mut pairs).unwrap();
    let out = backend.download(&out);
    assert!(out.iter().enumerate().all(|(i, &v)| v == i as u32 * 3), "{}: grid-stride output", backend.name());
    assert_eq!(backend.download(&per_block), (0..blocks).collect::<Vec<_>>(), "{}", backend.name());
    let pairs = backend.download(&pairs);
    for i in 0..(blocks * threads) as usize {
        assert_eq!(pairs[2 * i..2 * i + 2], [i as u32, i as u32 + 1], "{}: chunk {i}", backend.name());
    }
    // The last element belongs to no complete chunk: untouched.
    assert_eq!(pairs[pairs_len - 1], u32::MAX, "{}", backend.name());
}

/// A witness handed to another GPU thread through host-only state (possible on the CPU
/// executor, where kernels are host code) is caught at its use instead of letting two threads
/// write one element.
#[test]
fn a_witness_passed_to_another_thread_is_refused_on_the_cpu_executor() {
    let mut out = vec![0u32; 2];
    let error = smuggled_witness::launch_cpu(&CpuExecutor::deterministic(), (1u32, 2u32), &mut out).unwrap_err();
    let CpuError::KernelPanic(panic) = &error else { panic!("expected a kernel panic, got {error:?}") };
    assert!(panic.message.contains("was made by another GPU thread"), "{}", panic.message);
    assert_eq!(out, [0, 0], "no element was written through the smuggled witness");
}

/// As above for a block's witness (`BlockIndex`): carried to another block's first thread, it
/// is refused at its use, and the element stays unwritten.
#[test]
fn a_block_witness_passed_to_another_block_is_refused_on_the_cpu_executor() {
    let mut out = vec![0u32; 2];
    let error = smuggled_block_witness::launch_cpu(&CpuExecutor::deterministic(), (2u32, 1u32), &mut out).unwrap_err();
    let CpuError::KernelPanic(panic) = &error else { panic!("expected a kernel panic, got {error:?}") };
    assert!(panic.message.contains("BlockIndex 0 was made by another GPU thread"), "{}", panic.message);
    assert_eq!(out, [0, 0], "no element was written through the smuggled witness");
}
