//! The launch itself: validation against the device and the kernel, buffer ordering, then
//! `cuLaunchKernel` / `cuLaunchKernelEx`. Configuration types come from ferrocuda-types.

pub mod args;

use std::ffi::c_void;

use cudarc::driver::sys;

use crate::EmbeddedModule;
use crate::context::Context;
use crate::driver;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::memory::usage::BufferAccess;
use crate::module::Module;
use crate::stream::{RawStream, Stream};
use crate::{KernelSignature, LaunchConfig, LaunchProblem};

/// Launches the kernel `signature` names from an embedded module, loading the module into the
/// stream's context on first use (outside a capture: inside one, a module that is not loaded
/// yet is an error that says how to load it first, E1a). The kernel's first launch in a context
/// compares the module's layout of its parameters with the launcher's (Q1, Q2).
///
/// # Safety
/// `params` must match the kernel's parameters in number, order and type, and every raw device
/// pointer among them ([`args::KernelParam::device_ptr`]) must stay valid (and, for outputs,
/// unaliased) until the kernel ends; `buffers` must list every slice and tensor map argument
/// among them (with its access), so that the launch is ordered with the other work on that
/// memory. The `#[kernel]` launchers guarantee this from the kernel's own signature. What a
/// parameter *is* (a primitive, plain data, device memory of its length, a map's copy) is no
/// longer the caller's promise: [`args::KernelParam`]'s constructors check it (G17R-2).
#[doc(hidden)]
#[inline]
pub unsafe fn launch_embedded<const N: usize>(
    module: &'static EmbeddedModule,
    signature: &'static KernelSignature,
    stream: &Stream,
    config: LaunchConfig,
    params: &[args::KernelParam<'_>; N],
    buffers: &[BufferAccess<'_>],
) -> Result<()> {
    let symbol = signature.symbol;
    // A stream whose loan ended (G23R-2: a clone kept past a torch op's call) launches nothing.
    stream.loan_check(symbol)?;
    // Before anything else: what the outputs and `same_len` groups require of this launch,
    // carried by their parameters (G18S-1).
    let mut driver_params = checked_params(symbol, params, &config)?;
    let params = &mut driver_params[..];
    let context = stream.context();
    config.validate(context.limits()).map_err(|problem| Error::InvalidLaunch { kernel: symbol.to_string(), problem })?;
    // Through the door: the buffers are ordered and recorded, the context bound.
    stream.enqueue(symbol, buffers, |raw| {
        // Any capture of ferrocuda's that records the launch: this stream's own, or one it was
        // forked into (`wait_event`; audit 2026-11-28d review, G16R-6: a fork loaded modules
        // inside the capture, which E1a refuses). Exact here, under the stream's `driver_calls`.
        let function = if stream.ours_captured() || stream.records_for_owner() {
            context.embedded_launch_function_if_loaded(module, signature)?
        } else {
            context.embedded_launch_function(module, signature)?
        };
        // SAFETY: the function belongs to the bound context; the caller vouches for `params`.
        unsafe { launch_function(function, symbol, stream, raw, &config, params) }
    })
}

/// The launch's own check of what its parameters carry (an output's partition facts, a
/// `same_len` group's relation: [`args::KernelParam::output_address`],
/// [`args::KernelParam::same_len`]), then their `void*`s for the driver. The launchers check
/// the same before (with their own error order), through paths the kernel's crate can rename;
/// this check cannot be renamed away (session 19, audit 2026-11-28e's G18S-1: with the
/// launchers' checks replaced by no-ops, a 2-D launch of a per-thread output, or a `same_len`
/// group of other lengths, reached the GPU).
///
/// # Errors
/// [`Error::InvalidLaunch`] naming the kernel and the first problem.
#[inline]
fn checked_params<const N: usize>(symbol: &'static str, params: &[args::KernelParam<'_>; N], config: &LaunchConfig) -> Result<[*mut c_void; N]> {
    args::KernelParam::checked_driver_params(params, config).map_err(|problem| Error::InvalidLaunch { kernel: symbol.to_string(), problem })
}

/// `config` for the kernel `symbol` compiled with the cluster shape `compiled`
/// ([`LaunchConfig::for_compiled_cluster`]), or the error that names the mismatch. The
/// `#[kernel]` launchers call it first.
#[doc(hidden)]
#[inline]
pub fn compiled_cluster(symbol: &'static str, config: LaunchConfig, compiled: Option<crate::Dim3>) -> Result<LaunchConfig> {
    config.for_compiled_cluster(compiled).map_err(|problem| Error::InvalidLaunch { kernel: symbol.to_string(), problem })
}

/// Checks `config` against what the kernel's output parameters require
/// ([`LaunchConfig::check_requirements`]): the `#[kernel]` launchers call it before anything
/// else, on every path (`launch`, `launch_in`; `launch_cpu` does the same check).
///
/// # Errors
/// [`Error::InvalidLaunch`] naming the kernel and the limit.
#[doc(hidden)]
#[inline]
pub fn check_requirements(symbol: &'static str, config: &LaunchConfig, requirements: ferrocuda_types::LaunchRequirements) -> Result<()> {
    config.check_requirements(requirements).map_err(|problem| Error::InvalidLaunch { kernel: symbol.to_string(), problem })
}

/// Checks the lengths of a `#[kernel(same_len(..))]` group ([`ferrocuda_types::same_lengths`]).
///
/// # Errors
/// [`Error::InvalidLaunch`] naming the kernel and the two parameters.
#[doc(hidden)]
#[inline]
pub fn check_same_len(symbol: &'static str, lengths: &[(&'static str, usize)]) -> Result<()> {
    ferrocuda_types::same_lengths(lengths).map_err(|problem| Error::InvalidLaunch { kernel: symbol.to_string(), problem })
}

