// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Self-audit (issue 20): a `static` is global memory every GPU thread sees. A witness put there
// behind a lock (`std::sync::Mutex` here; a spin lock in a `no_std` kernel) would let another
// thread take it and write this thread's element. Witnesses are `!Send + !Sync`, so no such
// static is `Sync`.
use std::sync::Mutex;

use ferrocuda_device::global::{BlockIndex, DisjointSlice, ThreadIndex, unique_index};

static SLOT: Mutex<Option<ThreadIndex>> = Mutex::new(None);
static BLOCK_SLOT: Mutex<Option<BlockIndex>> = Mutex::new(None);

#[kernel]
pub fn smuggle(mut out: DisjointSlice<u32>) {
    let mine = unique_index();
    if let Some(theirs) = SLOT.lock().unwrap().replace(mine) {
        out[theirs] = 1;
    }
}

fn main() {}
