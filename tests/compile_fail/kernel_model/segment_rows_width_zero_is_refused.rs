// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 30: `SegmentRows<0>` (a segment of no lanes: `t / 0` for its rows) is refused at
// compile time, for the output and for its witness and row walk alike.
use ferrocuda_device::global::partition::SegmentRows;
use ferrocuda_device::global::{DisjointSlice, segment_rows};

#[kernel(cols(out = 4))]
pub fn no_lanes(mut out: DisjointSlice<u32, SegmentRows<0>>, rows: u32) {
    for me in segment_rows::<0>(rows) {
        let _ = out.row_mut(me);
    }
}

fn main() {}
