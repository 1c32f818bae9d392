//! Build-script helper that compiles a Rust kernel crate to PTX with rustc's own NVPTX backend.
//!
//! ```no_run
//! // gpu-kernels/build.rs
//! fn main() {
//!     ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
//!         .cubin_arch("sm_90".parse().unwrap())
//!         .run();
//! }
//! ```
//!
//! The crate is built for `nvptx64-nvidia-cuda` by a second cargo in its own target directory,
//! with `-Zbuild-std=core`, fat LTO and `--emit=asm`, which yields one self-contained PTX module
//! per requested architecture. When `ptxas` is found, cubins are compiled too, and `ptxas -v`'s
//! registers, spills and shared memory are recorded per kernel. A Rust file listing the
//! artifacts is written to `OUT_DIR`; `ferrocuda_device::embed_kernels!()` includes it.
#![deny(unsafe_code)]

mod env;
mod error;
mod launch_bounds;
mod ptxas;
mod toolchain;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;

pub use env::BuildEnv;
pub use error::BuildError;
pub use launch_bounds::apply_launch_bounds;
pub use ptxas::{KernelResources, compile_cubin, find_ptxas, parse_resources};
pub use toolchain::{DeviceToolchain, ToolchainSource};

/// The rustc target of every device build.
pub const TARGET: &str = "nvptx64-nvidia-cuda";

/// Architectures the builder knows, oldest first; building for one sets `ferrocuda_sm = "N"`
/// for it and every older one, so `#[cfg(ferrocuda_sm = "90")]` reads "sm_90 or newer".
pub const KNOWN_ARCHS: &[u32] = &[70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121];

/// A GPU architecture (`sm_XY`), at least `sm_70`, optionally arch-specific (`sm_90a`).
///
/// An arch-specific target (`a` suffix) enables instructions that only that exact GPU
/// generation has (`wgmma`, `setmaxnreg` on sm_90a); its PTX and cubins run on that generation
/// alone. It orders just after its plain twin (`sm_90 < sm_90a < sm_100`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arch(u32, bool);

impl Arch {
    /// `sm_70`: the default; its PTX is JIT-compiled by the driver for every newer GPU.
    pub const SM_70: Arch = Arch(70, false);
    /// `sm_80` (A100).
    pub const SM_80: Arch = Arch(80, false);
    /// `sm_90` (H100, H200).
    pub const SM_90: Arch = Arch(90, false);
    /// `sm_90a`: H100/H200 with the Hopper-only instructions (`wgmma`, `setmaxnreg`). Its
    /// device build also sets `ferrocuda_sm = "90a"` and emits PTX ISA 8.3.
    pub const SM_90A: Arch = Arch(90, true);

    /// The number after `sm_` (70 for `sm_70`, 90 for `sm_90a`).
    pub fn number(self) -> u32 {
        self.0
    }

    /// Whether this is an arch-specific target (`sm_90a`).
    pub fn is_arch_specific(self) -> bool {
        self.1
    }

    /// `ferrocuda_sm` values for this architecture: itself and every older known one.
    pub fn cfg_values(self) -> impl Iterator<Item = u32> {
        KNOWN_ARCHS.iter().copied().filter(move |&n| n <= self.0)
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}{}", self.0, if self.1 { "a" } else { "" })
    }
}

impl FromStr for Arch {
    type Err = BuildError;

    /// Accepts `sm_90`, `compute_90` or `90`, each with an optional `a` suffix (`sm_90a`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let digits = text.trim_start_matches("sm_").trim_start_matches("compute_");
        let (digits, specific) = match digits.strip_suffix('a') {
            Some(digits) => (digits, true),
            None => (digits, false),
        };
        let bad = || BuildError::BadArch { given: text.to_string() };
        let number: u32 = digits.parse().map_err(|_| bad())?;
        if number < 70 || (specific && number < 90) {
            return Err(bad());
        }
        Ok(Arch(number, specific))
    }
}

/// How floating-point `a * b + c` is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FmaContraction {
    /// Fuse into `fma.rn` where the source multiplies then adds (nvcc's default, `--fmad=true`).
    Fast,
    /// Keep separate `mul.rn` and `add.rn` (bit-identical to the CPU, half the FP32 throughput).
    Off,
}

