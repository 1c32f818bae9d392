// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// E6: each of these had a misleading message.
use ferrocuda_device::global::DisjointSlice;

pub type V = [f32];

#[kernel]
pub fn optional(x: Option<f32>, out: DisjointSlice<f32>) {}

#[kernel]
pub fn array_ref(x: &[f32; 4], out: DisjointSlice<f32>) {}

#[kernel]
pub fn alias(x: &V, out: DisjointSlice<f32>) {}

#[kernel(instances(f32))]
pub fn generic_shared<T: bytemuck::Pod>(out: DisjointSlice<T>) {
    let _s = ferrocuda_device::shared_array![T; 32];
}

fn main() {}
