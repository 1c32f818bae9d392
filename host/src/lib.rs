//! The host side of ferrocuda: the CUDA driver API, loaded at run time, made safe.
//!
//! Layers, bottom to top (no module uses one above it; `tests/module_graph.rs` checks it):
//! - `cudarc::driver::sys`: raw bindings, loaded at run time (linked instead when another crate
//!   of the binary asks cudarc to link, as candle-core does: docs/interop.md);
//! - [`driver`]: one thin fallible `unsafe fn` per driver entry point ([`DriverError`] names
//!   it); the only place that calls the driver. `loader` loads it once ([`init`]);
//! - plain data from ferrocuda-types ([`LaunchConfig`], [`Dim3`], [`DeviceLimits`], ...),
//!   errors ([`Error`]), [`Device`];
//! - RAII handles, one file each: [`Context`], [`Stream`], [`Event`], [`Graph`] /
//!   [`GraphExec`], [`Module`], [`Function`], [`DeviceBuffer`] and its views, [`PinnedBuffer`],
//!   [`Cublas`] / [`CublasLt`] (typed GEMMs, [`cublas`]). Every buffer tracks the streams that use it (`memory::usage`), so work on other
//!   streams, host copies and its drop are ordered after it;
//! - launching (`launch`), and the support the generated launchers name (`__private`).
//!
//! A binary built with it starts on a machine without CUDA and reports [`Error::NoDriver`]
//! from the first call. Kernels of a `#[kernel]` crate are launched through their generated
//! launchers (`saxpy::launch(&stream, config, ...)`); the crate's embedded PTX/cubin is loaded
//! into each context on first launch, like the runtime API does for `<<<>>>`.

pub mod driver;
mod loader;

mod error;
mod panic_report;
mod ptx_version;

pub mod borrowed;
mod context;
pub mod cufft;
mod device;
mod embedded;
mod event;
mod function;
mod graph;
mod memory;
mod module;
mod stream;

pub mod cublas;
mod launch;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
mod tensor_map;

pub use borrowed::{BorrowedContext, BorrowedSlice, BorrowedSliceMut, BorrowedStream};
pub use bytemuck::Pod;
pub use context::{Context, CurrentGuard, Limit, SchedulePolicy};
pub use cublas::{Batch, Cublas, CublasLt, Epilogue, Gemm, MatrixLayout};
pub use device::Device;
pub use driver::DriverError;
pub use error::{Error, Result};
pub use event::Event;
pub use function::{CachePreference, Function, FunctionAttributes};
pub use graph::{Graph, GraphExec};
pub use launch::args::KernelValue;
pub use loader::{CudaLibrary, driver_present, driver_version, init, library_present};
pub use memory::leaks::leaked_releases;
pub use memory::pinned::PinnedBuffer;
pub use memory::usage::{Access, BufferAccess, BufferUsage, GiveUp};
pub use memory::view::{DevicePtr, DeviceRead, DeviceView, DeviceViewMut, DeviceWrite};
pub use memory::{DeviceBuffer, DeviceSlice};
pub use module::{Global, JitFallback, JitOptions, Module, ReloadableModule};
pub use ptx_version::{PtxHeader, ptx_isa_of_driver};
pub use stream::{NoCapture, RawStream, Stream, StreamOrdering};

/// The shared plain-data crate itself.
pub use ferrocuda_types as types;
/// The plain data shared with the device side, the CPU executor and the macros, re-exported so
/// users see one type of each (`ferrocuda_host::LaunchConfig` is `ferrocuda_types::LaunchConfig`).
pub use ferrocuda_types::{
    Arch, DeviceLimits, Dim3, EmbeddedImages, EmbeddedModule, FINGERPRINT_SYMBOL_PREFIX, FULL_MASK, Image, KernelPanic, KernelResources, KernelSignature,
    LAYOUT_SYMBOL_PREFIX, LAYOUT_WORDS, LaunchConfig, LaunchProblem, LaunchRequirements, MAX_LOCAL_BYTES_PER_THREAD, MAX_PORTABLE_CLUSTER_BLOCKS,
    MESSAGE_NOT_KEPT, PANIC_SLOT_SYMBOL, PANIC_SLOT_SYMBOL_C, PanicRecord, RECORD_COMPLETE, RECORD_COMPLETE_WITH_ARGUMENTS, RECORD_COMPLETE_WITHOUT_MESSAGE,
    TYPES_SYMBOL_PREFIX, WARP_SIZE, fingerprint, layout_words, type_key,
};
pub use tensor_map::{DeviceTensorMap, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};

/// The raw driver bindings, for what the safe layer does not cover yet.
pub use cudarc::driver::sys;
