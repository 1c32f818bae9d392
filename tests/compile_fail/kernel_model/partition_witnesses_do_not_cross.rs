// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 30: each partition takes its own witness only. A `BlockRow` (a block's row) does not
// fit a `PerWarpRow`, a `WarpRow` does not fit `BlockRows`, a `ThreadIndex` reaches
// nothing of `BlockRows`, `Cells3d` or `Handoff` (no per-thread element access there).
use ferrocuda_device::global::partition::{BlockRows, Cells3d, Handoff};
use ferrocuda_device::global::{DisjointSlice, PerWarpRow, block_row, unique_cell_3d, unique_index, warp_row};

#[kernel(cols(rows = 32, blocks = 32, cube = (4, 4), partials = 1))]
pub fn crossed(
    mut rows: PerWarpRow<u32>,
    mut blocks: DisjointSlice<u32, BlockRows>,
    mut cube: DisjointSlice<u32, Cells3d>,
    mut partials: DisjointSlice<u32, Handoff>,
) {
    let _ = rows.row_mut(block_row());
    let _ = blocks.row_mut(warp_row());
    let _ = blocks.get_mut(unique_index());
    let _ = cube.get_mut(unique_index());
    let _ = blocks.row_mut(unique_cell_3d());
    let _ = partials.get_mut(unique_index());
}

fn main() {}
