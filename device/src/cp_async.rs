//! Asynchronous global-to-shared copies without registers (`cp.async`, sm_80): each thread
//! starts 4-, 8- or 16-byte copies, closes them into a group ([`commit`]) and later waits
//! until at most N groups are pending ([`wait`]), so loads for the next tile overlap work on
//! this one (the Ampere multi-stage pipeline; on Hopper, TMA (`crate::tma`) does this for
//! whole tiles).
//!
//! Cost: one instruction per copy; `cp.async.cg` (16 bytes) bypasses L1. After [`wait`], the
//! data is visible to the issuing thread; other threads need a block barrier as usual.
//!
//! On the host (the CPU executor) the copy happens at once, which satisfies every wait.

/// Starts a 16-byte copy from global `src` to shared-window address `dst`
/// (`cp.async.cg.shared.global [dst], [src], 16`).
///
/// # Safety
/// `src` is a 16-byte aligned global address of 16 readable bytes; `dst` a 16-byte aligned
/// shared address inside this block's shared memory, not accessed by anyone until the copy's
/// group has been waited for.
#[inline(always)]
pub unsafe fn copy_16(dst: u32, src: *const u8) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!("cp.async.cg.shared.global [{d}], [{s}], 16;", d = in(reg32) dst, s = in(reg64) src, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller's contract; the executor maps the shared address to its memory.
    unsafe {
        core::ptr::copy_nonoverlapping(src, crate::emu::shared_pointer::<[u8; 16]>(dst).cast::<u8>(), 16)
    };
}

/// Starts a 4-byte copy (`cp.async.ca.shared.global [dst], [src], 4`, cached in L1).
///
/// # Safety
/// As [`copy_16`], for 4 bytes, 4-byte aligned.
#[inline(always)]
pub unsafe fn copy_4(dst: u32, src: *const u8) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!("cp.async.ca.shared.global [{d}], [{s}], 4;", d = in(reg32) dst, s = in(reg64) src, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: as in `copy_16`.
    unsafe {
        core::ptr::copy_nonoverlapping(src, crate::emu::shared_pointer::<[u8; 4]>(dst).cast::<u8>(), 4)
    };
}

/// Closes this thread's copies issued since the last commit into a group
/// (`cp.async.commit_group`).
#[inline(always)]
pub fn commit() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: bookkeeping.
    unsafe {
        core::arch::asm!("cp.async.commit_group;", options(nostack))
    };
}

/// Waits until at most `N` of this thread's groups are pending (`cp.async.wait_group N`).
#[inline(always)]
pub fn wait<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a wait.
    unsafe {
        core::arch::asm!("cp.async.wait_group {n};", n = const N, options(nostack))
    };
}
