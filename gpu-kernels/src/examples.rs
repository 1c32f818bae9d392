//! Example kernels written the way a CUDA expert writes them: 16-byte vector loads, warp
//! shuffles, shared-memory tiles with padding, register blocking, shared-memory atomics.
//!
//! Each kernel has a twin in CUDA C++ (`bench/cuda/reference_kernels.cu`) with the same name
//! and the same parameter layout, so the benchmark (`ferrocuda-bench`) launches both through
//! the same typed launcher (`name::launch_in(&module, ..)`) with the same configuration.
//!
//! Sizes a kernel cannot handle (a matrix side that is not a multiple of the tile, a buffer
//! shorter than the sizes say) make every thread return at once, before any memory access:
//! the check is uniform across the block, so no barrier is skipped by part of it. The host
//! side checks the same conditions first and reports them (see `ferrocuda-bench`).
//!
//! Hot loops index with `get_unchecked` behind such checks: a bounds check that LLVM cannot
//! remove keeps the panic path alive, and that path costs ~50 registers per kernel.
//!
//! Outputs written one element per thread are `DisjointSlice`s; 2-D outputs are the safe
//! row-major matrix types: `PerBlockTile` (a tile per block, its threads striding over it:
//! `transpose_32`, `stencil_5pt`) and `PerWarpRow` (a row per warp: `softmax_rows_1024`), whose
//! launch shape every launcher checks. The matmuls write C through `PerThreadTile`: a thread's
//! register micro-tile (8 x 8 in `matmul_128x128`, four 4 x 4 blocks 64 apart in
//! `sgemm_pipelined`) stored row by row in 16-byte stores, checked once per tile.

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::global::{
    AtomicSlice, DisjointSlice, PerBlockTile, PerThreadTile, PerWarpRow, UncheckedSlice, block_tile, unique_index, warp_row, window,
};
use ferrocuda_device::kernel;
use ferrocuda_device::math::FastMath;
use ferrocuda_device::shared::SharedArray;
use ferrocuda_device::shared_array;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, block_dim_y, block_dim_z, block_idx_x, block_idx_y, block_idx_z, grid_dim_x, thread_idx_x, thread_idx_y};
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::warp;

/// Four `f32`s, 16-byte aligned: CUDA's `float4`. A load or store of one is a single
/// `ld.global.nc.v4.f32` / `st.global.v4.f32`, a quarter of the instructions of four scalars.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct Float4 {
    /// Element 0.
    pub x: f32,
    /// Element 1.
    pub y: f32,
    /// Element 2.
    pub z: f32,
    /// Element 3.
    pub w: f32,
}

/// Four `u32`s, 16-byte aligned: CUDA's `uint4`.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct U32x4 {
    /// Element 0.
    pub x: u32,
    /// Element 1.
    pub y: u32,
    /// Element 2.
    pub z: u32,
    /// Element 3.
    pub w: u32,
}

/// `y = a * x + y` on `float4`s, one vector per thread (launch `ceil(len / block)` blocks).
/// One 16-byte load per array per thread keeps many loads in flight: what a streaming kernel
/// needs to come near copy bandwidth.
#[kernel]
pub fn saxpy_x4(a: f32, x: &[Float4], mut y: DisjointSlice<Float4>) {
    let i = unique_index();
    if let Some(y_i) = y.get_mut(i)
        && i.get() < x.len()
    {
        let (xv, yv) = (x[i], *y_i);
        *y_i = Float4 { x: a * xv.x + yv.x, y: a * xv.y + yv.y, z: a * xv.z + yv.z, w: a * xv.w + yv.w };
    }
}

/// Threads per block that [`sum_x4()`], [`softmax_rows_1024()`] and [`histogram_bytes()`] are written for.
pub const BLOCK_THREADS: u32 = 256;

