// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 30 (session 18's `SegmentRows<WIDTH>`): a segment of 12 lanes does not divide the
// warp, so segment 2 (threads 24..36) would straddle two warps, whose lanes no shuffle joins:
// the partition's `VALID` constant fails when the output is built.
use ferrocuda_device::global::partition::SegmentRows;
use ferrocuda_device::global::{DisjointSlice, segment_row};

#[kernel(cols(out = 24))]
pub fn twelve_lanes(mut out: DisjointSlice<u32, SegmentRows<12>>) {
    let _ = out.row_mut(segment_row::<12>());
}

fn main() {}
