//! Finding a Rust toolchain that can build `core` for `nvptx64-nvidia-cuda`.
//!
//! rustup's toolchains have no prebuilt `core` for the nvptx target, so the device build uses
//! `-Zbuild-std=core` (unstable, so the inner build sets `RUSTC_BOOTSTRAP=1`),
//! which needs a toolchain that ships the library sources. Four places are tried, in order:
//! 1. `FERROCUDA_DEVICE_RUSTC` (and optionally `FERROCUDA_DEVICE_CARGO`): an explicit override;
//! 2. Debian's `rustc-web` + `cargo-web` + `rust-web-src` (`/usr/bin/rustc`, `/usr/lib/rustlib/src`);
//! 3. a rustup `nightly` toolchain that has the `rust-src` component;
//! 4. the toolchain building the host code (cargo's `RUSTC`, e.g. rustup stable), once
//!    `rustup component add rust-src` has given it the library sources.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::BuildError;
use crate::env::BuildEnv;

/// Where a device toolchain was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolchainSource {
    /// `FERROCUDA_DEVICE_RUSTC` / `FERROCUDA_DEVICE_CARGO`.
    EnvOverride,
    /// Debian's `rustc-web`, `cargo-web` and `rust-web-src` packages.
    Debian,
    /// A rustup `nightly` toolchain with `rust-src`.
    RustupNightly,
    /// The toolchain that builds the host code (any channel) with `rust-src`.
    Host,
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

/// The places to look, as paths and programs (the defaults, or stubs in tests).
#[derive(Debug, Clone)]
pub(crate) struct Places {
    /// Debian's compiler and cargo.
    pub debian: (PathBuf, PathBuf),
    /// The `rustup` program.
    pub rustup: OsString,
    /// The compiler that builds the host code (cargo's `RUSTC` in a build script).
    pub host_rustc: OsString,
}

impl Places {
    fn standard(env: &BuildEnv) -> Self {
        Self {
            debian: ("/usr/bin/rustc".into(), "/usr/bin/cargo".into()),
            rustup: "rustup".into(),
            host_rustc: env.var("RUSTC").unwrap_or_else(|| "rustc".into()).into(),
        }
    }
}

impl DeviceToolchain {
    /// Finds a device toolchain: the override, Debian's packages, rustup nightly, then the host
    /// toolchain (see the module docs).
    ///
    /// # Errors
    /// [`BuildError::NoDeviceToolchain`] lists every place tried and why it did not fit.
    pub fn find(env: &BuildEnv) -> Result<Self, BuildError> {
        Self::find_in(env, &Places::standard(env))
    }

