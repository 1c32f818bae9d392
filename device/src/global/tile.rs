//! [`PerBlockTile`]: a row-major matrix output cut into tiles, one per block, whose threads
//! stride over it; and its witness [`BlockTile`].

use core::marker::PhantomData;

use bytemuck::Pod;

use super::LaunchRequirements;
use super::index::NotSend;
use super::slice::{DisjointSlice, Partition};
use crate::thread::{block_idx_x, block_idx_y, thread_idx_x, thread_idx_y};

/// This thread's place in the launch for a [`PerBlockTile`] output: its block's `(x, y)` in
/// the grid and its `(x, y)` in the block. Made only by [`block_tile`]; `Copy` but not `Send`,
/// `Sync` or `Pod` (see [`ThreadIndex`](super::ThreadIndex)), checked against the running
/// thread on the CPU executor.
///
/// It names no element by itself: the output maps it to elements by its own type (tile shape,
/// thread shape, orientation), so one output has one map whatever the kernel does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockTile {
    block_x: u32,
    block_y: u32,
    thread_x: u32,
    thread_y: u32,
    #[cfg(not(target_arch = "nvptx64"))]
    owner: [u32; 6],
    _this_thread: NotSend,
}

/// This thread's [`BlockTile`]: `blockIdx.x`, `blockIdx.y`, `threadIdx.x`, `threadIdx.y`.
#[inline(always)]
pub fn block_tile() -> BlockTile {
    BlockTile {
        block_x: block_idx_x(),
        block_y: block_idx_y(),
        thread_x: thread_idx_x(),
        thread_y: thread_idx_y(),
        #[cfg(not(target_arch = "nvptx64"))]
        owner: super::index::block_thread(),
        _this_thread: PhantomData,
    }
}

impl BlockTile {
    #[inline(always)]
    #[track_caller]
    fn owned(self) -> Self {
        #[cfg(not(target_arch = "nvptx64"))]
        if self.owner != super::index::block_thread() {
            super::index::used_by_another_thread("BlockTile", self.block_x as usize);
        }
        self
    }

    /// `(block_x, block_y, thread_x, thread_y)`, after the CPU executor's owner check: for
    /// the other tile outputs of this module ([`PerThreadTile`](super::PerThreadTile)).
    #[inline(always)]
    #[track_caller]
    pub(super) fn owned_parts(self) -> (u32, u32, u32, u32) {
        let me = self.owned();
        (me.block_x, me.block_y, me.thread_x, me.thread_y)
    }
}

/// A row-major matrix output of `cols` columns cut into tiles of `TILE_ROWS x TILE_COLS`, one
/// per block of exactly `BLOCK_X x BLOCK_Y` threads, whose threads stride over it: thread
/// `(tx, ty)` owns the tile's elements (row `ty + BLOCK_Y i`, column `tx + BLOCK_X j`). Block
/// `(bx, by)` owns tile `(by, bx)` (tile row `by`, tile column `bx`), or tile `(bx, by)` when
/// `TRANSPOSED` (a transpose's output: the block that reads input tile `(by, bx)` writes output
/// tile `(bx, by)`). Both maps are bijections of the grid's blocks; the orientation is part of
/// the type, so one output never mixes the two (block `(0, 1)` direct and block `(1, 0)`
/// transposed would both own tile `(1, 0)`).
///
/// ```ignore
/// // 32 x 32 tiles written by blocks of 32 x 8 threads, each thread 4 elements of a column.
/// #[kernel(cols(output = rows))]
/// pub fn transpose(input: &[f32], mut output: PerBlockTile<f32, 32, 32, 32, 8, true>, rows: u32, cols: u32) {
///     let Some(mut tile) = output.tile_mut(block_tile()) else { return };
///     for i in 0..4 {
///         if let Some(o) = tile.get_mut(i, 0) { *o = /* .. */ 0.0; }
///     }
/// }
/// ```
///
/// The width comes from `#[kernel(cols(name = ..))]` (a by-value `u32` parameter or a
/// constant, the same in every thread). Every launcher refuses a launch whose block is not
/// exactly `(BLOCK_X, BLOCK_Y, 1)` or whose grid has `z > 1` (`BlockShapeRequired`).
///
/// [`tile_mut`](Self::tile_mut) gives whole tiles only, with no check left per element but
/// the constant ones (which fold away in unrolled loops); [`tile_clipped_mut`](Self::tile_clipped_mut)
/// also gives the tiles that the matrix's right or bottom edge cuts, checking each element.
pub type PerBlockTile<'a, T, const TILE_ROWS: u32, const TILE_COLS: u32, const BLOCK_X: u32, const BLOCK_Y: u32, const TRANSPOSED: bool = false> =
    DisjointSlice<'a, T, BlockTiles<TILE_ROWS, TILE_COLS, BLOCK_X, BLOCK_Y, TRANSPOSED>>;

