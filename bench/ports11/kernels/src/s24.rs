//! Session 24's gaps round on this port (issue 30; bench/results/s24-gaps/): the first tries and
//! fixes above are left as they were; these are copies that use what the round added.
//!
//! - L1 with `#[kernel(ftz)]` (nvcc's `-ftz=true`, which llm.c's `--use_fast_math` implies):
//!   the first try's body and the fix round's, unchanged but for the attribute. With `.ftz`
//!   on the variance's subtraction, ptxas fuses the first try's `fast_div` (`MUFU.RCP` +
//!   `FMUL.FTZ`) into it as it does nvcc's: `FFMA.FTZ Σx², rcp(C), -m²` (gap 7).
//! - L5 with `DisjointSlice<f32, PermutedRows>` (gap 2): thread `(b, t, h)` owns row
//!   `(b, h, t)`, written with plain stores and read back with plain loads, as the source's three
//!   passes do.

use ferrocuda_device::cache::{self, Load, Store};
use ferrocuda_device::global::{BlockRows, DisjointSlice, PerBlock, PermutedRows, block_row, once_per_block, unique_index};
use ferrocuda_device::prelude::*;
use ferrocuda_device::{shared_array, unroll, warp};

/// L1's first try (`layernorm_forward_kernel5`) under `#[kernel(ftz)]`: the same body.
#[kernel(cols(out = c), ftz)]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_kernel5_ftz(
    mut out: DisjointSlice<f32, BlockRows>,
    mut mean: PerBlock<f32>,
    mut rstd: PerBlock<f32>,
    inp: &[f32],
    weight: &[f32],
    bias: &[f32],
    n: u32,
    c: u32,
) {
    let _ = n;
    let shared_sum = shared_array![f32; 32];
    let shared_sum2 = shared_array![f32; 32];
    let tid = thread_idx_x();
    let num_warps = block_dim_x() / 32;
    let warp_id = tid / 32;
    let lane_id = tid % 32;
    let me = block_row();
    let Some(row) = out.row_mut(me) else { return };
    let start = me.row() as usize * c as usize;
    let (Some(x), Some(weight), Some(bias)) = (inp.get(start..start + c as usize), weight.get(..c as usize), bias.get(..c as usize)) else {
        return;
    };
    let mut thread_sum = 0.0f32;
    let mut thread_sum2 = 0.0f32;
    unroll::strided_x4(x, tid as usize, block_dim_x() as usize, |&xi| {
        thread_sum += xi;
        thread_sum2 += xi * xi;
    });
    let warp_sum = warp::reduce_sum(thread_sum);
    let warp_sum2 = warp::reduce_sum(thread_sum2);
    if lane_id == 0 {
        shared_sum.set(warp_id as usize, warp_sum);
        shared_sum2.set(warp_id as usize, warp_sum2);
    }
    sync_threads();
    let warp_sum = if lane_id < num_warps { shared_sum.get(lane_id as usize) } else { 0.0 };
    let warp_sum2 = if lane_id < num_warps { shared_sum2.get(lane_id as usize) } else { 0.0 };
    let block_sum = warp::reduce_sum(warp_sum).fast_div(c as f32);
    let block_sum2 = warp::reduce_sum(warp_sum2).fast_div(c as f32);
    let m = block_sum;
    let var = block_sum2 - m * m;
    let s = (var + 1e-5).fast_rsqrt();
    if let Some(b) = once_per_block() {
        if let Some(v) = mean.get_mut(b) {
            cache::store(v, m, Store::Streaming);
        }
        if let Some(v) = rstd.get_mut(b) {
            cache::store(v, s, Store::Streaming);
        }
    }
    row.zip_inputs([x, weight, bias]).for_each(|([x, w, b], o)| {
        let n = s * (cache::load(x, Load::Streaming) - m);
        cache::store(o, n * *w + *b, Store::Streaming);
    });
}

