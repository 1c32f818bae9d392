//! The 2-D output types (`DisjointMatrix`, `PerBlockTile`, `PerThreadTile`, `PerWarpRow`) and their witnesses:
//! kernels that write `row * 1000 + col + 1` into each element they own, so the host can check
//! every element was written once by the right map (tests/matrix_outputs.rs), and deliberately
//! wrong kernels for the CPU executor's witness check.

use ferrocuda_device::global::{DisjointMatrix, PerBlockTile, PerThreadTile, PerWarpRow, block_tile, grid_stride_2d, unique_cell, warp_row};
use ferrocuda_device::kernel;

/// The value every test kernel stores at (row, col).
#[inline(always)]
pub fn mark(row: u32, col: u32) -> u32 {
    row.wrapping_mul(1000).wrapping_add(col).wrapping_add(1)
}

/// Thread (x, y) writes element (y, x): CUDA's 2-D "one element per thread".
#[kernel(cols(out = cols))]
pub fn matrix_one_per_thread(mut out: DisjointMatrix<u32>, cols: u32) {
    let cell = unique_cell();
    if let Some(element) = out.get_mut(cell) {
        *element = mark(cell.row(), cell.col());
    }
}

/// A 2-D grid-stride loop over `rows x cols`: any grid covers the matrix.
#[kernel(cols(out = cols))]
pub fn matrix_grid_stride(mut out: DisjointMatrix<u32>, rows: u32, cols: u32) {
    for cell in grid_stride_2d(rows, cols) {
        if let Some(element) = out.get_mut(cell) {
            *element += mark(cell.row(), cell.col());
        }
    }
}

/// Tiles of 4 x 8 by blocks of 4 x 2 threads: each thread 2 x 2 elements; whole tiles only.
#[kernel(cols(out = cols))]
pub fn tiles_direct(mut out: PerBlockTile<u32, 4, 8, 4, 2>, cols: u32) {
    if let Some(mut tile) = out.tile_mut(block_tile()) {
        for i in 0..2 {
            for j in 0..2 {
                let (row, col) = (tile.row(i), tile.col(j));
                if let Some(element) = tile.get_mut(i, j) {
                    *element += mark(row, col);
                }
            }
        }
    }
}

/// As [`tiles_direct`], block (x, y) owning tile (x, y) (a transpose's output).
#[kernel(cols(out = cols))]
pub fn tiles_transposed(mut out: PerBlockTile<u32, 4, 8, 4, 2, true>, cols: u32) {
    if let Some(mut tile) = out.tile_mut(block_tile()) {
        for i in 0..2 {
            for j in 0..2 {
                let (row, col) = (tile.row(i), tile.col(j));
                if let Some(element) = tile.get_mut(i, j) {
                    *element += mark(row, col);
                }
            }
        }
    }
}

/// As [`tiles_direct`], the tiles the matrix's edges cut included; also tries indices past
/// the tile (`get_mut(2, 0)`, `(0, 2)`, huge), which must be `None`.
#[kernel(cols(out = cols))]
pub fn tiles_clipped(mut out: PerBlockTile<u32, 4, 8, 4, 2>, cols: u32) {
    if let Some(mut tile) = out.tile_clipped_mut(block_tile()) {
        for i in 0..2 {
            for j in 0..2 {
                let (row, col) = (tile.row(i), tile.col(j));
                if let Some(element) = tile.get_mut(i, j) {
                    *element += mark(row, col);
                }
            }
        }
        for (i, j) in [(2, 0), (0, 2), (u32::MAX, 0), (0, u32::MAX), (1 << 31, 1 << 31)] {
            if let Some(element) = tile.get_mut(i, j) {
                *element = u32::MAX;
            }
        }
    }
}

