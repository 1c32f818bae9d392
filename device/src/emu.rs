//! The host side of the device library: what the intrinsics do when a kernel runs on the CPU.
//! Until the CPU executor provides a current GPU thread, they report that they need one.

use crate::thread::Dim3;
use crate::warp::ShuffleMode;

/// The kind of block barrier being waited on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BarrierKind {
    Plain,
    Count,
    And,
    Or,
}

#[track_caller]
fn no_gpu_thread(what: &str) -> ! {
    panic!("`{what}` only has a value inside a kernel (on a GPU, or run by the CPU executor)")
}

/// For hardware features the CPU executor does not model (clusters, tensor cores).
#[track_caller]
pub(crate) fn unsupported(what: &str) -> ! {
    panic!("`{what}` is not available on the CPU executor")
}

pub(crate) fn thread_idx() -> Dim3 {
    no_gpu_thread("thread_idx")
}
pub(crate) fn block_idx() -> Dim3 {
    no_gpu_thread("block_idx")
}
pub(crate) fn block_dim() -> Dim3 {
    no_gpu_thread("block_dim")
}
pub(crate) fn grid_dim() -> Dim3 {
    no_gpu_thread("grid_dim")
}
pub(crate) fn barrier(_kind: BarrierKind, _predicate: bool) -> u32 {
    no_gpu_thread("sync_threads")
}
pub(crate) fn warp_sync(_mask: u32) {
    no_gpu_thread("sync_warp")
}
pub(crate) fn lane_id() -> u32 {
    no_gpu_thread("lane_id")
}
pub(crate) fn warp_shuffle(_value: u32, _mode: ShuffleMode, _lane: u32) -> u32 {
    no_gpu_thread("shuffle")
}
pub(crate) fn warp_ballot(_predicate: bool) -> u32 {
    no_gpu_thread("ballot")
}
pub(crate) fn warp_active_mask() -> u32 {
    no_gpu_thread("active_mask")
}
pub(crate) fn warp_match_any(_value: u64) -> u32 {
    no_gpu_thread("match_any")
}
pub fn static_shared(_site: u64, _bytes: usize, _align: usize) -> u32 {
    no_gpu_thread("shared_array!")
}
pub(crate) fn dynamic_shared() -> (u32, u32) {
    no_gpu_thread("dynamic_shared")
}
pub(crate) fn shared_pointer<T>(_address: u32) -> *mut T {
    no_gpu_thread("shared memory")
}

/// `*target = f(*target)` atomically, returning the old value (a compare-exchange loop on the
/// value's bits; the element types are 4 or 8 bytes).
///
/// # Safety
/// `target` is valid and aligned for `T`, and accessed by others only atomically.
pub(crate) unsafe fn atomic_update<T: Copy>(target: *mut T, f: impl Fn(T) -> T) -> T {
    use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
    fn from_bits<T: Copy, B: Copy>(bits: B) -> T {
        // SAFETY: only called with B of T's size (checked below); all element types are Pod.
        unsafe { core::mem::transmute_copy(&bits) }
    }
    match core::mem::size_of::<T>() {
        4 => {
            // SAFETY: T is 4 bytes and suitably aligned (the caller's guarantee).
            let atomic = unsafe { AtomicU32::from_ptr(target.cast()) };
            let old = atomic.fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| Some(from_bits::<u32, T>(f(from_bits::<T, u32>(bits))))).unwrap_or_else(|b| b);
            from_bits(old)
        }
        8 => {
            // SAFETY: T is 8 bytes and suitably aligned.
            let atomic = unsafe { AtomicU64::from_ptr(target.cast()) };
            let old = atomic.fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| Some(from_bits::<u64, T>(f(from_bits::<T, u64>(bits))))).unwrap_or_else(|b| b);
            from_bits(old)
        }
        size => unreachable!("atomics on {size}-byte values"),
    }
}

/// Atomic add on this block's shared memory.
///
/// # Safety
/// `address` is in bounds and aligned.
pub(crate) unsafe fn shared_fetch_add<T: Copy + core::ops::Add<Output = T>>(address: u32, value: T) -> T {
    // SAFETY: as the caller guarantees.
    unsafe { atomic_update(shared_pointer::<T>(address), |old| old + value) }
}

pub(crate) fn print(args: core::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = std::io::stdout().write_fmt(args);
}
