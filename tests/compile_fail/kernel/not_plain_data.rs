// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

/// Has a pointer to host memory inside: not `Pod`.
#[derive(Clone, Copy)]
pub struct Params {
    pub name: &'static str,
    pub scale: f32,
}

#[kernel]
pub fn uses_params(_p: Params, _out: ferrocuda_device::DisjointSlice<f32>) {}

fn main() {}
