//! Kernels for the CPU executor's benchmark and tests: a tiled matrix product (shared memory and
//! barriers at scale), and deliberately wrong kernels whose mistakes hang or corrupt on a GPU
//! and are reported as errors by the CPU executor. They are valid GPU kernels too (the PTX
//! build compiles them), but only the correct ones should be launched there.

use ferrocuda_device::global::{DisjointMatrix, DisjointSlice, unique_cell, unique_index};
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim, block_idx_x, thread_idx_x, thread_idx_y};
use ferrocuda_device::{kernel, shared_array, warp};

/// Side of the square tiles of [`matmul_tiled`] (its blocks are `TILE x TILE` threads).
pub const TILE: usize = 16;

/// `c = a * b` for `n x n` row-major matrices, through `TILE x TILE` tiles of `a` and `b` in
/// shared memory: launch with blocks of `(TILE, TILE)` and a grid of `(n / TILE, n / TILE)`
/// (rounded up; edges are guarded). Thread (x, y) writes element (row y, column x) of `c`
/// through a `DisjointMatrix` (n columns), whose launcher checks the launch is 2-D.
#[kernel(cols(c = n))]
pub fn matmul_tiled(n: u32, a: &[f32], b: &[f32], mut c: DisjointMatrix<f32>) {
    let a_tile = shared_array![f32; TILE * TILE];
    let b_tile = shared_array![f32; TILE * TILE];
    let dim = block_dim();
    if (dim.x, dim.y) != (TILE as u32, TILE as u32) {
        // The tiles are sized for TILE x TILE threads; the whole block returns, before any
        // barrier (z = 1 is the output's launch requirement).
        return;
    }
    let (tx, ty) = (thread_idx_x() as usize, thread_idx_y() as usize);
    let cell = unique_cell();
    let (row, col, n) = (cell.row() as usize, cell.col() as usize, n as usize);
    let mut acc = 0.0f32;
    for t in 0..n.div_ceil(TILE) {
        let (a_col, b_row) = (t * TILE + tx, t * TILE + ty);
        a_tile.set(ty * TILE + tx, if row < n && a_col < n { a[row * n + a_col] } else { 0.0 });
        b_tile.set(ty * TILE + tx, if b_row < n && col < n { b[b_row * n + col] } else { 0.0 });
        sync_threads();
        for k in 0..TILE {
            acc += a_tile.get(ty * TILE + k) * b_tile.get(k * TILE + tx);
        }
        sync_threads();
    }
    if row < n
        && let Some(element) = c.get_mut(cell)
    {
        *element = acc;
    }
}

/// Threads at or past `n` return before the barrier that the others wait at: PTX's `exit`
/// releases a barrier that only exited threads hold up (audit P9), so the others pass it on a
/// GPU and on the CPU executor. Blocks of at most 256 threads.
#[kernel]
pub fn barrier_after_early_return(n: u32, mut out: DisjointSlice<u32>) {
    let t = thread_idx_x();
    if t >= n {
        return;
    }
    let values = shared_array![u32; 256];
    values.set(t as usize, t);
    sync_threads();
    out[unique_index()] = values.get(((t + 1) % n) as usize);
}

/// Deliberately wrong: each thread reads its neighbour's shared value with no barrier after
/// the writes (a data race: on a GPU the result depends on timing). Blocks of 256 threads.
#[kernel]
pub fn shared_race_missing_barrier(x: &[f32], mut out: DisjointSlice<f32>) {
    let values = shared_array![f32; 256];
    let t = thread_idx_x() as usize;
    let i = unique_index();
    values.set(t, x[i]);
    out[i] = values.get((t + 1) % 256);
}

/// Reads shared memory before any thread wrote it (`out[block * 64 + t]`), then writes it:
/// shows what a block's shared memory starts with, and that no block sees another's writes.
/// Blocks of 64 threads.
#[kernel]
pub fn shared_uninitialized(mut out: DisjointSlice<u32>) {
    let values = shared_array![u32; 64];
    let t = thread_idx_x() as usize;
    let b = block_idx_x();
    // `unique_index()` is `block * 64 + t` on this 1-D launch of 64-thread blocks.
    out[unique_index()] = values.get(t);
    values.set(t, b + 1);
}

/// Deliberately wrong: only the lower half of each warp shuffles, while the upper half waits
/// at a block barrier (a full-warp shuffle needs every lane).
#[kernel]
pub fn warp_shuffle_divergent(mut out: DisjointSlice<u32>) {
    let lane = warp::lane_id();
    if lane < 16 {
        out[unique_index()] = warp::shuffle(lane, 0);
    }
    sync_threads();
}
