//! Held-out review 2 (audit 2026-11-28, `audit/2026-11-28/FINDINGS-review2.md`): repros of
//! the findings G13R-n on the CPU executor, each beside a control that follows the rule.

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::block::{BlockScratch, RuntimeBlockReduce};
use ferrocuda_device::block_scratch;
use ferrocuda_device::cpu::{CpuError, CpuExecutor, LaunchConfig};
use ferrocuda_device::shared_array;
use ferrocuda_device::thread::thread_idx_x;

/// A reducer made by a helper: each call of the helper is the same `block_scratch!` site, so
/// two reducers made by it share both sets of slots.
fn reducer() -> RuntimeBlockReduce<u32> {
    RuntimeBlockReduce::new(block_scratch!(u32))
}

/// G13R-1 is fixed by keeping the trailing barrier on every reduction (the spare set is still
/// used, but nothing relies on a reducer owning it): each case below ran into a
/// `SharedMemoryRace` before the fix and must now run clean with the race detector on.
fn expect_ordered(name: &str, body: &(dyn Fn() + Sync)) {
    if let Err(error) = CpuExecutor::new().run(name, LaunchConfig::new(1u32, 128u32), body) {
        panic!("{name}: expected no race after the G13R-1 fix, got {error}");
    }
}

/// G13R-1 (a): two `RuntimeBlockReduce`s over one `BlockScratch` (it is `Copy`): both take the
/// spare set in their second reductions, with no barrier between the first one's reads and
/// the second one's writes.
#[test]
fn g13r_1_two_runtime_reducers_on_one_copied_scratch_are_ordered() {
    let body = || {
        let scratch: BlockScratch<u32> = block_scratch!(u32);
        let (a, b) = (RuntimeBlockReduce::new(scratch), RuntimeBlockReduce::new(scratch));
        let _ = a.sum(1);
        let _ = b.sum(1);
        let _ = a.sum(thread_idx_x());
        let _ = b.sum(2 * thread_idx_x());
    };
    expect_ordered("g13r_1_copied_scratch", &body);
}

/// G13R-1 (b): `BlockScratch::double(s, s)`: the "spare" set is the first set, so the second
/// reduction, which leaves out its trailing barrier, is followed by the third one's writes to
/// the same slots. (`double` is deprecated since one set of slots serves every reduction; it
/// keeps `first`.)
#[test]
#[allow(deprecated)]
fn g13r_1_double_scratch_with_one_array_twice_is_ordered() {
    let body = || {
        let slots = shared_array![u32; 32];
        let reduce = RuntimeBlockReduce::new(BlockScratch::double(slots, slots));
        for round in 0..3u32 {
            let _ = reduce.sum(thread_idx_x() + round);
        }
    };
    expect_ordered("g13r_1_double_same_array", &body);
}

/// G13R-1 (c): two reducers made by one helper (one `block_scratch!` site, so one pair of
/// arrays), no `Copy` needed.
#[test]
fn g13r_1_two_runtime_reducers_from_one_helper_are_ordered() {
    let body = || {
        let (a, b) = (reducer(), reducer());
        let _ = a.max(1);
        let _ = b.max(1);
        let _ = a.sum(thread_idx_x());
        let _ = b.sum(thread_idx_x());
    };
    expect_ordered("g13r_1_helper_site", &body);
}

/// Control for G13R-1: one reducer, four reductions in a row (the pattern the docs describe),
/// and a new reducer per loop iteration at one site: no race, right sums.
#[test]
fn g13r_1_control_one_reducer_per_site_is_correct() {
    let sums = AtomicU32::new(0);
    let body = || {
        for _ in 0..2 {
            let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
            for round in 0..4u32 {
                if let Some(s) = reduce.sum(thread_idx_x() + round) {
                    sums.fetch_add(s, Ordering::Relaxed);
                }
            }
        }
    };
    CpuExecutor::new().run("g13r_1_control", LaunchConfig::new(1u32, 128u32), &body).unwrap();
    // Each round: sum of t + round over 128 threads = 8128 + 128 round; rounds 0..4, twice.
    assert_eq!(sums.load(Ordering::Relaxed), 2 * (4 * 8128 + 128 * 6));
}

