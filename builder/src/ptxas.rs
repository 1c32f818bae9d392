//! Optional ahead-of-time compilation of the PTX to cubins with NVIDIA's `ptxas`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::env::BuildEnv;
use crate::{Arch, BuildError};

/// Registers, spills and memory of one kernel, as `ptxas -v` reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelResources {
    /// The kernel's symbol.
    pub kernel: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of spill stores.
    pub spill_stores: u32,
    /// Bytes of spill loads.
    pub spill_loads: u32,
    /// Local-memory stack bytes per thread: the kernel's own frame, or the cumulative stack of
    /// its call graph when ptxas reports a larger one.
    pub stack_frame: u32,
    /// Static shared memory bytes per block.
    pub shared_bytes: u32,
}

/// Finds `ptxas`: `FERROCUDA_PTXAS`, then `PATH`, then `$CUDA_PATH/bin`, `$CUDA_HOME/bin`,
/// `/usr/local/cuda/bin`.
pub fn find_ptxas(env: &BuildEnv) -> Option<PathBuf> {
    if let Some(explicit) = env.var("FERROCUDA_PTXAS") {
        return Some(PathBuf::from(explicit));
    }
    let path_dirs = env.var("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default();
    let cuda_dirs = ["CUDA_PATH", "CUDA_HOME"].iter().filter_map(|v| env.var(v)).map(|root| Path::new(&root).join("bin"));
    path_dirs
        .into_iter()
        .chain(cuda_dirs)
        .chain(std::iter::once(PathBuf::from("/usr/local/cuda/bin")))
        .map(|dir| dir.join("ptxas"))
        .find(|candidate| candidate.is_file())
}

/// How much debug information `ptxas` puts into a cubin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceDebug {
    /// None.
    None,
    /// Source lines only (`-lineinfo`): optimised code, file:line in tools.
    LineInfo,
    /// Full device debug information (`-g`): unoptimised SASS, for cuda-gdb.
    Full,
}

/// Compiles `ptx` for `arch` into `cubin`, returning what `ptxas -v` reported per kernel.
pub fn compile_cubin(ptxas: &Path, ptx: &Path, arch: Arch, line_info: bool, cubin: &Path) -> Result<Vec<KernelResources>, BuildError> {
    compile_cubin_with(ptxas, ptx, arch, if line_info { DeviceDebug::LineInfo } else { DeviceDebug::None }, cubin)
}

/// [`compile_cubin`] with a choice of debug information.
pub fn compile_cubin_with(ptxas: &Path, ptx: &Path, arch: Arch, debug: DeviceDebug, cubin: &Path) -> Result<Vec<KernelResources>, BuildError> {
    let mut command = Command::new(ptxas);
    command.arg(format!("-arch={arch}")).arg("-v").arg(ptx).arg("-o").arg(cubin);
    match debug {
        DeviceDebug::None => {}
        DeviceDebug::LineInfo => {
            command.arg("-lineinfo");
        }
        DeviceDebug::Full => {
            command.arg("-g");
        }
    }
    let output = command.output().map_err(|e| BuildError::Io { what: format!("running {}", ptxas.display()), source: e })?;
    let log = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if !output.status.success() {
        return Err(BuildError::Ptxas { arch, log });
    }
    Ok(parse_resources(&log))
}

