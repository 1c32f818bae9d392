//! Issue 30's eighth held-out port: four llm.c kernels (karpathy/llm.c, commit
//! f1e2ace651495b74ae22d45d1723443fd00ecd3a) written in safe Rust from ferrocuda's docs alone,
//! first try. The CUDA C++ twins, as the public source writes them, are in
//! `bench/ports8/cuda/ports8.cu`; bench/ports8/RESULTS.md has the figures.
//!
//! - [`init_from_master_kernel()`] (llmc/adamw.cuh): bf16 copies of the fp32 master weights with
//!   stochastic rounding, a slice per `blockIdx.y` (`GridSlices`).
//! - [`wpe_backward_kernel()`] (llmc/encoder.cuh): the position-embedding gradient, one 16-byte
//!   pack a thread summed over the batch with streaming loads, added to the old gradient in
//!   place with stochastic rounding.
//! - [`global_norm_aggregate_kernel()`] (llmc/global_norm.cuh): one block sums the block partials
//!   of the global norm in place (`out[0]` = the sum of `out[..grid_size]`).
//! - [`layernorm_forward_kernel6()`] (llmc/layernorm.cuh): layer norm, a warp a row, weights and
//!   bias staged in dynamic shared memory, each warp's row kept in its own shared region.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]

use ferrocuda_device::cache::{self, Load, Store};
use ferrocuda_device::global::{GridSlices, PerWarpRow, unique_slice_cell, warp_row};
use ferrocuda_device::pack16::Bf16x8;
use ferrocuda_device::prelude::*;
use ferrocuda_device::shared_vector::dynamic_shared_x4;
use ferrocuda_device::thread::{block_idx_y, strided_range};
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::warp;

ferrocuda_device::embed_kernels!();

/// Threads per block of llm.c's `init_from_master` (and of `adamw_update`, whose random
/// numbers it must match).
pub const INIT_BLOCK: u32 = 512;
/// Threads per block of llm.c's `wpe_backward_kernel` launch.
pub const WPE_BLOCK: u32 = 256;
/// Threads of the one block of llm.c's `global_norm_aggregate_kernel` launch.
pub const AGGREGATE_BLOCK: u32 = 1024;
/// Threads per block of llm.c's `layernorm_forward` launch of kernel 6 (`dim3(32, 8)` there,
/// 256 threads in one dimension here: warp `w` of the block is llm.c's `threadIdx.y = w`).
pub const LN_BLOCK: u32 = 256;

/// SquirrelNoise5 (llm.c's `cuda_utils.cuh`): a 32-bit hash of a position and a seed.
#[inline(always)]
pub fn squirrel_noise5(position_x: u32, seed: u32) -> u32 {
    let mut bits = position_x.wrapping_mul(0xd2a8_0a3f);
    bits = bits.wrapping_add(seed);
    bits ^= bits >> 9;
    bits = bits.wrapping_add(0xa884_f197);
    bits ^= bits >> 11;
    bits = bits.wrapping_mul(0x6c73_6f4b);
    bits ^= bits >> 13;
    bits = bits.wrapping_add(0xb79f_3abb);
    bits ^= bits >> 15;
    bits = bits.wrapping_mul(0x1b56_c4f5);
    bits ^= bits >> 17;
    bits
}

/// llm.c's `Get2dNoiseUint`: the hash of the point `(x, y)`.
#[inline(always)]
pub fn noise_2d(x: u32, y: u32, seed: u32) -> u32 {
    squirrel_noise5(x.wrapping_add(198_491_317u32.wrapping_mul(y)), seed)
}

/// llm.c's `stochastic_rounding(float, __nv_bfloat16*, seed)` for an explicit thread position
/// (`thread_x` = `threadIdx.x`, `block_y` = `blockIdx.x * blockDim.x + blockIdx.y`): the low 16
/// bits of `value` against a random threshold decide whether the bits round up or are cut, and
/// the result is then rounded to nearest (which keeps it, as the low bits are all ones or all
/// zeros, except where the carry reaches the exponent). The host reference calls this too.
#[inline(always)]
pub fn stochastic_round_at(value: f32, thread_x: u32, block_y: u32, seed: u32) -> bf16 {
    let random = noise_2d(thread_x, block_y, seed);
    let threshold = random & 0xffff;
    let bits = value.to_bits();
    let low = bits & 0xffff;
    let bits = if low > threshold { bits | 0xffff } else { bits & !0xffff };
    f32::from_bits(bits).to_bf16()
}