/// Compiles one kernel crate to PTX (and cubins). See the crate docs.
#[must_use]
#[derive(Debug, Clone)]
pub struct KernelBuilder {
    crate_dir: PathBuf,
    ptx_archs: Vec<Arch>,
    cubin_archs: Vec<Arch>,
    release: bool,
    line_info: bool,
    fma: FmaContraction,
    cfgs: Vec<String>,
    target_dir: Option<PathBuf>,
    out_dir: Option<PathBuf>,
    env: BuildEnv,
}

/// What a build produced.
#[derive(Debug, Clone, Default)]
pub struct Artifacts {
    /// One PTX module per requested architecture.
    pub ptx: Vec<(Arch, PathBuf)>,
    /// One cubin per cubin architecture, with `ptxas -v`'s figures (empty without `ptxas`).
    pub cubins: Vec<Cubin>,
    /// The Rust file listing the artifacts, for `include!` (see `embed_kernels!`).
    pub manifest: Option<PathBuf>,
    /// `rustc --version` of the device toolchain, when a build ran.
    pub toolchain: Option<String>,
    /// Every source file the device build read (what `rerun-if-changed` was printed for).
    pub sources: Vec<PathBuf>,
}

/// A cubin compiled by `ptxas`.
#[derive(Debug, Clone)]
pub struct Cubin {
    /// Its architecture.
    pub arch: Arch,
    /// Where it was written.
    pub path: PathBuf,
    /// Registers, spills and shared memory per kernel.
    pub resources: Vec<KernelResources>,
}

impl KernelBuilder {
    /// A builder for the kernel crate in `crate_dir` (the directory with its `Cargo.toml`).
    pub fn new(crate_dir: impl Into<PathBuf>) -> Self {
        Self {
            crate_dir: crate_dir.into(),
            ptx_archs: Vec::new(),
            cubin_archs: Vec::new(),
            release: true,
            line_info: true,
            fma: FmaContraction::Fast,
            cfgs: Vec::new(),
            target_dir: None,
            out_dir: None,
            env: BuildEnv::process(),
        }
    }

    /// Adds a PTX target architecture (default: `sm_70` alone). Each one is a device build of
    /// its own; the host loads the newest one the GPU can run.
    pub fn arch(mut self, arch: Arch) -> Self {
        self.ptx_archs.push(arch);
        self
    }

    /// Adds a cubin architecture, compiled by `ptxas` from the newest PTX not newer than it
    /// (default: one cubin per PTX architecture). Ignored when `ptxas` is not found.
    pub fn cubin_arch(mut self, arch: Arch) -> Self {
        self.cubin_archs.push(arch);
        self
    }

    /// Optimised (`true`, the default) or unoptimised device code.
    pub fn release(mut self, release: bool) -> Self {
        self.release = release;
        self
    }

    /// Source line information in the PTX and cubins, for profilers and the sanitizer
    /// (default on; it does not change the generated code).
    pub fn line_info(mut self, line_info: bool) -> Self {
        self.line_info = line_info;
        self
    }

    /// Floating-point contraction policy (default [`FmaContraction::Fast`], as nvcc).
    pub fn fma(mut self, fma: FmaContraction) -> Self {
        self.fma = fma;
        self
    }

    /// Adds `--cfg <cfg>` to the device build (for example `my_feature` or `mode="fast"`).
    pub fn cfg(mut self, cfg: impl Into<String>) -> Self {
        self.cfgs.push(cfg.into());
        self
    }

