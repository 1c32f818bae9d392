// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 20, GEMM epilogues: micro-tiles of 8 x 6 do not divide a 128 x 128 tile (the last
// thread's run would reach into the next tile): the output's thread count, which every
// launcher checks, fails to evaluate.
use ferrocuda_device::global::{PerThreadTile, block_tile};

#[kernel(cols(c = 128))]
pub fn ragged(mut c: PerThreadTile<f32, 128, 128, 8, 6>) {
    let _ = c.tile_mut(block_tile());
}

fn main() {}