/// L1's fix round (`layernorm_forward_kernel5_fix`) under `#[kernel(ftz)]`, but with the
/// source's `/` (`fast_div`) and `-` where the fix wrote `fast_recip` and `mul_add` by hand:
/// what a port gets without knowing ptxas's fusion rule.
#[kernel(cols(out = c), ftz)]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_kernel5_fix_ftz(
    mut out: DisjointSlice<f32, BlockRows>,
    mut mean: PerBlock<f32>,
    mut rstd: PerBlock<f32>,
    inp: &[f32],
    weight: &[f32],
    bias: &[f32],
    n: u32,
    c: u32,
) {
    let _ = n;
    let shared_sum = shared_array![f32; 32];
    let shared_sum2 = shared_array![f32; 32];
    let tid = thread_idx_x();
    let num_warps = block_dim_x() / 32;
    let warp_id = tid / 32;
    let lane_id = tid % 32;
    let me = block_row();
    let Some(row) = out.row_mut(me) else { return };
    let start = me.row() as usize * c as usize;
    let (Some(x), Some(weight), Some(bias)) = (inp.get(start..start + c as usize), weight.get(..c as usize), bias.get(..c as usize)) else {
        return;
    };
    let mut thread_sum = 0.0f32;
    let mut thread_sum2 = 0.0f32;
    let mut i = tid;
    while (i as usize) < x.len() {
        let xi = x[i as usize];
        thread_sum += xi;
        thread_sum2 += xi * xi;
        i += block_dim_x();
    }
    let warp_sum = warp::reduce_sum(thread_sum);
    let warp_sum2 = warp::reduce_sum(thread_sum2);
    if lane_id == 0 {
        shared_sum.set(warp_id as usize, warp_sum);
        shared_sum2.set(warp_id as usize, warp_sum2);
    }
    sync_threads();
    let warp_sum = if lane_id < num_warps { shared_sum.get(lane_id as usize) } else { 0.0 };
    let warp_sum2 = if lane_id < num_warps { shared_sum2.get(lane_id as usize) } else { 0.0 };
    let m = warp::reduce_sum(warp_sum).fast_div(c as f32);
    let var = warp::reduce_sum(warp_sum2).fast_div(c as f32) - m * m;
    let s = (var + 1e-5).fast_rsqrt();
    if let Some(b) = once_per_block() {
        if let Some(v) = mean.get_mut(b) {
            cache::store(v, m, Store::Streaming);
        }
        if let Some(v) = rstd.get_mut(b) {
            cache::store(v, s, Store::Streaming);
        }
    }
    row.zip_inputs([x, weight, bias]).for_each(|([x, w, b], o)| {
        let n = s * (cache::load(x, Load::Streaming) - m);
        cache::store(o, n * *w + *b, Store::Streaming);
    });
}

/// L5 (`attention_softmax_kernel1`) with a `PermutedRows` output: thread `idx = (b T + t) NH +
/// h` owns row `(b NH + h) T + t` of `att` (`cols(att = (t, t, nh))`), and runs the source's
/// three passes as written: `exp` stored in the second, read back and scaled in the third
/// (plain loads and stores of its own row), zeros past `t`. `b` is implied by the buffer's
/// length (rows past its end give `None`, the source's `idx < total_threads`).
#[kernel(cols(att = (t, t, nh)))]
pub fn attention_softmax_kernel1_perm(mut att: DisjointSlice<f32, PermutedRows>, preatt: &[f32], t: u32, nh: u32) {
    let _ = nh; // the output's radix (`cols(..)`), checked at launch
    // `at.row = (b NH + h) T + tt`, `at.x = tt` (the query position).
    let Some((at, att_row)) = att.row_mut(unique_index()) else { return };
    let tt = at.x;
    let base = at.row * t as usize;
    let Some(pre) = preatt.get(base..base + tt as usize + 1) else { return };
    let mut maxval = -f32::MAX;
    for &v in pre {
        if v > maxval {
            maxval = v;
        }
    }
    let mut expsum = 0.0f32;
    for (&v, a) in pre.iter().zip(att_row.iter_mut()) {
        let expv = (v - maxval).fast_exp();
        expsum += expv;
        *a = expv;
    }
    let expsum_inv = if expsum == 0.0 { 0.0 } else { expsum.fast_recip() };
    for (t2, a) in att_row.iter_mut().enumerate() {
        if t2 <= tt as usize {
            *a *= expsum_inv;
        } else {
            *a = 0.0;
        }
    }
}