    /// The inner cargo's target directory (default: `ferrocuda-device/<crate>` beside the
    /// outer build's profile directories, so `cargo clean` removes it).
    pub fn target_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.target_dir = Some(dir.into());
        self
    }

    /// Where artifacts go (default: `OUT_DIR`).
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// Reads variables from `env` instead of the process environment.
    pub fn env(mut self, env: BuildEnv) -> Self {
        self.env = env;
        self
    }

    /// The PTX architectures that will be built.
    pub fn ptx_archs(&self) -> Vec<Arch> {
        if self.ptx_archs.is_empty() { vec![Arch::SM_70] } else { sorted(&self.ptx_archs) }
    }

    /// The `RUSTFLAGS` of the device build for `arch`.
    pub fn rustflags(&self, arch: Arch) -> Vec<String> {
        let mut flags = vec![format!("-Ctarget-cpu={arch}")];
        if self.fma == FmaContraction::Fast {
            flags.push("-Cllvm-args=-nvptx-fma-level=1".into());
        }
        if self.line_info {
            flags.push("-Cdebuginfo=line-tables-only".into());
        }
        for n in arch.cfg_values() {
            flags.push("--cfg".into());
            flags.push(format!("ferrocuda_sm=\"{n}\""));
        }
        if arch.is_arch_specific() {
            // `ferrocuda_sm = "90a"` gates wgmma/setmaxnreg; PTX ISA 8.3 (rustc's default for
            // sm_90a is 8.0) adds `fence.proxy.tensormap` for tensor maps in global memory.
            flags.push("--cfg".into());
            flags.push(format!("ferrocuda_sm=\"{}a\"", arch.number()));
            flags.push("-Ctarget-feature=+ptx83".into());
        }
        for cfg in &self.cfgs {
            flags.push("--cfg".into());
            flags.push(cfg.clone());
        }
        flags
    }

    /// Runs the build from a build script: on error prints the message (not a panic
    /// backtrace) and exits with status 1.
    pub fn run(self) -> Artifacts {
        match self.build() {
            Ok(artifacts) => artifacts,
            Err(error) => {
                eprintln!("error: {error}");
                std::process::exit(1);
            }
        }
    }

    /// Builds the PTX modules, the cubins when `ptxas` is available, and the artifact list.
    ///
    /// Inside the device build itself (a build script run for `nvptx64`), does nothing.
    ///
    /// # Errors
    /// See [`BuildError`]; each variant says what to do.
    pub fn build(self) -> Result<Artifacts, BuildError> {
        if self.env.var("CARGO_CFG_TARGET_ARCH").as_deref() == Some("nvptx64") {
            return Ok(Artifacts::default());
        }
        let out_dir = match (&self.out_dir, self.env.var("OUT_DIR")) {
            (Some(dir), _) => dir.clone(),
            (None, Some(dir)) => PathBuf::from(dir),
            (None, None) => return Err(BuildError::NoOutDir),
        };
        let manifest = self.crate_dir.join("Cargo.toml");
        let crate_name = package_name(&manifest)?.replace('-', "_");
        let toolchain = DeviceToolchain::find(&self.env)?;
        let target_dir = self.target_dir.clone().unwrap_or_else(|| default_target_dir(&out_dir, &crate_name));

        let mut artifacts = Artifacts { toolchain: Some(toolchain.version.clone()), ..Default::default() };
        let mut sources = BTreeSet::new();
        // One device build per architecture, side by side: each ends in a single-threaded fat
        // LTO step, so running them together uses the machine's cores better than in turn.
        let builds = in_parallel(self.ptx_archs(), |arch| {
            let arch_dir = target_dir.join(arch.to_string());
            let raw = self.compile_ptx(&toolchain, &manifest, &crate_name, arch, &arch_dir)?;
            let mut arch_sources = BTreeSet::new();
            // Device crates, then the host side of the device build (the proc macros).
            for deps in [arch_dir.join(TARGET).join(self.profile_dir()).join("deps"), arch_dir.join(self.profile_dir()).join("deps")] {
                arch_sources.extend(read_dep_info(&deps, &self.crate_dir, &toolchain)?);
            }
            Ok((arch, raw, arch_sources))
        });
        for build in builds {
            let (arch, raw, arch_sources) = build?;
            sources.extend(arch_sources);
            let ptx = apply_launch_bounds(&clean_ptx(&raw));
            let path = out_dir.join(format!("{crate_name}.{arch}.ptx"));
            write(&path, ptx.as_bytes())?;
            artifacts.ptx.push((arch, path));
        }

        if let Some(ptxas) = find_ptxas(&self.env) {
            let wanted = if self.cubin_archs.is_empty() { self.ptx_archs() } else { sorted(&self.cubin_archs) };
            let cubins = in_parallel(wanted, |arch| {
                let Some((_, ptx)) = artifacts.ptx.iter().rev().find(|(ptx_arch, _)| *ptx_arch <= arch) else {
                    return Err(BuildError::CubinWithoutPtx { arch });
                };
                let path = out_dir.join(format!("{crate_name}.{arch}.cubin"));
                let resources = compile_cubin(&ptxas, ptx, arch, self.line_info, &path)?;
                Ok(Cubin { arch, path, resources })
            });
            for cubin in cubins {
                artifacts.cubins.push(cubin?);
            }
        }

        if self.env.var("OUT_DIR").is_some() {
            for source in &sources {
                println!("cargo:rerun-if-changed={}", source.display());
            }
            println!("cargo:rerun-if-changed={}", manifest.display());
        }
        artifacts.sources = sources.into_iter().collect();
        let list = out_dir.join("ferrocuda_artifacts.rs");
        write(&list, artifact_list(&crate_name, &toolchain, &artifacts).as_bytes())?;
        artifacts.manifest = Some(list);
        Ok(artifacts)
    }

    fn profile_dir(&self) -> &'static str {
        if self.release { "release" } else { "debug" }
    }

    /// Runs the inner cargo for one architecture and returns the PTX text it wrote.
    fn compile_ptx(&self, toolchain: &DeviceToolchain, manifest: &Path, crate_name: &str, arch: Arch, target_dir: &Path) -> Result<String, BuildError> {
        let mut command = Command::new(&toolchain.cargo);
        command
            .args(["rustc", "--lib", "--crate-type", "cdylib", "--target", TARGET, "-Zbuild-std=core"])
            .arg("--manifest-path")
            .arg(manifest)
            .arg("--target-dir")
            .arg(target_dir)
            .args(["--color", "always"]);
        if self.release {
            command.arg("--release");
        }
        command.args(["--", "-Clinker=/bin/true", "--emit=asm"]);
        clean_environment(&mut command);
        let profile = if self.release { "RELEASE" } else { "DEV" };
        command
            .env("RUSTC", &toolchain.rustc)
            .env("RUSTC_BOOTSTRAP", "1")
            .env("CARGO_ENCODED_RUSTFLAGS", self.rustflags(arch).join("\x1f"))
            .env(format!("CARGO_PROFILE_{profile}_PANIC"), "abort")
            .env(format!("CARGO_PROFILE_{profile}_LTO"), "fat")
            .env(format!("CARGO_PROFILE_{profile}_CODEGEN_UNITS"), "1");

        let output = command.output().map_err(|e| BuildError::Io { what: format!("running {}", toolchain.cargo.display()), source: e })?;
        let diagnostics = String::from_utf8_lossy(&output.stderr).into_owned();
        if !output.status.success() {
            return Err(BuildError::Compile { arch, diagnostics });
        }
        forward_warnings(&diagnostics);
        let asm = target_dir.join(TARGET).join(self.profile_dir()).join("deps").join(format!("{crate_name}.s"));
        std::fs::read_to_string(&asm).map_err(|e| BuildError::Io { what: format!("reading the PTX {}", asm.display()), source: e })
    }
}

