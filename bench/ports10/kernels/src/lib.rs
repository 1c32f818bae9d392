//! Issue 30's tenth held-out port (session 22): five llm.c and three vLLM kernels, each written
//! once from ferrocuda's docs, and the launch stubs of their CUDA C++ twins
//! (`bench/ports10/cuda/ports10.cu`, built by nvcc on the GPU machine).
//!
//! Each port keeps its source's parameter order where it can; what differs is said on the kernel.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]

ferrocuda_device::embed_kernels!();

pub mod fixes;
pub mod llmc;
pub mod s23;
pub mod twins;
pub mod twins23;
pub mod vllm;
