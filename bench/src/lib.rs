//! The part of `ferrocuda-bench` that other benchmarks share: compiling CUDA C++ twins of
//! Rust kernels with NVRTC ([`nvrtc`]). `hopper-gemm` (bench/hopper) uses it for the CUDA C++
//! version of the Hopper GEMM.

pub mod nvrtc;
