//! [`PerWarpRow`]: a row-major matrix output with one row per warp, its lanes striding over
//! the row; and its witness [`WarpRow`].

use core::marker::PhantomData;

use bytemuck::Pod;

use super::LaunchRequirements;
use super::order::{Forward, Reversed, RowOrder};
use super::segment_rows::{SegmentRow, SegmentRowIter, segment_row, segment_rows};
use super::slice::{DisjointSlice, Partition};

/// This thread's warp and lane for a [`PerWarpRow`] output: warp `w = t / 32` and lane `t %
/// 32` of the 1-D thread index `t = blockIdx.x * blockDim.x + threadIdx.x`. Made only by
/// [`warp_row`]; `Copy` but not `Send`, `Sync` or `Pod` (see [`ThreadIndex`](super::ThreadIndex)),
/// checked against the running thread on the CPU executor.
///
/// In a launch that a `PerWarpRow`'s launcher accepted (1-D, at most `u32::MAX` threads,
/// blocks of whole warps) `w` is the hardware warp's global index and `(w, lane)` names one
/// thread. `O` is the order the blocks take rows in ([`Forward`], or [`Reversed`] from
/// [`warp_row_reversed`]/[`warp_rows_reversed`]); a witness fits only an output of its order.
///
/// A [`SegmentRow<32>`](SegmentRow) (the same map: [`SegmentRows<32>`](super::SegmentRows) is
/// `PerWarpRow`'s partition without the row order) with the order as a type parameter: its
/// accessors and the CPU executor's owner check are `SegmentRow`'s (session 19). Its own type,
/// so that a compile error names `WarpRow` and a forward witness stays off reversed outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WarpRow<O: RowOrder = Forward> {
    segment: SegmentRow<32>,
    _order: PhantomData<fn() -> O>,
}

/// This thread's [`WarpRow`]: `(t / 32, t % 32)` for the 1-D thread index `t` (a shift and a
/// mask after CUDA's 1-D index).
#[inline(always)]
pub fn warp_row() -> WarpRow {
    WarpRow { segment: segment_row::<32>(), _order: PhantomData }
}

/// The warp's slot in a launch whose blocks take rows in order `O`: `O::slot(blockIdx.x,
/// gridDim.x) * (blockDim.x / 32) + threadIdx.x / 32` (the global warp index `t / 32` for
/// [`Forward`]).
#[inline(always)]
fn warp_slot<O: RowOrder>() -> u32 {
    use crate::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};
    O::slot(block_idx_x(), grid_dim_x()).wrapping_mul(block_dim_x() / 32).wrapping_add(thread_idx_x() / 32)
}

/// This thread's reversed witness: its warp's reversed slot and its lane (see
/// [`warp_row_reversed`]).
#[inline(always)]
fn reversed_segment() -> SegmentRow<32> {
    // The map of `WarpRows<Reversed>`: the slot is this warp's (a bijection of the launch's
    // warps), the lane this thread's.
    SegmentRow::at(warp_slot::<Reversed>(), crate::thread::thread_idx_x() % 32)
}

/// This thread's [`WarpRow`] with the blocks in reverse order: row `(gridDim.x - 1 -
/// blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32` (llm.c's softmax: `(gridDim.x -
/// blockIdx.x - 1) * num_warps + warp_id`), lane `threadIdx.x % 32`, for a
/// `PerWarpRow<T, Reversed>` output. Map and proof: [`WarpRows`].
#[inline(always)]
pub fn warp_row_reversed() -> WarpRow<Reversed> {
    WarpRow { segment: reversed_segment(), _order: PhantomData }
}

impl<O: RowOrder> WarpRow<O> {
    /// The row (the warp's global index), to index inputs with.
    #[inline(always)]
    pub fn row(self) -> u32 {
        self.segment.row()
    }

    /// The lane, `0..32`.
    #[inline(always)]
    pub fn lane(self) -> u32 {
        self.segment.lane()
    }

    #[inline(always)]
    #[track_caller]
    fn owned(self) -> SegmentRow<32> {
        self.segment.owned_as("WarpRow")
    }
}

