// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// The audit's `count_plain` (U2): a plain `+=` on one element from every thread.
#[kernel]
pub fn count_plain(out: &mut [u32]) {
    out[0] += 1;
}

fn main() {}
