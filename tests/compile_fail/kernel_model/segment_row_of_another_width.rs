// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 30: the width is part of the witness's type. An 8-lane `SegmentRow<8>` on a
// `SegmentRows<16>` output would give rows `t / 8` of a 16-lane map (two segments on one
// row), and a `WarpRow` is not a `SegmentRow<32>` of another output: neither compiles.
use ferrocuda_device::global::partition::SegmentRows;
use ferrocuda_device::global::{DisjointSlice, segment_row, warp_row};

#[kernel(cols(sixteen = 64, warp = 64))]
pub fn widths(mut sixteen: DisjointSlice<u32, SegmentRows<16>>, mut warp: DisjointSlice<u32, SegmentRows<32>>) {
    let _ = sixteen.row_mut(segment_row::<8>());
    let _ = warp.row_mut(warp_row());
}

fn main() {}