/// A row-major matrix output of `cols` columns with one row per warp: warp `w` of a 1-D launch
/// owns row `w`, and its lane `l` the columns `l, l + 32, l + 64, ...` of it: the "one warp per
/// row" map of softmax and layer-norm kernels. The elements may be vectors (`Float4`), so a
/// lane's accesses are 16-byte and a warp's 512 contiguous bytes. With `cols = 1` it is "one
/// value per warp, written by lane 0" (a row's mean).
///
/// ```ignore
/// #[kernel(cols(out = 256))]
/// pub fn scale_rows(input: &[f32], mut out: PerWarpRow<f32>, rows: u32) {
///     let me = warp_row();
///     let Some(mut row) = out.row_mut(me) else { return };
///     for j in 0..8 {
///         if let Some(o) = row.get_mut(j) { *o = 2.0; }
///     }
/// }
/// ```
///
/// The width comes from `#[kernel(cols(name = ..))]` (a by-value `u32` parameter or a
/// constant, the same in every thread). Every launcher refuses a launch that is not 1-D, has
/// more than `u32::MAX` threads, or has blocks that are not whole warps (`NotWholeWarps`).
///
/// `PerWarpRow<T, Reversed>` runs the blocks backwards (llm.c's softmax): witnesses from
/// [`warp_row_reversed`] and [`warp_rows_reversed`].
pub type PerWarpRow<'a, T, O = Forward> = DisjointSlice<'a, T, WarpRows<O>>;

/// The partition of [`PerWarpRow`]: witness [`WarpRow`] `(w, l)` (row `w`, lane `l`) ->
/// elements `w * cols + l + 32 j` for `l + 32 j < cols`. The rows of warp `g` (its global
/// index `t / 32`) are `g, g + warps, g + 2 warps, ...` (`warps` = the launch's warps; only
/// [`warp_rows`] gives the later ones). Disjoint: `(row, col) -> row * cols + col` is
/// one-to-one on `col < cols`; distinct lanes reach distinct columns (congruent to the lane
/// modulo 32); rows congruent to `g` modulo `warps` belong to warp `g` alone, and under
/// `LINEAR_WARPS` (1-D, at most `u32::MAX` threads, blocks of whole warps) `(g, lane)` names
/// one thread.
///
/// With the order [`Reversed`] (`WarpRows<Reversed>`), warp `w` of block `b` has the slot `s
/// = (G - 1 - b) W + w` in place of `g = b W + w` (`G = gridDim.x`, `W = blockDim.x / 32`,
/// whole warps by `LINEAR_WARPS`) and the rows `s, s + warps, ...`. `(b, w) -> (G - 1 - b, w)`
/// is a bijection of the launch's warps, so the slots are distinct as the `g` are, and the
/// proof above holds with `s` for `g`. The witness type carries the order, so a forward
/// [`WarpRow`] never reaches a reversed output (where its row would be another warp's).
pub struct WarpRows<O: RowOrder = Forward>(PhantomData<O>);

// SAFETY: as the doc above: every access goes through a `WarpRow<O>`, whose row is congruent
// to its thread's slot (for `O`) modulo the launch's warps and whose lane is its thread's;
// rows are checked inside the buffer once (`row_mut`) and columns below `cols` at each access.
unsafe impl<O: RowOrder> Partition for WarpRows<O> {
    const KEY: u64 = super::slice::partition_key("WarpRows", &[O::KEY]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_WARPS;
    type Shape = u32;
}

impl<T: Pod, O: RowOrder> DisjointSlice<'_, T, WarpRows<O>> {
    /// This warp's row, seen by this lane, if the whole row lies inside the buffer (one
    /// check, made once).
    #[inline(always)]
    #[track_caller]
    pub fn row_mut(&mut self, me: WarpRow<O>) -> Option<LaneRow<'_, T>> {
        let me = me.owned();
        // SAFETY: `(row, lane)` comes from a `WarpRow` of the running thread: the row is one of
        // its warp's (congruent to the warp's index modulo the launch's warps), the lane is
        // its own (`< 32`), and lanes stride by 32 (see `WarpRows`).
        unsafe { LaneRow::new(self, me.row(), me.lane(), 32) }
    }
}

