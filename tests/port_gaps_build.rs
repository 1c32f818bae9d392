//! Device builds of a small kernel crate of a user's (issue 23): an instruction the target
//! architecture lacks is refused at compile time with the architecture it needs, the same
//! crate builds and assembles for that architecture, and `KernelBuilder::fast_math(true)`
//! turns `f32` math into the approximate instructions, as nvcc's `--use_fast_math` does.

#[path = "common/ptx.rs"]
mod ptx_text;
#[path = "common/scratch_crate.rs"]
mod scratch_crate;
use ptx_text::entry_body;

use std::path::PathBuf;

use ferrocuda_builder::{Arch, BuildError, KernelBuilder};

const KERNELS: &str = r#"#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
use ferrocuda_device::cache::{self, CachePolicy};
use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::math::{DeviceFloat, FastMath};

/// tanh.approx (sm_75) and an L2 evict-last policy (sm_80).
#[ferrocuda_device::kernel]
pub fn newer_instructions(x: &[f32], mut y: DisjointSlice<f32>) {
    let i = unique_index();
    if let (Some(out), Some(v)) = (y.get_mut(i), x.get(i.get())) {
        *out = cache::load_with_policy(v, CachePolicy::evict_last()).fast_tanh();
    }
}

/// Precise by default, approximate under `fast_math(true)`.
#[ferrocuda_device::kernel]
pub fn math_mode(x: &[f32], z: &[f32], mut y: DisjointSlice<f32>) {
    let i = unique_index();
    if let (Some(out), Some(&v), Some(&w)) = (y.get_mut(i), x.get(i.get()), z.get(i.get())) {
        *out = v.sqrt() + v.exp() + v / w + v.sin();
    }
}
"#;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A kernel crate `name` holding [`KERNELS`], depending on this checkout's device library.
fn kernel_crate(name: &str) -> PathBuf {
    kernel_crate_with(name, KERNELS)
}

/// A kernel crate `name` holding `source`.
fn kernel_crate_with(name: &str, source: &str) -> PathBuf {
    scratch_crate::kernel_crate(name, source, "")
}

/// Regression (issue 23): on sm_70, `fast_tanh` silently became the precise `tanh`, and an
/// instruction the target lacks surfaced (if at all) as a ptxas error suggesting another
/// ptxas. Now the call does not compile, and the message names the architecture it needs.
#[test]
fn n23_instructions_newer_than_the_target_are_refused_naming_the_architecture() {
    let dir = kernel_crate("n23-refused");
    let target = workspace().join("target/ferrocuda-test-device");
    let error = KernelBuilder::new(&dir).arch(Arch::SM_70).out_dir(&dir).target_dir(&target).build().unwrap_err();
    let message = ferrocuda_builder::strip_ansi(&error.to_string());
    assert!(matches!(error, BuildError::Compile { .. }), "{message}");
    assert!(message.contains("this needs sm_75 or newer, and this device build targets an older GPU"), "{message}");
    assert!(message.contains("required by a bound in `fast_tanh`"), "{message}");
    assert!(message.contains("this needs sm_80 or newer"), "{message}");
    assert!(message.contains("required by a bound in `CachePolicy::evict_last`"), "{message}");
    assert!(message.contains("#[cfg(ferrocuda_sm = \"80\")]"), "{message}");
    assert!(message.contains("src/lib.rs:11"), "the user's line: {message}");
}

/// The same crate for sm_80, with `fast_math(true)`: it builds, `ptxas` accepts it (the
/// module declares the pinned ISA 7.8, which `tanh.approx` and `L2::cache_hint` need), and
/// `sqrt`, `exp`, `sin` and `/` are the approximate instructions.
#[test]
fn fast_math_builds_approximate_instructions_and_the_newer_instructions_assemble_for_sm80() {
    let dir = kernel_crate("n23-fast-math");
    let target = workspace().join("target/ferrocuda-test-device");
    let artifacts = KernelBuilder::new(&dir).arch(Arch::SM_80).fast_math(true).out_dir(&dir).target_dir(&target).build().unwrap_or_else(|e| panic!("{e}"));
    let ptx = std::fs::read_to_string(&artifacts.ptx[0].1).unwrap();
    assert!(ptx.contains(".version 7.8\n.target sm_80"), "{}", &ptx[..400.min(ptx.len())]);
    let newer = entry_body(&ptx, "newer_instructions");
    for op in ["tanh.approx.f32", "createpolicy.fractional.L2::evict_last.b64", "ld.global.L2::cache_hint.b32"] {
        assert!(newer.contains(op), "{op}:\n{newer}");
    }
    let math = entry_body(&ptx, "math_mode");
    for op in ["sqrt.approx.ftz.f32", "ex2.approx.ftz.f32", "sin.approx.ftz.f32", "div.approx.ftz.f32"] {
        assert!(math.contains(op), "{op} under fast_math:\n{math}");
    }
    for precise in ["sqrt.rn.f32", "div.rn.f32", "div.approx.f32"] {
        assert!(!math.contains(precise), "{precise} under fast_math:\n{math}");
    }
    if ferrocuda_builder::find_ptxas(&ferrocuda_builder::BuildEnv::process()).is_some() {
        assert!(!artifacts.cubins.is_empty(), "ptxas is installed, so the sm_80 cubin was assembled");
    } else {
        eprintln!("SKIPPED the ptxas half: no ptxas");
    }
}

/// A kernel using `cluster` (sm_90) and one importing `cp_async` (sm_80).
const GATED: &str = r#"#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
use ferrocuda_device::cp_async;
use ferrocuda_device::global::{DisjointSlice, unique_index};

#[ferrocuda_device::kernel]
pub fn cluster_rank(mut y: DisjointSlice<u32>) {
    if let Some(out) = y.get_mut(unique_index()) {
        *out = ferrocuda_device::cluster::block_rank();
        cp_async::commit();
    }
}
"#;

/// Regression (issue 23): a module an older architecture lacks (`cluster`, `tma`,
/// `cp_async`, ...) failed with rustc's "could not find `cluster` in `ferrocuda_device`" and
/// nothing naming the architecture. The builder's error now ends with a note per module, naming
/// the architecture it needs and how to get it; the same crate builds for that architecture.
#[test]
fn n23_modules_newer_than_the_target_are_refused_naming_the_architecture() {
    let dir = kernel_crate_with("n23-gated-modules", GATED);
    let target = workspace().join("target/ferrocuda-test-device");
    let error = KernelBuilder::new(&dir).arch(Arch::SM_75).out_dir(&dir).target_dir(&target).build().unwrap_err();
    let message = ferrocuda_builder::strip_ansi(&error.to_string());
    assert!(matches!(error, BuildError::Compile { .. }), "{message}");
    assert!(message.contains("could not find `cluster` in `ferrocuda_device`"), "rustc's own error stays: {message}");
    assert!(message.contains("note: `ferrocuda_device::cluster` needs sm_90 or newer, and this device build targets sm_75"), "{message}");
    assert!(message.contains("note: `ferrocuda_device::cp_async` needs sm_80 or newer, and this device build targets sm_75"), "{message}");
    assert!(message.contains("KernelBuilder::arch(Arch::SM_90)") && message.contains("#[cfg(ferrocuda_sm = \"90\")]"), "{message}");
    KernelBuilder::new(&dir).arch(Arch::SM_90).out_dir(&dir).target_dir(&target).build().unwrap_or_else(|e| panic!("{e}"));
}
