// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

#[kernel(instance(f32))]
pub fn many(_a: Vec<f32>, _b: &f32, _c: (u32, u32)) {}

fn main() {}