/// The rows of this thread's warp below `rows`, grid-strided over warps: `g, g + warps, g + 2
/// warps, ...` with `g = t / 32` the warp's global index and `warps = gridDim.x * blockDim.x /
/// 32` (CUDA's `for (row = warp; row < N; row += num_warps)`), each as a [`WarpRow`] for a
/// [`PerWarpRow`] output. A step past `u32` ends the walk (no wrap onto another warp's row).
#[inline(always)]
pub fn warp_rows(rows: u32) -> WarpRowIter {
    WarpRowIter { segments: segment_rows::<32>(rows), _order: PhantomData }
}

/// [`warp_rows`] with the blocks in reverse order: the rows `s, s + warps, ...` below `rows`
/// from this warp's reversed slot `s = (gridDim.x - 1 - blockIdx.x) * (blockDim.x / 32) +
/// threadIdx.x / 32`, for a `PerWarpRow<T, Reversed>` output.
#[inline(always)]
pub fn warp_rows_reversed(rows: u32) -> WarpRowIter<Reversed> {
    WarpRowIter { segments: SegmentRowIter::starting_at(reversed_segment(), rows), _order: PhantomData }
}

/// The iterator of [`warp_rows`] (and of [`warp_rows_reversed`], `O` = [`Reversed`]): a
/// [`SegmentRowIter<32>`](SegmentRowIter) whose items carry the order.
#[derive(Debug)]
pub struct WarpRowIter<O: RowOrder = Forward> {
    segments: SegmentRowIter<32>,
    _order: PhantomData<fn() -> O>,
}

impl<O: RowOrder> Iterator for WarpRowIter<O> {
    type Item = WarpRow<O>;

    #[inline(always)]
    fn next(&mut self) -> Option<WarpRow<O>> {
        self.segments.next().map(|segment| WarpRow { segment, _order: PhantomData })
    }
}

/// One thread's view of its row of a row-major output whose threads stride over the row:
/// columns `lane + stride j` below `cols`. A [`PerWarpRow`]'s lane (stride 32) or a
/// [`BlockRows`](super::partition::BlockRows) output's thread (stride `blockDim.x`).
pub struct LaneRow<'a, T: Pod> {
    row: *mut T,
    index: u32,
    start: usize,
    output: *mut T,
    len: usize,
    cols: u32,
    lane: u32,
    stride: u32,
    _output: PhantomData<&'a mut T>,
}

impl<'a, T: Pod> LaneRow<'a, T> {
    /// Row `row` of `output` (`cols` from its shape) for the thread at `lane` of threads that
    /// stride by `stride`, if the whole row lies inside the buffer (one check, made once).
    ///
    /// # Safety
    /// `lane < stride`, and no other thread of the launch reaches a column congruent to
    /// `lane` modulo `stride` of row `row` (the partition's map gives the row and the lane to
    /// this thread alone).
    #[inline(always)]
    pub(super) unsafe fn new<P: super::slice::Partition<Shape = u32>>(
        output: &'a mut DisjointSlice<'_, T, P>,
        row: u32,
        lane: u32,
        stride: u32,
    ) -> Option<Self> {
        let cols = output.shape;
        // `row, cols < 2^32`: no overflow in u64.
        let end = (row as u64 + 1) * cols as u64;
        if end <= output.len as u64 {
            let start = row as usize * cols as usize;
            Some(LaneRow {
                // SAFETY: `start <= end <= len`: inside the buffer (or one past its end).
                row: unsafe { output.pointer.add(start) },
                index: row,
                start,
                output: output.pointer,
                len: output.len,
                cols,
                lane,
                stride,
                _output: PhantomData,
            })
        } else {
            None
        }
    }

