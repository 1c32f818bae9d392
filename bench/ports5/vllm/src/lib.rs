//! vLLM's kernels of issue 30's fifth held-out port, ported from the docs alone (README.md,
//! docs/kernel-model.md, docs/performance.md, the device crate's rustdoc).
//!
//! Each kernel is the first try as committed; a `_fixed` variant beside it (when there is one)
//! is the fix round (bench/ports5/RESULTS.md says why). The CUDA C++ twins are
//! bench/ports5/cuda/ports5.cu (`-DPORTS5_VLLM`, no fast math); [`twin_abi`] declares their
//! parameter lists for the host harness.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::block::RuntimeBlockReduce;
use ferrocuda_device::global::{
    AtomicSlice, BlockRows, DisjointMatrix, DisjointSlice, PerBlockTile, RowTiles, UncheckedSlice, block_row, block_tile, row_tile, unique_cell,
};
use ferrocuda_device::half::{F32ToHalf, HalfFloat, bf16, fp8};
use ferrocuda_device::prelude::*;
use ferrocuda_device::thread::{block_dim, block_dim_x, block_idx, block_idx_x, grid_dim, strided_range, thread_idx_x};
use ferrocuda_device::{block_scratch, kernel, unroll::unroll, vector, warp};

ferrocuda_device::embed_kernels!();

pub mod twin_abi;

/// vLLM's `gelu_tanh_kernel` (activation_kernels.cu): PyTorch's GELU, tanh approximation, in
/// `f32`, rounded once to bf16.
#[inline(always)]
pub fn gelu_tanh(x: bf16) -> bf16 {
    const BETA: f32 = core::f32::consts::SQRT_2 * core::f32::consts::FRAC_2_SQRT_PI * 0.5;
    const KAPPA: f32 = 0.044715;
    let f = x.widen();
    let x_cube = f * f * f;
    let inner = BETA * (f + KAPPA * x_cube);
    (0.5 * f * (1.0 + inner.tanh())).to_bf16()
}

/// `act_and_mul_kernel<bf16, gelu_tanh_kernel, true>` (vLLM activation_kernels.cu, the
/// `gelu_tanh_and_mul` op): `out[t, i] = gelu_tanh(input[t, i]) * input[t, d + i]`, one
/// block per token, threads striding over `d`. First try.
#[kernel(cols(out = d))]
pub fn gelu_tanh_and_mul_kernel(mut out: DisjointSlice<bf16, BlockRows>, input: &[bf16], d: u32) {
    let me = block_row();
    let start = me.row() as usize * 2 * d as usize;
    let Some(row_in) = input.get(start..start + 2 * d as usize) else { return };
    let (xs, ys) = row_in.split_at(d as usize);
    let Some(row) = out.row_mut(me) else { return };
    row.zip_inputs([xs, ys]).for_each(|([&x, &y], o)| *o = gelu_tanh(x).mul_rn(y));
}

/// `tanhf(x)` as nvcc 13 compiles it for sm_90 without fast math (read from the twin's SASS):
/// branch-free, `x + x^3 P(x^2)` below `|x| = 0.6`, else `1 - 2 / (2^(2 |x| log2 e) + 1)`
/// with one `ex2.approx` and one `rcp.approx` (1 above 9.0109), the sign copied from `x`.
/// The device library's `f32::tanh` divides correctly rounded (`div.rn`, with its slow-path
/// call) and branches on `|x| < 1`: about twice the instructions (RESULTS.md).
#[inline(always)]
pub fn tanh_nvcc(x: f32) -> f32 {
    let a = x.abs();
    let e = (a * f32::from_bits(0x4038_aa3b)).fast_exp2(); // 2 log2(e)
    let r = (e + 1.0).fast_recip();
    let big = if a >= f32::from_bits(0x4110_2cb4) { 1.0 } else { (-2.0f32).mul_add(r, 1.0) };
    let big = f32::from_bits((big.to_bits() & 0x7fff_ffff) | (x.to_bits() & 0x8000_0000));
    let x2 = x * x;
    let p = x2.mul_add(f32::from_bits(0x3c80_f082), -f32::from_bits(0x3d56_3cae));
    let p = x2.mul_add(p, f32::from_bits(0x3e08_5941));
    let p = x2.mul_add(p, -f32::from_bits(0x3eaa_a9ed));
    // nvcc's `fma(p, x2, 0)` then `fma(t, x, x)`: keeps the sign of -0 (audit 2026-11-28c G15-3).
    let t = p.mul_add(x2, 0.0);
    let small = t.mul_add(x, x);
    if a >= 0.6 { big } else { small }
}