/// The partition of [`PerBlockTile`]: witness [`BlockTile`] (block `(bx, by)`, thread `(tx,
/// ty)`) -> the elements (row `R TR + ty + BY i`, column `C TC + tx + BX j`) of tile `(R, C)
/// = (by, bx)` (`(bx, by)` if `TRANSPOSED`), for `ty + BY i < TR`, `tx + BX j < TC`.
/// Disjoint: block -> tile is one-to-one (a grid with `z = 1`, origins checked against `u32`
/// overflow), threads of a block stride over the tile with distinct residues, and `(row,
/// col) -> row * cols + col` is one-to-one on `col < cols`. Launch: blocks of exactly `(BX,
/// BY, 1)` in a grid with `z = 1` (`tile_block`).
pub struct BlockTiles<const TR: u32, const TC: u32, const BX: u32, const BY: u32, const TRANSPOSED: bool>;

// SAFETY: block -> tile is one-to-one (fixed orientation, a grid with z = 1); within a tile,
// thread (tx, ty) with tx < BLOCK_X, ty < BLOCK_Y (the launch requirement) owns the elements
// whose tile row is congruent to ty modulo BLOCK_Y and tile column to tx modulo BLOCK_X,
// disjoint for distinct threads; (row, col) -> row * cols + col is one-to-one on col < cols,
// with cols the same in every thread (the shape's contract). Accesses go through a
// `BlockTile`, which only its own thread holds.
unsafe impl<const TR: u32, const TC: u32, const BX: u32, const BY: u32, const TRANSPOSED: bool> Partition for BlockTiles<TR, TC, BX, BY, TRANSPOSED> {
    const KEY: u64 = super::slice::partition_key("BlockTiles", &[TR as u64, TC as u64, BX as u64, BY as u64, TRANSPOSED as u64]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::tile_block(BX, BY);
    type Shape = u32;
    const VALID: () = {
        assert!(TR > 0 && TC > 0, "PerBlockTile needs tiles of at least one row and one column");
        assert!(BX > 0 && BY > 0, "PerBlockTile needs blocks of at least one thread along x and y");
    };
}

impl<T: Pod, const TR: u32, const TC: u32, const BX: u32, const BY: u32, const TRANSPOSED: bool> DisjointSlice<'_, T, BlockTiles<TR, TC, BX, BY, TRANSPOSED>> {
    /// The first row and column of this block's tile (`u32`, no wrap-around) and the
    /// thread's position in the block, with what the launch guarantees made known to the
    /// compiler.
    #[inline(always)]
    #[track_caller]
    fn place(&self, me: BlockTile) -> Option<(u32, u32, u32, u32)> {
        let me = me.owned();
        // SAFETY: this output exists only in a launch that met `REQUIREMENTS`
        // (`KernelOutput::from_raw_parts`'s contract): blocks of exactly (BX, BY, 1) threads,
        // and `me` is the running thread's (it cannot be made or moved elsewhere).
        unsafe { core::hint::assert_unchecked(me.thread_x < BX && me.thread_y < BY) };
        let (tile_row, tile_col) = if TRANSPOSED { (me.block_x, me.block_y) } else { (me.block_y, me.block_x) };
        // A product past u32 would wrap onto another block's tile: no tile then.
        Some((tile_row.checked_mul(TR)?, tile_col.checked_mul(TC)?, me.thread_x, me.thread_y))
    }

