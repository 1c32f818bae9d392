//! A loaded `CUmodule` as an owned value (unloaded on drop), the JIT call with its logs, and
//! the checks of PTX text before the driver sees it. Below contexts: used by explicit modules
//! and by the embedded modules a context loads.

use std::ffi::{CString, c_void};

use cudarc::driver::sys;

use crate::device::Device;
use crate::driver;
use crate::error::{Error, Result};
use crate::loader::driver_version;
use crate::module::jit::{JitFallback, JitOptions};
use crate::module::symbols::ImageSymbols;
use crate::panic_report::ContextRecord;
use crate::ptx_version::PtxHeader;

const LOG_SIZE: usize = 16 * 1024;

/// A loaded module; unloaded on drop. Its context must be alive, and current, when it drops
/// (the owners ensure that).
pub(crate) struct RawModule {
    pub(crate) raw: sys::CUmodule,
    /// Which of ferrocuda's globals the image can hold (read before loading): the host looks
    /// up only those, so compute-sanitizer reports no failed lookup of ours.
    pub(crate) symbols: ImageSymbols,
}

impl RawModule {
    /// Loads PTX text (JIT) or a cubin into the current context with default options.
    /// `record` is the current context's panic record (G22S-2).
    pub(crate) fn load(name: &str, image: &[u8], is_ptx: bool, record: &ContextRecord) -> Result<Self> {
        Self::load_with(name, image, is_ptx, &JitOptions::default(), record).map(|(module, _)| module)
    }

    /// Loads PTX text (JIT) or a cubin/fatbin into the current context, returning the module
    /// and the JIT's info log; a failure carries the error log. `name` labels errors. The
    /// module's panic slot points at `record`, the panic record of the context it is loaded
    /// into (current now), which outlives the module (G22S-2: the context's teardown frees it
    /// after unloading its modules).
    pub(crate) fn load_with(name: &str, image: &[u8], is_ptx: bool, options: &JitOptions, record: &ContextRecord) -> Result<(Self, String)> {
        options.validate()?;
        let owned;
        let data: *const c_void = if is_ptx {
            owned = CString::new(image.iter().copied().take_while(|&b| b != 0).collect::<Vec<u8>>()).expect("NULs were removed");
            owned.as_ptr().cast()
        } else {
            image.as_ptr().cast()
        };
        let mut info_log = vec![0u8; LOG_SIZE];
        let mut error_log = vec![0u8; LOG_SIZE];
        use sys::CUjit_option::*;
        let mut keys = vec![CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        // Option values are passed in pointer-sized slots: integers by value.
        let mut values: Vec<*mut c_void> = vec![info_log.as_mut_ptr().cast(), LOG_SIZE as *mut c_void, error_log.as_mut_ptr().cast(), LOG_SIZE as *mut c_void];
        let mut add = |key, value: usize| {
            keys.push(key);
            values.push(value as *mut c_void);
        };
        if let Some(level) = options.optimization_level {
            add(CU_JIT_OPTIMIZATION_LEVEL, level as usize);
        }
        if let Some(registers) = options.max_registers {
            add(CU_JIT_MAX_REGISTERS, registers as usize);
        }
        match options.target {
            Some(arch) => add(CU_JIT_TARGET, arch as usize),
            None => add(CU_JIT_TARGET_FROM_CUCONTEXT, 0),
        }
        if let Some(fallback) = options.fallback {
            let value = match fallback {
                JitFallback::PreferPtx => sys::CUjit_fallback::CU_PREFER_PTX,
                JitFallback::PreferBinary => sys::CUjit_fallback::CU_PREFER_BINARY,
            };
            add(CU_JIT_FALLBACK_STRATEGY, value as usize);
        }
        if options.line_info {
            add(CU_JIT_GENERATE_LINE_INFO, 1);
        }
        if options.verbose {
            add(CU_JIT_LOG_VERBOSE, 1);
        }
        let mut raw = std::ptr::null_mut();
        // SAFETY: the image and the log buffers outlive the call; every option value follows
        // cuModuleLoadDataEx's contract for its key.
        let loaded = unsafe { driver::module::load_data_ex(&mut raw, data, keys.len() as u32, keys.as_mut_ptr(), values.as_mut_ptr()) };
        if let Err(source) = loaded {
            return Err(Error::ModuleLoad { module: name.to_string(), source, log: nul_terminated_text(&error_log) });
        }
        let mut symbols = ImageSymbols::scan(image, is_ptx);
        symbols.host_writable = options.host_writable.iter().map(|name| name.as_str().into()).collect();
        let module = RawModule { raw, symbols };
        // (On failure `module` is dropped, which unloads it.)
        crate::panic_report::install(module.raw, &module.symbols, record)?;
        Ok((module, nul_terminated_text(&info_log)))
    }

    /// Looks up a kernel by symbol.
    pub(crate) fn function(&self, module_name: &str, symbol: &str) -> Result<sys::CUfunction> {
        let name = CString::new(symbol).map_err(|_| Error::KernelNotFound { kernel: symbol.into(), module: module_name.into() })?;
        let mut function = std::ptr::null_mut();
        // SAFETY: the module is loaded; writes one handle.
        match unsafe { driver::module::get_function(&mut function, self.raw, name.as_ptr()) } {
            Err(e) if e.code == sys::CUresult::CUDA_ERROR_NOT_FOUND => {
                return Err(Error::KernelNotFound { kernel: symbol.into(), module: module_name.into() });
            }
            other => other?,
        }
        Ok(function)
    }

    /// Loads the code of every kernel of the module now, and returns them (P12, s9-p12).
    /// Since CUDA 12.2 the driver loads kernels lazily, on first lookup, and such a load "might
    /// require context synchronization" (CUDA programming guide, Lazy Loading, Potential
    /// Hazards): the first launch of a kernel while another kernel of the context never ends
    /// (`spin_for(u64::MAX)`, then `mark_blocks` queued behind it) could block the host in the
    /// launch, where no `synchronize_timeout` bounds it. Loaded with the module, before any of
    /// its kernels runs, that wait has nothing of the module's to wait for. Best effort: `None`
    /// on drivers before 12.4 (no `cuModuleEnumerateFunctions` / `cuFuncLoad`) or a failed
    /// listing, which keep lazy loading.
    pub(crate) fn load_every_function(&self) -> Option<Vec<sys::CUfunction>> {
        if !driver_version().is_ok_and(preloading_supported) {
            return None;
        }
        let mut count = 0;
        // SAFETY: writes one count; the module is loaded in the current context.
        unsafe { driver::module::function_count(&mut count, self.raw) }.ok()?;
        let mut functions = vec![std::ptr::null_mut(); count as usize];
        // SAFETY: `functions` holds `count` writable handles.
        unsafe { driver::module::enumerate_functions(functions.as_mut_ptr(), count, self.raw) }.ok()?;
        if functions.iter().any(|f| f.is_null()) {
            return None;
        }
        for &function in &functions {
            // SAFETY: a function handle of this loaded module, in the current context.
            let _ = unsafe { driver::function::load(function) };
        }
        Some(functions)
    }

    /// Unloads, reporting the driver's answer (Drop cannot).
    pub(crate) fn unload(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: loaded by us; `self` is disarmed above so it is unloaded once.
        unsafe { driver::module::unload(raw) }?;
        Ok(())
    }
}

impl Drop for RawModule {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: loaded by us and unloaded once; the owning context is current (see owners).
            let _ = unsafe { driver::module::unload(self.raw) };
        }
    }
}

