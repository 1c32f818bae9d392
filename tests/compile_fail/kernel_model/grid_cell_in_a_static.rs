// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 20, 2-D outputs: the new witnesses are `!Send + !Sync` like the old ones, so no
// static (global memory every GPU thread sees) can hold one for another thread to take.
use std::sync::Mutex;

use ferrocuda_device::global::{BlockTile, DisjointMatrix, ThreadCell, WarpRow, unique_cell};

static CELL: Mutex<Option<ThreadCell>> = Mutex::new(None);
static TILE: Mutex<Option<BlockTile>> = Mutex::new(None);
static ROW: Mutex<Option<WarpRow>> = Mutex::new(None);

#[kernel(cols(out = 8))]
pub fn smuggle(mut out: DisjointMatrix<u32>) {
    if let Some(theirs) = CELL.lock().unwrap().replace(unique_cell())
        && let Some(element) = out.get_mut(theirs)
    {
        *element = 1;
    }
}

fn main() {}
