// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 20, 2-D outputs: a `PerWarpRow` takes only a `WarpRow`, a `PerBlockTile` only a
// `BlockTile`, a `PerBlock` only a `BlockIndex`: no witness of one map fits another.
use ferrocuda_device::global::{PerBlock, PerBlockTile, PerWarpRow, block_tile, once_per_block, warp_row};

#[kernel(cols(rows = 32, tiles = 32))]
pub fn overlap(mut rows: PerWarpRow<u32>, mut tiles: PerBlockTile<u32, 8, 8, 8, 8>, mut sums: PerBlock<u32>) {
    let _ = rows.row_mut(block_tile());
    let _ = tiles.tile_mut(warp_row());
    if let Some(b) = once_per_block() {
        let _ = tiles.tile_mut(b);
    }
    let _ = sums.get_mut(warp_row());
}

fn main() {}
