//! Named barriers (`barrier.sync` / `barrier.arrive` with an id and a thread count) and the
//! `pipeline::Ring` on the CPU executor: the orderings the Hopper kernels rely on, checked
//! without the kernels. The executor's race detector knows block barriers and named barriers
//! (audit P7), so the ping-pong runs with it; it does not know mbarrier phases (as for the
//! Hopper GEMM's tests), so it is off for the ring, whose orderings are checked by the values
//! each side sees.

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig};
use ferrocuda_device::mbarrier::fence_init;
use ferrocuda_device::named_barrier::NamedBarrier;
use ferrocuda_device::pipeline::Ring;
use ferrocuda_device::shared::SharedElement;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::thread_idx_x;
use ferrocuda_device::tma::dynamic_shared_address;

/// The tests' barriers. Each test keeps one count per id (the contract of the `unsafe`
/// `NamedBarrier::new`), except the F12-3 cases that break it on purpose: on the CPU executor
/// a broken rule is reported as an error (what those tests check), not undefined behaviour.
fn barrier(id: u32, threads: u32) -> NamedBarrier {
    // SAFETY: as above.
    unsafe { NamedBarrier::new(id, threads) }
}

/// Ping-pong as in the attention kernel: warpgroup c waits on barrier 4 + c, appends its index
/// to a log in shared memory, then arrives on the other's barrier; warpgroup 1 lets 0 go first,
/// and 0 takes 1's last arrival at the end. The log must alternate 0, 1, 0, 1, ... .
#[test]
fn named_barriers_make_two_warpgroups_take_turns() {
    const ROUNDS: u32 = 5;
    let log: Vec<AtomicU32> = (0..2 * ROUNDS).map(|_| AtomicU32::new(u32::MAX)).collect();
    let body = || {
        let tid = thread_idx_x();
        let group = tid / 128;
        let turn = [barrier(4, 256), barrier(5, 256)];
        let (mine, other) = (turn[group as usize], turn[1 - group as usize]);
        let counter = dynamic_shared_address();
        if tid == 0 {
            // SAFETY: 4 bytes of the block's shared memory, used only as this counter.
            unsafe { u32::store_shared(counter, 0) };
        }
        sync_threads();
        if group == 1 {
            other.arrive();
        }
        for _ in 0..ROUNDS {
            mine.sync();
            if tid.is_multiple_of(128) {
                // SAFETY: as above; one thread of the warpgroup whose turn it is.
                let at = unsafe { u32::load_shared(counter) };
                log[at as usize].store(group, Ordering::Relaxed);
                // SAFETY: as above.
                unsafe { u32::store_shared(counter, at + 1) };
            }
            other.arrive();
        }
        if group == 0 {
            mine.sync();
        }
    };
    // With race detection (audit P7): each phase orders the previous turn's counter update
    // before the next turn's read.
    CpuExecutor::new().run("ping_pong", LaunchConfig::new(1u32, 256u32).with_shared_bytes(16), &body).unwrap();
    let order: Vec<u32> = log.iter().map(|x| x.load(Ordering::Relaxed)).collect();
    let expected: Vec<u32> = (0..2 * ROUNDS).map(|i| i % 2).collect();
    assert_eq!(order, expected, "the warpgroups did not alternate");
}

/// A `Ring` of 2 slots between one producer thread (writing each round's value into its slot) and
/// 4 consumer warps that check each round's value and release it: 7 rounds wrap the ring with
/// both parities; a slot reused before its release would show the next round's value.
#[test]
fn ring_rounds_reach_the_consumers_in_order_and_slots_are_reused_only_after_release() {
    const ROUNDS: u32 = 7;
    let seen = AtomicU32::new(0);
    let body = || {
        let tid = thread_idx_x();
        let base = dynamic_shared_address();
        // SAFETY: 8-aligned, 32 bytes of the block's shared memory after two 4-byte slots
        // (at base + 16), used only as the ring's barriers.
        let ring = unsafe { Ring::<2>::at(base + 16) };
        if tid == 0 {
            ring.init(4);
            fence_init();
        }
        sync_threads();
        if tid == 0 {
            for j in 0..ROUNDS {
                // A plain store stands in for the copy engine: wait for the slot's release, write,
                // then `produce` with no bytes announced (its wait passes at once, its arrival
                // completes the round).
                ring.empty(Ring::<2>::slot(j)).wait(Ring::<2>::phase(j) ^ 1);
                // SAFETY: the slot is free (its release was waited for).
                unsafe { u32::store_shared(base + 4 * Ring::<2>::slot(j), 1000 + j) };
                ring.produce(j, 0);
            }
        } else if tid >= 32 {
            for j in 0..ROUNDS {
                ring.consume(j);
                // SAFETY: the round's value landed (`consume` waited).
                let value = unsafe { u32::load_shared(base + 4 * Ring::<2>::slot(j)) };
                assert_eq!(value, 1000 + j, "round {j}");
                sync_warp_then_release(&ring, j, tid);
            }
            seen.fetch_add(1, Ordering::Relaxed);
        }
    };
    CpuExecutor::new().with_race_detection(false).run("ring", LaunchConfig::new(1u32, 160u32).with_shared_bytes(64), &body).unwrap();
    assert_eq!(seen.load(Ordering::Relaxed), 128, "every consumer thread saw every round");
}

fn sync_warp_then_release(ring: &Ring<2>, j: u32, tid: u32) {
    ferrocuda_device::sync::sync_warp(u32::MAX);
    if tid.is_multiple_of(32) {
        ring.release(j);
    }
}

