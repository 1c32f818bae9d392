//! Barriers and memory fences.
//!
//! | function | CUDA | PTX | cost |
//! | --- | --- | --- | --- |
//! | [`sync_threads`] | `__syncthreads()` | `barrier.sync 0` | a block-wide wait |
//! | [`sync_threads_count`] | `__syncthreads_count(p)` | `barrier.red.popc.u32` on barrier 1 | a wait plus a block reduction |
//! | [`sync_threads_and`] / [`sync_threads_or`] | `__syncthreads_and/or(p)` | `barrier.red.and/or.pred` on barriers 2 / 3 | as above |
//! | [`sync_warp`] | `__syncwarp(mask)` | `bar.warp.sync` | converges the lanes of `mask` |
//! | [`fence_block`] / [`fence_device`] / [`fence_system`] | `__threadfence_block/()/_system` | `fence.sc.cta/gpu/sys` | orders this thread's memory accesses as seen by the block / GPU / host and peers |
//! | [`fence_acq_rel_device`] | `cuda::atomic_thread_fence(memory_order_acq_rel, thread_scope_device)` | `fence.acq_rel.gpu` | a release and an acquire fence for the GPU, without the single total order of `fence.sc` (SASS `MEMBAR.ALL.GPU` where `fence.sc.gpu` is `MEMBAR.SC.GPU`) |
//!
//! Every thread of the block must reach a block barrier (every lane of `mask`, a warp
//! barrier), as in CUDA; the CPU executor reports a barrier that some threads skip. Threads
//! that have returned do not hold a block barrier up (PTX `exit`: "If the exiting threads are
//! holding up the barrier, the barrier is released"), on the GPU and on the CPU executor
//! alike; a reducing barrier then reduces over the threads that arrived (an H100 counted 32
//! for `sync_threads_count(true)` in 32 threads whose 32 block-mates had returned).
//!
//! # One hardware barrier per kind (audit P4)
//! PTX: "`barrier{.cta}.red` should not be intermixed with `barrier{.cta}.sync` or
//! `barrier{.cta}.arrive` using the same active barrier. Execution in this case is
//! unpredictable" (PTX ISA 9.0, 9.7.15.1); an H100 raised `CUDA_ERROR_ILLEGAL_INSTRUCTION` when
//! one warp waited in `sync_threads()` and another in `sync_threads_count()` on barrier 0, and
//! also for `sync_threads_and` beside `sync_threads_or`. So each kind has its own barrier:
//! [`sync_threads`] barrier 0 ([`PLAIN_BARRIER`]), [`sync_threads_count`] 1
//! ([`COUNT_BARRIER`]), [`sync_threads_and`] 2 ([`AND_BARRIER`]), [`sync_threads_or`] 3
//! ([`OR_BARRIER`]), and [`NamedBarrier`](crate::named_barrier::NamedBarrier) takes ids 4..=15
//! only. The low ids are on purpose: ptxas reserves every barrier up to the highest id a kernel
//! uses ("used 16 barriers" for id 15), and an SM holds 64, so on an H100 a kernel of 32-thread
//! blocks using barrier 15 fitted 4 blocks per SM instead of 32 (measured). A kernel that uses
//! `sync_threads` and `sync_threads_count` uses 2 barriers; all four kinds, 4. No barrier is then ever used by two forms, so no mix is unpredictable: threads that
//! wait at two different kinds wait for each other forever (each barrier waits for every
//! thread of the block), a hang, as with warp collectives that part of a warp skips, which
//! `Stream::synchronize_timeout` bounds on the host and the CPU executor reports as
//! [`MixedBarriers`](crate::cpu::MixedBarriers).
//!
//! # Why not `bar.sync`
//! `bar.sync` is `barrier.sync.aligned`: every thread must execute the *same* barrier
//! instruction. rustc does not mark code as convergent, so LLVM may copy a barrier into both
//! arms of a branch that ends just before it: `if tid == 0 { init } sync_threads();` became
//! one `bar.sync` per arm. Warp 0 then reached the barrier twice (lane 0 in one copy, lanes
//! 1-31 in the other, each counted as a whole warp), and the block hung on an H200
//! (`probe_tma_diag`, 2026-11-23). The non-`.aligned` forms used here allow threads to reach
//! the barrier through different copies; ptxas emits the same `BAR.SYNC` for uniform code and
//! a divergence check where a copy may be reached by part of a warp.
/// The hardware barrier of [`sync_threads`].
pub const PLAIN_BARRIER: u32 = 0;
/// The hardware barrier of [`sync_threads_count`] (its own, so that it never mixes with another
/// kind: see the module docs).
pub const COUNT_BARRIER: u32 = 1;
/// The hardware barrier of [`sync_threads_and`].
pub const AND_BARRIER: u32 = 2;
/// The hardware barrier of [`sync_threads_or`].
pub const OR_BARRIER: u32 = 3;
/// The hardware barrier of an in-place row's phase change
/// ([`RowRead::write_own`](crate::global::RowRead::write_own)): its own, so that no other
/// barrier in safe code can complete it (see [`InPlaceRows`](crate::global::InPlaceRows)).
/// A kernel with an `InPlaceRows` output must not make a `NamedBarrier` of this id.
pub const ROW_PHASE_BARRIER: u32 = 4;

