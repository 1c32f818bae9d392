//! The llm.c ports (karpathy/llm.c, dev/cuda). llm.c builds them with `--use_fast_math`
//! (dev/cuda/Makefile): this crate is precise, so each port calls the `FastMath` method where
//! nvcc's fast math would replace the precise function (`expf` -> `fast_exp`, `/` ->
//! `fast_div`), as docs/performance.md ("`--use_fast_math`") says for a crate that mixes.

use core::num::NonZeroU32;

use ferrocuda_device::cache::{self, Load, Store};
use ferrocuda_device::global::{BlockRows, PerWarpRow, SegmentRows, block_row, segment_row, warp_row};
use ferrocuda_device::prelude::*;
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::unroll::{self, unroll};
use ferrocuda_device::warp;

/// llm.c `attention_value_kernel1` (dev/cuda/attention_forward.cu): thread `idx = (b T + t) NH
/// + h` writes `out[b, t, h hs .. h hs + hs]`, the attention-weighted sum of the value rows
/// `t2 <= t` (`att` `[B, NH, T, T]`, `inp` `[B, T, 3C]`, values at `2C`).
///
/// The output row of thread `idx` is row `idx` of width `hs` (since `C = NH hs`):
/// `SegmentRows<1>`, a row per one-lane segment (docs/kernel-model.md: "`SegmentRows<1>`, give
/// thread `s` the row `s`"). `hs = C / NH` comes from the host (the row width is a parameter).
#[kernel(cols(out = hs))]
#[allow(clippy::too_many_arguments)]
pub fn attention_value_kernel1(mut out: DisjointSlice<f32, SegmentRows<1>>, att: &[f32], inp: &[f32], b: u32, t: NonZeroU32, c: u32, nh: NonZeroU32, hs: u32) {
    let me = segment_row::<1>();
    let idx = me.row();
    if idx >= b * t.get() * nh.get() {
        return;
    }
    let h = idx % nh;
    let tt = (idx / nh) % t;
    let bb = (idx / nh) / t;
    let (t_, c3, hs_) = (t.get() as usize, 3 * c as usize, hs as usize);
    // att + b*NH*T*T + h*T*T + t*T: this thread's row of weights, up to t (causal).
    let att_start = ((bb as usize * nh.get() as usize + h as usize) * t_ + tt as usize) * t_;
    let Some(att_bth) = att.get(att_start..att_start + tt as usize + 1) else { return };
    {
        let Some(row) = out.row_mut(me) else { return };
        for o in row.iter_mut() {
            *o = 0.0;
        }
    }
    for (t2, &a) in att_bth.iter().enumerate() {
        // inp + b*T*C3 + t2*C3 + h*hs + C*2: the value row of t2.
        let v_start = bb as usize * t_ * c3 + t2 * c3 + h as usize * hs_ + 2 * c as usize;
        let Some(value) = inp.get(v_start..v_start + hs_) else { return };
        let Some(row) = out.row_mut(me) else { return };
        row.zip_input(value).for_each(|(&v, o)| *o += a * v);
    }
}

/// **Fix round** of [`attention_value_kernel1()`] (`_fix`): the first try's `hs` loop
/// (`row.zip_input(value).for_each(..)`, 0.92x nvcc on an H200) kept fewer loads and stores in
/// flight than nvcc's unroll by 4 of `for (i = 0; i < hs; i++) out_bth[i] += att * value[i]`
/// (SASS: 20 `LDG`, 34 `STG` against 63 and 60). Here `LaneRow::zip_input_for_each_x4`, the
/// row's documented four-a-step walk (docs/kernel-model.md: "four per step of the main loop"),
/// the rest as the first try.
#[kernel(cols(out = hs))]
#[allow(clippy::too_many_arguments)]
pub fn attention_value_kernel1_fix(
    mut out: DisjointSlice<f32, SegmentRows<1>>,
    att: &[f32],
    inp: &[f32],
    b: u32,
    t: NonZeroU32,
    c: u32,
    nh: NonZeroU32,
    hs: u32,
) {
    let me = segment_row::<1>();
    let idx = me.row();
    if idx >= b * t.get() * nh.get() {
        return;
    }
    let h = idx % nh;
    let tt = (idx / nh) % t;
    let bb = (idx / nh) / t;
    let (t_, c3, hs_) = (t.get() as usize, 3 * c as usize, hs as usize);
    let att_start = ((bb as usize * nh.get() as usize + h as usize) * t_ + tt as usize) * t_;
    let Some(att_bth) = att.get(att_start..att_start + tt as usize + 1) else { return };
    {
        let Some(row) = out.row_mut(me) else { return };
        row.for_each_x4(|o| *o = 0.0);
    }
    for (t2, &a) in att_bth.iter().enumerate() {
        let v_start = bb as usize * t_ * c3 + t2 * c3 + h as usize * hs_ + 2 * c as usize;
        let Some(value) = inp.get(v_start..v_start + hs_) else { return };
        let Some(row) = out.row_mut(me) else { return };
        row.zip_input_for_each_x4(value, |&v, o| *o += a * v);
    }
}