/// P7, transitivity: warp 0 writes and arrives on barrier 4; warp 1 waits on 4, then arrives on
/// 5; warp 2 waits on 5 and reads warp 0's word. The two phases chain warp 0's write before warp
/// 2's read (no race); warp 1 reading the word after its own arrival on 5 is also ordered (it
/// waited on 4 first). Without the chain, the race detector would report warp 2's read.
#[test]
fn p7_named_barrier_hand_offs_chain_transitively() {
    let seen = AtomicU32::new(0);
    let body = || {
        let tid = thread_idx_x();
        let word = dynamic_shared_address();
        let (first, second) = (barrier(4, 64), barrier(5, 64));
        match tid / 32 {
            0 => {
                if tid == 0 {
                    // SAFETY: 4 bytes of the block's shared memory, used only as this word.
                    unsafe { u32::store_shared(word, 7) };
                }
                first.arrive();
            }
            1 => {
                first.sync();
                second.arrive();
            }
            _ => {
                second.sync();
                if tid == 64 {
                    // SAFETY: as above.
                    seen.store(unsafe { u32::load_shared(word) }, Ordering::Relaxed);
                }
            }
        }
    };
    CpuExecutor::new().run("chain", LaunchConfig::new(1u32, 96u32).with_shared_bytes(16), &body).unwrap();
    assert_eq!(seen.load(Ordering::Relaxed), 7);
}

/// P7, the other direction: a thread that only arrives is not ordered after anything by the
/// phase, so its read of a word that a waiting thread writes after the phase is a race.
#[test]
fn p7_an_arriving_thread_is_not_ordered_after_the_waiters() {
    let body = || {
        let tid = thread_idx_x();
        let word = dynamic_shared_address();
        let barrier = barrier(4, 64);
        if tid < 32 {
            barrier.sync();
            if tid == 0 {
                // SAFETY: 4 bytes of the block's shared memory, used only as this word.
                unsafe { u32::store_shared(word, 1) };
            }
        } else {
            barrier.arrive();
            if tid == 32 {
                // SAFETY: as above.
                let _ = unsafe { u32::load_shared(word) };
            }
        }
    };
    let error = CpuExecutor::deterministic().run("arrive_then_read", LaunchConfig::new(1u32, 64u32).with_shared_bytes(16), &body).unwrap_err();
    assert!(matches!(error, ferrocuda_device::cpu::CpuError::SharedMemoryRace(_)), "{error:?}");
}

/// The ids below 4 belong to the block barriers' kinds (audit P4): a named barrier there is
/// refused (at compile time in a `const`, as a panic here).
#[test]
#[should_panic(expected = "named barrier ids are 4..=15")]
fn p4_named_barrier_ids_of_the_block_barriers_are_refused() {
    let id = std::hint::black_box(3);
    let _ = barrier(id, 64);
}

/// Audit 2026-11-27f F12-3: a named barrier counts warps, as a GPU does ("marks warps' arrival
/// at barrier", in multiples of the warp size): a warp whose other lanes exited, and a partial
/// last warp, count 32. On an H200 `(block, count, live)` = (32, 32, 16), (48, 64, 48) and
/// (64, 64, 40) completed; the executor called each a deadlock. A warp that exited entirely
/// does not arrive (64, 64, 32 hangs a GPU), and the executor still reports it.
#[test]
fn f12_3_named_barriers_count_warps_with_exited_lanes_and_partial_warps_as_a_gpu_does() {
    for (block, count, live) in [(32u32, 32u32, 16u32), (48, 64, 48), (64, 64, 40), (64, 64, 64)] {
        let passed: Vec<AtomicU32> = (0..block).map(|_| AtomicU32::new(0)).collect();
        let body = || {
            let tid = thread_idx_x();
            if tid >= live {
                return;
            }
            barrier(4, count).sync();
            passed[tid as usize].store(1, Ordering::Relaxed);
        };
        let run = CpuExecutor::new().with_watchdog(std::time::Duration::from_secs(5)).run("named_exit", LaunchConfig::new(1u32, block), &body);
        assert!(run.is_ok(), "block {block}, count {count}, live {live}: {run:?}");
        let through = passed.iter().filter(|p| p.load(Ordering::Relaxed) == 1).count() as u32;
        assert_eq!(through, live, "block {block}, count {count}, live {live}");
    }
    let body = || {
        if thread_idx_x() >= 32 {
            return;
        }
        barrier(4, 64).sync();
    };
    let hung = CpuExecutor::new().with_watchdog(std::time::Duration::from_secs(2)).run("named_exit", LaunchConfig::new(1u32, 64u32), &body);
    assert!(hung.is_err(), "a whole warp that exited does not arrive: the phase never completes (a GPU hangs)");
}

/// Audit 2026-11-27f F12-3: two thread counts for one phase of one named barrier (warp 0
/// `sync`s with 64, warp 1 `arrive`s with 32) raised `CUDA_ERROR_ILLEGAL_INSTRUCTION` on an
/// H200; the executor said `Ok`. Now it is a fault here too, naming both counts.
#[test]
fn f12_3_two_thread_counts_in_one_named_barrier_phase_are_a_fault() {
    for other in [32u32, 64] {
        let body = || {
            if thread_idx_x() < 32 {
                barrier(4, 64).sync();
            } else {
                barrier(4, other).arrive();
            }
        };
        let run = CpuExecutor::new().with_watchdog(std::time::Duration::from_secs(5)).run("named_mixed", LaunchConfig::new(1u32, 64u32), &body);
        if other == 64 {
            assert!(run.is_ok(), "{run:?}");
        } else {
            let text = run.unwrap_err().to_string();
            assert!(text.contains("two thread counts (64 and 32)") && text.contains("CUDA_ERROR_ILLEGAL_INSTRUCTION"), "{text}");
        }
    }
}