/// Removes what the outer cargo set for its build script, so the inner cargo starts clean.
fn clean_environment(command: &mut Command) {
    const KEEP: &[&str] = &["CARGO_HOME", "CARGO_NET_", "CARGO_HTTP_", "CARGO_REGISTRIES_", "CARGO_REGISTRY_"];
    const DROP: &[&str] = &["RUSTFLAGS", "RUSTDOCFLAGS", "RUSTC", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "RUSTDOC", "RUSTUP_TOOLCHAIN", "TARGET", "HOST", "OUT_DIR", "OPT_LEVEL", "PROFILE", "DEBUG", "NUM_JOBS", "RUSTC_LINKER"];
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let cargo_var = key.starts_with("CARGO") && !KEEP.iter().any(|k| key.starts_with(k));
        if cargo_var || DROP.contains(&key) || key.starts_with("DEP_") {
            command.env_remove(key);
        }
    }
}

/// Re-prints the device build's warnings as cargo warnings (first line and location).
fn forward_warnings(diagnostics: &str) {
    if std::env::var_os("OUT_DIR").is_none() {
        return;
    }
    let plain = strip_ansi(diagnostics);
    let mut lines = plain.lines().peekable();
    while let Some(line) = lines.next() {
        // `+ptx83` (set for arch-specific targets) is "unstable" to rustc but understood by LLVM.
        if line.starts_with("warning:") && !line.contains("generated") && !line.contains("`ptx83`") {
            let location = lines.peek().map(|l| l.trim()).filter(|l| l.starts_with("-->")).unwrap_or("");
            println!("cargo:warning=device build: {line} {location}");
        }
    }
}

