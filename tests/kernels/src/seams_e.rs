//! Kernels for the GPU twins of audit 2026-11-27e's E3 and E4 (`warpgroup::elect_one` and a
//! `cluster::sync()` after exited threads), sm_90 only (tests/gpu_rules.rs). Safe code only.

use ferrocuda_device::global::AtomicSlice;
use ferrocuda_device::kernel;
use ferrocuda_device::thread::thread_idx_x;

/// E4 (audit 2026-11-27e; launch in clusters of 2, blocks of 32): threads `live..` of each
/// block (all threads of odd blocks when `odd_blocks_return`) return; the others meet at
/// `cluster::sync()` and write `out[b * 32 + t] = 100 + cluster::size()`.
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
#[kernel]
pub fn e4_cluster_exit_sync(live: u32, odd_blocks_return: bool, out: AtomicSlice<u32>) {
    let (b, t) = (ferrocuda_device::thread::block_idx_x(), thread_idx_x());
    if t >= live || (odd_blocks_return && b % 2 == 1) {
        return;
    }
    ferrocuda_device::cluster::sync();
    out.store((b * 32 + t) as usize, 100 + ferrocuda_device::cluster::size());
}

/// E3 (audit 2026-11-27e; one block): `warpgroup::elect_one()` where every thread elects
/// (`shape` 0) or threads 16.. of each warp return first (`shape` 1); `out[t]` = 1 if elected,
/// 0 if not, 2 for the threads that returned. (The divergent shape hangs a GPU: CPU only,
/// tests/cpu_sanitizer.rs.)
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
#[kernel]
pub fn e3_elect_shapes(shape: u32, out: AtomicSlice<u32>) {
    let t = thread_idx_x();
    if shape == 1 && t % 32 >= 16 {
        out.store(t as usize, 2);
        return;
    }
    out.store(t as usize, ferrocuda_device::warpgroup::elect_one() as u32);
}
