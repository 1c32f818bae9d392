//! Launch configurations, their validation against device limits, and the launch itself.

use std::ffi::c_void;

use cudarc::driver::sys;

use crate::context::Context;
use crate::driver;
use crate::EmbeddedModule;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::memory::DeviceSlice;
use crate::module::Module;
use crate::stream::Stream;
use crate::{KernelSignature, LaunchConfig, LaunchProblem};

/// A slice as a kernel receives it: device pointer and length.
///
/// An empty slice gets a dangling but non-null, aligned pointer, as Rust's references require;
/// the kernel never reads through it.
#[derive(Debug, Clone, Copy)]
#[doc(hidden)]
pub struct SliceArg {
    /// Device address.
    pub ptr: u64,
    /// Number of elements.
    pub len: usize,
}

impl SliceArg {
    /// The kernel argument for `slice`.
    #[inline]
    pub fn new<T>(slice: &DeviceSlice<T>) -> Self {
        Self::from_parts::<T>(slice.device_ptr(), slice.len())
    }

    /// The kernel argument for `len` elements of `T` at device address `ptr`.
    #[inline]
    pub fn from_parts<T>(ptr: u64, len: usize) -> Self {
        let ptr = if len == 0 { std::mem::align_of::<T>() as u64 } else { ptr };
        SliceArg { ptr, len }
    }
}

/// A type that can be passed to a kernel by value: plain data with no pointers to host
/// memory. Every `bytemuck::Pod` type is one (derive `Pod` on a `#[repr(C)]` struct).
///
/// # Safety
/// Every bit pattern of the type's bytes must be valid on the device, and it must hold no
/// host pointers (what `Pod` promises).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed to a kernel by value",
    label = "not plain data",
    note = "kernel parameters by value must be integers, floats, bool, or `#[repr(C)]` structs that derive `bytemuck::Pod` and `bytemuck::Zeroable`"
)]
pub unsafe trait KernelValue: Copy {}
// SAFETY: `Pod` is exactly the promise above.
unsafe impl<T: bytemuck::Pod> KernelValue for T {}

/// Compile-time check used by generated launchers: `T` may be passed by value.
#[doc(hidden)]
#[inline(always)]
pub fn require_kernel_value<T: KernelValue>() {}

/// The `void*` that `cuLaunchKernel` wants for one argument.
#[doc(hidden)]
#[inline(always)]
pub fn param_ptr<T>(value: &T) -> *mut c_void {
    value as *const T as *mut c_void
}

/// Launches `symbol` of an embedded module, loading the module into the stream's context on
/// first use.
///
/// # Safety
/// `params` must match the kernel's parameters in number, order and type, and every device
/// pointer among them must stay valid (and, for outputs, unaliased) until the kernel ends.
/// The `#[kernel]` launchers guarantee this from the kernel's own signature.
#[doc(hidden)]
#[inline]
pub unsafe fn launch_embedded(module: &'static EmbeddedModule, symbol: &'static str, stream: &Stream, config: LaunchConfig, params: &mut [*mut c_void]) -> Result<()> {
    let context = stream.context();
    config.validate(context.limits()).map_err(|problem| Error::InvalidLaunch { kernel: symbol.to_string(), problem })?;
    context.bind_to_thread()?;
    let function = context.embedded_function(module, symbol)?;
    // SAFETY: the function belongs to the bound context; the caller vouches for `params`.
    unsafe { launch_function(function, symbol, stream, &config, params) }
}

/// Launches the kernel `signature` names from an explicitly loaded `module`; the first launch
/// checks the module's kernel against the signature.
///
/// # Safety
/// As for [`launch_embedded`].
#[doc(hidden)]
#[inline]
pub unsafe fn launch_in_module(module: &Module, signature: &'static KernelSignature, stream: &Stream, config: LaunchConfig, params: &mut [*mut c_void]) -> Result<()> {
    let context = stream.context();
    if context.raw() != module.context().raw() {
        return Err(Error::WrongContext { kernel: signature.symbol.to_string(), module: module.name().to_string() });
    }
    config.validate(context.limits()).map_err(|problem| Error::InvalidLaunch { kernel: signature.symbol.to_string(), problem })?;
    context.bind_to_thread()?;
    let function = module.checked_function(signature)?;
    // SAFETY: the function belongs to the bound context; the caller vouches for `params`.
    unsafe { launch_function(function, signature.symbol, stream, &config, params) }
}

