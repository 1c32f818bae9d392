// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit N1: `once_per_block()` gave block b the index b, which thread b also holds, and a
// `DisjointSlice` took both: thread 1 of block 0 and thread 0 of block 1 wrote element 1.
// A block's index is a `BlockIndex`, which only a `PerBlock` output takes.
use ferrocuda_device::global::{DisjointSlice, once_per_block, unique_index};

#[kernel]
pub fn overlap(mut y: DisjointSlice<u32>) {
    if let Some(b) = once_per_block() {
        y[b] = 1;
    }
    y[unique_index()] = 2;
}

fn main() {}