/// llm.c `softmax_forward_kernel7` (dev/cuda/softmax_forward.cu): a block per row of `C`, the
/// thread's columns read eight at a time (`min(C - 1, i + u blockDim.x)`: every read in
/// bounds, the writes tested), the row's max and sum over the block, then the row divided.
///
/// The source's threads past `C` store `-INF`/0 as their warps' partials and return before the
/// barriers; here they take part in the reductions with the same values (nothing read), which
/// `RuntimeBlockReduce` requires (a thread must not leave before a block collective). The max
/// then the sum are `max_then_sum_all` (2 barriers; the exp pass runs between them), where the
/// source has 4.
#[kernel(cols(out = c))]
pub fn softmax_forward_kernel7(mut out: DisjointSlice<f32, BlockRows>, inp: &[f32], n: u32, c: u32) {
    let me = block_row();
    let idx = me.row();
    if idx >= n {
        return; // the whole block: no barrier is left waiting
    }
    let cs = c as usize;
    let Some(x) = inp.get(idx as usize * cs..idx as usize * cs + cs) else { return };
    let Some(mut y) = out.row_mut(me) else { return };
    let (tid, bd) = (thread_idx_x() as usize, block_dim_x() as usize);
    let last = cs.saturating_sub(1);

    let mut maxval = f32::NEG_INFINITY;
    let mut i = tid;
    while i < cs {
        unroll::<8>(|u| maxval = maxval.max(x[last.min(i + u * bd)]));
        i += bd * 8;
    }
    let reducer = RuntimeBlockReduce::new(block_scratch!(f32));
    let (_offset, sum) = reducer.max_then_sum_all(maxval, |offset| {
        // exp(x - max), written, and summed by this thread (kernel7's second loop).
        let mut sumval = 0.0f32;
        let (mut i, mut k) = (tid, 0usize);
        while i < cs {
            let mut reg = [0.0f32; 8];
            unroll::<8>(|u| reg[u] = cache::load(&x[last.min(i + u * bd)], Load::Streaming));
            unroll::<8>(|u| {
                if i + u * bd < cs
                    && let Some(o) = y.get_mut(8 * k + u)
                {
                    let output = (reg[u] - offset).fast_exp();
                    *o = output;
                    sumval += output;
                }
            });
            i += bd * 8;
            k += 1;
        }
        sumval
    });
    // Divide the thread's own columns by the sum (kernel7's third loop, eight a step).
    let (mut i, mut k) = (tid, 0usize);
    while i < cs {
        unroll::<8>(|u| {
            if let Some(o) = y.get_mut(8 * k + u) {
                *o = o.fast_div(sum);
            }
        });
        i += bd * 8;
        k += 1;
    }
}

