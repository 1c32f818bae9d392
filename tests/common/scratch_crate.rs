//! A throwaway kernel crate under `target/test-scratch/<name>` for tests that run a device
//! build or a host check of their own source: `src/lib.rs` is `source`, it depends on this
//! checkout's device library (plus `extra_dependencies`, Cargo.toml lines), and it gets the
//! workspace's lock file, so nothing is resolved anew.

use std::path::{Path, PathBuf};

/// Writes the crate (removing an earlier one of that name) and returns its directory.
pub fn kernel_crate(name: &str, source: &str, extra_dependencies: &str) -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = workspace.join("target/test-scratch").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n[lib]\ncrate-type = [\"rlib\"]\n\
             [dependencies]\nferrocuda-device = {{ path = \"{}\" }}\n{extra_dependencies}[workspace]\n",
            workspace.join("device").display()
        ),
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), source).unwrap();
    std::fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    dir
}
