//! [`InPlaceRows`]: a row per block updated in place after the block has read the whole row
//! (llm.c's fused classifier: every thread reads the row's logits, a barrier, then every
//! thread overwrites its own chunks with the gradient); its phases [`RowRead`] and
//! [`RowWrite`].

use core::marker::PhantomData;

use bytemuck::Pod;

use super::LaunchRequirements;
use super::block_rows::BlockRow;
use super::order::{Forward, RowOrder};
use super::slice::{DisjointSlice, Partition};
use super::warp_rows::LaneRow;
use crate::thread::{block_dim_x, thread_idx_x};

/// The partition of `DisjointSlice<T, InPlaceRows<O>>`: rows as [`BlockRows<O>`](super::partition::BlockRows) (block `b`
/// takes the rows of its slot, `cols` from `#[kernel(cols(name = ..))]`), each updated in two
/// phases: first every thread of the block may **read the whole row** ([`RowRead`]), then,
/// after a block barrier, each thread **reads and writes its own columns** `threadIdx.x +
/// blockDim.x j` ([`RowWrite`]). llm.c's `fused_classifier_kernel5` in place:
///
/// ```ignore
/// #[kernel(cols(logits = p8), launch_bounds(1024, 2))]
/// pub fn classifier(logits: DisjointSlice<X128, InPlaceRows<Reversed>>, /* .. */ p8: u32) {
///     let Some(read) = logits.read_row(block_row_reversed()) else { return };
///     let x: &[X128] = read.row();            // the whole row, any column, plain loads
///     let stats = /* block-wide max and sum over x */;
///     let mut write = read.write_own();       // every thread: the phase barrier
///     let mut own = write.row_mut();          // columns threadIdx.x + blockDim.x j
///     for v in own.iter_mut() { *v = /* gradient from *v and stats */ *v; }
/// }
/// ```
///
/// # Why it is sound
/// A data race needs a write to an element that another thread accesses without a barrier
/// between. Writes happen only in the write phase, only to the writer's own columns (the
/// [`BlockRows`](super::partition::BlockRows) map: distinct threads, distinct columns; distinct
/// blocks, distinct rows), and only after the **phase barrier**, a hardware barrier (`barrier.sync
/// 4`, all the block's threads) that nothing else in safe code uses. Reads of another thread's
/// column happen only in the read phase, through a [`RowRead`], which `write_own` consumes when
/// its thread arrives at that barrier (the row slice it lends cannot outlive it). Each thread
/// arrives at the phase barrier at most once in the launch: `read_row` takes the output by
/// value (one read phase per thread and parameter) and a kernel has at most one `InPlaceRows`
/// parameter (two are refused at compile time, through the launch requirements). So the phase
/// barrier completes once, when every thread of the block that has not exited has finished its
/// reads: every read of another thread's column happens before every write. A barrier of
/// another kind in user code cannot stand in for it (a different hardware barrier: the threads
/// would wait for each other forever, a hang the CPU executor reports as `MixedBarriers`), and a
/// thread that returns before it reads nothing afterwards. Named barriers ([`NamedBarrier`]) must
/// not use id 4 in such a kernel, a rule of `NamedBarrier::new`'s `# Safety`.
///
/// Costs as CUDA's: plain loads (`LDG.E.128` for a 16-byte element; not `.nc`, since the row is
/// written in the launch) and stores, and one `BAR.SYNC` on barrier 4 (the kernel uses 5
/// hardware barriers). Launch: 1-D (`LINEAR_THREADS`).
///
/// [`NamedBarrier`]: crate::named_barrier::NamedBarrier
pub struct InPlaceRows<O: RowOrder = Forward>(PhantomData<O>);