/// The phase barrier of [`InPlaceRows`](crate::global::InPlaceRows): `barrier.sync 4` (every
/// thread of the block; not `sync_threads`' barrier 0).
#[inline(always)]
pub(crate) fn row_phase_barrier() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a block barrier (not `.aligned`, as `sync_threads`); it orders memory, so the
    // asm is not `nomem`.
    unsafe {
        core::arch::asm!("barrier.sync 4;", options(nostack))
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::barrier(crate::cpu::hooks::BarrierKind::RowPhase, false);
}

/// Block-wide barrier (`__syncthreads()`, `barrier.sync 0`): waits until every thread of the block
/// has reached it (or returned); shared and global memory writes made before it are visible after it.
#[inline(always)]
pub fn sync_threads() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a barrier (not `.aligned`: see the module docs); it orders memory, so the asm is
    // not `nomem` and the compiler keeps loads and stores on their side of it.
    unsafe {
        core::arch::asm!("barrier.sync 0;", options(nostack))
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::barrier(crate::cpu::hooks::BarrierKind::Plain, false);
}

/// Block barrier that also counts the threads whose `predicate` is true
/// (`__syncthreads_count`, `barrier.red.popc.u32` on barrier [`COUNT_BARRIER`]). Every thread gets
/// the same count. Every thread of the block must call it (not another kind of block barrier: that
/// deadlocks; see the module docs).
#[inline(always)]
pub fn sync_threads_count(predicate: bool) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let count: u32;
        // SAFETY: a block barrier with a reduction; uniform control flow as in CUDA.
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred p; setp.ne.u32 p, {v}, 0; barrier.red.popc.u32 {c}, 1, p; }}",
                v = in(reg32) predicate as u32, c = out(reg32) count,
            );
        }
        count
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::barrier(crate::cpu::hooks::BarrierKind::Count, predicate)
}

/// Block barrier returning whether `predicate` is true for every thread (`__syncthreads_and`,
/// `barrier.red.and.pred` on barrier [`AND_BARRIER`]).
#[inline(always)]
pub fn sync_threads_and(predicate: bool) -> bool {
    #[cfg(target_arch = "nvptx64")]
    {
        let all: u32;
        // SAFETY: a block barrier with a reduction; uniform control flow as in CUDA.
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred p, q; setp.ne.u32 p, {v}, 0; barrier.red.and.pred q, 2, p; selp.u32 {r}, 1, 0, q; }}",
                v = in(reg32) predicate as u32, r = out(reg32) all,
            );
        }
        all != 0
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::hooks::barrier(crate::cpu::hooks::BarrierKind::And, predicate) != 0
    }
}