/// The `ftz` probe: `out[i] = x[i] * y[i]` under `#[kernel(ftz)]` (a GPU flushes a subnormal
/// operand or product to zero of the same sign).
#[kernel(ftz)]
pub fn s24_mul_ftz(mut out: DisjointSlice<f32>, x: &[f32], y: &[f32]) {
    let i = unique_index();
    if let (Some(o), Some(&a), Some(&b)) = (out.get_mut(i), x.get(i.get()), y.get(i.get())) {
        *o = a * b;
    }
}

/// [`s24_mul_ftz()`] without `ftz`: IEEE subnormals.
#[kernel]
pub fn s24_mul_ieee(mut out: DisjointSlice<f32>, x: &[f32], y: &[f32]) {
    let i = unique_index();
    if let (Some(o), Some(&a), Some(&b)) = (out.get_mut(i), x.get(i.get()), y.get(i.get())) {
        *o = a * b;
    }
}

// ---- Item 4 (RuntimeBlockReduce's trailing barrier at 1024 threads): does the barrier cost? ----
// A block per row of `cols` floats, strided sums with the block size read at run time, then the
// block's sum in thread 0, written to `sums[block]` (bench/results/s23-gaps' R1024 case, against
// `cub::BlockReduce<float, 1024>`). Three forms of the reduction, so that one binary times what
// the trailing barrier costs: the library's `RuntimeBlockReduce::sum` (its trailing barrier lets
// the scratch be reused), and the same two-level fold written out with no barrier after warp 0's
// reads (sound here: the slots are this kernel's own site, used once, outside any loop) and with
// one (`sync_threads()` after warp 0's reads, as the library's).

/// The row's strided sum, block size at run time (the s23 kernels' loop).
#[inline(always)]
fn row_partial(x: &[f32], cols: u32) -> Option<f32> {
    let start = block_idx_x() as usize * cols as usize;
    let row = x.get(start..start + cols as usize)?;
    let mut s = 0.0f32;
    for i in ferrocuda_device::thread::strided_range(thread_idx_x() as usize, row.len(), block_dim_x() as usize) {
        s += row[i];
    }
    Some(s)
}

/// The library's `RuntimeBlockReduce::sum` (main's form; s23's `s23_row_sum_runtime`).
#[kernel]
pub fn s24_row_sum_library(mut sums: PerBlock<f32>, x: &[f32], cols: u32) {
    let Some(s) = row_partial(x, cols) else { return };
    let reduce = ferrocuda_device::block::RuntimeBlockReduce::new(ferrocuda_device::block_scratch!(f32));
    if let Some(total) = reduce.sum(s)
        && let Some(block) = once_per_block()
        && let Some(o) = sums.get_mut(block)
    {
        *o = total;
    }
}

/// The two-level fold written out: warp butterflies, lane 0 stores its warp's sum, a barrier,
/// warp 0 folds the slots; `TRAILING`: a barrier after warp 0's reads (the library's).
#[inline(always)]
fn written_out_sum<const TRAILING: bool>(s: f32) -> f32 {
    let slots = shared_array![f32; 32];
    let tid = thread_idx_x();
    let (lane, warp_id) = (tid % 32, tid / 32);
    let warps = block_dim_x().div_ceil(32);
    let partial = warp::reduce_sum(s);
    if lane == 0 {
        slots.set(warp_id as usize, partial);
    }
    sync_threads();
    let mut total = partial;
    if warp_id == 0 {
        total = warp::reduce_sum(if lane < warps { slots.get(lane as usize) } else { 0.0 });
    }
    if TRAILING {
        sync_threads();
    }
    total
}

/// `written_out_sum` without the trailing barrier (CUB's and llm.c's one barrier).
#[kernel]
pub fn s24_row_sum_one_barrier(mut sums: PerBlock<f32>, x: &[f32], cols: u32) {
    let Some(s) = row_partial(x, cols) else { return };
    let total = written_out_sum::<false>(s);
    if let Some(block) = once_per_block()
        && let Some(o) = sums.get_mut(block)
    {
        *o = total;
    }
}