/// Removes ANSI colour sequences (the inner cargo colours its output for the user's terminal).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for end in chars.by_ref() {
                if end.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Makes rustc's PTX acceptable to `ptxas` and the JIT when it carries line information:
/// keeps the `.file`/`.loc` directives but drops the DWARF sections (which ptxas cannot
/// parse) and the `debug` target modifier that would demand them.
pub fn clean_ptx(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for line in raw.lines() {
        if line.trim_start().starts_with(".section") && line.contains(".debug") {
            break;
        }
        if line.starts_with(".target ") {
            out.push_str(&line.replace(", debug", ""));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The source files the inner build read, from its `.d` files, without the library sources
/// and registry crates. Paths in `.d` files are relative to the workspace root that rustc ran
/// in; each is resolved against the nearest ancestor of `crate_dir` where it exists.
fn read_dep_info(deps_dir: &Path, crate_dir: &Path, toolchain: &DeviceToolchain) -> Result<BTreeSet<PathBuf>, BuildError> {
    let library = toolchain.library_sources();
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
    let crate_dir = crate_dir.canonicalize().unwrap_or_else(|_| crate_dir.to_path_buf());
    let resolve = |dep: PathBuf| -> Option<PathBuf> {
        if dep.is_absolute() {
            return dep.exists().then_some(dep);
        }
        crate_dir.ancestors().map(|root| root.join(&dep)).find(|candidate| candidate.exists())
    };
    if !deps_dir.is_dir() {
        return Ok(BTreeSet::new());
    }
    let mut sources = BTreeSet::new();
    let entries = std::fs::read_dir(deps_dir).map_err(|e| BuildError::Io { what: format!("listing {}", deps_dir.display()), source: e })?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "d") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| BuildError::Io { what: format!("reading {}", path.display()), source: e })?;
        for line in text.lines() {
            let Some((_, deps)) = line.split_once(": ") else { continue };
            for dep in deps.split_whitespace() {
                let Some(dep) = resolve(PathBuf::from(dep.replace("\\ ", " "))) else { continue };
                let is_library = dep.starts_with(&library) || dep.starts_with(&toolchain.sysroot);
                let is_registry = cargo_home.as_ref().is_some_and(|home| dep.starts_with(home));
                let is_output = dep.components().any(|c| c.as_os_str() == "target");
                if !is_library && !is_registry && !is_output {
                    sources.insert(dep);
                }
            }
        }
    }
    Ok(sources)
}

/// The Rust file that `embed_kernels!()` includes.
fn artifact_list(crate_name: &str, toolchain: &DeviceToolchain, artifacts: &Artifacts) -> String {
    let mut text = String::from("// Generated by ferrocuda-builder. Do not edit.\n");
    text += &format!("/// The crate the kernels come from.\npub const CRATE_NAME: &str = {crate_name:?};\n");
    text += &format!("/// The device toolchain that built them.\npub const TOOLCHAIN: &str = {:?};\n", toolchain.version);
    text += "/// PTX modules by architecture (`70` for `sm_70`).\npub const PTX: &[(u32, &str)] = &[\n";
    for (arch, path) in &artifacts.ptx {
        text += &format!("    ({}, include_str!({:?})),\n", arch.number(), path.display().to_string());
    }
    text += "];\n/// Cubins by architecture.\npub const CUBINS: &[(u32, &[u8])] = &[\n";
    for cubin in &artifacts.cubins {
        text += &format!("    ({}, include_bytes!({:?})),\n", cubin.arch.number(), cubin.path.display().to_string());
    }
    text += "];\n/// `ptxas -v` per kernel and cubin: (arch, kernel, registers, spill stores, spill loads, stack frame, shared bytes).\n";
    text += "pub const RESOURCES: &[(u32, &str, u32, u32, u32, u32, u32)] = &[\n";
    for cubin in &artifacts.cubins {
        for k in &cubin.resources {
            text += &format!(
                "    ({}, {:?}, {}, {}, {}, {}, {}),\n",
                cubin.arch.number(),
                k.kernel,
                k.registers,
                k.spill_stores,
                k.spill_loads,
                k.stack_frame,
                k.shared_bytes
            );
        }
    }
    text += "];\n";
    text
}

