//! Session 23's gaps round after issue 30's tenth held-out port (bench/ports10/RESULTS.md), on
//! the CPU executor (race detector on; the deterministic schedule too).

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig};
use ferrocuda_device::thread::{block_idx_x, thread_idx_x};
use ferrocuda_device::unroll::{counted, counted_loads_first};

/// Gap 4 (a short loop over a run-time count, vLLM's `for k_idx < k` over a token's experts):
/// `unroll::counted::<4>` and `unroll::counted_loads_first::<4, _>` in a kernel, each thread a
/// gather over `k` entries of a map with a scale (`k` the block index: 0 to 13, whole rounds of
/// four, tails of 1 to 3 and none), out-of-range map entries read as zero (the branch-free
/// `get(..).copied().unwrap_or_default()` load). Both give the plain loop's sums bit for bit:
/// the same additions in the same order.
#[test]
fn p30_ports10_gap4_counted_unroll_sums_as_the_plain_loop_at_every_count() {
    let values: Vec<f32> = (0..97).map(|i| (i as f32 * 0.37).sin()).collect();
    // Entries past `values` (>= 97) stand for rows outside the buffer.
    let map: Vec<u32> = (0..14 * 14).map(|i| (i * 29 + 3) % 101).collect();
    let scales: Vec<f32> = (0..14 * 14).map(|i| 0.5 + (i % 7) as f32 * 0.25).collect();
    for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
        let wrong = AtomicU32::new(0);
        let checked = AtomicU32::new(0);
        executor
            .run("s23_counted_unroll", LaunchConfig::new(14u32, 32u32), &|| {
                let k = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let (map, scales) = (&map[k * 14..k * 14 + k], &scales[k * 14..k * 14 + k]);
                let at = |e: usize| values.get(map[e] as usize + t % 3).copied().unwrap_or_default();
                let mut plain = 0.0f32;
                for (e, &scale) in scales.iter().enumerate() {
                    plain += scale * at(e);
                }
                let mut by_counted = 0.0f32;
                counted::<4>(map.len(), |e| by_counted += scales[e] * at(e));
                let mut by_loads_first = 0.0f32;
                counted_loads_first::<4, _>(map.len(), at, |e, v| by_loads_first += scales[e] * v);
                if plain.to_bits() != by_counted.to_bits() || plain.to_bits() != by_loads_first.to_bits() {
                    wrong.fetch_add(1, Ordering::Relaxed);
                }
                checked.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        assert_eq!(wrong.load(Ordering::Relaxed), 0, "a thread's unrolled sum differs from its plain loop's");
        assert_eq!(checked.load(Ordering::Relaxed), 14 * 32);
    }
}