    /// Columns `first..first + count` of row `row` of `output` (elements `row cols + first
    /// ..`, `cols` the output's row width) for the thread at `lane` of threads that stride by
    /// `stride`: a tile of a row ([`RowTiles`](super::partition::RowTiles)). The view's columns
    /// count from `first`.
    ///
    /// # Safety
    /// Elements `start..start + count` (`start = row cols + first`) lie inside the buffer of
    /// `len` elements at `output`, `lane < stride`, and no other thread of the launch reaches
    /// an element `start + c` of them with `c` congruent to `lane` modulo `stride` (the
    /// partition's map gives the tile and the lane to this thread alone).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn from_span(output: *mut T, len: usize, row: u32, start: usize, count: u32, lane: u32, stride: u32) -> Self {
        LaneRow {
            // SAFETY: `start + count <= len` (the caller): inside the buffer or one past its end.
            row: unsafe { output.add(start) },
            index: row,
            start,
            output,
            len,
            cols: count,
            lane,
            stride,
            _output: PhantomData,
        }
    }

    /// The row (a number, to index inputs with).
    #[inline(always)]
    pub fn row(&self) -> u32 {
        self.index
    }

    /// The indices in the output buffer of the whole view (every thread's columns, not only
    /// this thread's): `row cols..(row + 1) cols` for a row, the tile's elements for a
    /// [`RowTiles`](super::partition::RowTiles) tile. Slice inputs of the output's shape with it
    /// (`mask.get(view.span())`) and walk them beside the view with
    /// [`zip_inputs`](Self::zip_inputs): no check per element.
    #[inline(always)]
    pub fn span(&self) -> core::ops::Range<usize> {
        self.start..self.start + self.cols as usize
    }

    /// This thread's first column (its lane: `lane` of the warp, or `threadIdx.x`).
    #[inline(always)]
    pub fn lane(&self) -> u32 {
        self.lane
    }

    /// The distance between this thread's columns (32, or `blockDim.x`).
    #[inline(always)]
    pub fn stride(&self) -> u32 {
        self.stride
    }

    /// The thread's `j`-th element: column `lane + stride j` (`stride` = 32 for a warp's
    /// lane, `blockDim.x` for a block's thread), or `None` past the row's end. With a constant
    /// width and unrolled `j` the check folds away.
    #[inline(always)]
    pub fn get_mut(&mut self, j: usize) -> Option<&mut T> {
        // Columns are below `cols`, a `u32`: computed in 32 bits (one instruction per add and
        // compare where `usize` takes two: issue 31, cross-entropy's gradient written 8
        // columns a lane a step). A `j` or a `stride j` past `u32` is past the row (checked,
        // no wrap); `lane + stride j` cannot wrap for a power-of-two stride (`lane < stride`
        // fills the low bits the multiple leaves zero; the compiler sees it) and is checked
        // otherwise.
        let step = u32::try_from(j).ok()?.checked_mul(self.stride)?;
        let col = if self.stride.is_power_of_two() { step | self.lane } else { step.checked_add(self.lane)? };
        if col < self.cols {
            let col = col as usize;
            super::note_output(self.output, self.len, self.start + col, 1, true);
            // SAFETY: `col < cols`: inside the row, which is inside the buffer (`new`); the
            // column belongs to this thread alone (`new`'s contract), and the borrow of `self`
            // keeps a second reference out.
            Some(unsafe { &mut *self.row.add(col) })
        } else {
            None
        }
    }

    /// The thread's elements beside the same columns of an input row: `(&input[c], &mut
    /// row[c])` for `c = lane, lane + stride, ...` below both `cols` and `input.len()`, with
    /// one bound computed once (a loop as short as CUDA's `for (c = lane; c < n; c += stride)`).
    ///
    /// `K` input elements per output element (vLLM's int8 quantiser reads two 16-byte packs of
    /// bf16 per 16-byte pack of `i8`): zip the input's `K`-element chunks,
    /// `row.zip_input(x.as_chunks::<K>().0)`, and read `pair[0]`, `pair[1]`; indexing
    /// `x[2 * i]` beside the row's iterator and a counter keeps a bound check per load (and
    /// with it the kernel's panic path).
    #[inline(always)]
    pub fn zip_input<'b, U>(self, input: &'b [U]) -> LaneRowZip<'a, 'b, T, U> {
        let end = (self.cols as usize).min(input.len());
        LaneRowZip {
            row: self.row,
            input: input.as_ptr(),
            start: self.start,
            output: self.output,
            len: self.len,
            col: self.lane as usize,
            stride: self.stride as usize,
            end,
            _borrows: PhantomData,
        }
    }

    /// [`zip_input`](Self::zip_input) over several input rows at once: `([&a[c], &b[c], ..],
    /// &mut row[c])` for `c = lane, lane + stride, ...` below `cols` and every input's length,
    /// with one bound computed once. For kernels that read two or more rows per output row at
    /// the same column (vLLM's `act_and_mul` reads `x` and `y` halves, `moe_sum` `TOPK` expert
    /// rows): `input.split_at(d)` or `chunks_exact(d)` gives the rows, and no access inside the
    /// loop is checked again (an index such as `ys[c]` or `rows.get(k * d + c)` keeps a
    /// 64-bit compare per access: vLLM's `moe_sum` ran at 0.90x nvcc's with it, issue 30).
    /// Iterate two or more inputs with `for_each` (`row.zip_inputs([x, w]).for_each(|([x, w],
    /// o)| ..)`): a `for` loop over them reads the inputs without `ld.global.nc` (see
    /// [`LaneRowZipN`]'s `fold`); one input keeps `.nc` either way.
    #[inline(always)]
    pub fn zip_inputs<'b, U, const N: usize>(self, inputs: [&'b [U]; N]) -> LaneRowZipN<'a, 'b, T, U, N> {
        let end = inputs.iter().fold(self.cols as usize, |end, input| end.min(input.len()));
        LaneRowZipN {
            row: self.row,
            inputs: inputs.map(|input| input.as_ptr()),
            start: self.start,
            output: self.output,
            len: self.len,
            col: self.lane as usize,
            stride: self.stride as usize,
            end,
            _borrows: PhantomData,
        }
    }

    /// `f` on the thread's elements in order (columns `lane, lane + stride, ...` below `cols`),
    /// four per step of the main loop while the fourth is in the row, then one by one: the
    /// shape nvcc gives a `for (int i = tid; i < n; i += block_size)` loop over an `int` stride
    /// (unrolled by 4 with a run-time stride; nvcc keeps `i += blockDim.x` itself rolled: read
    /// the twin's SASS first, docs/performance.md), without its trip-count division (session 18, an opt-in experiment for
    /// issue 30's gap 2: [`iter_mut`](Self::iter_mut) and [`zip_input`](Self::zip_input) keep
    /// one load in flight where the body is small; a large body unrolled 4 times costs code
    /// and registers, which is why this is not the default: bench/results/s18-part).
    #[inline(always)]
    pub fn for_each_x4(self, mut f: impl FnMut(&mut T)) {
        let (cols, stride) = (self.cols as usize, self.stride as usize);
        let mut col = self.lane as usize;
        // `stride >= 1` (a lane below it); `col < cols <= u32::MAX` and `stride <= u32::MAX`,
        // so no sum below overflows a `usize` (64 bits).
        if stride == 0 {
            return;
        }
        while col + 3 * stride < cols {
            for k in 0..4 {
                let c = col + k * stride;
                super::note_output(self.output, self.len, self.start + c, 1, true);
                // SAFETY: `c <= col + 3 stride < cols`: inside the row, which is inside the
                // buffer (`new`); the column is this thread's (congruent to its lane), each
                // visited once, so the references never overlap.
                f(unsafe { &mut *self.row.add(c) });
            }
            col += 4 * stride;
        }
        while col < cols {
            super::note_output(self.output, self.len, self.start + col, 1, true);
            // SAFETY: as above, `col < cols`.
            f(unsafe { &mut *self.row.add(col) });
            col += stride;
        }
    }

    /// [`for_each_x4`](Self::for_each_x4) beside the same columns of an input row: `f(&input[c],
    /// &mut row[c])` for the thread's columns `c` below both `cols` and `input.len()`, four per
    /// step of the main loop (the four loads issued together).
    #[inline(always)]
    pub fn zip_input_for_each_x4<U>(self, input: &[U], mut f: impl FnMut(&U, &mut T)) {
        let end = (self.cols as usize).min(input.len());
        let stride = self.stride as usize;
        let mut col = self.lane as usize;
        if stride == 0 {
            return;
        }
        let x = input.as_ptr();
        while col + 3 * stride < end {
            for k in 0..4 {
                let c = col + k * stride;
                super::note_output(self.output, self.len, self.start + c, 1, true);
                // SAFETY: `c < end`: below `cols` (as in `for_each_x4`) and `input.len()`.
                unsafe { f(&*x.add(c), &mut *self.row.add(c)) };
            }
            col += 4 * stride;
        }
        while col < end {
            super::note_output(self.output, self.len, self.start + col, 1, true);
            // SAFETY: as above, `col < end`.
            unsafe { f(&*x.add(col), &mut *self.row.add(col)) };
            col += stride;
        }
    }

    /// The thread's elements in order: columns `lane, lane + stride, ...` below `cols`.
    #[inline(always)]
    pub fn iter_mut(self) -> LaneRowIter<'a, T> {
        LaneRowIter {
            row: self.row,
            start: self.start,
            output: self.output,
            len: self.len,
            col: self.lane,
            cols: self.cols,
            stride: self.stride,
            _output: PhantomData,
        }
    }
}

