// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit N14 (c02): `#[cfg]` on a parameter gave E0061 at `#[kernel]`; attributes on
// parameters are refused with a message that says why and what to do.
use ferrocuda_device::global::{DisjointSlice, unique_index};

#[kernel]
pub fn cfg_param(#[cfg(feature = "extra")] extra: u32, mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 1;
    }
}

fn main() {}
