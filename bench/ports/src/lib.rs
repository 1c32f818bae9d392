//! Public CUDA C++ kernels ported to safe Rust (issue 30), each written from ferrocuda's docs
//! on the first try, as a user new to the library would: no `unsafe`, no inline PTX. Each
//! kernel names its source; its CUDA C++ twin, transcribed as the source writes it, is in
//! `bench/cuda/ports.cu` with the same symbol and parameter layout (a slice or output is a
//! pointer and a `usize` length, a `u32` an `unsigned`). `tests/ports.rs` checks every kernel
//! against a CPU reference on the CPU executor (and on a GPU when there is one);
//! `examples/ports_bench.rs` times each against its nvcc-built twin.
//!
//! The twins' build flags follow their projects: llm.c's Makefile builds with
//! `--use_fast_math`, vLLM without. This crate is built without fast math; the llm.c ports
//! call the fast functions by name (`fast_exp`, as `--use_fast_math` compiles `expf`).
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::block::RuntimeBlockReduce;
use ferrocuda_device::cache::{self, Load};
use ferrocuda_device::global::partition::BlockRows;
use ferrocuda_device::global::{DisjointSlice, PerBlock, PerWarpRow, block_row, grid_stride, once_per_block, unique_index, warp_row};
use ferrocuda_device::half::{Bf16x2, F32ToHalf, HalfFloat, bf16};
#[cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]
use ferrocuda_device::math::{DeviceFloat, FastMath, FloatToInt};
use ferrocuda_device::thread::{block_dim_x, thread_idx_x};
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::{block_scratch, kernel, vector, warp};

ferrocuda_device::embed_kernels!();

#[cfg(not(target_arch = "nvptx64"))]
pub mod cases;

/// Eight bf16 in 16 bytes: llm.c's `x128` (`Packed128<floatX>`), moved with one 16-byte load
/// or store. Element `2k` is `pairs[k]`'s low half.
#[repr(C, align(16))]
#[derive(Clone, Copy, Default, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct X128 {
    /// The four pairs, in memory order.
    pub pairs: [Bf16x2; 4],
}

/// Sixteen `i8` in 16 bytes: vLLM's `vec_n_t<int8_t, 16>`.
#[repr(C, align(16))]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct I8x16 {
    /// The sixteen values, in memory order.
    pub values: [i8; 16],
}

// ---------------------------------------------------------------------------------------------
// 1. vLLM csrc/activation_kernels.cu: act_and_mul_kernel<bf16, gelu_kernel, true>
//    (`gelu_and_mul`): one block per token, `out[t, i] = gelu(x[t, i]) * x[t, d + i]`, GELU
//    with `erf` (PyTorch's `approximate='none'`).

/// vLLM's `gelu_kernel` on a bf16: `f * 0.5 * (1 + erf(f / sqrt 2))` in f32 (precise `erff`),
/// rounded to bf16.
#[inline(always)]
pub fn gelu_erf_bf16(x: bf16) -> bf16 {
    let f = x.widen();
    (f * 0.5 * (1.0 + DeviceFloat::erf(f * core::f32::consts::FRAC_1_SQRT_2))).to_bf16()
}

/// vLLM's `gelu_and_mul` (`act_and_mul_kernel`, `act_first`): `input` is `[tokens, 2, d]`,
/// `out` `[tokens, d]`; block `t` is token `t`, its threads stride over the `d` columns.
/// `gelu(x) * y` is a bf16 product as CUDA's `__nv_bfloat16` `operator*` (one rounding of
/// the exact product). Launch: `tokens` blocks of `min(d, 1024)` threads.
#[kernel(cols(out = d))]
pub fn gelu_and_mul(input: &[bf16], d: u32, mut out: DisjointSlice<bf16, BlockRows>) {
    let me = block_row();
    let token = me.row() as usize;
    let width = d as usize;
    let Some(row_in) = input.get(token * 2 * width..(token + 1) * 2 * width) else { return };
    let (xs, ys) = row_in.split_at(width);
    let Some(row) = out.row_mut(me) else { return };
    // First try: `row.zip_input(xs)` and `ys.get(col)` with a column counter (a 64-bit bound
    // check per element); `zip_inputs` checks both rows once.
    // `gelu(x) * y` as `__nv_bfloat16`'s `operator*`: `mul_rn`, one `mul.rn.bf16` (first try:
    // `(gelu(x).widen() * y.widen()).to_bf16()`, the same value through a widening, an f32
    // multiply and a second `cvt`).
    for ([&x, &y], o) in row.zip_inputs([xs, ys]) {
        *o = gelu_erf_bf16(x).mul_rn(y);
    }
}

