//! Which source files a device build read, from the dep-info (`.d`) file cargo writes beside
//! the final artifact (`<target-dir>/<target>/<profile>/<crate>.d`, documented in the Cargo
//! book under "Build cache"). It lists the kernel crate's files and those of every local
//! dependency (the device library, the proc macros), so editing any of them rebuilds the PTX.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::BuildError;

/// What a dep-info file lists, minus what never changes under a user: the Rust library sources
/// (`library`, `sysroot`), registry crates (under `cargo_home`) and build outputs. Relative
/// paths (rustc's, or cargo's with `build.dep-info-basedir`) are resolved against the nearest
/// ancestor of `crate_dir` where they exist. `Ok(None)` when `file` does not exist.
pub(crate) fn read_dep_info(
    file: &Path,
    crate_dir: &Path,
    library: &Path,
    sysroot: &Path,
    cargo_home: Option<&Path>,
) -> Result<Option<BTreeSet<PathBuf>>, BuildError> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(BuildError::Io { what: format!("reading {}", file.display()), source: e }),
    };
    let crate_dir = crate_dir.canonicalize().unwrap_or_else(|_| crate_dir.to_path_buf());
    let resolve = |dep: PathBuf| -> Option<PathBuf> {
        if dep.is_absolute() {
            return dep.exists().then_some(dep);
        }
        crate_dir.ancestors().map(|root| root.join(&dep)).find(|candidate| candidate.exists())
    };
    let mut sources = BTreeSet::new();
    for line in text.lines() {
        let Some((_, deps)) = line.split_once(": ") else { continue };
        for dep in split_escaped(deps) {
            let Some(dep) = resolve(PathBuf::from(dep)) else { continue };
            let is_library = dep.starts_with(library) || dep.starts_with(sysroot);
            let is_registry = cargo_home.is_some_and(|home| dep.starts_with(home));
            let is_output = dep.components().any(|c| c.as_os_str() == "target");
            if !is_library && !is_registry && !is_output {
                sources.insert(dep);
            }
        }
    }
    Ok(Some(sources))
}

/// Splits a dep-info dependency list at unescaped spaces (`\ ` is a space inside a path).
fn split_escaped(list: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut current = String::new();
    let mut chars = list.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => current.push(chars.next().unwrap_or(' ')),
            ' ' | '\t' => {
                if !current.is_empty() {
                    paths.push(std::mem::take(&mut current));
                }
            }
            _ => current.push(c),
        }
    }
    if !current.is_empty() {
        paths.push(current);
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ferrocuda-depinfo-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Regression: rustc writes `.d` paths relative to the workspace root; they were dropped,
    /// so editing a kernel did not rebuild the PTX.
    #[test]
    fn dep_info_paths_relative_to_the_workspace_are_watched() {
        let root = scratch("relative");
        let (crate_dir, deps) = (root.join("kernels"), root.join("target/deps"));
        std::fs::create_dir_all(crate_dir.join("src")).unwrap();
        std::fs::create_dir_all(&deps).unwrap();
        std::fs::write(crate_dir.join("src/lib.rs"), "").unwrap();
        let file = deps.join("kernels.d");
        std::fs::write(&file, format!("{}/target/deps/kernels.s: kernels/src/lib.rs\n", root.display())).unwrap();
        let none = Path::new("/nonexistent-sysroot");
        let sources = read_dep_info(&file, &crate_dir, none, none, None).unwrap().unwrap();
        let expected = crate_dir.canonicalize().unwrap().join("src/lib.rs");
        assert_eq!(sources.into_iter().collect::<Vec<_>>(), vec![expected]);
    }

    #[test]
    fn library_registry_and_output_files_are_not_watched_and_escaped_spaces_are_kept() {
        let root = scratch("filters");
        for dir in ["sysroot/lib", "home/registry", "my crate/src", "target"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        for file in ["sysroot/lib/core.rs", "home/registry/dep.rs", "my crate/src/lib.rs", "target/gen.rs"] {
            std::fs::write(root.join(file), "").unwrap();
        }
        let r = root.display();
        let file = root.join("k.d");
        std::fs::write(
            &file,
            format!(
                "{r}/out.ptx: {r}/sysroot/lib/core.rs {r}/home/registry/dep.rs {r}/my\\ crate/src/lib.rs {r}/target/gen.rs\n\n{r}/my\\ crate/src/lib.rs:\n"
            ),
        )
        .unwrap();
        let sources =
            read_dep_info(&file, &root.join("my crate"), &root.join("sysroot/lib"), &root.join("sysroot"), Some(&root.join("home"))).unwrap().unwrap();
        assert_eq!(sources.into_iter().collect::<Vec<_>>(), vec![root.join("my crate/src/lib.rs")]);
    }

    #[test]
    fn a_missing_dep_info_file_is_none_not_an_error() {
        let none = Path::new("/nonexistent");
        assert!(read_dep_info(&scratch("missing").join("absent.d"), none, none, none, None).unwrap().is_none());
    }
}
