//! Loading the driver library and `cuInit`, once per process: the first step of every entry
//! point, and what turns a machine without CUDA into [`Error::NoDriver`].

use std::sync::OnceLock;

use cudarc::driver::sys;

use crate::driver::{self, DriverError};
use crate::error::{Error, Result};

/// Loads `libcuda` and calls `cuInit` once per process.
///
/// Every entry point of the host API calls this first, so a machine without a driver gets
/// [`Error::NoDriver`] instead of a panic from the dynamic loader.
pub fn init() -> Result<()> {
    static INIT: OnceLock<Result<(), Option<DriverError>>> = OnceLock::new();
    let outcome = INIT.get_or_init(|| {
        if !driver_present() {
            return Err(None);
        }
        // SAFETY: cuInit has no preconditions.
        unsafe { driver::init::init(0) }.map_err(Some)
    });
    match outcome {
        Ok(()) => Ok(()),
        Err(None) => Err(Error::NoDriver),
        Err(Some(e)) => Err(Error::Driver(*e)),
    }
}

/// True when the CUDA driver library can be loaded (it may still have no device).
pub fn driver_present() -> bool {
    // SAFETY: only probes whether the library can be opened.
    unsafe { sys::is_culib_present() }
}

/// The driver's CUDA version as (major, minor), e.g. (13, 0).
pub fn driver_version() -> Result<(u32, u32)> {
    init()?;
    let mut version = 0;
    // SAFETY: writes one int.
    unsafe { driver::init::driver_get_version(&mut version) }?;
    Ok((version as u32 / 1000, (version as u32 % 1000) / 10))
}
