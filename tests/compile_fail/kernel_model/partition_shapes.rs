// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 30: a row-major partition needs its width from the attribute (`BlockRows`), a 3-D one
// rows and columns (`Cells3d`: `cols(out = (rows, cols))`), a row-tile one its width and tile
// (`RowTiles`: `cols(out = (cols, tile))`), and a 1-D one none.
use ferrocuda_device::global::DisjointSlice;
use ferrocuda_device::global::partition::{BlockRows, Cells3d, RowTiles, Threads};

#[kernel]
pub fn no_width(out: DisjointSlice<u32, BlockRows>) {
    let _ = out;
}

#[kernel(cols(out = n))]
pub fn one_number_for_3d(out: DisjointSlice<u32, Cells3d>, n: u32) {
    let _ = out;
}

#[kernel(cols(out = n))]
pub fn width_without_tile(out: DisjointSlice<u32, RowTiles>, n: u32) {
    let _ = out;
}

#[kernel(cols(out = n))]
pub fn width_for_1d(out: DisjointSlice<u32, Threads>, n: u32) {
    let _ = out;
}

fn main() {}
