//! Command-line parsing and the four commands: `list`, `ptx`, `sass`, `diff`.

use std::path::{Path, PathBuf};

use ferrocuda_builder::{Arch, BuildEnv, KernelResources, compile_cubin, find_ptxas};

use crate::artifacts::{ARTIFACT_LIST, Build, BuildOptions, SourceError, build_crate};
use crate::occupancy::SmLimits;
use crate::ptx::PtxModule;
use crate::report::{KernelRow, format_diff, format_table, rows};
use crate::sass::{disassemble, find_disassembler};

/// The `--help` text.
pub const USAGE: &str = "\
ferrocuda-inspect: registers, spills, shared memory, launch bounds, occupancy, PTX and SASS
of the kernels of a ferrocuda kernel crate.

USAGE:
    ferrocuda-inspect [list] [SOURCE] [OPTIONS]      one line per kernel
    ferrocuda-inspect ptx KERNEL [SOURCE] [OPTIONS]  the kernel's .entry and the functions it calls
    ferrocuda-inspect sass KERNEL [SOURCE] [OPTIONS] its SASS (nvdisasm or cuobjdump)
    ferrocuda-inspect diff SOURCE_A SOURCE_B [OPTIONS]  kernels whose figures differ
    (also `cargo ferrocuda-inspect ...` once installed, or `cargo run -p ferrocuda-inspect -- ...`)

SOURCE (default: the current directory):
    a kernel crate directory   built with ferrocuda-builder for --ptx-arch (default: --arch)
    a build's OUT_DIR          any directory with ferrocuda_artifacts.rs (nothing is rebuilt)
    a .ptx file                one PTX module

OPTIONS:
    --arch sm_XY        the GPU to compile for and compute occupancy on (default sm_90)
    --block N           threads per block for the occupancy (default 256)
    --dyn-smem BYTES    dynamic shared memory of kernels that use it (default 0)
    --ptx-arch sm_XY    PTX architecture(s) of a crate build (repeatable; default --arch)
    --cfg NAME          extra --cfg for a crate build (repeatable)
    --allow-recursion KERNEL
                        build a crate whose build script vouches for a recursive kernel
                        (`allow_recursion`; repeatable; inspecting launches nothing)
    -h, --help          this text

Figures come from the build's recorded `ptxas -v` for --arch when it has them, else from
running ptxas (FERROCUDA_PTXAS, PATH, $CUDA_PATH/bin, /usr/local/cuda/bin). Occupancy uses the
documented per-SM limits of sm_80, sm_86, sm_87, sm_89 and sm_90.
";

/// Parsed command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// `list`, `ptx`, `sass` or `diff`.
    pub command: String,
    /// Positional arguments after the command.
    pub positional: Vec<String>,
    /// `--arch`.
    pub arch: u32,
    /// `--block`.
    pub block: u32,
    /// `--dyn-smem`.
    pub dynamic_shared: u32,
    /// `--ptx-arch`.
    pub ptx_archs: Vec<u32>,
    /// `--cfg`.
    pub cfgs: Vec<String>,
    /// `--allow-recursion`.
    pub recursive: Vec<String>,
}

/// Parses `args` (without the program name). `Err` carries the message to print.
pub fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        command: "list".into(),
        positional: Vec::new(),
        arch: 90,
        block: 256,
        dynamic_shared: 0,
        ptx_archs: Vec::new(),
        cfgs: Vec::new(),
        recursive: Vec::new(),
    };
    let mut iter = args.iter();
    let mut first = true;
    while let Some(arg) = iter.next() {
        let mut value = |name: &str| iter.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "-h" | "--help" => return Err(USAGE.to_string()),
            "--arch" => options.arch = arch_number(&value("--arch")?)?,
            "--block" => options.block = number(&value("--block")?, "--block")?,
            "--dyn-smem" => options.dynamic_shared = number(&value("--dyn-smem")?, "--dyn-smem")?,
            "--ptx-arch" => options.ptx_archs.push(arch_number(&value("--ptx-arch")?)?),
            "--cfg" => options.cfgs.push(value("--cfg")?),
            "--allow-recursion" => options.recursive.push(value("--allow-recursion")?),
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}\n\n{USAGE}")),
            word if first && ["list", "ptx", "sass", "diff"].contains(&word) => options.command = word.to_string(),
            word => options.positional.push(word.to_string()),
        }
        first = false;
    }
    let expected = match options.command.as_str() {
        "list" => 0..=1,
        "ptx" | "sass" => 1..=2,
        _ => 2..=2,
    };
    if !expected.contains(&options.positional.len()) {
        return Err(format!(
            "`{}` takes {} argument(s)\n\n{USAGE}",
            options.command,
            if options.command == "diff" { "2" } else { "a kernel name and an optional source" }
        ));
    }
    Ok(options)
}