/// `out[0] += sum(x)`: a grid-stride loop over `float4`s into four independent partial sums,
/// a warp-shuffle reduction, the warps' sums through shared memory, one atomic per block.
/// Launch with [`BLOCK_THREADS`] threads per block and any grid (one full wave, SMs x resident
/// blocks per SM, is best), and zero `out[0]` first.
#[kernel]
pub fn sum_x4(x: &[Float4], out: AtomicSlice<f32>) {
    let warp_sums = shared_array![f32; 32];
    let stride = grid_dim_x() as usize * block_dim_x() as usize;
    let mut i = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    let mut partial = Float4::default();
    while i < x.len() {
        // SAFETY: `i < x.len()` is the loop condition.
        let v = unsafe { *x.get_unchecked(i) };
        partial.x += v.x;
        partial.y += v.y;
        partial.z += v.z;
        partial.w += v.w;
        i += stride;
    }
    let thread_sum = warp::reduce_sum((partial.x + partial.y) + (partial.z + partial.w));
    let lane = thread_idx_x() % warp::WARP_SIZE;
    let warp_index = thread_idx_x() / warp::WARP_SIZE;
    if lane == 0 && warp_index < 32 {
        // SAFETY: `warp_index < 32`, the array's length.
        unsafe { warp_sums.set_unchecked(warp_index as usize, thread_sum) };
    }
    sync_threads();
    if warp_index == 0 {
        let warps = block_dim_x().div_ceil(warp::WARP_SIZE);
        // SAFETY: `lane < 32`.
        let value = if lane < warps { unsafe { warp_sums.get_unchecked(lane as usize) } } else { 0.0 };
        let block_sum = warp::reduce_sum(value);
        if lane == 0
            && let Some(total) = out.get(0)
        {
            total.add(block_sum);
        }
    }
}

/// Side of a transpose tile.
pub const TRANSPOSE_TILE: u32 = 32;
/// Rows of threads per transpose block: each thread moves `TRANSPOSE_TILE / TRANSPOSE_ROWS` elements.
pub const TRANSPOSE_ROWS: u32 = 8;

/// `output = transpose(input)` for a row-major `rows x cols` input (`output` is `cols x rows`).
/// A 32 x 32 tile goes through shared memory so that both the reads and the writes are
/// coalesced; the tile's rows are padded to 33 floats so that reading a column touches 32
/// different banks. Launch with blocks of (32, 8) and a grid of (cols / 32, rows / 32);
/// `rows` and `cols` must be multiples of 32.
#[kernel(cols(output = rows))]
pub fn transpose_32(input: &[f32], mut output: PerBlockTile<f32, TRANSPOSE_TILE, TRANSPOSE_TILE, TRANSPOSE_TILE, TRANSPOSE_ROWS, true>, rows: u32, cols: u32) {
    const STRIDE: u32 = TRANSPOSE_TILE + 1;
    let tile = shared_array![f32; (TRANSPOSE_TILE * (TRANSPOSE_TILE + 1)) as usize];
    let elements = rows as usize * cols as usize;
    if !rows.is_multiple_of(TRANSPOSE_TILE) || !cols.is_multiple_of(TRANSPOSE_TILE) || input.len() < elements {
        return;
    }
    // The output tile of block (x, y) is (x, y), transposed: rows `32 x ..+32` and columns
    // `32 y ..+32` of the `cols x rows` output; thread (tx, ty) owns its rows `ty + 8 j`,
    // column `tx`. The launchers checked the block is (32, 8, 1) and the grid has z = 1;
    // `tile_mut` checks the tile lies inside the output (uniform across the block, so no
    // thread skips the barrier alone).
    let Some(mut out_tile) = output.tile_mut(block_tile()) else {
        return;
    };
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    // The input tile is the output tile's mirror: rows `32 y ..+32` (below `rows`: the output
    // tile's columns are inside its `rows` columns), columns `32 x ..+32` (checked here).
    let (tile_col, tile_row) = out_tile.origin();
    if tile_col >= cols {
        return;
    }
    let mut j = 0;
    while j < TRANSPOSE_TILE {
        let source = (tile_row + ty + j) as usize * cols as usize + (tile_col + tx) as usize;
        // SAFETY: the row is below `rows` and the column below `cols` (the tile lies inside
        // the matrix, checked above; tx < 32 and ty < 8 by the launch's block shape), so
        // `source < rows * cols <= input.len()`; the tile index is below 32 * 33.
        unsafe { tile.set_unchecked(((ty + j) * STRIDE + tx) as usize, *input.get_unchecked(source)) };
        j += TRANSPOSE_ROWS;
    }
    sync_threads();
    unroll::<{ (TRANSPOSE_TILE / TRANSPOSE_ROWS) as usize }>(|i| {
        if let Some(element) = out_tile.get_mut(i as u32, 0) {
            // SAFETY: the shared tile index is below 32 * 33 (tx < 32, ty + 8 i < 32).
            *element = unsafe { tile.get_unchecked((tx * STRIDE + ty + i as u32 * TRANSPOSE_ROWS) as usize) };
        }
    });
}

