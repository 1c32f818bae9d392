// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 20, 2-D outputs: one thread cannot hold two `&mut` into its row at once (two
// references to one element through `get_mut(0)` twice): each borrows the row view.
use ferrocuda_device::global::{PerWarpRow, warp_row};

#[kernel(cols(out = 64))]
pub fn twice(mut out: PerWarpRow<u32>) {
    if let Some(mut row) = out.row_mut(warp_row()) {
        let a = row.get_mut(0);
        let b = row.get_mut(0);
        if let (Some(a), Some(b)) = (a, b) {
            *a = 1;
            *b = 2;
        }
    }
}

fn main() {}
