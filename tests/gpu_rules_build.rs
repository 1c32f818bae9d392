//! P10 (audit 2026-11-27): a recursive kernel's stack depth is known only while it runs, and a
//! GPU thread's stack is fixed per context (1 KiB by default): the audit's safe recursion of
//! depth 10 faulted on an H100 (`CUDA_ERROR_ILLEGAL_ADDRESS`, nothing naming the stack) and the
//! build said nothing. The builder now refuses such a kernel, naming it and its call chain,
//! unless the build script vouches for it with the `unsafe` `KernelBuilder::allow_recursion`.
//! (A deep call chain without recursion is bounded by ptxas and given its stack by the driver:
//! tests/gpu_rules.rs, `p10_a_deep_but_bounded_call_chain_runs_with_the_default_stack_limit`.)

#[path = "common/scratch_crate.rs"]
mod scratch_crate;
use std::path::PathBuf;

use ferrocuda_builder::{Arch, BuildError, KernelBuilder};

/// The audit's repro, safe code only.
const KERNELS: &str = r#"#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
use ferrocuda_device::global::{DisjointSlice, unique_index};

#[inline(never)]
fn deep(n: u32, seed: u32) -> u32 {
    let frame = [seed.wrapping_add(n); 32];
    let frame = core::hint::black_box(frame);
    if n == 0 { frame[3] } else { deep(n - 1, frame[(n % 32) as usize]).wrapping_add(frame[7]) }
}

/// `out[i] = deep(depth, i)`.
#[ferrocuda_device::kernel]
pub fn recurse(depth: u32, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let v = deep(depth, i.get() as u32);
    if let Some(o) = out.get_mut(i) {
        *o = v;
    }
}

/// No recursion.
#[ferrocuda_device::kernel]
pub fn flat(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 1;
    }
}
"#;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A kernel crate `name` holding [`KERNELS`], depending on this checkout's device library.
fn kernel_crate(name: &str) -> PathBuf {
    scratch_crate::kernel_crate(name, KERNELS, "")
}

#[test]
fn p10_a_recursive_kernel_is_refused_at_build_time_naming_the_kernel_and_the_stack() {
    let dir = kernel_crate("p10-recursion");
    let target = workspace().join("target/ferrocuda-test-device");
    let error = KernelBuilder::new(&dir).arch(Arch::SM_90).out_dir(&dir).target_dir(&target).build().unwrap_err();
    let message = error.to_string();
    let BuildError::RecursiveKernel { kernel, chain, cycle_start, .. } = &error else { panic!("expected RecursiveKernel, got: {message}") };
    assert_eq!(kernel, "recurse");
    assert_eq!(chain.len(), 2, "{chain:?}");
    assert!(cycle_start.contains("deep"), "{cycle_start}");
    assert!(message.contains("kernel `recurse` is recursive"), "{message}");
    assert!(message.contains("1 KiB by default") && message.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{message}");
    assert!(message.contains("allow_recursion(\"recurse\")") && message.contains("Limit::StackSize"), "{message}");

    // Vouched for, it builds (its `flat` neighbour was never the problem).
    // SAFETY: this test never launches `recurse`.
    let artifacts = unsafe { KernelBuilder::new(&dir).arch(Arch::SM_90).out_dir(&dir).target_dir(&target).allow_recursion("recurse") }
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let ptx = std::fs::read_to_string(&artifacts.ptx[0].1).unwrap();
    assert!(ptx.contains(".entry recurse(") && ptx.contains(".entry flat("));
    assert_eq!(ferrocuda_builder::recursive_kernels(&ptx).len(), 1, "the PTX is the recursive one");
}
