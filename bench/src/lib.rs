//! The part of `ferrocuda-bench` that other benchmarks share: compiling CUDA C++ twins of
//! Rust kernels with NVRTC ([`nvrtc`], which lives with the example kernels' twins in
//! `gpu_kernels::twins` so that the main job uses it too). `hopper-gemm` (bench/hopper) uses
//! it for the CUDA C++ version of the Hopper GEMM.

pub use gpu_kernels::twins::nvrtc;