/// [`stochastic_round_at`] at the running thread's position, as llm.c's device function.
#[inline(always)]
fn stochastic_rounding(value: f32, seed: u32) -> bf16 {
    let block_y = block_idx_x().wrapping_mul(block_dim_x()).wrapping_add(block_idx_y());
    stochastic_round_at(value, thread_idx_x(), block_y, seed)
}

/// llm.c's `init_from_master_kernel<__nv_bfloat16>`: `params[s w_stride + i] =
/// stochastic_round(master[s s_stride + i])` for `i < num_parameters`, slice `s = blockIdx.y`.
/// Launch: grid `(ceil(num_parameters / 512), slices)`, [`INIT_BLOCK`] threads.
#[kernel(cols(params = (num_parameters, w_stride)))]
pub fn init_from_master_kernel(mut params: DisjointSlice<bf16, GridSlices>, master: &[f32], num_parameters: u32, w_stride: u32, s_stride: u32, seed: u32) {
    let me = unique_slice_cell();
    let Some(p) = params.get_mut(me) else { return };
    let Some(&m) = master.get(me.slice() as usize * s_stride as usize + me.index() as usize) else { return };
    *p = stochastic_rounding(m, seed);
}

/// llm.c's `wpe_backward_kernel` (bf16): thread `i` owns the 16-byte pack `i` of `dwpe`
/// (`T * C / 8` packs), adds pack `i` of each of the `b` batch rows of `dout` (`B * T * C / 8`
/// packs, streaming loads) in f32, then adds the old gradient and rounds each element
/// stochastically with seed `seed + 8 i + k`. Launch: [`WPE_BLOCK`] threads, `ceil(T C / 8 /
/// 256)` blocks. (llm.c's `inp`, `T` and `C` are not read beyond `T * C`, the length of `dwpe`.)
#[kernel]
pub fn wpe_backward_kernel(mut dwpe: DisjointSlice<Bf16x8>, dout: &[Bf16x8], b: u32, seed: u32) {
    let i = unique_index();
    let packs = dwpe.len();
    let Some(grad) = dwpe.get_mut(i) else { return };
    let idx = (i.get() as u32).wrapping_mul(8);
    let mut accum = [0.0f32; 8];
    for batch in 0..b as usize {
        let Some(packed) = dout.get(batch * packs + i.get()) else { return };
        let values = cache::load(packed, Load::Streaming).to_f32s();
        for k in 0..8 {
            accum[k] += values[k];
        }
    }
    let mut packed = Bf16x8::load(grad);
    for (k, acc) in accum.iter().enumerate() {
        let sum = acc + packed.get(k).widen();
        packed.set(k, stochastic_rounding(sum, seed.wrapping_add(idx).wrapping_add(k as u32)));
    }
    packed.store(grad);
}

/// llm.c's `global_norm_aggregate_kernel`: one block of [`AGGREGATE_BLOCK`] threads; thread `t`
/// reads `out[t]` for `t < grid_size` (0 otherwise), the block sums them (llm.c's
/// `blockReduce<warpReduceSum>`: every thread gets the sum) and thread 0 writes it to `out[0]`.
#[kernel]
pub fn global_norm_aggregate_kernel(mut out: DisjointSlice<f32>, grid_size: u32) {
    let i = unique_index();
    let block_sum = if thread_idx_x() < grid_size { out.get_mut(i).map_or(0.0, |v| *v) } else { 0.0 };
    let sum = RuntimeBlockReduce::new(block_scratch!(f32)).sum_all(block_sum);
    if thread_idx_x() == 0
        && let Some(o) = out.get_mut(i)
    {
        *o = sum;
    }
}

