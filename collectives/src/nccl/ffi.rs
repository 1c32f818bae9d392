//! libnccl, opened at run time: the few functions this crate calls, resolved once.
//!
//! Not cudarc's `nccl` feature, for two reasons seen in cudarc 0.19.10: its loader looks for
//! `libnccl.so` and `libnccl.so.<CUDA major>` but not `libnccl.so.2` (the name NCCL 2.x
//! installs; the unversioned name exists only with the development package), and it panics
//! when the library or a symbol is missing, where this crate must return an error a caller
//! can act on. The ABI below is NCCL's stable C ABI (2.x).

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// `ncclComm_t`.
pub(crate) type RawComm = *mut c_void;
/// `cudaStream_t` (the same handle as a driver `CUstream`).
pub(crate) type RawStream = *mut c_void;
/// `ncclResult_t`.
pub(crate) type NcclResult = c_int;

pub(crate) const SUCCESS: NcclResult = 0;
pub(crate) const IN_PROGRESS: NcclResult = 7;

/// `ncclUniqueId`: 128 opaque bytes, made by rank 0 and shared with the others.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct RawUniqueId {
    pub(crate) internal: [u8; 128],
}

/// `NCCL_CONFIG_UNDEF_INT`: "use NCCL's default".
const UNDEF_INT: c_int = i32::MIN;

/// The start of `ncclConfig_t`, as NCCL 2.17 knew it. NCCL (`parseCommConfig` in init.cc)
/// copies `size` bytes over its own defaults and then resets every field newer than
/// `version`, so a newer libnccl accepts this shorter layout: the fields added since (here
/// `traffic_class`, 2.25) keep their defaults.
#[repr(C)]
pub(crate) struct RawConfig {
    size: usize,
    magic: u32,
    version: u32,
    pub(crate) blocking: c_int,
    cga_cluster_size: c_int,
    min_ctas: c_int,
    max_ctas: c_int,
    net_name: *const c_char,
    split_share: c_int,
    /// Reset to NCCL's default for version 2.17; spelled out so no padding byte is sent.
    traffic_class: c_int,
}

impl RawConfig {
    /// `NCCL_CONFIG_INITIALIZER` for the 2.17 layout.
    pub(crate) fn new(blocking: bool) -> Self {
        RawConfig {
            size: std::mem::size_of::<RawConfig>(),
            magic: 0xcafe_beef,
            version: 2 * 10000 + 17 * 100,
            blocking: c_int::from(blocking),
            cga_cluster_size: UNDEF_INT,
            min_ctas: UNDEF_INT,
            max_ctas: UNDEF_INT,
            net_name: std::ptr::null(),
            split_share: UNDEF_INT,
            traffic_class: UNDEF_INT,
        }
    }
}