/// `<target>/ferrocuda-device/<crate>` where `out_dir` is `<target>/<profile>/build/<pkg>/out`.
fn default_target_dir(out_dir: &Path, crate_name: &str) -> PathBuf {
    let target = out_dir.ancestors().nth(4).unwrap_or(out_dir);
    target.join("ferrocuda-device").join(crate_name)
}

/// The `name` of `[package]` in a `Cargo.toml` (a minimal reader: the first `name = "..."`
/// after the `[package]` header).
fn package_name(manifest: &Path) -> Result<String, BuildError> {
    let text = std::fs::read_to_string(manifest).map_err(|e| BuildError::Io { what: format!("reading {}", manifest.display()), source: e })?;
    let mut in_package = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(value) = line.strip_prefix("name") {
            let value = value.trim_start().trim_start_matches('=').trim().trim_matches('"');
            return Ok(value.to_string());
        }
    }
    Err(BuildError::NotACrate { manifest: manifest.to_path_buf() })
}

fn sorted(archs: &[Arch]) -> Vec<Arch> {
    let mut archs = archs.to_vec();
    archs.sort();
    archs.dedup();
    archs
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), BuildError> {
    // Leave the file alone when unchanged so that include_str!/include_bytes! users are not rebuilt.
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).map_err(|e| BuildError::Io { what: format!("writing {}", path.display()), source: e })
}