/// G13R-1 (d): the spare set of a `BlockScratch::double(first, second)` given to another
/// collective (`BlockReduce` over `BlockScratch::new(second)`): the runtime reducer's second
/// reduction leaves out its trailing barrier, and the other collective writes the slots
/// while warp 0 still reads them.
#[test]
#[allow(deprecated)]
fn g13r_1_spare_slots_shared_with_another_collective_are_ordered() {
    use ferrocuda_device::block::BlockReduce;
    let body = || {
        let (first, second) = (shared_array![u32; 32], shared_array![u32; 32]);
        let runtime = RuntimeBlockReduce::new(BlockScratch::double(first, second));
        let fixed = BlockReduce::<u32, 128>::new(BlockScratch::new(second));
        let _ = runtime.sum(1);
        let _ = runtime.sum(thread_idx_x());
        let _ = fixed.sum(thread_idx_x());
    };
    expect_ordered("g13r_1_spare_shared", &body);
}

/// Probe (held: reported): a reducer called by half the block first (divergent), then by
/// all. The executor reports it: the reductions' counting barrier (G13R-2's check) sees half
/// the block, or the read of a slot that no thread wrote.
#[test]
fn g13r_divergent_runtime_reduce_is_reported() {
    let body = || {
        let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
        if thread_idx_x() < 64 {
            let _ = reduce.sum(1);
        }
        let _ = reduce.sum(1);
    };
    let error = CpuExecutor::new().run("g13r_divergent", LaunchConfig::new(1u32, 128u32), &body).expect_err("reported");
    assert!(matches!(error, CpuError::UninitialisedSharedRead { .. }) || error.to_string().contains("64 of the block's 128 threads did not reach"), "{error}");
}

/// G13R-2 (fixed): a warp that returns after two reductions; the third reduction would fold
/// the returned warp's partial from an earlier one (32 * 1000 + 96 instead of the 96 threads
/// that took part), silently, on the CPU executor as on a GPU. The reductions' first barrier
/// now counts the threads that arrived on the CPU executor (`sync_threads_count`, which counts
/// only those, P9), and a count short of the block is a panic naming how many returned.
#[test]
fn g13r_2_a_reduction_after_a_warp_returned_is_reported_or_counts_the_threads_that_took_part() {
    let sums = std::sync::Mutex::new(Vec::new());
    let body = || {
        let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
        let _ = reduce.sum(1000);
        let _ = reduce.sum(1000);
        if thread_idx_x() >= 96 {
            return;
        }
        if let Some(s) = reduce.sum(1) {
            sums.lock().unwrap().push(s);
        }
    };
    let result = CpuExecutor::new().run("g13r_2_exited_warp", LaunchConfig::new(1u32, 128u32), &body);
    match result {
        Ok(()) => assert_eq!(*sums.lock().unwrap(), vec![96], "a stale partial of the returned warp was folded in"),
        Err(error) => {
            let text = error.to_string();
            assert!(text.contains("32 of the block's 128 threads did not reach this block collective"), "{text}");
        }
    }
    assert!(sums.lock().unwrap().is_empty(), "reported before any thread got a sum");
}

/// G13R-2 for the other collectives that fold every warp's slot: `sum_all` and the
/// compile-time `BlockReduce` report a returned warp too.
#[test]
fn g13r_2_every_collective_reports_a_returned_warp() {
    use ferrocuda_device::block::BlockReduce;
    let all = || {
        let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
        let _ = reduce.sum_all(1);
        if thread_idx_x() < 32 {
            return;
        }
        let _ = reduce.sum_all(1);
    };
    let fixed = || {
        let reduce = BlockReduce::<u32, 128>::new(block_scratch!(u32));
        let _ = reduce.sum(1);
        if thread_idx_x() >= 64 {
            return;
        }
        let _ = reduce.sum(1);
    };
    for (name, body, returned) in [("g13r_2_sum_all", &all as &(dyn Fn() + Sync), 32), ("g13r_2_block_reduce", &fixed, 64)] {
        let error = CpuExecutor::new().run(name, LaunchConfig::new(1u32, 128u32), body).expect_err("reported");
        let text = error.to_string();
        assert!(text.contains(&format!("{returned} of the block's 128 threads did not reach")), "{name}: {text}");
    }
}

