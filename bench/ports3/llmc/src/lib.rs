//! llm.c kernels (karpathy/llm.c, `llmc/*.cuh`), ported to safe Rust from the docs alone:
//! issue 30's third held-out port, first try. Each kernel keeps its source's name, launch
//! configuration and algorithm; `floatX` is bf16 (llm.c's default) and `x128` is [`X128`].
//! Built with the builder's fast math (llm.c compiles with `--use_fast_math`).
//!
//! Where the port had to differ from the source, the kernel's docs say so (and
//! bench/ports3/RESULTS.md records it).
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
// The ports keep their sources' indexed loops (`for (k = 0; k < 8; k++) out[k] = f(in[k])`).
#![allow(clippy::needless_range_loop)]

use core::num::NonZeroU32;

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::cache::{self, Load, Store};
use ferrocuda_device::global::partition::{BlockRows, ByLastBlock, Handoff, InPlaceRows};
use ferrocuda_device::global::{PerWarpRow, Reversed, block_row, block_row_reversed, warp_row, warp_row_reversed, warp_rows};
use ferrocuda_device::half::{Bf16x2, F32ToHalf, HalfFloat, bf16};
use ferrocuda_device::prelude::*;
use ferrocuda_device::shared::{SharedSlice, dynamic_shared};
use ferrocuda_device::shared_vector::{SharedSliceX4, dynamic_shared_x4};
use ferrocuda_device::thread::{block_idx_y, grid_stride_range, strided_range};
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::{kernel, warp};

ferrocuda_device::embed_kernels!();

/// llm.c's `x128` for bf16: eight `floatX` in one 16-byte access.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct X128 {
    /// The eight values.
    pub v: [bf16; 8],
}

/// Four bf16 read together (8 bytes): `softmax_forward_kernel5` reads its row as
/// `x_aligned[4 * i + k]` from a 16-byte aligned pointer.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct X4 {
    /// The four values.
    pub v: [bf16; 4],
}

/// One block's partial sums of four channels in `layernorm_backward_kernel10`: `dbias` then
/// `dweight` (llm.c keeps them in two halves of its scratch; one 32-byte element keeps them in
/// one `Handoff` row).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct Partial {
    /// Four channels of the bias gradient.
    pub dbias: [f32; 4],
    /// Four channels of the weight gradient.
    pub dweight: [f32; 4],
}

#[inline(always)]
fn widen8(x: X128) -> [f32; 8] {
    let mut f = [0.0f32; 8];
    for k in 0..8 {
        f[k] = x.v[k].widen();
    }
    f
}

#[inline(always)]
fn pack8(f: [f32; 8]) -> X128 {
    let mut o = X128::default();
    for k in 0..4 {
        let p = Bf16x2::from_f32s(f[2 * k], f[2 * k + 1]);
        o.v[2 * k] = p.lo();
        o.v[2 * k + 1] = p.hi();
    }
    o
}

/// llm.c `encoder.cuh`, `encoder_forward_kernel3`: `out[b, t, :] = wte[inp[b, t], :] +
/// wpe[t, :]`, one `x128` per thread (`load128cs` of both, `store128`). `c8` is `C / 8`.
/// Launch: `CEIL_DIV(B * T * C, 256 * 8)` blocks of 256.
#[kernel]
pub fn encoder_forward_kernel3(mut out: DisjointSlice<X128>, inp: &[i32], wte: &[X128], wpe: &[X128], t_len: NonZeroU32, c8: NonZeroU32) {
    let i = unique_index();
    let Some(o) = out.get_mut(i) else { return };
    let idx = i.get() as u32;
    let bt = idx / c8;
    let t = bt % t_len;
    let c = idx % c8;
    let Some(&ix) = inp.get(bt as usize) else { return };
    let (Some(e), Some(p)) = (wte.get((ix as u32 * c8.get() + c) as usize), wpe.get((t * c8.get() + c) as usize)) else { return };
    let e = widen8(cache::load(e, Load::Streaming));
    let p = widen8(cache::load(p, Load::Streaming));
    let mut s = [0.0f32; 8];
    for k in 0..8 {
        s[k] = e[k] + p[k];
    }
    vector::store16(o, pack8(s));
}

/// llm.c `global_norm.cuh`, `global_norm_squared_kernel<floatX>`: each block adds the sum of
/// squares of its grid-strided share of slice `blockIdx.y` (`data + blockIdx.y * stride`,
/// `count` values) to `out[blockIdx.y * gridDim.x + blockIdx.x]`. Launch: `(gx, gy)` blocks
/// of 512, `gx * gy` below 1024.
#[kernel]
pub fn global_norm_squared_kernel(mut out: PerBlock<f32>, data: &[bf16], count: u64, stride: u64) {
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let start = block_idx_y() as usize * stride as usize;
    let slice = data.get(start..).unwrap_or(&[]);
    let slice = &slice[..slice.len().min(count as usize)];
    let mut accumulator = 0.0f32;
    for i in grid_stride_range(slice.len()) {
        let v = slice[i].widen();
        accumulator += v * v;
    }
    if let Some(block_sum) = reduce.sum(accumulator)
        && let Some(b) = once_per_block()
        && let Some(o) = out.get_mut(b)
    {
        *o += block_sum;
    }
}

/// [`global_norm_squared_kernel()`] after the fix round: the slice taken with `let .. else`
/// (CUDA's `data + blockIdx.y * stride` has no check; the source's `count` values must be
/// there). The first try's `data.get(start..).unwrap_or(&[])` merged the input's pointer with
/// the empty slice's, and NVPTX, which proves a load read-only only through a pointer it can
/// trace to a kernel parameter, read every element with a plain `ld.global` instead of
/// `ld.global.nc` (docs/performance.md, "a slice chosen with `unwrap_or`").
#[kernel]
pub fn global_norm_squared_kernel_fixed(mut out: PerBlock<f32>, data: &[bf16], count: u64, stride: u64) {
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let start = block_idx_y() as usize * stride as usize;
    let Some(slice) = data.get(start..start + count as usize) else { return };
    let mut accumulator = 0.0f32;
    for i in grid_stride_range(slice.len()) {
        let v = slice[i].widen();
        accumulator += v * v;
    }
    if let Some(block_sum) = reduce.sum(accumulator)
        && let Some(b) = once_per_block()
        && let Some(o) = out.get_mut(b)
    {
        *o += block_sum;
    }
}

