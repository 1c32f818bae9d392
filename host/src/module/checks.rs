//! Does a module's kernel match its typed launcher? Its full-signature fingerprint (U7) and
//! its parameter sizes.

use std::ffi::CString;

use cudarc::driver::sys;

use crate::KernelSignature;
use crate::driver;
use crate::error::{Error, Result};
use crate::loader::driver_version;

/// Compares the kernel's fingerprint global (`#[kernel]` writes one per entry point) with the
/// launcher's (U7). A module without the global (not built by `#[kernel]`) passes: its loader
/// vouched for it (`load_ptx` is `unsafe`).
pub(crate) fn check_fingerprint(raw: sys::CUmodule, signature: &KernelSignature, module: &str) -> Result<()> {
    if signature.fingerprint == 0 {
        return Ok(());
    }
    let Ok(name) = CString::new(format!("{}{}", crate::FINGERPRINT_SYMBOL_PREFIX, signature.symbol)) else { return Ok(()) };
    let (mut address, mut bytes) = (0, 0);
    // SAFETY: looks a global up by a NUL-terminated name in a loaded module.
    if unsafe { driver::module::get_global(&mut address, &mut bytes, raw, name.as_ptr()) }.is_err() || bytes != 8 {
        return Ok(());
    }
    let mut found = 0u64;
    // SAFETY: copies the 8-byte global found above into a u64.
    unsafe { driver::memory::memcpy_dtoh((&mut found as *mut u64).cast(), address, 8) }?;
    if found != signature.fingerprint {
        return Err(Error::KernelSignatureMismatch {
            kernel: signature.symbol.to_string(),
            module: module.to_string(),
            detail: format!(
                "the module's kernel was built with another signature than the launcher's `{}` (fingerprint {found:#018x}, launcher {:#018x}): element types differ even where sizes match",
                signature.canonical, signature.fingerprint
            ),
        });
    }
    Ok(())
}

/// Compares the kernel's PTX parameters with what its launcher passes.
pub(crate) fn check_params(function: sys::CUfunction, signature: &KernelSignature, module: &str) -> Result<()> {
    const PARAM_INFO: (u32, u32) = (12, 4);
    if driver_version()? < PARAM_INFO {
        return Ok(()); // cuFuncGetParamInfo does not exist before CUDA 12.4.
    }
    let mismatch = |detail: String| Error::KernelSignatureMismatch { kernel: signature.symbol.to_string(), module: module.to_string(), detail };
    let mut found = Vec::new();
    loop {
        let (mut offset, mut size) = (0, 0);
        // SAFETY: writes two sizes; an index past the last parameter returns an error.
        let info = unsafe { driver::function::get_param_info(function, found.len(), &mut offset, &mut size) };
        if info.is_err() || found.len() > 4096 {
            break;
        }
        found.push(size);
    }
    let expected = signature.param_sizes;
    if found.len() != expected.len() {
        return Err(mismatch(format!(
            "the module's kernel has {} parameters, the launcher passes {} (sizes in bytes: module {found:?}, launcher {expected:?})",
            found.len(),
            expected.len()
        )));
    }
    if let Some(i) = (0..found.len()).find(|&i| found[i] != expected[i]) {
        return Err(mismatch(format!("parameter {i} is {} bytes in the module but {} bytes in the launcher", found[i], expected[i])));
    }
    Ok(())
}