/// Rows of C computed by one matmul block.
pub const MATMUL_BLOCK_M: u32 = 128;
/// Columns of C computed by one matmul block.
pub const MATMUL_BLOCK_N: u32 = 128;
/// Depth of one shared-memory step of the matmul.
pub const MATMUL_BLOCK_K: u32 = 8;
/// Threads per matmul block (16 x 16, each computing 8 x 8 elements of C).
pub const MATMUL_THREADS: u32 = 256;
pub(crate) const MATMUL_THREAD_TILE: usize = 8;
// Both matmuls' C outputs need blocks of `MATMUL_THREADS` threads.
const _: () = assert!(
    PerThreadTile::<f32, MATMUL_BLOCK_M, MATMUL_BLOCK_N, 8, 8>::THREADS == MATMUL_THREADS
        && PerThreadTile::<f32, MATMUL_BLOCK_M, MATMUL_BLOCK_N, 4, 4, 2, 2>::THREADS == MATMUL_THREADS
);

/// `c = a * b` in FP32, all row-major: `a` is `m x k`, `b` is `k x n`, `c` is `m x n`.
/// Each block computes a 128 x 128 tile of C from 128 x 8 and 8 x 128 tiles of A and B in
/// shared memory (A transposed on the way in, so that a thread's 8 rows are one 32-byte run);
/// each thread keeps an 8 x 8 block of C in registers and does 64 FMAs for every 16 floats
/// it reads from shared memory. Launch with [`MATMUL_THREADS`] threads and a grid of
/// (n / 128, m / 128); `m` and `n` must be multiples of 128, `k` of 8, and the buffers
/// 16-byte aligned.
#[kernel(cols(c = n))]
pub fn matmul_128x128(a: &[f32], b: &[f32], mut c: PerThreadTile<f32, MATMUL_BLOCK_M, MATMUL_BLOCK_N, 8, 8>, m: u32, n: u32, k: u32) {
    const BM: u32 = MATMUL_BLOCK_M;
    const BN: u32 = MATMUL_BLOCK_N;
    const BK: u32 = MATMUL_BLOCK_K;
    const TT: usize = MATMUL_THREAD_TILE;
    let a_tile = shared_array![f32; (MATMUL_BLOCK_K * MATMUL_BLOCK_M) as usize];
    let b_tile = shared_array![f32; (MATMUL_BLOCK_K * MATMUL_BLOCK_N) as usize];

    let sizes_fit = matmul_operands_fit(a, b, m, n, k);
    let (Some(block_row), Some(block_col)) = (offset_below(block_idx_y(), BM, 0, m), offset_below(block_idx_x(), BN, 0, n)) else {
        return;
    };
    if !sizes_fit {
        return;
    }
    // This thread's 8 x 8 block of C, rows `block_row + 8 (tid / 16) ..+8`, columns
    // `block_col + 8 (tid % 16) ..+8`: `None` (in every thread of the block alike) unless the
    // tile lies inside C and C is 16-byte aligned with rows of a multiple of 4 floats.
    let Some(mut c_tile) = c.tile_aligned_mut(block_tile()) else {
        return;
    };
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
    // Two `st.global.v4.f32` per row.
    for (i, row) in acc.iter().enumerate() {
        c_tile.store_row(i as u32, 0, *row);
    }
}

