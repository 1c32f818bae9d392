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

/// The audit's Q4 repro (2026-11-27b), safe code only: two functions called through a
/// function pointer chosen at run time, each calling the pointer again; and a kernel that
/// calls through `dyn` once, with no recursion.
const INDIRECT: &str = r#"#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
use ferrocuda_device::global::{DisjointSlice, unique_index};

/// A step of the recursion, called through a pointer.
#[derive(Clone, Copy)]
pub struct Step(pub fn(u32, u32, Step) -> u32);

#[inline(never)]
fn deep_a(n: u32, seed: u32, me: Step) -> u32 {
    let frame = core::hint::black_box([seed.wrapping_add(n); 32]);
    if n == 0 { frame[3] } else { (me.0)(n - 1, frame[(n % 32) as usize], me).wrapping_add(frame[7]) }
}

#[inline(never)]
fn deep_b(n: u32, seed: u32, me: Step) -> u32 {
    let frame = core::hint::black_box([seed.wrapping_mul(3).wrapping_add(n); 32]);
    if n == 0 { frame[5] } else { (me.0)(n - 1, frame[(n % 32) as usize], me).wrapping_add(frame[1]) }
}

/// `out[i] = deep(depth, i)` through a pointer picked at run time.
#[ferrocuda_device::kernel]
pub fn fnptr_recurse(depth: u32, pick: u32, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let table = [Step(deep_a), Step(deep_b)];
    let step = core::hint::black_box(table[(pick & 1) as usize]);
    let v = (step.0)(depth, i.get() as u32, step);
    if let Some(o) = out.get_mut(i) {
        *o = v;
    }
}

pub trait Shape { fn area(&self, x: u32) -> u32; }
pub struct Square;
pub struct Big;
impl Shape for Square { #[inline(never)] fn area(&self, x: u32) -> u32 { x * x } }
impl Shape for Big {
    #[inline(never)]
    fn area(&self, x: u32) -> u32 { let f = core::hint::black_box([x; 200]); f[(x % 200) as usize] }
}

/// One call through `dyn Shape`, no recursion: its target's 800-byte frame is not in ptxas's stack size.
#[ferrocuda_device::kernel]
pub fn dyn_call(pick: u32, mut out: DisjointSlice<u32>) {
    let shapes: [&dyn Shape; 2] = [&Square, &Big];
    let shape = core::hint::black_box(shapes[(pick & 1) as usize]);
    let i = unique_index();
    let v = shape.area(i.get() as u32);
    if let Some(o) = out.get_mut(i) {
        *o = v;
    }
}
"#;

/// Q4 (audit 2026-11-27b): recursion through a function pointer passed the builder (it
/// followed direct calls only) and faulted an H100 at depth 10 with `CUDA_ERROR_ILLEGAL_ADDRESS`;
/// ptxas counted 24 bytes of stack for the kernel, leaving the 176-byte frames called through
/// the pointer out. The builder now follows indirect calls to every address-taken function of
/// the call's shape: the recursion is refused by name, and so is a non-recursive `dyn` call
/// whose target's frames ptxas does not count; both can be vouched for with `allow_recursion`.
/// (A crate that does not build has no CPU launcher either: the executor cannot disagree.)
#[test]
fn q4_recursion_through_a_function_pointer_and_a_dyn_call_are_refused_at_build_time() {
    let dir = scratch_crate::kernel_crate("q4-indirect", INDIRECT, "");
    let target = workspace().join("target/ferrocuda-test-device");
    let error = KernelBuilder::new(&dir).arch(Arch::SM_90).out_dir(&dir).target_dir(&target).build().unwrap_err();
    let message = error.to_string();
    let BuildError::RecursiveKernel { kernel, chain, through_indirect_call, .. } = &error else { panic!("expected RecursiveKernel, got: {message}") };
    assert_eq!(kernel, "fnptr_recurse", "{message}");
    assert!(*through_indirect_call, "{message}");
    assert!(chain.iter().any(|f| f.contains("deep_a") || f.contains("deep_b")), "{chain:?}");
    assert!(message.contains("through a call by function pointer or `dyn` method"), "{message}");
    assert!(message.contains("allow_recursion(\"fnptr_recurse\")") && message.contains("Limit::StackSize"), "{message}");

    // The recursive kernel vouched for: the `dyn` call is the next refusal.
    // SAFETY: this test never launches the kernels.
    let error = unsafe { KernelBuilder::new(&dir).arch(Arch::SM_90).out_dir(&dir).target_dir(&target).allow_recursion("fnptr_recurse") }.build().unwrap_err();
    let message = error.to_string();
    let BuildError::IndirectCall { kernel, targets, .. } = &error else { panic!("expected IndirectCall, got: {message}") };
    assert_eq!(kernel, "dyn_call", "{message}");
    assert!(targets.iter().any(|t| t.contains("Big")) && targets.iter().any(|t| t.contains("Square")), "{targets:?}");
    assert!(message.contains("kernel `dyn_call` calls through a function pointer or a `dyn` method"), "{message}");
    assert!(message.contains("1 KiB per thread by default") && message.contains("allow_recursion(\"dyn_call\")"), "{message}");

    // Both vouched for, the crate builds.
    // SAFETY: as above.
    let artifacts =
        unsafe { KernelBuilder::new(&dir).arch(Arch::SM_90).out_dir(&dir).target_dir(&target).allow_recursion("fnptr_recurse").allow_recursion("dyn_call") }
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
    let ptx = std::fs::read_to_string(&artifacts.ptx[0].1).unwrap();
    assert!(ptx.contains(".entry fnptr_recurse(") && ptx.contains(".entry dyn_call("));
    // Both marked, so that a fault after their launch names the stack limit (Error::StackLimitFault).
    assert!(ptx.contains("__ferrocuda_unbounded_stack_fnptr_recurse") && ptx.contains("__ferrocuda_unbounded_stack_dyn_call"), "marks missing");
    assert!(!ptx.contains("__ferrocuda_unbounded_stack_flat"));
}
