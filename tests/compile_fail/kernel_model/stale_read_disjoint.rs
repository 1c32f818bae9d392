// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// `stale_read` with a `DisjointSlice`: a thread cannot read an element it holds no witness for
// (thread 0 writes `flags[0]`, the others read it), so the racy form does not compile.
use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::sync::sync_threads;

#[kernel]
pub fn stale_read(flags: DisjointSlice<u32>, mut out: DisjointSlice<u32>) {
    let before = flags[0];
    sync_threads();
    let after = flags[0];
    if let Some(o) = out.get_mut(unique_index()) {
        *o = after - before;
    }
}

fn main() {}
