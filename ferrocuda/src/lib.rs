//! ferrocuda: GPU kernels written in Rust, compiled to PTX at build time by rustc's own NVPTX
//! backend, launched from Rust through the CUDA driver API.
//!
//! This crate is the host-side entry point: the driver API ([`Context`], [`Stream`],
//! [`DeviceBuffer`], ...) from `ferrocuda-host`, and the CUDA-style [`launch!`] macro.
//! Kernels live in a kernel crate of your own that depends on `ferrocuda-device` and builds
//! itself with `ferrocuda-builder` (see README.md, "Your own kernel crate"); `my_kernels`
//! below is such a crate.
//!
//! ```ignore
//! use ferrocuda::{Context, DeviceBuffer, Stream, launch};
//! use my_kernels::saxpy;
//!
//! # fn main() -> ferrocuda::Result<()> {
//! let context = Context::primary(0)?;
//! let stream = Stream::new(&context)?;
//! let x = DeviceBuffer::from_slice(&context, &[1.0f32; 1024])?;
//! let mut y = DeviceBuffer::from_slice(&context, &[2.0f32; 1024])?;
//! launch!(saxpy<<<4, 256, 0, &stream>>>(3.0, &x, &mut y))?;
//! stream.synchronize()?;
//! assert_eq!(y.to_vec()?[0], 5.0);
//! # Ok(())
//! # }
//! ```

pub use ferrocuda_host::*;
pub use ferrocuda_macros::launch;

/// The CPU executor: the same kernels run on the CPU with CUDA's semantics (every `#[kernel]`
/// has `name::launch_cpu(&executor, config, args..)`).
pub use ferrocuda_device::cpu;

/// The 16-bit floats kernels take and return: the `half` crate's `bf16` and `f16` (host code
/// fills a `DeviceBuffer<bf16>` with them), their packed pairs and the software twins of the
/// GPU's conversions (see `ferrocuda_device::half`).
pub use ferrocuda_device::half;

/// The 16-byte packs of 16-bit floats and bytes that kernels load and store in one access
/// (`Bf16x8`, `F16x8`, ...; see `ferrocuda_device::pack16`): host code builds the
/// `DeviceBuffer<Bf16x8>` a kernel reads with `Bf16x8::collect(&values)` (issue 30's ninth
/// port: a host crate had to depend on the device library, or have the kernel crate re-export
/// the type, to name it).
pub use ferrocuda_device::pack16;

/// The 8-byte packs of 16-bit floats (`Bf16x4`, `F16x4`; see `ferrocuda_device::pack8`), for
/// host code that fills the buffers of kernels moving 8 bytes a thread (vLLM's `vec_n_t<T, 4>`).
pub use ferrocuda_device::pack8;