/// `cuLaunchKernel`, or `cuLaunchKernelEx` when the configuration has a cluster or is
/// cooperative. Allocates nothing: the extended attributes live on the stack.
///
/// # Safety
/// `function` belongs to the current context (the stream's); `params` as for
/// [`launch_embedded`].
#[inline]
pub(crate) unsafe fn launch_function(function: sys::CUfunction, symbol: &'static str, stream: &Stream, config: &LaunchConfig, params: &mut [*mut c_void]) -> Result<()> {
    if !config.is_extended() {
        // SAFETY: per this function's contract.
        return Ok(unsafe {
            driver::launch::launch_kernel(
                function,
                config.grid.x,
                config.grid.y,
                config.grid.z,
                config.block.x,
                config.block.y,
                config.block.z,
                config.shared_bytes,
                stream.raw(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }?);
    }
    // SAFETY: an all-zero attribute is a valid (ignored) value of this plain C union.
    let mut attributes: [sys::CUlaunchAttribute; 2] = unsafe { std::mem::zeroed() };
    let mut count = 0;
    if let Some(cluster) = config.cluster {
        attributes[count].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attributes[count].value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x: cluster.x, y: cluster.y, z: cluster.z };
        count += 1;
    }
    if config.cooperative {
        attributes[count].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attributes[count].value.cooperative = 1;
        count += 1;
    }
    let launch = sys::CUlaunchConfig {
        gridDimX: config.grid.x,
        gridDimY: config.grid.y,
        gridDimZ: config.grid.z,
        blockDimX: config.block.x,
        blockDimY: config.block.y,
        blockDimZ: config.block.z,
        sharedMemBytes: config.shared_bytes,
        hStream: stream.raw(),
        attrs: attributes.as_mut_ptr(),
        numAttrs: count as u32,
    };
    // SAFETY: `launch` and its attributes outlive the call; the rest per this function's contract.
    match unsafe { driver::launch::launch_kernel_ex(&launch, function, params.as_mut_ptr(), std::ptr::null_mut()) } {
        // Only on this error path: say how many blocks would have fitted.
        Err(e) if e.code == sys::CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE => Err(cooperative_too_large(function, symbol, stream, config)),
        other => Ok(other?),
    }
}

/// The error for a cooperative grid larger than what fits on the device at once, with the
/// numbers from the occupancy API (or the driver's error when those cannot be had).
#[cold]
fn cooperative_too_large(function: sys::CUfunction, symbol: &str, stream: &Stream, config: &LaunchConfig) -> Error {
    let driver_error = || Error::Driver(crate::error::DriverError { call: "cuLaunchKernelEx", code: sys::CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE });
    let mut per_sm = 0;
    let threads = config.block.volume().min(i32::MAX as u64) as i32;
    // SAFETY: writes one int; the function belongs to the bound context.
    let occupancy = unsafe { driver::function::occupancy_max_active_blocks_per_multiprocessor(&mut per_sm, function, threads, config.shared_bytes as usize) };
    let Ok(sms) = stream.context().device().multiprocessor_count() else { return driver_error() };
    if occupancy.is_err() {
        return driver_error();
    }
    let max = per_sm as u64 * sms as u64;
    Error::InvalidLaunch { kernel: symbol.to_string(), problem: LaunchProblem::CooperativeGridTooLarge { blocks: config.grid.volume(), max, per_sm: per_sm as u32, sms } }
}

/// The kernel `symbol` of an embedded module as loaded into `context` (loading it if needed),
/// for attributes and occupancy. Generated launchers expose it as `name::function(&context)`.
#[doc(hidden)]
pub fn embedded_function(module: &'static EmbeddedModule, symbol: &'static str, context: &Context) -> Result<Function> {
    context.bind_to_thread()?;
    let raw = context.embedded_function(module, symbol)?;
    Ok(Function::new(raw, symbol.to_string(), context.clone(), None))
}
