// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit N5: `#[kernel]` classified parameters by their written name, so a reference named
// `f64` passed by value with no `Pod` check and the GPU dereferenced a host pointer. The
// generated launcher now requires the written type to be the primitive.
pub mod shadow {
    use ferrocuda_device::global::{DisjointSlice, unique_index};
    use ferrocuda_device::kernel;

    #[allow(non_camel_case_types)]
    pub type f64 = &'static u64;

    #[kernel]
    pub fn scalar_shadow(x: f64, mut out: DisjointSlice<u64>) {
        if let Some(o) = out.get_mut(unique_index()) {
            *o = *x;
        }
    }
}

fn main() {}
