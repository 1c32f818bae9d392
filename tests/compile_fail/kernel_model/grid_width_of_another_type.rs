// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 20, 2-D outputs: the width parameter must be a `u32` (a `u64` or a slice is refused
// by name), and `cols` names only matrix outputs.
use ferrocuda_device::global::{DisjointMatrix, DisjointSlice, unique_cell};

#[kernel(cols(out = wide, flat = n))]
pub fn wrong_widths(mut out: DisjointMatrix<u32>, mut flat: DisjointSlice<u32>, wide: u64, n: u32) {
    let _ = (&mut flat, n, wide);
    if let Some(element) = out.get_mut(unique_cell()) {
        *element = 1;
    }
}

fn main() {}
