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
    /// Stack frame bytes per thread.
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
pub fn parse_resources(log: &str) -> Vec<KernelResources> {
    let mut kernels: Vec<KernelResources> = Vec::new();
    for line in log.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("ptxas info    : Compiling entry function '") {
            let name = rest.split('\'').next().unwrap_or_default();
            kernels.push(KernelResources { kernel: name.to_string(), ..Default::default() });
            continue;
        }
        let Some(current) = kernels.last_mut() else { continue };
        if line.contains("bytes stack frame") {
            current.stack_frame = number_before(line, "bytes stack frame");
            current.spill_stores = number_before(line, "bytes spill stores");
            current.spill_loads = number_before(line, "bytes spill loads");
        } else if line.contains("Used ") && line.contains("registers") {
            current.registers = number_before(line, "registers");
            current.shared_bytes = number_before(line, "bytes smem");
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
}
