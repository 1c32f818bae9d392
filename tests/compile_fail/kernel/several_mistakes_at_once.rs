// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule { crate_name: "t", toolchain: "", ptx: &[], cubins: &[], resources: &[], device_overflow_checks: false, host_overflow_probe: |x| x };

#[kernel(instance(f32))]
pub fn many(_a: Vec<f32>, _b: &f32, _c: (u32, u32)) {}

fn main() {}
