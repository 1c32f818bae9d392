//! Where the PTX, cubins and `ptxas` figures of a kernel crate come from: an existing build's
//! `ferrocuda_artifacts.rs` (the file `embed_kernels!()` includes), or a fresh build through
//! `ferrocuda-builder`'s library API.

use std::path::{Path, PathBuf};

use ferrocuda_builder::{Arch, KernelBuilder, KernelResources};

/// One build of a kernel crate, as seen by `inspect`.
#[derive(Debug, Clone, Default)]
pub struct Build {
    /// The kernel crate's name (`gpu_kernels`).
    pub crate_name: String,
    /// PTX files by architecture number, oldest first.
    pub ptx: Vec<(u32, PathBuf)>,
    /// Cubin files by architecture number.
    pub cubins: Vec<(u32, PathBuf)>,
    /// `ptxas -v` figures recorded by the build: (architecture, kernel figures).
    pub resources: Vec<(u32, KernelResources)>,
}

/// Why a build could not be found or made.
#[derive(Debug)]
pub struct SourceError(pub String);

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SourceError {}

/// The name of the file `ferrocuda-builder` writes into `OUT_DIR`.
pub const ARTIFACT_LIST: &str = "ferrocuda_artifacts.rs";

impl Build {
    /// Reads the artifact list in `out_dir` (a kernel crate's `OUT_DIR`, or any directory
    /// holding `ferrocuda_artifacts.rs`).
    pub fn read(out_dir: &Path) -> Result<Build, SourceError> {
        let list = out_dir.join(ARTIFACT_LIST);
        let text = std::fs::read_to_string(&list).map_err(|e| SourceError(format!("cannot read {}: {e}", list.display())))?;
        Ok(Build::parse_list(&text, out_dir))
    }

    /// Parses the text of a `ferrocuda_artifacts.rs`. Relative paths resolve against `dir`;
    /// a recorded path that no longer exists is looked up by file name in `dir` (a build
    /// directory that was copied or moved).
    pub fn parse_list(text: &str, dir: &Path) -> Build {
        let mut build = Build::default();
        let mut section = "";
        for line in text.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("pub const ") {
                section = rest.split(':').next().unwrap_or_default();
                if section == "CRATE_NAME" {
                    build.crate_name = quoted(rest).unwrap_or_default();
                }
                continue;
            }
            let Some(tuple) = line.strip_prefix('(').and_then(|l| l.strip_suffix("),")) else { continue };
            let Some((arch, rest)) = tuple.split_once(',') else { continue };
            let Ok(arch) = arch.trim().parse::<u32>() else { continue };
            match section {
                "PTX" | "CUBINS" => {
                    let Some(path) = quoted(rest) else { continue };
                    let path = locate(Path::new(&path), dir);
                    if section == "PTX" { build.ptx.push((arch, path)) } else { build.cubins.push((arch, path)) }
                }
                "RESOURCES" => {
                    let fields: Vec<&str> = rest.split(',').map(str::trim).collect();
                    let numbers: Vec<u32> = fields.iter().skip(1).filter_map(|f| f.parse().ok()).collect();
                    if let (Some(kernel), [registers, spill_stores, spill_loads, stack_frame, shared_bytes]) = (quoted(fields[0]), numbers.as_slice()) {
                        build.resources.push((
                            arch,
                            KernelResources {
                                kernel,
                                registers: *registers,
                                spill_stores: *spill_stores,
                                spill_loads: *spill_loads,
                                stack_frame: *stack_frame,
                                shared_bytes: *shared_bytes,
                            },
                        ));
                    }
                }
                _ => {}
            }
        }
        build.ptx.sort();
        build
    }

    /// The PTX to compile for `arch`: the newest one not newer than it.
    pub fn ptx_for(&self, arch: u32) -> Option<&Path> {
        self.ptx.iter().rev().find(|(a, _)| *a <= arch).map(|(_, p)| p.as_path())
    }

    /// The recorded `ptxas` figures for `arch`, if the build compiled a cubin for it.
    pub fn resources_for(&self, arch: u32) -> Vec<KernelResources> {
        self.resources.iter().filter(|(a, _)| *a == arch).map(|(_, r)| r.clone()).collect()
    }
}

/// The first `"..."` string literal in `text`, unescaped (`\\` and `\"` only: paths).
fn quoted(text: &str) -> Option<String> {
    let start = text.find('"')? + 1;
    let mut out = String::new();
    let mut chars = text[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            '"' => return Some(out),
            c => out.push(c),
        }
    }
    None
}

fn locate(recorded: &Path, dir: &Path) -> PathBuf {
    let path = if recorded.is_absolute() { recorded.to_path_buf() } else { dir.join(recorded) };
    if path.exists() {
        return path;
    }
    recorded.file_name().map(|name| dir.join(name)).filter(|p| p.exists()).unwrap_or(path)
}

