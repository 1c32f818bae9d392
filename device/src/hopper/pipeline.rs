//! A multi-stage ring of shared-memory buffers between a producer (a thread issuing TMA copies)
//! and consumers (warps reading the buffers, typically with `wgmma`), guarded by mbarriers: the
//! pipeline of every Hopper GEMM and attention kernel.
//!
//! Round `j` of the ring uses slot `j % STAGES`; each slot has a "full" barrier (count 1: the
//! producer's `arrive.expect_tx`, completed by the copy engine's bytes) and an "empty" barrier
//! (one arrival per consumer, given at [`Ring::init`]). The parity of round `j`'s phase is
//! `(j / STAGES) & 1`. The producer:
//! ```ignore
//! let full = ring.produce(j, bytes);          // waits until slot j % STAGES is empty
//! TensorMap::load_2d(map, buffer(ring.slot(j)), full, x, y);  // copies completing on `full`
//! ```
//! and each consumer:
//! ```ignore
//! ring.consume(j);                            // waits until round j's bytes have landed
//! /* read buffer(ring.slot(j)) (issue wgmma, wait for it) */
//! ring.release(j);                            // one arrival on the slot's empty barrier
//! ```
//! A fresh barrier is in phase 0, so the producer's first round on each slot passes at once
//! (it waits for parity `phase ^ 1`, "the previous phase", which counts as complete).
//!
//! On the CPU executor the barriers are emulated (`hopper::emu`): a failing wait yields to the
//! block's other threads.

use crate::mbarrier::MBarrier;

/// A ring of `STAGES` slots: `2 * STAGES` mbarriers (8 bytes each) in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring<const STAGES: u32> {
    barriers: u32,
}

impl<const STAGES: u32> Ring<STAGES> {
    /// Shared memory the ring's barriers take: `16 * STAGES` bytes.
    pub const BARRIER_BYTES: u32 = 16 * STAGES;

    /// The ring whose barriers live at shared-window address `address`.
    ///
    /// # Safety
    /// `address` is 8-byte aligned, and the [`Ring::BARRIER_BYTES`] bytes there lie inside this
    /// block's shared memory and are used for nothing but this ring's barriers.
    #[inline(always)]
    pub const unsafe fn at(address: u32) -> Self {
        Ring { barriers: address }
    }

    /// Initialises the barriers: "full" for the producer's one arrival per round, "empty" for
    /// `consumers` arrivals per round. One thread calls it before anyone uses the ring, then
    /// [`crate::mbarrier::fence_init`] and a block (or cluster) barrier publish it.
    #[inline(always)]
    pub fn init(self, consumers: u32) {
        for slot in 0..STAGES {
            self.full(slot).init(1);
            self.empty(slot).init(consumers);
        }
    }

    /// The slot of round `j`.
    #[inline(always)]
    pub const fn slot(j: u32) -> u32 {
        j % STAGES
    }

    /// The parity of round `j`'s phase on its slot's barriers.
    #[inline(always)]
    pub const fn phase(j: u32) -> u32 {
        (j / STAGES) & 1
    }

    /// The "full" barrier of `slot` (the one TMA copies of that slot complete on).
    #[inline(always)]
    pub fn full(self, slot: u32) -> MBarrier {
        // SAFETY: inside the ring's barrier storage (`at`'s contract) for slot < STAGES.
        unsafe { MBarrier::at(self.barriers + 8 * (slot % STAGES)) }
    }

    /// The "empty" barrier of `slot` (consumers arrive on it; the cluster GEMM also on a peer's).
    #[inline(always)]
    pub fn empty(self, slot: u32) -> MBarrier {
        // SAFETY: as in `full`.
        unsafe { MBarrier::at(self.barriers + 8 * (STAGES + slot % STAGES)) }
    }

    /// Producer: waits until round `j`'s slot is free (its consumers released round `j -
    /// STAGES`), then announces `bytes` of copies on its full barrier, which it returns for the
    /// copies to complete on.
    #[inline(always)]
    pub fn produce(self, j: u32, bytes: u32) -> MBarrier {
        let slot = Self::slot(j);
        self.empty(slot).wait(Self::phase(j) ^ 1);
        let full = self.full(slot);
        full.arrive_expect_tx(bytes);
        full
    }

    /// Consumer: waits until round `j`'s bytes have landed in its slot.
    #[inline(always)]
    pub fn consume(self, j: u32) {
        self.full(Self::slot(j)).wait(Self::phase(j));
    }

    /// Consumer: one arrival on round `j`'s empty barrier (call it once per consumer counted at
    /// [`Ring::init`], after the last read of the slot, e.g. after waiting for the `wgmma`s
    /// that read it).
    #[inline(always)]
    pub fn release(self, j: u32) {
        self.empty(Self::slot(j)).arrive();
    }
}
