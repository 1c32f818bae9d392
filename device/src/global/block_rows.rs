//! [`BlockRows`]: a row-major output with a row per block (grid-strided over rows), the
//! block's threads striding over the row; and its witness [`BlockRow`].

use core::marker::PhantomData;

use bytemuck::Pod;

use super::LaunchRequirements;
use super::index::NotSend;
use super::order::{Forward, Reversed, RowOrder};
use super::slice::{DisjointSlice, Partition};
use super::warp_rows::LaneRow;
use crate::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};

/// The partition of `DisjointSlice<T, BlockRows>`: a row-major matrix of `cols` columns (a
/// run-time width from `#[kernel(cols(name = ..))]`), block `b` of a 1-D launch owning rows
/// `b, b + gridDim.x, b + 2 gridDim.x, ...` and its thread `t` the columns `t, t + blockDim.x,
/// ...` of each: llm.c's and vLLM's "one block per row" (layer norm, RMS norm, softmax,
/// rotary), written as CUDA writes it:
///
/// ```ignore
/// #[kernel(cols(x = hidden))]
/// pub fn scale_rows(mut x: DisjointSlice<f32, BlockRows>, factor: f32, rows: u32, hidden: u32) {
///     for me in block_rows(rows) {                      // for (row = blockIdx.x; row < rows; row += gridDim.x)
///         let Some(row) = x.row_mut(me) else { break }; // one check per row
///         for v in row.iter_mut() {                     // for (c = threadIdx.x; c < hidden; c += blockDim.x)
///             *v *= factor;                             // x = f(x), in place
///         }
///     }
/// }
/// ```
///
/// Map: witness [`BlockRow`] `(r, t)` -> elements `r * cols + t + blockDim.x j` for `t +
/// blockDim.x j < cols`. Disjoint: `(row, col) -> row * cols + col` is one-to-one on `col <
/// cols` (`cols` the same in every thread); a block's rows are congruent to its index modulo
/// `gridDim.x`, so two blocks never share a row; a block's threads reach columns congruent
/// to their own `threadIdx.x < blockDim.x`, so two threads never share a column. Launch: 1-D
/// (`LINEAR_THREADS`: `y = z = 1`, at most `u32::MAX` threads), any block size, any width.
/// An element is read and written by its owner only, so in-place updates (`x = f(x)`:
/// residual streams, normalising a row in place) need nothing else.
///
/// `BlockRows<Reversed>`: block `b` takes the rows of slot `G - 1 - b` (`G = gridDim.x`):
/// `G - 1 - b, 2 G - 1 - b, ...` (llm.c's fused classifier, `gridDim.x - (blockIdx.x + 1)`),
/// through [`block_row_reversed`]/[`block_rows_reversed`]. `b -> G - 1 - b` is a bijection of
/// `0..G`, so the blocks' rows stay disjoint (congruent to their distinct slots modulo `G`);
/// the witness type carries the order, so a forward [`BlockRow`] never reaches a reversed
/// output.
pub struct BlockRows<O: RowOrder = Forward>(PhantomData<O>);

// SAFETY: as the doc above: every access goes through a `BlockRow<O>` of the running thread
// (row congruent to its block's slot for `O` modulo the grid, lane its `threadIdx.x`, stride
// `blockDim.x`); `LaneRow` checks the row inside the buffer once and each column below `cols`.
unsafe impl<O: RowOrder> Partition for BlockRows<O> {
    const KEY: u64 = super::slice::partition_key("BlockRows", &[O::KEY]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS;
    type Shape = u32;
}

/// A row of a [`BlockRows`] output and this thread's place in it: row `r` (one of this
/// block's), lane `threadIdx.x`. Made only by [`block_row`] and [`block_rows`]; `Copy` but not
/// `Send`, `Sync` or `Pod` (see [`ThreadIndex`](super::ThreadIndex)), checked against the
/// running thread on the CPU executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockRow<O: RowOrder = Forward> {
    row: u32,
    #[cfg(not(target_arch = "nvptx64"))]
    owner: [u32; 6],
    _this_thread: NotSend,
    _order: PhantomData<fn() -> O>,
}

impl<O: RowOrder> BlockRow<O> {
    /// The row, to index inputs with.
    #[inline(always)]
    pub fn row(self) -> u32 {
        self.row
    }

    #[inline(always)]
    #[track_caller]
    pub(super) fn owned(self) -> u32 {
        #[cfg(not(target_arch = "nvptx64"))]
        if self.owner != super::index::block_thread() {
            super::index::used_by_another_thread("BlockRow", self.row as usize);
        }
        self.row
    }
}

