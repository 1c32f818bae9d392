// P1: a kernel body is type-checked as the safe `fn` the user wrote, in every entry form: an
// unsafe operation without an `unsafe` block is E0133 in a plain kernel, a generic kernel, a
// cluster kernel, a kernel with launch bounds (a cooperative launch's form), a programmatic
// dependent launch secondary and a matrix kernel. This is the host copy (what the CPU executor
// runs); tests/macro_seams_build.rs builds the same forms for the GPU, where the body used to
// run inside the generated `unsafe extern "ptx-kernel" fn`.
use ferrocuda_device::global::{DisjointMatrix, DisjointSlice, unique_cell, unique_index};
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

#[kernel]
pub fn plain(mut out: DisjointSlice<u32>) {
    *out.get_unchecked_mut(1usize << 33) = 7;
}

#[kernel(instances(u32, f32))]
pub fn generic<T: bytemuck::Pod + Default>(mut out: DisjointSlice<T>) {
    *out.get_unchecked_mut(1usize << 33) = T::default();
}

#[kernel(cluster_dims(2))]
pub fn cluster(mut out: DisjointSlice<u32>) {
    let mut local = 0u32;
    let pointer = &mut local as *mut u32;
    *pointer = ferrocuda_device::cluster::block_rank();
    if let Some(o) = out.get_mut(unique_index()) {
        *o = local;
    }
}

#[kernel(launch_bounds(256, 2))]
pub fn cooperative(flag: u32, mut out: DisjointSlice<u32>) {
    if flag == 7 {
        core::hint::unreachable_unchecked();
    }
    if let Some(o) = out.get_mut(unique_index()) {
        *o = flag;
    }
}

#[kernel]
pub fn pdl(x: &[u32], mut out: DisjointSlice<u32>) {
    ferrocuda_device::grid_dependency::wait_for_prerequisites();
    *out.get_unchecked_mut(unique_index().get() + 1) = x.len() as u32;
}

#[kernel(cols(out = width))]
pub fn matrix(width: u32, mut out: DisjointMatrix<u32>) {
    let _text = core::str::from_utf8_unchecked(b"ok");
    if let Some(o) = out.get_mut(unique_cell()) {
        *o = width;
    }
}

fn main() {}