    /// This block's tile, if it lies wholly inside the matrix (its last column below `cols`,
    /// its last row inside the buffer); `None` for a tile the edge cuts (see
    /// [`tile_clipped_mut`](Self::tile_clipped_mut)).
    #[inline(always)]
    #[track_caller]
    pub fn tile_mut(&mut self, me: BlockTile) -> Option<TileMut<'_, T, TR, TC, BX, BY>> {
        let (first_row, first_col, tx, ty) = self.place(me)?;
        if !whole_tile_inside(first_row, first_col, TR, TC, self.shape, self.len) {
            return None;
        }
        Some(TileMut::new(self, first_row, first_col, TR, TC, tx, ty))
    }

    /// This block's tile, cut to the matrix: rows inside the buffer and columns below
    /// `cols`; `None` if nothing of it is inside. Its elements past the edge are `None`.
    #[inline(always)]
    #[track_caller]
    pub fn tile_clipped_mut(&mut self, me: BlockTile) -> Option<TileMut<'_, T, TR, TC, BX, BY>> {
        let (first_row, first_col, tx, ty) = self.place(me)?;
        let cols = self.shape as u64;
        if first_col as u64 >= cols {
            return None;
        }
        let col_limit = (cols - first_col as u64).min(TC as u64) as u32;
        let start = first_row as u64 * cols;
        if start >= self.len as u64 {
            return None;
        }
        // Rows of the tile inside the buffer (whole rows: a partial last row is left out).
        // Every tile but the matrix's last holds its TR rows whole: one multiply and compare
        // (`TR cols < 2^64`), no division. Session 21 (issue 30's ninth port, L2): the
        // division `(len - start) / cols` in `u64` in every thread was a `CALL` to ptxas's
        // 64-bit division routine; the edge tile divides in `u32` where the rest fits.
        let rest = self.len as u64 - start;
        let row_limit = if rest >= TR as u64 * cols {
            TR
        } else {
            // `rest < TR cols`, so the quotient is below TR (a u32); `cols >= 1` (above).
            match u32::try_from(rest) {
                Ok(rest) => rest / self.shape.max(1),
                Err(_) => (rest / cols) as u32,
            }
        };
        if row_limit == 0 {
            return None;
        }
        Some(TileMut::new(self, first_row, first_col, row_limit, col_limit, tx, ty))
    }
}

/// True when the `rows x tile_cols` tile whose element (0, 0) is (`first_row`, `first_col`)
/// lies wholly inside a row-major matrix of `cols` columns held in `len` elements: its
/// columns below `cols` and its last row inside the buffer. The last row is checked as a
/// `u32` first, so `(last_row + 1) * cols <= 2^32 (2^32 - 1)` cannot overflow. `rows >= 1`
/// (the tile types assert it at compile time). Shared by [`PerBlockTile::tile_mut`] and
/// [`PerThreadTile`](super::PerThreadTile)'s whole tiles.
#[inline(always)]
pub(super) fn whole_tile_inside(first_row: u32, first_col: u32, rows: u32, tile_cols: u32, cols: u32, len: usize) -> bool {
    let Some(last_row) = first_row.checked_add(rows - 1) else { return false };
    first_col as u64 + tile_cols as u64 <= cols as u64 && (last_row as u64 + 1) * cols as u64 <= len as u64
}

