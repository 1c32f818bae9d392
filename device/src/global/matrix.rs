//! [`DisjointMatrix`]: a row-major matrix output whose element (row `y`, column `x`) belongs
//! to the thread at 2-D position `(x, y)`, and its witness [`ThreadCell`].

use core::marker::PhantomData;

use bytemuck::Pod;

use super::LaunchRequirements;
use super::index::NotSend;
use super::slice::{DisjointSlice, Partition};
use crate::thread::{block_dim_x, block_dim_y, block_idx_x, block_idx_y, grid_dim_x, grid_dim_y, thread_idx_x, thread_idx_y};

/// A cell (row, column) of a row-major matrix that no other thread of the launch holds: the
/// proof a [`DisjointMatrix`] asks for. Made only by [`unique_cell`] and [`grid_stride_2d`].
///
/// Thread `(x, y)` (`x = blockIdx.x * blockDim.x + threadIdx.x`, `y` the same along y) gets the
/// cells `(y + k H, x + m W)` with `W = gridDim.x * blockDim.x` and `H = gridDim.y *
/// blockDim.y`: the cells whose column is congruent to `x` modulo `W` and whose row is
/// congruent to `y` modulo `H`. Two threads never get the same cell, because the launcher of a
/// kernel with a `DisjointMatrix` refuses launches with `z > 1` or with more than `u32::MAX`
/// threads along x or y (`LaunchRequirements::PLANAR_THREADS`): `(x, y)` is computed in `u32`
/// without wrapping and names one thread.
///
/// It is `Copy` but neither `Send` nor `Sync`, not `Pod` and has no public constructor, like
/// [`ThreadIndex`](super::ThreadIndex); on the CPU executor each use checks that the thread
/// using it made it.
///
/// `ThreadCell<true>` is the transposed witness, from [`unique_cell_transposed`]: thread `(x,
/// y)`'s cell is (row `x`, column `y`). It fits only a [`DisjointMatrix<T, true>`]: in one
/// output, thread `(1, 2)`'s plain cell `(2, 1)` and thread `(2, 1)`'s transposed cell `(2, 1)`
/// would be one element, so the flag is part of both types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ThreadCell<const TRANSPOSED: bool = false> {
    row: u32,
    col: u32,
    #[cfg(not(target_arch = "nvptx64"))]
    owner: [u32; 6],
    _this_thread: NotSend,
}

/// On the CPU executor, the block and thread coordinates of the thread that makes a witness;
/// nothing on the GPU.
#[cfg(not(target_arch = "nvptx64"))]
type Owner = [u32; 6];
#[cfg(target_arch = "nvptx64")]
type Owner = ();

#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
fn this_thread() -> Owner {
    super::index::block_thread()
}
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn this_thread() -> Owner {}

/// A `ThreadCell` for `(row, col)`, made by `owner` (a free function, not an associated one:
/// no constructor to suggest to a kernel that tries to build a witness).
#[inline(always)]
fn make_cell<const TRANSPOSED: bool>(row: u32, col: u32, #[cfg_attr(target_arch = "nvptx64", allow(unused_variables))] owner: Owner) -> ThreadCell<TRANSPOSED> {
    ThreadCell {
        row,
        col,
        #[cfg(not(target_arch = "nvptx64"))]
        owner,
        _this_thread: PhantomData,
    }
}

impl<const TRANSPOSED: bool> ThreadCell<TRANSPOSED> {
    /// The row, to index inputs with.
    #[inline(always)]
    pub fn row(self) -> u32 {
        self.row
    }

    /// The column, to index inputs with.
    #[inline(always)]
    pub fn col(self) -> u32 {
        self.col
    }

    /// `(row, col)` for an access to an output: on the CPU executor, after checking that the
    /// running GPU thread made the witness.
    #[inline(always)]
    #[track_caller]
    fn owned(self) -> (u32, u32) {
        #[cfg(not(target_arch = "nvptx64"))]
        if self.owner != super::index::block_thread() {
            super::index::used_by_another_thread("ThreadCell", self.row as usize);
        }
        (self.row, self.col)
    }
}

/// This thread's cell: row `blockIdx.y * blockDim.y + threadIdx.y`, column `blockIdx.x *
/// blockDim.x + threadIdx.x`, each one `mad.lo.u32` (CUDA's 2-D index). Unique because the
/// launcher of a kernel with a [`DisjointMatrix`] checks the launch is 2-D with each axis's
/// thread count within `u32` (see [`ThreadCell`]).
#[inline(always)]
pub fn unique_cell() -> ThreadCell {
    let col = block_idx_x().wrapping_mul(block_dim_x()).wrapping_add(thread_idx_x());
    let row = block_idx_y().wrapping_mul(block_dim_y()).wrapping_add(thread_idx_y());
    make_cell(row, col, this_thread())
}

