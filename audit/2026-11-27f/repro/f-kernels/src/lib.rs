//! Audit 2026-11-27f kernels: safe code only (`#![forbid(unsafe_code)]`), built for sm_90.
#![forbid(unsafe_code)]
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![allow(missing_docs)]

use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::kernel;
use ferrocuda_device::named_barrier::NamedBarrier;
use ferrocuda_device::thread::thread_idx_x;
use ferrocuda_device::warp;

ferrocuda_device::embed_kernels!();

/// out[i] = value (a filler for the collectives cases).
#[kernel]
pub fn fill(value: u32, mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = value;
    }
}

/// Named barrier 4 with a count of `count` threads (a multiple of 32, checked by `new`).
/// Threads with `thread_idx_x() >= live` return first; the others `sync` and write 1.
/// F12 named-barrier cases:
/// - block 64, count 64, live 32: a whole warp exited. PTX `exit` releases only a barrier
///   "for all threads in the CTA" (no count), so a GPU hangs; what does the executor say?
/// - block 32, count 32, live 16: half a warp exited. PTX: `barrier` "causes executing thread
///   to wait for all non-exited threads from its warp and marks warps' arrival": the warp
///   counts whole, a GPU completes.
/// - block 48, count 64, live 48: a partial last warp (16 lanes) counts as a warp on a GPU.
#[kernel]
pub fn named_exit(count: u32, live: u32, mut out: DisjointSlice<u32>) {
    let t = thread_idx_x();
    if t >= live {
        return;
    }
    NamedBarrier::new(4, count).sync();
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 1 + warp::lane_id() * 0;
    }
}

/// Warp 0 `sync`s named barrier 4 with count 64; warp 1 `arrive`s on it with count `count1`.
/// Two counts for one phase of one barrier.
#[kernel]
pub fn named_mixed(count1: u32, mut out: DisjointSlice<u32>) {
    let t = thread_idx_x();
    if t < 32 {
        NamedBarrier::new(4, 64).sync();
    } else {
        NamedBarrier::new(4, count1).arrive();
    }
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 1;
    }
}

/// Every thread spins until `flag[0] != 0`, which nobody sets: a kernel that never ends.
#[kernel]
pub fn spin_flag(flag: ferrocuda_device::global::AtomicSlice<u32>) {
    while flag.load(0) == 0 {}
}