/// Row stride, in floats, of [`sgemm_pipelined()`]'s transposed A tile: 128 + 4. The pad
/// puts the two halves of a warp's transposing stores (depth `4 (tid % 2) + i`, rows
/// `tid / 2`) on different banks, and keeps each row 16 bytes aligned for `ld.shared.v4`.
pub(crate) const SGEMM_A_STRIDE: u32 = MATMUL_BLOCK_M + 4;
/// Floats of one stage of A (8 depths of 132) and of B (8 rows of 128).
pub(crate) const SGEMM_A_STAGE: u32 = MATMUL_BLOCK_K * SGEMM_A_STRIDE;
pub(crate) const SGEMM_B_STAGE: u32 = MATMUL_BLOCK_K * MATMUL_BLOCK_N;
/// Two stages of A, then two of B, plus 4 floats of slack so that the base can be rounded up
/// to 16 bytes (a `shared_array!` of `f32` is only declared 4-byte aligned).
pub(crate) const SGEMM_SHARED_FLOATS: u32 = 2 * (SGEMM_A_STAGE + SGEMM_B_STAGE) + 4;

/// `c = a * b` in FP32, all row-major (`a` is `m x k`, `b` is `k x n`, `c` is `m x n`): the
/// 128 x 128 x 8 tiling of [`matmul_128x128()`] with the schedule that brings SGEMM near
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
#[kernel(launch_bounds(256, 2), cols(c = n))]
pub fn sgemm_pipelined(a: &[f32], b: &[f32], mut c: PerThreadTile<f32, MATMUL_BLOCK_M, MATMUL_BLOCK_N, 4, 4, 2, 2>, m: u32, n: u32, k: u32) {
    const BM: u32 = MATMUL_BLOCK_M;
    const BN: u32 = MATMUL_BLOCK_N;
    const BK: u32 = MATMUL_BLOCK_K;
    const _: () = assert!(MATMUL_THREADS == 256 && BM == 128 && BN == 128 && BK == 8, "the thread mappings below");
    let smem = shared_array![f32; SGEMM_SHARED_FLOATS as usize];

    let fits_u32 = |x: u32, y: u32| x as u64 * y as u64 <= u32::MAX as u64;
    let sizes_fit = k != 0 && fits_u32(m, k) && fits_u32(k, n) && matmul_operands_fit(a, b, m, n, k);
    // Block indices are compared before they are multiplied, so no tile origin wraps.
    if !sizes_fit || block_idx_x() >= n / BN || block_idx_y() >= m / BM {
        return;
    }
    // This thread's four 4 x 4 blocks of C (rows `4 ty (+64) ..+4`, columns `4 tx (+64) ..+4`
    // of the block's tile): `None` in every thread of the block alike unless the tile lies
    // inside C and C is 16-byte aligned with rows of a multiple of 4 floats.
    let Some(mut c_tile) = c.tile_aligned_mut(block_tile()) else {
        return;
    };
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
    // Row i of the micro-tile is tile row `4 ty + 64 (i / 4) + i % 4`; its two runs of four
    // are columns `4 tx ..+4` and `64 + 4 tx ..+4`: one `st.global.v4.f32` each.
    unroll::<8>(|i| {
        let r = &acc[i];
        c_tile.store_row(i as u32, 0, [r[0], r[1], r[2], r[3]]);
        c_tile.store_row(i as u32, 1, [r[4], r[5], r[6], r[7]]);
    });
}

/// Columns of a [`softmax_rows_1024()`] row.
pub const SOFTMAX_COLS: usize = 1024;
const SOFTMAX_VECTORS_PER_LANE: usize = SOFTMAX_COLS / 4 / 32;
/// `float4`s per [`softmax_rows_1024()`] row: the row width of its output.
pub const SOFTMAX_ROW_VECTORS: u32 = (SOFTMAX_COLS / 4) as u32;