/// This thread's transposed cell: row `blockIdx.x * blockDim.x + threadIdx.x`, column
/// `blockIdx.y * blockDim.y + threadIdx.y` (llm.c's `matmul_forward_kernel1`: `bt` from x, `oc`
/// from y, `out[bt * OC + oc]`), for a [`DisjointMatrix<T, true>`] output. Unique for the same
/// reason as [`unique_cell`] (`(x, y)` names one thread under `PLANAR_THREADS`); the swap is
/// free (the same two `mad.lo.u32`).
#[inline(always)]
pub fn unique_cell_transposed() -> ThreadCell<true> {
    let row = block_idx_x().wrapping_mul(block_dim_x()).wrapping_add(thread_idx_x());
    let col = block_idx_y().wrapping_mul(block_dim_y()).wrapping_add(thread_idx_y());
    make_cell(row, col, this_thread())
}

/// A 2-D grid-stride loop over a `rows x cols` matrix: this thread's cells `(y + k H, x + m
/// W)` with row below `rows` and column below `cols` (see [`ThreadCell`]), row by row. The
/// steps saturate at `u32::MAX`, which is never below a `u32` bound, so a step never wraps
/// onto another thread's cell.
#[inline(always)]
pub fn grid_stride_2d(rows: u32, cols: u32) -> GridStride2d {
    let first = unique_cell();
    let width = grid_dim_x().wrapping_mul(block_dim_x());
    let height = grid_dim_y().wrapping_mul(block_dim_y());
    GridStride2d { row: first.row, col: first.col, first_col: first.col, rows, cols, width, height, owner: this_thread(), _this_thread: PhantomData }
}

/// The iterator of [`grid_stride_2d`].
#[derive(Debug)]
pub struct GridStride2d {
    row: u32,
    col: u32,
    first_col: u32,
    rows: u32,
    cols: u32,
    width: u32,
    height: u32,
    owner: Owner,
    _this_thread: NotSend,
}

impl Iterator for GridStride2d {
    type Item = ThreadCell;

    #[inline(always)]
    fn next(&mut self) -> Option<ThreadCell> {
        loop {
            if self.row >= self.rows || self.first_col >= self.cols {
                return None;
            }
            if self.col < self.cols {
                let cell = make_cell(self.row, self.col, self.owner);
                self.col = self.col.saturating_add(self.width);
                return Some(cell);
            }
            self.col = self.first_col;
            self.row = self.row.saturating_add(self.height);
        }
    }
}

/// A row-major matrix output of `cols` columns whose element (row `r`, column `c`) belongs to
/// the thread holding the [`ThreadCell`] `(r, c)` (from [`unique_cell`] or
/// [`grid_stride_2d`]): CUDA's "thread (x, y) writes `out[y * cols + x]`".
///
/// The width is fixed for the whole launch: it comes from `#[kernel(cols(out = ..))]`, which
/// names a by-value `u32` parameter (the same in every thread) or a constant. A width chosen
/// per thread would let two threads alias (`(1, 0)` with 10 columns and `(2, 0)` with 5 both
/// reach element 10). Element `(r, c)` is `r * cols + c` with `c < cols`, one-to-one; the rows
/// are as many as fit in the buffer.
///
/// ```ignore
/// #[kernel(cols(out = cols))]
/// pub fn add_matrices(a: &[f32], b: &[f32], mut out: DisjointMatrix<f32>, cols: u32) {
///     let cell = unique_cell();
///     let i = cell.row() as usize * cols as usize + cell.col() as usize;
///     if let (Some(o), Some(&x), Some(&y)) = (out.get_mut(cell), a.get(i), b.get(i)) {
///         *o = x + y;
///     }
/// }
/// ```
///
/// Launch in 2-D (`z = 1`); every launcher refuses other shapes (`NotTwoDimensional`,
/// `TooManyThreadsAlongAxis`).
///
/// `DisjointMatrix<T, true>` is the transposed map (issue 30, the sixth port's gap 3): thread
/// `(x, y)` owns (row `x`, column `y`), `out[x * cols + y]`, through the `ThreadCell<true>` of
/// [`unique_cell_transposed`]. llm.c's `matmul_forward_kernel1` takes its output row (`bt`) from
/// x so that a warp's 16 threads along x read 16 rows of `inp`; keeping that grid keeps its
/// memory behaviour, and the store is a plain `st.global` (an `AtomicSlice` store was
/// `STG.E.STRONG.GPU`).
///
/// ```ignore
/// #[kernel(cols(out = oc_len))]
/// pub fn matmul(mut out: DisjointMatrix<f32, true>, inp: &[f32], weight: &[f32], c: u32, oc_len: u32) {
///     let cell = unique_cell_transposed();        // row = x (bt), column = y (oc)
///     let (bt, oc) = (cell.row() as usize, cell.col() as usize);
///     let (Some(x), Some(w)) = (inp.get(bt * c as usize..), weight.get(oc * c as usize..)) else { return };
///     if let Some(o) = out.get_mut(cell) {
///         *o = x.iter().zip(w).take(c as usize).map(|(a, b)| a * b).sum();
///     }
/// }
/// ```
pub type DisjointMatrix<'a, T, const TRANSPOSED: bool = false> = DisjointSlice<'a, T, Cells<TRANSPOSED>>;

