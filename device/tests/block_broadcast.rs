//! `RuntimeBlockReduce::reduce_broadcast` / `sum_broadcast` (issue 30, session 15): CUB's
//! `Reduce` then `if (threadIdx.x == 0) shared = then(total); __syncthreads();` in the source's
//! 2 barriers, on the CPU executor (race detector on: `CpuExecutor::new()`; the deterministic
//! schedule too).

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::block::RuntimeBlockReduce;
use ferrocuda_device::block_scratch;
use ferrocuda_device::cpu::{CpuError, CpuExecutor, LaunchConfig};
use ferrocuda_device::sync::sync_threads_count;
use ferrocuda_device::thread::{block_size, rank_in_block};

/// Every thread gets `then(sum)`, `then` runs once per block, at block sizes of one thread, one
/// partial warp, one warp, partial last warps and whole warps up to 1024, in 1-D and 3-D
/// blocks.
#[test]
fn p30_3_sum_broadcast_hands_thread_0s_value_to_every_thread_at_any_block_size() {
    for (x, y, z) in [(1u32, 1u32, 1u32), (7, 1, 1), (32, 1, 1), (33, 1, 1), (100, 1, 1), (256, 1, 1), (1000, 1, 1), (1024, 1, 1), (8, 4, 3), (16, 2, 2)] {
        for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
            let calls = AtomicU32::new(0);
            let wrong = AtomicU32::new(0);
            let config = LaunchConfig::new(2u32, (x, y, z));
            executor
                .run("p30_sum_broadcast", config, &|| {
                    let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
                    let got = reduce.sum_broadcast(rank_in_block() + 1, |total| {
                        calls.fetch_add(1, Ordering::Relaxed);
                        2 * total + 1
                    });
                    let n = block_size();
                    if got != n * (n + 1) + 1 {
                        wrong.fetch_add(1, Ordering::Relaxed);
                    }
                })
                .unwrap();
            assert_eq!(calls.load(Ordering::Relaxed), 2, "block ({x}, {y}, {z}): `then` runs once per block");
            assert_eq!(wrong.load(Ordering::Relaxed), 0, "block ({x}, {y}, {z}): a thread got another value");
        }
    }
}

/// No trailing barrier, yet reductions and broadcasts in a row (one reducer, a loop; two
/// reducers on one scratch; another collective between; `f32` and `u32` slots) are ordered:
/// the race detector finds nothing and every round's value is right.
#[test]
fn p30_3_broadcasts_in_a_row_and_between_other_collectives_are_ordered() {
    for threads in [64u32, 96, 1024] {
        let wrong = AtomicU32::new(0);
        let body = || {
            let scratch = block_scratch!(u32);
            let (a, b) = (RuntimeBlockReduce::new(scratch), RuntimeBlockReduce::new(scratch));
            let floats = RuntimeBlockReduce::new(block_scratch!(f32));
            let n = block_size();
            for round in 0..3u32 {
                let s = a.sum_broadcast(round, |t| t + 1);
                let m = b.reduce_broadcast(rank_in_block(), u32::max, |t| t);
                let all = a.sum_all(1);
                let f = floats.sum_broadcast(1.0f32, |t| t * 0.5);
                let g = floats.reduce_broadcast(rank_in_block() as f32, f32::max, f64::from);
                let ok = s == round * n + 1 && m == n - 1 && all == n && f == n as f32 * 0.5 && g == (n - 1) as f64;
                if !ok {
                    wrong.fetch_add(1, Ordering::Relaxed);
                }
            }
        };
        if let Err(error) = CpuExecutor::new().run("p30_broadcast_rounds", LaunchConfig::new(1u32, threads), &body) {
            panic!("{threads} threads: {error}");
        }
        assert_eq!(wrong.load(Ordering::Relaxed), 0, "{threads} threads");
    }
}

/// G13R-2's rule holds here too: a warp that returned before the collective is reported, not
/// folded in silently.
#[test]
fn p30_3_a_thread_that_returned_before_a_broadcast_is_reported() {
    let result = CpuExecutor::new().run("p30_broadcast_returned", LaunchConfig::new(1u32, 128u32), &|| {
        let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
        let _ = reduce.sum_broadcast(1, |t| t);
        if rank_in_block() >= 96 {
            return;
        }
        let _ = reduce.sum_broadcast(1, |t| t);
    });
    match result {
        Err(CpuError::KernelPanic(p)) => assert!(p.message.contains("did not reach this block collective"), "{}", p.message),
        other => panic!("expected the G13R-2 report, got {other:?}"),
    }
}

/// The broadcast's 2 barriers: counted with `sync_threads_count`'s barrier beside them (the CPU
/// executor counts a block's barrier generations through `barrier.red.popc`'s result only, so
/// this checks what every thread sees after the call: the value, and that a following
/// `sync_threads_count` still finds the whole block, i.e. no thread is held in a barrier of
/// the broadcast).
#[test]
fn p30_3_after_a_broadcast_the_whole_block_meets_at_the_next_barrier() {
    let wrong = AtomicU32::new(0);
    CpuExecutor::new()
        .run("p30_broadcast_then_barrier", LaunchConfig::new(3u32, 200u32), &|| {
            let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
            let s = reduce.sum_broadcast(1.0f32, |t| t.sqrt());
            if sync_threads_count(true) != 200 || s != 200f32.sqrt() {
                wrong.fetch_add(1, Ordering::Relaxed);
            }
        })
        .unwrap();
    assert_eq!(wrong.load(Ordering::Relaxed), 0);
}
