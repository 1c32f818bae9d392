//! Audit 2026-11-27d kernels: safe code only.
#![forbid(unsafe_code)]
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![allow(missing_docs)]

use ferrocuda_device::global::{DisjointSlice, PerBlock, once_per_block, unique_index};
use ferrocuda_device::kernel;
use ferrocuda_device::thread::{block_idx_x, block_idx_y};

ferrocuda_device::embed_kernels!();

/// Each thread spins `iters` rounds of an LCG, then writes `value` (a long-running writer).
#[kernel]
pub fn spin_fill(iters: u32, value: u32, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let mut h = i.get() as u32;
    let mut n = 0u32;
    while n < iters {
        h = h.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        n += 1;
    }
    if let Some(o) = out.get_mut(i) {
        // `h` is never 0xdead_beef in practice; the compare keeps the loop alive.
        *o = if h == 0xdead_beef { value + 1 } else { value };
    }
}

/// out[i] = x[i].
#[kernel]
pub fn copy_u32(x: &[u32], mut out: DisjointSlice<u32>) {
    let i = unique_index();
    if let (Some(o), Some(v)) = (out.get_mut(i), x.get(i.get())) {
        *o = *v;
    }
}

/// out[i] = value.
#[kernel]
pub fn fill(value: u32, mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = value;
    }
}

/// out[block] = 1000 * block_idx.y + block_idx.x, once per block.
#[kernel]
pub fn per_block_xy(mut out: PerBlock<u32>) {
    if let Some(b) = once_per_block()
        && let Some(o) = out.get_mut(b)
    {
        *o = 1000 * block_idx_y() + block_idx_x();
    }
}

/// Warp operations in the partial last warp of a block of 48 threads (lanes 16..31 of warp 1
/// never exist). `mode`: 0 `shuffle_xor(t, 16)`, 1 `ballot(true)`, 2 `active_mask()`,
/// 3 `reduce_sum(1)`, 4 `shuffle(t, 0)`, 5 `all(true)`, 6 `match_any(5)`, 7 `shuffle_down(t, 8)`.
#[kernel]
pub fn partial_warp(mode: u32, mut out: DisjointSlice<u32>) {
    use ferrocuda_device::warp;
    let i = unique_index();
    let t = i.get() as u32;
    let v = match mode {
        0 => warp::shuffle_xor(t, 16),
        1 => warp::ballot(true),
        2 => warp::active_mask(),
        3 => warp::reduce_sum(1u32),
        4 => warp::shuffle(t, 0),
        5 => warp::all(true) as u32,
        6 => warp::match_any(5),
        _ => warp::shuffle_down(t, 8),
    };
    if let Some(o) = out.get_mut(i) {
        *o = v;
    }
}

/// Barriers in a block of 48 threads: mode 0 `sync_warp(u32::MAX)` (lanes 48..63 of the
/// mask never exist), mode 1 `sync_threads_count(true)`, mode 2 `sync_threads_count(t odd)`.
#[kernel]
pub fn partial_sync(mode: u32, mut out: DisjointSlice<u32>) {
    use ferrocuda_device::sync::{sync_threads_count, sync_warp};
    let i = unique_index();
    let t = i.get() as u32;
    let v = match mode {
        0 => {
            sync_warp(u32::MAX);
            1
        }
        1 => sync_threads_count(true),
        _ => sync_threads_count(t % 2 == 1),
    };
    if let Some(o) = out.get_mut(i) {
        *o = v;
    }
}
