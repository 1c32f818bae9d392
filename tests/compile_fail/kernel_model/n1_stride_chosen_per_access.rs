// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit N1: `get_strided_mut(i, stride, k)` with a stride chosen at each access let thread 0
// (stride 1, k 1) reach thread 1's element. A `DisjointPlanes`'s plane length comes from the
// buffer's length and the type's plane count, not from the access.
use ferrocuda_device::global::{DisjointPlanes, unique_index};

#[kernel]
pub fn overlap(mut y: DisjointPlanes<u32, 2>) {
    let i = unique_index();
    if let Some(v) = y.get_mut(i, 1, 1) {
        *v = 1;
    }
}

fn main() {}
