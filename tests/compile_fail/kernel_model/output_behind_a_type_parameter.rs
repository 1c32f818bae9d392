// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Self-audit (issue 20): an output type reached through a generic kernel's type parameter is a
// by-value parameter to the macro, so it must be `Pod`, which no output is: it cannot become a
// by-value copy of a pointer that every thread then writes through.
use ferrocuda_device::global::DisjointSlice;

#[kernel(instances(DisjointSlice<u32>))]
pub fn sneaky<O: Copy>(out: O) {
    let _ = out;
}

fn main() {}