/// Block barrier returning whether `predicate` is true for any thread (`__syncthreads_or`,
/// `barrier.red.or.pred` on barrier [`OR_BARRIER`]).
#[inline(always)]
pub fn sync_threads_or(predicate: bool) -> bool {
    #[cfg(target_arch = "nvptx64")]
    {
        let any: u32;
        // SAFETY: a block barrier with a reduction; uniform control flow as in CUDA.
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred p, q; setp.ne.u32 p, {v}, 0; barrier.red.or.pred q, 3, p; selp.u32 {r}, 1, 0, q; }}",
                v = in(reg32) predicate as u32, r = out(reg32) any,
            );
        }
        any != 0
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::hooks::barrier(crate::cpu::hooks::BarrierKind::Or, predicate) != 0
    }
}

/// Warp barrier (`__syncwarp(mask)`, `bar.warp.sync`): this lane and the lanes in `mask` wait
/// for each other; their memory accesses before it are visible after it.
///
/// The calling lane is always a member: `bar.warp.sync` with a mask that leaves out the
/// executing lane is undefined behaviour in PTX, so the lane's own bit is added
/// (`mask | %lanemask_eq`; free for a constant full mask, which LLVM folds). Every lane must
/// then meet the others with the same mask, as in CUDA: a lane whose partners never come (they
/// wait elsewhere, or pass another mask) waits forever, a hang on the GPU, not undefined
/// behaviour, which the CPU executor reports as a
/// [`WarpDeadlock`](crate::cpu::WarpDeadlock) (docs/kernel-model.md, "Warp collectives").
#[inline(always)]
pub fn sync_warp(mask: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let own: u32;
        // SAFETY: reads a special register.
        unsafe { core::arch::asm!("mov.u32 {r}, %lanemask_eq;", r = out(reg32) own, options(pure, nomem, nostack)) };
        // SAFETY: a warp barrier whose mask holds the executing lane (PTX's one requirement
        // for defined behaviour on sm_70 and newer, the oldest target the builder accepts).
        unsafe { core::arch::asm!("bar.warp.sync {m};", m = in(reg32) mask | own) };
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::warp_sync(mask | 1 << crate::cpu::hooks::lane_id());
}

macro_rules! fences {
    ($($(#[$doc:meta])* $name:ident => $ptx:literal, $ordering:expr;)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: a fence has no operands; it only orders memory accesses.
            unsafe {
                core::arch::asm!($ptx, options(nostack));
            }
            #[cfg(not(target_arch = "nvptx64"))]
            core::sync::atomic::fence($ordering);
        }
    )*};
}

fences! {
    /// `__threadfence_block()` (`fence.sc.cta`): this thread's earlier memory accesses are
    /// ordered before its later ones as seen by threads of its block.
    fence_block => "fence.sc.cta;", core::sync::atomic::Ordering::SeqCst;
    /// `__threadfence()` (`fence.sc.gpu`): ordering as seen by every thread on the device.
    fence_device => "fence.sc.gpu;", core::sync::atomic::Ordering::SeqCst;
    /// `cuda::atomic_thread_fence(cuda::memory_order_acq_rel, cuda::thread_scope_device)`
    /// (`fence.acq_rel.gpu`, SASS `MEMBAR.ALL.GPU`): a release fence before a later strong
    /// write (an atomic), an acquire fence after an earlier strong read, at device scope; what
    /// the message-passing patterns need (publish, fence, flag / flag, fence, read), without
    /// the single total order of [`fence_device`]'s `fence.sc.gpu` (`MEMBAR.SC.GPU`).
    fence_acq_rel_device => "fence.acq_rel.gpu;", core::sync::atomic::Ordering::AcqRel;
    /// `__threadfence_system()` (`fence.sc.sys`): ordering as seen by the host and peer GPUs too
    /// (for mapped host memory and peer memory).
    fence_system => "fence.sc.sys;", core::sync::atomic::Ordering::SeqCst;
}
