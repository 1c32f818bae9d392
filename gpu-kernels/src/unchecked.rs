//! The `unsafe` twins of the safe-style kernels that issue 20's speed rows measure: the same
//! algorithm written the way it was before the 2-D output types existed, with
//! `UncheckedSlice` / `get_unchecked_mut` outputs and `get_unchecked` inputs behind one
//! up-front check. `ferrocuda-bench` times each beside its safe version (`examples::stencil_5pt`,
//! `examples::softmax_rows_1024`, `llm::layernorm_768`, `llm::softmax_online`) and the CUDA C++ twin (and `transpose_32_unchecked` beside the
//! `transpose_32` whose output became a `PerBlockTile`, for the PTX comparison), and
//! `tests/device_build.rs` pins that the safe versions compile to no more instructions.
//! Each doc comment below is the safe kernel's, whose launch rules these twins share.

use ferrocuda_device::cache::{self, Load, Store};
use ferrocuda_device::global::{DisjointSlice, UncheckedSlice};
use ferrocuda_device::kernel;
use ferrocuda_device::math::FastMath;
use ferrocuda_device::thread::{block_dim_x, block_idx_x, block_idx_y, thread_idx_x};
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::warp;

use crate::examples::{
    Float4, SOFTMAX_COLS, STENCIL_BLOCK_X, STENCIL_CENTRE, STENCIL_NEIGHBOUR, STENCIL_ROWS_PER_THREAD, offset_below, one_dimensional_blocks_in_a_2d_grid,
    one_dimensional_launch,
};
use crate::examples::{TRANSPOSE_ROWS, TRANSPOSE_TILE};
use crate::llm::LAYERNORM_C;
use ferrocuda_device::shared_array;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_idx_z, thread_idx_y, thread_idx_z};

const SOFTMAX_VECTORS_PER_LANE: usize = SOFTMAX_COLS / 4 / 32;
const LN_V: usize = LAYERNORM_C / 4 / 32;

/// Row-wise softmax of a row-major `rows x 1024` matrix: one warp per row, the row held in
/// registers (eight `float4`s per lane), so it is read once and written once. The maximum
/// and the sum are warp-shuffle reductions; `exp` is the hardware `ex2.approx` (CUDA's
/// `__expf`). Launch with [`BLOCK_THREADS`](crate::examples::BLOCK_THREADS) threads (8 rows per block) and
/// `ceil(rows / 8)` blocks.
#[kernel]
pub fn softmax_rows_1024_unchecked(input: &[Float4], mut output: UncheckedSlice<Float4>, rows: u32) {
    const ROW_VECTORS: usize = SOFTMAX_COLS / 4;
    const V: usize = SOFTMAX_VECTORS_PER_LANE;
    let warps_per_block = block_dim_x() / warp::WARP_SIZE;
    let Some(row) = offset_below(block_idx_x(), warps_per_block, thread_idx_x() / warp::WARP_SIZE, rows) else {
        return;
    };
    let lane = (thread_idx_x() % warp::WARP_SIZE) as usize;
    let vectors = rows as usize * ROW_VECTORS;
    if input.len() < vectors || output.len() < vectors || !block_dim_x().is_multiple_of(warp::WARP_SIZE) || !one_dimensional_launch() {
        return;
    }
    let base = row as usize * ROW_VECTORS + lane;
    let mut values = [Float4::default(); V];
    for (v, value) in values.iter_mut().enumerate() {
        // SAFETY: `base + 32 * v` is inside row `row < rows` (lane < 32, v < 8), so below
        // `rows * 256 <= input.len()`.
        *value = unsafe { *input.get_unchecked(base + 32 * v) };
    }
    let mut max = f32::NEG_INFINITY;
    for value in &values {
        max = max.max(value.x).max(value.y).max(value.z).max(value.w);
    }
    let max = warp::reduce(max, f32::max);
    let mut sum = 0.0f32;
    for value in &mut values {
        value.x = (value.x - max).fast_exp();
        value.y = (value.y - max).fast_exp();
        value.z = (value.z - max).fast_exp();
        value.w = (value.w - max).fast_exp();
        sum += (value.x + value.y) + (value.z + value.w);
    }
    let scale = 1.0 / warp::reduce_sum(sum);
    for (v, value) in values.iter().enumerate() {
        let scaled = Float4 { x: value.x * scale, y: value.y * scale, z: value.z * scale, w: value.w * scale };
        // SAFETY: in bounds as for the loads. Only this thread writes the element: each warp
        // of a 1-D launch (checked above, with whole warps) owns one row, each lane the
        // vectors `lane + 32 v` of it.
        unsafe { output.write_unchecked(base + 32 * v, scaled) };
    }
}

