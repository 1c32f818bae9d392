//! G19R-3 (audit 2026-11-28g): an ordinary safe kernel whose crate depends on
//! `g19r3-host-shim` under the name `ferrocuda_host`. Its launcher, `fill::launch`, is the one
//! `#[kernel]` generates; the shim makes every slice argument a real `SliceArg` with the address
//! and length of its choosing (`g19r3_host_shim::forge`). No `unsafe` in this crate.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::kernel;

/// `out[i] = 0xBAD` for every thread's own element.
#[kernel]
pub fn fill(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 0xBAD;
    }
}

ferrocuda_device::embed_kernels!();

/// The shim's forger, for the test.
#[cfg(not(target_arch = "nvptx64"))]
pub use ferrocuda_host::forge;
