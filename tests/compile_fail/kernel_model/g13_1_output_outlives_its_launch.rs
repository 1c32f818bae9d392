// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit 2026-11-28, G13-1: on the CPU executor a kernel body is host code with `std`. Output
// handles were a pointer and a length with no lifetime (`'static`), so a body could keep one
// past its launch and write the caller's freed buffer. They now carry the launch's borrow of
// the buffer (`DisjointSlice<'a, T, P>`), and nothing made from one can be kept past the
// launch: not the handle (a leaked box, a thread-local), not an element (a `'static` thread),
// not a view made from it by value (`LastBlock`).
use std::cell::RefCell;

use ferrocuda_device::global::partition::Handoff;
use ferrocuda_device::global::{AtomicSlice, DisjointSlice, LastBlock, unique_index};

thread_local! {
    static KEPT: RefCell<Option<AtomicSlice<'static, u32>>> = const { RefCell::new(None) };
}

// The review's repro: a leaked handle, an element for a host thread that stores after the launch.
#[kernel]
pub fn leak_an_atomic(out: AtomicSlice<u32>) {
    let out: &'static AtomicSlice<u32> = Box::leak(Box::new(out));
    let cell = out.at(0);
    std::thread::spawn(move || cell.store(7));
}

// An element reached through its witness, for a thread that outlives the launch.
#[kernel]
pub fn leak_an_element(out: DisjointSlice<u32>) {
    let out = Box::leak(Box::new(out));
    if let Some(element) = out.get_mut(unique_index()) {
        std::thread::spawn(move || *element = 7);
    }
}

// The handle kept in a thread-local (which needs `'static`).
#[kernel]
pub fn keep_in_a_thread_local(out: AtomicSlice<u32>) {
    KEPT.with(|kept| *kept.borrow_mut() = Some(out));
}

// A view made from the handle by value: the last block's view of a handoff.
#[kernel(cols(partials = 1))]
pub fn leak_the_last_block(partials: DisjointSlice<u32, Handoff>, counter: AtomicSlice<u32>) {
    if let Some(last) = partials.arrive(counter.at(0)) {
        let _kept: &'static LastBlock<u32> = Box::leak(Box::new(last));
    }
}

// Behind the macro: the CPU executor makes an output only for the borrow it was lent, so a
// `'static` output of a local buffer does not compile even where `#[kernel]` is not involved.
pub fn parts_of_a_local_buffer() {
    let mut buffer = vec![0u32; 4];
    let parts = ferrocuda_device::__private::args::OutputParts::new(&mut buffer);
    // SAFETY: (none: the point is that this does not compile).
    let _forever: AtomicSlice<'static, u32> = unsafe { parts.output(()) };
}

fn main() {}