/// llm.c's `layernorm_forward_kernel6` (bf16, eps 1e-5): warp `w` of the launch normalises row
/// `w` of `inp` (`n` rows of `c8` 16-byte packs, `C = 8 c8`), keeping its row in a shared region
/// of its own, with `weight` and `bias` staged in shared memory by the whole block first;
/// `mean` and `rstd` get one value per row (lane 0's, streaming stores). Launch: [`LN_BLOCK`]
/// threads (8 warps), `ceil(n / 8)` blocks, `(2 + 8) * C * 2` bytes of dynamic shared memory.
#[kernel(cols(out = c8, mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_kernel6(
    mut out: PerWarpRow<Bf16x8>,
    mut mean: PerWarpRow<f32>,
    mut rstd: PerWarpRow<f32>,
    inp: &[Bf16x8],
    weight: &[Bf16x8],
    bias: &[Bf16x8],
    n: u32,
    c8: u32,
) {
    let ([s_weight, s_bias], rest) = dynamic_shared_x4::<u32>().carve::<2>(c8 as usize);
    for i in strided_range(thread_idx_x(), s_weight.len() as u32, block_dim_x()) {
        if let (Some(w), Some(b)) = (weight.get(i as usize), bias.get(i as usize)) {
            s_weight.set(i as usize, Bf16x8::load(w).to_words());
            s_bias.set(i as usize, Bf16x8::load(b).to_words());
        }
    }
    sync_threads();

    let me = warp_row();
    if me.row() >= n {
        return;
    }
    let lane = me.lane();
    let Some(s_in) = rest.region((thread_idx_x() / 32) as usize, c8 as usize) else { return };
    let Some(mut row) = out.row_mut(me) else { return };
    let Some(x) = inp.get(row.span()) else { return };
    let c = (c8 * 8) as f32;

    let mut sum = 0.0f32;
    for k in strided_range(lane, s_in.len() as u32, 32) {
        if let Some(v) = x.get(k as usize) {
            let v = cache::load(v, Load::Streaming);
            for e in v.to_f32s() {
                sum += e;
            }
            s_in.set(k as usize, v.to_words());
        }
    }
    let sum = warp::reduce_sum(sum);
    let m = sum / c;

    let mut var = 0.0f32;
    for k in strided_range(lane, s_in.len() as u32, 32) {
        for e in Bf16x8::from_words(s_in.get(k as usize)).to_f32s() {
            var += (e - m) * (e - m);
        }
    }
    let var = warp::reduce_sum(var) / c;
    let s = (var + 1e-5).fast_rsqrt();

    let mut j = 0usize;
    while let Some(o) = row.get_mut(j) {
        let k = lane as usize + 32 * j;
        let xs = Bf16x8::from_words(s_in.get(k)).to_f32s();
        let ws = Bf16x8::from_words(s_weight.get(k)).to_f32s();
        let bs = Bf16x8::from_words(s_bias.get(k)).to_f32s();
        let mut o32 = [0.0f32; 8];
        for e in 0..8 {
            let normed = s * (xs[e] - m);
            o32[e] = normed * ws[e] + bs[e];
        }
        cache::store(o, Bf16x8::from_f32s(o32), Store::Streaming);
        j += 1;
    }
    if let Some(mut r) = mean.row_mut(me)
        && let Some(v) = r.get_mut(0)
    {
        cache::store(v, m, Store::Streaming);
    }
    if let Some(mut r) = rstd.row_mut(me)
        && let Some(v) = r.get_mut(0)
    {
        cache::store(v, s, Store::Streaming);
    }
}

// ---------------------------------------------------------------------------------------------
// Fix round (one per kernel the SASS showed slow; the first tries above stay as written).

/// [`wpe_backward_kernel()`], fix round: the build warned that the first try kept `accum` in local
/// memory (64-byte stack frame, 57 `LDL` and 45 `STL` in the SASS: the `for k in 0..8` loops
/// over the register array stayed rolled). The per-element loops are `unroll::<8>` here, as the
/// performance guide's trap table says.
#[kernel]
pub fn wpe_backward_kernel_fixed(mut dwpe: DisjointSlice<Bf16x8>, dout: &[Bf16x8], b: u32, seed: u32) {
    let i = unique_index();
    let packs = dwpe.len();
    let Some(grad) = dwpe.get_mut(i) else { return };
    let idx = (i.get() as u32).wrapping_mul(8);
    let mut accum = [0.0f32; 8];
    for batch in 0..b as usize {
        let Some(packed) = dout.get(batch * packs + i.get()) else { return };
        let values = cache::load(packed, Load::Streaming).to_f32s();
        unroll::<8>(|k| accum[k] += values[k]);
    }
    let mut packed = Bf16x8::load(grad);
    unroll::<8>(|k| {
        let sum = accum[k] + packed.get(k).widen();
        packed.set(k, stochastic_rounding(sum, seed.wrapping_add(idx).wrapping_add(k as u32)));
    });
    packed.store(grad);
}