macro_rules! nccl_functions {
    ($($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The resolved functions (the library stays loaded for the process's lifetime).
        #[allow(non_snake_case)]
        pub(crate) struct Nccl {
            _library: libloading::Library,
            $(pub(crate) $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        impl Nccl {
            #[allow(non_snake_case)]
            fn resolve(library: libloading::Library) -> Result<Self> {
                $(
                    // SAFETY: the type is the function's C prototype from nccl.h (2.x ABI).
                    let $name = unsafe { library.get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(concat!(stringify!($name), "\0").as_bytes()) }
                        .map(|symbol| *symbol)
                        .map_err(|e| Error::NcclSymbol { symbol: stringify!($name), reason: e.to_string() })?;
                )*
                Ok(Nccl { _library: library, $($name,)* })
            }
        }
    };
}

nccl_functions! {
    ncclGetVersion: fn(*mut c_int) -> NcclResult;
    ncclGetUniqueId: fn(*mut RawUniqueId) -> NcclResult;
    ncclCommInitRankConfig: fn(*mut RawComm, c_int, RawUniqueId, c_int, *mut RawConfig) -> NcclResult;
    ncclCommFinalize: fn(RawComm) -> NcclResult;
    ncclCommDestroy: fn(RawComm) -> NcclResult;
    ncclCommAbort: fn(RawComm) -> NcclResult;
    ncclCommGetAsyncError: fn(RawComm, *mut NcclResult) -> NcclResult;
    ncclGetErrorString: fn(NcclResult) -> *const c_char;
    ncclGetLastError: fn(RawComm) -> *const c_char;
    ncclGroupStart: fn() -> NcclResult;
    ncclGroupEnd: fn() -> NcclResult;
    ncclAllReduce: fn(*const c_void, *mut c_void, usize, c_int, c_int, RawComm, RawStream) -> NcclResult;
    ncclBroadcast: fn(*const c_void, *mut c_void, usize, c_int, c_int, RawComm, RawStream) -> NcclResult;
    ncclReduce: fn(*const c_void, *mut c_void, usize, c_int, c_int, c_int, RawComm, RawStream) -> NcclResult;
    ncclAllGather: fn(*const c_void, *mut c_void, usize, c_int, RawComm, RawStream) -> NcclResult;
    ncclReduceScatter: fn(*const c_void, *mut c_void, usize, c_int, c_int, RawComm, RawStream) -> NcclResult;
    ncclSend: fn(*const c_void, usize, c_int, c_int, RawComm, RawStream) -> NcclResult;
    ncclRecv: fn(*mut c_void, usize, c_int, c_int, RawComm, RawStream) -> NcclResult;
}

/// The names tried, in order: `FERROCUDA_NCCL_LIB` if set, then the NCCL 2.x soname, then
/// the development symlink.
pub(crate) fn candidates() -> Vec<String> {
    let mut names = Vec::new();
    if let Some(path) = std::env::var_os("FERROCUDA_NCCL_LIB") {
        names.push(path.to_string_lossy().into_owned());
    }
    names.extend(["libnccl.so.2".to_string(), "libnccl.so".to_string()]);
    names
}

/// libnccl, loaded on first use.
pub(crate) fn nccl() -> Result<&'static Nccl> {
    static NCCL: OnceLock<std::result::Result<Nccl, (Vec<String>, String)>> = OnceLock::new();
    let loaded = NCCL.get_or_init(|| {
        let tried = candidates();
        let mut reason = String::new();
        for name in &tried {
            // SAFETY: loading libnccl runs its initialisers, which have no preconditions.
            match unsafe { libloading::Library::new(name) } {
                Ok(library) => {
                    return Nccl::resolve(library).map_err(|e| (tried.clone(), e.to_string()));
                }
                Err(e) => reason = e.to_string(),
            }
        }
        Err((tried, reason))
    });
    loaded.as_ref().map_err(|(tried, reason)| Error::NcclNotFound { tried: tried.clone(), reason: reason.clone() })
}

/// The name of an `ncclResult_t`.
pub(crate) fn result_name(code: NcclResult) -> &'static str {
    match code {
        0 => "ncclSuccess",
        1 => "ncclUnhandledCudaError",
        2 => "ncclSystemError",
        3 => "ncclInternalError",
        4 => "ncclInvalidArgument",
        5 => "ncclInvalidUsage",
        6 => "ncclRemoteError",
        7 => "ncclInProgress",
        _ => "unknown ncclResult_t",
    }
}

fn text(pointer: *const c_char) -> String {
    if pointer.is_null() {
        return String::new();
    }
    // SAFETY: NCCL returns NUL-terminated static or per-communicator strings.
    unsafe { CStr::from_ptr(pointer) }.to_string_lossy().into_owned()
}

/// Turns an NCCL result into `Ok` or an error with NCCL's texts (`comm` may be null).
pub(crate) fn check(nccl: &Nccl, call: &'static str, code: NcclResult, comm: RawComm) -> Result<()> {
    if code == SUCCESS {
        return Ok(());
    }
    // SAFETY: both take any code / any communicator or null and return a string or null.
    let (description, detail) = unsafe { ((nccl.ncclGetErrorString)(code), (nccl.ncclGetLastError)(comm)) };
    Err(Error::Nccl { call, code, name: result_name(code), text: text(description), detail: text(detail) })
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use super::*;

    /// The offsets of `ncclConfig_t` in nccl.h (2.17 through 2.30): NCCL copies `size` bytes of
    /// this struct over its own, so every field must sit where NCCL's does.
    #[test]
    fn config_fields_sit_where_nccl_h_puts_them() {
        assert_eq!(offset_of!(RawConfig, magic), 8);
        assert_eq!(offset_of!(RawConfig, version), 12);
        assert_eq!(offset_of!(RawConfig, blocking), 16);
        assert_eq!(offset_of!(RawConfig, max_ctas), 28);
        assert_eq!(offset_of!(RawConfig, net_name), 32);
        assert_eq!(offset_of!(RawConfig, split_share), 40);
        assert_eq!(offset_of!(RawConfig, traffic_class), 44);
        assert_eq!(size_of::<RawConfig>(), 48);
        let config = RawConfig::new(false);
        assert_eq!((config.size, config.magic, config.version, config.blocking), (48, 0xcafe_beef, 21700, 0));
        assert_eq!(size_of::<RawUniqueId>(), 128);
    }

    #[test]
    fn result_codes_have_their_nccl_names() {
        assert_eq!(result_name(IN_PROGRESS), "ncclInProgress");
        assert_eq!(result_name(4), "ncclInvalidArgument");
        assert_eq!(result_name(99), "unknown ncclResult_t");
    }
}
