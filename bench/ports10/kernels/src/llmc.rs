//! The llm.c kernels (karpathy/llm.c at f1e2ace6), first tries from the docs.
//!
//! llm.c builds `dev/cuda/softmax_forward.cu`, `layernorm_backward.cu`, `encoder_forward.cu` and
//! `llmc/` with `--use_fast_math`; this crate is precise (one device build for all eight ports),
//! so the kernels call the `FastMath` methods where nvcc's fast math changes an instruction
//! (`expf`, `/`), as docs/performance.md's `--use_fast_math` row says to mix the two.

use core::num::NonZeroU32;

use ferrocuda_device::global::{BlockRows, SegmentRows, block_row, segment_row};
use ferrocuda_device::prelude::*;
use ferrocuda_device::thread::strided_range;
use ferrocuda_device::{dynamic_shared, kernel};

/// llm.c's `softmax_forward_kernel4` (dev/cuda/softmax_forward.cu): a block per row of `c`
/// columns, any block size of whole warps; the row's maximum and sum by block reductions
/// (llm.c: warp shuffles, one slot a warp in dynamic shared memory, thread 0 folding the slots;
/// here `RuntimeBlockReduce`, which needs no dynamic shared memory). `exp(x - max)` is written to
/// `out`, read back for the sum and divided in place, as the source does. `n` (rows) is the
/// source's and unused: the grid says how many rows.
#[kernel(cols(out = c))]
pub fn softmax_forward_kernel4(mut out: DisjointSlice<f32, BlockRows>, inp: &[f32], n: u32, c: u32) {
    let _ = n;
    let me = block_row();
    let start = me.row() as usize * c as usize;
    // The row is inside `inp` or it is not, the same in every thread of the block: returning
    // here skips the reductions for the whole block.
    let Some(x) = inp.get(start..start + c as usize) else { return };
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));

    let mut maxval = f32::NEG_INFINITY;
    for i in strided_range(thread_idx_x(), c, block_dim_x()) {
        maxval = maxval.max(x[i as usize]);
    }
    let offset = reduce.max_all(maxval);

    let Some(row) = out.row_mut(me) else { return };
    // `expf` under `--use_fast_math` is `__expf`.
    row.zip_input(x).for_each(|(&v, o)| *o = (v - offset).fast_exp());

    let Some(row) = out.row_mut(me) else { return };
    let mut sumval = 0.0f32;
    for v in row.iter_mut() {
        sumval += *v;
    }
    let sum = reduce.sum_all(sumval);

    let Some(row) = out.row_mut(me) else { return };
    for v in row.iter_mut() {
        // `/` under `--use_fast_math` is `div.approx.ftz`.
        *v = v.fast_div(sum);
    }
}

/// llm.c's `layernorm_backward_kernel1` (dev/cuda/layernorm_backward.cu): a thread per row of
/// `c` columns (`B * T` rows), two passes over the row; `dinp += ..` in place on the thread's
/// row (a one-lane segment of `SegmentRows<1>`), the weight and bias gradients added with
/// atomics (`atomicAdd`, result unused: `red.add`). `b` and `t` are the source's; the row is
/// the thread's index, as the source's `b * T + t`.
// Launched with 256 threads a block (the bench's); 6 blocks of 256 an SM hold the
// registers ptxas picks (40), so the occupancy check has the size it needs.
#[kernel(cols(dinp = c), launch_bounds(256, 6))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_kernel1(
    mut dinp: DisjointSlice<f32, SegmentRows<1>>,
    dweight: AtomicSlice<f32>,
    dbias: AtomicSlice<f32>,
    dout: &[f32],
    inp: &[f32],
    weight: &[f32],
    mean: &[f32],
    rstd: &[f32],
    b: u32,
    t: u32,
    c: u32,
) {
    let _ = (b, t);
    let me = segment_row::<1>();
    let idx = me.row() as usize;
    let Some(mut row) = dinp.row_mut(me) else { return };
    let span = row.span();
    let (Some(dout_bt), Some(inp_bt), Some(weight), Some(&mean_bt), Some(&rstd_bt)) =
        (dout.get(span.clone()), inp.get(span), weight.get(..c as usize), mean.get(idx), rstd.get(idx))
    else {
        return;
    };

    // first: two reduce operations
    let mut dnorm_mean = 0.0f32;
    let mut dnorm_norm_mean = 0.0f32;
    for ((&x, &d), &w) in inp_bt.iter().zip(dout_bt).zip(weight) {
        let norm_bti = (x - mean_bt) * rstd_bt;
        let dnorm_i = w * d;
        dnorm_mean += dnorm_i;
        dnorm_norm_mean += dnorm_i * norm_bti;
    }
    dnorm_mean = dnorm_mean.fast_div(c as f32);
    dnorm_norm_mean = dnorm_norm_mean.fast_div(c as f32);

    // now iterate again and accumulate all the gradients
    for i in 0..c as usize {
        let (x, d, w) = (inp_bt[i], dout_bt[i], weight[i]);
        let norm_bti = (x - mean_bt) * rstd_bt;
        let dnorm_i = w * d;
        if let Some(a) = dbias.get(i) {
            a.add(d);
        }
        if let Some(a) = dweight.get(i) {
            a.add(norm_bti * d);
        }
        let mut dval = 0.0f32;
        dval += dnorm_i;
        dval -= dnorm_mean;
        dval -= norm_bti * dnorm_norm_mean;
        dval *= rstd_bt;
        if let Some(o) = row.get_mut(i) {
            *o += dval;
        }
    }
}

