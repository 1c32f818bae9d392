//! The driver layer: one thin fallible function per CUDA driver entry point, grouped by topic.
//!
//! Layers (as in cudarc's `sys` / `result` / `safe`): `cudarc::driver::sys` (raw bindings,
//! loaded at run time) -> this module (each call returns `Result<(), DriverError>`, the error
//! naming the entry point) -> the RAII types of the crate ([`Context`](crate::Context),
//! [`Stream`](crate::Stream), [`DeviceBuffer`](crate::DeviceBuffer), ...). The FFI calls of
//! the crate are here and nowhere else; every other file calls `driver::<topic>::<call>`.
//!
//! The functions keep the driver's out-pointer style (no allocation, no hidden copies); each
//! is `unsafe` with the driver's own contract. The entry point's name is written once, in the
//! `entries!` line that defines the wrapper, and reaches [`DriverError::call`] from there
//! (without the `_v2`-style ABI suffix, as NVIDIA's documentation names it).

use cudarc::driver::sys;

mod result;
pub use result::DriverError;

pub mod context;
pub mod device;
pub mod event;
pub mod function;
pub mod graph;
pub mod init;
pub mod launch;
pub mod memory;
pub mod module;
pub mod stream;
pub mod tensor_map;

/// What each topic file needs.
mod prelude {
    pub(super) use std::ffi::{c_char, c_int, c_uchar, c_uint, c_ulonglong, c_ushort, c_void};

    pub(super) use cudarc::driver::sys;

    pub(super) use super::DriverError;
}

/// `"cuMemAlloc_v2"` -> `"cuMemAlloc"`: the name NVIDIA's documentation uses.
const fn documented_name(symbol: &'static str) -> &'static str {
    let bytes = symbol.as_bytes();
    let mut end = bytes.len();
    // Strip one trailing `_v<digits>`.
    let mut i = end;
    while i > 0 && bytes[i - 1].is_ascii_digit() {
        i -= 1;
    }
    if i < end && i >= 2 && bytes[i - 1] == b'v' && bytes[i - 2] == b'_' {
        end = i - 2;
    }
    match std::str::from_utf8(bytes.split_at(end).0) {
        Ok(name) => name,
        Err(_) => symbol,
    }
}

/// Defines one wrapper per line: `name = cuSymbol(arg: Type, ...);` becomes
/// `pub unsafe fn name(arg: Type, ...) -> Result<(), DriverError>` calling `sys::cuSymbol`.
macro_rules! entries {
    ($($name:ident = $symbol:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {$(
        #[doc = concat!("[`", stringify!($symbol), "`](https://docs.nvidia.com/cuda/cuda-driver-api/index.html): an error names the entry point.")]
        ///
        /// # Safety
        #[doc = concat!("As the CUDA driver API reference requires of `", stringify!($symbol), "`: every pointer is valid for what the call reads and writes, every handle is alive, and a call that acts on the current context runs with the right context current on this thread.")]
        #[inline]
        #[allow(clippy::too_many_arguments)] // the driver's own parameter lists
        pub unsafe fn $name($($arg: $ty),*) -> Result<(), DriverError> {
            // SAFETY: forwarded to the caller (this function's contract).
            let code = unsafe { sys::$symbol($($arg),*) };
            $crate::driver::check($crate::driver::name_of(stringify!($symbol)), code)
        }
    )*};
}
pub(crate) use entries;

/// [`documented_name`], forced to compile time by the caller's `const` context.
#[doc(hidden)]
#[inline(always)]
pub(crate) const fn name_of(symbol: &'static str) -> &'static str {
    documented_name(symbol)
}

/// Turns a driver result into `Ok(())` or a [`DriverError`] naming the call.
#[inline]
pub(crate) fn check(call: &'static str, code: sys::CUresult) -> Result<(), DriverError> {
    if code == sys::CUresult::CUDA_SUCCESS { Ok(()) } else { Err(DriverError { call, code }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_documented_entry_point() {
        assert_eq!(documented_name("cuMemAlloc_v2"), "cuMemAlloc");
        assert_eq!(documented_name("cuCtxCreate_v4"), "cuCtxCreate");
        assert_eq!(documented_name("cuLaunchKernel"), "cuLaunchKernel");
        assert_eq!(documented_name("cuMemcpyDtoH_v2"), "cuMemcpyDtoH");
    }
}