// ---------------------------------------------------------------------------------------------
// 2. llm.c llmc/encoder.cuh: encoder_forward_kernel3 (floatX = bf16): `out[b, t, :] =
//    wte[inp[b, t], :] + wpe[t, :]`, eight channels per thread in 16-byte packs.

/// llm.c's `encoder_forward_kernel3`: thread `i` writes pack `i` of `out` (`[B, T, C]` in
/// packs of 8 channels; `C % 8 == 0`), reading the token's row of `wte` and the position's
/// row of `wpe` with streaming 16-byte loads (`load128cs`), adding in f32 and rounding to
/// bf16. Launch: one thread per pack (`B T C / 8`), blocks of 256.
#[kernel]
pub fn encoder_forward(inp: &[i32], wte: &[X128], wpe: &[X128], t: u32, c: u32, mut out: DisjointSlice<X128>) {
    let i = unique_index();
    let packs = (c / 8) as usize;
    if packs == 0 || t == 0 {
        return;
    }
    let bt = i.get() / packs;
    let c8 = i.get() % packs;
    let position = bt % t as usize;
    let (Some(o), Some(&token)) = (out.get_mut(i), inp.get(bt)) else { return };
    let (Some(a), Some(b)) = (wte.get(token as usize * packs + c8), wpe.get(position * packs + c8)) else { return };
    let a = cache::load(a, Load::Streaming);
    let b = cache::load(b, Load::Streaming);
    let mut sum = X128::default();
    unroll::<4>(|k| {
        let (a0, a1) = a.pairs[k].to_f32s();
        let (b0, b1) = b.pairs[k].to_f32s();
        sum.pairs[k] = Bf16x2::from_f32s(a0 + b0, a1 + b1);
    });
    vector::store16(o, sum);
}

// ---------------------------------------------------------------------------------------------
// 3. llm.c llmc/global_norm.cuh: global_norm_squared_kernel<bf16> (one slice: gridDim.y = 1):
//    each block adds its sum of squares to `out[blockIdx.x]`.

/// llm.c's `global_norm_squared_kernel` for one slice: a grid-stride sum of `x * x` over
/// `data` (bf16, widened), a block reduction, and thread 0 adding the block's sum to its own
/// partial `out[blockIdx.x]` (`out[b] = out[b] + block_sum`, in place). Launch: any 1-D grid
/// (llm.c: `maxThreadsPerMultiProcessor * multiProcessorCount / 512` blocks of 512).
#[kernel]
pub fn global_norm_squared(data: &[bf16], mut out: PerBlock<f32>) {
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let mut accumulator = 0.0f32;
    for i in grid_stride(data.len()) {
        let v = data[i.get()].widen();
        accumulator += v * v;
    }
    if let Some(block_sum) = reduce.sum(accumulator)
        && let Some(b) = once_per_block()
        && let Some(partial) = out.get_mut(b)
    {
        *partial += block_sum;
    }
}

// ---------------------------------------------------------------------------------------------
// 4. vLLM csrc/moe/topk_softmax_kernels.cu: moeSoftmax<TPB = 256>: a softmax per row of the
//    gating output, one block per row, rows marked finished left alone.

/// vLLM's `moeSoftmax<256>`: block `r` is row `r` of `input` (`num_cols` wide); the row's
/// maximum and `sum(exp(x - max))` by block reductions, then `output = exp(x - max) / sum`
/// (precise `expf`). A row with `finished[r] != 0` is not touched. Launch: one block of 256
/// threads per row.
#[kernel(launch_bounds(256), cols(output = num_cols))]
pub fn moe_softmax(input: &[f32], finished: &[u8], num_cols: u32, mut output: DisjointSlice<f32, BlockRows>) {
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let me = block_row();
    let row = me.row() as usize;
    if finished.get(row).is_some_and(|&f| f != 0) {
        return;
    }
    let cols = num_cols as usize;
    let Some(x) = input.get(row * cols..(row + 1) * cols) else { return };
    let mut thread_max = -f32::MAX;
    let mut c = thread_idx_x() as usize;
    while c < cols {
        thread_max = thread_max.max(x[c]);
        c += block_dim_x() as usize;
    }
    let max = reduce.max_all(thread_max);
    let mut thread_sum = 0.0f32;
    let mut c = thread_idx_x() as usize;
    while c < cols {
        thread_sum += (x[c] - max).exp();
        c += block_dim_x() as usize;
    }
    let normalizing_factor = 1.0 / reduce.sum_all(thread_sum);
    let Some(out) = output.row_mut(me) else { return };
    for (&v, o) in out.zip_input(x) {
        *o = (v - max).exp() * normalizing_factor;
    }
}