/// llm.c's `matmul_backward_bias_kernel1` (dev/cuda/matmul_backward_bias.cu, `floatX` bf16): a
/// block per output channel `o`; its threads sum the channel's column of `dout` (`B * T` rows of
/// `oc`), then a tree reduction over one `f32` a thread in dynamic shared memory (launch with
/// `blockDim.x * 4` bytes), and thread 0 adds the total to `dbias[o]` (the block's element of a
/// `PerBlock` output). Any power-of-two block size, as the source's tree.
#[kernel]
pub fn matmul_backward_bias_kernel1(mut dbias: PerBlock<bf16>, dout: &[bf16], b: u32, t: u32, oc: u32) {
    let Some(shared) = dynamic_shared::<f32>().per_thread::<1>() else { return };
    let o = block_idx_x();
    let block_size = block_dim_x();
    // thread coarsening
    let mut sum = 0.0f32;
    for i in strided_range(thread_idx_x(), b * t, block_size) {
        if let Some(v) = dout.get((i * oc + o) as usize) {
            sum += v.widen();
        }
    }
    shared.set(shared.mine(), 0, sum);
    sync_threads();
    // reductions
    let mut stride = block_size / 2;
    while stride >= 1 {
        sync_threads();
        if let Some(p) = shared.partner(stride) {
            let v = shared.get(shared.mine(), 0) + shared.get(p, 0);
            shared.set(shared.mine(), 0, v);
        }
        stride /= 2;
    }
    // write the final result (at thread 0) to global memory
    if let Some(block) = once_per_block()
        && let Some(d) = dbias.get_mut(block)
    {
        *d = (d.widen() + shared.get(shared.first(), 0)).to_bf16();
    }
}

/// llm.c's `encoder_forward_kernel2` (dev/cuda/encoder_forward.cu, `floatX` bf16): a thread per
/// output element of `B x T x C`, `out[b, t, c] = wte[inp[b, t], c] + wpe[t, c]` (added in
/// `f32`, rounded to bf16). `t` and `c` divide, so they are `NonZeroU32`.
#[kernel]
pub fn encoder_forward_kernel2(mut out: DisjointSlice<bf16>, inp: &[i32], wte: &[bf16], wpe: &[bf16], b: u32, t: NonZeroU32, c: NonZeroU32) {
    let _ = b;
    let idx = unique_index();
    let Some(out_btc) = out.get_mut(idx) else { return };
    let i = idx.get() as u32;
    let bt = i / c;
    let bb = bt / t;
    let tt = bt % t;
    let cc = i % c;
    let Some(&ix) = inp.get((bb * t.get() + tt) as usize) else { return };
    let (Some(&we), Some(&pe)) = (wte.get((ix as u32 * c.get() + cc) as usize), wpe.get((tt * c.get() + cc) as usize)) else {
        return;
    };
    *out_btc = (we.widen() + pe.widen()).to_bf16();
}

/// llm.c's `global_sum_single_block_kernel<float>` (llmc/cuda_utils.cuh): one block of 1024
/// threads (the source's launch, declared with `reqntid`) sums `values[..count]` into
/// `result[0]`: each thread its strided share, then a block reduction (llm.c's `blockReduce`:
/// warp butterflies, one slot a warp, a butterfly over the slots), the total in thread 0.
#[kernel(reqntid(1024))]
pub fn global_sum_single_block_kernel(mut result: PerBlock<f32>, values: &[f32], count: u64) {
    let Some(values) = values.get(..count as usize) else { return };
    let mut thread_sum = 0.0f32;
    for index in strided_range(thread_idx_x() as usize, values.len(), block_dim_x() as usize) {
        thread_sum += values[index];
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    if let Some(total) = reduce.sum(thread_sum)
        && let Some(block) = once_per_block()
        && let Some(r) = result.get_mut(block)
    {
        *r = total;
    }
}