/// `written_out_sum` with the trailing barrier.
#[kernel]
pub fn s24_row_sum_two_barriers(mut sums: PerBlock<f32>, x: &[f32], cols: u32) {
    let Some(s) = row_partial(x, cols) else { return };
    let total = written_out_sum::<true>(s);
    if let Some(block) = once_per_block()
        && let Some(o) = sums.get_mut(block)
    {
        *o = total;
    }
}

/// `written_out_sum` with two barriers, with the block's 3-D rank and size
/// (`rank_in_block()`, `block_size()`, what the library reads) instead of `threadIdx.x` and
/// `blockDim.x`: what the any-shape bookkeeping costs (the mid-session call: the library's
/// `sum` 0.767 of CUB, the written-out fold with the same two barriers 0.888).
#[kernel]
pub fn s24_row_sum_two_barriers_rank3d(mut sums: PerBlock<f32>, x: &[f32], cols: u32) {
    let Some(s) = row_partial(x, cols) else { return };
    let slots = shared_array![f32; 32];
    let tid = ferrocuda_device::thread::rank_in_block();
    // `% 32`: a block has at most 1024 threads, which the compiler does not know of a 3-D rank
    // (the slot index would keep a bounds check and the kernel a panic path).
    let (lane, warp_id) = (tid % 32, (tid / 32) % 32);
    let warps = ferrocuda_device::thread::block_size().div_ceil(32);
    let partial = warp::reduce_sum(s);
    if lane == 0 {
        slots.set(warp_id as usize, partial);
    }
    sync_threads();
    let mut total = partial;
    if warp_id == 0 {
        total = warp::reduce_sum(if lane < warps { slots.get(lane as usize) } else { 0.0 });
    }
    sync_threads();
    if let Some(block) = once_per_block()
        && let Some(o) = sums.get_mut(block)
    {
        *o = total;
    }
}

/// `written_out_sum` with two barriers, warp 0 folding the slots as the library does: `shfl.down`
/// steps that skip the lanes past the warp count (a lane test and a select beside each shuffle)
/// instead of the butterfly.
#[kernel]
pub fn s24_row_sum_two_barriers_tested_fold(mut sums: PerBlock<f32>, x: &[f32], cols: u32) {
    let Some(s) = row_partial(x, cols) else { return };
    let slots = shared_array![f32; 32];
    let tid = thread_idx_x();
    let (lane, warp_id) = (tid % 32, tid / 32);
    let warps = block_dim_x().div_ceil(32);
    let partial = warp::reduce_sum(s);
    if lane == 0 {
        slots.set(warp_id as usize, partial);
    }
    sync_threads();
    let mut total = partial;
    if warp_id == 0 {
        let mut v = if lane < warps { slots.get(lane as usize) } else { 0.0 };
        let mut offset = 16;
        while offset > 0 {
            let other = warp::shuffle_down(v, offset);
            if lane + offset < warps {
                v += other;
            }
            offset /= 2;
        }
        total = v;
    }
    sync_threads();
    if let Some(block) = once_per_block()
        && let Some(o) = sums.get_mut(block)
    {
        *o = total;
    }
}

/// `row_sum_1024` of bench/results/s23-gaps/nvcc-s23.cu (`cub::BlockReduce<float, 1024>`,
/// `__launch_bounds__(1024)`): `(float* sums, const float* x, int cols)`.
///
/// # Safety
/// `x` holds `gridDim.x * cols` floats, `sums` `gridDim.x`; blocks of 1024 threads.
#[kernel(name = "row_sum_1024")]
#[allow(unused_variables)]
pub unsafe fn twin_row_sum_1024(sums: *mut f32, x: *const f32, cols: i32) {}

// ---- Item 5 (V2 under CUDA graphs, 0.91x: the kernel about 0.1 us slower) ----

