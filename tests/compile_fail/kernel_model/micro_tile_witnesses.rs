// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 20, GEMM epilogues: a `PerThreadTile` takes only a `BlockTile` (a thread's index, a
// warp's row, a cell or a block's index name another map), and its view's runs are borrowed
// from it one at a time.
use ferrocuda_device::global::{PerThreadTile, once_per_block, unique_cell, unique_index, warp_row};

#[kernel(cols(c = 128))]
pub fn overlap(mut c: PerThreadTile<f32, 128, 128, 8, 8>) {
    let _ = c.tile_mut(unique_index());
    let _ = c.tile_mut(warp_row());
    let _ = c.tile_aligned_mut(unique_cell());
    if let Some(b) = once_per_block() {
        let _ = c.tile_mut(b);
    }
}

#[kernel(cols(c = 128))]
pub fn two_runs_at_once(mut c: PerThreadTile<f32, 128, 128, 8, 8>) {
    if let Some(mut tile) = c.tile_mut(ferrocuda_device::global::block_tile()) {
        let first = tile.row_mut(0, 0).unwrap();
        let second = tile.row_mut(0, 0).unwrap();
        first[0] = second[0];
    }
}

fn main() {}
