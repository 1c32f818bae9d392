//! The CUDA C++ reference kernels, compiled at run time by NVRTC (loaded dynamically through
//! cudarc) into a cubin for the GPU at hand, and loaded with ferrocuda's `Module`.

use std::ffi::{CStr, CString, c_char};
use std::time::Instant;

use cudarc::nvrtc::sys as nvrtc;
use ferrocuda_host::{Context, JitOptions, Module};

/// The reference kernels' source (the twins of `gpu_kernels::examples`).
pub const REFERENCE_SOURCE: &str = include_str!("../../../bench/cuda/reference_kernels.cu");

/// NVRTC's output for the reference kernels.
pub struct Compiled {
    /// The loaded module.
    pub module: Module,
    /// The cubin (for SASS comparisons with `cuobjdump -sass`).
    pub cubin: Vec<u8>,
    /// NVRTC's version, e.g. `13.0`.
    pub version: String,
    /// Compile time in milliseconds.
    pub compile_ms: f64,
}

/// Why the CUDA C++ comparisons cannot run.
#[derive(Debug)]
pub enum Unavailable {
    /// libnvrtc could not be opened.
    NoLibrary,
    /// NVRTC rejected the source (the log says why) or a call failed.
    Failed(String),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::NoLibrary => {
                write!(f, "libnvrtc not found: install the CUDA toolkit's NVRTC and add its directory (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH")
            }
            Unavailable::Failed(why) => write!(f, "NVRTC failed: {why}"),
        }
    }
}

fn check(call: &str, result: nvrtc::nvrtcResult) -> Result<(), Unavailable> {
    if result == nvrtc::nvrtcResult::NVRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: returns a pointer to a static string for any result code.
    let text = unsafe { CStr::from_ptr(nvrtc::nvrtcGetErrorString(result)) };
    Err(Unavailable::Failed(format!("{call}: {}", text.to_string_lossy())))
}

/// Owns an NVRTC program and destroys it on drop.
struct Program(nvrtc::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram, destroyed once.
        unsafe { nvrtc::nvrtcDestroyProgram(&mut self.0) };
    }
}

impl Program {
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: a valid program; `size` receives the log's length including the NUL.
        if unsafe { nvrtc::nvrtcGetProgramLogSize(self.0, &mut size) } != nvrtc::nvrtcResult::NVRTC_SUCCESS || size == 0 {
            return String::new();
        }
        let mut log = vec![0u8; size];
        // SAFETY: `log` holds `size` bytes, as NVRTC asked.
        unsafe { nvrtc::nvrtcGetProgramLog(self.0, log.as_mut_ptr().cast::<c_char>()) };
        String::from_utf8_lossy(&log).trim_end_matches('\0').trim().to_string()
    }
}

/// Compiles [`REFERENCE_SOURCE`] for `sm_{arch}` (see [`compile`]) and loads it into `context`.
pub fn compile_reference(context: &Context, arch: u32) -> Result<Compiled, Unavailable> {
    // SAFETY: the reference kernels are launched only through the typed launchers of their
    // Rust twins, whose parameters are the ones the source declares (`twins::cases`).
    unsafe { compile(context, "bench/cuda/reference_kernels.cu", REFERENCE_SOURCE, &format!("sm_{arch}")) }
}

/// Compiles the CUDA C++ `source` (no headers; `file` names it in errors and the module's
/// name) for `--gpu-architecture={arch}` (e.g. `sm_90a`) with nvcc's defaults for device code
/// (`-O3` equivalent, `--fmad=true`) and loads the cubin into `context`.
///
/// # Safety
/// The kernels of the returned module are launched only with the parameters `source` declares
/// (the module's contract for [`Module::load_binary`]); NVRTC's cubin is well formed.
pub unsafe fn compile(context: &Context, file: &str, source: &str, arch: &str) -> Result<Compiled, Unavailable> {
    // SAFETY: forwarded.
    unsafe { compile_with(context, file, source, arch, &[]) }
}

/// The CUDA C++ twin of `gpu_kernels::llm::gelu_bf16` (`bench/cuda/gelu_bf16.cu`), its own
/// program because it includes `cuda_bf16.h`.
pub const GELU_BF16_SOURCE: &str = include_str!("../../../bench/cuda/gelu_bf16.cu");