/// [`global_norm_aggregate_kernel()`], fix round: llm.c always launches it with one block of 1024
/// threads, so the entry says so (`reqntid(1024)`): the first try's block reduction read the
/// block size at run time (225 SASS instructions, 7 barriers on its paths, nvcc's 55 and 1).
#[kernel(reqntid(1024))]
pub fn global_norm_aggregate_kernel_fixed(mut out: DisjointSlice<f32>, grid_size: u32) {
    let i = unique_index();
    let block_sum = if thread_idx_x() < grid_size { out.get_mut(i).map_or(0.0, |v| *v) } else { 0.0 };
    let sum = RuntimeBlockReduce::new(block_scratch!(f32)).sum_all(block_sum);
    if thread_idx_x() == 0
        && let Some(o) = out.get_mut(i)
    {
        *o = sum;
    }
}

/// [`layernorm_forward_kernel6()`], fix round: the first try kept a panic path (3 `CALL`s to the
/// panic handler, the kernel tag's shared store, 685 SASS instructions against nvcc's 496):
/// `carve` panics when the dynamic shared memory is short, and the last loop indexed the
/// shared regions with the row's column `lane + 32 j`, which nothing bounds. Here the regions
/// come from `split_at_checked` (a `None` returns the whole block before the barrier) and every
/// loop runs over `k < c8`, the length all three regions were cut with.
#[kernel(cols(out = c8, mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_kernel6_fixed(
    mut out: PerWarpRow<Bf16x8>,
    mut mean: PerWarpRow<f32>,
    mut rstd: PerWarpRow<f32>,
    inp: &[Bf16x8],
    weight: &[Bf16x8],
    bias: &[Bf16x8],
    n: u32,
    c8: u32,
) {
    let Some((s_weight, rest)) = dynamic_shared_x4::<u32>().split_at_checked(c8 as usize) else { return };
    let Some((s_bias, rest)) = rest.split_at_checked(c8 as usize) else { return };
    for i in strided_range(thread_idx_x(), c8, block_dim_x()) {
        if let (Some(w), Some(b)) = (weight.get(i as usize), bias.get(i as usize)) {
            s_weight.set(i as usize, Bf16x8::load(w).to_words());
            s_bias.set(i as usize, Bf16x8::load(b).to_words());
        }
    }
    sync_threads();

    let me = warp_row();
    if me.row() >= n {
        return;
    }
    let lane = me.lane();
    let Some(s_in) = rest.region((thread_idx_x() / 32) as usize, c8 as usize) else { return };
    let Some(mut row) = out.row_mut(me) else { return };
    let Some(x) = inp.get(row.span()) else { return };
    let c = (c8 * 8) as f32;

    let mut sum = 0.0f32;
    for k in strided_range(lane, c8, 32) {
        if let Some(v) = x.get(k as usize) {
            let v = cache::load(v, Load::Streaming);
            for e in v.to_f32s() {
                sum += e;
            }
            s_in.set(k as usize, v.to_words());
        }
    }
    let sum = warp::reduce_sum(sum);
    let m = sum / c;

    let mut var = 0.0f32;
    for k in strided_range(lane, c8, 32) {
        for e in Bf16x8::from_words(s_in.get(k as usize)).to_f32s() {
            var += (e - m) * (e - m);
        }
    }
    let var = warp::reduce_sum(var) / c;
    let s = (var + 1e-5).fast_rsqrt();

    for (j, k) in strided_range(lane, c8, 32).enumerate() {
        let xs = Bf16x8::from_words(s_in.get(k as usize)).to_f32s();
        let ws = Bf16x8::from_words(s_weight.get(k as usize)).to_f32s();
        let bs = Bf16x8::from_words(s_bias.get(k as usize)).to_f32s();
        let mut o32 = [0.0f32; 8];
        for e in 0..8 {
            let normed = s * (xs[e] - m);
            o32[e] = normed * ws[e] + bs[e];
        }
        if let Some(o) = row.get_mut(j) {
            cache::store(o, Bf16x8::from_f32s(o32), Store::Streaming);
        }
    }
    if let Some(mut r) = mean.row_mut(me)
        && let Some(v) = r.get_mut(0)
    {
        cache::store(v, m, Store::Streaming);
    }
    if let Some(mut r) = rstd.row_mut(me)
        && let Some(v) = r.get_mut(0)
    {
        cache::store(v, s, Store::Streaming);
    }
}