/// llm.c `attention.cuh`, `softmax_forward_kernel5`: one warp per row of the `(N, T, T)`
/// pre-attention scores, causal (columns `0..=own_pos` only), online softmax scaled by
/// `inv_temperature`; the columns past `own_pos` are not written. Launch: `CEIL_DIV(N * T *
/// 32, 256)` blocks of 256. `inp` is the scores as groups of four (`T % 4 == 0`, as the
/// source asserts).
///
/// Differs from the source: rows go to warps in forward order (llm.c runs the blocks
/// backwards, `(gridDim.x - blockIdx.x - 1) * num_warps + warp_id`, for the cache of the
/// matmul that follows); no output partition maps a warp to a reversed row.
#[kernel(cols(out = t_len))]
pub fn softmax_forward_kernel5(mut out: PerWarpRow<bf16>, inv_temperature: f32, inp: &[X4], t_len: u32) {
    let Some(tn) = NonZeroU32::new(t_len) else { return };
    let Some(row) = out.row_mut(warp_row()) else { return };
    let idx = row.row();
    let lane = row.lane();
    let own_pos = idx % tn;
    let pos_by_4 = own_pos / 4;
    let t4 = t_len / 4;
    let Some(x) = inp.get((idx * t4) as usize..((idx + 1) * t4) as usize) else { return };
    let flt_max = 340282346638528859811704183484516925440.0f32;
    let mut maxval = -flt_max;
    let mut sumval = 0.0f32;
    let mut i = lane;
    while i < pos_by_4 {
        let Some(c) = x.get(i as usize) else { break };
        let c = *c;
        let mut regarray = [0.0f32; 4];
        for k in 0..4 {
            regarray[k] = c.v[k].widen();
        }
        let old_maxval = maxval;
        for k in 0..4 {
            maxval = maxval.max(regarray[k]);
        }
        sumval *= (inv_temperature * (old_maxval - maxval)).exp();
        for k in 0..4 {
            sumval += (inv_temperature * (regarray[k] - maxval)).exp();
        }
        i += 32;
    }
    if 4 * pos_by_4 + lane <= own_pos
        && let Some(v) = x.get(pos_by_4 as usize).and_then(|c| c.v.get(lane as usize))
    {
        let v = v.widen();
        let old_maxval = maxval;
        maxval = maxval.max(v);
        sumval *= (inv_temperature * (old_maxval - maxval)).exp();
        sumval += (inv_temperature * (v - maxval)).exp();
    }
    let global_maxval = warp::reduce_max(maxval);
    sumval *= (inv_temperature * (maxval - global_maxval)).exp();
    let sum = warp::reduce_sum(sumval);
    let norm = 1.0 / sum;
    for (j, o) in row.iter_mut().enumerate() {
        let col = lane + 32 * j as u32;
        if col > own_pos {
            break;
        }
        let Some(v) = x.get((col / 4) as usize).and_then(|c| c.v.get((col % 4) as usize)) else { break };
        let v = cache::load(v, Load::Streaming).widen();
        let ev = (inv_temperature * (v - global_maxval)).exp();
        cache::store(o, (ev * norm).to_bf16(), Store::Streaming);
    }
}

/// [`softmax_forward_kernel5()`] after the fix rounds: the first pass is
/// `thread::strided_range(lane, pos_by_4, 32)` over the row cut to `pos_by_4` groups (one
/// bound, a loop LLVM unrolls: two 8-byte loads in flight per lane, as nvcc's), where the
/// first try's `while i < pos_by_4 { let Some(c) = x.get(i) else { break }; .. }` had a second
/// exit and kept one; and the blocks take the rows backwards as llm.c's do
/// (`PerWarpRow<bf16, Reversed>` with `warp_row_reversed()`: row `(gridDim.x - blockIdx.x - 1)
/// * num_warps + warp_id`).
#[kernel(cols(out = t_len))]
pub fn softmax_forward_kernel5_fixed(out: PerWarpRow<bf16, Reversed>, inv_temperature: f32, inp: &[X4], t_len: u32) {
    softmax5_fixed::<false>(out, inv_temperature, inp, t_len);
}

/// Session 14: [`softmax_forward_kernel5_fixed()`] with the write pass as llm.c's `for (i =
/// lane_id; i <= own_pos; i += WARP_SIZE)`: `row.zip_input(&flat[..=own_pos]).for_each(..)`
/// over the row viewed as bf16 (`bytemuck::cast_slice`), so the input's length bounds the
/// columns and the loop has one exit (the porting table's causal-prefix row). The fixed
/// variant's `iter_mut().enumerate()` with a `break` at the diagonal and a checked `x.get` per
/// column kept two more exits and one 2-byte load in flight per lane, where nvcc's loop is
/// unrolled (issue 30, third port: 0.92-0.93).
#[kernel(cols(out = t_len))]
pub fn softmax_forward_kernel5_prefix(out: PerWarpRow<bf16, Reversed>, inv_temperature: f32, inp: &[X4], t_len: u32) {
    softmax5_fixed::<true>(out, inv_temperature, inp, t_len);
}

