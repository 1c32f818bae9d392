//! The one-shot peer all-reduce kernel on the CPU executor: one thread per "GPU", each with
//! its own staging buffer and flag array in host memory, reading the others' through the
//! pointer table as the GPUs do over NVLink. Checks the flag protocol: correct sums, calls
//! back to back with changing sizes, wrapping epochs, and the spin limit.

use ferrocuda_collectives_kernels::{abort_slot, flag_words, one_shot_all_reduce_f32};
use ferrocuda_device::cpu::CpuExecutor;

/// 16-byte aligned storage of `f32` (the kernel moves 4 floats at a time).
#[derive(Clone, Copy, Default)]
#[repr(C, align(16))]
struct Aligned([f32; 4]);

fn aligned(n: usize) -> Vec<Aligned> {
    vec![Aligned::default(); n.div_ceil(4).max(1)]
}

fn as_mut_f32(v: &mut [Aligned]) -> *mut f32 {
    v.as_mut_ptr().cast()
}

struct Rank {
    staging: Vec<Aligned>,
    flags: Vec<u32>,
    status: u32,
}

impl Rank {
    /// A flag array whose slots start at `epoch`, with a clear abort word.
    fn flags(world: usize, epoch: u32) -> Vec<u32> {
        let mut flags = vec![epoch; flag_words(world as u32)];
        flags[abort_slot(world as u32)] = 0;
        flags
    }
}

/// Runs `calls` (sizes) back to back on `world` ranks, with epochs starting after `first_epoch`,
/// and checks every output against the rank-ordered sum.
fn run(world: usize, capacity: usize, calls: &[usize], first_epoch: u32, threads: u32) {
    let half = capacity.div_ceil(4) * 4;
    let mut ranks: Vec<Rank> = (0..world).map(|_| Rank { staging: aligned(2 * half), flags: Rank::flags(world, first_epoch), status: 0 }).collect();
    let mut table: Vec<u64> = ranks.iter_mut().map(|r| as_mut_f32(&mut r.staging) as u64).collect();
    table.extend(ranks.iter_mut().map(|r| r.flags.as_mut_ptr() as u64));
    let status: Vec<u64> = ranks.iter_mut().map(|r| &mut r.status as *mut u32 as u64).collect();
    let table = &table;
    std::thread::scope(|s| {
        for rank in 0..world {
            let status = status[rank];
            s.spawn(move || {
                let executor = CpuExecutor::new();
                let mut epoch = first_epoch;
                for (call, &n) in calls.iter().enumerate() {
                    let value = |r: usize, i: usize| ((r * 31 + i * 7 + call * 3) % 97) as f32 * 0.25 - 5.0;
                    let mut input = aligned(n);
                    let mut output = aligned(n);
                    let inp = as_mut_f32(&mut input);
                    for i in 0..n {
                        // SAFETY: `input` holds at least n floats.
                        unsafe { *inp.add(i) = value(rank, i) };
                    }
                    epoch = epoch.wrapping_add(1);
                    let blocks = (n as u32).div_ceil(threads * 4).clamp(1, 5);
                    // SAFETY: the table holds every rank's staging (2 * half) and flags
                    // (world * MAX_BLOCKS), alive until the scope ends; n <= capacity; every
                    // rank makes the same calls with the same grid; input/output hold n floats.
                    unsafe {
                        one_shot_all_reduce_f32::launch_cpu(
                            &executor,
                            (blocks, threads),
                            rank as u32,
                            world as u32,
                            n as u32,
                            half as u32,
                            epoch,
                            0,
                            status as *mut u32,
                            table.as_ptr(),
                            inp,
                            as_mut_f32(&mut output),
                        )
                    }
                    .unwrap();
                    let out = as_mut_f32(&mut output);
                    for i in 0..n {
                        let want: f32 = (0..world).map(|r| value(r, i)).fold(0.0, |a, b| a + b);
                        // SAFETY: `output` holds n floats.
                        let got = unsafe { *out.add(i) };
                        assert_eq!(got, want, "world {world}, rank {rank}, call {call} (n = {n}), element {i}");
                    }
                }
            });
        }
    });
    assert!(ranks.iter().all(|r| r.status == 0), "no kernel gave up waiting");
}

#[test]
fn two_ranks_sum_every_element_for_sizes_around_the_vector_and_block_edges() {
    run(2, 5000, &[1, 3, 4, 5, 63, 64, 65, 1000, 4096, 4999], 0, 32);
}

#[test]
fn three_and_four_ranks_sum_in_rank_order() {
    run(3, 700, &[700, 17, 512], 0, 32);
    run(4, 300, &[300, 299, 8], 0, 16);
}

#[test]
fn back_to_back_calls_reuse_the_staging_halves_safely() {
    // Many calls with changing sizes: the two staging halves alternate, and a rank that runs
    // ahead must never overwrite a half that a peer still reads.
    let calls: Vec<usize> = (0..24).map(|k| [256, 40, 1000, 3][k % 4]).collect();
    run(2, 1000, &calls, 0, 32);
}

#[test]
fn epochs_that_wrap_around_u32_max_keep_the_ranks_in_step() {
    run(2, 64, &[64, 64, 64, 64], u32::MAX - 2, 32);
}

