//! Hopper kernels written in Rust, compiled for `sm_90a` (H100, H200) at build time:
//! - [`gemm`]: `C = A·Bᵀ` in bf16 with f32 accumulation: TMA loads into a 4-stage mbarrier
//!   pipeline, `wgmma.mma_async` m64n256k16, one producer warpgroup and two consumer
//!   warpgroups (`setmaxnreg` 24/240), persistent over 128x256 output tiles;
//! - `tma_copy_tile`: a TMA round trip through shared memory, the test of the tensor-map path.
//!
//! The benchmark binary `hopper-gemm` launches them and compares with cuBLAS.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

ferrocuda_device::embed_kernels!();

/// The attention forward of `ferrocuda-kernels-hopper` (moved there; its kernels are in that
/// crate's `KERNELS`, not this one's).
#[cfg(not(target_arch = "nvptx64"))]
pub use ferrocuda_kernels_hopper::attention;
#[cfg(not(target_arch = "nvptx64"))]
pub mod attention_host;
pub mod gemm;
pub mod probes;
pub mod tracked;