/// Parses `ptxas -v` output into one record per kernel.
///
/// After a kernel's `Compiling entry function` line, ptxas prints the properties of the kernel
/// and then of each function compiled with it (`Function properties for <name>`): only the
/// lines under the kernel's own name are its figures. Its stack frame is the larger of its own
/// frame and the `cumulative stack size` of its `Used` line (the frames of the functions it
/// calls that were not inlined): the local memory one of its threads needs.
pub fn parse_resources(log: &str) -> Vec<KernelResources> {
    let mut kernels: Vec<KernelResources> = Vec::new();
    // The function whose `Function properties` are being read.
    let mut properties_of = String::new();
    for line in log.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("ptxas info    : Compiling entry function '") {
            let name = rest.split('\'').next().unwrap_or_default();
            kernels.push(KernelResources { kernel: name.to_string(), ..Default::default() });
            properties_of.clear();
            continue;
        }
        if let Some(rest) = line.strip_prefix("ptxas info    : Function properties for ") {
            properties_of = rest.trim().to_string();
            continue;
        }
        let Some(current) = kernels.last_mut() else { continue };
        if line.contains("bytes stack frame") {
            if properties_of == current.kernel {
                current.stack_frame = current.stack_frame.max(number_before(line, "bytes stack frame"));
                current.spill_stores = number_before(line, "bytes spill stores");
                current.spill_loads = number_before(line, "bytes spill loads");
            }
        } else if line.contains("Used ") && line.contains("registers") {
            current.registers = number_before(line, "registers");
            current.shared_bytes = number_before(line, "bytes smem");
            current.stack_frame = current.stack_frame.max(number_before(line, "bytes cumulative stack size"));
        }
    }
    kernels
}

/// The number just before `label` in `line` ("Used 10 registers" -> 10), or 0.
fn number_before(line: &str, label: &str) -> u32 {
    line.find(label).and_then(|at| line[..at].split([' ', ',']).rev().find(|w| !w.is_empty())).and_then(|word| word.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ptxas_verbose_output() {
        let log = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'saxpy' for 'sm_90'\n\
ptxas info    : Function properties for saxpy\n\
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]\n\
ptxas info    : Compiling entry function 'sum' for 'sm_90'\n\
ptxas info    : Function properties for sum\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 16 registers, used 0 barriers, 376 bytes cmem[0]\n";
        let parsed = parse_resources(log);
        assert_eq!(
            parsed,
            vec![
                KernelResources { kernel: "saxpy".into(), registers: 10, spill_stores: 4, spill_loads: 12, stack_frame: 8, shared_bytes: 1024 },
                KernelResources { kernel: "sum".into(), registers: 16, ..Default::default() },
            ]
        );
    }

    /// Regression (issue 23): the functions ptxas compiles with a kernel print their own
    /// `Function properties` after the kernel's, and the last one's figures were the kernel's:
    /// a kernel with a 640-byte panic path showed `local 0` (its last callee's frame), and one
    /// whose callees spill showed their spills.
    #[test]
    fn n23_a_kernel_keeps_its_own_figures_not_its_last_callees() {
        let log = "ptxas info    : 850 bytes gmem\n\
ptxas info    : Compiling entry function 'stencil_checked' for 'sm_90'\n\
ptxas info    : Function properties for stencil_checked\n\
    640 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 52 registers, used 0 barriers, 640 bytes cumulative stack size, 16 bytes smem\n\
ptxas info    : Compile time = 147.484 ms\n\
ptxas info    : Function properties for _RNvXsi_NtNtNtCsgJ6ytTPJmYV_4core3fmt3num3impjNtB9_7Display3fmt\n\
    120 bytes stack frame, 100 bytes spill stores, 100 bytes spill loads\n\
ptxas info    : Function properties for _RNvNtCsgJ6ytTPJmYV_4core9panicking18panic_bounds_check\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Compiling entry function 'calls_a_framed_function' for 'sm_90'\n\
ptxas info    : Function properties for helper\n\
    96 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n\
ptxas info    : Function properties for calls_a_framed_function\n\
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 30 registers, used 0 barriers, 112 bytes cumulative stack size\n\
ptxas info    : Compiling entry function 'plain' for 'sm_90'\n\
ptxas info    : Function properties for plain\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 12 registers, used 0 barriers\n";
        let parsed = parse_resources(log);
        let figures: Vec<(&str, u32, u32, u32, u32)> =
            parsed.iter().map(|k| (k.kernel.as_str(), k.registers, k.stack_frame, k.spill_stores, k.shared_bytes)).collect();
        assert_eq!(figures, [("stencil_checked", 52, 640, 0, 16), ("calls_a_framed_function", 30, 112, 0, 0), ("plain", 12, 0, 0, 0)]);
    }
}
