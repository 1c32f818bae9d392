//! The host side of the device library: what the intrinsics do when a kernel runs on the CPU.
//!
//! Each hook reads the GPU thread that the CPU executor ([`crate::cpu`]) is running on this OS
//! thread; outside the executor there is none, and the hook panics saying so.

use crate::cpu::block::{BlockContext, WarpOp};
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
#[cold]
fn no_gpu_thread(what: &str) -> ! {
    panic!("`{what}` only has a value inside a kernel (on a GPU, or run by the CPU executor)")
}

/// The block the CPU executor is running on this OS thread (panics, naming `what`, outside it).
#[track_caller]
#[inline(always)]
fn block(what: &str) -> &'static BlockContext<'static> {
    match BlockContext::current() {
        Some(block) => block,
        None => no_gpu_thread(what),
    }
}

#[track_caller]
pub(crate) fn thread_idx() -> Dim3 {
    block("thread_idx").thread().index
}
#[track_caller]
pub(crate) fn block_idx() -> Dim3 {
    block("block_idx").block_idx
}
#[track_caller]
pub(crate) fn block_dim() -> Dim3 {
    block("block_dim").block_dim
}
#[track_caller]
pub(crate) fn grid_dim() -> Dim3 {
    block("grid_dim").grid_dim
}
#[track_caller]
pub(crate) fn barrier(kind: BarrierKind, predicate: bool) -> u32 {
    block("sync_threads").barrier(kind, predicate)
}
#[track_caller]
pub(crate) fn warp_sync(mask: u32) {
    block("sync_warp").warp_op(WarpOp::Sync, mask, 0);
}
#[track_caller]
pub(crate) fn lane_id() -> u32 {
    block("lane_id").current_rank() % crate::warp::WARP_SIZE
}
#[track_caller]
pub(crate) fn warp_shuffle(value: u32, mode: ShuffleMode, lane_or_delta: u32) -> u32 {
    block("shuffle").warp_op(WarpOp::Shuffle { mode, lane_or_delta }, crate::warp::FULL_MASK, value as u64) as u32
}
#[track_caller]
pub(crate) fn warp_ballot(predicate: bool) -> u32 {
    block("ballot").warp_op(WarpOp::Ballot, crate::warp::FULL_MASK, predicate as u64) as u32
}
#[track_caller]
pub(crate) fn warp_active_mask() -> u32 {
    block("active_mask").warp_op(WarpOp::ActiveMask, crate::warp::FULL_MASK, 0) as u32
}
#[track_caller]
pub(crate) fn warp_match_any(value: u64) -> u32 {
    block("match_any").warp_op(WarpOp::MatchAny, crate::warp::FULL_MASK, value) as u32
}
/// The shared-memory address of the `shared_array!` at `site` in the running block.
#[track_caller]
pub fn static_shared(site: u64, bytes: usize, align: usize) -> u32 {
    block("shared_array!").shared.static_array(site, bytes, align)
}
#[track_caller]
pub(crate) fn dynamic_shared() -> (u32, u32) {
    let shared = &block("dynamic_shared").shared;
    (0, shared.dynamic_bytes())
}

/// A pointer to `size_of::<T>()` bytes at `address` in the running block's shared memory,
/// after checking the bounds and alignment (panicking like an out-of-bounds index).
#[track_caller]
pub(crate) fn shared_pointer<T>(address: u32) -> *mut T {
    block("shared memory").shared.pointer(address, core::mem::size_of::<T>(), core::mem::align_of::<T>()).cast()
}

/// `ld.shared` on the host: a bounds-checked read of the block's arena, checked for data races.
///
/// # Safety
/// `T` is valid for every bit pattern (the shared-element types are).
#[track_caller]
pub(crate) unsafe fn shared_load<T: Copy>(address: u32) -> T {
    let block = block("shared memory");
    let pointer = block.shared.pointer(address, core::mem::size_of::<T>(), core::mem::align_of::<T>());
    block.note_shared_access(address, core::mem::size_of::<T>(), false);
    // SAFETY: in bounds and aligned (checked above); any bit pattern is a valid `T`.
    unsafe { pointer.cast::<T>().read_volatile() }
}

/// `st.shared` on the host: a bounds-checked write of the block's arena, checked for data races.
///
/// # Safety
/// As for [`shared_load`].
#[track_caller]
pub(crate) unsafe fn shared_store<T: Copy>(address: u32, value: T) {
    let block = block("shared memory");
    let pointer = block.shared.pointer(address, core::mem::size_of::<T>(), core::mem::align_of::<T>());
    block.note_shared_access(address, core::mem::size_of::<T>(), true);
    // SAFETY: in bounds and aligned (checked above).
    unsafe { pointer.cast::<T>().write_volatile(value) }
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

/// Atomic add on this block's shared memory. (Atomics are never data races, so they are not
/// recorded by the race detector.)
///
/// # Safety
/// `address` is in bounds and aligned.
#[track_caller]
pub(crate) unsafe fn shared_fetch_add<T: Copy + core::ops::Add<Output = T>>(address: u32, value: T) -> T {
    // SAFETY: `shared_pointer` checked bounds and alignment; a block runs on one OS thread, so
    // the arena is only ever touched from here (atomically or not).
    unsafe { atomic_update(shared_pointer::<T>(address), |old| old + value) }
}

/// `%cluster_ctarank`.
#[track_caller]
pub(crate) fn cluster_block_rank() -> u32 {
    block("cluster::block_rank").cluster_rank
}
/// `%cluster_nctarank`.
#[track_caller]
pub(crate) fn cluster_size() -> u32 {
    block("cluster::size").cluster_size()
}
/// `barrier.cluster.arrive` + `wait`.
#[track_caller]
pub(crate) fn cluster_sync() {
    block("cluster::sync").cluster_barrier()
}
/// `ld.shared::cluster` of a `u32` at `address` in block `rank` of the cluster (not recorded
/// by the race detector, which watches one block's accesses).
#[track_caller]
pub(crate) fn cluster_peer_load_u32(address: u32, rank: u32) -> u32 {
    let pointer = block("cluster::peer_get").cluster_peer(rank).pointer(address, 4, 4);
    // SAFETY: in bounds and aligned (checked by `pointer`); the peer block runs on this OS
    // thread, not concurrently.
    unsafe { pointer.cast::<u32>().read_volatile() }
}

/// Device printing on the host: through `std::print!`, so a test harness captures it.
pub(crate) fn print(args: core::fmt::Arguments<'_>) {
    std::print!("{args}");
}

/// IEEE binary16 bits to f32 (exact).
pub(crate) fn f16_to_f32(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exponent = ((bits >> 10) & 0x1f) as i32;
    let mantissa = (bits & 0x3ff) as f32;
    sign * match exponent {
        0 => mantissa * 2f32.powi(-24),
        31 if mantissa == 0.0 => f32::INFINITY,
        31 => f32::NAN,
        e => (1.0 + mantissa / 1024.0) * 2f32.powi(e - 15),
    }
}

/// bfloat16 bits to f32 (exact: bf16 is the top half of an f32).
pub(crate) fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_bit_floats_widen_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc100), -2.5);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24), "smallest subnormal");
        assert_eq!(f16_to_f32(0x7bff), 65504.0, "largest finite");
        assert_eq!(f16_to_f32(0xfc00), f32::NEG_INFINITY);
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(bf16_to_f32(0x3fc0), 1.5);
    }
}
