// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// E6: a kernel is a free function.
use ferrocuda_device::global::DisjointSlice;

pub struct Kernels;

impl Kernels {
    #[kernel]
    pub fn method(&self, out: DisjointSlice<f32>) {}
}

pub trait Launchable {
    #[kernel]
    fn declared(out: DisjointSlice<f32>);
}

fn main() {}
