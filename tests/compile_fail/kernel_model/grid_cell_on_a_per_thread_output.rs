// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 20, 2-D outputs: a `DisjointSlice` takes only a `ThreadIndex`; a `ThreadCell` is
// another map's witness.
use ferrocuda_device::global::{DisjointSlice, unique_cell};

#[kernel]
pub fn overlap(mut out: DisjointSlice<u32>) {
    if let Some(element) = out.get_mut(unique_cell()) {
        *element = 1;
    }
}

fn main() {}