    pub(crate) fn find_in(env: &BuildEnv, places: &Places) -> Result<Self, BuildError> {
        if let Some(rustc) = env.var("FERROCUDA_DEVICE_RUSTC") {
            let rustc = PathBuf::from(rustc);
            let cargo = env.var("FERROCUDA_DEVICE_CARGO").map(PathBuf::from).unwrap_or_else(|| rustc.with_file_name("cargo"));
            // An explicit override that does not work is an error, not a reason to look elsewhere.
            return Self::probe(&rustc, &cargo, ToolchainSource::EnvOverride)
                .map_err(|why| BuildError::NoDeviceToolchain { tried: vec![format!("FERROCUDA_DEVICE_RUSTC={}: {why}", rustc.display())] });
        }
        let _ = env.var("FERROCUDA_DEVICE_CARGO");
        let mut tried = Vec::new();

        let (rustc, cargo) = &places.debian;
        match Self::probe(rustc, cargo, ToolchainSource::Debian) {
            Ok(found) => return Ok(found),
            Err(why) => tried.push(format!("Debian rustc-web ({}): {why}", rustc.display())),
        }

        let which = |tool: &str| -> Result<PathBuf, String> {
            run_stdout(Command::new(&places.rustup).args(["which", "--toolchain", "nightly", tool])).map(PathBuf::from)
        };
        match which("rustc").and_then(|rustc| Ok((rustc, which("cargo")?))) {
            Ok((rustc, cargo)) => match Self::probe(&rustc, &cargo, ToolchainSource::RustupNightly) {
                Ok(found) => return Ok(found),
                Err(why) => tried.push(format!("rustup nightly ({}): {why}", rustc.display())),
            },
            Err(why) => tried.push(format!("rustup nightly: {why}")),
        }

        // The host compiler may be a rustup proxy: its sysroot's `bin/` has the real binaries.
        let host = Path::new(&places.host_rustc).display().to_string();
        match run_stdout(Command::new(&places.host_rustc).args(["--print", "sysroot"])) {
            Ok(sysroot) => {
                let bin = Path::new(&sysroot).join("bin");
                match Self::probe(&bin.join("rustc"), &bin.join("cargo"), ToolchainSource::Host) {
                    Ok(found) => return Ok(found),
                    Err(why) => tried.push(format!("the host toolchain ({host}, sysroot {sysroot}): {why}")),
                }
            }
            Err(why) => tried.push(format!("the host toolchain ({host}): {why}")),
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
        let version = run_stdout(crate::env::own_libraries(Command::new(rustc).arg("--version"), rustc))?;
        if let Some((major, minor)) = parse_version(&version)
            && (major, minor) < MIN_DEVICE_RUSTC
        {
            let fix = if source == ToolchainSource::Debian {
                "this distribution's rustc-web is too old: `rustup component add rust-src` lets the host toolchain build kernels instead"
            } else {
                "update it (`rustup update`) or point FERROCUDA_DEVICE_RUSTC at a newer rustc with rust-src"
            };
            return Err(format!(
                "{version} is older than {}.{}, the oldest rustc the device crates build with ({fix})",
                MIN_DEVICE_RUSTC.0, MIN_DEVICE_RUSTC.1
            ));
        }
        let sysroot = PathBuf::from(run_stdout(crate::env::own_libraries(Command::new(rustc).args(["--print", "sysroot"]), rustc))?);
        let core_src = sysroot.join("lib/rustlib/src/rust/library/core/src/lib.rs");
        if !core_src.exists() {
            let fix = if source == ToolchainSource::Debian { "apt-get install rust-web-src" } else { "rustup component add rust-src" };
            return Err(format!("{version} has no library sources (missing {}; `{fix}` adds them)", core_src.display()));
        }
        Ok(Self { rustc: rustc.into(), cargo: cargo.into(), sysroot, version, source })
    }

    /// The directory of the library sources, which rebuilds need not watch.
    pub fn library_sources(&self) -> PathBuf {
        self.sysroot.join("lib/rustlib/src/rust/library")
    }

    /// `rustc 1.96.0 (...) from Debian rustc-web (/usr/bin/rustc)`: for messages.
    pub fn describe(&self) -> String {
        let from = match self.source {
            ToolchainSource::EnvOverride => "FERROCUDA_DEVICE_RUSTC",
            ToolchainSource::Debian => "Debian rustc-web",
            ToolchainSource::RustupNightly => "rustup nightly",
            ToolchainSource::Host => "the host toolchain",
        };
        format!("{} from {from} ({})", self.version, self.rustc.display())
    }
}

/// The oldest rustc that builds the device crates (`rust-version` of the workspace): an older
/// toolchain is skipped with this reason, so the search goes on to the next place (Debian 12's
/// main archive ships rustc-web 1.85, for example).
pub const MIN_DEVICE_RUSTC: (u32, u32) = (1, 95);

/// `(major, minor)` from `rustc 1.96.0 (...)` or `rustc 1.101.0-nightly (...)`; `None` when the
/// text has no version (then nothing is refused on its account).
fn parse_version(version: &str) -> Option<(u32, u32)> {
    let number = version.split_whitespace().nth(1)?;
    let mut parts = number.split(['.', '-']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

fn run_stdout(command: &mut Command) -> Result<String, String> {
    let output = command.output().map_err(|e| format!("could not run {:?}: {e}", command.get_program()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("{:?} failed: {}", command.get_program(), stderr.trim()));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Tests here write scripts and run them: a script written while another test thread forks
    /// can fail with ETXTBSY, so they take turns.
    static SCRIPTS: Mutex<()> = Mutex::new(());

    /// A fake toolchain in `dir`: `bin/rustc` (answers `--version` and `--print sysroot`),
    /// `bin/cargo`, and the library sources when `with_src`.
    fn fake_toolchain(dir: &Path, version: &str, with_src: bool) -> (PathBuf, PathBuf) {
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        if with_src {
            let core = dir.join("lib/rustlib/src/rust/library/core/src");
            std::fs::create_dir_all(&core).unwrap();
            std::fs::write(core.join("lib.rs"), "").unwrap();
        }
        let rustc = dir.join("bin/rustc");
        script(&rustc, &format!("if [ \"$1\" = --version ]; then echo '{version}'; else echo '{}'; fi", dir.display()));
        script(&dir.join("bin/cargo"), "exit 0");
        (rustc, dir.join("bin/cargo"))
    }

    fn script(path: &Path, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ferrocuda-toolchain-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A machine with a Debian pair, a rustup whose nightly is `nightly`, and a host rustc.
    fn places(root: &Path, debian: Option<bool>, nightly: Option<bool>, host: Option<bool>) -> Places {
        let debian = match debian {
            Some(src) => fake_toolchain(&root.join("debian"), "rustc 1.96.0 (debian)", src),
            None => (root.join("no-debian/rustc"), root.join("no-debian/cargo")),
        };
        let rustup = root.join("rustup");
        match nightly {
            Some(src) => {
                let (rustc, _) = fake_toolchain(&root.join("nightly"), "rustc 1.101.0-nightly", src);
                let bin = rustc.parent().unwrap().display().to_string();
                script(&rustup, &format!("[ \"$1 $2 $3\" = 'which --toolchain nightly' ] && echo '{bin}/'\"$4\""));
            }
            None => script(&rustup, "echo \"error: toolchain 'nightly-x86_64-unknown-linux-gnu' is not installed\" >&2; exit 1"),
        }
        let host_rustc = match host {
            Some(src) => fake_toolchain(&root.join("host"), "rustc 1.95.0 (stable)", src).0.into_os_string(),
            None => root.join("no-host/rustc").into_os_string(),
        };
        Places { debian, rustup: rustup.into_os_string(), host_rustc }
    }

    fn found(places: &Places) -> Result<DeviceToolchain, String> {
        DeviceToolchain::find_in(&BuildEnv::fixed::<_, String, String>([]), places).map_err(|e| e.to_string())
    }

    #[test]
    fn an_explicit_override_wins_and_a_broken_one_is_an_error() {
        let _turn = SCRIPTS.lock().unwrap_or_else(|p| p.into_inner());
        let root = scratch("override");
        let (rustc, _) = fake_toolchain(&root.join("custom"), "rustc 1.99.0 (custom)", true);
        let all = places(&root, Some(true), Some(true), Some(true));
        let env = BuildEnv::fixed([("FERROCUDA_DEVICE_RUSTC", rustc.display().to_string())]);
        let toolchain = DeviceToolchain::find_in(&env, &all).unwrap();
        assert_eq!((toolchain.source, toolchain.version.as_str()), (ToolchainSource::EnvOverride, "rustc 1.99.0 (custom)"));
        let env = BuildEnv::fixed([("FERROCUDA_DEVICE_RUSTC", "/nonexistent/rustc")]);
        let message = DeviceToolchain::find_in(&env, &all).unwrap_err().to_string();
        assert!(message.contains("FERROCUDA_DEVICE_RUSTC=/nonexistent/rustc: not installed"), "{message}");
    }

    #[test]
    fn debian_comes_before_rustup_nightly_and_the_host_toolchain() {
        let _turn = SCRIPTS.lock().unwrap_or_else(|p| p.into_inner());
        let root = scratch("order");
        let toolchain = found(&places(&root, Some(true), Some(true), Some(true))).unwrap();
        assert_eq!(toolchain.source, ToolchainSource::Debian);
        assert!(toolchain.describe().starts_with("rustc 1.96.0 (debian) from Debian rustc-web"), "{}", toolchain.describe());
    }

    #[test]
    fn a_debian_rustc_older_than_the_workspace_minimum_is_skipped_for_the_host_toolchain() {
        let _turn = SCRIPTS.lock().unwrap_or_else(|p| p.into_inner());
        let root = scratch("old-debian");
        let (rustc, cargo) = fake_toolchain(&root.join("debian"), "rustc 1.85.0 (4d91de4e4 2025-02-17)", true);
        let mut places = places(&root, None, None, Some(true));
        places.debian = (rustc, cargo);
        let toolchain = found(&places).unwrap();
        assert_eq!(toolchain.source, ToolchainSource::Host, "{}", toolchain.describe());
        places.host_rustc = root.join("no-host/rustc").into_os_string();
        let message = found(&places).unwrap_err();
        assert!(message.contains("rustc 1.85.0") && message.contains("older than 1.95") && message.contains("rustup component add rust-src"), "{message}");
    }

    #[test]
    fn versions_parse_from_stable_and_nightly_banners() {
        assert_eq!(parse_version("rustc 1.96.0 (abc 2026-01-01)"), Some((1, 96)));
        assert_eq!(parse_version("rustc 1.101.0-nightly (abc)"), Some((1, 101)));
        assert_eq!(parse_version("something else"), None);
    }

    #[test]
    fn rustup_nightly_with_rust_src_is_next() {
        let _turn = SCRIPTS.lock().unwrap_or_else(|p| p.into_inner());
        let root = scratch("nightly");
        // Debian's compiler without rust-web-src does not fit.
        let toolchain = found(&places(&root, Some(false), Some(true), Some(true))).unwrap();
        assert_eq!((toolchain.source, toolchain.version.as_str()), (ToolchainSource::RustupNightly, "rustc 1.101.0-nightly"));
        assert_eq!(toolchain.cargo, root.join("nightly/bin/cargo"));
    }

    #[test]
    fn the_host_toolchain_with_rust_src_is_the_last_resort() {
        let _turn = SCRIPTS.lock().unwrap_or_else(|p| p.into_inner());
        let root = scratch("host");
        let toolchain = found(&places(&root, None, Some(false), Some(true))).unwrap();
        assert_eq!((toolchain.source, toolchain.version.as_str()), (ToolchainSource::Host, "rustc 1.95.0 (stable)"));
        // The real binaries in the sysroot, not the (possibly proxy) program that was asked.
        assert_eq!(toolchain.rustc, root.join("host/bin/rustc"));
        assert_eq!(toolchain.cargo, root.join("host/bin/cargo"));
    }

    #[test]
    fn nothing_found_lists_every_place_and_how_to_fix_it() {
        let _turn = SCRIPTS.lock().unwrap_or_else(|p| p.into_inner());
        let root = scratch("none");
        let message = found(&places(&root, Some(false), None, Some(false))).unwrap_err();
        assert!(message.contains("Debian rustc-web") && message.contains("rustc 1.96.0 (debian) has no library sources"), "{message}");
        assert!(message.contains("`apt-get install rust-web-src` adds them"), "{message}");
        assert!(message.contains("rustup nightly: ") && message.contains("is not installed"), "{message}");
        assert!(message.contains("the host toolchain") && message.contains("rustc 1.95.0 (stable) has no library sources"), "{message}");
        assert!(message.contains("`rustup component add rust-src` adds them"), "{message}");
        assert!(message.contains("sudo apt-get install rustc-web cargo-web rust-web-src"), "{message}");
        // No rustup and no host rustc at all: each still named.
        let mut bare = places(&root, None, None, None);
        bare.rustup = root.join("no-rustup").into_os_string();
        let message = found(&bare).unwrap_err();
        assert!(message.contains("Debian rustc-web") && message.contains("not installed"), "{message}");
        assert!(message.contains("rustup nightly: could not run"), "{message}");
        assert!(message.contains("the host toolchain") && message.contains("could not run"), "{message}");
    }
}
