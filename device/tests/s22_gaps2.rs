//! Session 22's second gaps round after issue 30's tenth held-out port (bench/ports10/RESULTS.md),
//! on the CPU executor (race detector on; the deterministic schedule too): checked shared-memory
//! accesses at a data-chosen index (gap 7, vLLM's `preprocessTopkIdKernel`: `smem[topk_id]`).

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig};
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::shared_array;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::thread_idx_x;

/// A table of `len` entries in dynamic shared memory, filled by `set_checked` from threads whose
/// index runs past it (those return `false` and write nothing), then read by `get_checked` at
/// ids from "data" on both sides of the end: `Some(entry)` inside, `None` outside, with no panic
/// and no race reported, for a launch whose dynamic size is shorter than the block.
#[test]
fn p30_ports10_gap7_shared_get_checked_is_some_inside_and_none_outside() {
    for len in [0usize, 1, 37, 64] {
        for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
            let wrong = AtomicU32::new(0);
            let written = AtomicU32::new(0);
            let config = LaunchConfig::new(2u32, 64u32).with_shared_bytes((len * 4) as u32);
            executor
                .run("s22_shared_get_checked", config, &|| {
                    let table = dynamic_shared::<i32>();
                    let t = thread_idx_x() as usize;
                    if table.set_checked(t, 1000 + t as i32) {
                        written.fetch_add(1, Ordering::Relaxed);
                    }
                    sync_threads();
                    // An id "from data": any value, in and out of the table.
                    for id in [t, t * 7 % 101, usize::MAX - t] {
                        let want = (id < len).then(|| 1000 + id as i32);
                        if table.get_checked(id) != want {
                            wrong.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
                .unwrap();
            assert_eq!(wrong.load(Ordering::Relaxed), 0, "len {len}: a read gave another value");
            assert_eq!(written.load(Ordering::Relaxed) as usize, 2 * len.min(64), "len {len}: one write per entry per block");
        }
    }
}

/// The same on a `shared_array!` (its length a constant): the check is the only test.
#[test]
fn p30_ports10_gap7_shared_array_get_checked_and_set_checked() {
    let wrong = AtomicU32::new(0);
    CpuExecutor::new()
        .run("s22_shared_array_get_checked", LaunchConfig::new(1u32, 32u32), &|| {
            let table = shared_array![u32; 20];
            let t = thread_idx_x() as usize;
            let stored = table.set_checked(t, 3 * t as u32);
            sync_threads();
            let got = table.get_checked(31 - t);
            if stored != (t < 20) || got != (31 - t < 20).then(|| 3 * (31 - t) as u32) {
                wrong.fetch_add(1, Ordering::Relaxed);
            }
        })
        .unwrap();
    assert_eq!(wrong.load(Ordering::Relaxed), 0);
}