#[test]
fn a_missing_peer_trips_the_spin_limit_instead_of_hanging() {
    let (world, half) = (2usize, 8usize);
    let mut staging: Vec<Vec<Aligned>> = (0..world).map(|_| aligned(2 * half)).collect();
    let mut flags: Vec<Vec<u32>> = (0..world).map(|_| vec![0; flag_words(world as u32)]).collect();
    let mut table: Vec<u64> = staging.iter_mut().map(|s| as_mut_f32(s) as u64).collect();
    table.extend(flags.iter_mut().map(|f| f.as_mut_ptr() as u64));
    let (mut input, mut output, mut status) = (aligned(8), aligned(8), 0u32);
    // Only rank 0 launches; rank 1 never arrives.
    // SAFETY: as in `run`, for rank 0 alone; the spin limit ends the wait.
    unsafe {
        one_shot_all_reduce_f32::launch_cpu(
            &CpuExecutor::new(),
            (1, 32),
            0,
            world as u32,
            8,
            half as u32,
            1,
            10_000,
            &mut status,
            table.as_ptr(),
            as_mut_f32(&mut input),
            as_mut_f32(&mut output),
        )
    }
    .unwrap();
    assert_eq!(status, 1, "the kernel reports that it gave up");
    assert_eq!(flags[1][0], 1, "rank 0 still signalled rank 1 (block 0's slot)");
    assert_eq!(flags[1][abort_slot(world as u32)], 1, "rank 0 told rank 1 that the group is over (G20R-1)");
    // SAFETY: `output` holds 8 floats.
    let out = unsafe { std::slice::from_raw_parts(as_mut_f32(&mut output), 8) };
    assert!(out.iter().all(|v| v.is_nan()), "a block that gave up wrote something else than NaN: {out:?}");
}

/// G20R-1 (audit 2026-11-28h): after a spin-limit give-up, rank 0 carried on: its later calls
/// timed out too, and its call 3 overwrote the staging half that rank 1, merely late, had not
/// read for its call 1. Rank 1's call 1 then summed rank 0's call-3 data (103 instead of 101)
/// and its status said nothing. Now a give-up ends the group: rank 0 stages nothing after it
/// and tells rank 1, whose calls end with NaN and a set status. Every output of every rank is
/// the right sum or NaN, NaN only with the rank's status set, and the late rank is told.
#[test]
fn g20r1_a_rank_that_timed_out_does_not_run_ahead_of_a_late_peer() {
    let (world, n, calls) = (2usize, 4096usize, 3u32);
    let half = n;
    let mut ranks: Vec<Rank> = (0..world).map(|_| Rank { staging: aligned(2 * half), flags: Rank::flags(world, 0), status: 0 }).collect();
    let mut table: Vec<u64> = ranks.iter_mut().map(|r| as_mut_f32(&mut r.staging) as u64).collect();
    table.extend(ranks.iter_mut().map(|r| r.flags.as_mut_ptr() as u64));
    let status: Vec<u64> = ranks.iter_mut().map(|r| &mut r.status as *mut u32 as u64).collect();
    let table = &table;
    // A hang (a wait that nothing ends) must fail the test, not stall it.
    std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_secs(120));
        eprintln!("g20r1: HANG after 120 s");
        std::process::exit(4);
    });
    // Per rank: each call's output.
    let outputs: Vec<Vec<Vec<f32>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let status = status[rank];
                s.spawn(move || {
                    // Rank 0 gives up quickly; rank 1 waits for ever and starts late.
                    let spin_limit = if rank == 0 { 10_000 } else { 0 };
                    if rank == 1 {
                        std::thread::sleep(std::time::Duration::from_secs(1));
                    }
                    let executor = CpuExecutor::new();
                    (1..=calls)
                        .map(|epoch| {
                            let value = if rank == 0 { epoch as f32 } else { 100.0 };
                            let mut input = aligned(n);
                            let mut output = aligned(n);
                            let inp = as_mut_f32(&mut input);
                            for i in 0..n {
                                // SAFETY: `input` holds n floats.
                                unsafe { *inp.add(i) = value };
                            }
                            // SAFETY: the table holds every rank's staging (2 * half) and flags
                            // (flag_words(world)), alive until the scope ends; n <= half; both
                            // ranks make the same calls with the same grid.
                            unsafe {
                                one_shot_all_reduce_f32::launch_cpu(
                                    &executor,
                                    (2, 32),
                                    rank as u32,
                                    world as u32,
                                    n as u32,
                                    half as u32,
                                    epoch,
                                    spin_limit,
                                    status as *mut u32,
                                    table.as_ptr(),
                                    inp,
                                    as_mut_f32(&mut output),
                                )
                            }
                            .unwrap();
                            // SAFETY: `output` holds n floats.
                            unsafe { std::slice::from_raw_parts(as_mut_f32(&mut output), n) }.to_vec()
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (rank, calls) in outputs.iter().enumerate() {
        for (call, output) in calls.iter().enumerate() {
            let want = (call + 1) as f32 + 100.0;
            let wrong: Vec<_> = output.iter().enumerate().filter(|(_, v)| **v != want && !v.is_nan()).take(4).collect();
            assert!(wrong.is_empty(), "rank {rank} call {} got another call's data (want {want}): {wrong:?}", call + 1);
            if output.iter().any(|v| v.is_nan()) {
                assert_eq!(ranks[rank].status, 1, "rank {rank} call {} wrote NaN without recording it", call + 1);
            }
        }
    }
    assert_eq!(ranks[0].status, 1, "rank 0 gave up waiting for the late rank 1");
    assert_eq!(ranks[1].status, 1, "the late rank 1 was not told that the group is over");
    assert!(outputs[0].iter().all(|o| o.iter().all(|v| v.is_nan())), "rank 0 gave up on every call: no sums");
}
