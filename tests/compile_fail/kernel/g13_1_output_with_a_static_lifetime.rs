// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit 2026-11-28, G13-1: an output lives for its launch only. Its lifetime is the launch's
// borrow of the buffer, left out (elided) in the signature, so the body is generic over it;
// a `'static` output (which the body could keep past the launch) is refused.
use ferrocuda_device::global::AtomicSlice;

#[kernel]
pub fn forever(out: AtomicSlice<'static, u32>) {
    out.store(0, 1);
}

fn main() {}
