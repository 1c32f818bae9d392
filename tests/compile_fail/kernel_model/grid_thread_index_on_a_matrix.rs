// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 20, 2-D outputs: a `DisjointMatrix` takes only a `ThreadCell`; a 1-D `ThreadIndex`
// (thread t owns element t) would overlap thread (x, y)'s element y * cols + x.
use ferrocuda_device::global::{DisjointMatrix, unique_index};

#[kernel(cols(out = cols))]
pub fn overlap(mut out: DisjointMatrix<u32>, cols: u32) {
    if let Some(element) = out.get_mut(unique_index()) {
        *element = 1;
    }
}

fn main() {}