fn number(text: &str, name: &str) -> Result<u32, String> {
    text.parse().map_err(|_| format!("{name}: `{text}` is not a number"))
}

/// `sm_90`, `sm_90a`, `compute_90` or `90` -> 90.
pub fn arch_number(text: &str) -> Result<u32, String> {
    let digits: String = text.trim_start_matches("sm_").trim_start_matches("compute_").chars().take_while(char::is_ascii_digit).collect();
    digits.parse().map_err(|_| format!("`{text}` is not an architecture (write sm_80, sm_90, ...)"))
}

/// Runs the command line; returns the process exit status.
pub fn main(args: Vec<String>) -> i32 {
    let options = match parse(&args) {
        Ok(options) => options,
        Err(message) => {
            let help = args.iter().any(|a| a == "-h" || a == "--help");
            if help {
                println!("{message}")
            } else {
                eprintln!("error: {message}")
            }
            return if help { 0 } else { 2 };
        }
    };
    match run(&options) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(error) => {
            eprintln!("error: {error}");
            1
        }
    }
}

/// Runs a parsed command and returns what it prints.
pub fn run(options: &Options) -> Result<String, SourceError> {
    let source = |i: usize| options.positional.get(i).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    match options.command.as_str() {
        "list" => {
            let inspected = Inspected::load(&source(0), options)?;
            Ok(format_table(&inspected.title(options), &inspected.rows(options), options.dynamic_shared))
        }
        "ptx" => {
            let kernel = &options.positional[0];
            let inspected = Inspected::load(&source(1), options)?;
            inspected.module.extract(kernel).ok_or_else(|| unknown_kernel(kernel, &inspected.module))
        }
        "sass" => {
            let kernel = &options.positional[0];
            let inspected = Inspected::load(&source(1), options)?;
            if inspected.module.function(kernel).is_none() {
                return Err(unknown_kernel(kernel, &inspected.module));
            }
            let cubin = inspected
                .cubin
                .as_ref()
                .ok_or_else(|| SourceError("no cubin: install ptxas (scripts/install-device-toolchain.sh) or set FERROCUDA_PTXAS".into()))?;
            let tool = find_disassembler(find_ptxas(&BuildEnv::process()).as_deref()).ok_or_else(|| {
                SourceError("neither nvdisasm nor cuobjdump found: run scripts/install-device-toolchain.sh (it installs nvdisasm from PyPI), install the CUDA toolkit, or set FERROCUDA_NVDISASM".into())
            })?;
            disassemble(&tool, cubin, kernel).map_err(SourceError)
        }
        _ => {
            let a = Inspected::load(&source(0), options)?;
            let b = Inspected::load(&source(1), options)?;
            let (text, _) = format_diff(&a.rows(options), &b.rows(options), options.dynamic_shared);
            Ok(format!("before: {}\nafter:  {}\n{text}", a.title(options), b.title(options)))
        }
    }
}

fn unknown_kernel(kernel: &str, module: &PtxModule) -> SourceError {
    let names: Vec<&str> = module.kernels().map(|k| k.name.as_str()).collect();
    SourceError(format!("no kernel `{kernel}`; the kernels are: {}", names.join(", ")))
}

/// A loaded source: its PTX for the requested architecture and the figures for it.
struct Inspected {
    label: String,
    ptx_path: PathBuf,
    module: PtxModule,
    resources: Vec<KernelResources>,
    resources_from: &'static str,
    cubin: Option<PathBuf>,
}

