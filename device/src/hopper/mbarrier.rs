//! Shared-memory barriers with transaction counts (`mbarrier`, sm_90): how a producer (a thread,
//! or the TMA copy engine) tells consumers that a buffer in shared memory is full or empty.
//!
//! An [`MBarrier`] is 8 bytes of shared memory holding a phase bit, a pending-arrival count and
//! a pending-transaction (byte) count. A phase completes when both counts reach zero; then the
//! phase bit flips and the counts reset to the count given at [`MBarrier::init`]. Waiters name
//! the parity of the phase they wait for ([`MBarrier::wait`]): a pipeline slot used for the
//! `r`-th time waits for parity `r & 1`. Bulk copies (`crate::tma`) complete their bytes on a
//! barrier (`complete_tx`), so [`MBarrier::arrive_expect_tx`] + the copies + a wait is a
//! complete "buffer full" protocol without `bar.sync`.
//!
//! Costs (H100, order of magnitude): init/arrive ~ a shared-memory atomic; a `try_wait` that
//! succeeds ~20-30 cycles; a failing one suspends the thread for a system-dependent time.
//!
//! On the host (the CPU executor) see `hopper::emu`: a failing `try_wait` yields to the block's
//! other threads.
//!
//! PTX: `mbarrier.init.shared::cta.b64`, `mbarrier.arrive.shared::cta.b64`,
//! `mbarrier.arrive.expect_tx.shared::cta.b64`, `mbarrier.try_wait.parity.shared::cta.b64`.

/// A handle to an `mbarrier` object: its 8-byte-aligned shared-window address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MBarrier(u32);

impl MBarrier {
    /// The barrier at shared-window address `address`.
    ///
    /// # Safety
    /// `address` is 8-byte aligned, inside this block's shared memory, and used for nothing but
    /// this barrier while the kernel uses it as one.
    #[inline(always)]
    pub const unsafe fn at(address: u32) -> MBarrier {
        MBarrier(address)
    }

    /// Its shared-window address.
    #[inline(always)]
    pub const fn address(self) -> u32 {
        self.0
    }

    /// Initialises the barrier for `count` arrivals per phase (one thread does this before
    /// anyone uses the barrier; then [`fence_init`] and a block barrier publish it).
    #[inline(always)]
    pub fn init(self, count: u32) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: `at` guaranteed a valid barrier address.
        unsafe {
            core::arch::asm!("mbarrier.init.shared::cta.b64 [{a}], {n};", a = in(reg32) self.0, n = in(reg32) count, options(nostack))
        };
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::mbarrier_init(self.0, count);
    }

    /// One arrival (release semantics at CTA scope).
    #[inline(always)]
    pub fn arrive(self) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: as in `init`.
        unsafe {
            core::arch::asm!("mbarrier.arrive.shared::cta.b64 _, [{a}];", a = in(reg32) self.0, options(nostack))
        };
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::mbarrier_update(self.0, 1, 0);
    }

    /// One arrival that also adds `bytes` to the phase's expected transaction count: the phase
    /// then completes only once bulk copies have delivered that many bytes to it.
    #[inline(always)]
    pub fn arrive_expect_tx(self, bytes: u32) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: as in `init`.
        unsafe {
            core::arch::asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{a}], {b};", a = in(reg32) self.0, b = in(reg32) bytes, options(nostack))
        };
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::mbarrier_update(self.0, 1, bytes as i32);
    }

    /// One arrival on the barrier at the same address in cluster block `rank` (`mapa` then
    /// `mbarrier.arrive.release.cluster.shared::cluster.b64`): how consumers in one block
    /// release a buffer that a peer's multicast copy fills.
    ///
    /// # Safety
    /// The peer block is running (not exited) and uses that address as an initialised barrier.
    #[inline(always)]
    pub unsafe fn arrive_cluster(self, rank: u32) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "{{ .reg .b32 remote; mapa.shared::cluster.u32 remote, {a}, {r}; mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote]; }}",
                a = in(reg32) self.0, r = in(reg32) rank, options(nostack)
            )
        };
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::mbarrier_update_peer(rank, self.0, 1, 0);
    }

    /// [`MBarrier::arrive_cluster`] without the cluster-scope release: `mapa` then
    /// `mbarrier.arrive.shared::cluster.b64` (release at CTA scope, the form CUTLASS's
    /// `ClusterBarrier::arrive(cta_id)` and fast.cu's kernel 12 use). The `.release.cluster`
    /// form makes ptxas put `MEMBAR.ALL.GPU` (and `ERRBAR`, `CGAERRBAR`) before the arrival,
    /// which in a consumer's K loop stalls the warp on every stage (the cluster GEMM of
    /// sessions 12-13 ran at 0.65-0.78x of the plain kernel with it). This form publishes no
    /// ordinary memory writes to the peer; it is for telling the peer that reads this thread
    /// has already *completed* are done, e.g. `wgmma` operand reads of a ring stage after
    /// `wgmma.wait_group`, before the peer's copy refills the stage.
    ///
    /// # Safety
    /// As for [`MBarrier::arrive_cluster`]; and the peer must not rely on this arrival to see
    /// this thread's earlier ordinary (generic-proxy) writes.
    #[inline(always)]
    pub unsafe fn arrive_cluster_after_reads(self, rank: u32) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "{{ .reg .b32 remote; mapa.shared::cluster.u32 remote, {a}, {r}; mbarrier.arrive.shared::cluster.b64 _, [remote]; }}",
                a = in(reg32) self.0, r = in(reg32) rank, options(nostack)
            )
        };
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::mbarrier_update_peer(rank, self.0, 1, 0);
    }

    /// Whether the phase with parity `parity` has completed (one `try_wait`, which may suspend
    /// the thread for a short while before answering; acquire semantics at CTA scope).
    #[inline(always)]
    pub fn try_wait(self, parity: u32) -> bool {
        #[cfg(target_arch = "nvptx64")]
        {
            let done: u32;
            // SAFETY: as in `init`.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{a}], {ph}; selp.u32 {d}, 1, 0, p; }}",
                    a = in(reg32) self.0, ph = in(reg32) parity, d = out(reg32) done, options(nostack)
                )
            };
            done != 0
        }
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::mbarrier_try_wait(self.0, parity)
    }

    /// Waits until the phase with parity `parity` has completed. A fresh barrier is in phase 0,
    /// so `wait(1)` returns at once (the "previous" phase counts as complete): a producer can
    /// wait on an "empty" barrier with parity `(round & 1) ^ 1` from its first round on.
    #[inline(always)]
    pub fn wait(self, parity: u32) {
        while !self.try_wait(parity) {}
    }
}

/// Makes barrier initialisations visible to the other threads of the cluster and to the async
/// proxy (the TMA engine): `fence.mbarrier_init.release.cluster` then
/// `fence.proxy.async.shared::cta`. Call it in the initialising thread, then a block barrier.
#[inline(always)]
pub fn fence_init() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: fences only.
    unsafe {
        core::arch::asm!("fence.mbarrier_init.release.cluster;", "fence.proxy.async.shared::cta;", options(nostack))
    };
}