// ---------------------------------------------------------------------------------------------
// 5. vLLM csrc/quantization/compressed_tensors/int8_quant_kernels.cu:
//    dynamic_scaled_int8_quant_kernel<bf16, float>: per-token absmax, scale = absmax / 127,
//    out = round(x * 127 / absmax) saturated to i8; sixteen values per thread and step.

/// CUDA's `cvt.rni.sat.s8.f32` (vLLM's `float_to_int8_rn`): round to nearest even, saturate
/// to `[-128, 127]`, NaN to 0.
#[inline(always)]
pub fn float_to_int8_rn(x: f32) -> i8 {
    // First try: `DeviceFloat::round_ties_even(x) as i8` (a clamp, a NaN test and a truncating
    // conversion per value: 0.78x nvcc); `to_i8_rn_sat` is the one instruction.
    x.to_i8_rn_sat()
}

/// vLLM's `dynamic_scaled_int8_quant_kernel` for rows whose width is a multiple of 16 (the
/// vectorised path; the source's scalar tail for other widths is not ported: see
/// `hidden16`): block `t` is token `t`; each thread reads 16 bf16 per step (two 16-byte
/// loads), the block's absolute maximum by a block reduction, `scale[t] = absmax / 127`, then
/// writes 16 `i8` per step. `hidden16` is the row width over 16. Launch: one block per
/// token, `min(hidden, 1024)` threads.
#[kernel(cols(out = hidden16))]
pub fn dynamic_scaled_int8_quant(input: &[X128], hidden16: u32, mut out: DisjointSlice<I8x16, BlockRows>, mut scale: PerBlock<f32>) {
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let me = block_row();
    let token = me.row() as usize;
    let vectors = hidden16 as usize;
    let Some(x) = input.get(token * 2 * vectors..(token + 1) * 2 * vectors) else { return };
    let mut thread_absmax = 0.0f32;
    let mut i = thread_idx_x() as usize;
    while i < vectors {
        let lo = vector::load16(&x[2 * i]);
        let hi = vector::load16(&x[2 * i + 1]);
        unroll::<4>(|k| {
            let (a, b) = lo.pairs[k].to_f32s();
            let (c, d) = hi.pairs[k].to_f32s();
            thread_absmax = thread_absmax.max(a.abs()).max(b.abs()).max(c.abs()).max(d.abs());
        });
        i += block_dim_x() as usize;
    }
    let absmax = reduce.max_all(thread_absmax);
    if let Some(b) = once_per_block()
        && let Some(s) = scale.get_mut(b)
    {
        *s = absmax / 127.0;
    }
    let tmp_scale = 127.0 / absmax;
    let Some(row) = out.row_mut(me) else { return };
    // Two input packs per output pack: `as_chunks::<2>()` pairs them, and `zip_input` walks the
    // pairs beside the outputs with one bound (first try: `x[2 * i]` beside `row.iter_mut()`
    // and a counter, a bound check per load and a panic path in the kernel).
    let (pairs, _) = x.as_chunks::<2>();
    for (pair, o) in row.zip_input(pairs) {
        let lo = vector::load16(&pair[0]);
        let hi = vector::load16(&pair[1]);
        let mut q = I8x16::default();
        unroll::<4>(|k| {
            let (a, b) = lo.pairs[k].to_f32s();
            let (c, d) = hi.pairs[k].to_f32s();
            q.values[2 * k] = float_to_int8_rn(a * tmp_scale);
            q.values[2 * k + 1] = float_to_int8_rn(b * tmp_scale);
            q.values[8 + 2 * k] = float_to_int8_rn(c * tmp_scale);
            q.values[8 + 2 * k + 1] = float_to_int8_rn(d * tmp_scale);
        });
        vector::store16(o, q);
    }
}

// ---------------------------------------------------------------------------------------------
// 6. llm.c llmc/attention.cuh: softmax_forward_kernel5 (floatX = bf16): the causal softmax of
//    `inv_temperature * x` over row `(n, t)`'s first `t + 1` entries, one warp per row, the
//    online algorithm (running maximum, rescaled sum), `exp` as `--use_fast_math` compiles
//    `expf`.

