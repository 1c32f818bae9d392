//! [`RowTiles`]: a row-major output whose block `(x, y)` owns tile `y` (a run-time number of
//! columns) of row `x`, its threads striding over the tile; and its witness [`RowTile`].

use core::marker::PhantomData;

use bytemuck::Pod;

use super::LaunchRequirements;
use super::index::NotSend;
use super::slice::{DisjointSlice, Partition};
use super::warp_rows::LaneRow;
use crate::thread::{block_dim_x, block_idx_x, block_idx_y, thread_idx_x};

/// The partition of `DisjointSlice<T, RowTiles>`: a row-major matrix of `cols` columns cut
/// into tiles of `tile` columns (both run-time values, the same in every thread, from
/// `#[kernel(cols(name = (cols, tile)))]`), block `(x, y)` owning columns
/// `[y tile, min((y + 1) tile, cols))` of row `x` and its thread `t` the columns
/// `y tile + t + blockDim.x j` of them: vLLM's sampler kernels (`apply_repetition_penalties_kernel`: grid `(num_seqs,
/// ceil(vocab / tile_size))`, `for (i = tile_start + threadIdx.x; i < tile_end; i +=
/// blockDim.x)`), which split each row over several blocks so that a few long rows fill the
/// GPU (64 rows are 64 blocks on 132 SMs as one block per row, `BlockRows`).
///
/// ```ignore
/// #[kernel(cols(logits = (vocab, tile_size)))]
/// pub fn penalties(mut logits: DisjointSlice<f32, RowTiles>, mask: &[u8], penalty: &[f32], vocab: u32, tile_size: u32) {
///     let me = row_tile();                                   // (blockIdx.x, blockIdx.y)
///     let Some(&p) = penalty.get(me.row() as usize) else { return };
///     let Some(tile) = logits.tile_mut(me) else { return };  // one check per block
///     let Some(mask) = mask.get(tile.span()) else { return };
///     tile.zip_inputs([mask]).for_each(|([&m], logit)| {     // no check per element
///         if m != 0 { *logit *= p }
///     });
/// }
/// ```
///
/// Map: witness [`RowTile`] `(r, y)` of the thread `t = threadIdx.x` -> elements `r cols + y
/// tile + t + blockDim.x j` for `y tile + t + blockDim.x j < min((y + 1) tile, cols)`.
/// Disjoint: `(row, col) -> row cols + col` is one-to-one on `col < cols`; the tiles `[y tile,
/// (y + 1) tile)` of one row are disjoint for distinct `y` (empty when `tile = 0`); the
/// launch has 1-D blocks in a grid with `z = 1` (`LINEAR_BLOCKS`, checked by every
/// launcher), so `(blockIdx.x, blockIdx.y)` names one block and `threadIdx.x < blockDim.x`
/// one thread of it, whose columns are congruent to `threadIdx.x` modulo `blockDim.x`. `cols`
/// and `tile` are by-value kernel parameters or constants, the same in every thread. The tile
/// bounds are computed in 64 bits (`y tile` may pass `u32`): a tile that starts at or past
/// `cols` is empty ([`tile_mut`](DisjointSlice::tile_mut) gives `None`). Launch: any grid x and
/// y, any block size.
pub struct RowTiles;

// SAFETY: as the doc above; `tile_mut` checks the row inside the buffer and clips the tile to
// the row, `LaneRow` keeps each column below the tile's end.
unsafe impl Partition for RowTiles {
    const KEY: u64 = super::slice::partition_key("RowTiles", &[]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_BLOCKS;
    type Shape = (u32, u32);
}

/// This block's row and tile for a `DisjointSlice<T, RowTiles>` output: row `blockIdx.x`, tile
/// `blockIdx.y`. Made only by [`row_tile`]; `Copy` but not `Send`, `Sync` or `Pod` (see
/// [`ThreadIndex`](super::ThreadIndex)), checked against the running thread on the CPU
/// executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RowTile {
    row: u32,
    tile: u32,
    #[cfg(not(target_arch = "nvptx64"))]
    owner: [u32; 6],
    _this_thread: NotSend,
}

/// This block's [`RowTile`]: row `blockIdx.x`, tile `blockIdx.y` (vLLM's `seq_idx =
/// blockIdx.x`, `tile_idx = blockIdx.y`).
#[inline(always)]
pub fn row_tile() -> RowTile {
    RowTile {
        row: block_idx_x(),
        tile: block_idx_y(),
        #[cfg(not(target_arch = "nvptx64"))]
        owner: super::index::block_thread(),
        _this_thread: PhantomData,
    }
}

impl RowTile {
    /// The row (`blockIdx.x`), to index per-row inputs with.
    #[inline(always)]
    pub fn row(self) -> u32 {
        self.row
    }

    /// The tile of the row (`blockIdx.y`).
    #[inline(always)]
    pub fn tile(self) -> u32 {
        self.tile
    }

    #[inline(always)]
    #[track_caller]
    fn owned(self) -> (u32, u32) {
        #[cfg(not(target_arch = "nvptx64"))]
        if self.owner != super::index::block_thread() {
            super::index::used_by_another_thread("RowTile", self.row as usize);
        }
        (self.row, self.tile)
    }
}

impl<T: Pod> DisjointSlice<'_, T, RowTiles> {
    /// Columns per row and columns per tile (the launch's `(cols, tile)`).
    #[inline(always)]
    pub fn row_tile_shape(&self) -> (u32, u32) {
        self.shape
    }

    /// Tile `me.tile()` of row `me.row()` seen by this thread: columns `[y tile, min((y + 1)
    /// tile, cols))` of the row (counted from the tile's first column in the view), this
    /// thread's being `threadIdx.x, threadIdx.x + blockDim.x, ...` of them. `None` if the row
    /// does not lie wholly inside the buffer or the tile starts at or past the row's end (one
    /// check per block, none per element). [`LaneRow::span`] gives the tile's indices in the
    /// buffer, to slice inputs of the same shape with.
    #[inline(always)]
    #[track_caller]
    pub fn tile_mut(&mut self, me: RowTile) -> Option<LaneRow<'_, T>> {
        let (row, tile_index) = me.owned();
        let (cols, tile) = self.shape;
        // `row, cols < 2^32`: no overflow in u64.
        if (row as u64 + 1) * cols as u64 > self.len as u64 {
            return None;
        }
        // `tile_index, tile < 2^32`: `first < 2^64`, no overflow.
        let first = tile_index as u64 * tile as u64;
        if first >= cols as u64 {
            return None;
        }
        // `first < cols`, so `first` and `count <= cols - first` fit in u32.
        let count = (cols as u64 - first).min(tile as u64) as u32;
        let start = row as usize * cols as usize + first as usize;
        // SAFETY: `start + count <= (row + 1) cols <= len` (checked above); this output exists
        // only in a launch of 1-D blocks in a grid with `z = 1` (`REQUIREMENTS`), so
        // `threadIdx.x < blockDim.x` names one thread of this block, and the block alone owns
        // tile `tile_index` of row `row` (a `RowTile` of the running thread), see `RowTiles`.
        Some(unsafe { LaneRow::from_span(self.pointer, self.len, row, start, count, thread_idx_x(), block_dim_x()) })
    }
}
