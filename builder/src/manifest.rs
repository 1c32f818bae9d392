//! The little the builder reads from a kernel crate's `Cargo.toml`: its library's crate name,
//! and whether it renames a crate the code `#[kernel]` generates names (G19R-1).

use std::path::Path;

use crate::BuildError;

/// The crate name of the library in the `Cargo.toml` at `manifest`: `[lib] name` if given, else `[package] name`
/// with `-` replaced by `_` (cargo's rule). A minimal reader: the first `name = "..."` line of
/// each table.
pub fn lib_crate_name(manifest: &Path) -> Result<String, BuildError> {
    let (package, lib) = names(manifest)?;
    lib.or(package.map(|p| p.replace('-', "_"))).ok_or_else(|| BuildError::NotACrate { manifest: manifest.to_path_buf() })
}

/// The `[package] name` of the `Cargo.toml` at `manifest`, if it has one.
pub fn package_name(manifest: &Path) -> Result<Option<String>, BuildError> {
    Ok(names(manifest)?.0)
}

/// The first `name = "..."` of the `[package]` and `[lib]` tables.
fn names(manifest: &Path) -> Result<(Option<String>, Option<String>), BuildError> {
    let text = std::fs::read_to_string(manifest).map_err(|e| BuildError::Io { what: format!("reading {}", manifest.display()), source: e })?;
    let (mut package, mut lib) = (None, None);
    let mut table = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            table = line.to_string();
        } else if let Some(value) = line.strip_prefix("name").map(str::trim_start).and_then(|v| v.strip_prefix('=')) {
            let value = value.trim().trim_matches('"').to_string();
            match table.as_str() {
                "[package]" if package.is_none() => package = Some(value),
                "[lib]" if lib.is_none() => lib = Some(value),
                _ => {}
            }
        }
    }
    Ok((package, lib))
}

/// The extern names the code `#[kernel]` generates resolves through absolute paths
/// (`::core::..`, `::ferrocuda_device::__private::..`, `::ferrocuda_host::__private::..`), with
/// the package each must be (`None`: a crate of the toolchain, never a Cargo dependency).
const GENERATED_PATHS: &[(&str, Option<&str>)] = &[
    ("core", None),
    ("std", None),
    ("alloc", None),
    ("ferrocuda_device", Some("ferrocuda-device")),
    ("ferrocuda_host", Some("ferrocuda-host")),
    ("ferrocuda_types", Some("ferrocuda-types")),
    ("ferrocuda", Some("ferrocuda")),
];

