// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit N14 (c09): an instance type named like a primitive is checked as that primitive, and
// the generated code itself never names a bare `usize` (this crate shadows it).
use ferrocuda_device::global::{DisjointSlice, unique_index};

pub mod sneaky {
    #[allow(non_camel_case_types)]
    pub type usize = &'static [u8; 16];
}
use sneaky::usize;

#[kernel(instances(usize))]
pub fn by_value<T: Copy>(x: T, mut out: DisjointSlice<u32>) {
    let _ = x;
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 1;
    }
}

fn main() {}
