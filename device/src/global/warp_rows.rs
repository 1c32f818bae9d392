//! [`PerWarpRow`]: a row-major matrix output with one row per warp, its lanes striding over
//! the row; and its witness [`WarpRow`].

use core::marker::PhantomData;

use bytemuck::Pod;

use super::index::NotSend;
use super::{KernelOutput, LaunchRequirements};

/// This thread's warp and lane for a [`PerWarpRow`] output: warp `w = t / 32` and lane `t %
/// 32` of the 1-D thread index `t = blockIdx.x * blockDim.x + threadIdx.x`. Made only by
/// [`warp_row`]; `Copy` but not `Send`, `Sync` or `Pod` (see [`ThreadIndex`](super::ThreadIndex)),
/// checked against the running thread on the CPU executor.
///
/// In a launch that a `PerWarpRow`'s launcher accepted (1-D, at most `u32::MAX` threads,
/// blocks of whole warps) `w` is the hardware warp's global index and `(w, lane)` names one
/// thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WarpRow {
    row: u32,
    lane: u32,
    #[cfg(not(target_arch = "nvptx64"))]
    owner: u32,
    _this_thread: NotSend,
}

/// This thread's [`WarpRow`]: `(t / 32, t % 32)` for the 1-D thread index `t` (a shift and a
/// mask after CUDA's 1-D index).
#[inline(always)]
pub fn warp_row() -> WarpRow {
    let t = super::index::linear_thread();
    WarpRow {
        row: t / 32,
        lane: t % 32,
        #[cfg(not(target_arch = "nvptx64"))]
        owner: t,
        _this_thread: PhantomData,
    }
}

impl WarpRow {
    /// The row (the warp's global index), to index inputs with.
    #[inline(always)]
    pub fn row(self) -> u32 {
        self.row
    }

    /// The lane, `0..32`.
    #[inline(always)]
    pub fn lane(self) -> u32 {
        self.lane
    }

    #[inline(always)]
    #[track_caller]
    fn owned(self) -> Self {
        #[cfg(not(target_arch = "nvptx64"))]
        if self.owner != super::index::linear_thread() {
            super::index::used_by_another_thread("WarpRow", self.row as usize);
        }
        self
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
pub struct PerWarpRow<T: Pod> {
    pointer: *mut T,
    len: usize,
    cols: u32,
    _elements: PhantomData<*mut T>,
}

// SAFETY: (row, col) -> row * cols + col is one-to-one on col < cols, with cols the same in
// every thread (the shape's contract); a `WarpRow` (w, l) reaches only columns congruent to l
// modulo 32 of row w, and under `LINEAR_WARPS` no two threads hold the same (w, l).
unsafe impl<T: Pod> KernelOutput for PerWarpRow<T> {
    type Element = T;
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_WARPS;
    type Shape = u32;

    #[inline(always)]
    unsafe fn from_raw_parts(pointer: *mut T, len: usize, cols: u32) -> Self {
        PerWarpRow { pointer, len, cols, _elements: PhantomData }
    }
}

impl<T: Pod> super::RowMajorOutput for PerWarpRow<T> {}

impl<T: Pod> PerWarpRow<T> {
    /// Columns per row (the launch's `cols`).
    #[inline(always)]
    pub fn cols(&self) -> u32 {
        self.cols
    }

    /// Elements of the buffer.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the buffer is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// This warp's row, seen by this lane, if the whole row lies inside the buffer (one
    /// check, made once).
    #[inline(always)]
    #[track_caller]
    pub fn row_mut(&mut self, me: WarpRow) -> Option<LaneRow<'_, T>> {
        let me = me.owned();
        // `row < 2^27` (u32 threads / 32) and `cols < 2^32`: no overflow in u64.
        let end = (me.row as u64 + 1) * self.cols as u64;
        if end <= self.len as u64 {
            let start = me.row as usize * self.cols as usize;
            Some(LaneRow {
                // SAFETY: `start <= end <= len`: inside the buffer (or one past its end).
                row: unsafe { self.pointer.add(start) },
                start,
                output: self.pointer,
                len: self.len,
                cols: self.cols,
                lane: me.lane,
                _output: PhantomData,
            })
        } else {
            None
        }
    }
}

/// One lane's view of its warp's row of a [`PerWarpRow`]: columns `lane + 32 j`.
pub struct LaneRow<'a, T: Pod> {
    row: *mut T,
    start: usize,
    output: *mut T,
    len: usize,
    cols: u32,
    lane: u32,
    _output: PhantomData<&'a mut T>,
}

impl<'a, T: Pod> LaneRow<'a, T> {
    /// The lane's `j`-th element: column `lane + 32 j`, or `None` past the row's end. With a
    /// constant width and unrolled `j` the check folds away.
    #[inline(always)]
    pub fn get_mut(&mut self, j: usize) -> Option<&mut T> {
        // Wrapping: `32 j` stays a multiple of 32 modulo 2^64, so the column stays one of this
        // lane's; the bound keeps it in the row.
        let col = (self.lane as usize).wrapping_add(j.wrapping_mul(32));
        if col < self.cols as usize {
            super::note_output(self.output, self.len, self.start + col, 1, true);
            // SAFETY: `col < cols`: inside the row, which is inside the buffer (`row_mut`);
            // the column belongs to this lane of this warp alone (see the impl of
            // `KernelOutput`), and the borrow of `self` keeps a second reference out.
            Some(unsafe { &mut *self.row.add(col) })
        } else {
            None
        }
    }

    /// The lane's elements beside the same columns of an input row: `(&input[c], &mut
    /// row[c])` for `c = lane, lane + 32, ...` below both `cols` and `input.len()`, with one
    /// bound computed once (a loop as short as CUDA's `for (c = lane; c < n; c += 32)`).
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
            end,
            _borrows: PhantomData,
        }
    }

    /// The lane's elements in order: columns `lane, lane + 32, ...` below `cols`.
    #[inline(always)]
    pub fn iter_mut(self) -> LaneRowIter<'a, T> {
        LaneRowIter { row: self.row, start: self.start, output: self.output, len: self.len, col: self.lane, cols: self.cols, _output: PhantomData }
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
    _output: PhantomData<&'a mut T>,
}

impl<'a, T: Pod> Iterator for LaneRowIter<'a, T> {
    type Item = &'a mut T;

    #[inline(always)]
    fn next(&mut self) -> Option<&'a mut T> {
        if self.col < self.cols {
            let col = self.col as usize;
            // Saturating: never wraps back to a smaller column.
            self.col = self.col.saturating_add(32);
            super::note_output(self.output, self.len, self.start + col, 1, true);
            // SAFETY: as in `LaneRow::get_mut`; each column is yielded once (the column only
            // grows), so the references never overlap.
            Some(unsafe { &mut *self.row.add(col) })
        } else {
            None
        }
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
            // `col < end <= u32::MAX`: no overflow in usize.
            self.col = col + 32;
            super::note_output(self.output, self.len, self.start + col, 1, true);
            // SAFETY: `col < cols` (inside this lane's row, as in `LaneRow::get_mut`; yielded
            // once, the column only grows) and `col < input.len()`.
            Some(unsafe { (&*self.input.add(col), &mut *self.row.add(col)) })
        } else {
            None
        }
    }
}
