//! The `unsafe` twins of the safe-style kernels that issue 20's speed rows measure: the same
//! algorithm written the way it was before the 2-D output types existed, with
//! `UncheckedSlice` / `get_unchecked_mut` outputs and `get_unchecked` inputs behind one
//! up-front check. `ferrocuda-bench` times each beside its safe version (`examples::stencil_5pt`,
//! `examples::softmax_rows_1024`, `llm::layernorm_768`, `llm::softmax_online`, and the GEMMs
//! `examples::matmul_128x128` and `examples::sgemm_pipelined`, whose C became a `PerThreadTile`) and the CUDA C++ twin (and `transpose_32_unchecked` beside the
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
use crate::examples::{
    MATMUL_BLOCK_K, MATMUL_BLOCK_M, MATMUL_BLOCK_N, MATMUL_THREAD_TILE, MATMUL_THREADS, SGEMM_A_STAGE, SGEMM_A_STRIDE, SGEMM_B_STAGE, SGEMM_SHARED_FLOATS,
    accumulate_outer_product, load_float4, load_shared_f32x4, load_shared_float4, matmul_operands_fit_unchecked, store_float4, store_shared_f32x4,
    store_shared_float4,
};
use crate::examples::{TRANSPOSE_ROWS, TRANSPOSE_TILE};
use crate::llm::{LAYERNORM_C, LN_V, mean_and_rstd, online_max_and_sum};
use ferrocuda_device::shared_array;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_idx_z, thread_idx_y, thread_idx_z};

const SOFTMAX_VECTORS_PER_LANE: usize = SOFTMAX_COLS / 4 / 32;

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
    let (m, s) = mean_and_rstd(&x, sum);
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
    let (max, sum) = online_max_and_sum(row_in, lane);
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

