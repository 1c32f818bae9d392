// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// `count_plain` with a `DisjointSlice`: element 0 is not this thread's (no witness), so
// the data race does not compile; `AtomicSlice::add` is the way.
use ferrocuda_device::global::DisjointSlice;

#[kernel]
pub fn count_plain(mut out: DisjointSlice<u32>) {
    out[0] += 1;
}

fn main() {}
