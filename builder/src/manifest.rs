//! The little the builder reads from a kernel crate's `Cargo.toml`: its library's crate name.

use std::path::Path;

use crate::BuildError;

/// The crate name of the library in the `Cargo.toml` at `manifest`: `[lib] name` if given, else `[package] name`
/// with `-` replaced by `_` (cargo's rule). A minimal reader: the first `name = "..."` line of
/// each table.
pub fn lib_crate_name(manifest: &Path) -> Result<String, BuildError> {
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
    lib.or(package.map(|p| p.replace('-', "_"))).ok_or_else(|| BuildError::NotACrate { manifest: manifest.to_path_buf() })
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
}
