//! Audit 2026-11-27e kernels: safe code only (`#![forbid(unsafe_code)]`), built for sm_90.
#![forbid(unsafe_code)]
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![allow(missing_docs)]

use ferrocuda_device::global::{AtomicSlice, DisjointSlice, unique_index};
use ferrocuda_device::kernel;
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::thread_idx_x;
use ferrocuda_device::{cluster, grid_dependency, warp, warpgroup};

ferrocuda_device::embed_kernels!();

/// Every thread spins until `flag[0] != 0`, which nobody sets: a kernel that never ends.
#[kernel]
pub fn spin_flag(flag: AtomicSlice<u32>) {
    while flag.load(0) == 0 {}
}

/// out[i] = value.
#[kernel]
pub fn fill(value: u32, mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = value;
    }
}

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
        *o = if h == 0xdead_beef { value + 1 } else { value };
    }
}

/// `warpgroup::elect_one()` (safe; `elect.sync _|p, 0xffffffff`) with part of the warp absent.
/// out[t] = 1 elected, 0 not elected, 2 a lane that did not call it (it did something else),
/// untouched (host fills 0xffffffff) for a lane that returned.
/// mode 0: every lane calls it (control). mode 1: lanes 16..31 return first. mode 2: lanes
/// 16..31 go to a block barrier instead, lanes 0..15 call elect_one then the barrier.
/// mode 3: every lane calls it (launch with a partial last warp, e.g. 48 threads).
#[kernel]
pub fn elect_divergent(mode: u32, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let lane = warp::lane_id();
    match mode {
        1 => {
            if lane >= 16 {
                return;
            }
            let e = warpgroup::elect_one() as u32;
            if let Some(o) = out.get_mut(i) {
                *o = e;
            }
        }
        2 => {
            if lane >= 16 {
                if let Some(o) = out.get_mut(i) {
                    *o = 2;
                }
                sync_threads();
            } else {
                let e = warpgroup::elect_one() as u32;
                if let Some(o) = out.get_mut(i) {
                    *o = e;
                }
                sync_threads();
            }
        }
        _ => {
            let e = warpgroup::elect_one() as u32;
            if let Some(o) = out.get_mut(i) {
                *o = e;
            }
        }
    }
}

/// Clusters of 2 blocks; threads `>= live` of each block return, the others meet at
/// `cluster::sync()` (safe), then write the cluster size.
#[kernel(cluster_dims(2))]
pub fn cluster_exit_sync(live: u32, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    if thread_idx_x() >= live {
        return;
    }
    cluster::sync();
    if let Some(o) = out.get_mut(i) {
        *o = 100 + cluster::size();
    }
}

/// `cluster::sync()`, `cluster::size()`, `block_rank()` in a kernel without cluster dims,
/// and the grid-dependency calls (safe) in a launch without programmatic dependent launch.
#[kernel]
pub fn plain_cluster_pdl(mut out: DisjointSlice<u32>) {
    grid_dependency::wait_for_prerequisites();
    cluster::sync();
    grid_dependency::launch_dependents();
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 1000 * cluster::size() + cluster::block_rank();
    }
}

/// Dynamic shared memory split at `mid` u32s, then a 16-byte vector store/load at the tail's
/// start (aligned only when `mid % 4 == 0`). out[t] = the tail's element 0 after the barrier.
#[kernel]
pub fn dyn_split(mid: u32, mut out: DisjointSlice<u32>) {
    let s = dynamic_shared::<u32>();
    let (_, tail) = s.split_at(mid as usize);
    if thread_idx_x() == 0 {
        tail.set_x4(0, [11, 12, 13, 14]);
    }
    sync_threads();
    let v = tail.get_x4(0)[0];
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}

/// Control for `elect_divergent` mode 2: the same divergence with `warp::shuffle` (a warp
/// collective the CPU executor tracks) instead of `elect_one`. out[t] = the shuffled value
/// (lanes 0..15), 2 (lanes 16..31).
#[kernel]
pub fn shuffle_divergent(mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let lane = warp::lane_id();
    if lane >= 16 {
        if let Some(o) = out.get_mut(i) {
            *o = 2;
        }
        sync_threads();
    } else {
        let v = warp::shuffle(lane + 100, 0);
        if let Some(o) = out.get_mut(i) {
            *o = v;
        }
        sync_threads();
    }
}