/// [`gelu_tanh`] with [`tanh_nvcc`].
#[inline(always)]
pub fn gelu_tanh_fixed(x: bf16) -> bf16 {
    const BETA: f32 = core::f32::consts::SQRT_2 * core::f32::consts::FRAC_2_SQRT_PI * 0.5;
    const KAPPA: f32 = 0.044715;
    let f = x.widen();
    let x_cube = f * f * f;
    let inner = BETA * (f + KAPPA * x_cube);
    (0.5 * f * (1.0 + tanh_nvcc(inner))).to_bf16()
}

/// [`gelu_tanh_and_mul_kernel()`] with nvcc's `tanhf` sequence ([`tanh_nvcc`]). Fix round.
#[kernel(cols(out = d))]
pub fn gelu_tanh_and_mul_kernel_fixed(mut out: DisjointSlice<bf16, BlockRows>, input: &[bf16], d: u32) {
    let me = block_row();
    let start = me.row() as usize * 2 * d as usize;
    let Some(row_in) = input.get(start..start + 2 * d as usize) else { return };
    let (xs, ys) = row_in.split_at(d as usize);
    let Some(row) = out.row_mut(me) else { return };
    row.zip_inputs([xs, ys]).for_each(|([&x, &y], o)| *o = gelu_tanh_fixed(x).mul_rn(y));
}

/// The largest finite FP8 E4M3 value (c10's `Float8_e4m3fn` max).
pub const FP8_E4M3_MAX: f32 = 448.0;

/// vLLM's `scaled_fp8_conversion<true>` (quantization/fp8/common.cuh): `val * scale`, clamped
/// to `±448`, as FP8 E4M3 bits.
#[inline(always)]
// `fmax(-448, fmin(x, 448))` as vLLM writes it: `min`/`max` map NaN to a bound, `clamp` keeps it.
#[allow(clippy::manual_clamp)]
pub fn scaled_fp8_conversion(val: f32, scale_inv: f32) -> u8 {
    let x = val * scale_inv;
    let r = x.min(FP8_E4M3_MAX).max(-FP8_E4M3_MAX);
    fp8::e4m3(r)
}

/// `rms_norm_static_fp8_quant_kernel<bf16, Float8_e4m3fn>` (vLLM layernorm_quant_kernels.cu):
/// RMS norm of one token per block, times `weight`, quantised to FP8 with a static scale:
/// `out = fp8(bf16(x * rstd) * w / scale)`. `out` is FP8 E4M3 bits. First try.
#[kernel(cols(out = hidden_size))]
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_static_fp8_quant_kernel(
    mut out: DisjointSlice<u8, BlockRows>,
    input: &[bf16],
    input_stride: u32,
    weight: &[bf16],
    scale: &[f32],
    epsilon: f32,
    num_tokens: u32,
    hidden_size: u32,
) {
    let _ = num_tokens;
    let me = block_row();
    let start = me.row() as usize * input_stride as usize;
    // The same answer in every thread of the block: returning here skips no barrier of another thread.
    let Some(x) = input.get(start..start + hidden_size as usize) else { return };
    let Some(w) = weight.get(..hidden_size as usize) else { return };
    let Some(&scale) = scale.first() else { return };
    let mut variance = 0.0f32;
    for i in strided_range(thread_idx_x() as usize, x.len(), block_dim_x() as usize) {
        let v = x[i].widen();
        variance += v * v;
    }
    let variance = RuntimeBlockReduce::new(block_scratch!(f32)).sum_all(variance);
    let s_variance = (variance / hidden_size as f32 + epsilon).rsqrt();
    // invert scale to avoid division
    let scale_inv = 1.0 / scale;
    let Some(row) = out.row_mut(me) else { return };
    row.zip_inputs([x, w]).for_each(|([&x, &w], o)| {
        let out_norm = (x.widen() * s_variance).to_bf16().mul_rn(w).widen();
        *o = scaled_fp8_conversion(out_norm, scale_inv);
    });
}

