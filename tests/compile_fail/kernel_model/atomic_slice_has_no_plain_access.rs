// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// An `AtomicSlice` hands out no `&mut` (plain and atomic accesses to one element cannot mix).
use ferrocuda_device::global::AtomicSlice;

#[kernel]
pub fn mixed(counters: AtomicSlice<u32>) {
    counters.add(0, 1);
    counters[0] += 1;
}

fn main() {}