/// The iterator of [`LaneRow::iter_mut`].
pub struct LaneRowIter<'a, T: Pod> {
    row: *mut T,
    start: usize,
    output: *mut T,
    len: usize,
    col: u32,
    cols: u32,
    stride: u32,
    _output: PhantomData<&'a mut T>,
}

impl<'a, T: Pod> Iterator for LaneRowIter<'a, T> {
    type Item = &'a mut T;

    #[inline(always)]
    fn next(&mut self) -> Option<&'a mut T> {
        if self.col < self.cols {
            let col = self.col as usize;
            // Saturating: never wraps back to a smaller column.
            self.col = self.col.saturating_add(self.stride);
            super::note_output(self.output, self.len, self.start + col, 1, true);
            // SAFETY: as in `LaneRow::get_mut`; each column is yielded once (the column only
            // grows), so the references never overlap.
            Some(unsafe { &mut *self.row.add(col) })
        } else {
            None
        }
    }

    /// Internal iteration (`for_each`, `fold`, `sum`, ..): the same steps as `next` without an
    /// `Option` per step (see [`LaneRowZipN::fold`]).
    #[inline(always)]
    fn fold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        let mut acc = init;
        while self.col < self.cols {
            let col = self.col as usize;
            self.col = self.col.saturating_add(self.stride);
            super::note_output(self.output, self.len, self.start + col, 1, true);
            // SAFETY: as in `next`.
            acc = f(acc, unsafe { &mut *self.row.add(col) });
        }
        acc
    }
}

