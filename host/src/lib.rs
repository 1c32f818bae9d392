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
mod device;
pub mod driver;
mod embedded;
mod error;
mod function;
mod graph;
mod launch;
mod memory;
mod module;
mod panic_report;
mod pinned;
mod ptx_version;
mod stream;
mod tensor_map;
mod view;

pub use bytemuck::Pod;
pub use context::{Context, CurrentGuard, Limit, SchedulePolicy};
pub use device::Device;
pub use graph::{Graph, GraphExec};
pub use driver::{driver_present, driver_version, init};
pub use embedded::{EmbeddedModule, Image};
pub use error::{DriverError, Error, Result};
pub use function::{CachePreference, Function, FunctionAttributes};
pub use launch::{
    DeviceLimits, Dim3, KernelSignature, KernelValue, LaunchConfig, LaunchProblem, MAX_PORTABLE_CLUSTER_BLOCKS, SliceArg, embedded_function, launch_embedded,
    launch_in_module, param_ptr, require_kernel_value,
};
pub use memory::{DeviceBuffer, DeviceSlice};
pub use panic_report::KernelPanic;
pub use module::{Global, JitFallback, JitOptions, Module, ReloadableModule};
pub use pinned::PinnedBuffer;
pub use ptx_version::{PtxHeader, ptx_isa_of_driver};
pub use stream::{Event, Stream, StreamOrdering};
pub use tensor_map::{TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
pub use view::{DevicePtr, DeviceRead, DeviceView, DeviceViewMut, DeviceWrite};

/// The raw driver bindings, for what the safe layer does not cover yet.
pub use cudarc::driver::sys;