/// Row-wise softmax of a row-major `rows x 1024` matrix: one warp per row, the row held in
/// registers (eight `float4`s per lane), so it is read once and written once. The maximum
/// and the sum are warp-shuffle reductions; `exp` is the hardware `ex2.approx` (CUDA's
/// `__expf`). Launch with [`BLOCK_THREADS`] threads (8 rows per block) and
/// `ceil(rows / 8)` blocks.
#[kernel(cols(output = SOFTMAX_ROW_VECTORS))]
pub fn softmax_rows_1024(input: &[Float4], mut output: PerWarpRow<Float4>, rows: u32) {
    const V: usize = SOFTMAX_VECTORS_PER_LANE;
    // Warp w owns row w, lane l its vectors l, l + 32, ... (the launchers checked a 1-D
    // launch of whole warps). Every check below is uniform across the warp, so the shuffles
    // see all 32 lanes.
    let me = warp_row();
    if me.row() >= rows {
        return;
    }
    let start = me.row() as usize * SOFTMAX_ROW_VECTORS as usize;
    let (Some(row_in), Some(mut row_out)) = (input.get(start..start + SOFTMAX_ROW_VECTORS as usize), output.row_mut(me)) else {
        return;
    };
    let lane = me.lane() as usize;
    let mut values = [Float4::default(); V];
    unroll::<V>(|v| values[v] = row_in[lane + 32 * v]);
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
    unroll::<V>(|v| {
        let value = values[v];
        if let Some(element) = row_out.get_mut(v) {
            *element = Float4 { x: value.x * scale, y: value.y * scale, z: value.z * scale, w: value.w * scale };
        }
    });
}

/// Bins of [`histogram_bytes()`].
pub const HISTOGRAM_BINS: usize = 256;
const LANES: usize = 32;

/// `bins[b] += number of bytes equal to b` in `data` (read as 16-byte vectors). Each block
/// counts in shared memory (`atom.shared.add`), with one copy of the 256 bins per lane
/// (`local[bin][lane]`): lane `l` only touches bank `l`, so the 32 atomics of a warp never
/// queue on one bank, whatever the data (one shared copy per block would serialise on bank
/// conflicts: ~3.5-way for random bytes). At the end each thread sums one bin over the 32
/// copies (skewed so that a warp reads 32 banks) and adds it to the global bins. Launch with
/// [`BLOCK_THREADS`] threads, any grid (one full wave, SMs x resident blocks per SM, is best:
/// the 32 KiB of shared memory allow 7 blocks per SM on H100/H200), and zero `bins` (256) first.
#[kernel]
pub fn histogram_bytes(data: &[U32x4], bins: AtomicSlice<u32>) {
    let local = shared_array![u32; HISTOGRAM_BINS * LANES];
    if bins.len() < HISTOGRAM_BINS {
        return;
    }
    let tid = thread_idx_x() as usize;
    let threads = block_dim_x() as usize;
    let lane = tid % LANES;
    let mut i = tid;
    while i < HISTOGRAM_BINS * LANES {
        // SAFETY: `i < 256 * 32`, the array's length.
        unsafe { local.set_unchecked(i, 0) };
        i += threads;
    }
    sync_threads();
    let stride = grid_dim_x() as usize * threads;
    let mut i = block_idx_x() as usize * threads + tid;
    while i < data.len() {
        // SAFETY: `i < data.len()` is the loop condition.
        let words = unsafe { *data.get_unchecked(i) };
        for word in [words.x, words.y, words.z, words.w] {
            for shift in [0, 8, 16, 24] {
                let bin = ((word >> shift) & 0xff) as usize;
                // A byte and a lane index 256 x 32 counters: the bounds check folds away.
                local.fetch_add(bin * LANES + lane, 1);
            }
        }
        i += stride;
    }
    sync_threads();
    let mut bin = tid;
    while bin < HISTOGRAM_BINS {
        let mut count = 0;
        for l in 0..LANES {
            // SAFETY: `bin < 256` and the lane is below 32.
            count += unsafe { local.get_unchecked(bin * LANES + (l + bin) % LANES) };
        }
        if count != 0 {
            // SAFETY: `bin < 256 <= bins.len()` (checked above).
            unsafe { bins.at_unchecked(bin) }.add(count);
        }
        bin += threads;
    }
}

