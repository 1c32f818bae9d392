// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit N1: `get_chunk_mut::<2>(0)` (elements 0..2) overlapped thread 1's `get_mut(1)`. A
// `DisjointSlice` has one map, element i for witness i: no chunks, no strides.
use ferrocuda_device::global::{DisjointSlice, unique_index};

#[kernel]
pub fn overlap(mut y: DisjointSlice<u32>) {
    let i = unique_index();
    if let Some(pair) = y.get_chunk_mut::<2>(i) {
        pair[1] = 1;
    }
    if let Some(mine) = y.get_strided_mut(i, 1, 1) {
        *mine = 2;
    }
}

fn main() {}