/// `c = a * b` in FP32, all row-major: `a` is `m x k`, `b` is `k x n`, `c` is `m x n`.
/// Each block computes a 128 x 128 tile of C from 128 x 8 and 8 x 128 tiles of A and B in
/// shared memory (A transposed on the way in, so that a thread's 8 rows are one 32-byte run);
/// each thread keeps an 8 x 8 block of C in registers and does 64 FMAs for every 16 floats
/// it reads from shared memory. Launch with [`MATMUL_THREADS`] threads and a grid of
/// (n / 128, m / 128); `m` and `n` must be multiples of 128, `k` of 8, and the buffers
/// 16-byte aligned.
#[kernel]
pub fn matmul_128x128_unchecked(a: &[f32], b: &[f32], mut c: UncheckedSlice<f32>, m: u32, n: u32, k: u32) {
    const BM: u32 = MATMUL_BLOCK_M;
    const BN: u32 = MATMUL_BLOCK_N;
    const BK: u32 = MATMUL_BLOCK_K;
    const TT: usize = MATMUL_THREAD_TILE;
    let a_tile = shared_array![f32; (MATMUL_BLOCK_K * MATMUL_BLOCK_M) as usize];
    let b_tile = shared_array![f32; (MATMUL_BLOCK_K * MATMUL_BLOCK_N) as usize];

    let sizes_fit = matmul_operands_fit_unchecked(a, b, &mut c, m, n, k);
    let (Some(block_row), Some(block_col)) = (offset_below(block_idx_y(), BM, 0, m), offset_below(block_idx_x(), BN, 0, n)) else {
        return;
    };
    if !sizes_fit {
        return;
    }
    let tid = thread_idx_x();
    // Each thread loads one float4 of A (row tid / 2, columns 4 * (tid % 2)..) and one of B
    // (row tid / 32, columns 4 * (tid % 32)..) per step.
    let (a_row, a_col) = (tid / 2, (tid % 2) * 4);
    let (b_row, b_col) = (tid / 32, (tid % 32) * 4);
    // This thread's 8 x 8 block of C starts at row 8 * (tid / 16), column 8 * (tid % 16).
    let (c_row, c_col) = ((tid / 16) * TT as u32, (tid % 16) * TT as u32);

    let mut acc = [[0.0f32; TT]; TT];
    let mut k0 = 0;
    while k0 < k {
        let a_index = (block_row + a_row) as usize * k as usize + (k0 + a_col) as usize;
        let b_index = (k0 + b_row) as usize * n as usize + (block_col + b_col) as usize;
        // SAFETY: both indices lie inside the matrices (tiles inside m x k and k x n, checked
        // above) and are multiples of 4 on 16-byte aligned buffers.
        let (av, bv) = unsafe { (load_float4(a, a_index), load_float4(b, b_index)) };
        // SAFETY: every index is below 8 * 128, the tiles' length.
        unsafe {
            a_tile.set_unchecked((a_col * BM + a_row) as usize, av.x);
            a_tile.set_unchecked(((a_col + 1) * BM + a_row) as usize, av.y);
            a_tile.set_unchecked(((a_col + 2) * BM + a_row) as usize, av.z);
            a_tile.set_unchecked(((a_col + 3) * BM + a_row) as usize, av.w);
            store_shared_float4(b_tile.shared_address() + (b_row * BN + b_col) * 4, bv);
        }
        sync_threads();
        // One step of depth: 16 floats from shared memory, 64 FMAs. Called with constant
        // depths so that the eight steps become straight-line code (`#pragma unroll`).
        let mut step = |kk: u32| {
            // SAFETY: the addresses are 16-byte aligned and inside the tiles
            // (kk * 128 + c_row + 4 < 8 * 128).
            let (a_lo, a_hi, b_lo, b_hi) = unsafe {
                let a_base = a_tile.shared_address() + (kk * BM + c_row) * 4;
                let b_base = b_tile.shared_address() + (kk * BN + c_col) * 4;
                (load_shared_float4(a_base), load_shared_float4(a_base + 16), load_shared_float4(b_base), load_shared_float4(b_base + 16))
            };
            accumulate_outer_product(&mut acc, [a_lo, a_hi], [b_lo, b_hi]);
        };
        const _: () = assert!(MATMUL_BLOCK_K == 8, "one step call per depth below");
        step(0);
        step(1);
        step(2);
        step(3);
        step(4);
        step(5);
        step(6);
        step(7);
        sync_threads();
        k0 += BK;
    }
    for (i, row) in acc.iter().enumerate() {
        let index = (block_row + c_row + i as u32) as usize * n as usize + (block_col + c_col) as usize;
        // SAFETY: inside the m x n matrix (checked above), a multiple of 4, 16-byte aligned.
        // Only this thread writes these 8 elements: thread `tid < 256` of block (x, y) owns
        // rows `128 y + 8 (tid / 16) ..+8`, columns `128 x + 8 (tid % 16) ..+8` of C, disjoint
        // from every other (tid, block) (1-D blocks in a 2-D grid, checked above).
        unsafe {
            store_float4(&mut c, index, Float4 { x: row[0], y: row[1], z: row[2], w: row[3] });
            store_float4(&mut c, index + 4, Float4 { x: row[4], y: row[5], z: row[6], w: row[7] });
        }
    }
}