/// The CUDA toolkit's include directories found on this machine (`$CUDA_HOME/include`,
/// `$CUDA_PATH/include`, `/usr/local/cuda/include`, each with its `cccl` folder, where CUDA 13
/// keeps `<nv/target>` that `cuda_bf16.h` includes), for sources that include its headers.
pub fn cuda_include_dirs() -> Vec<String> {
    let roots = [std::env::var("CUDA_HOME").ok(), std::env::var("CUDA_PATH").ok(), Some("/usr/local/cuda".to_string())];
    let mut dirs: Vec<String> = roots
        .into_iter()
        .flatten()
        .flat_map(|root| [format!("{root}/include"), format!("{root}/include/cccl")])
        .filter(|d| std::path::Path::new(d).is_dir())
        .collect();
    dirs.dedup();
    dirs
}

/// Compiles [`GELU_BF16_SOURCE`] for `sm_{arch}` with the CUDA include directories
/// ([`cuda_include_dirs`]; NVRTC's built-in headers otherwise) and loads it into `context`.
pub fn compile_gelu_bf16(context: &Context, arch: u32) -> Result<Compiled, Unavailable> {
    let includes: Vec<String> = cuda_include_dirs().into_iter().map(|d| format!("--include-path={d}")).collect();
    // SAFETY: launched only through the typed launcher of `gpu_kernels::llm::gelu_bf16`, whose
    // parameters are the ones the source declares.
    unsafe { compile_with(context, "bench/cuda/gelu_bf16.cu", GELU_BF16_SOURCE, &format!("sm_{arch}"), &includes) }
}

/// [`compile`] with `extra` NVRTC options (include paths, defines).
///
/// # Safety
/// As for [`compile`].
pub unsafe fn compile_with(context: &Context, file: &str, source: &str, arch: &str, extra: &[String]) -> Result<Compiled, Unavailable> {
    if !ferrocuda_host::library_present(ferrocuda_host::CudaLibrary::Nvrtc) {
        return Err(Unavailable::NoLibrary);
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two out-parameters.
    check("nvrtcVersion", unsafe { nvrtc::nvrtcVersion(&mut major, &mut minor) })?;
    let started = Instant::now();
    let source = CString::new(source).map_err(|_| Unavailable::Failed(format!("{file} contains a NUL byte")))?;
    let name = CString::new(file).map_err(|_| Unavailable::Failed(format!("{file:?}: a file name with a NUL byte")))?;
    let mut raw = std::ptr::null_mut();
    // SAFETY: NUL-terminated source and name; no headers.
    check("nvrtcCreateProgram", unsafe { nvrtc::nvrtcCreateProgram(&mut raw, source.as_ptr(), name.as_ptr(), 0, std::ptr::null(), std::ptr::null()) })?;
    let program = Program(raw);
    let options = [format!("--gpu-architecture={arch}"), "--std=c++17".to_string()];
    let options: Vec<CString> = options.into_iter().chain(extra.iter().cloned()).map(|o| CString::new(o).expect("no NUL in the options")).collect();
    let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: `option_ptrs` points at live NUL-terminated strings.
    let compiled = unsafe { nvrtc::nvrtcCompileProgram(program.0, option_ptrs.len() as i32, option_ptrs.as_ptr()) };
    if compiled != nvrtc::nvrtcResult::NVRTC_SUCCESS {
        return Err(Unavailable::Failed(format!("compiling {file} for {arch}:\n{}", program.log())));
    }
    let mut size = 0usize;
    // SAFETY: a compiled program; one out-parameter.
    check("nvrtcGetCUBINSize", unsafe { nvrtc::nvrtcGetCUBINSize(program.0, &mut size) })?;
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` holds the size NVRTC reported.
    check("nvrtcGetCUBIN", unsafe { nvrtc::nvrtcGetCUBIN(program.0, cubin.as_mut_ptr().cast::<c_char>()) })?;
    let compile_ms = started.elapsed().as_secs_f64() * 1e3;
    // SAFETY: a cubin NVRTC just compiled from `source`, unaltered; its kernels are launched
    // with the parameters the source declares (this function's contract).
    let module = unsafe { Module::load_binary(context, &format!("{file} (NVRTC)"), &cubin, &JitOptions::new()) }
        .map_err(|error| Unavailable::Failed(format!("loading NVRTC's cubin: {error}")))?;
    Ok(Compiled { module, cubin, version: format!("{major}.{minor}"), compile_ms })
}