/// One Jacobi step of a 5-point stencil on a row-major `rows x cols` grid:
/// `out = 0.5 * centre + 0.125 * (north + south + east + west)` inside, `out = in` on the
/// border. Each thread computes 8 rows of one column: it first loads the 10 values of its
/// column (8 rows and the rows above and below: each loaded once, not three times) and the
/// 16 east and west neighbours (neighbouring threads' loads, served by L1), all in flight
/// together, then computes and stores. Launch with blocks of 128 and a grid of
/// (cols / 128, rows / 8); `cols` must be a multiple of 128 and `rows` of 8.
#[kernel]
pub fn stencil_5pt_unchecked(input: &[f32], mut output: UncheckedSlice<f32>, rows: u32, cols: u32) {
    const R: usize = STENCIL_ROWS_PER_THREAD as usize;
    let elements = rows as usize * cols as usize;
    if !rows.is_multiple_of(STENCIL_ROWS_PER_THREAD)
        || !cols.is_multiple_of(STENCIL_BLOCK_X)
        || input.len() < elements
        || output.len() < elements
        || !one_dimensional_blocks_in_a_2d_grid()
    {
        return;
    }
    let (Some(col), Some(first_row)) =
        (offset_below(block_idx_x(), block_dim_x(), thread_idx_x(), cols), offset_below(block_idx_y(), STENCIL_ROWS_PER_THREAD, 0, rows))
    else {
        return;
    };
    let width = cols as usize;
    let at = |row: u32| row as usize * width + col as usize;
    let inner_col = col > 0 && col + 1 < cols;
    // SAFETY (every access below): the row is below `rows` and the column (col - 1, col or
    // col + 1, the outer two only when `inner_col`) below `cols`, so the index is below
    // `rows * cols <= input.len()` (and `output.len()`). Only this thread writes its output
    // elements: column `col` (one per thread of a block row) and rows `8 * block y ..+8`
    // (1-D blocks in a 2-D grid, checked above).
    // column[i] is row first_row + i - 1: the row above this thread's rows, its 8, the row below.
    let mut column = [0.0f32; R + 2];
    for (i, value) in column.iter_mut().enumerate() {
        let row_plus_one = first_row + i as u32;
        if row_plus_one >= 1 && row_plus_one <= rows {
            *value = unsafe { *input.get_unchecked(at(row_plus_one - 1)) };
        }
    }
    let (mut west, mut east) = ([0.0f32; R], [0.0f32; R]);
    if inner_col {
        for r in 0..R {
            let centre = at(first_row + r as u32);
            unsafe { (west[r], east[r]) = (*input.get_unchecked(centre - 1), *input.get_unchecked(centre + 1)) };
        }
    }
    for r in 0..R {
        let row = first_row + r as u32;
        let value = if inner_col && row > 0 && row + 1 < rows {
            STENCIL_CENTRE * column[r + 1] + STENCIL_NEIGHBOUR * ((column[r] + column[r + 2]) + (west[r] + east[r]))
        } else {
            column[r + 1]
        };
        unsafe { output.write_unchecked(at(row), value) };
    }
}

