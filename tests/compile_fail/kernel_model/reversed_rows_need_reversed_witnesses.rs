// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 30: a reversed row partition takes only witnesses of its order: a forward `BlockRow`
// (row `blockIdx.x`) on `BlockRows<Reversed>` would be block `gridDim.x - 1 - blockIdx.x`'s row.
use ferrocuda_device::global::partition::BlockRows;
use ferrocuda_device::global::{DisjointSlice, PerWarpRow, Reversed, block_row, warp_row};

#[kernel(cols(out = 8, rows = 8))]
pub fn crossed(mut out: DisjointSlice<u32, BlockRows<Reversed>>, mut rows: PerWarpRow<u32, Reversed>) {
    let _ = out.row_mut(block_row());
    let _ = rows.row_mut(warp_row());
}

fn main() {}