/// [`layernorm_forward_kernel6()`] as docs/performance.md's row "a shared region per warp"
/// teaches since session 20 (issue 30's eighth port, gap 1): the first try with its `carve`
/// made `carve_checked` (a `None` returns the whole block before the barrier) and its last loop
/// driven by the regions' length, the output element taken as an `Option` inside it, where the
/// first try walked the output row and indexed the regions with `lane + 32 j`. Otherwise the
/// first try as written.
#[kernel(cols(out = c8, mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_kernel6_docs(
    mut out: PerWarpRow<Bf16x8>,
    mut mean: PerWarpRow<f32>,
    mut rstd: PerWarpRow<f32>,
    inp: &[Bf16x8],
    weight: &[Bf16x8],
    bias: &[Bf16x8],
    n: u32,
    c8: u32,
) {
    let Some(([s_weight, s_bias], rest)) = dynamic_shared_x4::<u32>().carve_checked::<2>(c8 as usize) else { return };
    for i in strided_range(thread_idx_x(), s_weight.len_u32(), block_dim_x()) {
        if let (Some(w), Some(b)) = (weight.get(i as usize), bias.get(i as usize)) {
            s_weight.set(i as usize, Bf16x8::load(w).to_words());
            s_bias.set(i as usize, Bf16x8::load(b).to_words());
        }
    }
    sync_threads();

    let me = warp_row();
    if me.row() >= n {
        return;
    }
    let lane = me.lane();
    let Some(s_in) = rest.region((thread_idx_x() / 32) as usize, c8 as usize) else { return };
    let Some(mut row) = out.row_mut(me) else { return };
    let Some(x) = inp.get(row.span()) else { return };
    let c = (c8 * 8) as f32;

    let mut sum = 0.0f32;
    for k in strided_range(lane, s_in.len_u32(), 32) {
        if let Some(v) = x.get(k as usize) {
            let v = cache::load(v, Load::Streaming);
            for e in v.to_f32s() {
                sum += e;
            }
            s_in.set(k as usize, v.to_words());
        }
    }
    let sum = warp::reduce_sum(sum);
    let m = sum / c;

    let mut var = 0.0f32;
    for k in strided_range(lane, s_in.len_u32(), 32) {
        for e in Bf16x8::from_words(s_in.get(k as usize)).to_f32s() {
            var += (e - m) * (e - m);
        }
    }
    let var = warp::reduce_sum(var) / c;
    let s = (var + 1e-5).fast_rsqrt();

    for (j, k) in strided_range(lane, s_in.len_u32(), 32).enumerate() {
        let xs = Bf16x8::from_words(s_in.get(k as usize)).to_f32s();
        let ws = Bf16x8::from_words(s_weight.get(k as usize)).to_f32s();
        let bs = Bf16x8::from_words(s_bias.get(k as usize)).to_f32s();
        let mut o32 = [0.0f32; 8];
        for e in 0..8 {
            let normed = s * (xs[e] - m);
            o32[e] = normed * ws[e] + bs[e];
        }
        if let Some(o) = row.get_mut(j) {
            cache::store(o, Bf16x8::from_f32s(o32), Store::Streaming);
        }
    }
    if let Some(mut r) = mean.row_mut(me)
        && let Some(v) = r.get_mut(0)
    {
        cache::store(v, m, Store::Streaming);
    }
    if let Some(mut r) = rstd.row_mut(me)
        && let Some(v) = r.get_mut(0)
    {
        cache::store(v, s, Store::Streaming);
    }
}