/// Layer norm of a row-major `rows x 768` matrix, as llm.c's `layernorm_forward` (kernel 3):
/// one warp per row, the row held in registers (six `float4`s per lane, read once with
/// streaming loads), mean and variance by warp shuffles, `out = (x - mean) * rstd * weight +
/// bias` written with streaming stores, and `mean[row]`, `rstd[row]` for the backward pass.
/// Launch with 1-D blocks of whole warps (256 threads: 8 rows per block) and
/// `ceil(rows / warps per block)` blocks.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_768_unchecked(
    input: &[Float4],
    weight: &[Float4],
    bias: &[Float4],
    mut out: DisjointSlice<Float4>,
    mut mean: DisjointSlice<f32>,
    mut rstd: DisjointSlice<f32>,
    rows: u32,
) {
    const ROW_VECTORS: usize = LAYERNORM_C / 4;
    let Some(row) = offset_below(block_idx_x(), block_dim_x() / warp::WARP_SIZE, thread_idx_x() / warp::WARP_SIZE, rows) else {
        return;
    };
    let lane = (thread_idx_x() % warp::WARP_SIZE) as usize;
    let vectors = rows as usize * ROW_VECTORS;
    if input.len() < vectors
        || out.len() < vectors
        || weight.len() < ROW_VECTORS
        || bias.len() < ROW_VECTORS
        || mean.len() < rows as usize
        || rstd.len() < rows as usize
    {
        return;
    }
    if !block_dim_x().is_multiple_of(warp::WARP_SIZE) || !one_dimensional_launch() {
        return;
    }
    let base = row as usize * ROW_VECTORS + lane;
    // Every loop over the row's six vectors is unrolled (`unroll`), so `x` stays in registers
    // (a loop LLVM leaves rolled indexes it at run time and puts it in local memory).
    let mut x = [Float4::default(); LN_V];
    let mut sum = 0.0f32;
    unroll::<LN_V>(|v| {
        // SAFETY: `base + 32 v` lies in row `row < rows` (lane < 32, v < 6), below
        // `rows * 192 <= input.len()`.
        x[v] = cache::load(unsafe { input.get_unchecked(base + 32 * v) }, Load::Streaming);
        sum += (x[v].x + x[v].y) + (x[v].z + x[v].w);
    });
    let m = warp::reduce_sum(sum) * (1.0 / LAYERNORM_C as f32);
    let mut squares = 0.0f32;
    unroll::<LN_V>(|v| {
        let (a, b, c, d) = (x[v].x - m, x[v].y - m, x[v].z - m, x[v].w - m);
        squares += (a * a + b * b) + (c * c + d * d);
    });
    let s = (warp::reduce_sum(squares) * (1.0 / LAYERNORM_C as f32) + 1e-5).fast_rsqrt();
    unroll::<LN_V>(|v| {
        let (c, value) = (lane + 32 * v, x[v]);
        // SAFETY: `c < 192 <= weight.len(), bias.len()` (checked above).
        let (w, b) = unsafe { (*weight.get_unchecked(c), *bias.get_unchecked(c)) };
        let normed =
            Float4 { x: (value.x - m) * s * w.x + b.x, y: (value.y - m) * s * w.y + b.y, z: (value.z - m) * s * w.z + b.z, w: (value.w - m) * s * w.w + b.w };
        // SAFETY: in bounds as for the loads. Only this thread writes the element: each warp
        // of a 1-D launch of whole warps (checked above) owns one row, each lane the vectors
        // `lane + 32 v` of it.
        unsafe { cache::store(out.get_unchecked_mut(base + 32 * v), normed, Store::Streaming) };
    });
    if lane == 0 {
        // SAFETY: `row < rows <= mean.len(), rstd.len()`; lane 0 of the row's warp alone writes them.
        unsafe {
            cache::store(mean.get_unchecked_mut(row as usize), m, Store::Streaming);
            cache::store(rstd.get_unchecked_mut(row as usize), s, Store::Streaming);
        }
    }
}

/// `output = transpose(input)` for a row-major `rows x cols` input (`output` is `cols x rows`).
/// A 32 x 32 tile goes through shared memory so that both the reads and the writes are
/// coalesced; the tile's rows are padded to 33 floats so that reading a column touches 32
/// different banks. Launch with blocks of (32, 8) and a grid of (cols / 32, rows / 32);
/// `rows` and `cols` must be multiples of 32.
#[kernel]
pub fn transpose_32_unchecked(input: &[f32], mut output: UncheckedSlice<f32>, rows: u32, cols: u32) {
    const STRIDE: u32 = TRANSPOSE_TILE + 1;
    let tile = shared_array![f32; (TRANSPOSE_TILE * (TRANSPOSE_TILE + 1)) as usize];
    let elements = rows as usize * cols as usize;
    if !rows.is_multiple_of(TRANSPOSE_TILE) || !cols.is_multiple_of(TRANSPOSE_TILE) || input.len() < elements || output.len() < elements {
        return;
    }
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    if tx >= TRANSPOSE_TILE || ty >= TRANSPOSE_ROWS || thread_idx_z() != 0 || block_idx_z() != 0 {
        return;
    }
    let (Some(tile_col), Some(tile_row)) = (offset_below(block_idx_x(), TRANSPOSE_TILE, 0, cols), offset_below(block_idx_y(), TRANSPOSE_TILE, 0, rows)) else {
        return;
    };
    let mut j = 0;
    while j < TRANSPOSE_TILE {
        let source = (tile_row + ty + j) as usize * cols as usize + (tile_col + tx) as usize;
        // SAFETY: the row is below `rows` and the column below `cols` (both tiles lie inside
        // the matrix, checked above), so `source < rows * cols <= input.len()`; the tile index
        // is below 32 * 33.
        unsafe { tile.set_unchecked(((ty + j) * STRIDE + tx) as usize, *input.get_unchecked(source)) };
        j += TRANSPOSE_ROWS;
    }
    sync_threads();
    let mut j = 0;
    while j < TRANSPOSE_TILE {
        let target = (tile_col + ty + j) as usize * rows as usize + (tile_row + tx) as usize;
        // SAFETY: in bounds as above, with the roles of rows and columns swapped. Only this
        // thread writes `target`: it is output row `tile_col + ty + j`, column `tile_row + tx`,
        // and (block x, block y, tx < 32, ty < 8, j) -> (row, column) is one-to-one (threads
        // with z != 0, in blocks with z != 0 or past the matrix returned above).
        unsafe { output.write_unchecked(target, tile.get_unchecked((tx * STRIDE + ty + j) as usize)) };
        j += TRANSPOSE_ROWS;
    }
}