/// Warp w writes row w of `out` (lane l its columns l, l + 32, ...) and lane 0 element w of
/// the one-column `firsts` (the row's first value); also tries `get_mut` past the row.
#[kernel(cols(out = cols, firsts = 1))]
pub fn warp_rows(mut out: PerWarpRow<u32>, mut firsts: PerWarpRow<u32>, cols: u32) {
    let me = warp_row();
    if let Some(row) = out.row_mut(me) {
        for (seen, element) in row.iter_mut().enumerate() {
            *element += mark(me.row(), me.lane() + 32 * seen as u32);
        }
    }
    if let Some(mut row) = out.row_mut(me) {
        // (`j = 2^59` wraps `32 j` to 0: the lane's own column 0, still its own element.)
        for j in [usize::MAX, 1 << 58, usize::MAX / 2] {
            if let Some(element) = row.get_mut(j) {
                *element = u32::MAX;
            }
        }
    }
    if let Some(mut row) = firsts.row_mut(me)
        && let Some(element) = row.get_mut(0)
    {
        *element = mark(me.row(), me.lane());
    }
}

/// Two tile outputs with different thread shapes: no launch can satisfy both, every launcher
/// refuses it (`ConflictingBlockShapes`).
#[kernel(cols(a = cols, b = cols))]
pub fn two_tile_shapes(mut a: PerBlockTile<u32, 8, 8, 8, 8>, mut b: PerBlockTile<u32, 8, 8, 4, 4>, cols: u32) {
    let me = block_tile();
    if let Some(mut tile) = a.tile_mut(me)
        && let Some(element) = tile.get_mut(0, 0)
    {
        *element = 1;
    }
    if let Some(mut tile) = b.tile_mut(me)
        && let Some(element) = tile.get_mut(0, 0)
    {
        *element = 1;
    }
}

/// Deliberately wrong, CPU executor only: each thread leaves its `ThreadCell` in a host
/// thread-local and uses the one the previous thread left there. The CPU executor's check
/// panics instead of letting two threads write one element.
#[kernel(cols(out = cols))]
pub fn smuggled_cell(mut out: DisjointMatrix<u32>, cols: u32) {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        use core::cell::Cell;
        use ferrocuda_device::global::ThreadCell;
        std::thread_local! {
            static LEFT: Cell<Option<ThreadCell>> = const { Cell::new(None) };
        }
        let mine = unique_cell();
        if let Some(theirs) = LEFT.with(|left| left.replace(Some(mine)))
            && let Some(element) = out.get_mut(theirs)
        {
            *element = 1;
        }
    }
    let _ = (&mut out, cols);
}

/// The same with a `WarpRow`.
#[kernel(cols(out = 32))]
pub fn smuggled_warp_row(mut out: PerWarpRow<u32>) {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        use core::cell::Cell;
        use ferrocuda_device::global::WarpRow;
        std::thread_local! {
            static LEFT: Cell<Option<WarpRow>> = const { Cell::new(None) };
        }
        let mine = warp_row();
        if let Some(theirs) = LEFT.with(|left| left.replace(Some(mine)))
            && let Some(mut row) = out.row_mut(theirs)
            && let Some(element) = row.get_mut(0)
        {
            *element = 1;
        }
    }
    let _ = &mut out;
}

/// Self-audit: the width parameter reassigned and shadowed in the body. The output was built
/// by the entry, before the body, with the launch's value: the body's `cols` changes nothing.
#[kernel(cols(out = cols))]
pub fn width_changed_in_the_body(mut out: DisjointMatrix<u32>, mut cols: u32) {
    cols = cols.wrapping_add(ferrocuda_device::thread::thread_idx_x());
    let cols = cols / 2 + 1;
    let _ = cols;
    let cell = unique_cell();
    if let Some(element) = out.get_mut(cell) {
        *element += mark(cell.row(), cell.col());
    }
}

/// Self-audit: two matrix outputs of different widths in one kernel, each with its own map.
#[kernel(cols(a = 4, b = wide))]
pub fn two_widths(mut a: DisjointMatrix<u32>, mut b: DisjointMatrix<u32>, wide: u32) {
    let cell = unique_cell();
    if let Some(element) = a.get_mut(cell) {
        *element += mark(cell.row(), cell.col());
    }
    if let Some(element) = b.get_mut(cell) {
        *element += mark(cell.row(), cell.col());
    }
}