/// **Fix round** of [`softmax_forward_kernel7()`] (`_fix`): the first try's clamp
/// `cs.saturating_sub(1).min(i + u bd)` kept a bounds check (and a panic branch) on each of the
/// 16 clamped loads: LLVM cannot see that `saturating_sub` gives `cs - 1` inside the loop. Here
/// the row's last column is `cs.checked_sub(1)` once (an empty row returns, the whole block),
/// so `last.min(..) <= last < x.len()` and the checks fold away. The body is otherwise the
/// first try's.
#[kernel(cols(out = c))]
pub fn softmax_forward_kernel7_fix(mut out: DisjointSlice<f32, BlockRows>, inp: &[f32], n: u32, c: u32) {
    let me = block_row();
    let idx = me.row();
    if idx >= n {
        return;
    }
    let cs = c as usize;
    let Some(last) = cs.checked_sub(1) else { return };
    let Some(x) = inp.get(idx as usize * cs..idx as usize * cs + cs) else { return };
    let Some(mut y) = out.row_mut(me) else { return };
    let (tid, bd) = (thread_idx_x() as usize, block_dim_x() as usize);

    let mut maxval = f32::NEG_INFINITY;
    let mut i = tid;
    while i < cs {
        unroll::<8>(|u| maxval = maxval.max(x[last.min(i + u * bd)]));
        i += bd * 8;
    }
    let reducer = RuntimeBlockReduce::new(block_scratch!(f32));
    let (_offset, sum) = reducer.max_then_sum_all(maxval, |offset| {
        let mut sumval = 0.0f32;
        let (mut i, mut k) = (tid, 0usize);
        while i < cs {
            let mut reg = [0.0f32; 8];
            unroll::<8>(|u| reg[u] = cache::load(&x[last.min(i + u * bd)], Load::Streaming));
            unroll::<8>(|u| {
                if i + u * bd < cs
                    && let Some(o) = y.get_mut(8 * k + u)
                {
                    let output = (reg[u] - offset).fast_exp();
                    *o = output;
                    sumval += output;
                }
            });
            i += bd * 8;
            k += 1;
        }
        sumval
    });
    let (mut i, mut k) = (tid, 0usize);
    while i < cs {
        unroll::<8>(|u| {
            if let Some(o) = y.get_mut(8 * k + u) {
                *o = o.fast_div(sum);
            }
        });
        i += bd * 8;
        k += 1;
    }
}

/// llm.c `mean_kernel` (dev/cuda/layernorm_forward.cu, layernorm version 2): a block per row,
/// thread coarsening over the row, then a tree reduction in dynamic shared memory of
/// `block_size` floats (`extern __shared__ float shared[]`, a barrier at the top of each
/// level), thread 0 writing `mean[row] = sum / C`.
#[kernel]
pub fn mean_kernel(mut mean: PerBlock<f32>, inp: &[f32], n: u32, c: u32, block_size: u32) {
    let idx = block_idx_x();
    if idx >= n {
        return;
    }
    let tid = thread_idx_x() as usize;
    let (cs, bs) = (c as usize, block_size as usize);
    let Some(x) = inp.get(idx as usize * cs..idx as usize * cs + cs) else { return };
    let Some(shared) = dynamic_shared::<f32>().region(0, bs) else { return };
    let mut sum = 0.0f32;
    let mut i = tid;
    while i < cs {
        sum += x[i];
        i += bs;
    }
    if tid < bs {
        shared.set(tid, sum);
    }
    sync_threads();
    let mut stride = bs / 2;
    while stride >= 1 {
        sync_threads();
        if tid < stride {
            shared.set(tid, shared.get(tid) + shared.get(tid + stride));
        }
        stride /= 2;
    }
    if let Some(b) = once_per_block()
        && let Some(m) = mean.get_mut(b)
    {
        *m = shared.get(0).fast_div(c as f32);
    }
}

/// **Fix round** of [`mean_kernel()`] (`_fix`): the first try's row loop (`while i < cs { sum
/// += x[i]; i += bs }`) stayed rolled, one load in flight a thread, where nvcc unrolls llm.c's
/// `for (i = tid; i < C; i += block_size)` by 4 (4 `LDG` a step, 5 in all). Here
/// `unroll::strided_x4` (docs/performance.md, the run-time trip count rows), the same order of
/// additions; and the tree's reads are bounded where they are made (`tid + stride < bs`,
/// `bs > 0`), so the shared accesses keep no panic branch.
#[kernel]
pub fn mean_kernel_fix(mut mean: PerBlock<f32>, inp: &[f32], n: u32, c: u32, block_size: u32) {
    let idx = block_idx_x();
    if idx >= n {
        return;
    }
    let tid = thread_idx_x() as usize;
    let (cs, bs) = (c as usize, block_size as usize);
    let Some(x) = inp.get(idx as usize * cs..idx as usize * cs + cs) else { return };
    let Some(shared) = dynamic_shared::<f32>().region(0, bs) else { return };
    let mut sum = 0.0f32;
    unroll::strided_x4(x, tid, bs, |&v| sum += v);
    if tid < bs {
        shared.set(tid, sum);
    }
    sync_threads();
    let mut stride = bs / 2;
    while stride >= 1 {
        sync_threads();
        if tid < stride && tid + stride < bs {
            shared.set(tid, shared.get(tid) + shared.get(tid + stride));
        }
        stride /= 2;
    }
    if bs > 0
        && let Some(b) = once_per_block()
        && let Some(m) = mean.get_mut(b)
    {
        *m = shared.get(0).fast_div(c as f32);
    }
}

