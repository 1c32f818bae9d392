//! Kernels of ported code in the output partitions of issue 30, each safe (no `unsafe`) and
//! with a CUDA C++ twin in `bench/cuda/reference_kernels.cu` written as the public source
//! writes it: vLLM's `fused_add_rms_norm_kernel` (a row per block, in place:
//! `DisjointSlice<T, BlockRows>`), a row-per-warp RMS norm grid-strided over warps
//! (`PerWarpRow` + `warp_rows`), llm.c's `unpermute_kernel` in a 3-D launch
//! (`DisjointSlice<T, Cells3d>`), and the threadfence reduction's "last block" sum
//! (`DisjointSlice<T, Handoff>`). `ferrocuda-bench --only partitions` times them against the
//! twins; `tests/out_partitions.rs` checks the maps.

use core::num::NonZeroU32;

use ferrocuda_device::global::partition::{BlockRows, Cells3d, Handoff};
use ferrocuda_device::global::{AtomicSlice, DisjointSlice, PerWarpRow, block_row, unique_cell_3d, warp_rows};
use ferrocuda_device::math::FastMath;
use ferrocuda_device::shared::SharedArray;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};
use ferrocuda_device::{kernel, shared_array, warp};

use crate::examples::Float4;

/// The sum over the block of every thread's `value`, in every thread (warp shuffles, then the
/// warps' sums through `sums`; two barriers), as the twins' `block_sum`.
#[inline(always)]
fn block_sum(value: f32, sums: SharedArray<f32, 32>) -> f32 {
    let warp_total = warp::reduce_sum(value);
    let (lane, warp_index) = (thread_idx_x() % 32, thread_idx_x() / 32);
    if lane == 0 {
        // `warp_index < 32` (at most 1024 threads per block); `% 32` says so to the compiler,
        // so the checked `set` has no panic path.
        sums.set((warp_index % 32) as usize, warp_total);
    }
    sync_threads();
    let warps = block_dim_x().div_ceil(32);
    let total = warp::reduce_sum(if lane < warps { sums.get((lane % 32) as usize) } else { 0.0 });
    sync_threads();
    total
}

#[inline(always)]
fn add4(a: Float4, b: Float4) -> Float4 {
    Float4 { x: a.x + b.x, y: a.y + b.y, z: a.z + b.z, w: a.w + b.w }
}

#[inline(always)]
fn squares4(a: Float4) -> f32 {
    (a.x * a.x + a.y * a.y) + (a.z * a.z + a.w * a.w)
}

#[inline(always)]
fn scale4(a: Float4, s: f32, w: Float4) -> Float4 {
    Float4 { x: a.x * s * w.x, y: a.y * s * w.y, z: a.z * s * w.z, w: a.w * s * w.w }
}

/// vLLM's `fused_add_rms_norm_kernel` (vectorised): one block per token, both rows updated
/// in place: `residual += input; input = residual * rsqrt(mean(residual^2) + eps) * weight`.
/// `hidden4` is the row width in `float4`s. Launch one block per token (1-D).
#[kernel(cols(input = hidden4, residual = hidden4))]
pub fn fused_add_rms_norm(
    mut input: DisjointSlice<Float4, BlockRows>,
    mut residual: DisjointSlice<Float4, BlockRows>,
    weight: &[Float4],
    epsilon: f32,
    hidden4: u32,
) {
    let sums = shared_array![f32; 32];
    let me = block_row();
    let mut variance = 0.0f32;
    if let (Some(x), Some(r)) = (input.row_mut(me), residual.row_mut(me)) {
        for (x, r) in x.iter_mut().zip(r.iter_mut()) {
            let z = add4(*x, *r);
            variance += squares4(z);
            *r = z;
        }
    }
    let total = block_sum(variance, sums);
    let s = (total / (hidden4 * 4) as f32 + epsilon).fast_rsqrt();
    if let (Some(x), Some(r)) = (input.row_mut(me), residual.row_mut(me)) {
        for ((w, x), r) in x.zip_input(weight).zip(r.iter_mut()) {
            *x = scale4(*r, s, *w);
        }
    }
}

/// RMS norm with one warp per row, grid-strided over the launch's warps (rows of `cols4`
/// `float4`s): `out = x * rsqrt(mean(x^2) + eps) * weight`.
#[kernel(cols(out = cols4))]
pub fn rms_norm_warp_rows(x: &[Float4], weight: &[Float4], mut out: PerWarpRow<Float4>, epsilon: f32, rows: u32, cols4: u32) {
    for me in warp_rows(rows) {
        let start = me.row() as usize * cols4 as usize;
        let (Some(x_row), Some(mut out_row)) = (x.get(start..start + cols4 as usize), out.row_mut(me)) else { break };
        let mut squares = 0.0f32;
        let mut c = me.lane() as usize;
        while c < x_row.len() {
            squares += squares4(x_row[c]);
            c += 32;
        }
        let s = (warp::reduce_sum(squares) / (cols4 * 4) as f32 + epsilon).fast_rsqrt();
        let mut j = 0;
        while let Some(o) = out_row.get_mut(j) {
            let c = me.lane() as usize + 32 * j;
            if let (Some(&v), Some(&w)) = (x_row.get(c), weight.get(c)) {
                *o = scale4(v, s, w);
            }
            j += 1;
        }
    }
}

/// llm.c's `unpermute_kernel` in a 3-D launch: `inp` is `(B, NH, T, HS)`, `out` is `(B, T,
/// NH, HS)`; thread `(x, y, z) = (hs, h, b T + t)` writes `out[b][t][h][hs]`, element `(z, y,
/// x)` of the `(B T) x NH x HS` output. Launch `(HS / bx, NH / by, B T / bz)` blocks. `t` is a
/// `NonZeroU32`, so `z / t` and `z % t` are one division with no zero check, as in CUDA.
#[kernel(cols(out = (nh, hs)))]
pub fn unpermute_3d(inp: &[f32], mut out: DisjointSlice<f32, Cells3d>, t: NonZeroU32, nh: u32, hs: u32) {
    let me = unique_cell_3d();
    if let Some((o, _)) = out.get_mut(me) {
        let (b, tt) = (me.z() / t, me.z() % t);
        let from = ((b as usize * nh as usize + me.y() as usize) * t.get() as usize + tt as usize) * hs as usize + me.x() as usize;
        if let Some(&v) = inp.get(from) {
            *o = v;
        }
    }
}

/// The threadfence reduction: each block sums its grid-strided share of `x`, publishes it,
/// and the last block to finish sums the partials (16-byte loads) into `total[0]`. `counter`
/// holds 0 before the launch and after it.
#[kernel(cols(partials = 1))]
pub fn sum_last_block(x: &[Float4], mut partials: DisjointSlice<f32, Handoff>, counter: AtomicSlice<u32>, total: AtomicSlice<f32>) {
    let sums = shared_array![f32; 32];
    let stride = grid_dim_x() as usize * block_dim_x() as usize;
    let mut i = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    let mut partial = 0.0f32;
    while let Some(v) = x.get(i) {
        partial += (v.x + v.y) + (v.z + v.w);
        i += stride;
    }
    let block_total = block_sum(partial, sums);
    partials.publish(0, block_total);
    let Some(counter) = counter.get(0) else { return };
    if let Some(last) = partials.arrive(counter) {
        let mine = last.fold(0.0f32, |a, p| a + p);
        let all = block_sum(mine, sums);
        if thread_idx_x() == 0
            && let Some(total) = total.get(0)
        {
            total.store(all);
        }
    }
}
