//! Errors of the host API. [`DriverError`] is one failed driver call; [`Error`] is what every
//! fallible function returns, with messages that say what to do next.

use std::ffi::CStr;
use std::fmt;

use cudarc::driver::sys;

use crate::launch::LaunchProblem;

/// A driver call that returned something other than `CUDA_SUCCESS`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DriverError {
    /// The driver function, e.g. `cuMemAlloc`.
    pub call: &'static str,
    /// The result code.
    pub code: sys::CUresult,
}

impl DriverError {
    /// The CUDA name of the code, e.g. `CUDA_ERROR_OUT_OF_MEMORY`.
    pub fn name(&self) -> String {
        let mut text = std::ptr::null();
        // SAFETY: cuGetErrorName writes a pointer to a static string or leaves it null.
        unsafe { sys::cuGetErrorName(self.code, &mut text) };
        if text.is_null() { format!("{:?}", self.code) } else { unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned() }
    }

    /// The driver's description of the code.
    pub fn description(&self) -> String {
        let mut text = std::ptr::null();
        // SAFETY: as in `name`.
        unsafe { sys::cuGetErrorString(self.code, &mut text) };
        if text.is_null() { String::new() } else { unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned() }
    }

    /// True for the errors after which the context cannot be used again (a kernel fault).
    pub fn is_sticky(&self) -> bool {
        use sys::CUresult::*;
        matches!(
            self.code,
            CUDA_ERROR_ILLEGAL_ADDRESS
                | CUDA_ERROR_LAUNCH_FAILED
                | CUDA_ERROR_ILLEGAL_INSTRUCTION
                | CUDA_ERROR_MISALIGNED_ADDRESS
                | CUDA_ERROR_INVALID_ADDRESS_SPACE
                | CUDA_ERROR_INVALID_PC
                | CUDA_ERROR_HARDWARE_STACK_ERROR
                | CUDA_ERROR_ASSERT
        )
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {} ({})", self.call, self.name(), self.description())?;
        if self.is_sticky() {
            write!(f, "; a kernel faulted, so this context can no longer be used: drop it and create a new one")?;
        }
        Ok(())
    }
}

impl fmt::Debug for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DriverError({}: {:?})", self.call, self.code)
    }
}

impl std::error::Error for DriverError {}

/// Everything that can go wrong in the host API.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CUDA driver library could not be loaded.
    #[error(
        "no CUDA driver found: could not load libcuda.so.1 (nvcuda.dll on Windows). Install the NVIDIA driver, \
         or add the directory holding libcuda.so.1 to LD_LIBRARY_PATH"
    )]
    NoDriver,
    /// The device ordinal does not exist.
    #[error("there is no CUDA device {ordinal}: the driver sees {count} device(s)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver sees.
        count: usize,
    },
    /// A driver call failed.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// A launch configuration that breaks a device limit; nothing was launched.
    #[error("cannot launch `{kernel}`: {problem}")]
    InvalidLaunch {
        /// The kernel.
        kernel: String,
        /// The limit that was broken.
        problem: LaunchProblem,
    },
    /// The driver rejected a module; `log` is the JIT compiler's error log.
    #[error("loading module `{module}` failed: {source}{}", if log.is_empty() { String::new() } else { format!("\nJIT log:\n{log}") })]
    ModuleLoad {
        /// Which module.
        module: String,
        /// The driver error.
        source: DriverError,
        /// The JIT error log.
        log: String,
    },
    /// No image in an embedded module can run on this device.
    #[error("module `{module}` has no image for {device} (sm_{arch}): it was built for {built}; rebuild with an older `.arch(..)`")]
    NoCompatibleImage {
        /// Which module.
        module: String,
        /// The device name.
        device: String,
        /// The device's architecture number.
        arch: u32,
        /// What the module has.
        built: String,
    },
    /// A kernel is not in the module (stale PTX, or a wrong name).
    #[error("kernel `{kernel}` is not in module `{module}` (stale build? rebuild the kernel crate)")]
    KernelNotFound {
        /// The kernel asked for.
        kernel: String,
        /// The module searched.
        module: String,
    },
    /// A copy between buffers of different lengths.
    #[error("length mismatch: the destination holds {destination} elements, the source {source_len}")]
    LengthMismatch {
        /// Destination length.
        destination: usize,
        /// Source length.
        source_len: usize,
    },
    /// A launch without a stream, on a thread that has no current context.
    #[error("no current CUDA context on this thread: create one first (`Context::primary(0)?`) or pass a stream")]
    NoCurrentContext,
    /// The PTX needs a newer PTX ISA than the installed driver can JIT-compile.
    #[error("module `{module}` needs PTX ISA {needs}, but the driver (CUDA {driver}) supports PTX ISA up to {supports}: update the NVIDIA driver, or build the PTX with an older toolchain")]
    PtxIsaTooNew {
        /// Which module.
        module: String,
        /// The `.version` the PTX declares, e.g. "9.1".
        needs: String,
        /// The newest PTX ISA the driver accepts, e.g. "9.0".
        supports: String,
        /// The driver's CUDA version, e.g. "13.0".
        driver: String,
    },
    /// The PTX targets a newer architecture than the device has.
    #[error("module `{module}` targets {target}, which the device (sm_{device_arch}) cannot run: build the PTX for sm_{device_arch} or older")]
    ArchTooNew {
        /// Which module.
        module: String,
        /// The `.target` of the PTX, e.g. "sm_100".
        target: String,
        /// The device's architecture number.
        device_arch: u32,
    },
    /// A kernel in a module does not have the parameters the host launcher passes.
    #[error("kernel `{kernel}` in module `{module}` does not match its launcher: {detail} (stale PTX? rebuild the kernel crate or reload the module)")]
    KernelSignatureMismatch {
        /// The kernel.
        kernel: String,
        /// The module.
        module: String,
        /// What differs.
        detail: String,
    },
    /// A module global (`__constant__` or global variable) is not in the module.
    #[error("module `{module}` has no global `{name}`")]
    GlobalNotFound {
        /// The symbol asked for.
        name: String,
        /// The module searched.
        module: String,
    },
    /// A module global has another size than the type it is accessed as.
    #[error("global `{name}` of module `{module}` holds {bytes} bytes, but `{type_name}` has {type_bytes}: access it as a type of the same size (an array for an array)")]
    GlobalSizeMismatch {
        /// The symbol.
        name: String,
        /// The module.
        module: String,
        /// Its size in the module.
        bytes: usize,
        /// The Rust type asked for.
        type_name: &'static str,
        /// That type's size.
        type_bytes: usize,
    },
    /// A kernel of a module was launched on a stream of another context.
    #[error("cannot launch `{kernel}`: module `{module}` was loaded into another context than the stream's; load it into the stream's context")]
    WrongContext {
        /// The kernel.
        kernel: String,
        /// The module.
        module: String,
    },
    /// Bytes given as a cubin/fatbin that are not a complete one.
    #[error("module `{module}` is not a loadable binary image: {reason}")]
    InvalidImage {
        /// Which module.
        module: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A JIT option out of its range.
    #[error("invalid JIT option: {0}")]
    InvalidJitOption(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