impl Inspected {
    fn load(source: &Path, options: &Options) -> Result<Inspected, SourceError> {
        let arch = options.arch;
        let build = if source.extension().is_some_and(|e| e == "ptx") {
            let text = read(source)?;
            let target = PtxModule::parse(&text).header.iter().find_map(|l| l.strip_prefix(".target ").map(str::to_string));
            let ptx_arch = target.as_deref().and_then(|t| arch_number(t.split(',').next().unwrap_or(t)).ok()).unwrap_or(arch);
            Build { crate_name: source.display().to_string(), ptx: vec![(ptx_arch, source.to_path_buf())], ..Default::default() }
        } else if source.join(ARTIFACT_LIST).is_file() {
            Build::read(source)?
        } else {
            let to_arch = |n: u32| n.to_string().parse::<Arch>().map_err(|e| SourceError(e.to_string()));
            let ptx_archs = if options.ptx_archs.is_empty() { vec![arch] } else { options.ptx_archs.clone() };
            let build_options = BuildOptions {
                ptx_archs: ptx_archs.into_iter().map(to_arch).collect::<Result<_, _>>()?,
                cubin_archs: vec![to_arch(arch)?],
                cfgs: options.cfgs.clone(),
                recursive: options.recursive.clone(),
            };
            build_crate(source, &build_options)?
        };
        let ptx_path = build
            .ptx_for(arch)
            .ok_or_else(|| {
                SourceError(format!("{}: no PTX for sm_{arch} or older (it has {:?})", source.display(), build.ptx.iter().map(|(a, _)| a).collect::<Vec<_>>()))
            })?
            .to_path_buf();
        let module = PtxModule::parse(&read(&ptx_path)?);
        let recorded_cubin = build.cubins.iter().find(|(a, p)| *a == arch && p.is_file()).map(|(_, p)| p.clone());
        let recorded = build.resources_for(arch);
        let (resources, resources_from, cubin) = if !recorded.is_empty() && recorded_cubin.is_some() {
            (recorded, "the build's ptxas -v", recorded_cubin)
        } else if let Some(ptxas) = find_ptxas(&BuildEnv::process()) {
            let dir = std::env::temp_dir().join(format!("ferrocuda-inspect-{}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| SourceError(format!("creating {}: {e}", dir.display())))?;
            let cubin = dir.join(format!("{}.sm_{arch}.cubin", build.crate_name.replace(['/', '.'], "_")));
            let to_arch = arch.to_string().parse::<Arch>().map_err(|e| SourceError(e.to_string()))?;
            let resources = compile_cubin(&ptxas, &ptx_path, to_arch, true, &cubin).map_err(|e| SourceError(e.to_string()))?;
            (resources, "ptxas -v", Some(cubin))
        } else if !recorded.is_empty() {
            (recorded, "the build's ptxas -v", None)
        } else {
            (Vec::new(), "nothing (no ptxas found: figures unknown)", None)
        };
        let label = if build.crate_name.is_empty() { source.display().to_string() } else { build.crate_name.clone() };
        Ok(Inspected { label, ptx_path, module, resources, resources_from, cubin })
    }

    fn title(&self, options: &Options) -> String {
        let limits = SmLimits::for_arch(options.arch).map_or(" (no SM limits for this arch: occupancy unknown)", |_| "");
        format!(
            "{}: {} kernels, sm_{} from {} (figures from {}); occupancy at {} threads/block{}",
            self.label,
            self.module.kernels().count(),
            options.arch,
            self.ptx_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            self.resources_from,
            options.block,
            limits
        )
    }

    fn rows(&self, options: &Options) -> Vec<KernelRow> {
        rows(&self.module, &self.resources, SmLimits::for_arch(options.arch).as_ref(), options.block, options.dynamic_shared)
    }
}

impl Drop for Inspected {
    fn drop(&mut self) {
        // Cubins compiled for this run live in a per-process temporary directory.
        if let Some(cubin) = &self.cubin
            && cubin.starts_with(std::env::temp_dir())
        {
            let _ = std::fs::remove_file(cubin);
        }
    }
}

fn read(path: &Path) -> Result<String, SourceError> {
    std::fs::read_to_string(path).map_err(|e| SourceError(format!("cannot read {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_commands_and_options() {
        let o = parse(&args("sass saxpy kernels --arch sm_86 --block 128 --dyn-smem 4096 --ptx-arch sm_80 --cfg fast")).unwrap();
        assert_eq!((o.command.as_str(), o.positional.as_slice()), ("sass", &args("saxpy kernels")[..]));
        assert_eq!((o.arch, o.block, o.dynamic_shared, o.ptx_archs.as_slice(), o.cfgs.as_slice()), (86, 128, 4096, &[80][..], &args("fast")[..]));
        let o = parse(&[]).unwrap();
        assert_eq!((o.command.as_str(), o.arch, o.block), ("list", 90, 256));
        // A directory called `list` after the command is a source, not a command.
        assert_eq!(parse(&args("list list")).unwrap().positional, args("list"));
        assert_eq!(arch_number("sm_90a").unwrap(), 90);
    }

    #[test]
    fn rejects_bad_command_lines_with_a_reason() {
        assert!(parse(&args("diff only-one")).unwrap_err().contains("takes 2"));
        assert!(parse(&args("ptx")).unwrap_err().contains("kernel name"));
        assert!(parse(&args("--arch gfx90a")).unwrap_err().contains("not an architecture"));
        assert!(parse(&args("--block")).unwrap_err().contains("needs a value"));
        assert!(parse(&args("--frobnicate")).unwrap_err().contains("unknown option"));
    }
}
