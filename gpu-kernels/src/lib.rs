//! The example kernels, written in Rust and compiled to PTX by this package's top-level
//! `build.rs` (the main job and the benchmarks run them). Test fixtures live in `tests/kernels/`.
//!
//! Each `#[kernel]` is a PTX entry point on the device and, on the host, a module with a typed
//! launcher: `gpu_kernels::saxpy::launch(&stream, config, a, &x, &mut y)`.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use ferrocuda_device::kernel;
use ferrocuda_device::thread::{grid_stride_range, index_1d, thread_idx_x};
use ferrocuda_device::{atomic, warp};

ferrocuda_device::embed_kernels!();

/// `y[i] = a * x[i] + y[i]`, one element per thread.
#[kernel]
pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = index_1d();
    if i < y.len() && i < x.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// `out[0] += sum(x)`: a grid-stride loop per thread, a warp-shuffle reduction per warp, and
/// one atomic add per warp. Launch with a block size that is a multiple of 32 and zero `out`.
#[kernel]
pub fn sum_f32(x: &[f32], out: &mut [f32]) {
    let mut partial = 0.0f32;
    for i in grid_stride_range(x.len()) {
        partial += x[i];
    }
    let warp_sum = warp::reduce_sum_f32(partial);
    if thread_idx_x() % warp::WARP_SIZE == 0 {
        atomic::add_f32(&mut out[0], warp_sum);
    }
}

pub mod examples;