/// Runs `work` for each architecture on its own thread and returns the results in order.
fn in_parallel<R: Send>(archs: Vec<Arch>, work: impl Fn(Arch) -> Result<R, BuildError> + Sync) -> Vec<Result<R, BuildError>> {
    std::thread::scope(|scope| {
        let work = &work;
        let handles: Vec<_> = archs.into_iter().map(|arch| scope.spawn(move || work(arch))).collect();
        handles.into_iter().map(|handle| handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_parses_and_rejects() {
        assert_eq!("sm_90".parse::<Arch>().unwrap(), Arch::SM_90);
        assert_eq!("compute_80".parse::<Arch>().unwrap(), Arch::SM_80);
        assert_eq!("75".parse::<Arch>().unwrap().to_string(), "sm_75");
        assert_eq!("sm_90a".parse::<Arch>().unwrap(), Arch::SM_90A);
        assert_eq!(Arch::SM_90A.to_string(), "sm_90a");
        assert!(Arch::SM_90 < Arch::SM_90A && Arch::SM_90A < "sm_100".parse().unwrap());
        assert!("sm_80a".parse::<Arch>().is_err());
        let err = "sm_61".parse::<Arch>().unwrap_err().to_string();
        assert!(err.contains("sm_61") && err.contains("sm_70"), "{err}");
        assert!("gfx90a".parse::<Arch>().is_err());
    }

    #[test]
    fn arch_cfgs_include_every_older_arch() {
        let values: Vec<u32> = Arch::SM_80.cfg_values().collect();
        assert_eq!(values, vec![70, 72, 75, 80]);
    }

    #[test]
    fn rustflags_follow_options() {
        let builder = KernelBuilder::new("x").cfg("fast_math").fma(FmaContraction::Off).line_info(false);
        let flags = builder.rustflags(Arch::SM_90);
        assert_eq!(flags[0], "-Ctarget-cpu=sm_90");
        assert!(!flags.iter().any(|f| f.contains("fma-level")));
        assert!(!flags.iter().any(|f| f.contains("debuginfo")));
        assert!(flags.windows(2).any(|w| w == ["--cfg", "fast_math"]));
        assert!(flags.windows(2).any(|w| w == ["--cfg", "ferrocuda_sm=\"90\""]));
        let specific = KernelBuilder::new("x").rustflags(Arch::SM_90A);
        assert_eq!(specific[0], "-Ctarget-cpu=sm_90a");
        assert!(specific.windows(2).any(|w| w == ["--cfg", "ferrocuda_sm=\"90a\""]));
        assert!(specific.windows(2).any(|w| w == ["--cfg", "ferrocuda_sm=\"90\""]));
        assert!(specific.contains(&"-Ctarget-feature=+ptx83".to_string()));
        let default = KernelBuilder::new("x").rustflags(Arch::SM_70);
        assert!(default.contains(&"-Cllvm-args=-nvptx-fma-level=1".to_string()));
        assert!(default.contains(&"-Cdebuginfo=line-tables-only".to_string()));
    }

    #[test]
    fn default_and_requested_archs() {
        assert_eq!(KernelBuilder::new("x").ptx_archs(), vec![Arch::SM_70]);
        let b = KernelBuilder::new("x").arch(Arch::SM_90).arch(Arch::SM_70).arch(Arch::SM_90);
        assert_eq!(b.ptx_archs(), vec![Arch::SM_70, Arch::SM_90]);
    }

    #[test]
    fn clean_ptx_drops_dwarf_but_keeps_lines() {
        let raw = ".version 6.0\n.target sm_70, debug\n.entry k()\n{\n\t.loc\t1 2 3\n\tret;\n}\n\t.file\t1 \"k.rs\"\n\t.section\t.debug_abbrev\n\t{\n$L__sec_end0:\n\t}\n";
        let clean = clean_ptx(raw);
        assert!(clean.contains(".target sm_70\n"));
        assert!(clean.contains(".loc\t1 2 3"));
        assert!(clean.contains(".file\t1 \"k.rs\""));
        assert!(!clean.contains(".debug_abbrev") && !clean.contains("sec_end"));
    }

    #[test]
    fn package_name_is_read_from_the_package_table() {
        let dir = std::env::temp_dir().join(format!("ferrocuda-pkgname-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let manifest = dir.join("Cargo.toml");
        std::fs::write(&manifest, "[lib]\nname = \"not_this\"\n[package]\nversion = \"1.0.0\"\nname = \"my-kernels\"\n").unwrap();
        assert_eq!(package_name(&manifest).unwrap(), "my-kernels");
        std::fs::write(&manifest, "[workspace]\n").unwrap();
        assert!(matches!(package_name(&manifest), Err(BuildError::NotACrate { .. })));
    }

    #[test]
    fn default_target_dir_sits_beside_the_profiles() {
        let out = Path::new("/w/target/release/build/gpu-kernels-1234/out");
        assert_eq!(default_target_dir(out, "gpu_kernels"), Path::new("/w/target/ferrocuda-device/gpu_kernels"));
    }

    /// Regression: rustc writes `.d` paths relative to the workspace root; they were dropped,
    /// so editing a kernel did not rebuild the PTX.
    #[test]
    fn dep_info_paths_relative_to_the_workspace_are_watched() {
        let root = std::env::temp_dir().join(format!("ferrocuda-depinfo-{}", std::process::id()));
        let (crate_dir, deps) = (root.join("kernels"), root.join("target/deps"));
        std::fs::create_dir_all(crate_dir.join("src")).unwrap();
        std::fs::create_dir_all(&deps).unwrap();
        std::fs::write(crate_dir.join("src/lib.rs"), "").unwrap();
        std::fs::write(deps.join("kernels.d"), format!("{}/target/deps/kernels.s: kernels/src/lib.rs\n", root.display())).unwrap();
        let toolchain = DeviceToolchain {
            rustc: "rustc".into(),
            cargo: "cargo".into(),
            sysroot: "/nonexistent-sysroot".into(),
            version: String::new(),
            source: ToolchainSource::EnvOverride,
        };
        let sources = read_dep_info(&deps, &crate_dir, &toolchain).unwrap();
        let expected = crate_dir.canonicalize().unwrap().join("src/lib.rs");
        assert_eq!(sources.into_iter().collect::<Vec<_>>(), vec![expected]);
    }

    #[test]
    fn strip_ansi_removes_colours() {
        assert_eq!(strip_ansi("\x1b[1m\x1b[91merror\x1b[0m: x"), "error: x");
    }
}
