//! The inner cargo that compiles a kernel crate for `nvptx64-nvidia-cuda`.
//!
//! Nothing here depends on where cargo keeps its intermediate files (that layout changed in
//! cargo 1.100): the PTX is written where we ask (`--emit=asm=<absolute path>`, given to the
//! final rustc only), and the sources read come from the dep-info file cargo documents beside
//! the final artifact (see [`crate::dep_info`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use crate::{Arch, BuildError, DeviceToolchain, TARGET};

/// One kernel crate's device build, for one architecture at a time.
pub(crate) struct InnerBuild<'a> {
    pub toolchain: &'a DeviceToolchain,
    pub manifest: &'a Path,
    pub crate_name: &'a str,
    pub release: bool,
}

impl InnerBuild<'_> {
    fn profile_dir(&self) -> &'static str {
        if self.release { "release" } else { "debug" }
    }

    /// The dep-info file cargo writes beside the final artifact in `target_dir`.
    pub fn dep_info_file(&self, target_dir: &Path) -> PathBuf {
        target_dir.join(TARGET).join(self.profile_dir()).join(format!("{}.d", self.crate_name))
    }

    /// The inner cargo command. `rustflags` reach every crate of the build (`core` included, so
    /// `-Ctarget-cpu` is the same everywhere: rustc >= 1.101 refuses a mix); `--emit` reaches
    /// only the kernel crate.
    pub fn command(&self, target_dir: &Path, rustflags: &[String], asm: &Path) -> Command {
        let mut command = Command::new(&self.toolchain.cargo);
        command
            .args(["rustc", "--lib", "--crate-type", "cdylib", "--target", TARGET, "-Zbuild-std=core"])
            .arg("--manifest-path")
            .arg(self.manifest)
            .arg("--target-dir")
            .arg(target_dir)
            .args(["--color", "always"]);
        if self.release {
            command.arg("--release");
        }
        let mut emit = std::ffi::OsString::from("--emit=asm=");
        emit.push(asm);
        command.args(["--", "-Clinker=/bin/true"]).arg(emit);
        clean_environment(&mut command);
        let profile = if self.release { "RELEASE" } else { "DEV" };
        command
            .env("RUSTC", &self.toolchain.rustc)
            .env("RUSTC_BOOTSTRAP", "1")
            .env("CARGO_ENCODED_RUSTFLAGS", rustflags.join("\x1f"))
            .env(format!("CARGO_PROFILE_{profile}_PANIC"), "abort")
            .env(format!("CARGO_PROFILE_{profile}_LTO"), "fat")
            .env(format!("CARGO_PROFILE_{profile}_CODEGEN_UNITS"), "1");
        crate::toolchain::own_libraries(&mut command, &self.toolchain.rustc);
        command
    }

    /// Runs the build for `arch` in `target_dir` and returns the PTX that rustc wrote to `asm`
    /// (an absolute path without commas; any older file there is removed first).
    pub fn run(&self, arch: Arch, target_dir: &Path, rustflags: &[String], asm: &Path) -> Result<String, BuildError> {
        if asm.to_string_lossy().contains(',') || !asm.is_absolute() {
            return Err(BuildError::Io {
                what: format!("choosing where the PTX goes ({}): rustc's --emit needs an absolute path without commas; set .out_dir(...)", asm.display()),
                source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
            });
        }
        let _ = std::fs::remove_file(asm);
        let started = SystemTime::now();
        let mut command = self.command(target_dir, rustflags, asm);
        let output = command.output().map_err(|e| BuildError::Io { what: format!("running {}", self.toolchain.cargo.display()), source: e })?;
        let diagnostics = String::from_utf8_lossy(&output.stderr).into_owned();
        if !output.status.success() {
            return Err(BuildError::Compile { arch, diagnostics });
        }
        forward_warnings(&diagnostics);
        match std::fs::read_to_string(asm) {
            Ok(ptx) => {
                let _ = std::fs::remove_file(asm); // the caller keeps the cleaned copy
                Ok(ptx)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BuildError::MissingPtx {
                arch,
                expected: asm.to_path_buf(),
                toolchain: self.toolchain.describe(),
                produced: files_written_since(target_dir, started),
            }),
            Err(e) => Err(BuildError::Io { what: format!("reading the PTX {}", asm.display()), source: e }),
        }
    }
}

