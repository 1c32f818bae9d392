//! Kernels that take tensor maps as `#[kernel]` parameters (`&TensorMap`), so that their
//! launches declare the memory behind the maps to the stream's door (issue 21): the tests of
//! that tracking (`tests/gpu_tma_tracked.rs` on an H100/H200, `tests/cpu_tma_tracked.rs` on
//! the CPU executor).

use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::kernel;
use ferrocuda_device::tma::{StoreMap, TensorMap};

/// `u32` elements of one box of [`tma_copy_boxes()`] (1 KiB).
pub const TRACKED_BOX: u32 = 256;
/// Dynamic shared memory of [`tma_copy_boxes()`]: the box, its barrier, 128 bytes to align.
pub const TRACKED_SHARED_BYTES: u32 = TRACKED_BOX * 4 + 8 + 128;

/// Block `b` copies box `b` of the 1-D `u32` array behind `src` to the same place of the
/// array behind `dst` through shared memory: one TMA load, one TMA store, both issued by
/// thread 0 after `delay_ns` nanoseconds (the GPU's global timer; no wait on the CPU
/// executor), so that work on other streams that is not ordered with the copy would overlap
/// it. Launch one block of 128 threads per box with [`TRACKED_SHARED_BYTES`] of dynamic shared
/// memory; `src` is a map with a box of [`TRACKED_BOX`] elements, `dst` one of the same box
/// (a `&StoreMap`: the launcher takes `&mut` of a map made by `TensorMap::tiled_mut`, whose
/// launches declare a write).
#[kernel(reqntid(128))]
pub fn tma_copy_boxes(src: &TensorMap, dst: &StoreMap, delay_ns: u64) {
    use ferrocuda_device::mbarrier::{MBarrier, fence_init};
    use ferrocuda_device::sync::sync_threads;
    use ferrocuda_device::thread::{block_idx_x, thread_idx_x};
    use ferrocuda_device::tma::{self, dynamic_shared_address};

    let (src, dst) = (src as *const TensorMap, dst.as_ptr());
    let tid = thread_idx_x();
    let base = (dynamic_shared_address() + 127) & !127;
    // SAFETY: 8 bytes after the box, 8-byte aligned, inside the requested shared memory.
    let bar = unsafe { MBarrier::at(base + TRACKED_BOX * 4) };
    let x = (block_idx_x() * TRACKED_BOX) as i32;
    if tid == 0 {
        bar.init(1);
        fence_init();
    }
    sync_threads();
    if tid == 0 {
        spin(delay_ns);
        // SAFETY: both maps are valid, 1-D, with a box of TRACKED_BOX u32s, and their memory
        // is alive and ordered with this kernel (the launcher took `DeviceTensorMap`s and
        // declared it: read for `src`, written, exclusively, for the `&StoreMap` `dst`); the
        // box lands at `base`, 128-byte aligned, read only after the barrier's phase completes.
        unsafe {
            TensorMap::acquire(src);
            TensorMap::acquire(dst);
            bar.arrive_expect_tx(TRACKED_BOX * 4);
            TensorMap::load_1d(src, base, bar, x);
        }
    }
    bar.wait(0);
    if tid == 0 {
        // SAFETY: as above; the box is complete in shared memory and unchanged until the wait.
        unsafe { TensorMap::store_1d(dst, base, x) };
        tma::store_commit();
        tma::store_wait::<0>();
    }
}

/// Spins for `nanoseconds` (the GPU's global timer; no wait on the CPU executor), then every
/// thread writes `value` to its element of `out`: a late writer, to see whether other streams'
/// work on `out` waits for it.
#[kernel]
pub fn fill_late(nanoseconds: u64, value: u32, mut out: DisjointSlice<u32>) {
    spin(nanoseconds);
    if let Some(o) = out.get_mut(unique_index()) {
        *o = value;
    }
}

/// Spins for `nanoseconds` of the GPU's global timer; returns at once on the CPU executor.
#[inline(always)]
fn spin(nanoseconds: u64) {
    #[cfg(target_arch = "nvptx64")]
    {
        let now = || {
            let t: u64;
            // SAFETY: reads a special register; not `pure`, so the loop is not folded away.
            unsafe { core::arch::asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nomem, nostack)) };
            t
        };
        let start = now();
        while now().wrapping_sub(start) < nanoseconds {}
    }
    #[cfg(not(target_arch = "nvptx64"))]
    let _ = nanoseconds;
}
