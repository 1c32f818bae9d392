// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 20, 2-D outputs: a width that differs between threads would let two threads alias
// ((1, 0) with 10 columns and (2, 0) with 5 both reach element 10). A width that is not a
// by-value `u32` parameter must be a constant: a per-thread value does not compile.
use ferrocuda_device::global::{DisjointMatrix, unique_cell};
use ferrocuda_device::thread::thread_idx_x;

#[kernel(cols(out = thread_idx_x() + 1))]
pub fn per_thread_width(mut out: DisjointMatrix<u32>) {
    if let Some(element) = out.get_mut(unique_cell()) {
        *element = 1;
    }
}

fn main() {}