/// Rows of the grid that one [`stencil_5pt()`] thread computes.
pub const STENCIL_ROWS_PER_THREAD: u32 = 8;
/// Threads per [`stencil_5pt()`] block (one column each).
pub const STENCIL_BLOCK_X: u32 = 128;
/// Weight of the centre point in [`stencil_5pt()`].
pub const STENCIL_CENTRE: f32 = 0.5;
/// Weight of each of the four neighbours in [`stencil_5pt()`].
pub const STENCIL_NEIGHBOUR: f32 = 0.125;

/// One Jacobi step of a 5-point stencil on a row-major `rows x cols` grid:
/// `out = 0.5 * centre + 0.125 * (north + south + east + west)` inside, `out = in` on the
/// border. Each thread computes 8 rows of one column: it first loads the 10 values of its
/// column (8 rows and the rows above and below: each loaded once, not three times) and the
/// 16 east and west neighbours (neighbouring threads' loads, served by L1), all in flight
/// together, then computes and stores. Launch with blocks of 128 and a grid of
/// (cols / 128, rows / 8); `cols` must be a multiple of 128 and `rows` of 8.
#[kernel(cols(output = cols))]
pub fn stencil_5pt(input: &[f32], mut output: PerBlockTile<f32, STENCIL_ROWS_PER_THREAD, STENCIL_BLOCK_X, STENCIL_BLOCK_X, 1>, rows: u32, cols: u32) {
    const R: usize = STENCIL_ROWS_PER_THREAD as usize;
    if !rows.is_multiple_of(STENCIL_ROWS_PER_THREAD) || !cols.is_multiple_of(STENCIL_BLOCK_X) {
        return;
    }
    // Block (x, y) owns the tile of rows `8 y ..+8`, columns `128 x ..+128`; thread tx its
    // column `128 x + tx`, all 8 rows (the launchers checked blocks of (128, 1, 1) in a grid
    // with z = 1; `tile_mut` that the tile lies inside the output).
    let Some(mut tile) = output.tile_mut(block_tile()) else {
        return;
    };
    let (col, first_row) = (tile.col(0), tile.row(0));
    if first_row >= rows {
        return;
    }
    let inner_col = col > 0 && col + 1 < cols;
    // column[i] is row first_row + i - 1: the row above this thread's rows, its 8, the row below.
    let mut column = [0.0f32; R + 2];
    let (mut west, mut east) = ([0.0f32; R], [0.0f32; R]);
    // Inside the grid: the 10 x 3 neighbourhood as one window, checked once (no check per read).
    let inside = if first_row > 0 && first_row + STENCIL_ROWS_PER_THREAD < rows && inner_col {
        window::<f32, { R + 2 }, 3>(input, cols, first_row - 1, col - 1)
    } else {
        None
    };
    if let Some(w) = inside {
        unroll::<{ R + 2 }>(|i| column[i] = w.read(i, 1).unwrap_or(0.0));
        unroll::<R>(|r| (west[r], east[r]) = (w.read(r + 1, 0).unwrap_or(0.0), w.read(r + 1, 2).unwrap_or(0.0)));
    } else {
        // The grid's edges: each read checked (a value past the input's end reads as 0).
        let width = cols as usize;
        let at = |row: u32| row as usize * width + col as usize;
        let read = |index: usize| input.get(index).copied().unwrap_or(0.0);
        for (i, value) in column.iter_mut().enumerate() {
            let row_plus_one = first_row + i as u32;
            if row_plus_one >= 1 && row_plus_one <= rows {
                *value = read(at(row_plus_one - 1));
            }
        }
        if inner_col {
            for r in 0..R {
                let centre = at(first_row + r as u32);
                (west[r], east[r]) = (read(centre - 1), read(centre + 1));
            }
        }
    }
    unroll::<R>(|r| {
        let row = first_row + r as u32;
        let value = if inner_col && row > 0 && row + 1 < rows {
            STENCIL_CENTRE * column[r + 1] + STENCIL_NEIGHBOUR * ((column[r] + column[r + 2]) + (west[r] + east[r]))
        } else {
            column[r + 1]
        };
        if let Some(element) = tile.get_mut(r as u32, 0) {
            *element = value;
        }
    });
}

