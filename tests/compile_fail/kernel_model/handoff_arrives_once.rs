// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 30: `arrive` takes the handoff output by value: a thread cannot arrive twice (a
// second ticket would let another block think it is last before every block has published).
use ferrocuda_device::global::partition::Handoff;
use ferrocuda_device::global::{AtomicSlice, DisjointSlice};

#[kernel(cols(partials = 1))]
pub fn twice(partials: DisjointSlice<u32, Handoff>, counter: AtomicSlice<u32>) {
    let _ = partials.arrive(counter.at(0));
    let _ = partials.arrive(counter.at(0));
}

fn main() {}
