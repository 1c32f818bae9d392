// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 20, 2-D outputs: witnesses have no public constructor (fields are private).
use ferrocuda_device::global::{DisjointMatrix, ThreadCell, WarpRow};

#[kernel(cols(out = 8))]
pub fn forged(mut out: DisjointMatrix<u32>) {
    let cell = ThreadCell { row: 0, col: 0 };
    let _ = WarpRow { row: 0, lane: 0 };
    if let Some(element) = out.get_mut(cell) {
        *element = 1;
    }
}

fn main() {}