/// `apply_repetition_penalties_kernel<float>` (vLLM sampler.cu): for every token of the
/// vocabulary seen in the prompt or the output, `logit / penalty` if positive, else `logit *
/// penalty`, in place. The masks are `bool` in vLLM; here `u8` (0 or 1, the same bytes), since
/// a kernel slice element must be `Pod` and `bool` is not. First try: the source's 2-D grid
/// (sequence, vocabulary tile) as a 2-D output, one element per thread.
#[kernel(cols(logits = vocab_size))]
pub fn apply_repetition_penalties_kernel(
    mut logits: DisjointMatrix<f32>,
    prompt_mask: &[u8],
    output_mask: &[u8],
    repetition_penalties: &[f32],
    vocab_size: u32,
) {
    let cell = unique_cell();
    let Some(&penalty) = repetition_penalties.get(cell.row() as usize) else { return };
    let i = cell.row() as usize * vocab_size as usize + cell.col() as usize;
    let Some(logit) = logits.get_mut(cell) else { return };
    let Some(&p) = prompt_mask.get(i) else { return };
    let is_repeated = p != 0 || output_mask.get(i).is_some_and(|&o| o != 0);
    if is_repeated {
        if *logit > 0.0 {
            *logit /= penalty;
        } else {
            *logit *= penalty;
        }
    }
}

/// Columns of a vocabulary tile in [`apply_repetition_penalties_kernel_tiles()`] (a constant:
/// `PerBlockTile`'s tile shape is part of its type).
pub const PENALTY_TILE: u32 = 8192;
/// Threads per block of [`apply_repetition_penalties_kernel_tiles()`] (vLLM's `min(tile_size, 1024)`).
pub const PENALTY_THREADS: u32 = 1024;

/// [`apply_repetition_penalties_kernel()`] on the source's grid, safely: block `(seq, tile)`
/// (`blockIdx.x`, `blockIdx.y`), its 1024 threads striding over a tile of the sequence's row,
/// as a `PerBlockTile` of one row by [`PENALTY_TILE`] columns (transposed orientation: block
/// `(x, y)` owns tile row `x`, tile column `y`). vLLM sizes its tiles at run time
/// (`ceil(vocab / ceil(SMs / seqs))`); here the tile is a compile-time constant, so the grid is
/// `(seqs, ceil(vocab / 8192))`. A measurement of the first try's reshaping, not a fix.
#[kernel(cols(logits = vocab_size))]
pub fn apply_repetition_penalties_kernel_tiles(
    mut logits: PerBlockTile<f32, 1, PENALTY_TILE, PENALTY_THREADS, 1, true>,
    prompt_mask: &[u8],
    output_mask: &[u8],
    repetition_penalties: &[f32],
    vocab_size: u32,
) {
    let Some(mut tile) = logits.tile_clipped_mut(block_tile()) else { return };
    let seq = tile.row(0);
    let Some(&penalty) = repetition_penalties.get(seq as usize) else { return };
    let row = seq as usize * vocab_size as usize;
    for j in 0..PENALTY_TILE / PENALTY_THREADS {
        let i = row + tile.col(j) as usize;
        let Some(logit) = tile.get_mut(0, j) else { continue };
        let Some(&p) = prompt_mask.get(i) else { continue };
        if p != 0 || output_mask.get(i).is_some_and(|&o| o != 0) {
            if *logit > 0.0 {
                *logit /= penalty;
            } else {
                *logit *= penalty;
            }
        }
    }
}

/// [`apply_repetition_penalties_kernel()`] exactly as vLLM launches it (grid `(seqs,
/// tile_num)`, run-time `tile_size`, threads striding by `blockDim.x` over the tile), through
/// the `unsafe` escape hatch: no partition has a row from `blockIdx.x` and a run-time column
/// range from `blockIdx.y` (docs/kernel-model.md, "has no partition of its own yet"). A
/// measurement of what the safe reshaping costs or gains, not a fix.
#[kernel]
pub fn apply_repetition_penalties_kernel_unchecked(
    mut logits: UncheckedSlice<f32>,
    prompt_mask: &[u8],
    output_mask: &[u8],
    repetition_penalties: &[f32],
    vocab_size: u32,
    tile_size: u32,
) {
    // Uniform over the launch: a 3-D grid or a 2-D block would give two threads one element.
    if block_dim().y != 1 || block_dim().z != 1 || grid_dim().z != 1 {
        return;
    }
    let (seq, tile) = (block_idx().x, block_idx().y);
    let Some(&penalty) = repetition_penalties.get(seq as usize) else { return };
    let tile_start = tile as usize * tile_size as usize;
    let tile_end = (tile_start + tile_size as usize).min(vocab_size as usize);
    let row = seq as usize * vocab_size as usize;
    for c in strided_range(tile_start + thread_idx_x() as usize, tile_end, block_dim_x() as usize) {
        let i = row + c;
        let (Some(&p), true) = (prompt_mask.get(i), i < logits.len()) else { return };
        if p != 0 || output_mask.get(i).is_some_and(|&o| o != 0) {
            // SAFETY: `i < len` (checked above). Element `i` = (row `seq`, column `c`) is
            // touched by this thread alone: the blocks' `(seq, tile)` pairs are distinct (a 2-D
            // grid, checked above), tiles of one row are the disjoint ranges `[tile ts, (tile +
            // 1) ts)`, and inside a tile thread `t` takes the columns `tile_start + t + k
            // blockDim.x`, distinct residues for distinct `t` of a 1-D block (checked above);
            // columns stay below `vocab_size`, so rows do not overlap.
            let logit = unsafe { logits.get_unchecked_mut(i) };
            if *logit > 0.0 {
                *logit /= penalty;
            } else {
                *logit *= penalty;
            }
        }
    }
}

