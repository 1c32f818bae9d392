// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// U1: non-`Pod` elements (`String` in a slice was heap corruption on the CPU executor).
use ferrocuda_device::global::DisjointSlice;

#[kernel]
pub fn log(names: &[String], out: DisjointSlice<u32>) {}

#[kernel]
pub fn log_out(out: DisjointSlice<String>) {}

#[derive(Clone, Copy)]
pub struct NotPod(&'static str);

#[kernel]
pub fn not_pod(_x: &[NotPod]) {}

fn main() {}