/// True when the driver has `cuModuleEnumerateFunctions` and `cuFuncLoad` (CUDA 12.4), which
/// [`RawModule::load_every_function`] needs.
pub(crate) fn preloading_supported(driver: (u32, u32)) -> bool {
    driver >= (12, 4)
}

/// The text of a NUL-terminated byte buffer (a JIT log, a panic record field), trimmed.
pub(crate) fn nul_terminated_text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).trim().to_string()
}

/// Checks PTX text against the driver and the device before the driver JIT-compiles
/// it, so an unsupported PTX ISA or architecture is reported as such.
pub(crate) fn check_ptx_supported(name: &str, ptx: &str, device: Device) -> Result<()> {
    let Some(header) = PtxHeader::parse(ptx) else {
        if !ptx.contains(".version") && !ptx.contains(".entry") {
            // E7: the driver would say "Binary format for key='0', ident='' is not recognized".
            return Err(Error::InvalidImage {
                module: name.to_string(),
                reason: "it is not PTX text (no `.version` / `.target` header): pass the text of a `.ptx` file, or load a cubin with `Module::load_binary`"
                    .into(),
            });
        }
        return Ok(()); // Let the driver's own error (and log) describe malformed PTX.
    };
    header.check(name, driver_version()?, device.arch()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_stop_at_the_nul() {
        assert_eq!(nul_terminated_text(b"ptxas info: 1 register\n\0garbage"), "ptxas info: 1 register");
    }

    /// P12 (s9-p12): every kernel of an embedded module is loaded with the module wherever the
    /// driver can (12.4 and later); older drivers keep lazy loading (the calls do not exist).
    #[test]
    fn p12_kernels_are_preloaded_from_driver_12_4() {
        assert!(preloading_supported((12, 4)) && preloading_supported((13, 0)) && preloading_supported((12, 10)));
        assert!(!preloading_supported((12, 3)) && !preloading_supported((11, 8)));
    }
}
