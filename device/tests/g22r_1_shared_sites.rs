//! Audit 2026-11-29b, G22R-1, on the CPU executor: `shared_array!` (and `multi_block_reduce!`,
//! `block_scratch!`, which expand to it) resolves the element type and length in a generated
//! module and the handle's type in the caller's block; the two readings must agree, or it does
//! not compile (tests/compile_fail/seams/g22r_1_*.rs). These tests cover what must still work:
//! readings that agree (a local item of the same value as its module-level namesake, an import
//! of the same item twice) give the full array on the executor, and a panic after shared
//! arrays of every kind is reported with its kernel, file, line, block and thread.

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::cpu::{CpuError, CpuExecutor, LaunchConfig};
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_idx_x, rank_in_block, thread_idx_x};
use ferrocuda_device::{block_scratch, multi_block_reduce, shared_array};

const LEN: usize = 96;
type Elem = u64;

mod sizes {
    pub const TILE: usize = 64;
}
use sizes::TILE;

/// A local `const` equal to its module-level namesake, a local `use` of the item the module
/// imports too, a local `type` naming the module's type: one reading each, so every site
/// compiles, and every index below `len()` is a distinct element of the executor's array.
#[test]
fn g22r_1_agreeing_readings_compile_and_give_the_whole_array() {
    let wrong = AtomicU32::new(0);
    CpuExecutor::deterministic()
        .run("g22r_1_agreeing", LaunchConfig::new(2u32, 32u32), &|| {
            const LEN: usize = 96;
            use crate::sizes::TILE;
            type Elem = u64;
            let a = shared_array![Elem; LEN];
            let b = shared_array![u32; TILE];
            let t = rank_in_block() as usize;
            for i in (t..a.len()).step_by(32) {
                a.set(i, (i as u64) << 32 | block_idx_x() as u64);
            }
            for i in (t..b.len()).step_by(32) {
                b.set(i, i as u32 * 3);
            }
            sync_threads();
            let ok = (0..a.len()).all(|i| a.get(i) == ((i as u64) << 32 | block_idx_x() as u64)) && (0..b.len()).all(|i| b.get(i) == i as u32 * 3);
            if !ok || a.len() != 96 || b.len() != 64 {
                wrong.fetch_add(1, Ordering::Relaxed);
            }
        })
        .unwrap();
    assert_eq!(wrong.load(Ordering::Relaxed), 0);
    let _ = (LEN, TILE, Elem::default());
}

/// A kernel with a `shared_array!`, a `multi_block_reduce!` and a `block_scratch!` whose thread
/// (5, 0, 0) of block (1, 0, 0) panics after using them: the report names the kernel, this
/// file, the line, the block and the thread (on the GPU the name now comes from the module's
/// names table, never from an address in shared memory; `.device-bin/fixshared/job.sh`).
#[test]
fn g22r_1_the_panic_report_after_shared_arrays_names_kernel_file_line_block_and_thread() {
    let line = AtomicU32::new(0);
    let error = CpuExecutor::deterministic()
        .run("g22r_1_reporting_kernel", LaunchConfig::new(2u32, 64u32), &|| {
            let tile = shared_array![Elem; LEN];
            let reduce = multi_block_reduce!(f32; 2);
            let scratch = block_scratch!(u32);
            let t = rank_in_block() as usize;
            for i in (t..tile.len()).step_by(64) {
                tile.set(i, i as u64);
            }
            let [s, n] = reduce.sum_all([1.0, t as f32]);
            let _ = (scratch, s, n);
            sync_threads();
            if block_idx_x() == 1 && thread_idx_x() == 5 {
                line.store(line!() + 1, Ordering::Relaxed);
                panic!("thread 5 of block 1 stops, tile[95] = {}", tile.get(95));
            }
        })
        .unwrap_err();
    let CpuError::KernelPanic(panic) = &error else { panic!("expected a kernel panic, got {error}") };
    assert_eq!(panic.kernel, "g22r_1_reporting_kernel", "{error}");
    assert!(panic.file.ends_with("g22r_1_shared_sites.rs"), "{error}");
    assert_eq!(panic.line, line.load(Ordering::Relaxed), "{error}");
    assert_eq!((panic.block, panic.thread), ([1, 0, 0], [5, 0, 0]), "{error}");
    assert_eq!(panic.message, "thread 5 of block 1 stops, tile[95] = 95", "{error}");
}