/// Code-like files (`.s`, `.ptx`, `.ll`, `.bc`, `.o`) under `dir` written at or after `since`,
/// at most 20, for the message of a build that produced no PTX where asked.
pub(crate) fn files_written_since(dir: &Path, since: SystemTime) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| ["s", "ptx", "ll", "bc", "o"].iter().any(|x| e == *x))
                && meta.modified().is_ok_and(|m| m >= since)
                && found.len() < 20
            {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Removes what the outer cargo set for its build script, so the inner cargo starts clean.
fn clean_environment(command: &mut Command) {
    const KEEP: &[&str] = &["CARGO_HOME", "CARGO_NET_", "CARGO_HTTP_", "CARGO_REGISTRIES_", "CARGO_REGISTRY_"];
    const DROP: &[&str] = &[
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTDOC",
        "RUSTUP_TOOLCHAIN",
        "TARGET",
        "HOST",
        "OUT_DIR",
        "OPT_LEVEL",
        "PROFILE",
        "DEBUG",
        "NUM_JOBS",
        "RUSTC_LINKER",
    ];
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolchainSource;

    fn toolchain() -> DeviceToolchain {
        DeviceToolchain {
            rustc: "/tc/rustc".into(),
            cargo: "/tc/cargo".into(),
            sysroot: "/tc".into(),
            version: "rustc 1.101.0-nightly".into(),
            source: ToolchainSource::RustupNightly,
        }
    }

    #[test]
    fn strip_ansi_removes_colours() {
        assert_eq!(strip_ansi("\x1b[1m\x1b[91merror\x1b[0m: x"), "error: x");
    }

    /// Regression (issue 11): the builder read the PTX from `<target>/.../deps/<crate>.s`,
    /// which cargo 1.100's build-directory layout moved. The path is now ours: `--emit=asm=`
    /// after `--` (the final crate only), with target-cpu in the encoded RUSTFLAGS.
    #[test]
    fn the_ptx_path_is_chosen_by_us_and_passed_to_the_final_rustc_only() {
        let tc = toolchain();
        let build = InnerBuild { toolchain: &tc, manifest: Path::new("/k/Cargo.toml"), crate_name: "k", release: true };
        let command = build.command(Path::new("/t/sm_80"), &["-Ctarget-cpu=sm_80".into(), "--cfg".into(), "x".into()], Path::new("/out/k.sm_80.s"));
        let args: Vec<String> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        let separator = args.iter().position(|a| a == "--").expect("a -- separator");
        assert_eq!(&args[separator + 1..], ["-Clinker=/bin/true", "--emit=asm=/out/k.sm_80.s"]);
        assert!(!args[..separator].iter().any(|a| a.contains("emit") || a.contains("target-cpu")), "{args:?}");
        let env: Vec<(String, String)> =
            command.get_envs().filter_map(|(k, v)| Some((k.to_string_lossy().into_owned(), v?.to_string_lossy().into_owned()))).collect();
        assert!(env.contains(&("CARGO_ENCODED_RUSTFLAGS".into(), "-Ctarget-cpu=sm_80\x1f--cfg\x1fx".into())), "{env:?}");
        assert!(env.contains(&("RUSTC".into(), "/tc/rustc".into())) && env.contains(&("RUSTC_BOOTSTRAP".into(), "1".into())), "{env:?}");
        assert_eq!(build.dep_info_file(Path::new("/t/sm_80")), Path::new("/t/sm_80/nvptx64-nvidia-cuda/release/k.d"));
    }

    #[test]
    fn a_missing_ptx_names_the_toolchain_and_what_it_wrote() {
        let dir = std::env::temp_dir().join(format!("ferrocuda-missing-ptx-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("t/nvptx64-nvidia-cuda/release/build/k/1234/out")).unwrap();
        let since = SystemTime::now() - std::time::Duration::from_secs(1);
        let stray = dir.join("t/nvptx64-nvidia-cuda/release/build/k/1234/out/k.s");
        std::fs::write(&stray, "").unwrap();
        std::fs::write(dir.join("t/unrelated.json"), "").unwrap();
        assert_eq!(files_written_since(&dir.join("t"), since), vec![stray.clone()]);
        let error = BuildError::MissingPtx { arch: Arch::SM_80, expected: dir.join("out/k.sm_80.s"), toolchain: toolchain().describe(), produced: vec![stray] };
        let message = error.to_string();
        assert!(message.contains("rustc 1.101.0-nightly from rustup nightly (/tc/rustc)"), "{message}");
        assert!(message.contains("1234/out/k.s") && message.contains("k.sm_80.s"), "{message}");
    }

    #[test]
    fn a_relative_or_comma_path_is_refused_before_running_anything() {
        let tc = toolchain();
        let build = InnerBuild { toolchain: &tc, manifest: Path::new("/k/Cargo.toml"), crate_name: "k", release: true };
        for bad in ["rel/k.s", "/a,b/k.s"] {
            let error = build.run(Arch::SM_80, Path::new("/t"), &[], Path::new(bad)).unwrap_err().to_string();
            assert!(error.contains("absolute path without commas"), "{error}");
        }
    }
}
