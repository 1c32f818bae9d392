//! Named block barriers (`barrier.sync id, n` / `barrier.arrive id, n`): barriers among a
//! subset of the block's threads, or between roles that only signal each other.
//!
//! A block has 16 hardware barriers; [`crate::sync::sync_threads`] uses barrier 0, so a
//! [`NamedBarrier`] takes an id in 1..=15 and a thread count `n` (a multiple of 32: barriers count
//! whole warps). A phase completes when `n` threads have arrived, through [`NamedBarrier::sync`]
//! (arrive and wait) or [`NamedBarrier::arrive`] (arrive without waiting). Memory: writes made
//! before an arrival are visible to the threads released by that phase.
//!
//! The classic use is ordering two warpgroups without a block-wide barrier, e.g. the "ping-pong"
//! schedule of FlashAttention-3: each consumer warpgroup waits on its own barrier before issuing
//! its tensor-core work and then arrives on the other's, so the two take turns on the tensor
//! cores while the other one computes its softmax.
//!
//! Like [`crate::sync::sync_threads`], these are the non-`.aligned` forms (`barrier.sync`, not
//! `bar.sync`): LLVM may duplicate a barrier into branches, which the aligned form forbids.
//! Misuse (counts that never complete) deadlocks the block; it cannot corrupt memory.
//!
//! On the CPU executor a waiting thread yields to the block's other threads until the phase
//! completes (`hopper_emu`).

/// A named barrier: an id in 1..=15 and the number of threads per phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamedBarrier {
    id: u32,
    threads: u32,
}

impl NamedBarrier {
    /// Barrier `id` (1..=15) completing after `threads` arrivals (a positive multiple of 32).
    /// Panics (at compile time in a `const`) on an id or count out of range.
    #[inline(always)]
    pub const fn new(id: u32, threads: u32) -> NamedBarrier {
        assert!(id >= 1 && id <= 15, "named barrier ids are 1..=15 (0 is sync_threads')");
        assert!(threads > 0 && threads.is_multiple_of(32), "a named barrier counts whole warps: threads must be a positive multiple of 32");
        NamedBarrier { id, threads }
    }

    /// Arrives and waits until the phase completes (`barrier.sync id, threads`).
    #[inline(always)]
    pub fn sync(self) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: a barrier; not `nomem`, so memory accesses stay on their side of it.
        unsafe {
            core::arch::asm!("barrier.sync {id}, {n};", id = in(reg32) self.id, n = in(reg32) self.threads, options(nostack))
        };
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper_emu::named_barrier(self.id, self.threads, true);
    }

    /// Arrives without waiting (`barrier.arrive id, threads`).
    #[inline(always)]
    pub fn arrive(self) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: as in `sync`.
        unsafe {
            core::arch::asm!("barrier.arrive {id}, {n};", id = in(reg32) self.id, n = in(reg32) self.threads, options(nostack))
        };
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper_emu::named_barrier(self.id, self.threads, false);
    }
}