/// [`apply_repetition_penalties_kernel()`] exactly as vLLM launches it (grid `(seqs,
/// tile_num)`, run-time `tile_size`, threads striding by `blockDim.x` over the tile), safely:
/// the row-tile partition added after this port (`DisjointSlice<f32, RowTiles>`, block `(x,
/// y)` owns columns `[y tile_size, min((y + 1) tile_size, vocab))` of row `x`; its launcher
/// checks the launch has 1-D blocks in a grid with `z = 1`). Not a first try (the partition
/// did not exist then): the safe form of `_unchecked`, timed beside it. One check per block
/// (the row inside the buffer, the tile clipped to the row, the masks sliced to the tile),
/// none per element: the loop is the twin's.
#[kernel(cols(logits = (vocab_size, tile_size)))]
pub fn apply_repetition_penalties_kernel_rowtiles(
    mut logits: DisjointSlice<f32, RowTiles>,
    prompt_mask: &[u8],
    output_mask: &[u8],
    repetition_penalties: &[f32],
    vocab_size: u32,
    tile_size: u32,
) {
    let me = row_tile();
    let Some(&penalty) = repetition_penalties.get(me.row() as usize) else { return };
    let Some(tile) = logits.tile_mut(me) else { return };
    let span = tile.span();
    let (Some(prompt), Some(output)) = (prompt_mask.get(span.clone()), output_mask.get(span)) else { return };
    // References, not values: the output mask is read only where the prompt's is 0 (the
    // source's `||`).
    tile.zip_inputs([prompt, output]).for_each(|([p, o], logit)| {
        if *p != 0 || *o != 0 {
            if *logit > 0.0 {
                *logit /= penalty;
            } else {
                *logit *= penalty;
            }
        }
    });
}

/// Four `f32` in 16 bytes: vLLM's `AlignedArray<float, 4>` (one 16-byte load).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct F4 {
    /// The four values, in memory order.
    pub v: [f32; 4],
}

/// Experts of the ported `topkGatingSoftmax` instance.
pub const EXPERTS: u32 = 64;
/// Values per thread (`VPT`): one 16-byte load.
pub const VPT: u32 = 4;
/// Threads per row (`THREADS_PER_ROW = EXPERTS / VPT`): a row is read by 16 lanes.
pub const THREADS_PER_ROW: u32 = EXPERTS / VPT;
/// Rows per warp.
pub const ROWS_PER_WARP: u32 = 32 / THREADS_PER_ROW;
/// Warps per block (`WARPS_PER_TB = 4` in vLLM's launcher).
pub const WARPS_PER_CTA: u32 = 4;
/// Rows per block.
pub const ROWS_PER_CTA: u32 = WARPS_PER_CTA * ROWS_PER_WARP;