/// How to build a kernel crate for inspection.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// PTX architectures (the crate's `build.rs` may use others; these are what `inspect`
    /// asks for).
    pub ptx_archs: Vec<Arch>,
    /// Cubin architectures (`ptxas` figures are recorded for these).
    pub cubin_archs: Vec<Arch>,
    /// Extra `--cfg` values for the device build.
    pub cfgs: Vec<String>,
    /// Kernels the crate's own build script vouches for with `allow_recursion` (the builder
    /// refuses recursive kernels otherwise).
    pub recursive: Vec<String>,
}

/// Builds the kernel crate in `crate_dir` with `ferrocuda-builder`, into
/// `<target>/ferrocuda-inspect/<crate>`; the inner cargo reuses the target directory that the
/// crate's own build script uses (`<target>/ferrocuda-device`), so a crate that was
/// built before rebuilds in about a second.
pub fn build_crate(crate_dir: &Path, options: &BuildOptions) -> Result<Build, SourceError> {
    let manifest = crate_dir.join("Cargo.toml");
    if !manifest.is_file() {
        return Err(SourceError(format!("{} is not a crate directory (no Cargo.toml)", crate_dir.display())));
    }
    let crate_dir = crate_dir.canonicalize().map_err(|e| SourceError(format!("{}: {e}", crate_dir.display())))?;
    let target = target_dir(&crate_dir);
    // The library's crate name, as the crate's own build names its artifacts.
    let name = ferrocuda_builder::lib_crate_name(&manifest).map_err(|e| SourceError(e.to_string()))?;
    let out_dir = target.join("ferrocuda-inspect").join(&name);
    std::fs::create_dir_all(&out_dir).map_err(|e| SourceError(format!("creating {}: {e}", out_dir.display())))?;
    let mut builder = KernelBuilder::new(&crate_dir).out_dir(&out_dir).target_dir(target.join("ferrocuda-device"));
    for &arch in &options.ptx_archs {
        builder = builder.arch(arch);
    }
    for &arch in &options.cubin_archs {
        builder = builder.cubin_arch(arch);
    }
    for cfg in &options.cfgs {
        builder = builder.cfg(cfg.clone());
    }
    #[allow(unsafe_code)] // the crate's one unsafe call; see the SAFETY note.
    for kernel in &options.recursive {
        // SAFETY: `allow_recursion`'s contract is about launches (every launch stays within
        // the stack limit the host sets); inspecting builds and reads the module and launches
        // nothing. The user names kernels their own build script already vouches for.
        builder = unsafe { builder.allow_recursion(kernel.clone()) };
    }
    builder.build().map_err(|e| SourceError(format!("building {}: {e}", crate_dir.display())))?;
    Build::read(&out_dir)
}

/// The target directory of the workspace that holds `crate_dir`: `CARGO_TARGET_DIR`, else
/// `target/` beside the outermost `Cargo.toml` with a `[workspace]` table, else the crate's own.
pub fn target_dir(crate_dir: &Path) -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let workspace =
        crate_dir.ancestors().filter(|dir| std::fs::read_to_string(dir.join("Cargo.toml")).is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"))).last();
    workspace.unwrap_or(crate_dir).join("target")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_an_artifact_list() {
        let list = r#"// Generated by ferrocuda-builder. Do not edit.
/// The crate the kernels come from.
pub const CRATE_NAME: &str = "gpu_kernels";
pub const TOOLCHAIN: &str = "rustc 1.96.0";
pub const PTX: &[(u32, &str)] = &[
    (90, include_str!("/nonexistent/out/k.sm_90.ptx")),
    (80, include_str!("/nonexistent/out/k.sm_80.ptx")),
];
pub const CUBINS: &[(u32, &[u8])] = &[
    (90, include_bytes!("/nonexistent/out/k.sm_90.cubin")),
];
pub const RESOURCES: &[(u32, &str, u32, u32, u32, u32, u32)] = &[
    (90, "saxpy", 10, 0, 0, 0, 16),
    (90, "spilly", 255, 8, 12, 24, 2064),
];
"#;
        let build = Build::parse_list(list, Path::new("/moved"));
        assert_eq!(build.crate_name, "gpu_kernels");
        assert_eq!(build.ptx, vec![(80, PathBuf::from("/nonexistent/out/k.sm_80.ptx")), (90, PathBuf::from("/nonexistent/out/k.sm_90.ptx"))]);
        assert_eq!(build.cubins.len(), 1);
        assert_eq!(build.ptx_for(89), Some(Path::new("/nonexistent/out/k.sm_80.ptx")));
        assert_eq!(build.ptx_for(75), None);
        let spilly = &build.resources_for(90)[1];
        assert_eq!(
            (spilly.kernel.as_str(), spilly.registers, spilly.spill_stores, spilly.spill_loads, spilly.stack_frame, spilly.shared_bytes),
            ("spilly", 255, 8, 12, 24, 2064)
        );
        assert!(build.resources_for(80).is_empty());
    }

    #[test]
    fn quoted_unescapes_paths() {
        assert_eq!(quoted(r#"x("a\\b \"c\"")"#).as_deref(), Some(r#"a\b "c""#));
        assert_eq!(quoted("no quotes"), None);
    }
}
