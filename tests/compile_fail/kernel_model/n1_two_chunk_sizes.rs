// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit N1: `get_chunk_mut::<4>(0)` (0..4) overlapped `get_chunk_mut::<2>(1)` (2..4). The
// chunk size is part of a `DisjointChunks`'s type, so every access cuts the buffer the same way.
use ferrocuda_device::global::{DisjointChunks, unique_index};

#[kernel]
pub fn overlap(mut y: DisjointChunks<u32, 4>) {
    let i = unique_index();
    let small: Option<&mut [u32; 2]> = y.get_mut(i);
    let _ = small;
    let _ = y.get_mut::<2>(i);
}

fn main() {}
