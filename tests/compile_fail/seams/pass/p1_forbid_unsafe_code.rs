// P1: a kernel crate may `#![forbid(unsafe_code)]`: every entry form compiles (the unsafe code
// `#[kernel]` generates is the macro's, which the lint does not attribute to the crate), and the
// host copies run on the CPU executor. tests/macro_seams_build.rs builds the same for the GPU.
#![forbid(unsafe_code)]
use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_device::global::{AtomicSlice, DisjointMatrix, DisjointSlice, unique_cell, unique_index};
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

#[kernel]
pub fn plain(x: &[u32], mut out: DisjointSlice<u32>) {
    let i = unique_index();
    if let (Some(o), Some(v)) = (out.get_mut(i), x.get(i.get())) {
        *o = *v + 1;
    }
}

#[kernel(instances(u32, f32))]
pub fn generic<T: bytemuck::Pod + Default>(mut out: DisjointSlice<T>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = T::default();
    }
}

#[kernel(cluster_dims(2))]
pub fn cluster(mut out: DisjointSlice<u32>) {
    ferrocuda_device::cluster::sync();
    if let Some(o) = out.get_mut(unique_index()) {
        *o = ferrocuda_device::cluster::block_rank();
    }
}

#[kernel(launch_bounds(256, 2))]
pub fn cooperative(counts: AtomicSlice<u32>) {
    counts.fetch_add(0, 1);
}

#[kernel(same_len(x, out))]
pub fn pdl(x: &[u32], mut out: DisjointSlice<u32>) {
    ferrocuda_device::grid_dependency::wait_for_prerequisites();
    let i = unique_index();
    if let (Some(o), Some(v)) = (out.get_mut(i), x.get(i.get())) {
        *o = *v;
    }
}

const WIDTH: u32 = 4;

#[kernel(cols(a = width, b = WIDTH * 2))]
pub fn matrix(width: u32, mut a: DisjointMatrix<u32>, mut b: DisjointMatrix<u32>) {
    let cell = unique_cell();
    if let Some(o) = a.get_mut(cell) {
        *o = width;
    }
    if let Some(o) = b.get_mut(cell) {
        *o = WIDTH;
    }
}

fn main() {
    let executor = CpuExecutor::new();
    let x = [1u32, 2, 3, 4];
    let mut out = [0u32; 4];
    plain::launch_cpu(&executor, (1u32, 4u32), &x, &mut out).unwrap();
    assert_eq!(out, [2, 3, 4, 5]);
    pdl::launch_cpu(&executor, (1u32, 4u32), &x, &mut out).unwrap();
    assert_eq!(out, x);
    let mut counts = [0u32; 1];
    cooperative::launch_cpu(&executor, (2u32, 4u32), &mut counts).unwrap();
    assert_eq!(counts, [8]);
}
