//! Named block barriers (`barrier.sync id, n` / `barrier.arrive id, n`): barriers among a
//! subset of the block's threads, or between roles that only signal each other.
//!
//! A block has 16 hardware barriers; [`crate::sync::sync_threads`] uses barrier 0 and
//! `sync_threads_count`/`_and`/`_or` barriers 1, 2 and 3 (one per kind, so that no barrier is
//! used by a reducing and a non-reducing form, which PTX calls unpredictable: audit P4), so a
//! [`NamedBarrier`] takes an id in 4..=15 (ptxas reserves every barrier up to the highest id
//! used, and an SM holds 64: a kernel of small blocks fits fewer blocks per SM with high ids)
//! and a thread count `n` (a multiple of 32: barriers count
//! whole warps). A phase completes when `n` threads have arrived, through [`NamedBarrier::sync`]
//! (arrive and wait) or [`NamedBarrier::arrive`] (arrive without waiting). Memory: writes made
//! before an arrival are visible to the threads released by that phase ("prior memory accesses
//! requested by this thread are performed relative to all threads participating in the
//! barrier", PTX ISA 9.0, 9.7.15.1); the CPU executor's race detector orders them the same way
//! (an arrival happens before the accesses that follow each `sync` of the phase it completes).
//!
//! The classic use is ordering two warpgroups without a block-wide barrier, e.g. the "ping-pong"
//! schedule of FlashAttention-3: each consumer warpgroup waits on its own barrier before issuing
//! its tensor-core work and then arrives on the other's, so the two take turns on the tensor
//! cores while the other one computes its softmax.
//!
//! Like [`crate::sync::sync_threads`], these are the non-`.aligned` forms (`barrier.sync`, not
//! `bar.sync`): LLVM may duplicate a barrier into branches, which the aligned form forbids.
//! Misuse (counts that never complete) deadlocks the block; it cannot corrupt memory. One rule
//! faults instead: every arrival of a phase must give the same thread count (warp 0 `sync`
//! with 64 and warp 1 `arrive` with 32 on one id raised `CUDA_ERROR_ILLEGAL_INSTRUCTION` on an
//! H200, losing the context; audit 2026-11-27f F12-3). That rule is the contract of the
//! `unsafe` [`NamedBarrier::new`]: give every `NamedBarrier` of one id the same count (a
//! `const` per id, as the Hopper kernels do).
//!
//! Arrivals count by warp, as the hardware counts them ("marks warps' arrival at barrier"): a
//! warp arrives once its non-exited lanes have, and counts 32 even when some lanes exited or it
//! is the partial last warp of the block; a warp whose lanes all exited does not arrive.
//!
//! On the CPU executor a waiting thread yields to the block's other threads until the phase
//! completes (`hopper::emu`); arrivals count by warp there too, and two counts in one phase are
//! reported as the fault they are on a GPU.

/// A named barrier: an id in 4..=15 and the number of threads per phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamedBarrier {
    id: u32,
    threads: u32,
}

impl NamedBarrier {
    /// The smallest id a named barrier may have (0 is `sync_threads`', 1..=3 belong to
    /// `sync_threads_count`, `sync_threads_and` and `sync_threads_or`).
    pub const MIN_ID: u32 = 4;

    /// Barrier `id` (4..=15) completing after `threads` arrivals (a positive multiple of 32).
    /// Panics (at compile time in a `const`) on an id or count out of range.
    ///
    /// # Safety
    /// Every arrival (`sync` or `arrive`) on barrier `id` during one phase, in any warp of the
    /// block, must give the same `threads`: two counts in one phase are undefined behaviour in
    /// PTX, and an H200 raised `CUDA_ERROR_ILLEGAL_INSTRUCTION` for it, losing the context
    /// (audit 2026-11-27f, F12-3; the CPU executor reports it as `MixedBarrierCounts`). No type
    /// can tie one count to one id across a kernel's warps, so the constructor is where the
    /// promise is made: one `const` per id, as the Hopper kernels write it, keeps it. And a
    /// kernel with an [`InPlaceRows`](crate::global::InPlaceRows) output must not use id 4
    /// ([`ROW_PHASE_BARRIER`](crate::sync::ROW_PHASE_BARRIER)): that barrier orders the row's
    /// reads before its writes only if nothing else can complete it.
    #[inline(always)]
    pub const unsafe fn new(id: u32, threads: u32) -> NamedBarrier {
        assert!(id >= Self::MIN_ID && id <= 15, "named barrier ids are 4..=15 (0 is sync_threads', 1..=3 are sync_threads_count/_and/_or's)");
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
        crate::hopper::emu::named_barrier(self.id, self.threads, true);
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
        crate::hopper::emu::named_barrier(self.id, self.threads, false);
    }
}