/// `c = a * b` in FP32, all row-major (`a` is `m x k`, `b` is `k x n`, `c` is `m x n`): the
/// 128 x 128 x 8 tiling of [`matmul_128x128()`](crate::examples::matmul_128x128()) with the schedule that brings SGEMM near
/// cuBLAS (docs/performance.md, "FP32 SGEMM"):
///
/// - **Two shared-memory stages.** Step `t` issues the global loads of tile `t + 1` into
///   registers, does its 512 FMAs on the tile in stage `t % 2`, then stores the registers to
///   the other stage: the loads' latency hides behind the math, and one barrier per step
///   suffices (the stage being written was last read a barrier ago).
/// - **A transposed (depth-major)**, so that both operands are read with `ld.shared.v4.f32`:
///   four 16-byte loads and 64 FMAs per depth.
/// - **Split 8 x 8 thread tile.** Thread `(ty, tx) = (tid / 16, tid % 16)` owns rows
///   `4 ty..+4` and `64 + 4 ty..+4`, columns `4 tx..+4` and `64 + 4 tx..+4`: the eight lanes
///   of a quarter-warp read 128 contiguous bytes of B (no bank conflict; contiguous 8-column
///   blocks would be 32 bytes apart, a two-way conflict), and the C stores of a half-warp
///   are 256 contiguous bytes.
/// - **`u32` index arithmetic** (the sizes are checked to fit) and fully unrolled loops.
///
/// Launch with [`MATMUL_THREADS`] threads (1-D) and a grid of (n / 128, m / 128); `m` and `n`
/// must be multiples of 128, `k` a positive multiple of 8, `m k`, `k n` and `m n` below 2³²,
/// and the buffers 16-byte aligned. Other shapes make every thread return at once.
///
/// Its K loop is a copy of [`sgemm_pipelined()`](fn@crate::examples::sgemm_pipelined)'s, not a
/// shared function: moved into one `#[inline(always)]` function for both, the safe kernel's
/// PTX changed by a few instructions and ptxas scheduled it worse (0.948x this twin against
/// 0.969x, H100, session 7: `bench/results/h100-2026-11-25-s7-review-shared-helpers.txt`).
#[kernel(launch_bounds(256, 2))]
pub fn sgemm_pipelined_unchecked(a: &[f32], b: &[f32], mut c: UncheckedSlice<f32>, m: u32, n: u32, k: u32) {
    const BM: u32 = MATMUL_BLOCK_M;
    const BN: u32 = MATMUL_BLOCK_N;
    const BK: u32 = MATMUL_BLOCK_K;
    const _: () = assert!(MATMUL_THREADS == 256 && BM == 128 && BN == 128 && BK == 8, "the thread mappings below");
    let smem = shared_array![f32; SGEMM_SHARED_FLOATS as usize];

    let fits_u32 = |x: u32, y: u32| x as u64 * y as u64 <= u32::MAX as u64;
    let sizes_fit = k != 0 && fits_u32(m, k) && fits_u32(k, n) && fits_u32(m, n) && matmul_operands_fit_unchecked(a, b, &mut c, m, n, k);
    // Block indices are compared before they are multiplied, so no tile origin wraps.
    if !sizes_fit || block_idx_x() >= n / BN || block_idx_y() >= m / BM {
        return;
    }
    let (block_row, block_col) = (block_idx_y() * BM, block_idx_x() * BN);
    let tid = thread_idx_x();
    // Global -> shared: one float4 of A (row tid / 2, depths 4 (tid % 2)..+4) and one of B
    // (depth tid / 32, columns 4 (tid % 32)..+4) per step.
    let (a_row, a_col) = (tid / 2, (tid % 2) * 4);
    let (b_row, b_col) = (tid / 32, (tid % 32) * 4);
    let a_global = (block_row + a_row) * k + a_col;
    let b_global = b_row * n + block_col + b_col;
    // Shared -> registers: rows 4 ty (+64) of A, columns 4 tx (+64) of B.
    let (ty, tx) = (tid / 16, tid % 16);
    // Floats from the array's start to its first 16-byte boundary (0 to 3).
    let pad = (smem.shared_address().wrapping_neg() % 16) / 4;
    let (a_shared, b_shared) = (pad, pad + 2 * SGEMM_A_STAGE);

    // SAFETY (every shared access below): `a_shared + stage * 1056 + depth * 132 + row`
    // (stage < 2, depth < 8, row < 128) and `b_shared + stage * 1024 + depth * 128 + col`
    // (col < 128) are below `pad + 4160 <= 4164`, the array's length; a 16-byte access
    // starts at a multiple of 4 floats from the rounded-up base (132, 128, 4 ty, 4 tx, 64
    // and 4 (tid % 32) are multiples of 4), so its address is 16-byte aligned.
    let store_stage = |stage: u32, av: Float4, bv: Float4| unsafe {
        let a_at = a_shared + stage * SGEMM_A_STAGE + a_col * SGEMM_A_STRIDE + a_row;
        smem.set_unchecked(a_at as usize, av.x);
        smem.set_unchecked((a_at + SGEMM_A_STRIDE) as usize, av.y);
        smem.set_unchecked((a_at + 2 * SGEMM_A_STRIDE) as usize, av.z);
        smem.set_unchecked((a_at + 3 * SGEMM_A_STRIDE) as usize, av.w);
        store_shared_f32x4(smem, b_shared + stage * SGEMM_B_STAGE + b_row * BN + b_col, bv);
    };
    // SAFETY (both loads of each step): `a_global + k0` is row `block_row + a_row < m`,
    // column `k0 + a_col <= k - 4` of A and `b_global + k0 n` row `k0 + b_row < k`, column
    // `block_col + b_col <= n - 4` of B (k0 <= k - 8, tiles inside the matrices, checked
    // above), so the four floats are in bounds; the sums stay below m k and k n, which fit
    // `u32`; both are multiples of 4 (k, n, a_col, b_col are) on 16-byte aligned buffers.
    let load_tile = |k0: u32| unsafe { (load_float4(a, (a_global + k0) as usize), load_float4(b, (b_global + k0 * n) as usize)) };

    let (av, bv) = load_tile(0);
    store_stage(0, av, bv);
    sync_threads();

    // SAFETY: all-zero bits are 0.0 (a `[[0.0; 8]; 8]` repeat can become a store loop that
    // keeps the array in local memory: docs/performance.md).
    let mut acc: [[f32; 8]; 8] = unsafe { core::mem::zeroed() };
    let mut k0 = 0;
    let mut stage = 0;
    while k0 < k {
        // Prefetch the next tile (on the last step, this tile again: an in-bounds load whose
        // store goes to the stage no one reads any more, which keeps the loop branch-free).
        let (av, bv) = load_tile(if k0 + BK < k { k0 + BK } else { k0 });
        let a_read = a_shared + stage * SGEMM_A_STAGE + 4 * ty;
        let b_read = b_shared + stage * SGEMM_B_STAGE + 4 * tx;
        unroll::<{ MATMUL_BLOCK_K as usize }>(|depth| {
            let depth = depth as u32;
            // SAFETY: see above.
            let (a_lo, a_hi, b_lo, b_hi) = unsafe {
                let (a_at, b_at) = (a_read + depth * SGEMM_A_STRIDE, b_read + depth * BN);
                (load_shared_f32x4(smem, a_at), load_shared_f32x4(smem, a_at + 64), load_shared_f32x4(smem, b_at), load_shared_f32x4(smem, b_at + 64))
            };
            accumulate_outer_product(&mut acc, [a_lo, a_hi], [b_lo, b_hi]);
        });
        stage ^= 1;
        store_stage(stage, av, bv);
        // The one barrier of the step: the stage just written is complete before the next
        // step reads it, and every read of the stage the next step writes is done.
        sync_threads();
        k0 += BK;
    }
    unroll::<8>(|i| {
        let row = block_row + 4 * ty + (i as u32 / 4) * 64 + i as u32 % 4;
        let index = row * n + block_col + 4 * tx;
        let r = &acc[i];
        // SAFETY: row `row < m`, columns `block_col + 4 tx..+4` and `+64..+68` below `n` (the
        // tile lies inside C), so both runs are in bounds and `row n + col < m n` fits `u32`;
        // multiples of 4 on a 16-byte aligned buffer. Only this thread writes them: thread
        // `tid < 256` of block (x, y) owns rows `128 y + 4 (tid / 16) + {0..4, 64..68}` and
        // columns `128 x + 4 (tid % 16) + {0..4, 64..68}`, disjoint from every other
        // (tid, block) of a launch of 1-D blocks in a 2-D grid (checked above).
        unsafe {
            store_float4(&mut c, index as usize, Float4 { x: r[0], y: r[1], z: r[2], w: r[3] });
            store_float4(&mut c, index as usize + 64, Float4 { x: r[4], y: r[5], z: r[6], w: r[7] });
        }
    });
}
