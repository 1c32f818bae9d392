//! Loading the driver library and `cuInit`, once per process: the first step of every entry
//! point, and what turns a machine without CUDA into [`Error::NoDriver`]; and the probes that
//! say whether a CUDA library can be opened ([`library_present`]).
//!
//! ferrocuda asks cudarc for `fallback-dynamic-loading`: the libraries are opened at run time
//! (so our binaries start on machines without CUDA) unless another crate of the same binary asks
//! cudarc for `dynamic-linking` (candle-core does), in which case they are linked and the binary
//! needs them to start. cudarc's own probes (`is_culib_present`) exist only when it loads at run
//! time, so the probes here are ours and work in both modes: with linking, the library is
//! already loaded and opening it by its soname finds that copy.

use std::sync::OnceLock;

use crate::driver::{self, DriverError};
use crate::error::{Error, Result};

/// Loads `libcuda` and calls `cuInit` once per process.
///
/// Every entry point of the host API calls this first, so a machine without a driver gets
/// [`Error::NoDriver`] instead of a panic from the dynamic loader.
pub fn init() -> Result<()> {
    // Process-wide by nature: `cuInit`'s outcome, made in no context (G22S-2's audit of cached
    // driver objects, docs/host-safety.md).
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
    library_present(CudaLibrary::Driver)
}

/// A CUDA library ferrocuda calls through cudarc, for [`library_present`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CudaLibrary {
    /// The driver, `libcuda` (`nvcuda` on Windows).
    Driver,
    /// cuBLAS, `libcublas`.
    Cublas,
    /// cuBLASLt, `libcublasLt`.
    CublasLt,
    /// cuFFT, `libcufft`.
    Cufft,
    /// NVRTC, `libnvrtc`.
    Nvrtc,
}

impl CudaLibrary {
    /// The names cudarc 0.19 looks the library up by (its `sys` modules' `lib_names`).
    fn base_names(self) -> &'static [&'static str] {
        match self {
            CudaLibrary::Driver => &["cuda", "nvcuda"],
            CudaLibrary::Cublas => &["cublas"],
            CudaLibrary::CublasLt => &["cublasLt"],
            CudaLibrary::Cufft => &["cufft"],
            CudaLibrary::Nvrtc => &["nvrtc"],
        }
    }
}

/// The CUDA version the workspace selects in cudarc (its `cuda-13000` feature); cudarc's
/// candidate file names contain it.
const CUDA_VERSION: (u32, u32) = (13, 0);

/// The file names cudarc 0.19.10 tries for `lib_name` (`cudarc::get_lib_name_candidates`, with
/// [`CUDA_VERSION`]), in its order. A name found here is one cudarc's own loader finds, so a
/// library this probe reports present never makes cudarc panic when it loads it; a test
/// compares the two lists.
fn candidates(lib_name: &str) -> Vec<String> {
    use std::env::consts::{DLL_PREFIX as P, DLL_SUFFIX as S};
    let width = usize::BITS;
    let (major, minor) = CUDA_VERSION;
    vec![
        format!("{P}{lib_name}{S}"),
        format!("{P}{lib_name}{width}{S}"),
        format!("{P}{lib_name}{width}_{major}{S}"),
        format!("{P}{lib_name}{width}_{major}{minor}{S}"),
        format!("{P}{lib_name}{width}_{major}{minor}_0{S}"),
        format!("{P}{lib_name}{width}_{major}0_{minor}{S}"),
        format!("{P}{lib_name}{width}_10{S}"),
        format!("{P}{lib_name}{width}_11{S}"),
        format!("{P}{lib_name}{width}_12{S}"),
        format!("{P}{lib_name}{width}_{major}0_0{S}"),
        format!("{P}{lib_name}{width}_9{S}"),
        format!("{P}{lib_name}{S}.{major}"),
        format!("{P}{lib_name}{S}.12"),
        format!("{P}{lib_name}{S}.11"),
        format!("{P}{lib_name}{S}.10"),
        format!("{P}{lib_name}{S}.9"),
        format!("{P}{lib_name}{S}.1"),
    ]
}

/// True when `library` can be opened under one of the names cudarc looks for.
///
/// Works whether cudarc loads the CUDA libraries at run time (ferrocuda's own builds) or links
/// them (a binary with candle's CUDA backend): see the module docs. The library is opened and
/// closed again, like cudarc's `is_culib_present` does.
pub fn library_present(library: CudaLibrary) -> bool {
    library.base_names().iter().flat_map(|name| candidates(name)).any(|candidate| {
        // SAFETY: opening a CUDA library runs its initialisers, which have no preconditions
        // (cudarc opens the same files the same way).
        unsafe { libloading::Library::new(candidate) }.is_ok()
    })
}

/// The driver's CUDA version as (major, minor), e.g. (13, 0).
pub fn driver_version() -> Result<(u32, u32)> {
    init()?;
    let mut version = 0;
    // SAFETY: writes one int.
    unsafe { driver::init::driver_get_version(&mut version) }?;
    Ok((version as u32 / 1000, (version as u32 % 1000) / 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    // These tests call cudarc's dynamic-loading-only items on purpose: the library's own tests
    // build inside this workspace, where cudarc loads at run time (`fallback-dynamic-loading`
    // with nobody asking to link).

    #[test]
    fn the_probes_candidates_are_cudarcs() {
        for library in [CudaLibrary::Driver, CudaLibrary::Cublas, CudaLibrary::CublasLt, CudaLibrary::Cufft, CudaLibrary::Nvrtc] {
            for name in library.base_names() {
                assert_eq!(candidates(name), cudarc::get_lib_name_candidates(name), "{library:?} ({name})");
            }
        }
    }

    #[test]
    fn the_probes_agree_with_cudarcs_own() {
        // SAFETY (each): only probes whether the library can be opened.
        let cudarcs = [
            (CudaLibrary::Driver, unsafe { cudarc::driver::sys::is_culib_present() }),
            (CudaLibrary::Cublas, unsafe { cudarc::cublas::sys::is_culib_present() }),
            (CudaLibrary::CublasLt, unsafe { cudarc::cublaslt::sys::is_culib_present() }),
            (CudaLibrary::Cufft, unsafe { cudarc::cufft::sys::is_culib_present() }),
            (CudaLibrary::Nvrtc, unsafe { cudarc::nvrtc::sys::is_culib_present() }),
        ];
        for (library, theirs) in cudarcs {
            assert_eq!(library_present(library), theirs, "{library:?}");
        }
    }
}