/// The body of [`softmax_forward_kernel5_fixed()`]; `PREFIX`: the write pass over the causal
/// prefix with `zip_input`.
#[inline(always)]
fn softmax5_fixed<const PREFIX: bool>(mut out: PerWarpRow<bf16, Reversed>, inv_temperature: f32, inp: &[X4], t_len: u32) {
    let Some(tn) = NonZeroU32::new(t_len) else { return };
    let Some(row) = out.row_mut(warp_row_reversed()) else { return };
    let idx = row.row();
    let lane = row.lane();
    let own_pos = idx % tn;
    let pos_by_4 = own_pos / 4;
    let t4 = t_len / 4;
    let Some(x) = inp.get((idx * t4) as usize..((idx + 1) * t4) as usize) else { return };
    let flt_max = 340282346638528859811704183484516925440.0f32;
    let mut maxval = -flt_max;
    let mut sumval = 0.0f32;
    let head = &x[..(pos_by_4 as usize).min(x.len())];
    for i in strided_range(lane as usize, head.len(), 32) {
        let c = head[i];
        let mut regarray = [0.0f32; 4];
        for k in 0..4 {
            regarray[k] = c.v[k].widen();
        }
        let old_maxval = maxval;
        for k in 0..4 {
            maxval = maxval.max(regarray[k]);
        }
        sumval *= (inv_temperature * (old_maxval - maxval)).exp();
        for k in 0..4 {
            sumval += (inv_temperature * (regarray[k] - maxval)).exp();
        }
    }
    if 4 * pos_by_4 + lane <= own_pos
        && let Some(v) = x.get(pos_by_4 as usize).and_then(|c| c.v.get(lane as usize))
    {
        let v = v.widen();
        let old_maxval = maxval;
        maxval = maxval.max(v);
        sumval *= (inv_temperature * (old_maxval - maxval)).exp();
        sumval += (inv_temperature * (v - maxval)).exp();
    }
    let global_maxval = warp::reduce_max(maxval);
    sumval *= (inv_temperature * (maxval - global_maxval)).exp();
    let sum = warp::reduce_sum(sumval);
    let norm = 1.0 / sum;
    if PREFIX {
        let flat: &[bf16] = bytemuck::cast_slice(x);
        let Some(prefix) = flat.get(..=own_pos as usize) else { return };
        row.zip_input(prefix).for_each(|(v, o)| {
            let ev = (inv_temperature * (cache::load(v, Load::Streaming).widen() - global_maxval)).exp();
            cache::store(o, (ev * norm).to_bf16(), Store::Streaming);
        });
        return;
    }
    for (j, o) in row.iter_mut().enumerate() {
        let col = lane + 32 * j as u32;
        if col > own_pos {
            break;
        }
        let Some(v) = x.get((col / 4) as usize).and_then(|c| c.v.get((col % 4) as usize)) else { break };
        let v = cache::load(v, Load::Streaming).widen();
        let ev = (inv_temperature * (v - global_maxval)).exp();
        cache::store(o, (ev * norm).to_bf16(), Store::Streaming);
    }
}

