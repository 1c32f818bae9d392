//! The Hopper (`sm_90a`: H100, H200) benchmarks and probes, compiled at build time:
//! - `hopper-gemm` benchmarks the library's bf16 GEMM (`ferrocuda_kernels_hopper::gemm`,
//!   called through `ferrocuda_kernels::gemm::hopper_gemm_bf16`: TMA into a 4-stage mbarrier
//!   ring, `wgmma` m64n256k16, a producer and two consumer warpgroups, persistent) against
//!   cuBLAS and its CUDA C++ twin, and runs the [`tma_probes`] and [`probes`];
//! - `hopper-attention` benchmarks the library's attention forward schedules.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

ferrocuda_device::embed_kernels!();

/// The attention forward of `ferrocuda-kernels-hopper` (moved there; its kernels are in that
/// crate's `KERNELS`, not this one's).
#[cfg(not(target_arch = "nvptx64"))]
pub use ferrocuda_kernels_hopper::attention;
#[cfg(not(target_arch = "nvptx64"))]
pub mod attention_host;
pub mod probes;
pub mod tma_probes;
pub mod tracked;