/// Self-audit: `row * cols + col` past `u32`. With `cols = u32::MAX`, cell (1, 1) is element
/// 2^32, which a `u32` product would wrap to element 0, cell (0, 0)'s. Each thread adds 1.
#[kernel(cols(out = cols))]
pub fn huge_width(mut out: DisjointMatrix<u32>, cols: u32) {
    if let Some(element) = out.get_mut(unique_cell()) {
        *element += 1;
    }
}

/// Self-audit: a tile origin past `u32`. Tiles of 2^20 columns: block 4096's first column is
/// 2^32, which a `u32` product would wrap to 0, block 0's tile. Each block's thread adds 1 to
/// its tile's element (0, 0).
#[kernel(cols(out = cols))]
pub fn huge_tiles(mut out: PerBlockTile<u32, 1, { 1 << 20 }, 1, 1>, cols: u32) {
    if let Some(mut tile) = out.tile_mut(block_tile())
        && let Some(element) = tile.get_mut(0, 0)
    {
        *element += 1;
    }
}

/// Self-audit: a generic kernel with a matrix output (the width is attached before the
/// instances are made).
#[kernel(instances(u32, f32), cols(out = cols))]
pub fn fill_matrix<T: bytemuck::Pod>(mut out: DisjointMatrix<T>, cols: u32, value: T) {
    if let Some(element) = out.get_mut(unique_cell()) {
        *element = value;
    }
}

/// Tiles of 8 x 16, each thread a contiguous 2 x 4 micro-tile (16 threads per block): every
/// element it owns gets `+= mark` through `row_mut`; indices past the micro-tile
/// (`row_mut(2, 0)`, `(0, 1)`, huge) must be `None`.
#[kernel(cols(out = cols))]
pub fn micro_tiles(mut out: PerThreadTile<u32, 8, 16, 2, 4>, cols: u32) {
    if let Some(mut tile) = out.tile_mut(block_tile()) {
        for i in 0..2 {
            let (row, col) = (tile.row(i), tile.col(0));
            if let Some(run) = tile.row_mut(i, 0) {
                for (c, element) in run.iter_mut().enumerate() {
                    *element += mark(row, col + c as u32);
                }
            }
        }
        for (i, j) in [(2, 0), (0, 1), (u32::MAX, 0), (0, u32::MAX)] {
            if let Some(run) = tile.row_mut(i, j) {
                run[0] += 1_000_000;
            }
        }
    }
}

/// Tiles of 8 x 16 in 2 x 2 quadrants of 4 x 8, each thread a 2 x 4 micro-tile in each
/// (`sgemm_pipelined`'s split map, 4 threads per block), written with `store_row` in 16-byte
/// stores (`tile_aligned_mut`); `store_row` past the micro-tile must store nothing.
#[kernel(cols(out = cols))]
pub fn micro_tiles_split(mut out: PerThreadTile<u32, 8, 16, 2, 4, 2, 2>, cols: u32) {
    if let Some(mut tile) = out.tile_aligned_mut(block_tile()) {
        for i in 0..4 {
            for j in 0..2 {
                let (row, col) = (tile.row(i), tile.col(j));
                tile.store_row(i, j, [mark(row, col), mark(row, col + 1), mark(row, col + 2), mark(row, col + 3)]);
            }
        }
        tile.store_row(4, 0, [1_000_000; 4]);
        tile.store_row(0, 2, [1_000_000; 4]);
    }
}

/// Self-audit: a micro-tile origin past `u32`. Tiles of one row of 2^20 columns, one thread
/// owning all of it: block 4096's first column is 2^32, which a `u32` product would wrap to
/// block 0's tile. Each block's thread adds 1 to its first element.
#[kernel(cols(out = cols))]
pub fn huge_micro_tiles(mut out: PerThreadTile<u32, 1, { 1 << 20 }, 1, { 1 << 20 }>, cols: u32) {
    if let Some(mut tile) = out.tile_mut(block_tile())
        && let Some(run) = tile.row_mut(0, 0)
    {
        run[0] += 1;
    }
}