#[inline(always)]
fn make_row<O: RowOrder>(row: u32) -> BlockRow<O> {
    BlockRow {
        row,
        #[cfg(not(target_arch = "nvptx64"))]
        owner: super::index::block_thread(),
        _this_thread: PhantomData,
        _order: PhantomData,
    }
}

/// This block's first row, `blockIdx.x` (one row per block, a grid of `rows` blocks).
#[inline(always)]
pub fn block_row() -> BlockRow {
    make_row(block_idx_x())
}

/// This block's first row with the blocks in reverse order, `gridDim.x - 1 - blockIdx.x`
/// (llm.c's `gridDim.x - (blockIdx.x + 1)`), for a `DisjointSlice<T, BlockRows<Reversed>>`.
#[inline(always)]
pub fn block_row_reversed() -> BlockRow<Reversed> {
    make_row(Reversed::slot(block_idx_x(), grid_dim_x()))
}

/// This block's rows below `rows`: `blockIdx.x, blockIdx.x + gridDim.x, ...` (CUDA's `for (row
/// = blockIdx.x; row < rows; row += gridDim.x)`). A step past `u32` ends the walk (no wrap
/// onto another block's row).
#[inline(always)]
pub fn block_rows(rows: u32) -> BlockRowIter {
    BlockRowIter { row: block_idx_x(), rows, step: grid_dim_x(), _this_thread: PhantomData, _order: PhantomData }
}

/// [`block_rows`] with the blocks in reverse order: `gridDim.x - 1 - blockIdx.x`, then
/// `gridDim.x` further each step, below `rows`, for a `DisjointSlice<T, BlockRows<Reversed>>`.
#[inline(always)]
pub fn block_rows_reversed(rows: u32) -> BlockRowIter<Reversed> {
    BlockRowIter { row: Reversed::slot(block_idx_x(), grid_dim_x()), rows, step: grid_dim_x(), _this_thread: PhantomData, _order: PhantomData }
}

/// The iterator of [`block_rows`] (and of [`block_rows_reversed`], `O` = [`Reversed`]).
#[derive(Debug)]
pub struct BlockRowIter<O: RowOrder = Forward> {
    row: u32,
    rows: u32,
    step: u32,
    _this_thread: NotSend,
    _order: PhantomData<fn() -> O>,
}

impl<O: RowOrder> Iterator for BlockRowIter<O> {
    type Item = BlockRow<O>;

    #[inline(always)]
    fn next(&mut self) -> Option<BlockRow<O>> {
        if self.row < self.rows {
            let row = self.row;
            // Saturating: `u32::MAX` is never below a `u32` bound, so a step never wraps.
            self.row = row.saturating_add(self.step);
            Some(make_row(row))
        } else {
            None
        }
    }
}

/// One thread's view of its block's row of a [`BlockRows`] output: columns `threadIdx.x +
/// blockDim.x j` ([`LaneRow`] with the block's stride).
pub type ThreadRow<'a, T> = LaneRow<'a, T>;

impl<T: Pod, O: RowOrder> DisjointSlice<'_, T, BlockRows<O>> {
    /// Row `me` seen by this thread, if the whole row lies inside the buffer (one check per
    /// row): columns `threadIdx.x, threadIdx.x + blockDim.x, ...` below `cols`.
    #[inline(always)]
    #[track_caller]
    pub fn row_mut(&mut self, me: BlockRow<O>) -> Option<ThreadRow<'_, T>> {
        let row = me.owned();
        let (lane, stride) = (thread_idx_x(), block_dim_x());
        // SAFETY: this output exists only in a 1-D launch (`REQUIREMENTS`), so `threadIdx.x <
        // blockDim.x` names one thread of the block; the row is one of this block's (a
        // `BlockRow` of the running thread), see `BlockRows`.
        unsafe { LaneRow::new(self, row, lane, stride) }
    }
}

