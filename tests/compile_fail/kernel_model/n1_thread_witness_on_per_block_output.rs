// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit N1, the other way round: a `PerBlock` output takes only a `BlockIndex`, never a
// thread's index (thread 1 would write block 1's element).
use ferrocuda_device::global::{PerBlock, unique_index};

#[kernel]
pub fn overlap(mut sums: PerBlock<u32>) {
    if let Some(slot) = sums.get_mut(unique_index()) {
        *slot = 1;
    }
}

fn main() {}
