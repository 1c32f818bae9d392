//! Modules: loading PTX (JIT-compiled by the driver, with its logs captured) or cubins.

use std::ffi::{CString, c_void};

use cudarc::driver::sys;

use crate::driver::check;
use crate::error::{Error, Result};

/// A loaded module; unloaded on drop. Its context must outlive it (the owners ensure that).
pub(crate) struct RawModule {
    raw: sys::CUmodule,
}

impl RawModule {
    /// Loads PTX text (JIT) or a cubin into the current context, capturing the JIT's logs.
    /// `name` labels errors.
    pub(crate) fn load(name: &str, image: &[u8], is_ptx: bool) -> Result<Self> {
        const LOG_SIZE: usize = 16 * 1024;
        let owned;
        let data: *const c_void = if is_ptx {
            owned = CString::new(image.iter().copied().take_while(|&b| b != 0).collect::<Vec<u8>>()).expect("NULs were removed");
            owned.as_ptr().cast()
        } else {
            image.as_ptr().cast()
        };
        let mut info_log = vec![0u8; LOG_SIZE];
        let mut error_log = vec![0u8; LOG_SIZE];
        let mut options = [
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values: [*mut c_void; 4] =
            [info_log.as_mut_ptr().cast(), LOG_SIZE as *mut c_void, error_log.as_mut_ptr().cast(), LOG_SIZE as *mut c_void];
        let mut raw = std::ptr::null_mut();
        // SAFETY: the image outlives the call; option values follow cuModuleLoadDataEx's contract.
        let code = unsafe { sys::cuModuleLoadDataEx(&mut raw, data, options.len() as u32, options.as_mut_ptr(), values.as_mut_ptr()) };
        if let Err(source) = check("cuModuleLoadDataEx", code) {
            return Err(Error::ModuleLoad { module: name.to_string(), source, log: log_text(&error_log) });
        }
        Ok(RawModule { raw })
    }

    /// Looks up a kernel by symbol.
    pub(crate) fn function(&self, module_name: &str, symbol: &str) -> Result<sys::CUfunction> {
        let name = CString::new(symbol).map_err(|_| Error::KernelNotFound { kernel: symbol.into(), module: module_name.into() })?;
        let mut function = std::ptr::null_mut();
        // SAFETY: the module is loaded; writes one handle.
        let code = unsafe { sys::cuModuleGetFunction(&mut function, self.raw, name.as_ptr()) };
        if code == sys::CUresult::CUDA_ERROR_NOT_FOUND {
            return Err(Error::KernelNotFound { kernel: symbol.into(), module: module_name.into() });
        }
        check("cuModuleGetFunction", code)?;
        Ok(function)
    }
}

impl Drop for RawModule {
    fn drop(&mut self) {
        // SAFETY: loaded by us and unloaded once; the owning context is current (see owners).
        unsafe { sys::cuModuleUnload(self.raw) };
    }
}

fn log_text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).trim().to_string()
}
