// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// One mistake in a kernel gives one error: the launcher module still exists (as a stub), so
// its callers do not add "cannot find `saxpy::launch`".
#[kernel]
pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {}

pub fn caller(stream: &ferrocuda::Stream, x: &ferrocuda::DeviceBuffer<f32>, y: &mut ferrocuda::DeviceBuffer<f32>) {
    let _ = saxpy::launch(stream, (1u32, 32u32), 2.0, x, y);
    let _ = saxpy::launch_cpu(&ferrocuda_device::cpu::CpuExecutor::new(), (1u32, 32u32), 2.0, &[1.0], &mut [1.0]);
}

fn main() {}
