// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule { crate_name: "t", toolchain: "", ptx: &[], cubins: &[], resources: &[], device_overflow_checks: false, host_overflow_probe: |x| x };

#[kernel]
pub fn scale<T: bytemuck::Pod>(_factor: T, _out: ferrocuda_device::DisjointSlice<T>) {}

fn main() {}
