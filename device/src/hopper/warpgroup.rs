//! Warpgroup roles (sm_90): register reallocation between warpgroups (`setmaxnreg`, sm_90a)
//! and electing one thread of a warp (`elect.sync`).
//!
//! Warp specialisation gives a producer warpgroup (that only issues TMA copies) few registers
//! and the consumer warpgroups (holding `wgmma` accumulators) many: [`dealloc_registers`] in
//! the producer, [`alloc_registers`] in the consumers. `setmaxnreg` takes effect only in a
//! kernel compiled with a register cap at entry (launch bounds with a minimum of 1 block per
//! SM: `ferrocuda_device::launch_bounds!(kernel, threads, 1)`); ptxas says so (C7508) when it
//! ignores it. Cost: a few cycles; the whole warpgroup must execute it together.
//! On the host (the CPU executor) register reallocation does nothing.

/// The warpgroup index of this thread in its block (`thread_idx_x / 128`, 1-D blocks).
#[inline(always)]
pub fn index() -> u32 {
    crate::thread::thread_idx_x() / 128
}

/// Releases registers: this warpgroup's per-thread limit becomes `N` (24..=256, a multiple
/// of 8) (`setmaxnreg.dec.sync.aligned.u32 N`).
///
/// # Safety
/// Every thread of the warpgroup executes it together, and the code after it needs at most `N`
/// registers (ptxas allocates accordingly).
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90a"))]
#[inline(always)]
pub unsafe fn dealloc_registers<const N: u32>() {
    // SAFETY: the caller's contract.
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        core::arch::asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N, options(nostack))
    };
}

/// Requests registers: this warpgroup's per-thread limit becomes `N` (24..=256, a multiple
/// of 8), waiting until other warpgroups have released enough (`setmaxnreg.inc.sync.aligned.u32`).
///
/// # Safety
/// Every thread of the warpgroup executes it together; the block's total after all
/// reallocations fits the SM's register file, or this waits forever.
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90a"))]
#[inline(always)]
pub unsafe fn alloc_registers<const N: u32>() {
    // SAFETY: the caller's contract.
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        core::arch::asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N, options(nostack))
    };
}

/// Elects one lane of the warp (`elect.sync _|p, 0xffffffff`): true in exactly one lane, the
/// lowest that has not exited.
///
/// A full-warp collective, like [`warp::shuffle`](crate::warp::shuffle) and the votes: every
/// lane of the warp that has not exited must call it, at the same place (lanes that returned
/// do not hold it up; a partial last warp counts its lanes only). Called from divergent code
/// (some lanes here, others at a `sync_threads()` or in another warp operation) a GPU hangs;
/// the CPU executor reports that use as a warp deadlock naming the lanes (audit 2026-11-27e
/// E3), as it does for the shuffles. It stays safe on the same argument as the shuffles
/// (kernel-model.md, "Rules only the GPU enforces"): the outcome of the misuse is a hang, not
/// memory unsafety, and the sanitizer names it.
#[inline(always)]
pub fn elect_one() -> bool {
    #[cfg(target_arch = "nvptx64")]
    {
        let elected: u32;
        // SAFETY: a warp-collective predicate; all lanes converged (the caller's duty, as for
        // any `.sync` warp operation).
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred p; elect.sync _|p, 0xffffffff; selp.u32 {e}, 1, 0, p; }}",
                e = out(reg32) elected, options(nostack)
            )
        };
        elected != 0
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::hopper::emu::elect_one()
}