/// `topkGatingSoftmax<4, 64, 4, 16>` (vLLM moe/topk_softmax_kernels.cu, the path for 64
/// experts): softmax of each token's 64 gating logits, then the top `k` (weight, expert,
/// source row), 16 lanes a row, reductions by shuffles of width 16. `finished` is vLLM's
/// `nullptr` (every row active). The block is 1-D (128 threads) where vLLM's is `(32, 4)`:
/// the same threads, `threadIdx.y` = `threadIdx.x / 32`. First try: the outputs are written by
/// the first lane of each row's group at `k row + j`, an index no partition expresses, so
/// they are `AtomicSlice`s (relaxed stores), as docs/performance.md's porting table says.
#[kernel(launch_bounds(128))]
#[allow(clippy::too_many_arguments)]
pub fn topk_gating_softmax_64(
    input: &[F4],
    output: AtomicSlice<f32>,
    num_rows: u32,
    indices: AtomicSlice<i32>,
    source_rows: AtomicSlice<i32>,
    k: u32,
    start_expert: i32,
    end_expert: i32,
) {
    let tid = thread_idx_x();
    let (warp_y, lane) = (tid / 32, tid % 32);
    let thread_row = block_idx_x() * ROWS_PER_CTA + warp_y * ROWS_PER_WARP + lane / THREADS_PER_ROW;
    if thread_row >= num_rows {
        return;
    }
    let thread_group_idx = lane % THREADS_PER_ROW;
    let first_elt_read_by_thread = thread_group_idx * VPT;
    let Some(chunk) = input.get((thread_row * THREADS_PER_ROW + thread_group_idx) as usize) else { return };
    let mut row_chunk = vector::load16(chunk).v;

    let mut thread_max = row_chunk[0];
    unroll::<3>(|ii| thread_max = thread_max.max(row_chunk[ii + 1]));
    unroll::<4>(|s| {
        let mask = THREADS_PER_ROW >> (s + 1);
        thread_max = thread_max.max(warp::shuffle_xor_within::<THREADS_PER_ROW, _>(thread_max, mask));
    });
    let mut row_sum = 0.0f32;
    unroll::<4>(|ii| {
        row_chunk[ii] = (row_chunk[ii] - thread_max).exp();
        row_sum += row_chunk[ii];
    });
    unroll::<4>(|s| {
        let mask = THREADS_PER_ROW >> (s + 1);
        row_sum += warp::shuffle_xor_within::<THREADS_PER_ROW, _>(row_sum, mask);
    });
    let reciprocal_row_sum = 1.0 / row_sum;
    unroll::<4>(|ii| row_chunk[ii] *= reciprocal_row_sum);

    let start_col = first_elt_read_by_thread as i32;
    for k_idx in 0..k {
        let mut max_val = row_chunk[0];
        let mut expert = start_col;
        unroll::<4>(|ii| {
            let val = row_chunk[ii];
            if val > max_val {
                max_val = val;
                expert = start_col + ii as i32;
            }
        });
        unroll::<4>(|s| {
            let mask = THREADS_PER_ROW >> (s + 1);
            let other_max = warp::shuffle_xor_within::<THREADS_PER_ROW, _>(max_val, mask);
            let other_expert = warp::shuffle_xor_within::<THREADS_PER_ROW, _>(expert, mask);
            if other_max > max_val || (other_max == max_val && other_expert < expert) {
                max_val = other_max;
                expert = other_expert;
            }
        });
        if thread_group_idx == 0 {
            let node_uses_expert = expert >= start_expert && expert < end_expert;
            let idx = (k * thread_row + k_idx) as usize;
            if let Some(o) = output.get(idx) {
                o.store(max_val);
            }
            if let Some(o) = indices.get(idx) {
                o.store(if node_uses_expert { expert - start_expert } else { EXPERTS as i32 });
            }
            if let Some(o) = source_rows.get(idx) {
                o.store((k_idx * num_rows + thread_row) as i32);
            }
        }
        if k_idx + 1 < k {
            // One 16-byte load per thread: the expert's group is the thread (expert / 4) % 16.
            let thread_to_clear_in_group = (expert as u32 / VPT) % THREADS_PER_ROW;
            if thread_group_idx == thread_to_clear_in_group {
                let offset_for_expert = expert as u32 % VPT;
                unroll::<4>(|ii| {
                    if ii as u32 == offset_for_expert {
                        row_chunk[ii] = -10000.0;
                    }
                });
            }
        }
    }
}