/// V2 (`advance_step_kernel`) with the one gather (`block_tables[seq][pos / block_size]`)
/// read by a weak `ld.global.L1::evict_last` (`LDG.E.EL`) where `&[i32]` indexing gives the
/// read-only path's `ld.global.nc` (`LDG.E.CONSTANT`) and the twin's SASS a plain `LDG.E`: the
/// kernel is two dependent global loads long, the gather the second (bench/results/s24-gaps/).
#[kernel(reqntid(256), same_len(input_positions, seq_lens, slot_mapping))]
pub fn advance_step_kernel_weak_gather(
    block_size: core::num::NonZeroU32,
    sampled_token_ids: &[i64],
    mut input_positions: DisjointSlice<i64>,
    mut seq_lens: DisjointSlice<i32>,
    mut slot_mapping: DisjointSlice<i32>,
    block_tables: &[i32],
    block_tables_stride: u32,
) {
    let _ = sampled_token_ids;
    let i = unique_index();
    let (Some(len), Some(pos), Some(slot)) = (seq_lens.get_mut(i), input_positions.get_mut(i), slot_mapping.get_mut(i)) else {
        return;
    };
    let seq_len = *len;
    let next_seq_len = seq_len + 1;
    let next_input_pos = next_seq_len - 1;
    *len = next_seq_len;
    *pos = next_input_pos as i64;
    let p = next_input_pos as u32;
    let block_index = p / block_size;
    let block_offset = p % block_size;
    let Some(block) = block_tables.get(block_tables_stride as usize * i.get() + block_index as usize) else { return };
    *slot = cache::load(block, Load::EvictLast) * block_size.get() as i32 + block_offset as i32;
}

/// V2 without `reqntid(256)` (its cubin then has no `EIATTR_REQNTID`, as the twin's has none):
/// otherwise the first try.
#[kernel(same_len(input_positions, seq_lens, slot_mapping))]
pub fn advance_step_kernel_no_reqntid(
    block_size: core::num::NonZeroU32,
    sampled_token_ids: &[i64],
    mut input_positions: DisjointSlice<i64>,
    mut seq_lens: DisjointSlice<i32>,
    mut slot_mapping: DisjointSlice<i32>,
    block_tables: &[i32],
    block_tables_stride: u32,
) {
    let _ = sampled_token_ids;
    let i = unique_index();
    let (Some(len), Some(pos), Some(slot)) = (seq_lens.get_mut(i), input_positions.get_mut(i), slot_mapping.get_mut(i)) else {
        return;
    };
    let seq_len = *len;
    let next_seq_len = seq_len + 1;
    let next_input_pos = next_seq_len - 1;
    *len = next_seq_len;
    *pos = next_input_pos as i64;
    let p = next_input_pos as u32;
    let block_index = p / block_size;
    let block_offset = p % block_size;
    let Some(&block) = block_tables.get(block_tables_stride as usize * i.get() + block_index as usize) else { return };
    *slot = block * block_size.get() as i32 + block_offset as i32;
}

/// V2 without the unused `sampled_token_ids` slice (a 76-byte parameter block instead of 92;
/// the twin's is 56): otherwise the first try.
#[kernel(reqntid(256), same_len(input_positions, seq_lens, slot_mapping))]
pub fn advance_step_kernel_fewer_params(
    block_size: core::num::NonZeroU32,
    mut input_positions: DisjointSlice<i64>,
    mut seq_lens: DisjointSlice<i32>,
    mut slot_mapping: DisjointSlice<i32>,
    block_tables: &[i32],
    block_tables_stride: u32,
) {
    let i = unique_index();
    let (Some(len), Some(pos), Some(slot)) = (seq_lens.get_mut(i), input_positions.get_mut(i), slot_mapping.get_mut(i)) else {
        return;
    };
    let seq_len = *len;
    let next_seq_len = seq_len + 1;
    let next_input_pos = next_seq_len - 1;
    *len = next_seq_len;
    *pos = next_input_pos as i64;
    let p = next_input_pos as u32;
    let block_index = p / block_size;
    let block_offset = p % block_size;
    let Some(&block) = block_tables.get(block_tables_stride as usize * i.get() + block_index as usize) else { return };
    *slot = block * block_size.get() as i32 + block_offset as i32;
}