/// The iterator of [`LaneRow::zip_input`].
pub struct LaneRowZip<'a, 'b, T: Pod, U> {
    row: *mut T,
    input: *const U,
    start: usize,
    output: *mut T,
    len: usize,
    col: usize,
    stride: usize,
    /// `min(cols, input.len())`.
    end: usize,
    _borrows: PhantomData<(&'a mut T, &'b [U])>,
}

impl<'a, 'b, T: Pod, U> Iterator for LaneRowZip<'a, 'b, T, U> {
    type Item = (&'b U, &'a mut T);

    #[inline(always)]
    fn next(&mut self) -> Option<(&'b U, &'a mut T)> {
        if self.col < self.end {
            let col = self.col;
            // `col < end <= u32::MAX` and `stride <= u32::MAX`: no overflow in usize.
            self.col = col + self.stride;
            super::note_output(self.output, self.len, self.start + col, 1, true);
            // SAFETY: `col < cols` (inside this thread's row, as in `LaneRow::get_mut`;
            // yielded once, the column only grows) and `col < input.len()`.
            Some(unsafe { (&*self.input.add(col), &mut *self.row.add(col)) })
        } else {
            None
        }
    }

    /// Internal iteration (`for_each`, `fold`, ..): the same steps as `next` without an
    /// `Option` per step (see [`LaneRowZipN::fold`]).
    #[inline(always)]
    fn fold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        let mut acc = init;
        while self.col < self.end {
            let col = self.col;
            self.col = col + self.stride;
            super::note_output(self.output, self.len, self.start + col, 1, true);
            // SAFETY: as in `next`.
            acc = f(acc, unsafe { (&*self.input.add(col), &mut *self.row.add(col)) });
        }
        acc
    }
}