/// A `float4` of `slice[index..index + 4]` in one 16-byte load (`ld.global.nc.v4.f32` for a
/// read-only slice).
///
/// # Safety
/// `index + 4 <= slice.len()` and `slice[index]` is 16-byte aligned.
#[inline(always)]
pub(crate) unsafe fn load_float4(slice: &[f32], index: usize) -> Float4 {
    // SAFETY: the caller keeps the four elements in bounds and aligned for a `Float4`.
    unsafe { *slice.as_ptr().add(index).cast::<Float4>() }
}

/// Stores `value` to `slice[index..index + 4]` in one 16-byte store.
///
/// # Safety
/// As for [`load_float4`], and no other thread of the launch accesses the four elements
/// (the contract of [`UncheckedSlice::write_unchecked`]).
#[inline(always)]
pub(crate) unsafe fn store_float4(slice: &mut UncheckedSlice<f32>, index: usize, value: Float4) {
    // SAFETY: the caller keeps the four elements in bounds, aligned for a `Float4` and to
    // this thread.
    unsafe { slice.as_mut_ptr().add(index).cast::<Float4>().write(value) }
}

/// What both safe 128x128-tile matmuls need of their inputs and launch: `m`, `n`, `k`
/// multiples of the block tile, `a` (m x k) and `b` (k x n) long enough and 16-byte aligned,
/// [`MATMUL_THREADS`] threads in 1-D blocks of a 2-D grid (which the launchers check for the
/// output `C`; checked here too for the CUDA C++ twins' sake and so that the compiler knows
/// `tid < 256` for the input loads). C's fit is [`PerThreadTile::tile_aligned_mut`]'s check.
#[inline(always)]
fn matmul_operands_fit(a: &[f32], b: &[f32], m: u32, n: u32, k: u32) -> bool {
    m.is_multiple_of(MATMUL_BLOCK_M)
        && n.is_multiple_of(MATMUL_BLOCK_N)
        && k.is_multiple_of(MATMUL_BLOCK_K)
        && a.len() >= m as usize * k as usize
        && b.len() >= k as usize * n as usize
        && (a.as_ptr() as usize | b.as_ptr() as usize).is_multiple_of(16)
        && block_dim_x() == MATMUL_THREADS
        && one_dimensional_blocks_in_a_2d_grid()
}

/// The `unsafe` twins' check ([`crate::unchecked`]): as [`matmul_operands_fit`], and `c`
/// (m x n) long enough and 16-byte aligned.
#[inline(always)]
pub(crate) fn matmul_operands_fit_unchecked(a: &[f32], b: &[f32], c: &mut UncheckedSlice<f32>, m: u32, n: u32, k: u32) -> bool {
    matmul_operands_fit(a, b, m, n, k) && c.len() >= m as usize * n as usize && (c.as_mut_ptr() as usize).is_multiple_of(16)
}

/// One depth step of a thread's 8 x 8 block of C: `acc[i][j] += a[i] * b[j]`, 64 FMAs, with
/// `a` and `b` the 8 floats of two float4 loads each.
#[inline(always)]
pub(crate) fn accumulate_outer_product(acc: &mut [[f32; MATMUL_THREAD_TILE]; MATMUL_THREAD_TILE], a: [Float4; 2], b: [Float4; 2]) {
    let a = [a[0].x, a[0].y, a[0].z, a[0].w, a[1].x, a[1].y, a[1].z, a[1].w];
    let b = [b[0].x, b[0].y, b[0].z, b[0].w, b[1].x, b[1].y, b[1].z, b[1].w];
    unroll::<MATMUL_THREAD_TILE>(|i| unroll::<MATMUL_THREAD_TILE>(|j| acc[i][j] += a[i] * b[j]));
}

/// True on a launch of 1-D blocks (`blockDim.y == blockDim.z == 1`) in a 2-D grid (this
/// block's `z == 0`): the shape under which the 2-D kernels' threads own disjoint elements.
#[inline(always)]
pub(crate) fn one_dimensional_blocks_in_a_2d_grid() -> bool {
    block_dim_y() == 1 && block_dim_z() == 1 && block_idx_z() == 0
}

