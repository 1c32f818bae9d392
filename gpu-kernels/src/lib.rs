//! The example kernels, written in Rust and compiled to PTX by this package's top-level
//! `build.rs` (the main job and the benchmarks run them). Test fixtures live in `tests/kernels/`.
//!
//! Each `#[kernel]` is a PTX entry point on the device and, on the host, a module with a typed
//! launcher: `gpu_kernels::saxpy::launch(&stream, config, a, &x, &mut y)`. Outputs are
//! `DisjointSlice` (each thread its own elements) or `AtomicSlice` (atomic access from any
//! thread): see `ferrocuda_device::global`.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use ferrocuda_device::global::{AtomicSlice, DisjointSlice, grid_stride, unique_index};
use ferrocuda_device::kernel;
use ferrocuda_device::thread::thread_idx_x;
use ferrocuda_device::warp;

ferrocuda_device::embed_kernels!();

/// `y[i] = a * x[i] + y[i]`, one element per thread.
#[kernel]
pub fn saxpy(a: f32, x: &[f32], mut y: DisjointSlice<f32>) {
    let i = unique_index();
    if let Some(y_i) = y.get_mut(i)
        && i.get() < x.len()
    {
        *y_i += a * x[i];
    }
}

/// `out[0] += sum(x)`: a grid-stride loop per thread, a warp-shuffle reduction per warp, and
/// one atomic add per warp. Launch with a block size that is a multiple of 32 and zero `out`.
#[kernel]
pub fn sum_f32(x: &[f32], out: AtomicSlice<f32>) {
    let mut partial = 0.0f32;
    for i in grid_stride(x.len()) {
        partial += x[i.get()];
    }
    let warp_sum = warp::reduce_sum_f32(partial);
    if thread_idx_x().is_multiple_of(warp::WARP_SIZE) {
        out.add(0, warp_sum);
    }
}

pub mod examples;
pub mod llm;
pub mod partitions;
pub mod unchecked;
// The example kernels beside their CUDA C++ twins, for the main job and the benchmark.
#[cfg(not(target_arch = "nvptx64"))]
pub mod twins;
