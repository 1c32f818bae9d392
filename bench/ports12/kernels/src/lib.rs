//! Issue 30's twelfth held-out port: five llm.c kernels ([`llmc`]) and three vLLM kernels
//! ([`vllm`]), each written once from ferrocuda's docs, plus the raw-pointer stubs of their
//! CUDA C++ twins ([`twins`], bench/ports12/cuda/ports12.cu built by nvcc on the GPU machine).
//!
//! On the GPU target this crate is `no_std`; `abi_ptx` is for the kernel entry points and
//! `asm_experimental_arch` for the inline PTX of the device library's macros (the builder's
//! device toolchain enables both).
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
// On the host, `f32`'s own `exp`, `round`, ... win over the device library's math traits, so
// the prelude's imports are partly unused there.
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]

ferrocuda_device::embed_kernels!();

pub mod llmc;
pub mod twins;
pub mod vllm;