/// `topkGatingSoftmax<4, 64, 4, 16>` with vLLM's `finished` argument (after the port, issue 30):
/// `finished: Option<&[u8]>` is the source's `const bool* finished`, `None` its `nullptr`
/// (every row active); a finished row's experts read `EXPERTS` (not routed), as vLLM's
/// `should_process_row`. `finished` is cut to `num_rows` once (`get(..num_rows)`, a comparison
/// of two launch parameters; a shorter one counts as none), so the row's flag is one null
/// test and one byte load, nvcc's `finished ? !finished[thread_row] : true`. Otherwise the
/// first try's body.
#[kernel(launch_bounds(128))]
#[allow(clippy::too_many_arguments)]
pub fn topk_gating_softmax_64_finished(
    input: &[F4],
    finished: Option<&[u8]>,
    output: AtomicSlice<f32>,
    num_rows: u32,
    indices: AtomicSlice<i32>,
    source_rows: AtomicSlice<i32>,
    k: u32,
    start_expert: i32,
    end_expert: i32,
) {
    let finished = finished.and_then(|f| f.get(..num_rows as usize));
    let tid = thread_idx_x();
    let (warp_y, lane) = (tid / 32, tid % 32);
    let thread_row = block_idx_x() * ROWS_PER_CTA + warp_y * ROWS_PER_WARP + lane / THREADS_PER_ROW;
    if thread_row >= num_rows {
        return;
    }
    // vLLM's `finished ? !finished[thread_row] : true`: one null test (the slice was cut to
    // `num_rows` once, so the index below `num_rows` needs no check of its own).
    let row_is_active = match finished {
        Some(finished) => finished.get(thread_row as usize).is_none_or(|&f| f == 0),
        None => true,
    };
    let thread_group_idx = lane % THREADS_PER_ROW;
    let first_elt_read_by_thread = thread_group_idx * VPT;
    let Some(chunk) = input.get((thread_row * THREADS_PER_ROW + thread_group_idx) as usize) else { return };
    let mut row_chunk = vector::load16(chunk).v;

    let mut thread_max = row_chunk[0];
    unroll::<3>(|ii| thread_max = thread_max.max(row_chunk[ii + 1]));
    unroll::<4>(|s| {
        let mask = THREADS_PER_ROW >> (s + 1);
        thread_max = thread_max.max(warp::shuffle_xor_within::<THREADS_PER_ROW, _>(thread_max, mask));
    });
    let mut row_sum = 0.0f32;
    unroll::<4>(|ii| {
        row_chunk[ii] = (row_chunk[ii] - thread_max).exp();
        row_sum += row_chunk[ii];
    });
    unroll::<4>(|s| {
        let mask = THREADS_PER_ROW >> (s + 1);
        row_sum += warp::shuffle_xor_within::<THREADS_PER_ROW, _>(row_sum, mask);
    });
    let reciprocal_row_sum = 1.0 / row_sum;
    unroll::<4>(|ii| row_chunk[ii] *= reciprocal_row_sum);

    let start_col = first_elt_read_by_thread as i32;
    for k_idx in 0..k {
        let mut max_val = row_chunk[0];
        let mut expert = start_col;
        unroll::<4>(|ii| {
            let val = row_chunk[ii];
            if val > max_val {
                max_val = val;
                expert = start_col + ii as i32;
            }
        });
        unroll::<4>(|s| {
            let mask = THREADS_PER_ROW >> (s + 1);
            let other_max = warp::shuffle_xor_within::<THREADS_PER_ROW, _>(max_val, mask);
            let other_expert = warp::shuffle_xor_within::<THREADS_PER_ROW, _>(expert, mask);
            if other_max > max_val || (other_max == max_val && other_expert < expert) {
                max_val = other_max;
                expert = other_expert;
            }
        });
        if thread_group_idx == 0 {
            let node_uses_expert = expert >= start_expert && expert < end_expert;
            let node_uses_expert = row_is_active && node_uses_expert;
            let idx = (k * thread_row + k_idx) as usize;
            if let Some(o) = output.get(idx) {
                o.store(max_val);
            }
            if let Some(o) = indices.get(idx) {
                o.store(if node_uses_expert { expert - start_expert } else { EXPERTS as i32 });
            }
            if let Some(o) = source_rows.get(idx) {
                o.store((k_idx * num_rows + thread_row) as i32);
            }
        }
        if k_idx + 1 < k {
            // One 16-byte load per thread: the expert's group is the thread (expert / 4) % 16.
            let thread_to_clear_in_group = (expert as u32 / VPT) % THREADS_PER_ROW;
            if thread_group_idx == thread_to_clear_in_group {
                let offset_for_expert = expert as u32 % VPT;
                unroll::<4>(|ii| {
                    if ii as u32 == offset_for_expert {
                        row_chunk[ii] = -10000.0;
                    }
                });
            }
        }
    }
}
