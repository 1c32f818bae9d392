// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 30 (session 18's `PerThreadShared`): `per_thread::<0>()` would give every thread a
// region of no slots: refused at compile time (session 19) instead of `None` at run time.
use ferrocuda_device::shared::dynamic_shared;

#[kernel]
pub fn no_slots(out: ferrocuda_device::global::AtomicSlice<u32>) {
    if let Some(slots) = dynamic_shared::<u32>().per_thread::<0>()
        && let Some(o) = out.get(0)
    {
        o.store(slots.mine().get());
    }
}

fn main() {}
