// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule { crate_name: "t", toolchain: "", ptx: &[], cubins: &[], resources: &[], device_overflow_checks: false, host_overflow_probe: |x| x };

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