/// [`wpe_backward_kernel()`], the batch loop as the performance guide's run-time-count row
/// writes it (session 21): `unroll::strided_x4` over the batch's packs at this thread's
/// position (`dout[..b packs]`, start `i`, stride `packs`), four 16-byte streaming loads in
/// flight as nvcc's unrolled `for (b = 0; b < B; b++)`, whatever the builder's run-time
/// unrolling; the per-element loops `unroll::<8>` as `_fixed`.
#[kernel]
pub fn wpe_backward_kernel_x4(mut dwpe: DisjointSlice<Bf16x8>, dout: &[Bf16x8], b: u32, seed: u32) {
    let i = unique_index();
    let packs = dwpe.len();
    let Some(grad) = dwpe.get_mut(i) else { return };
    let idx = (i.get() as u32).wrapping_mul(8);
    let mut accum = [0.0f32; 8];
    let Some(col) = (b as usize).checked_mul(packs).and_then(|n| dout.get(..n)) else { return };
    ferrocuda_device::unroll::strided_x4(col, i.get(), packs, |packed| {
        let values = cache::load(packed, Load::Streaming).to_f32s();
        unroll::<8>(|k| accum[k] += values[k]);
    });
    let mut packed = Bf16x8::load(grad);
    unroll::<8>(|k| {
        let sum = accum[k] + packed.get(k).widen();
        packed.set(k, stochastic_rounding(sum, seed.wrapping_add(idx).wrapping_add(k as u32)));
    });
    packed.store(grad);
}

/// Session 22 (issue 30, the first-try loop shape): [`wpe_backward_kernel()`]'s batch loop as
/// the first try wrote it (`for batch in 0..b { let Some(p) = dout.get(batch * packs + i) else
/// { return }; .. }`: the bound and the bounds check, two exits), without the rounding loop
/// after it, each thread storing its pack's plain sum over the batch (`dwpe[i] = sum_b dout[b
/// packs + i]`, rounded to bf16 once). Under the builder's default flags LLVM keeps it rolled
/// (one `LDG.E.EF.128` in flight, 84 SASS instructions); with `runtime_unroll(4)`'s flags it is
/// nvcc's loop (the four checks, then four loads: 5 `LDG.E.EF.128` with the remainder's, as
/// nvcc's `for (b = 0; b < B; b++)`): bench/results/s22-gaps/loop-shapes.md.
#[kernel]
pub fn wpe_sum_first_try_shape(mut dwpe: DisjointSlice<Bf16x8>, dout: &[Bf16x8], b: u32) {
    let i = unique_index();
    let packs = dwpe.len();
    let Some(grad) = dwpe.get_mut(i) else { return };
    let mut accum = [0.0f32; 8];
    for batch in 0..b as usize {
        let Some(packed) = dout.get(batch * packs + i.get()) else { return };
        let values = cache::load(packed, Load::Streaming).to_f32s();
        for k in 0..8 {
            accum[k] += values[k];
        }
    }
    *grad = Bf16x8::from_f32s(accum);
}

/// [`wpe_sum_first_try_shape()`] with the bound hoisted: `dout[..b packs]` sliced once, then
/// `for j in strided_range(i, col.len(), packs)` (one exit, no bounds check). It stays rolled
/// under every flag set tried, `runtime_unroll(4)`'s included: the trip count of `j < n; j +=
/// packs` is a division, which LLVM's NVPTX unrolling will not emit (nvcc 13 keeps its own `for
/// (j = i; j < n; j += packs)` rolled too). So for a source loop that counts (`for (b = 0; b <
/// B; b++)`) the counted form above is the one to write (bench/results/s22-gaps/loop-shapes.md).
#[kernel]
pub fn wpe_sum_strided_shape(mut dwpe: DisjointSlice<Bf16x8>, dout: &[Bf16x8], b: u32) {
    let i = unique_index();
    let packs = dwpe.len();
    let Some(grad) = dwpe.get_mut(i) else { return };
    let mut accum = [0.0f32; 8];
    let Some(col) = (b as usize).checked_mul(packs).and_then(|n| dout.get(..n)) else { return };
    for j in strided_range(i.get(), col.len(), packs) {
        let values = cache::load(&col[j], Load::Streaming).to_f32s();
        for k in 0..8 {
            accum[k] += values[k];
        }
    }
    *grad = Bf16x8::from_f32s(accum);
}
