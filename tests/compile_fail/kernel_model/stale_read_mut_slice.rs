// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// The audit's `stale_read` (U2) as written against the old model: every thread gets the same
// `&mut [u32]`, which LLVM assumes nobody else writes, so the read after the barrier was stale.
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::thread_idx_x;

#[kernel]
pub fn stale_read(flags: &mut [u32], out: &mut [u32]) {
    let t = thread_idx_x() as usize;
    let before = flags[0];
    sync_threads();
    if t == 0 {
        flags[0] = before + 1;
    }
    sync_threads();
    let after = flags[0];
    if t < out.len() {
        out[t] = after;
    }
}

fn main() {}
