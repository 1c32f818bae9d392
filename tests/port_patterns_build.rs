//! Host builds of a small kernel crate of a user's (issue 30): what rustc says about it on the
//! host, where the CPU executor runs the same source.

#[path = "common/scratch_crate.rs"]
mod scratch_crate;
use std::path::PathBuf;
use std::process::Command;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `cargo check` of a crate whose `src/lib.rs` is `source`, depending on this checkout's device
/// library; returns rustc's warnings and errors (short format).
fn check_host(name: &str, source: &str) -> String {
    let dir = scratch_crate::kernel_crate(name, source, "");
    let output = Command::new(env!("CARGO"))
        .args(["check", "--quiet", "--message-format", "short", "--offline"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", workspace().join("target/test-scratch/host-check"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{name} failed to build:\n{stderr}");
    stderr
}

const KERNEL: &str = "pub fn kernel_body(x: &[f32], mut y: DisjointSlice<f32>) {
    let i = unique_index();
    if let (Some(o), Some(&v)) = (y.get_mut(i), x.get(i.get())) {
        *o = v.sqrt() + v.exp();
    }
}
";

/// Regression p30_6: `use ferrocuda_device::math::DeviceFloat;` is an unused import on the
/// host (`f32`'s own `sqrt`/`exp` take precedence there), so every kernel crate that does math
/// warned in its host build. The prelude's glob import does not; the named import still does
/// (pinned, so that the docs' advice changes with it).
#[test]
fn p30_6_the_prelude_brings_device_float_without_a_host_warning() {
    let glob = check_host("p30-prelude-glob", &format!("use ferrocuda_device::prelude::*;\n{KERNEL}"));
    assert!(!glob.contains("warning"), "the prelude warned on the host:\n{glob}");
    let named = check_host(
        "p30-prelude-named",
        &format!("use ferrocuda_device::global::{{DisjointSlice, unique_index}};\nuse ferrocuda_device::math::DeviceFloat;\n{KERNEL}"),
    );
    assert!(
        named.contains("unused import: `ferrocuda_device::math::DeviceFloat`"),
        "rustc no longer warns about the named import; update device/src/prelude.rs's docs:\n{named}"
    );
}