/// `index * size + offset` when it is below `limit`, else `None`: where a block's tile or a
/// thread's element starts, without the `u32` wrap-around of a plain multiply. A launch of
/// 2^27 blocks of a 32-wide tile would wrap `block * 32` back onto another block's tile and
/// make two threads write one element (a data race in safe code); this is one `mul.hi` more.
#[inline(always)]
pub fn offset_below(index: u32, size: u32, offset: u32, limit: u32) -> Option<u32> {
    let start = index.checked_mul(size)?.checked_add(offset)?;
    (start < limit).then_some(start)
}

/// True on a 1-D launch (1-D blocks, this block at `y == z == 0`).
#[inline(always)]
pub(crate) fn one_dimensional_launch() -> bool {
    one_dimensional_blocks_in_a_2d_grid() && block_idx_y() == 0
}

/// Four floats from shared memory in one `ld.shared.v4.f32` (the device library's shared
/// arrays load scalars; a 16-byte load quarters the shared-memory instructions of the
/// matmul's inner loop, as `float4` loads from `__shared__` arrays do in CUDA C++).
///
/// # Safety
/// `address` is a 16-byte aligned shared-window address with 16 readable bytes.
#[inline(always)]
pub(crate) unsafe fn load_shared_float4(address: u32) -> Float4 {
    #[cfg(target_arch = "nvptx64")]
    {
        let (x, y, z, w): (f32, f32, f32, f32);
        // SAFETY: the caller passes an aligned, in-bounds shared address.
        unsafe {
            core::arch::asm!("ld.shared.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];", x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
                a = in(reg32) address, options(nostack, readonly, preserves_flags));
        }
        Float4 { x, y, z, w }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // The CPU executor's shared memory is reached through the scalar accessors.
        let _ = address;
        unimplemented!("ld.shared.v4 runs on the GPU only")
    }
}

/// Stores four floats to shared memory in one `st.shared.v4.f32`.
///
/// # Safety
/// As for [`load_shared_float4`], with 16 writable bytes.
#[inline(always)]
pub(crate) unsafe fn store_shared_float4(address: u32, value: Float4) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller passes an aligned, in-bounds shared address.
    unsafe {
        core::arch::asm!("st.shared.v4.f32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg32) address, x = in(reg32) value.x, y = in(reg32) value.y,
            z = in(reg32) value.z, w = in(reg32) value.w, options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = (address, value);
        unimplemented!("st.shared.v4 runs on the GPU only")
    }
}

/// Four floats of `tile` from element `index`: one `ld.shared.v4.f32` on the GPU, four
/// checked scalar reads on the CPU executor (which has no vector shared access).
///
/// # Safety
/// `index + 4 <= N`, and the address of element `index` is a multiple of 16.
#[inline(always)]
pub(crate) unsafe fn load_shared_f32x4<const N: usize>(tile: SharedArray<f32, N>, index: u32) -> Float4 {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller keeps the 16 bytes inside the array and aligned.
    unsafe {
        load_shared_float4(tile.shared_address() + index * 4)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let i = index as usize;
        // SAFETY: the caller keeps `i + 3 < N`.
        unsafe { Float4 { x: tile.get_unchecked(i), y: tile.get_unchecked(i + 1), z: tile.get_unchecked(i + 2), w: tile.get_unchecked(i + 3) } }
    }
}

/// Stores four floats to `tile` from element `index`: one `st.shared.v4.f32` on the GPU.
///
/// # Safety
/// As for [`load_shared_f32x4`].
#[inline(always)]
pub(crate) unsafe fn store_shared_f32x4<const N: usize>(tile: SharedArray<f32, N>, index: u32, value: Float4) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller keeps the 16 bytes inside the array and aligned.
    unsafe {
        store_shared_float4(tile.shared_address() + index * 4, value)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let i = index as usize;
        // SAFETY: the caller keeps `i + 3 < N`.
        unsafe {
            tile.set_unchecked(i, value.x);
            tile.set_unchecked(i + 1, value.y);
            tile.set_unchecked(i + 2, value.z);
            tile.set_unchecked(i + 3, value.w);
        }
    }
}