/// llm.c `matmul_backward_bias_kernel2` (dev/cuda/matmul_backward_bias.cu, `floatX` =
/// `__nv_bfloat16`): one warp per output channel `idx`, its lanes summing `dout[i OC + idx]`
/// over `i < B T` (stride 32), a warp reduction (cooperative groups' `reduce`: the xor
/// butterfly from 16 down, as `warp::reduce`), lane 0 adding the sum to `dbias[idx]`.
///
/// `dbias` is a row of one element per warp (`PerWarpRow` with `cols = 1`: lane 0 owns
/// column 0), read and written by its owner.
#[kernel(cols(dbias = 1))]
pub fn matmul_backward_bias_kernel2(mut dbias: PerWarpRow<bf16>, dout: &[bf16], b: u32, t: u32, oc: u32) {
    let me = warp_row();
    let idx = me.row();
    if idx >= oc {
        return; // the whole warp
    }
    let (bt, ocs) = ((b * t) as usize, oc as usize);
    let mut sum = 0.0f32;
    let mut i = me.lane() as usize;
    while i < bt {
        if let Some(v) = dout.get(i * ocs + idx as usize) {
            sum += v.widen();
        }
        i += 32;
    }
    let sum = warp::reduce(sum, |a, b| a + b);
    if let Some(mut row) = dbias.row_mut(me)
        && let Some(o) = row.get_mut(0)
    {
        *o = (o.widen() + sum).to_bf16();
    }
}

/// llm.c's `reduce_sum_max_op` (softmax_forward.cu) on `(maxval, sum)`: the larger max, and
/// the smaller one's sum rescaled to it (`expf` is `__expf` under fast math).
#[inline(always)]
fn reduce_sum_max_op(a: (f32, f32), b: (f32, f32)) -> (f32, f32) {
    let a_bigger = a.0 > b.0;
    let (bigger, smaller) = if a_bigger { (a, b) } else { (b, a) };
    (bigger.0, bigger.1 + smaller.1 * (smaller.0 - bigger.0).fast_exp())
}

/// llm.c `softmax_forward_online_kernel2` (dev/cuda/softmax_forward.cu): a warp per row, the
/// online (max, sum) pair folded along the lane's columns, reduced over the warp with
/// `reduce_sum_max_op` (cooperative groups' xor butterfly, each field shuffled), then the row
/// written `exp(x - max) / sum` with streaming stores (`__stcs`).
#[kernel(cols(out = c))]
pub fn softmax_forward_online_kernel2(mut out: PerWarpRow<f32>, inp: &[f32], n: u32, c: u32) {
    let me = warp_row();
    let idx = me.row();
    if idx >= n {
        return;
    }
    let cs = c as usize;
    let Some(x) = inp.get(idx as usize * cs..idx as usize * cs + cs) else { return };
    let mut sm = (f32::NEG_INFINITY, 0.0f32);
    let mut i = me.lane() as usize;
    while i < cs {
        sm = reduce_sum_max_op(sm, (x[i], 1.0));
        i += 32;
    }
    let mut mask = 16;
    while mask > 0 {
        let other = (warp::shuffle_xor(sm.0, mask), warp::shuffle_xor(sm.1, mask));
        sm = reduce_sum_max_op(sm, other);
        mask /= 2;
    }
    let (maxval, sum) = sm;
    let Some(row) = out.row_mut(me) else { return };
    row.zip_input(x).for_each(|(&v, o)| cache::store(o, (v - maxval).fast_exp().fast_div(sum), Store::Streaming));
}