/// The iterator of [`LaneRow::zip_inputs`].
pub struct LaneRowZipN<'a, 'b, T: Pod, U, const N: usize> {
    row: *mut T,
    inputs: [*const U; N],
    start: usize,
    output: *mut T,
    len: usize,
    col: usize,
    stride: usize,
    /// `min(cols, every input's length)`.
    end: usize,
    _borrows: PhantomData<(&'a mut T, &'b [U])>,
}

impl<'a, 'b, T: Pod, U, const N: usize> Iterator for LaneRowZipN<'a, 'b, T, U, N> {
    type Item = ([&'b U; N], &'a mut T);

    #[inline(always)]
    fn next(&mut self) -> Option<([&'b U; N], &'a mut T)> {
        if self.col < self.end {
            let col = self.col;
            // `col < end <= u32::MAX` and `stride <= u32::MAX`: no overflow in usize.
            self.col = col + self.stride;
            super::note_output(self.output, self.len, self.start + col, 1, true);
            // SAFETY: `col < cols` (inside this thread's row, as in `LaneRow::get_mut`;
            // yielded once, the column only grows) and `col` is below every input's length.
            Some(unsafe { (refs_at(&self.inputs, col), &mut *self.row.add(col)) })
        } else {
            None
        }
    }

    /// Internal iteration (`for_each`, `fold`, ..): the same steps as `next` without an
    /// `Option` per step. A `for` loop calls `next`, whose `None` LLVM materialises as null
    /// pointers merged into the loop's pointers; NVPTX then cannot trace the input pointers to
    /// the kernel's read-only parameters and reads them with plain `ld.global` instead of
    /// `ld.global.nc` (llm.c's `layernorm_forward_kernel3`: `weight` and `bias` lost `.nc`,
    /// issue 30's second port). `row.zip_inputs([..]).for_each(|([x, w], o)| ..)` keeps `.nc`.
    /// Still so for two or more inputs; one input (`zip_inputs([x])`) keeps `.nc` in a `for`
    /// loop too since `refs_at` builds the array without a loop (bench/ports2's
    /// `ports2_ptx` pins both).
    #[inline(always)]
    fn fold<B, F: FnMut(B, Self::Item) -> B>(mut self, init: B, mut f: F) -> B {
        let mut acc = init;
        while self.col < self.end {
            let col = self.col;
            self.col = col + self.stride;
            super::note_output(self.output, self.len, self.start + col, 1, true);
            // SAFETY: as in `next`.
            acc = f(acc, unsafe { (refs_at(&self.inputs, col), &mut *self.row.add(col)) });
        }
        acc
    }
}

/// `[&*inputs[0].add(col), &*inputs[1].add(col), ..]` built without a loop: each element is
/// written at a constant index (the first eight by hand, any further ones by a loop), so that
/// the references are plain values as soon as the caller is inlined. With `inputs.map(..)`
/// (a loop over `N` that LLVM unrolls only later) a `for` loop over [`LaneRowZipN`] kept the
/// item's pointers merged with the `None` of `next()` and read every input without
/// `ld.global.nc` (issue 30's second port: llm.c's layer norm at 0.94x).
///
/// # Safety
/// `col` is below every input's length (each `inputs[i]` a slice's pointer), and the slices
/// outlive `'b`.
#[inline(always)]
unsafe fn refs_at<'b, U, const N: usize>(inputs: &[*const U; N], col: usize) -> [&'b U; N] {
    let mut refs = core::mem::MaybeUninit::<[&'b U; N]>::uninit();
    let out = refs.as_mut_ptr().cast::<&'b U>();
    macro_rules! put {
        ($($i:literal)*) => {$(
            if $i < N {
                // SAFETY: `$i < N`: inside both arrays; the element is in its slice (caller).
                unsafe { out.add($i).write(&*(*inputs.as_ptr().add($i)).add(col)) };
            }
        )*};
    }
    put!(0 1 2 3 4 5 6 7);
    // A range with constant ends, empty for `N <= 8` (folded at once, unlike an iterator
    // adapter chain, which LLVM would simplify only after the loop passes).
    #[allow(clippy::needless_range_loop)]
    for i in 8..N {
        // SAFETY: as above.
        unsafe { out.add(i).write(&*inputs[i].add(col)) };
    }
    // SAFETY: every element `0..N` was written above.
    unsafe { refs.assume_init() }
}
