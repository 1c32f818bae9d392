// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 20, 2-D outputs: a matrix output needs its row width, the same in every thread,
// named in the attribute; without it the kernel does not compile.
use ferrocuda_device::global::{DisjointMatrix, unique_cell};

#[kernel]
pub fn no_width(mut out: DisjointMatrix<u32>, cols: u32) {
    if let Some(element) = out.get_mut(unique_cell()) {
        *element = cols;
    }
}

fn main() {}
