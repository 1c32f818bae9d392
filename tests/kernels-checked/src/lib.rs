//! One kernel whose integer arithmetic overflows, in a crate whose host and device builds both
//! check overflow (tests/overflow_checks.rs; audit 2026-11-27b, Q11).
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::kernel;

ferrocuda_device::embed_kernels!();

/// mode 0: `x + 1`; 1: `x * 3`. Overflow panics on the GPU and on the CPU executor alike.
#[kernel]
pub fn checked_int_ops(mode: u32, x: &[u32], mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let Some(&v) = x.get(i.get()) else { return };
    let r = if mode == 0 { v + 1 } else { v * 3 };
    if let Some(o) = out.get_mut(i) {
        *o = r;
    }
}
