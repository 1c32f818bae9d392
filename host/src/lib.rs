//! The host side of ferrocuda: the CUDA driver API, loaded at run time, made safe.
//!
//! Layers: `cudarc::driver::sys` (raw bindings) -> [`driver`] (one fallible call each) ->
//! RAII types ([`Context`], [`Stream`], [`Event`], [`DeviceBuffer`]). A binary built with it
//! starts on a machine without CUDA and reports [`Error::NoDriver`] from the first call.
//!
//! Kernels of a `#[kernel]` crate are launched through their generated launchers
//! (`saxpy::launch(&stream, config, ...)`); the crate's embedded PTX/cubin is loaded into each
//! context on first launch, like the runtime API does for `<<<>>>`.

mod context;
mod cublas;
mod device;
pub mod driver;
mod embedded;
mod error;
mod event;
mod function;
mod graph;
mod launch;
mod loader;
mod memory;
mod module;
mod panic_report;
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

mod ptx_version;
mod stream;


pub use bytemuck::Pod;
pub use context::{Context, CurrentGuard, Limit, SchedulePolicy};
pub use cublas::Cublas;
pub use device::Device;
pub use graph::{Graph, GraphExec};
pub use loader::{driver_present, driver_version, init};
pub use driver::DriverError;
pub use error::{Error, Result};
pub use function::{CachePreference, Function, FunctionAttributes};
pub use launch::args::KernelValue;
pub use memory::usage::{Access, BufferAccess, BufferUsage};
pub use memory::{DeviceBuffer, DeviceSlice};
pub use module::{Global, JitFallback, JitOptions, Module, ReloadableModule};
pub use memory::pinned::PinnedBuffer;
pub use ptx_version::{PtxHeader, ptx_isa_of_driver};
pub use event::Event;
pub use stream::{Stream, StreamOrdering};
pub use memory::view::{DevicePtr, DeviceRead, DeviceView, DeviceViewMut, DeviceWrite};

/// The plain data shared with the device side, the CPU executor and the macros, re-exported so
/// users see one type of each (`ferrocuda_host::LaunchConfig` is `ferrocuda_types::LaunchConfig`).
pub use ferrocuda_types::{
    Arch, DeviceLimits, Dim3, EmbeddedModule, FINGERPRINT_SYMBOL_PREFIX, FULL_MASK, Image, KernelPanic, KernelResources, KernelSignature, LaunchConfig,
    LaunchProblem, MAX_PORTABLE_CLUSTER_BLOCKS, PANIC_SLOT_SYMBOL, PANIC_SLOT_SYMBOL_C, PanicRecord, RECORD_COMPLETE, WARP_SIZE, fingerprint,
};
/// The shared plain-data crate itself.
pub use ferrocuda_types as types;

/// The raw driver bindings, for what the safe layer does not cover yet.
pub use cudarc::driver::sys;
