//! [`DriverError`]: one failed driver call, naming the entry point.

use std::ffi::CStr;
use std::fmt;

use cudarc::driver::sys;

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
        let _ = unsafe { super::init::get_error_name(self.code, &mut text) };
        if text.is_null() { format!("{:?}", self.code) } else { unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned() }
    }

    /// The driver's description of the code.
    pub fn description(&self) -> String {
        let mut text = std::ptr::null();
        // SAFETY: as in `name`.
        let _ = unsafe { super::init::get_error_string(self.code, &mut text) };
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
            write!(
                f,
                "; a kernel faulted, so this context can no longer be used (every later call in it fails). \
                 Drop its buffers and streams and call `Context::recover()` to start over (a context of `Context::create`; \
                 the primary context, which other libraries may share, is not reset by it); the driver may keep the whole \
                 process poisoned, and then only a new process can use the GPU"
            )?;
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