/// The result of an output's launch-time bound (`Partition::check_launch`, through
/// `KernelOutput::check_launch`) as the launchers' error.
///
/// # Errors
/// [`Error::InvalidLaunch`] naming the kernel, with the output's problem.
#[doc(hidden)]
#[inline]
pub fn check_output_shape(symbol: &'static str, checked: core::result::Result<(), ferrocuda_types::LaunchProblem>) -> Result<()> {
    checked.map_err(|problem| Error::InvalidLaunch { kernel: symbol.to_string(), problem })
}

/// Launches the kernel `signature` names from an explicitly loaded `module`; the first launch
/// checks the module's kernel against the signature (its fingerprint, where the module has
/// one, and its parameter sizes). Inside a stream capture the module is kept loaded for the
/// graph (U5).
///
/// # Safety
/// As for [`launch_embedded`].
#[doc(hidden)]
#[inline]
pub unsafe fn launch_in_module<const N: usize>(
    module: &Module,
    signature: &'static KernelSignature,
    stream: &Stream,
    config: LaunchConfig,
    params: &[args::KernelParam<'_>; N],
    buffers: &[BufferAccess<'_>],
) -> Result<()> {
    stream.loan_check(signature.symbol)?;
    // As in `launch_embedded`, first (G18S-1).
    let mut driver_params = checked_params(signature.symbol, params, &config)?;
    let params = &mut driver_params[..];
    let context = stream.context();
    if context.raw() != module.context().raw() {
        return Err(Error::WrongContext { kernel: signature.symbol.to_string(), module: module.name().to_string() });
    }
    config.validate(context.limits()).map_err(|problem| Error::InvalidLaunch { kernel: signature.symbol.to_string(), problem })?;
    // Through the door, with the module's globals as read (S1: `Global::write` waits for the
    // launch, the launch for earlier writes), declared under the module's globals gate, which
    // the door takes after the arguments' records (session 17: `Stream::enqueue_gated`).
    let (gate, globals) = module.globals_for_launch();
    stream.enqueue_gated(signature.symbol, buffers, gate, &[globals], |raw| {
        let function = module.checked_function(signature)?;
        // Under the key of the capture that records the launch: this stream's, or the
        // capturing stream's when this one is forked into it (G16R-1).
        if let Some(key) = stream.capture_key() {
            context.keep_for_capture(key, module.keep_alive());
        }
        // SAFETY: the function belongs to the bound context; the caller vouches for `params`.
        unsafe { launch_function(function, signature.symbol, stream, raw, &config, params) }
    })
}

/// The dynamic shared memory a kernel allows without raising its attribute.
const DEFAULT_DYNAMIC_SHARED_LIMIT: u32 = 48 * 1024;

/// Above the default 48 KiB, checks the dynamic shared memory against the kernel's own limit
/// (E2: the driver answers only `CUDA_ERROR_INVALID_VALUE`). One attribute read, only then.
#[cold]
fn check_kernel_shared(function: sys::CUfunction, symbol: &str, stream: &Stream, config: &LaunchConfig) -> Result<()> {
    let (mut max, mut static_bytes) = (0, 0);
    let attribute = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    // SAFETY: writes one int; the function belongs to the bound context.
    unsafe { driver::function::get_attribute(&mut max, attribute, function) }?;
    let attribute = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES;
    // SAFETY: as above.
    unsafe { driver::function::get_attribute(&mut static_bytes, attribute, function) }?;
    let invalid = |problem| Error::InvalidLaunch { kernel: symbol.to_string(), problem };
    // Static and dynamic together first (F7): no opt-in raises that limit, so it is the
    // problem to name.
    config.validate_total_shared(static_bytes.max(0) as u32, stream.context().limits()).map_err(invalid)?;
    config.validate_kernel_shared(max.max(0) as u32, stream.context().limits()).map_err(invalid)
}

/// The most launch attributes one launch sets: cluster dimension, cooperative, programmatic
/// stream serialization.
const MAX_ATTRIBUTES: usize = 3;

/// The `cuLaunchKernelEx` attributes of `config`, in the first `count` entries (the rest are
/// zero, `CU_LAUNCH_ATTRIBUTE_IGNORE`): the cluster dimension, the cooperative flag and
/// programmatic stream serialization (programmatic dependent launch), each only when set.
/// [`CUlaunchAttributeValue`](https://docs.nvidia.com/cuda/cuda-driver-api/cuda_driver_api/unionCUlaunchAttributeValue.html).
fn launch_attributes(config: &LaunchConfig) -> ([sys::CUlaunchAttribute; MAX_ATTRIBUTES], usize) {
    // SAFETY: an all-zero attribute is a valid (ignored) value of this plain C union.
    let mut attributes: [sys::CUlaunchAttribute; MAX_ATTRIBUTES] = unsafe { std::mem::zeroed() };
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
    if config.programmatic_dependent_launch() {
        attributes[count].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attributes[count].value.programmaticStreamSerializationAllowed = 1;
        count += 1;
    }
    (attributes, count)
}

/// `cuLaunchKernel`, or `cuLaunchKernelEx` when the configuration has a cluster, is
/// cooperative or is a programmatic dependent launch. Allocates nothing: the extended
/// attributes live on the stack.
///
/// # Safety
/// `function` belongs to the current context (the stream's), `raw` is `stream`'s (lent by
/// [`Stream::enqueue`]); `params` as for [`launch_embedded`].
#[inline]
pub(crate) unsafe fn launch_function(
    function: sys::CUfunction,
    symbol: &'static str,
    stream: &Stream,
    raw: RawStream<'_>,
    config: &LaunchConfig,
    params: &mut [*mut c_void],
) -> Result<()> {
    if config.shared_bytes > DEFAULT_DYNAMIC_SHARED_LIMIT {
        check_kernel_shared(function, symbol, stream, config)?;
    }
    if !config.is_extended() {
        // SAFETY: per this function's contract.
        return match unsafe {
            driver::launch::launch_kernel(
                function,
                config.grid.x,
                config.grid.y,
                config.grid.z,
                config.block.x,
                config.block.y,
                config.block.z,
                config.shared_bytes,
                raw.get(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        } {
            Err(e) if refused_block(e.code) => Err(block_over_kernel_limit(function, symbol, stream, config, e)),
            other => Ok(other?),
        };
    }
    let (mut attributes, count) = launch_attributes(config);
    let launch = sys::CUlaunchConfig {
        gridDimX: config.grid.x,
        gridDimY: config.grid.y,
        gridDimZ: config.grid.z,
        blockDimX: config.block.x,
        blockDimY: config.block.y,
        blockDimZ: config.block.z,
        sharedMemBytes: config.shared_bytes,
        hStream: raw.get(),
        attrs: attributes.as_mut_ptr(),
        numAttrs: count as u32,
    };
    // SAFETY: `launch` and its attributes outlive the call; the rest per this function's contract.
    match unsafe { driver::launch::launch_kernel_ex(&launch, function, params.as_mut_ptr(), std::ptr::null_mut()) } {
        // Only on this error path: say how many blocks would have fitted.
        Err(e) if e.code == sys::CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE => Err(cooperative_too_large(function, symbol, stream, config)),
        Err(e) if refused_block(e.code) => Err(block_over_kernel_limit(function, symbol, stream, config, e)),
        other => Ok(other?),
    }
}

/// The driver's answers to a block larger than the kernel allows (`.maxntid`, or more threads
/// than its registers leave room for), and to a kernel whose local memory it cannot give
/// (Q7: `CUDA_ERROR_INVALID_VALUE` on an H100).
fn refused_block(code: sys::CUresult) -> bool {
    matches!(code, sys::CUresult::CUDA_ERROR_INVALID_VALUE | sys::CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES | sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY)
}

/// Only on the error path (audit P11): when the block is over the kernel's own limit
/// (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`: its launch bounds or its registers), the error
/// names that limit instead of `CUDA_ERROR_INVALID_VALUE`; when the kernel's local memory is
/// (Q7), that; otherwise the driver's error. The
/// `#[kernel]` launchers refuse a block over `launch_bounds` before this (`REQUIREMENTS`).
#[cold]
fn block_over_kernel_limit(function: sys::CUfunction, symbol: &str, stream: &Stream, config: &LaunchConfig, error: crate::error::DriverError) -> Error {
    let mut max = 0;
    let attribute = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK;
    // SAFETY: writes one int; the function belongs to the bound context.
    let read = unsafe { driver::function::get_attribute(&mut max, attribute, function) };
    let threads = config.block.volume();
    match read {
        Ok(()) if max > 0 && threads > max as u64 => Error::InvalidLaunch {
            kernel: symbol.to_string(),
            problem: LaunchProblem::AboveKernelThreadLimit { threads, max: max as u32, source: "compiled code (registers or launch bounds)" },
        },
        _ => match local_memory_over_limit(function, &stream.context().device()) {
            Some(problem) => Error::InvalidLaunch { kernel: symbol.to_string(), problem },
            None => Error::Driver(error),
        },
    }
}

/// Only on a refused launch (audit 2026-11-27b, Q7: a kernel with 512 KiB of locals per
/// thread got a bare `CUDA_ERROR_INVALID_VALUE`): when the kernel's local memory
/// (`CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES`) is at CUDA's per-thread limit or more, or more than
/// the device's memory can hold for every thread that can be resident at once (the driver
/// reserves it for all of them), the problem that names it.
#[cold]
fn local_memory_over_limit(function: sys::CUfunction, device: &crate::device::Device) -> Option<LaunchProblem> {
    let mut local = 0;
    let attribute = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES;
    // SAFETY: writes one int; the function belongs to the bound context.
    unsafe { driver::function::get_attribute(&mut local, attribute, function) }.ok()?;
    let bytes = local.max(0) as u64;
    let limit = ferrocuda_types::MAX_LOCAL_BYTES_PER_THREAD;
    let reserve = (|| {
        let per_sm = device.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR).ok()?;
        let sms = device.multiprocessor_count().ok()?;
        let memory = device.total_memory().ok()?;
        Some((per_sm.max(0) as u64 * sms as u64, memory as u64))
    })();
    let too_much_for_the_device = reserve.is_some_and(|(threads, memory)| bytes.saturating_mul(threads) > memory);
    (bytes > 0 && (bytes >= limit || too_much_for_the_device)).then_some(LaunchProblem::LocalMemoryTooLarge { bytes, limit, reserve })
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
    Error::InvalidLaunch {
        kernel: symbol.to_string(),
        problem: LaunchProblem::CooperativeGridTooLarge { blocks: config.grid.volume(), max, per_sm: per_sm as u32, sms },
    }
}

/// The kernel `symbol` of an embedded module as loaded into `context` (loading it if needed),
/// for attributes and occupancy. Generated launchers expose it as `name::function(&context)`.
#[doc(hidden)]
pub fn embedded_function(module: &'static EmbeddedModule, symbol: &'static str, context: &Context) -> Result<Function> {
    Function::from_embedded(context, module, symbol)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(id, value)` of each set attribute, the value read through the id's union field.
    fn attributes(config: LaunchConfig) -> Vec<(sys::CUlaunchAttributeID, [u32; 3])> {
        use sys::CUlaunchAttributeID as Id;
        let (attributes, count) = launch_attributes(&config);
        assert!(attributes[count..].iter().all(|a| a.id == Id::CU_LAUNCH_ATTRIBUTE_IGNORE), "entries past `count` stay ignored");
        attributes[..count]
            .iter()
            .map(|a| {
                // SAFETY: each arm reads the union field its id names, which `launch_attributes` wrote.
                let value = unsafe {
                    match a.id {
                        Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION => [a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z],
                        Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE => [a.value.cooperative as u32, 0, 0],
                        Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION => [a.value.programmaticStreamSerializationAllowed as u32, 0, 0],
                        other => panic!("unexpected attribute {other:?}"),
                    }
                };
                (a.id, value)
            })
            .collect()
    }

    #[test]
    fn launch_attributes_name_cluster_cooperative_and_programmatic_serialization() {
        use sys::CUlaunchAttributeID as Id;
        let cluster = (Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, [2, 1, 3]);
        let cooperative = (Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE, [1, 0, 0]);
        let pdl = (Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, [1, 0, 0]);
        let plain = LaunchConfig::new((8u32, 1u32, 3u32), 64u32);
        // SAFETY: attribute building only; nothing is launched.
        let with_pdl = |c: LaunchConfig| unsafe { c.with_programmatic_dependent_launch() };

        assert!(!plain.is_extended());
        assert_eq!(attributes(plain), []);
        assert_eq!(attributes(plain.with_cluster((2u32, 1u32, 3u32))), [cluster]);
        assert_eq!(attributes(plain.cooperative()), [cooperative]);
        assert_eq!(attributes(with_pdl(plain)), [pdl]);
        assert_eq!(attributes(with_pdl(plain.cooperative())), [cooperative, pdl]);
        assert_eq!(attributes(with_pdl(plain.with_cluster((2u32, 1u32, 3u32)))), [cluster, pdl]);
        // All three at once fill the array (the driver decides whether it accepts them together).
        assert_eq!(attributes(with_pdl(plain.with_cluster((2u32, 1u32, 3u32)).cooperative())), [cluster, cooperative, pdl]);
        for config in [plain.cooperative(), with_pdl(plain), plain.with_cluster(1u32)] {
            assert!(config.is_extended(), "{config:?} must go through cuLaunchKernelEx");
        }
    }
}