/// llm.c `fused_classifier.cuh`, `fused_classifier_kernel5<true, false>` (with
/// `prepare_softmax_blockwide3`): one block of 1024 per row of `V` logits (padded to `P`):
/// softmax, `losses[idx] -= log(prob[target])`, and the logits' gradient `(prob - [i ==
/// target]) * dloss`. `p8` is `P / 8`. Launch: `B * T` blocks of 1024.
///
/// Differs from the source: the gradient goes to `dlogits`, not over `logits` in place (every
/// thread reads columns of the row that other threads overwrite after the barrier, which no
/// safe output expresses); rows go to blocks in forward order (llm.c: reversed); the last `V
/// % 8` gradients are written by the thread that owns their 16-byte chunk (llm.c: every
/// thread from `threadIdx.x + (V & ~7)` to `V`, the same values), padding columns as 0.
#[kernel(cols(dlogits = p8), launch_bounds(1024, 2))]
pub fn fused_classifier_kernel5(
    logits: &[X128],
    mut dlogits: DisjointSlice<X128, BlockRows>,
    mut losses: PerBlock<f32>,
    dloss: f32,
    targets: &[i32],
    v: u32,
    p8: u32,
) {
    let me = block_row();
    let idx = block_idx_x() as usize;
    let Some(&ix) = targets.get(idx) else { return };
    let Some(x) = logits.get(idx * p8 as usize..(idx + 1) * p8 as usize) else { return };
    let bd = block_dim_x() as i32;
    let vv = v as i32;

    // prepare_softmax_blockwide3
    let mut thread_maxval = f32::NEG_INFINITY;
    let mut thread_sumval = 0.0f32;
    let mut i = (vv + 7) / 8 + thread_idx_x() as i32 - bd;
    while (i + 1) * 8 > vv {
        for k in 0..8 {
            if i * 8 + k >= vv {
                break;
            }
            if let Some(c) = x.get(i as usize) {
                let val = c.v[k as usize].widen();
                let old_maxval = thread_maxval;
                thread_maxval = thread_maxval.max(val);
                thread_sumval *= (old_maxval - thread_maxval).exp();
                thread_sumval += (val - thread_maxval).exp();
            }
        }
        i -= bd;
    }
    while i >= 0 {
        if let Some(c) = x.get(i as usize) {
            let packed = widen8(vector::load16(c));
            for k in 0..8 {
                let val = packed[k];
                let old_maxval = thread_maxval;
                thread_maxval = thread_maxval.max(val);
                thread_sumval *= (old_maxval - thread_maxval).exp();
                thread_sumval += (val - thread_maxval).exp();
            }
        }
        i -= bd;
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let block_maxval = reduce.max_all(thread_maxval);
    thread_sumval *= (thread_maxval - block_maxval).exp();
    let block_sumval = reduce.sum_all(thread_sumval);
    let scale = 1.0 / block_sumval;
    let offset = block_maxval;

    if let Some(b) = once_per_block()
        && let Some(loss) = losses.get_mut(b)
        && let Some(t) = x.get(ix as usize / 8).and_then(|c| c.v.get(ix as usize % 8))
    {
        let prob = (t.widen() - offset).exp() * scale;
        *loss -= prob.ln();
    }
    sync_threads();

    let v8 = (v / 8) as usize;
    let Some(row) = dlogits.row_mut(me) else { return };
    let mut col = thread_idx_x() as i32;
    row.zip_input(&x[..v8.min(x.len())]).for_each(|(c, o)| {
        let packed = widen8(vector::load16(c));
        let mut d = [0.0f32; 8];
        for k in 0..8 {
            let element = col * 8 + k as i32;
            let prob = (packed[k] - offset).exp() * scale;
            let indicator = if element == ix { 1.0 } else { 0.0 };
            d[k] = (prob - indicator) * dloss;
        }
        cache::store(o, pack8(d), Store::Streaming);
        col += bd;
    });
    // the last V % 8 values, by the owner of their chunk
    if !v.is_multiple_of(8) {
        let tail = v8 as u32;
        if tail % block_dim_x() == thread_idx_x()
            && let Some(mut row) = dlogits.row_mut(me)
            && let Some(o) = row.get_mut((tail / block_dim_x()) as usize)
            && let Some(c) = x.get(tail as usize)
        {
            let mut d = [0.0f32; 8];
            for k in 0..(v % 8) as usize {
                let element = (tail * 8) as i32 + k as i32;
                let prob = (c.v[k].widen() - offset).exp() * scale;
                let indicator = if element == ix { 1.0 } else { 0.0 };
                d[k] = (prob - indicator) * dloss;
            }
            cache::store(o, pack8(d), Store::Streaming);
        }
    }
}

/// [`fused_classifier_kernel5()`] after the fix round, as llm.c writes it: **in place** (the
/// logits row is read whole, then each thread overwrites its own chunks with the gradient:
/// `DisjointSlice<X128, InPlaceRows<Reversed>>`, `read_row` .. `write_own`), the blocks taking
/// the rows **backwards** (`gridDim.x - (blockIdx.x + 1)`: `block_row_reversed()`), the loss of
/// row `idx` through a one-column `BlockRows<Reversed>` output (thread 0's column 0 of the
/// block's row), and the library's block reductions (3 barriers for the two, llm.c's `blockReduce` 2: see
/// `RuntimeBlockReduce`). The tail (`V % 8` gradients) is still
/// written by the owner of its chunk, padding columns of that chunk as 0.
#[kernel(cols(logits = p8, losses = 1), launch_bounds(1024, 2))]
pub fn fused_classifier_kernel5_fixed(
    logits: DisjointSlice<X128, InPlaceRows<Reversed>>,
    losses: DisjointSlice<f32, BlockRows<Reversed>>,
    dloss: f32,
    targets: &[i32],
    v: u32,
    p8: u32,
) {
    fused_classifier_in_place::<false>(logits, losses, dloss, targets, v, p8);
}

/// Session 14: [`fused_classifier_kernel5_fixed()`] with llm.c's two block reductions as one
/// paired call, `RuntimeBlockReduce::max_then_sum_all(thread_maxval, |m| thread_sumval *
/// (thread_maxval - m).exp())`: llm.c's 2 barriers for them, where `max_all` then `sum_all`
/// take 4 (the other variant).
#[kernel(cols(logits = p8, losses = 1), launch_bounds(1024, 2))]
pub fn fused_classifier_kernel5_paired(
    logits: DisjointSlice<X128, InPlaceRows<Reversed>>,
    losses: DisjointSlice<f32, BlockRows<Reversed>>,
    dloss: f32,
    targets: &[i32],
    v: u32,
    p8: u32,
) {
    fused_classifier_in_place::<true>(logits, losses, dloss, targets, v, p8);
}

/// The body of [`fused_classifier_kernel5_fixed()`]; `PAIRED`: its two block reductions as
/// `max_then_sum_all`.
#[inline(always)]
fn fused_classifier_in_place<const PAIRED: bool>(
    logits: DisjointSlice<X128, InPlaceRows<Reversed>>,
    mut losses: DisjointSlice<f32, BlockRows<Reversed>>,
    dloss: f32,
    targets: &[i32],
    v: u32,
    p8: u32,
) {
    let me = block_row_reversed();
    let idx = me.row() as usize;
    let Some(&ix) = targets.get(idx) else { return };
    let Some(read) = logits.read_row(me) else { return };
    let x = read.row();
    let _ = p8;
    let bd = block_dim_x() as i32;
    let vv = v as i32;

    // prepare_softmax_blockwide3
    let mut thread_maxval = f32::NEG_INFINITY;
    let mut thread_sumval = 0.0f32;
    let mut i = (vv + 7) / 8 + thread_idx_x() as i32 - bd;
    while (i + 1) * 8 > vv {
        for k in 0..8 {
            if i * 8 + k >= vv {
                break;
            }
            if let Some(c) = x.get(i as usize) {
                let val = c.v[k as usize].widen();
                let old_maxval = thread_maxval;
                thread_maxval = thread_maxval.max(val);
                thread_sumval *= (old_maxval - thread_maxval).exp();
                thread_sumval += (val - thread_maxval).exp();
            }
        }
        i -= bd;
    }
    while i >= 0 {
        if let Some(c) = x.get(i as usize) {
            let packed = widen8(vector::load16(c));
            for k in 0..8 {
                let val = packed[k];
                let old_maxval = thread_maxval;
                thread_maxval = thread_maxval.max(val);
                thread_sumval *= (old_maxval - thread_maxval).exp();
                thread_sumval += (val - thread_maxval).exp();
            }
        }
        i -= bd;
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let (block_maxval, block_sumval) = if PAIRED {
        reduce.max_then_sum_all(thread_maxval, |m| thread_sumval * (thread_maxval - m).exp())
    } else {
        let block_maxval = reduce.max_all(thread_maxval);
        thread_sumval *= (thread_maxval - block_maxval).exp();
        (block_maxval, reduce.sum_all(thread_sumval))
    };
    let scale = 1.0 / block_sumval;
    let offset = block_maxval;

    if let Some(mut loss_row) = losses.row_mut(me)
        && let Some(loss) = loss_row.get_mut(0)
        && let Some(t) = x.get(ix as usize / 8).and_then(|c| c.v.get(ix as usize % 8))
    {
        let prob = (t.widen() - offset).exp() * scale;
        *loss -= prob.ln();
    }

    // every thread has read the row: overwrite this thread's chunks with the gradient
    let v8 = (v / 8) as usize;
    let mut write = read.write_own();
    let mut col = thread_idx_x() as i32;
    for o in write.row_mut().iter_mut() {
        if col as usize >= v8 {
            break;
        }
        let packed = widen8(vector::load16(o));
        let mut d = [0.0f32; 8];
        for k in 0..8 {
            let element = col * 8 + k as i32;
            let prob = (packed[k] - offset).exp() * scale;
            let indicator = if element == ix { 1.0 } else { 0.0 };
            d[k] = (prob - indicator) * dloss;
        }
        cache::store(o, pack8(d), Store::Streaming);
        col += bd;
    }
    // the last V % 8 values, by the owner of their chunk
    if !v.is_multiple_of(8) {
        let tail = v8 as u32;
        if tail % block_dim_x() == thread_idx_x()
            && let Some(o) = write.row_mut().get_mut((tail / block_dim_x()) as usize)
        {
            let mut d = [0.0f32; 8];
            for k in 0..(v % 8) as usize {
                let element = (tail * 8) as i32 + k as i32;
                let prob = (o.v[k].widen() - offset).exp() * scale;
                let indicator = if element == ix { 1.0 } else { 0.0 };
                d[k] = (prob - indicator) * dloss;
            }
            cache::store(o, pack8(d), Store::Streaming);
        }
    }
}

#[inline(always)]
fn add4(a: [f32; 4], b: [f32; 4]) -> [f32; 4] {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]
}

#[inline(always)]
fn load_pairs(s: &AtomicSlice<u32>, base: usize) -> [f32; 8] {
    let mut f = [0.0f32; 8];
    for q in 0..4 {
        if let Some(a) = s.get(base + q) {
            let (lo, hi) = Bf16x2::from_bits(a.load()).to_f32s();
            f[2 * q] = lo;
            f[2 * q + 1] = hi;
        }
    }
    f
}

#[inline(always)]
fn store_pairs(s: &AtomicSlice<u32>, base: usize, f: [f32; 8]) {
    for q in 0..4 {
        if let Some(a) = s.get(base + q) {
            a.store(Bf16x2::from_f32s(f[2 * q], f[2 * q + 1]).to_bits());
        }
    }
}

/// llm.c `layernorm.cuh`, `layernorm_backward_kernel10`: one warp per row (grid-strided over
/// the grid's warps), `dinp += ..`; per block, `dbias` / `dweight` partials summed in shared
/// memory, handed to global scratch, and the last block reduces them and adds them to
/// `dbias` / `dweight`. `c8 = C / 8`, `c4 = C / 4`; `rows = B * T`. Launch: `2 * SMs` blocks
/// of 512, dynamic shared memory `(2 rounded_C + 2 (512 - 32) 4) * 4` bytes with `rounded_C =
/// CEIL_DIV(C, 256) * 256`; `counter` zeroed once (llm.c: `cudaMemsetAsync` of the flag before
/// every launch; the `Handoff` leaves it 0).
///
/// Differs from the source: the block partials are one `Handoff` row of [`Partial`]s (the last
/// block found by `atomicAdd` and a reset, llm.c's `atomicInc(flag, gridDim.x)`); `dbias` and
/// `dweight`, which only the last block writes, are `AtomicSlice<u32>` (pairs of bf16, relaxed
/// 4-byte loads and stores where llm.c has one `x128` load and store): no safe output lets
/// one run-time-chosen block write a row.
#[kernel(cols(dinp = c8, scratch = c4), launch_bounds(512, 2))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_kernel10(
    mut dinp: PerWarpRow<X128>,
    dweight: AtomicSlice<u32>,
    dbias: AtomicSlice<u32>,
    scratch: DisjointSlice<Partial, Handoff>,
    counter: AtomicSlice<u32>,
    dout: &[X128],
    inp: &[X128],
    weight: &[X128],
    mean: &[f32],
    rstd: &[f32],
    rows: u32,
    c8: u32,
    c4: u32,
) {
    let mut scratch = scratch;
    let block_size = block_dim_x();
    let warps_in_block = block_size / 32;
    let t = thread_idx_x();
    let warp_id = t / 32;
    let lane = t % 32;
    let c = c8 * 8;
    let iterations_c = c.div_ceil(256);
    let rounded_c = iterations_c * 256;

    let shared = dynamic_shared::<f32>();
    let (dbias_shared, rest) = shared.split_at(rounded_c as usize);
    let (dweight_shared, rest) = rest.split_at(rounded_c as usize);
    let (dbias_tmp, dweight_tmp) = rest.split_at(((block_size - 32) * 4) as usize);

    let mut i = t * 4;
    while i < rounded_c {
        dbias_shared.set_x4((i / 4) as usize, [0.0; 4]);
        dweight_shared.set_x4((i / 4) as usize, [0.0; 4]);
        i += block_size * 4;
    }
    sync_threads();

    for me in warp_rows(rows) {
        let Some(row) = dinp.row_mut(me) else { break };
        let bt = row.row() as usize;
        let n = c8 as usize;
        let (Some(dout_bt), Some(inp_bt), Some(&mean_bt), Some(&rstd_bt)) =
            (dout.get(bt * n..(bt + 1) * n), inp.get(bt * n..(bt + 1) * n), mean.get(bt), rstd.get(bt))
        else {
            break;
        };

        let mut dnorm_mean = 0.0f32;
        let mut dnorm_norm_mean = 0.0f32;
        row.zip_inputs([dout_bt, inp_bt, weight]).for_each(|([d, x, w], _)| {
            let d = widen8(vector::load16(d));
            let x = widen8(vector::load16(x));
            let w = widen8(vector::load16(w));
            for k in 0..8 {
                let dnorm_i = w[k] * d[k];
                dnorm_mean += dnorm_i;
                dnorm_norm_mean += dnorm_i * x[k];
            }
        });
        let dnorm_mean = warp::reduce_sum(dnorm_mean) / c as f32;
        let dnorm_norm_mean = warp::reduce_sum(dnorm_norm_mean) / c as f32 * rstd_bt - dnorm_mean * mean_bt * rstd_bt;

        let Some(mut row) = dinp.row_mut(me) else { break };
        for ci in 0..iterations_c {
            let global_index = lane * 8 + ci * 256;
            let chunk = (lane + 32 * ci) as usize;
            let mut dout128 = [0.0f32; 8];
            let mut inp128 = [0.0f32; 8];
            let mut dinp128 = [0.0f32; 8];
            let mut weight128 = [0.0f32; 8];
            let mut slot = row.get_mut(ci as usize);
            if let Some(s) = slot.as_deref()
                && let (Some(d), Some(x), Some(w)) = (dout_bt.get(chunk), inp_bt.get(chunk), weight.get(chunk))
            {
                dout128 = widen8(cache::load(d, Load::Streaming));
                inp128 = widen8(cache::load(x, Load::Streaming));
                dinp128 = widen8(vector::load16(s));
                weight128 = widen8(vector::load16(w));
            }
            for o in 0..2 {
                let mut dbias_f = [0.0f32; 4];
                let mut dweight_f = [0.0f32; 4];
                for i in 0..4 {
                    let x = o * 4 + i;
                    let dout_i = dout128[x];
                    let norm_bti = (inp128[x] - mean_bt) * rstd_bt;
                    dbias_f[i] = dout_i;
                    dweight_f[i] = norm_bti * dout_i;
                    let mut dval = 0.0f32;
                    dval += weight128[x] * dout128[x];
                    dval -= dnorm_mean;
                    dval -= norm_bti * dnorm_norm_mean;
                    dval *= rstd_bt;
                    dinp128[x] += dval;
                }
                if warp_id != 0 {
                    dbias_tmp.set_x4((t - 32) as usize, dbias_f);
                    dweight_tmp.set_x4((t - 32) as usize, dweight_f);
                }
                sync_threads();
                if warp_id == 0 {
                    for j in 1..warps_in_block {
                        let k = (t + j * 32 - 32) as usize;
                        dbias_f = add4(dbias_f, dbias_tmp.get_x4(k));
                        dweight_f = add4(dweight_f, dweight_tmp.get_x4(k));
                    }
                }
                sync_threads();
                if warp_id == 0 {
                    let k = (global_index / 4 + o as u32) as usize;
                    dbias_shared.set_x4(k, add4(dbias_f, dbias_shared.get_x4(k)));
                    dweight_shared.set_x4(k, add4(dweight_f, dweight_shared.get_x4(k)));
                }
            }
            if let Some(s) = slot.take() {
                cache::store(s, pack8(dinp128), Store::CacheGlobal);
            }
        }
    }
    sync_threads();

    // each block hands its partial sums to the last one
    let mut j = 0;
    let mut i = t * 4;
    while i < c {
        let k = (i / 4) as usize;
        scratch.publish(j, Partial { dbias: dbias_shared.get_x4(k), dweight: dweight_shared.get_x4(k) });
        j += 1;
        i += block_size * 4;
    }
    let Some(counter) = counter.get(0) else { return };
    let Some(last) = scratch.arrive(counter) else { return };

    let mut i = t * 4;
    while i < c {
        let col = i / 4;
        let sum = last.fold_column(col, Partial::default(), |a, p| Partial { dbias: add4(a.dbias, p.dbias), dweight: add4(a.dweight, p.dweight) });
        dbias_shared.set_x4(col as usize, sum.dbias);
        dweight_shared.set_x4(col as usize, sum.dweight);
        i += block_size * 4;
    }
    sync_threads();

    let mut ci = warp_id;
    while ci < iterations_c {
        let global_index = lane * 8 + ci * 256;
        if global_index >= c {
            break;
        }
        let base = (global_index / 2) as usize;
        let mut db = load_pairs(&dbias, base);
        let mut dw = load_pairs(&dweight, base);
        for o in 0..2 {
            let k = (global_index / 4 + o as u32) as usize;
            let s_db = dbias_shared.get_x4(k);
            let s_dw = dweight_shared.get_x4(k);
            for i in 0..4 {
                let x = o * 4 + i;
                db[x] += s_db[i];
                dw[x] += s_dw[i];
            }
        }
        store_pairs(&dbias, base, db);
        store_pairs(&dweight, base, dw);
        ci += warps_in_block;
    }
}