/// The partition of `DisjointSlice<T, RotaryPairs<HEAD, HALF>>`: rows as [`BlockRows`] (a
/// row per block, grid-strided; `cols` from `#[kernel(cols(name = ..))]`), each row cut into
/// heads of `HEAD` elements, and in each head the pairs `(k, k + HALF)` for `k < HALF`: the
/// NeoX rotary embedding on q/k, in place (vLLM's `rotary_embedding_kernel`, `IS_NEOX`:
/// `x = arr[k]`, `y = arr[k + embed_dim]`, both rewritten by one thread).
///
/// ```ignore
/// #[kernel(cols(q = width))]
/// pub fn rotary(mut q: DisjointSlice<f32, RotaryPairs<128, 64>>, cos_sin: &[f32], width: u32) {
///     let me = block_row();                                 // the token
///     let Some(pairs) = q.pairs_mut(me) else { return };
///     for (_head, k, x, y) in pairs {                       // units threadIdx.x + blockDim.x j
///         let (c, s) = (cos_sin[k as usize], cos_sin[64 + k as usize]);
///         (*x, *y) = (*x * c - *y * s, *y * c + *x * s);
///     }
/// }
/// ```
///
/// Map: witness [`BlockRow`] `r` -> for each unit `u = threadIdx.x + blockDim.x j` below
/// `(cols / HEAD) HALF`, with `h = u / HALF`, `k = u % HALF`, the elements `r cols + h HEAD + k`
/// and `r cols + h HEAD + k + HALF`. Disjoint: rows as [`BlockRows`]; `u -> (h, k)` is
/// one-to-one, and `(h, k) -> {h HEAD + k, h HEAD + k + HALF}` gives disjoint pairs (`k <
/// HALF`, `2 HALF <= HEAD`, checked at compile time), inside the row (`h < cols / HEAD`);
/// units of a block's threads are distinct modulo `blockDim.x`. The elements `2 HALF .. HEAD`
/// of each head (a partial rotary) belong to nobody. Launch: 1-D (`LINEAR_THREADS`).
pub struct RotaryPairs<const HEAD: u32, const HALF: u32>;

// SAFETY: as the doc above; `pairs_mut` checks the row inside the buffer once, the iterator
// keeps units below `(cols / HEAD) HALF`.
unsafe impl<const HEAD: u32, const HALF: u32> Partition for RotaryPairs<HEAD, HALF> {
    const KEY: u64 = super::slice::partition_key("RotaryPairs", &[HEAD as u64, HALF as u64]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS;
    type Shape = u32;
    const VALID: () = assert!(HALF > 0 && HALF <= HEAD / 2, "RotaryPairs<HEAD, HALF> needs 0 < HALF and 2 HALF <= HEAD");
}

impl<T: Pod, const HEAD: u32, const HALF: u32> DisjointSlice<'_, T, RotaryPairs<HEAD, HALF>> {
    /// This thread's pairs of row `me`, if the whole row lies inside the buffer (one check
    /// per row): `(head, k, &mut x, &mut y)` for its units `threadIdx.x + blockDim.x j`.
    #[inline(always)]
    #[track_caller]
    pub fn pairs_mut(&mut self, me: BlockRow) -> Option<RotaryPairsIter<'_, T, HEAD, HALF>> {
        let row = me.owned();
        let cols = self.shape;
        // `row, cols < 2^32`: no overflow in u64.
        if (row as u64 + 1) * cols as u64 > self.len as u64 {
            return None;
        }
        let start = row as usize * cols as usize;
        Some(RotaryPairsIter {
            // SAFETY: `start + cols <= len`: inside the buffer (or one past its end).
            row: unsafe { self.pointer.add(start) },
            start,
            output: self.pointer,
            len: self.len,
            unit: thread_idx_x(),
            units: (cols / HEAD) * HALF,
            step: block_dim_x(),
            _output: PhantomData,
        })
    }
}

/// The iterator of [`DisjointSlice::pairs_mut`] (a [`RotaryPairs`] output).
pub struct RotaryPairsIter<'a, T: Pod, const HEAD: u32, const HALF: u32> {
    row: *mut T,
    start: usize,
    output: *mut T,
    len: usize,
    unit: u32,
    units: u32,
    step: u32,
    _output: PhantomData<&'a mut T>,
}

impl<'a, T: Pod, const HEAD: u32, const HALF: u32> Iterator for RotaryPairsIter<'a, T, HEAD, HALF> {
    type Item = (u32, u32, &'a mut T, &'a mut T);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.unit < self.units {
            let u = self.unit;
            // Saturating: never wraps back to a smaller unit.
            self.unit = u.saturating_add(self.step);
            let (head, k) = (u / HALF, u % HALF);
            let x = head as usize * HEAD as usize + k as usize;
            let y = x + HALF as usize;
            super::note_output(self.output, self.len, self.start + x, 1, true);
            super::note_output(self.output, self.len, self.start + y, 1, true);
            // SAFETY: `head < cols / HEAD`, `k < HALF`: `x < y < (head + 1) HEAD <= cols`,
            // inside the row (checked by `pairs_mut`); the pair belongs to this thread alone
            // (see `RotaryPairs`), each unit is yielded once (it only grows), and `x != y`.
            Some(unsafe { (head, k, &mut *self.row.add(x), &mut *self.row.add(y)) })
        } else {
            None
        }
    }
}