/// The paired reduction (`max_then_sum_all`, 2 barriers) on one scratch with other reducers
/// and itself in a row: right values and no race (its second set of slots is used by nothing
/// but paired calls, each writing it only after its first barrier).
#[test]
fn paired_max_then_sum_runs_beside_other_reductions_without_a_race() {
    let results = std::sync::Mutex::new(Vec::new());
    let body = || {
        let scratch = block_scratch!(u32);
        let (a, b) = (RuntimeBlockReduce::new(scratch), RuntimeBlockReduce::new(scratch));
        let t = thread_idx_x();
        for round in 0..3u32 {
            let (max, sum) = a.max_then_sum_all(t + round, |m| m - t);
            let other = b.sum_all(1);
            let (first, second) = b.sum_then_sum_all(t, |s| s / 128 + round);
            let again = a.max_then_sum_all(round, |m| m + 1);
            if t == 5 {
                results.lock().unwrap().push((max, sum, other, first, second, again));
            }
        }
    };
    CpuExecutor::new().run("paired", LaunchConfig::new(1u32, 128u32), &body).unwrap();
    let got = results.lock().unwrap().clone();
    let want: Vec<_> = (0..3u32)
        .map(|round| {
            let max = 127 + round;
            let sum: u32 = (0..128).map(|t| max - t).sum();
            let first: u32 = (0..128).sum();
            (max, sum, 128, first, 128 * (first / 128 + round), (round, 128 * (round + 1)))
        })
        .collect();
    assert_eq!(got, want);
}

/// The paired call's closure runs between its two barriers; a block collective inside it
/// (here another paired call, on another scratch) writes the library's second set while other
/// warps may still read it: the CPU executor's race detector reports it, as the rustdoc says.
#[test]
fn a_paired_call_inside_the_pairs_closure_is_reported() {
    let body = || {
        let outer = RuntimeBlockReduce::new(block_scratch!(u32));
        let inner = RuntimeBlockReduce::new(block_scratch!(u32));
        let t = thread_idx_x();
        let _ = outer.max_then_sum_all(t, |m| inner.max_then_sum_all(m - t, |x| x).1);
    };
    let error = CpuExecutor::new().run("paired_in_closure", LaunchConfig::new(1u32, 128u32), &body).expect_err("reported");
    assert!(matches!(error, CpuError::SharedMemoryRace { .. }), "{error}");
}

/// The output handle every thread rebuilds, as `launch_cpu` does (a pointer and a length).
struct Buffer<T>(*mut T, usize);
// SAFETY: the threads reach the buffer only through the output each rebuilds from it, as in a
// generated `launch_cpu`.
unsafe impl<T> Sync for Buffer<T> {}

impl<T> Buffer<T> {
    /// The buffer's start (a method, so that closures capture the whole `Buffer`).
    fn start(&self) -> *mut T {
        self.0
    }
}

/// An `InPlaceRows` output over `buffer` (what the generated CPU launcher builds per thread;
/// the launches below are 1-D, the requirement it checks).
fn in_place(buffer: &Buffer<u32>, cols: u32) -> ferrocuda_device::global::DisjointSlice<'_, u32, ferrocuda_device::global::InPlaceRows> {
    use ferrocuda_device::global::KernelOutput;
    // SAFETY: a live buffer of `buffer.1` elements, borrowed for the launch; 1-D launches.
    unsafe { KernelOutput::from_raw_parts(buffer.start(), buffer.1, cols) }
}