/// [`layernorm_backward_kernel10()`] after the fix rounds. Round 1: the loop over the two
/// `f128` halves of each `x128` written `unroll::<2>` (llm.c's `for (int o = 0; o <
/// x128::size / f128::size; ++o)`, which nvcc unrolls): as a `for` loop LLVM kept it rolled
/// (it holds another loop, so LLVM's unroller skipped the cost analysis that would have seen
/// the four `[f32; 8]` arrays become registers, and its size passed LLVM's threshold of 300)
/// and the arrays went to local memory. Since round 2 the builder raises the threshold
/// (`KernelBuilder::unroll_threshold`), which unrolls the first try's `for` loop too. Round 2:
/// `dbias`/`dweight` are `DisjointSlice<X128, ByLastBlock>`, written by the last block through
/// `LastBlock::finish` with one 16-byte load and store per chunk as llm.c's `load128`/`store128`
/// (the first try: `AtomicSlice<u32>`, four 4-byte relaxed loads and stores per chunk).
#[kernel(cols(dinp = c8, scratch = c4), launch_bounds(512, 2))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_kernel10_fixed(
    mut dinp: PerWarpRow<X128>,
    dweight: DisjointSlice<X128, ByLastBlock>,
    dbias: DisjointSlice<X128, ByLastBlock>,
    scratch: DisjointSlice<Partial, Handoff>,
    counter: AtomicSlice<u32>,
    dout: &[X128],
    inp: &[X128],
    weight: &[X128],
    mean: &[f32],
    rstd: &[f32],
    rows: u32,
    c8: u32,
    c4: u32,
) {
    let mut scratch = scratch;
    let block_size = block_dim_x();
    let warps_in_block = block_size / 32;
    let t = thread_idx_x();
    let warp_id = t / 32;
    let lane = t % 32;
    let c = c8 * 8;
    let iterations_c = c.div_ceil(256);
    let rounded_c = iterations_c * 256;

    let shared = dynamic_shared::<f32>();
    let (dbias_shared, rest) = shared.split_at(rounded_c as usize);
    let (dweight_shared, rest) = rest.split_at(rounded_c as usize);
    let (dbias_tmp, dweight_tmp) = rest.split_at(((block_size - 32) * 4) as usize);

    let mut i = t * 4;
    while i < rounded_c {
        dbias_shared.set_x4((i / 4) as usize, [0.0; 4]);
        dweight_shared.set_x4((i / 4) as usize, [0.0; 4]);
        i += block_size * 4;
    }
    sync_threads();

    for me in warp_rows(rows) {
        let Some(row) = dinp.row_mut(me) else { break };
        let bt = row.row() as usize;
        let n = c8 as usize;
        let (Some(dout_bt), Some(inp_bt), Some(&mean_bt), Some(&rstd_bt)) =
            (dout.get(bt * n..(bt + 1) * n), inp.get(bt * n..(bt + 1) * n), mean.get(bt), rstd.get(bt))
        else {
            break;
        };

        let mut dnorm_mean = 0.0f32;
        let mut dnorm_norm_mean = 0.0f32;
        row.zip_inputs([dout_bt, inp_bt, weight]).for_each(|([d, x, w], _)| {
            let d = widen8(vector::load16(d));
            let x = widen8(vector::load16(x));
            let w = widen8(vector::load16(w));
            for k in 0..8 {
                let dnorm_i = w[k] * d[k];
                dnorm_mean += dnorm_i;
                dnorm_norm_mean += dnorm_i * x[k];
            }
        });
        let dnorm_mean = warp::reduce_sum(dnorm_mean) / c as f32;
        let dnorm_norm_mean = warp::reduce_sum(dnorm_norm_mean) / c as f32 * rstd_bt - dnorm_mean * mean_bt * rstd_bt;

        let Some(mut row) = dinp.row_mut(me) else { break };
        for ci in 0..iterations_c {
            let global_index = lane * 8 + ci * 256;
            let chunk = (lane + 32 * ci) as usize;
            // Packed bf16, widened where used (as llm.c's `(float)dout128[x]`): 16 registers
            // for the four packs where `[f32; 8]` arrays took 32 (and spilled under the
            // launch bounds' 64).
            let mut dout128 = X128::default();
            let mut inp128 = X128::default();
            let mut dinp128 = X128::default();
            let mut weight128 = X128::default();
            let mut slot = row.get_mut(ci as usize);
            if let Some(s) = slot.as_deref()
                && let (Some(d), Some(x), Some(w)) = (dout_bt.get(chunk), inp_bt.get(chunk), weight.get(chunk))
            {
                dout128 = cache::load(d, Load::Streaming);
                inp128 = cache::load(x, Load::Streaming);
                dinp128 = vector::load16(s);
                weight128 = vector::load16(w);
            }
            unroll::<2>(|o| {
                let mut dbias_f = [0.0f32; 4];
                let mut dweight_f = [0.0f32; 4];
                for i in 0..4 {
                    let x = o * 4 + i;
                    let dout_i = dout128.v[x].widen();
                    let norm_bti = (inp128.v[x].widen() - mean_bt) * rstd_bt;
                    dbias_f[i] = dout_i;
                    dweight_f[i] = norm_bti * dout_i;
                    let mut dval = 0.0f32;
                    dval += weight128.v[x].widen() * dout_i;
                    dval -= dnorm_mean;
                    dval -= norm_bti * dnorm_norm_mean;
                    dval *= rstd_bt;
                    dinp128.v[x] = (dinp128.v[x].widen() + dval).to_bf16();
                }
                if warp_id != 0 {
                    dbias_tmp.set_x4((t - 32) as usize, dbias_f);
                    dweight_tmp.set_x4((t - 32) as usize, dweight_f);
                }
                sync_threads();
                if warp_id == 0 {
                    for j in 1..warps_in_block {
                        let k = (t + j * 32 - 32) as usize;
                        dbias_f = add4(dbias_f, dbias_tmp.get_x4(k));
                        dweight_f = add4(dweight_f, dweight_tmp.get_x4(k));
                    }
                }
                sync_threads();
                if warp_id == 0 {
                    let k = (global_index / 4 + o as u32) as usize;
                    dbias_shared.set_x4(k, add4(dbias_f, dbias_shared.get_x4(k)));
                    dweight_shared.set_x4(k, add4(dweight_f, dweight_shared.get_x4(k)));
                }
            });
            if let Some(s) = slot.take() {
                cache::store(s, dinp128, Store::CacheGlobal);
            }
        }
    }
    sync_threads();

    // each block hands its partial sums to the last one
    let mut j = 0;
    let mut i = t * 4;
    while i < c {
        let k = (i / 4) as usize;
        scratch.publish(j, Partial { dbias: dbias_shared.get_x4(k), dweight: dweight_shared.get_x4(k) });
        j += 1;
        i += block_size * 4;
    }
    let Some(counter) = counter.get(0) else { return };
    let Some(last) = scratch.arrive(counter) else { return };

    let mut i = t * 4;
    while i < c {
        let col = i / 4;
        let sum = last.fold_column(col, Partial::default(), |a, p| Partial { dbias: add4(a.dbias, p.dbias), dweight: add4(a.dweight, p.dweight) });
        dbias_shared.set_x4(col as usize, sum.dbias);
        dweight_shared.set_x4(col as usize, sum.dweight);
        i += block_size * 4;
    }
    sync_threads();

    // llm.c's `for (i = warpId; i < iterations_C; i += warpsInBlock)` over chunks `lane + 32
    // i`: the chunks `t + blockDim.x j` of the last block's write views.
    let _ = (iterations_c, lane, warp_id, warps_in_block);
    let mut dbias = last.finish(dbias);
    let mut dweight = last.finish(dweight);
    for j in 0..dbias.count() {
        let global_index = (t + block_size * j) * 8;
        if global_index >= c {
            break;
        }
        // `x128 += the block sums of its eight channels` (two `f128` of the shared sums)
        let add = |old: X128, shared: SharedSlice<f32>| {
            let mut f = widen8(old);
            for o in 0..2 {
                let s = shared.get_x4((global_index / 4 + o as u32) as usize);
                for i in 0..4 {
                    f[o * 4 + i] += s[i];
                }
            }
            pack8(f)
        };
        dbias.update(j, |old| add(old, dbias_shared));
        dweight.update(j, |old| add(old, dweight_shared));
    }
}

