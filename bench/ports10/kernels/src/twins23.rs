//! Launch stubs of session 23's CUDA C++ checks (`bench/results/s23-gaps/nvcc-s23.cu`, built by
//! nvcc on the GPU machine): `extern "C"` entries, raw pointers where the CUDA entry has them.
//!
//! # Safety (every stub)
//! Each pointer is valid for every element the CUDA kernel touches at the launch's shape, nothing
//! else touches the outputs during the launch, and the buffers outlive it.

// The stubs' parameters name the CUDA entry's; their empty bodies use none of them.
#![allow(unused_variables, clippy::missing_safety_doc)]

use ferrocuda_device::kernel;

/// `row_sum_256(float* sums, const float* x, int cols)`: `cub::BlockReduce<float, 256>`, a block
/// of 256 per row.
#[kernel(name = "row_sum_256")]
pub unsafe fn twin_row_sum_256(sums: *mut f32, x: *const f32, cols: i32) {}

/// `row_sum_1024(float* sums, const float* x, int cols)`: `cub::BlockReduce<float, 1024>`.
#[kernel(name = "row_sum_1024")]
pub unsafe fn twin_row_sum_1024(sums: *mut f32, x: *const f32, cols: i32) {}

/// `scale_add_bf16x4(bf16x4* out, const bf16x4* x, const bf16x4* y, float s, int n)`.
#[kernel(name = "scale_add_bf16x4")]
pub unsafe fn twin_scale_add_bf16x4(out: *mut u64, x: *const u64, y: *const u64, s: f32, n: i32) {}