/// The partition of [`DisjointMatrix`]: witness [`ThreadCell`] `(r, c)` -> element `r * cols
/// + c` for `c < cols` (`cols` from `#[kernel(cols(..))]`). Disjoint: the map is one-to-one on
/// `c < cols` with `cols` the same in every thread, and the cells are unique under
/// `PLANAR_THREADS` (see `ThreadCell`).
///
/// `Cells<true>` takes the transposed witnesses (`ThreadCell<true>`: thread `(x, y)` holds cell
/// `(x, y)` where a plain one holds `(y, x)`): the same map and proof, with `(x, y) -> (x, y)`
/// in place of `(x, y) -> (y, x)`, both one-to-one on the launch's threads. Each output takes
/// witnesses of its own flag only (the two kinds together would collide).
pub struct Cells<const TRANSPOSED: bool = false>;

// SAFETY: `(r, c) -> r * cols + c` is one-to-one on `c < cols` (checked at each access, with
// the end of the buffer), with `cols` the same in every thread (the shape's contract); every
// access goes through a `ThreadCell<TRANSPOSED>`, unique under `PLANAR_THREADS` (the plain
// ones are `(y, x)`, the transposed ones `(x, y)`: each an injective function of the thread).
unsafe impl<const TRANSPOSED: bool> Partition for Cells<TRANSPOSED> {
    const KEY: u64 = if TRANSPOSED { super::slice::partition_key("Cells", &[1]) } else { super::slice::partition_key("Cells", &[]) };
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::PLANAR_THREADS;
    type Shape = u32;
}

impl<T: Pod, const TRANSPOSED: bool> DisjointSlice<'_, T, Cells<TRANSPOSED>> {
    /// This thread's element at `cell`, or `None` if its column is not below `cols` or the
    /// element is past the end of the buffer.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut(&mut self, cell: ThreadCell<TRANSPOSED>) -> Option<&mut T> {
        let (row, col) = cell.owned();
        // `row, col, cols < 2^32`: `row * cols + col < 2^64`, no overflow.
        let cols = self.shape;
        let index = row as u64 * cols as u64 + col as u64;
        if col < cols && index < self.len as u64 {
            self.note(index as usize, 1, true);
            // SAFETY: in bounds; the element belongs to `cell` alone (see the impl of
            // `Partition`), and the borrow of `self` keeps this thread from a second
            // reference to it.
            Some(unsafe { &mut *self.pointer.add(index as usize) })
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(row: u32, col: u32, rows: u32, cols: u32, width: u32, height: u32) -> std::vec::Vec<(u32, u32)> {
        let stride = GridStride2d { row, col, first_col: col, rows, cols, width, height, owner: [0; 6], _this_thread: PhantomData };
        stride.map(|c| (c.row, c.col)).collect()
    }

    extern crate std;

    /// Self-audit: steps near `u32::MAX` saturate and stop; they never wrap to a small row or
    /// column, which would be another thread's cell.
    #[test]
    fn grid_stride_2d_steps_saturate_instead_of_wrapping() {
        let max = u32::MAX;
        // Rows max - 3 and max - 1, then a step past u32: stop (a wrap would give row 0).
        assert_eq!(walk(max - 3, 0, max, 1, 1, 2), [(max - 3, 0), (max - 1, 0)]);
        // The same along a row.
        assert_eq!(walk(0, max - 5, 1, max, 4, 1), [(0, max - 5), (0, max - 1)]);
        // A thread whose first column is past the width has no cell at all.
        assert_eq!(walk(0, 7, 3, 5, 8, 1), []);
        // Ordinary strides: rows y, y + H, columns x, x + W.
        assert_eq!(walk(1, 2, 6, 7, 4, 3), [(1, 2), (1, 6), (4, 2), (4, 6)]);
    }
}
