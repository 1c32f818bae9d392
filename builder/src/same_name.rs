//! Two packages of one name built into one target directory (session 24).
//!
//! Cargo names a package's build directory by a hash of its name, version and path relative to
//! its workspace root, so two packages called `my-kernels`, each the root of its own workspace
//! (the template copied twice, two checkouts of one project), built with one
//! `CARGO_TARGET_DIR`, share a build directory: cargo can then call the second's build script
//! up to date and run the first's compiled build script for it. A build script that names its
//! crate with `env!("CARGO_MANIFEST_DIR")` then builds the *first* crate's kernels into the
//! second's output. The builder sees it: cargo sets `CARGO_MANIFEST_DIR` for the running
//! build script too, and it names the second crate.

use std::path::Path;

use crate::{BuildError, manifest};

/// Refuses a build script compiled for `crate_dir` that cargo is running for the package in
/// `running` (the run-time `CARGO_MANIFEST_DIR`) when the two are different packages of one
/// name, or `crate_dir` is gone. A build script that builds *another* crate (a host crate's
/// `build.rs` compiling `../kernels`) passes: the names differ.
pub(crate) fn check_build_script_crate(crate_dir: &Path, running: &Path) -> Result<(), BuildError> {
    let canonical = |dir: &Path| dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let (wanted, running) = (canonical(crate_dir), canonical(running));
    if wanted == running {
        return Ok(());
    }
    let running_manifest = running.join("Cargo.toml");
    let Ok(Some(running_name)) = manifest::package_name(&running_manifest) else { return Ok(()) };
    let wanted_manifest = wanted.join("Cargo.toml");
    let same_name = match manifest::package_name(&wanted_manifest) {
        Ok(name) => name.as_deref() == Some(running_name.as_str()),
        // Gone: the build script was compiled for a crate that no longer exists.
        Err(_) => !wanted_manifest.exists(),
    };
    if same_name {
        return Err(BuildError::BuildScriptOfAnotherCrate { package: running_name, compiled_for: wanted, running_for: running });
    }
    Ok(())
}

/// What [`BuildError::BuildScriptOfAnotherCrate`] says.
pub(crate) fn explain(package: &str, compiled_for: &Path, running_for: &Path) -> String {
    format!(
        "this build script was compiled for the kernel crate in {} but cargo ran it for the package `{package}` in {}: two packages \
         named `{package}` are built into one target directory, and cargo gives both one build directory (it takes one's build \
         script, and possibly its library, for the other's). Give one of them another name, or build them into different target \
         directories (CARGO_TARGET_DIR)",
        compiled_for.display(),
        running_for.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn package(root: &Path, dir: &str, name: &str) -> PathBuf {
        let dir = root.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Cargo.toml"), format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\n")).unwrap();
        dir
    }

    /// Reproduced on this machine: the template copied to two directories, the first built and
    /// deleted, the second built into the same target directory ran the first's build script,
    /// which failed reading the deleted `Cargo.toml`; with both present it would have built the
    /// first's kernels into the second's output.
    #[test]
    fn s24_a_build_script_run_for_another_package_of_its_name_is_refused() {
        let root = std::env::temp_dir().join(format!("ferrocuda-same-name-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (a, b) = (package(&root, "a/my-kernels", "my-kernels"), package(&root, "b/my-kernels", "my-kernels"));
        let host = package(&root, "app", "app");
        assert!(check_build_script_crate(&a, &a).is_ok(), "its own crate");
        assert!(check_build_script_crate(&a, &host).is_ok(), "a build script building another crate");
        let error = check_build_script_crate(&a, &b).unwrap_err();
        let message = error.to_string();
        assert!(matches!(&error, BuildError::BuildScriptOfAnotherCrate { package, .. } if package == "my-kernels"), "{message}");
        assert!(message.contains("two packages named `my-kernels`") && message.contains("CARGO_TARGET_DIR"), "{message}");
        std::fs::remove_dir_all(&a).unwrap();
        assert!(check_build_script_crate(&a, &b).is_err(), "compiled for a crate that is gone");
        let _ = std::fs::remove_dir_all(&root);
    }
}