// SAFETY: see "Why it is sound" above: every write goes through a `RowWrite` (own columns of a
// row of this block's, after the phase barrier), every read of another column through a
// `RowRead` (before the phase barrier), and `ROW_PHASE` allows one such output per kernel.
unsafe impl<O: RowOrder> Partition for InPlaceRows<O> {
    const KEY: u64 = super::slice::partition_key("InPlaceRows", &[O::KEY]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS.and(LaunchRequirements::ROW_PHASE);
    type Shape = u32;
}

impl<'a, T: Pod, O: RowOrder> DisjointSlice<'a, T, InPlaceRows<O>> {
    /// The read phase of row `me`, if the whole row lies inside the buffer (one check): the
    /// row is readable in full until [`RowRead::write_own`]. Takes the output by value (see
    /// [`InPlaceRows`]).
    #[inline(always)]
    #[track_caller]
    pub fn read_row(self, me: BlockRow<O>) -> Option<RowRead<'a, T, O>> {
        let row = me.owned();
        let cols = self.shape;
        // `row, cols < 2^32`: no overflow in u64.
        if (row as u64 + 1) * cols as u64 > self.len as u64 {
            return None;
        }
        Some(RowRead { output: self, row, _not_send: PhantomData })
    }
}

/// The read phase of an [`InPlaceRows`] row: every column readable, by every thread of the
/// block, until this thread's [`write_own`](Self::write_own).
pub struct RowRead<'a, T: Pod, O: RowOrder = Forward> {
    output: DisjointSlice<'a, T, InPlaceRows<O>>,
    row: u32,
    _not_send: super::index::NotSend,
}

impl<'a, T: Pod, O: RowOrder> RowRead<'a, T, O> {
    /// The row's index, to index inputs with.
    #[inline(always)]
    pub fn index(&self) -> u32 {
        self.row
    }

    /// The whole row, `cols` elements, to read with the usual slice tools (`get`, `iter`,
    /// `vector::load16`, `cache::load`). Borrowed from the read phase, so it ends before the
    /// phase barrier.
    #[inline(always)]
    pub fn row(&self) -> &[T] {
        let cols = self.output.shape as usize;
        let start = self.row as usize * cols;
        // SAFETY: `start + cols <= len` (`read_row`); no thread writes the row until every
        // thread of the block has passed the phase barrier, which this thread reaches only by
        // consuming `self` (the borrow ends first): see `InPlaceRows`. Not a noted output
        // access on the CPU executor: reads of any column are this phase's point, ordered
        // before the writes by the barrier.
        unsafe { core::slice::from_raw_parts(self.output.pointer.add(start), cols) }
    }

    /// Ends the read phase: the phase barrier (every thread of the block must call it, as
    /// `sync_threads`; it is not `sync_threads`' barrier), then this thread's own columns.
    #[inline(always)]
    pub fn write_own(self) -> RowWrite<'a, T, O> {
        crate::sync::row_phase_barrier();
        RowWrite { output: self.output, row: self.row, _not_send: PhantomData }
    }
}

/// The write phase of an [`InPlaceRows`] row: this thread's columns `threadIdx.x + blockDim.x
/// j`, read and written ([`row_mut`](Self::row_mut)).
pub struct RowWrite<'a, T: Pod, O: RowOrder = Forward> {
    output: DisjointSlice<'a, T, InPlaceRows<O>>,
    row: u32,
    _not_send: super::index::NotSend,
}

impl<T: Pod, O: RowOrder> RowWrite<'_, T, O> {
    /// The row's index.
    #[inline(always)]
    pub fn index(&self) -> u32 {
        self.row
    }

    /// This thread's columns of the row (a [`LaneRow`] with stride `blockDim.x`: `get_mut`,
    /// `iter_mut`, `zip_input`, `zip_inputs`).
    #[inline(always)]
    pub fn row_mut(&mut self) -> LaneRow<'_, T> {
        let (row, lane, stride) = (self.row, thread_idx_x(), block_dim_x());
        // SAFETY: 1-D launch (`REQUIREMENTS`): `threadIdx.x < blockDim.x` names one thread of
        // the block; the row is one of this block's (a `BlockRow<O>` of the running thread);
        // every other thread of the block has finished reading it (the phase barrier), see
        // `InPlaceRows`. `read_row` checked the row inside the buffer, so `new` is `Some` (no
        // panic path for the impossible `None`).
        unsafe { LaneRow::new(&mut self.output, row, lane, stride).unwrap_unchecked() }
    }
}
