//! Every environment variable the builder reads goes through [`BuildEnv::var`], which also tells
//! cargo to rerun the build script when that variable changes; [`own_libraries`] sets the one
//! variable the builder changes for the device toolchain's programs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The environment as the builder sees it.
#[derive(Debug, Clone)]
pub struct BuildEnv {
    overrides: Option<BTreeMap<String, String>>,
    emit_rerun: bool,
}

impl BuildEnv {
    /// The process environment; prints `cargo:rerun-if-env-changed` for each variable read
    /// when running inside a build script (`OUT_DIR` set).
    pub fn process() -> Self {
        Self { overrides: None, emit_rerun: std::env::var_os("OUT_DIR").is_some() }
    }

    /// A fixed set of variables (for tests): nothing else is visible and nothing is printed.
    pub fn fixed<I, K, V>(vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let vars = vars.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        Self { overrides: Some(vars), emit_rerun: false }
    }

    /// Reads `name` (an empty value counts as unset).
    pub fn var(&self, name: &str) -> Option<String> {
        if self.emit_rerun {
            println!("cargo:rerun-if-env-changed={name}");
        }
        let value = match &self.overrides {
            Some(vars) => vars.get(name).cloned(),
            None => std::env::var(name).ok(),
        };
        value.filter(|v| !v.is_empty())
    }
}

/// Makes `command`, a program of the device toolchain whose rustc is `rustc`, load that
/// toolchain's own libraries. rustup's proxies put the *host* toolchain's `lib` first on
/// `LD_LIBRARY_PATH` for everything a build runs, and `LD_LIBRARY_PATH` wins over rustc's own
/// `$ORIGIN/../lib`: a device rustc of the same version in another place (a second toolchain
/// or a copy of one) then loads the host's `librustc_driver`, reports the host's sysroot and
/// builds with the host's library sources, or finds none (issue 28).
pub(crate) fn own_libraries<'c>(command: &'c mut Command, rustc: &Path) -> &'c mut Command {
    let Some(lib) = rustc.parent().and_then(Path::parent).map(|root| root.join("lib")) else { return command };
    let has_driver =
        std::fs::read_dir(&lib).map(|entries| entries.flatten().any(|e| e.file_name().to_string_lossy().starts_with("librustc_driver"))).unwrap_or(false);
    if has_driver {
        let mut paths = vec![lib];
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
            paths.extend(std::env::split_paths(&old));
        }
        if let Ok(joined) = std::env::join_paths(paths) {
            command.env("LD_LIBRARY_PATH", joined);
        }
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value `command` sets for `LD_LIBRARY_PATH`, if it sets one.
    fn library_path(command: &Command) -> Option<String> {
        command.get_envs().find(|(k, _)| *k == "LD_LIBRARY_PATH").and_then(|(_, v)| v).map(|v| v.to_string_lossy().into_owned())
    }

    /// Issue 28: with rustup's `LD_LIBRARY_PATH` (the host toolchain's `lib` first), a device
    /// rustc of the same version in another place loaded the host's `librustc_driver` and
    /// reported the host's sysroot, which had no rust-src.
    #[test]
    fn issue28_a_device_rustc_loads_its_own_driver_library_first() {
        let root = std::env::temp_dir().join(format!("ferrocuda-own-libraries-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("device/bin")).unwrap();
        std::fs::create_dir_all(root.join("device/lib")).unwrap();
        std::fs::write(root.join("device/lib/librustc_driver-0123abcd.so"), b"").unwrap();
        let rustc = root.join("device/bin/rustc");
        let mut command = Command::new(&rustc);
        own_libraries(&mut command, &rustc);
        let path = library_path(&command).expect("LD_LIBRARY_PATH set");
        let first = std::env::split_paths(&path).next().unwrap();
        assert_eq!(first, root.join("device/lib"), "{path}");
        // A rustc without its driver library beside it (a wrapper script): left alone.
        std::fs::create_dir_all(root.join("wrapper/bin")).unwrap();
        let wrapper = root.join("wrapper/bin/rustc");
        let mut command = Command::new(&wrapper);
        own_libraries(&mut command, &wrapper);
        assert_eq!(library_path(&command), None);
        let _ = std::fs::remove_dir_all(&root);
    }
}
