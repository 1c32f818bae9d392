//! Fixtures of the held-out review of 2026-11-28 (`audit/2026-11-28/FINDINGS.md`, `G13-*`):
//! kernels that are deliberately wrong in ways only the CPU executor can see.

use ferrocuda_device::global::{AtomicSlice, DisjointSlice, ThreadIndex, grid_stride};
use ferrocuda_device::kernel;

/// Host state the G13-1 kernels leave behind (CPU executor only: the GPU build has no `std`).
#[cfg(not(target_arch = "nvptx64"))]
pub mod stash {
    use core::cell::RefCell;

    use ferrocuda_device::global::{AtomicSlice, ThreadIndex};

    std::thread_local! {
        /// The output handle `g13_1_stash_output` keeps.
        pub static OUTPUT: RefCell<Option<AtomicSlice<u32>>> = const { RefCell::new(None) };
        /// The witness `g13_1_stash_witness` keeps (phase 0) and uses (phase 1).
        pub static WITNESS: RefCell<Option<ThreadIndex>> = const { RefCell::new(None) };
    }

    /// Takes the handle a `g13_1_stash_output` launch left on this OS thread, if any.
    pub fn take_output() -> Option<AtomicSlice<u32>> {
        OUTPUT.with(|o| o.borrow_mut().take())
    }
}

/// G13-1, deliberately wrong (CPU executor only): thread 0 keeps its output handle in a host
/// thread-local, which outlives the launch on the OS thread that ran it. On the GPU the body
/// only stores 1 to element 0.
#[kernel]
pub fn g13_1_stash_output(out: AtomicSlice<u32>) {
    if ferrocuda_device::thread::thread_idx_x() == 0 {
        out.store(0, 1);
        #[cfg(not(target_arch = "nvptx64"))]
        stash::OUTPUT.with(|o| *o.borrow_mut() = Some(out));
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

/// G13-1, the lifetime form (CPU executor only): output handles have no lifetime, so a kernel
/// body can leak its `AtomicSlice` (`Box::leak` gives a `&'static` one) and hand the
/// `&'static Atomic<u32>` of element 0 to a host thread that stores `value` to it after
/// `delay_ms`, long after the launch returned and its buffer may be gone. On the GPU the body
/// only stores 1 to element 0.
#[kernel]
pub fn g13_1_leak_output(out: AtomicSlice<u32>, value: u32, delay_ms: u32) {
    if ferrocuda_device::thread::thread_idx_x() == 0 {
        out.store(0, 1);
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let out: &'static AtomicSlice<u32> = Box::leak(Box::new(out));
            let cell = out.at(0);
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(delay_ms as u64));
                cell.store(value);
            });
        }
    }
    let _ = (value, delay_ms);
}