/// Held: the threads of warp 1 return before the read phase; warp 0 reads the whole row
/// (the sum of all 64 columns) and writes it to its own columns. The phase barrier opens
/// (exited threads do not hold it up) and the executor reports nothing.
#[test]
fn g13r_in_place_rows_with_a_returned_warp_completes() {
    use ferrocuda_device::global::block_row;
    let mut data: Vec<u32> = (0..64).collect();
    let buffer = Buffer(data.as_mut_ptr(), data.len());
    let body = || {
        if thread_idx_x() >= 32 {
            return;
        }
        let Some(read) = in_place(&buffer, 64).read_row(block_row()) else { return };
        let total: u32 = read.row().iter().sum();
        let mut write = read.write_own();
        for v in write.row_mut().iter_mut() {
            *v = total;
        }
    };
    CpuExecutor::new().run("g13r_in_place_returned_warp", LaunchConfig::new(1u32, 64u32), &body).unwrap();
    assert!(data[..32].iter().all(|&v| v == 2016), "{data:?}");
    assert_eq!(&data[32..], &(32..64).collect::<Vec<u32>>()[..]);
}

/// Held: threads that keep their read phase open (spinning on a flag that a thread sets only
/// after its own `write_own`) keep the phase barrier shut: a deadlock that the executor
/// reports, never a write that overtakes their reads.
#[test]
fn g13r_in_place_rows_phase_barrier_waits_for_readers_that_spin() {
    use ferrocuda_device::global::KernelOutput;
    use ferrocuda_device::global::{AtomicSlice, block_row};
    let mut data: Vec<u32> = (0..64).collect();
    let buffer = Buffer(data.as_mut_ptr(), data.len());
    let mut flag = [0u32; 1];
    let flag_buffer = Buffer(flag.as_mut_ptr(), 1);
    let body = || {
        // SAFETY: as `in_place`.
        let flag: AtomicSlice<u32> = unsafe { KernelOutput::from_raw_parts(flag_buffer.start(), 1, ()) };
        let Some(read) = in_place(&buffer, 64).read_row(block_row()) else { return };
        if thread_idx_x() == 0 {
            let mut write = read.write_own();
            if let Some(v) = write.row_mut().get_mut(0) {
                *v = 1000;
            }
            flag.store(0, 1);
        } else {
            while flag.load(0) == 0 {}
            let _seen = read.row()[0];
            let _ = read.write_own();
        }
    };
    let executor = CpuExecutor::new().with_watchdog(std::time::Duration::from_secs(5));
    let error = executor.run("g13r_in_place_spinning_readers", LaunchConfig::new(1u32, 64u32), &body).expect_err("a deadlock");
    // Reported as a spin nothing ends (its message says the block waits "for another block
    // (or for nothing)": thread 0 waits at the phase barrier for the spinning readers).
    assert!(matches!(error, CpuError::CrossBlockWait { .. }), "{error}");
    assert_eq!(data[0], 0, "thread 0 never passed the phase barrier");
}

/// G13R-3 (low, the executor's own memory model): a thread's first raw view of an output
/// (`as_mut_ptr`, a *safe* method) copies the whole output into its mirror with plain reads
/// while blocks on other workers write their own elements with plain stores: a data race in
/// the host process (Rust's model: UB), which a thread sanitizer reports
/// (`RUSTFLAGS=-Zsanitizer=thread`, nightly). Without one the results are right, as asserted
/// here: the mirror is read once, so no element looks changed that this thread did not change.
#[test]
fn g13r_3_a_safe_raw_view_copies_the_output_while_other_blocks_write_it() {
    use ferrocuda_device::global::{DisjointSlice, KernelOutput, unique_index};
    let mut data = vec![0u32; 64 * 256];
    let buffer = Buffer(data.as_mut_ptr(), data.len());
    let body = || {
        // SAFETY: as `in_place` (a 1-D launch, the `Threads` partition's requirement).
        let mut y: DisjointSlice<u32> = unsafe { KernelOutput::from_raw_parts(buffer.start(), buffer.1, ()) };
        if thread_idx_x() == 0 {
            let _ = y.as_mut_ptr(); // safe: makes this thread's mirror of all 16384 elements
        }
        let i = unique_index();
        if let Some(v) = y.get_mut(i) {
            *v = i.get() as u32 + 1;
        }
    };
    CpuExecutor::new().with_workers(2).run("g13r_3_mirror_copy", LaunchConfig::new(64u32, 256u32), &body).unwrap();
    assert!(data.iter().enumerate().all(|(i, &v)| v == i as u32 + 1));
}
