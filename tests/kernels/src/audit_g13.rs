//! Fixtures of the held-out review of 2026-11-28 (`audit/2026-11-28/FINDINGS.md`, `G13-*`):
//! kernels that are deliberately wrong in ways only the CPU executor can see.

use ferrocuda_device::global::{AtomicSlice, DisjointSlice, ThreadIndex, grid_stride};
use ferrocuda_device::kernel;

/// Host state the G13-1 witness kernel leaves behind (CPU executor only: the GPU build has no
/// `std`). An output handle cannot be kept here any more: it carries the launch's borrow of
/// its buffer (`AtomicSlice<'a, T>`), and a thread-local needs `'static`
/// (`tests/compile_fail/kernel_model/g13_1_output_outlives_its_launch.rs`).
#[cfg(not(target_arch = "nvptx64"))]
pub mod stash {
    use core::cell::RefCell;

    use ferrocuda_device::global::ThreadIndex;

    std::thread_local! {
        /// The witness `g13_1_stash_witness` keeps (phase 0) and uses (phase 1).
        pub static WITNESS: RefCell<Option<ThreadIndex>> = const { RefCell::new(None) };
    }
}

/// G13-1, deliberately wrong (CPU executor only): in phase 0, thread 5 keeps the last witness
/// of its grid-stride walk in a host thread-local; in phase 1 (a later launch), the thread
/// running there writes 2 through that witness, then every thread writes 1 to its own
/// elements. The witness's owner check compares the 1-D thread index only, which a later
/// launch repeats. On the GPU only the own elements are written.
#[kernel]
pub fn g13_1_stash_witness(mut out: DisjointSlice<u32>, phase: u32) {
    let mut last: Option<ThreadIndex> = None;
    for i in grid_stride(out.len()) {
        if let Some(o) = out.get_mut(i) {
            *o = 1;
        }
        last = Some(i);
    }
    #[cfg(not(target_arch = "nvptx64"))]
    if ferrocuda_device::thread::thread_idx_x() == 5 {
        if phase == 0 {
            stash::WITNESS.with(|w| *w.borrow_mut() = last);
        } else if let Some(theirs) = stash::WITNESS.with(|w| w.borrow_mut().take())
            && let Some(o) = out.get_mut(theirs)
        {
            *o = 2;
        }
    }
    let _ = (phase, last);
}

/// G13-1, what still works with the lifetime (CPU executor and GPU): the output moved into a
/// struct of the kernel's own (naming its lifetime), and, on the CPU executor, an element
/// reference handed to a scoped host thread that ends inside the body. The handle and what is
/// made from it live as long as the launch's borrow and no longer: a `Box::leak` or a
/// `std::thread::spawn` of them does not compile
/// (`tests/compile_fail/kernel_model/g13_1_output_outlives_its_launch.rs`).
#[kernel]
pub fn g13_1_output_in_a_struct(out: AtomicSlice<u32>, mut own: DisjointSlice<u32>) {
    struct Outputs<'a> {
        counts: AtomicSlice<'a, u32>,
    }
    let outputs = Outputs { counts: out };
    outputs.counts.add(0, 1);
    if let Some(o) = own.get_mut(ferrocuda_device::global::unique_index()) {
        *o = 1;
    }
    #[cfg(not(target_arch = "nvptx64"))]
    if ferrocuda_device::thread::thread_idx_x() == 0 {
        let cell = outputs.counts.at(1);
        std::thread::scope(|scope| {
            scope.spawn(|| cell.add(1));
        });
    }
}