/// [`layernorm_backward_kernel10_fixed()`] with its dynamic shared memory as `f128` regions
/// (session 15): `dynamic_shared_x4::<f32>().carve::<2>(..)` for llm.c's `dbias_shared` /
/// `dweight_shared` and again for the `_tmp` pair, where the fixed variant cut `f32` slices
/// with `split_at` and read them with `get_x4` / `set_x4` (a bound and a 16-byte alignment
/// test per access: 26 of its 29 panic calls). The regions are aligned by construction and
/// each pair has one length, so warp 0's loop over the other warps' slots,
/// `for k in strided_range(lane, dbias_tmp.len(), 32)`, has no check left and unrolls as
/// nvcc's (eight `LDS.128` in flight, where the fixed variant's rolled loop had two).
#[kernel(cols(dinp = c8, scratch = c4), launch_bounds(512, 2))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_kernel10_regions(
    mut dinp: PerWarpRow<X128>,
    dweight: DisjointSlice<X128, ByLastBlock>,
    dbias: DisjointSlice<X128, ByLastBlock>,
    scratch: DisjointSlice<Partial, Handoff>,
    counter: AtomicSlice<u32>,
    dout: &[X128],
    inp: &[X128],
    weight: &[X128],
    mean: &[f32],
    rstd: &[f32],
    rows: u32,
    c8: u32,
    c4: u32,
) {
    let mut scratch = scratch;
    let block_size = block_dim_x();
    let warps_in_block = block_size / 32;
    let t = thread_idx_x();
    let warp_id = t / 32;
    let lane = t % 32;
    let c = c8 * 8;
    let iterations_c = c.div_ceil(256);
    let rounded_c = iterations_c * 256;

    // llm.c's `float* dbias_shared = shared; .. dweight_tmp_shared = ..` as `f128` regions:
    // aligned by construction, one length per pair (so loops bounded by it index unchecked).
    let ([dbias_shared, dweight_shared], rest) = dynamic_shared_x4::<f32>().carve::<2>((rounded_c / 4) as usize);
    let ([dbias_tmp, dweight_tmp], _) = rest.carve::<2>((block_size - 32) as usize);

    for k in strided_range(t, dbias_shared.len_u32(), block_size) {
        dbias_shared.set(k as usize, [0.0; 4]);
        dweight_shared.set(k as usize, [0.0; 4]);
    }
    sync_threads();

    for me in warp_rows(rows) {
        let Some(row) = dinp.row_mut(me) else { break };
        let bt = row.row() as usize;
        let n = c8 as usize;
        let (Some(dout_bt), Some(inp_bt), Some(&mean_bt), Some(&rstd_bt)) =
            (dout.get(bt * n..(bt + 1) * n), inp.get(bt * n..(bt + 1) * n), mean.get(bt), rstd.get(bt))
        else {
            break;
        };

        let mut dnorm_mean = 0.0f32;
        let mut dnorm_norm_mean = 0.0f32;
        row.zip_inputs([dout_bt, inp_bt, weight]).for_each(|([d, x, w], _)| {
            let d = widen8(vector::load16(d));
            let x = widen8(vector::load16(x));
            let w = widen8(vector::load16(w));
            for k in 0..8 {
                let dnorm_i = w[k] * d[k];
                dnorm_mean += dnorm_i;
                dnorm_norm_mean += dnorm_i * x[k];
            }
        });
        let dnorm_mean = warp::reduce_sum(dnorm_mean) / c as f32;
        let dnorm_norm_mean = warp::reduce_sum(dnorm_norm_mean) / c as f32 * rstd_bt - dnorm_mean * mean_bt * rstd_bt;

        let Some(mut row) = dinp.row_mut(me) else { break };
        for ci in 0..iterations_c {
            let global_index = lane * 8 + ci * 256;
            let chunk = (lane + 32 * ci) as usize;
            // Packed bf16, widened where used (as llm.c's `(float)dout128[x]`): 16 registers
            // for the four packs where `[f32; 8]` arrays took 32 (and spilled under the
            // launch bounds' 64).
            let mut dout128 = X128::default();
            let mut inp128 = X128::default();
            let mut dinp128 = X128::default();
            let mut weight128 = X128::default();
            let mut slot = row.get_mut(ci as usize);
            if let Some(s) = slot.as_deref()
                && let (Some(d), Some(x), Some(w)) = (dout_bt.get(chunk), inp_bt.get(chunk), weight.get(chunk))
            {
                dout128 = cache::load(d, Load::Streaming);
                inp128 = cache::load(x, Load::Streaming);
                dinp128 = vector::load16(s);
                weight128 = vector::load16(w);
            }
            unroll::<2>(|o| {
                let mut dbias_f = [0.0f32; 4];
                let mut dweight_f = [0.0f32; 4];
                for i in 0..4 {
                    let x = o * 4 + i;
                    let dout_i = dout128.v[x].widen();
                    let norm_bti = (inp128.v[x].widen() - mean_bt) * rstd_bt;
                    dbias_f[i] = dout_i;
                    dweight_f[i] = norm_bti * dout_i;
                    let mut dval = 0.0f32;
                    dval += weight128.v[x].widen() * dout_i;
                    dval -= dnorm_mean;
                    dval -= norm_bti * dnorm_norm_mean;
                    dval *= rstd_bt;
                    dinp128.v[x] = (dinp128.v[x].widen() + dval).to_bf16();
                }
                if warp_id != 0 {
                    dbias_tmp.set((t - 32) as usize, dbias_f);
                    dweight_tmp.set((t - 32) as usize, dweight_f);
                }
                sync_threads();
                if warp_id == 0 {
                    // llm.c's `for (j = 1; j < warpsInBlock; j++)` over `threadIdx.x + 32 j`:
                    // the lane's column of the other warps' slots, bounded by the regions'
                    // length (no check left; unrolled by 4 as nvcc's). In `u32` (the shared
                    // length's `len_u32`), as llm.c's `int j`: a `usize` counter took a
                    // register pair and a 64-bit add and compare a step, and left one
                    // `LDS.128` in flight where nvcc has two (0.907x; issue 30, session 19).
                    for k in strided_range(lane, dbias_tmp.len_u32(), 32) {
                        dbias_f = add4(dbias_f, dbias_tmp.get(k as usize));
                        dweight_f = add4(dweight_f, dweight_tmp.get(k as usize));
                    }
                }
                sync_threads();
                if warp_id == 0 {
                    let k = (global_index / 4 + o as u32) as usize;
                    dbias_shared.set(k, add4(dbias_f, dbias_shared.get(k)));
                    dweight_shared.set(k, add4(dweight_f, dweight_shared.get(k)));
                }
            });
            if let Some(s) = slot.take() {
                cache::store(s, dinp128, Store::CacheGlobal);
            }
        }
    }
    sync_threads();

    // each block hands its partial sums to the last one
    for (j, k) in strided_range(t as usize, (c / 4) as usize, block_size as usize).enumerate() {
        scratch.publish(j as u32, Partial { dbias: dbias_shared.get(k), dweight: dweight_shared.get(k) });
    }
    let Some(counter) = counter.get(0) else { return };
    let Some(last) = scratch.arrive(counter) else { return };

    let mut i = t * 4;
    while i < c {
        let col = i / 4;
        let sum = last.fold_column(col, Partial::default(), |a, p| Partial { dbias: add4(a.dbias, p.dbias), dweight: add4(a.dweight, p.dweight) });
        dbias_shared.set(col as usize, sum.dbias);
        dweight_shared.set(col as usize, sum.dweight);
        i += block_size * 4;
    }
    sync_threads();

    // llm.c's `for (i = warpId; i < iterations_C; i += warpsInBlock)` over chunks `lane + 32
    // i`: the chunks `t + blockDim.x j` of the last block's write views.
    let _ = (iterations_c, warps_in_block);
    let mut dbias = last.finish(dbias);
    let mut dweight = last.finish(dweight);
    for j in 0..dbias.count() {
        let global_index = (t + block_size * j) * 8;
        if global_index >= c {
            break;
        }
        // `x128 += the block sums of its eight channels` (two `f128` of the shared sums)
        let add = |old: X128, shared: SharedSliceX4<f32>| {
            let mut f = widen8(old);
            for o in 0..2 {
                let s = shared.get((global_index / 4 + o as u32) as usize);
                for i in 0..4 {
                    f[o * 4 + i] += s[i];
                }
            }
            pack8(f)
        };
        dbias.update(j, |old| add(old, dbias_shared));
        dweight.update(j, |old| add(old, dweight_shared));
    }
}