/// One thread's view of its block's tile of a [`PerBlockTile`]: element (row `ty + BLOCK_Y
/// i`, column `tx + BLOCK_X j`) of the tile by [`get_mut(i, j)`](Self::get_mut).
pub struct TileMut<'a, T: Pod, const TR: u32, const TC: u32, const BX: u32, const BY: u32> {
    /// Element (0, 0) of the tile.
    base: *mut T,
    /// The output's start and length, for the CPU race detector.
    output: *mut T,
    len: usize,
    cols: u32,
    first_row: u32,
    first_col: u32,
    row_limit: u32,
    col_limit: u32,
    tx: u32,
    ty: u32,
    _output: PhantomData<&'a mut T>,
}

impl<'a, T: Pod, const TR: u32, const TC: u32, const BX: u32, const BY: u32> TileMut<'a, T, TR, TC, BX, BY> {
    #[inline(always)]
    fn new<const TRANSPOSED: bool>(
        output: &'a mut DisjointSlice<'_, T, BlockTiles<TR, TC, BX, BY, TRANSPOSED>>,
        first_row: u32,
        first_col: u32,
        row_limit: u32,
        col_limit: u32,
        tx: u32,
        ty: u32,
    ) -> Self {
        let offset = first_row as usize * output.shape as usize + first_col as usize;
        // `wrapping_add`: an address only; every element used is checked inside the buffer.
        TileMut {
            base: output.pointer.wrapping_add(offset),
            output: output.pointer,
            len: output.len,
            cols: output.shape,
            first_row,
            first_col,
            row_limit,
            col_limit,
            tx,
            ty,
            _output: PhantomData,
        }
    }

    /// The matrix row and column of the tile's element (0, 0).
    #[inline(always)]
    pub fn origin(&self) -> (u32, u32) {
        (self.first_row, self.first_col)
    }

    /// The matrix row of this thread's elements `(i, _)`: `first row of the tile + ty +
    /// BLOCK_Y * i` (a number, to index inputs with; wrapping).
    #[inline(always)]
    pub fn row(&self, i: u32) -> u32 {
        self.first_row.wrapping_add(self.ty).wrapping_add(BY.wrapping_mul(i))
    }

    /// The matrix column of this thread's elements `(_, j)`: `first column of the tile + tx +
    /// BLOCK_X * j` (a number, to index inputs with; wrapping).
    #[inline(always)]
    pub fn col(&self, j: u32) -> u32 {
        self.first_col.wrapping_add(self.tx).wrapping_add(BX.wrapping_mul(j))
    }

    /// This thread's element `(i, j)`: tile row `ty + BLOCK_Y * i`, tile column `tx + BLOCK_X
    /// * j`; `None` past the tile (or past the matrix, for a clipped tile).
    #[inline(always)]
    pub fn get_mut(&mut self, i: u32, j: u32) -> Option<&mut T> {
        if i >= TR || j >= TC {
            return None;
        }
        // No overflow: `ty < BY`, `i < TR` (both u32) in u64.
        let (row, col) = (self.ty as u64 + BY as u64 * i as u64, self.tx as u64 + BX as u64 * j as u64);
        if row < self.row_limit as u64 && col < self.col_limit as u64 {
            let offset = row as usize * self.cols as usize + col as usize;
            // SAFETY: the tile's element (row, col) is inside the matrix (`row < row_limit`,
            // `col < col_limit`, checked against the buffer and `cols` when the view was made)
            // and belongs to this thread alone (see the impl of `KernelOutput`); the borrow of
            // `self` keeps this thread from a second reference to it.
            let element = unsafe { self.base.add(offset) };
            // SAFETY: an element of a live allocation (above) is never at address 0; said so
            // that `Some(&mut ..)` needs no null test.
            unsafe { core::hint::assert_unchecked(!element.is_null()) };
            super::note_output(self.output, self.len, (element as usize - self.output as usize) / core::mem::size_of::<T>().max(1), 1, true);
            Some(unsafe { &mut *element })
        } else {
            None
        }
    }
}