/// Refuses a kernel crate that makes one of the names `#[kernel]`'s generated code resolves
/// ([`GENERATED_PATHS`]) another crate: a dependency of that name (Cargo's `package = ".."`
/// rename, or a dependency called `core`/`std`/`alloc`), or an `extern crate x as name;` in its
/// sources (G19R-1, audit 2026-11-28g: `ferrocuda_device = { package = "shim" }`, a re-export
/// with its own `__private::key_of`, switched the first launch's type check off). Defence in
/// depth: the device entry's by-value parameters no longer rest on those tables (the device
/// crate's `by_value`), and the launches' checks rest on the host crate's types.
///
/// A minimal reader, as [`lib_crate_name`]: `key = ..` lines of `[dependencies]` and
/// `[target.*.dependencies]` tables (and `[dependencies.key]` tables), the `package = ".."`
/// in them; `extern crate` items found as text in `.rs` files under `src/`. What it cannot see:
/// an `extern crate` written by a macro, and a package named like ours that is not ours.
pub fn check_generated_paths(manifest: &Path, crate_name: &str) -> Result<(), BuildError> {
    let text = std::fs::read_to_string(manifest).map_err(|e| BuildError::Io { what: format!("reading {}", manifest.display()), source: e })?;
    if let Some(problem) = renamed_dependency(&text) {
        return Err(BuildError::RenamedRuntime { manifest: manifest.to_path_buf(), problem });
    }
    let mut files = Vec::new();
    if let Some(dir) = manifest.parent() {
        rust_files(&dir.join("src"), &mut files);
    }
    for file in files {
        let Ok(source) = std::fs::read_to_string(&file) else { continue };
        if let Some(problem) = renaming_extern_crate(&source, crate_name) {
            return Err(BuildError::RenamedRuntime { manifest: manifest.to_path_buf(), problem: format!("{}: {problem}", file.display()) });
        }
    }
    Ok(())
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The first dependency of `manifest_text` that gives a [`GENERATED_PATHS`] name to another
/// package, as a sentence.
fn renamed_dependency(manifest_text: &str) -> Option<String> {
    let unquote = |s: &str| s.trim().trim_matches('"').trim_matches('\'').to_string();
    let package_in = |value: &str| {
        let at = value.find("package")?;
        let rest = value[at + "package".len()..].trim_start().strip_prefix('=')?.trim_start();
        let rest = rest.strip_prefix('"')?;
        Some(rest[..rest.find('"')?].to_string())
    };
    let judge = |key: &str, package: Option<String>| -> Option<String> {
        let name = key.replace('-', "_");
        let (_, expected) = GENERATED_PATHS.iter().find(|(reserved, _)| *reserved == name)?;
        match (expected, package) {
            (None, _) => Some(format!("the dependency `{key}` takes the name of the toolchain's `{name}` crate")),
            (Some(expected), Some(package)) if package != *expected => Some(format!("the dependency `{key}` is the package `{package}`, not `{expected}`")),
            _ => None,
        }
    };
    // The dependency a `[dependencies.key]` table describes, and whether it named a package.
    let mut table_dependency: Option<(String, Option<String>)> = None;
    let mut in_dependencies = false;
    let mut found = None;
    let mut close = |table_dependency: &mut Option<(String, Option<String>)>| {
        if let Some((key, package)) = table_dependency.take()
            && found.is_none()
        {
            found = judge(&key, package);
        }
    };
    for line in manifest_text.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if line.starts_with('[') {
            close(&mut table_dependency);
            let header = line.trim_start_matches('[').trim_end_matches(']').trim();
            // `dependencies`, `target.<cfg>.dependencies`, or either with `.key` after.
            let (table, key) = match header.rfind("dependencies") {
                Some(at) => (&header[..at + "dependencies".len()], header[at + "dependencies".len()..].strip_prefix('.')),
                None => (header, None),
            };
            let is_dependencies = (table == "dependencies" || (table.starts_with("target.") && table.ends_with(".dependencies")))
                && !table.ends_with("dev-dependencies")
                && !table.ends_with("build-dependencies");
            in_dependencies = is_dependencies && key.is_none();
            if is_dependencies && let Some(key) = key {
                table_dependency = Some((unquote(key), None));
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let key = unquote(key);
        if let Some((_, package)) = table_dependency.as_mut() {
            if key == "package" {
                *package = Some(unquote(value));
            }
        } else if in_dependencies && let Some(problem) = judge(&key, package_in(value)) {
            return Some(problem);
        }
    }
    close(&mut table_dependency);
    found
}

/// The first `extern crate x as name;` in `source` that makes a [`GENERATED_PATHS`] name
/// another crate (`extern crate self as name;` is allowed for the crate's own name only), as
/// a sentence.
fn renaming_extern_crate(source: &str, crate_name: &str) -> Option<String> {
    let mut rest = source;
    while let Some(at) = rest.find("extern crate") {
        rest = &rest[at + "extern crate".len()..];
        let item = rest.split(';').next().unwrap_or("");
        let words: Vec<&str> = item.split_whitespace().collect();
        // `r#core` is the name `core` (session 21).
        let (name, alias) = match words.as_slice() {
            [name, "as", alias] => (name.trim_start_matches("r#"), alias.trim_start_matches("r#")),
            _ => continue,
        };
        let reserved = GENERATED_PATHS.iter().any(|(reserved, _)| *reserved == alias);
        if reserved && name != alias && !(name == "self" && alias == crate_name) {
            return Some(format!("`extern crate {name} as {alias};` makes `::{alias}` another crate"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crate_name_is_the_lib_name_or_the_package_name() {
        let dir = std::env::temp_dir().join(format!("ferrocuda-pkgname-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let manifest = dir.join("Cargo.toml");
        std::fs::write(&manifest, "[dependencies]\nname = \"not_this\"\n[package]\nversion = \"1.0.0\"\nname = \"my-kernels\"\n").unwrap();
        assert_eq!(lib_crate_name(&manifest).unwrap(), "my_kernels");
        std::fs::write(&manifest, "[package]\nname = \"ferrocuda-main\"\n[lib]\nname = \"gpu_kernels\"\npath = \"gpu-kernels/src/lib.rs\"\n").unwrap();
        assert_eq!(lib_crate_name(&manifest).unwrap(), "gpu_kernels");
        std::fs::write(&manifest, "[workspace]\n").unwrap();
        assert!(matches!(lib_crate_name(&manifest), Err(BuildError::NotACrate { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// G19R-1 (audit 2026-11-28g): the repro's rename (`ferrocuda_device` as a shim package) is
    /// refused, in each form Cargo accepts, and so are `core` dependencies and `extern crate ..
    /// as ferrocuda_device;`; the workspace's own forms pass.
    #[test]
    fn g19r_1_kernel_crates_that_rename_the_generated_paths_are_refused() {
        let repro = "[dependencies]\n# the rename\nferrocuda_device = { package = \"g19r1-device-shim\", path = \"../g19r1-device-shim\" }\n\
                     bytemuck = { version = \"1\", features = [\"derive\"] }\n";
        let why = renamed_dependency(repro).expect("the repro's rename is refused");
        assert!(why.contains("`ferrocuda_device` is the package `g19r1-device-shim`, not `ferrocuda-device`"), "{why}");
        let target = "[target.'cfg(not(target_arch = \"nvptx64\"))'.dependencies]\nferrocuda-host = { package = \"my-host\", path = \"x\" }\n";
        assert!(renamed_dependency(target).is_some(), "a target table's rename too");
        let dotted = "[dependencies.ferrocuda_device]\npackage = \"shim\"\npath = \"x\"\n[dependencies]\nbytemuck = \"1\"\n";
        assert!(renamed_dependency(dotted).is_some(), "a [dependencies.key] table's rename too");
        assert!(renamed_dependency("[dependencies]\ncore = { path = \"mycore\" }\n").is_some(), "a dependency called core");
        let ours = "[dependencies]\nferrocuda-device = { path = \"../device\" }\nferrocuda_host = { package = \"ferrocuda-host\", path = \"../host\" }\n\
                    shim = { package = \"ferrocuda-device\", path = \"../device\" }\n[dev-dependencies]\nferrocuda_device = { package = \"other\", path = \"y\" }\n\
                    [build-dependencies]\nferrocuda-builder = { path = \"../builder\" }\n";
        assert_eq!(renamed_dependency(ours), None, "the real packages, and dev-dependencies (not in the kernel build)");
        let why = renaming_extern_crate("#![no_std]\nextern crate g19r1_device_shim as ferrocuda_device;\n", "k").expect("refused");
        assert!(why.contains("`::ferrocuda_device` another crate"), "{why}");
        assert!(renaming_extern_crate("extern crate self as core;", "k").is_some());
        // Session 21: a raw identifier is the same name.
        assert!(renaming_extern_crate("extern crate self as r#core;", "k").is_some());
        assert_eq!(renaming_extern_crate("extern crate self as ferrocuda_device;\nextern crate alloc;\nextern crate core as core;", "ferrocuda_device"), None);
        assert_eq!(renaming_extern_crate("extern crate foo as bar;", "k"), None);
    }

    /// G19R-1: the audit's repro crate itself (audit/2026-11-28g/g19r1-kernels) is refused,
    /// with an error that says what to do; the workspace's kernel crates pass.
    #[test]
    fn g19r_1_the_audit_repro_crate_is_refused_and_ours_pass() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let repro = root.join("audit/2026-11-28g/g19r1-kernels/Cargo.toml");
        let error = check_generated_paths(&repro, "g19r1_kernels").expect_err("the repro renames ferrocuda_device");
        let message = error.to_string();
        assert!(matches!(error, BuildError::RenamedRuntime { .. }), "{message}");
        assert!(message.contains("g19r1-device-shim") && message.contains("depend on the real packages under their own names"), "{message}");
        for (dir, name) in [("tests/kernels", "test_kernels"), ("kernels/device", "ferrocuda_kernels_device"), ("interop/kernels", "interop_kernels")] {
            let manifest = root.join(dir).join("Cargo.toml");
            if manifest.exists() {
                check_generated_paths(&manifest, name).unwrap_or_else(|e| panic!("{dir}: {e}"));
            }
        }
    }
}