/// llm.c's `softmax_forward_kernel5`: `inp` and `out` are `N` matrices of `T x T` (`T % 4 ==
/// 0`); warp `w` owns row `w` (position `own_pos = w % T`) and writes its entries `0 ..=
/// own_pos`, leaving the rest alone. The source walks its rows backwards (`(gridDim.x -
/// blockIdx.x - 1) * warps + warp`), a cache nicety for the matmul after it; here warp rows
/// go forwards (`warp_row()`). Launch: blocks of 256 threads, `ceil(N T 32 / 256)` blocks.
#[kernel(cols(out = t))]
pub fn softmax_forward(inp: &[bf16], inv_temperature: f32, t: u32, mut out: PerWarpRow<bf16>) {
    let me = warp_row();
    let idx = me.row() as usize;
    let lane = me.lane() as usize;
    let width = t as usize;
    if width == 0 {
        return;
    }
    let own_pos = idx % width;
    let pos_by_4 = own_pos / 4;
    let Some(x) = inp.get(idx * width..(idx + 1) * width) else { return };

    let mut maxval = -f32::MAX;
    let mut sumval = 0.0f32;
    let mut i = lane;
    while i < pos_by_4 {
        let mut regarray = [0.0f32; 4];
        unroll::<4>(|k| regarray[k] = x[4 * i + k].widen());
        let old_maxval = maxval;
        unroll::<4>(|k| maxval = maxval.max(regarray[k]));
        sumval *= (inv_temperature * (old_maxval - maxval)).fast_exp();
        unroll::<4>(|k| sumval += (inv_temperature * (regarray[k] - maxval)).fast_exp());
        i += 32;
    }
    if 4 * pos_by_4 + lane <= own_pos {
        let v = x[4 * pos_by_4 + lane].widen();
        let old_maxval = maxval;
        maxval = maxval.max(v);
        sumval *= (inv_temperature * (old_maxval - maxval)).fast_exp();
        sumval += (inv_temperature * (v - maxval)).fast_exp();
    }
    let global_maxval = warp::reduce_max(maxval);
    sumval *= (inv_temperature * (maxval - global_maxval)).fast_exp();
    let norm = 1.0 / warp::reduce_sum(sumval);

    let Some(row) = out.row_mut(me) else { return };
    for (&v, o) in row.zip_input(&x[..=own_pos]) {
        let ev = (inv_temperature * (v.widen() - global_maxval)).fast_exp();
        cache::store(o, (ev * norm).to_bf16(), cache::Store::Streaming);
    }
}

// ---------------------------------------------------------------------------------------------
// 7. vLLM csrc/moe/moe_align_sum_kernels.cu: moe_sum_kernel<bf16, TOPK = 2>: `out[t, i] =
//    sum_k input[t, k, i]`, accumulated in bf16 as the source does (`scalar_t x = 0.0; x +=`).

/// The experts a token's outputs are summed over (`TOPK` of the source's template).
pub const MOE_TOPK: usize = 2;

/// vLLM's `moe_sum_kernel<bf16, 2>`: `input` is `[tokens, TOPK, d]`, `out` `[tokens, d]`;
/// block `t` is token `t`, its threads stride over the columns; each `+=` rounds to bf16 (as
/// `__nv_bfloat16`'s `operator+=`). Launch: `tokens` blocks of `min(d, 1024)` threads.
#[kernel(cols(out = d))]
pub fn moe_sum(input: &[bf16], d: u32, mut out: DisjointSlice<bf16, BlockRows>) {
    let me = block_row();
    let token = me.row() as usize;
    let width = d as usize;
    if width == 0 {
        return;
    }
    let Some(rows) = input.get(token * MOE_TOPK * width..(token + 1) * MOE_TOPK * width) else { return };
    let Some(row) = out.row_mut(me) else { return };
    // First try: `row.iter_mut()` and `rows.get(k * width + col)` with a column counter (two
    // 64-bit bound checks per element, 0.90x nvcc); `zip_inputs` checks the expert rows once.
    let mut experts = rows.chunks_exact(width);
    let experts: [&[bf16]; MOE_TOPK] = core::array::from_fn(|_| experts.next().unwrap_or(&[]));
    // `x += v` as `__nv_bfloat16`'s `operator+=`: `add_rn`, one `add.rn.bf16` (`HADD2.BF16`;
    // first try: `(x.widen() + v.widen()).to_bf16()`, a widening, an f32 add and a `cvt`).
    for (values, o) in row.zip_inputs(experts) {
        let mut x = bf16::ZERO;
        unroll::<MOE_TOPK>(|k| x = x.add_rn(*values[k]));
        *o = x;
    }
}
