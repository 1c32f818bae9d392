// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// A `ThreadIndex` cannot be handed to another thread (shared memory, shuffles) or made up.
use ferrocuda_device::global::{DisjointSlice, ThreadIndex, unique_index};
use ferrocuda_device::{shared_array, warp};

#[kernel]
pub fn share(mut out: DisjointSlice<u32>) {
    let slots = shared_array![ThreadIndex; 32];
    let mine = unique_index();
    let theirs = warp::shuffle(mine, 0);
    let made_up = ThreadIndex(0);
    let _ = (slots, theirs, made_up);
    out[mine] = 1;
}

fn main() {}
