//! The plain data that every side of ferrocuda shares: the host runtime, the device library,
//! the CPU executor, the `#[kernel]` macro and the builder.
//!
//! Dependency-free and `#![no_std]` (the `std` feature adds `KernelPanic` and
//! `std::error::Error` impls), so the GPU build of a kernel crate can use it too. What lives
//! here is a contract between crates, written once:
//! - launch geometry: [`Dim3`], [`LaunchConfig`], [`DeviceLimits`] and the validation that
//!   names the broken limit ([`LaunchProblem`]);
//! - what the host expects of a kernel: [`KernelSignature`] and its full-signature
//!   [`fingerprint`];
//! - the device-panic handshake: [`PanicRecord`] and its module-global symbol names;
//! - the embedded artifacts `embed_kernels!()` fills: [`EmbeddedModule`], [`KernelResources`],
//!   [`Image`], [`Arch`];
//! - warp constants ([`WARP_SIZE`], [`FULL_MASK`]);
//! - reading PTX text the same way in the host and the builder ([`ptx`]);
//! - the primitives a kernel takes by value, one list for host and device
//!   ([`impl_kernel_scalars!`]).
#![no_std]

#[cfg(feature = "std")]
extern crate std;

mod arch;
mod config;
mod dim3;
mod embedded;
mod limits;
mod panic;
pub mod panic_format;
mod problem;
pub mod ptx;
mod requirements;
mod scalars;
mod signature;

pub use arch::Arch;
pub use config::LaunchConfig;
pub use dim3::Dim3;
pub use embedded::{EmbeddedImages, EmbeddedModule, Image, KernelResources, ResourceTuple};
pub use limits::{DeviceLimits, MAX_LOCAL_BYTES_PER_THREAD, MAX_PORTABLE_CLUSTER_BLOCKS};
#[cfg(feature = "std")]
pub use panic::KernelPanic;
pub use panic::{
    KERNEL_NAME_BYTES, KERNEL_NAME_RECORD_BYTES, KERNEL_NAMES_SYMBOL, MESSAGE_NOT_KEPT, PANIC_CLAIMED_SYMBOL, PANIC_RECORD_ARGS, PANIC_SLOT_SYMBOL,
    PANIC_SLOT_SYMBOL_C, PanicRecord, RECORD_COMPLETE, RECORD_COMPLETE_WITH_ARGUMENTS, RECORD_COMPLETE_WITHOUT_MESSAGE, RECORD_EMPTY, kernel_name_id,
};
pub use problem::LaunchProblem;
pub use requirements::{LaunchRequirements, OutputLaunch, same_lengths};
pub use signature::{FINGERPRINT_SYMBOL_PREFIX, KernelSignature, LAYOUT_SYMBOL_PREFIX, LAYOUT_WORDS, TYPES_SYMBOL_PREFIX, fingerprint, layout_words, type_key};

/// Threads in a warp on every NVIDIA GPU so far.
pub const WARP_SIZE: u32 = 32;

/// A lane mask naming every lane of a warp.
pub const FULL_MASK: u32 = 0xffff_ffff;