/// Row-wise softmax of a row-major `rows x cols` matrix (`cols` a multiple of 4, given as
/// `cols4 = cols / 4`) with the online algorithm: one warp per row reads the row once keeping
/// a running maximum and a sum rescaled when the maximum grows, combines the 32 lanes'
/// (maximum, sum) pairs by shuffles, then reads the row again to write `exp(x - max) / sum`
/// (a second read that L2 serves for rows up to a few hundred KiB). `exp` is `ex2.approx`
/// (CUDA's `__expf`). Launch like [`layernorm_768()`](crate::llm::layernorm_768()).
#[kernel]
pub fn softmax_online_unchecked(input: &[Float4], mut output: DisjointSlice<Float4>, rows: u32, cols4: u32) {
    let Some(row) = offset_below(block_idx_x(), block_dim_x() / warp::WARP_SIZE, thread_idx_x() / warp::WARP_SIZE, rows) else {
        return;
    };
    let lane = (thread_idx_x() % warp::WARP_SIZE) as usize;
    let vectors = rows as usize * cols4 as usize;
    if input.len() < vectors || output.len() < vectors || !block_dim_x().is_multiple_of(warp::WARP_SIZE) || !one_dimensional_launch() {
        return;
    }
    // The row as its own slice (in bounds: `(row + 1) * cols4 <= vectors <= input.len()`), read
    // with a strided iterator: pointer increments, no index arithmetic or bounds checks.
    let start = row as usize * cols4 as usize;
    let Some(row_in) = input.get(start..start + cols4 as usize) else { return };
    // A finite start: a lane that sees no element (cols4 < 32) combines as (MIN, 0) without
    // the NaN of -inf - -inf.
    let (mut max, mut sum) = (f32::MIN, 0.0f32);
    for &v in row_in.iter().skip(lane).step_by(32) {
        let block_max = v.x.max(v.y).max(v.z.max(v.w));
        if block_max > max {
            sum *= (max - block_max).fast_exp();
            max = block_max;
        }
        sum += ((v.x - max).fast_exp() + (v.y - max).fast_exp()) + ((v.z - max).fast_exp() + (v.w - max).fast_exp());
    }
    let mut mask = warp::WARP_SIZE / 2;
    while mask > 0 {
        let (other_max, other_sum) = (warp::shuffle_xor(max, mask), warp::shuffle_xor(sum, mask));
        let new_max = max.max(other_max);
        sum = sum * (max - new_max).fast_exp() + other_sum * (other_max - new_max).fast_exp();
        max = new_max;
        mask /= 2;
    }
    let scale = 1.0 / sum;
    let mut c = start + lane;
    for v in row_in.iter().skip(lane).step_by(32) {
        let v = cache::load(v, Load::Streaming);
        // SAFETY: `c < start + cols4 <= output.len()` (checked above); the row belongs to this
        // warp and the vector `c` to this lane (1-D launch of whole warps, checked above).
        unsafe {
            let y = Float4 {
                x: (v.x - max).fast_exp() * scale,
                y: (v.y - max).fast_exp() * scale,
                z: (v.z - max).fast_exp() * scale,
                w: (v.w - max).fast_exp() * scale,
            };
            cache::store(output.get_unchecked_mut(c), y, Store::Streaming);
        }
        c += 32;
    }
}
