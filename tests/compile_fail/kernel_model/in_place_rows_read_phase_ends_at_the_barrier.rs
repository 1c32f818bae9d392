// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 30: `InPlaceRows` lends the whole row only until the phase barrier (`write_own`
// consumes the read phase): a row slice kept past it could read another thread's column while
// that thread writes it. And the output gives one read phase per thread (`read_row` takes it).
use ferrocuda_device::global::partition::InPlaceRows;
use ferrocuda_device::global::{DisjointSlice, block_row};

#[kernel(cols(x = 8))]
pub fn kept(x: DisjointSlice<u32, InPlaceRows>) {
    let Some(read) = x.read_row(block_row()) else { return };
    let row = read.row();
    let mut write = read.write_own();
    if let Some(v) = write.row_mut().get_mut(0) {
        *v = row[1];
    }
    let _ = x.read_row(block_row());
}

fn main() {}
