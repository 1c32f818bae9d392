// E6 (audit 2026-11-27e): `#[kernel]` attribute values outside what a GPU can run are compile
// errors naming the limit: at the value for a literal, from the marker's `const` assertion for
// a constant.
use ferrocuda_device::global::DisjointSlice;
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

#[kernel(reqntid(0))]
pub fn no_threads(_out: DisjointSlice<u32>) {}

#[kernel(launch_bounds(0))]
pub fn no_bound(_out: DisjointSlice<u32>) {}

#[kernel(launch_bounds(128, 64))]
pub fn too_many_blocks(_out: DisjointSlice<u32>) {}

#[kernel(cluster_dims(0))]
pub fn empty_cluster(_out: DisjointSlice<u32>) {}

#[kernel(cluster_dims(16))]
pub fn cluster_too_big(_out: DisjointSlice<u32>) {}

const BLOCK: u32 = 2048;

#[kernel(launch_bounds(BLOCK))]
pub fn constant_too_big(_out: DisjointSlice<u32>) {}

fn main() {}
