//! Session 22: the device build sets `RUSTC_BOOTSTRAP=1` (for `-Zbuild-std=core`), which opened
//! every nightly feature to a kernel crate; rustc now gets `-Zallow-features` with the features
//! kernel crates need (`KERNEL_CRATE_FEATURES`). A real device build of a fixture kernel crate
//! that enables another feature fails with rustc's refusal and the builder's note saying why;
//! the same crate with only the allowed features builds.
//!
//! Needs the device toolchain (rustup's stable with `rust-src`: the workspace's own build
//! needs it too). The first run builds `core` for nvptx64 (minutes); the target directory is
//! shared between runs.
//!
//! Run: `cargo test --release -p ferrocuda-builder --test device_features`.

use std::path::{Path, PathBuf};

use ferrocuda_builder::{BuildError, KERNEL_CRATE_FEATURES, KernelBuilder, strip_ansi};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A kernel crate with no dependencies whose crate attributes enable `features`.
fn fixture(name: &str, features: &str) -> PathBuf {
    let dir = workspace().join("target/test-scratch").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = format!("[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n[lib]\ncrate-type = [\"rlib\"]\n[workspace]\n");
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    let source = format!(
        "#![no_std]\n#![feature({features})]\n#[panic_handler]\nfn p(_: &core::panic::PanicInfo) -> ! {{ loop {{}} }}\n\n\
         #[unsafe(no_mangle)]\npub unsafe extern \"ptx-kernel\" fn k(out: *mut u32) {{\n    unsafe {{ *out = 7 }};\n}}\n"
    );
    std::fs::write(dir.join("src/lib.rs"), source).unwrap();
    dir
}

#[test]
fn s22_a_kernel_crate_feature_outside_the_list_is_refused() {
    // A target directory shared between runs (and with tests/device_build.rs) keeps `core` built once.
    let target = workspace().join("target/ferrocuda-test-device");
    let refused = fixture("s22-feature-refused", "abi_ptx, never_type");
    let error = KernelBuilder::new(&refused).out_dir(&refused).target_dir(&target).build().unwrap_err();
    let message = strip_ansi(&error.to_string());
    assert!(matches!(error, BuildError::Compile { .. }), "{message}");
    assert!(message.contains("the feature `never_type` is not in the list of allowed features"), "rustc's refusal is missing:\n{message}");
    assert!(message.contains("KERNEL_CRATE_FEATURES") && message.contains("RUSTC_BOOTSTRAP=1"), "the builder's note is missing:\n{message}");
    // The control: the allowed features alone build.
    let allowed = fixture("s22-feature-allowed", &KERNEL_CRATE_FEATURES.join(", "));
    if let Err(error) = KernelBuilder::new(&allowed).out_dir(&allowed).target_dir(&target).build() {
        panic!("a kernel crate with only the allowed features failed: {}", strip_ansi(&error.to_string()));
    }
}
