//! Finding a Rust toolchain that can build `core` for `nvptx64-nvidia-cuda`.
//!
//! Stock rustup stable has neither the nvptx target's `core` nor `rust-src`, so the device build
//! uses `-Zbuild-std=core` with a toolchain that ships the library sources. Three places are
//! tried, in this order:
//! 1. `FERROCUDA_DEVICE_RUSTC` (and optionally `FERROCUDA_DEVICE_CARGO`): an explicit override;
//! 2. Debian's `rustc-web` + `cargo-web` + `rust-web-src` (`/usr/bin/rustc`, `/usr/lib/rustlib/src`);
//! 3. a rustup `nightly` toolchain that has the `rust-src` component.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::BuildError;
use crate::env::BuildEnv;

/// Where a device toolchain was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolchainSource {
    /// `FERROCUDA_DEVICE_RUSTC` / `FERROCUDA_DEVICE_CARGO`.
    EnvOverride,
    /// Debian's `rustc-web`, `cargo-web` and `rust-web-src` packages.
    Debian,
    /// A rustup `nightly` toolchain with `rust-src`.
    RustupNightly,
}

/// A `rustc` + `cargo` pair whose sysroot has the library sources `-Zbuild-std` needs.
#[derive(Debug, Clone)]
pub struct DeviceToolchain {
    /// The compiler (passed to the inner cargo as `RUSTC`).
    pub rustc: PathBuf,
    /// The cargo that drives the device build.
    pub cargo: PathBuf,
    /// The compiler's sysroot; `lib/rustlib/src/rust/library` holds `core`'s sources.
    pub sysroot: PathBuf,
    /// `rustc --version`.
    pub version: String,
    /// Which of the places it came from.
    pub source: ToolchainSource,
}

/// What to tell a user who has no device toolchain.
pub(crate) const INSTALL_HINT: &str = "\
install one of:
  - Debian/Ubuntu packages: `sudo apt-get install rustc-web cargo-web rust-web-src`
    (or run `scripts/install-device-toolchain.sh`, which does that and installs ptxas);
  - with rustup and internet: `rustup toolchain install nightly --component rust-src`;
  - or point FERROCUDA_DEVICE_RUSTC (and FERROCUDA_DEVICE_CARGO) at a rustc whose sysroot has rust-src";

impl DeviceToolchain {
    /// Finds a device toolchain, trying the override, Debian's packages, then rustup nightly.
    ///
    /// # Errors
    /// [`BuildError::NoDeviceToolchain`] lists every place tried and why it did not fit.
    pub fn find(env: &BuildEnv) -> Result<Self, BuildError> {
        let mut tried = Vec::new();

        if let Some(rustc) = env.var("FERROCUDA_DEVICE_RUSTC") {
            let rustc = PathBuf::from(rustc);
            let cargo = env
                .var("FERROCUDA_DEVICE_CARGO")
                .map(PathBuf::from)
                .unwrap_or_else(|| rustc.with_file_name("cargo"));
            // An explicit override that does not work is an error, not a reason to look elsewhere.
            return Self::probe(&rustc, &cargo, ToolchainSource::EnvOverride).map_err(|why| {
                BuildError::NoDeviceToolchain {
                    tried: vec![format!("FERROCUDA_DEVICE_RUSTC={}: {why}", rustc.display())],
                }
            });
        }
        let _ = env.var("FERROCUDA_DEVICE_CARGO");

        match Self::probe(Path::new("/usr/bin/rustc"), Path::new("/usr/bin/cargo"), ToolchainSource::Debian) {
            Ok(found) => return Ok(found),
            Err(why) => tried.push(format!("Debian rustc-web (/usr/bin/rustc): {why}")),
        }

        match rustup_nightly() {
            Ok((rustc, cargo)) => match Self::probe(&rustc, &cargo, ToolchainSource::RustupNightly) {
                Ok(found) => return Ok(found),
                Err(why) => tried.push(format!("rustup nightly ({}): {why}", rustc.display())),
            },
            Err(why) => tried.push(format!("rustup nightly: {why}")),
        }

        Err(BuildError::NoDeviceToolchain { tried })
    }

    /// Checks that `rustc` and `cargo` run and that the sysroot has `core`'s sources.
    pub fn probe(rustc: &Path, cargo: &Path, source: ToolchainSource) -> Result<Self, String> {
        if !rustc.exists() {
            return Err("not installed".into());
        }
        if !cargo.exists() {
            return Err(format!("{} not found next to it", cargo.display()));
        }
        let version = run_stdout(Command::new(rustc).arg("--version"))?;
        let sysroot = PathBuf::from(run_stdout(Command::new(rustc).args(["--print", "sysroot"]))?);
        let core_src = sysroot.join("lib/rustlib/src/rust/library/core/src/lib.rs");
        if !core_src.exists() {
            return Err(format!("{version} has no library sources (missing {})", core_src.display()));
        }
        Ok(Self { rustc: rustc.into(), cargo: cargo.into(), sysroot, version, source })
    }

    /// The directory of the library sources, which rebuilds need not watch.
    pub fn library_sources(&self) -> PathBuf {
        self.sysroot.join("lib/rustlib/src/rust/library")
    }
}

fn rustup_nightly() -> Result<(PathBuf, PathBuf), String> {
    let which = |tool: &str| -> Result<PathBuf, String> {
        run_stdout(Command::new("rustup").args(["which", "--toolchain", "nightly", tool])).map(PathBuf::from)
    };
    Ok((which("rustc")?, which("cargo")?))
}

fn run_stdout(command: &mut Command) -> Result<String, String> {
    let output = command.output().map_err(|e| format!("could not run {:?}: {e}", command.get_program()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("{:?} failed: {}", command.get_program(), stderr.trim()));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}
