//! Audit 2026-11-29c (review2): session 22's every-warp second-level fold of
//! `MultiBlockReduce`, at the block sizes its clamp must get right that session 21's test does
//! not list (31: one partial warp; 993: 32 warps, the last of one lane; 1023: the last warp of
//! 31 lanes), once and in a loop of rows (slots reused without a trailing barrier), on the CPU
//! executor with its race detector and shuffle checks, both schedules.

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig};
use ferrocuda_device::multi_block_reduce;
use ferrocuda_device::thread::{block_idx_x, block_size, rank_in_block};

#[test]
fn g22s_multi_block_reduce_at_partial_block_sizes_in_a_loop() {
    for threads in [1u32, 31, 33, 63, 993, 1023] {
        for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
            let calls = AtomicU32::new(0);
            let wrong = AtomicU32::new(0);
            executor
                .run("g22s_multi_block_reduce", LaunchConfig::new(2u32, threads), &|| {
                    let reduce = multi_block_reduce!(u32; 3);
                    let r = rank_in_block();
                    let n = block_size();
                    for round in 0..3u32 {
                        let got = reduce.sum_broadcast([1, r, r + round + block_idx_x()], |[a, b, c]| {
                            calls.fetch_add(1, Ordering::Relaxed);
                            [a, b + 1, c * 2]
                        });
                        let want = [n, n * (n - 1) / 2 + 1, 2 * (n * (n - 1) / 2 + n * (round + block_idx_x()))];
                        if got != want {
                            wrong.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
                .unwrap();
            assert_eq!(calls.load(Ordering::Relaxed), 6, "{threads} threads: `then` runs once per block and round");
            assert_eq!(wrong.load(Ordering::Relaxed), 0, "{threads} threads: a thread got another value");
        }
    }
}
