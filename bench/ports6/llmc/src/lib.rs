//! Five llm.c `dev/cuda` kernels ported to safe Rust from ferrocuda's docs alone (issue 30's
//! sixth held-out port), first try. Each keeps the source's launch shape, types and loops; its
//! CUDA C++ twin, as the public source writes it, is in `bench/ports6/cuda/ports6.cu`
//! (`PORTS6_LLMC`), and `bench/ports6/RESULTS.md` says what each port needed.
//!
//! Built with fast math (`KernelBuilder::fast_math(true)`), as llm.c's dev/cuda Makefile builds
//! with `--use_fast_math`.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
// On the host, `f32`'s own `sqrt`, `exp`, ... win over the device library's math traits.
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]

use core::num::NonZeroU32;

use ferrocuda_device::cache::{self, Load};
use ferrocuda_device::global::{AtomicSlice, BlockRows, DisjointChunks, DisjointMatrix, DisjointSlice, block_row, unique_cell_transposed, unique_index};
use ferrocuda_device::prelude::*;
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::thread::{block_dim_y, block_idx_y, strided_range, thread_idx_y};
use ferrocuda_device::{kernel, sync::sync_threads};

ferrocuda_device::embed_kernels!();

/// llm.c `rope_forward_kernel1` (dev/cuda/rope.cu, branch llama3): rotates each (real,
/// imaginary) pair of `inp` (`B, T, n_head, head_dim`) by `freqs_cis` (`T, head_dim / 2` pairs
/// of cos, sin). One thread per pair, `B T n_head head_dim / 2` threads, 1-D blocks.
///
/// Output pair `idx` is elements `2 idx, 2 idx + 1` (the source's `idxi = 2 idx`, written out
/// from `b, t, h, d`): a `DisjointChunks<f32, 2>` chunk per thread.
#[kernel]
pub fn rope_forward_kernel1(mut out: DisjointChunks<f32, 2>, inp: &[f32], freqs_cis: &[f32], t_len: NonZeroU32, n_head: NonZeroU32, head_dim: u32) {
    let i = unique_index();
    // `idx >= B * T * n_head * head_dim_half`: past the output's pairs.
    let Some(o) = out.get_mut(i) else { return };
    let idx = i.get() as u32;
    let Some(half) = NonZeroU32::new(head_dim / 2) else { return };
    let Some(nh_half) = NonZeroU32::new(n_head.get() * half.get()) else { return };
    let Some(t_nh_half) = NonZeroU32::new(t_len.get() * nh_half.get()) else { return };
    // decode the individual indices
    let b = idx / t_nh_half;
    let t = (idx / nh_half) % t_len;
    let h = (idx / half) % n_head;
    let d = idx % half;
    // the index in the input
    let idx_bt = b * (t_len.get() * n_head.get() * head_dim) + t * (n_head.get() * head_dim);
    let idx_bth = idx_bt + h * head_dim;
    let idxi = (idx_bth + 2 * d) as usize;
    let (Some(&x_real), Some(&x_imag)) = (inp.get(idxi), inp.get(idxi + 1)) else { return };
    let freqs_idx = (t * head_dim + 2 * d) as usize;
    let (Some(&freqs_cos), Some(&freqs_sin)) = (freqs_cis.get(freqs_idx), freqs_cis.get(freqs_idx + 1)) else {
        return;
    };
    *o = [x_real * freqs_cos - x_imag * freqs_sin, x_real * freqs_sin + x_imag * freqs_cos];
}

/// llm.c `repkv_backward_kernel1` (dev/cuda/repkv_backward.cu, branch llama3): the gradient of
/// replicating K and V heads. `dout` is `(B, N, 3, NH, HD)`; `dinp` `(B, N, NH + 2 NH / rep,
/// HD)`: queries copied, each K/V head the sum of its `rep` replicas. One thread per `dout`
/// element; the thread of replica 0 of a K/V head writes the sum.
///
/// `dinp`'s index is computed from the decoded `dout` index and only some threads write, a map
/// no partition expresses (each element written by one thread): `AtomicSlice` stores, as
/// docs/performance.md's "a write at an index no partition expresses" says.
#[kernel]
pub fn repkv_backward_kernel1(dinp: AtomicSlice<f32>, dout: &[f32], n: NonZeroU32, nh: NonZeroU32, replicate_factor: NonZeroU32, hd: NonZeroU32) {
    let dout_idx = index_1d();
    // `idx >= B * N * 3 * NH * HD`
    let Some(first) = dout.get(dout_idx) else { return };
    let mut idx = dout_idx as u32;
    // decode the dout index
    let d = idx % hd;
    idx /= hd;
    let h = idx % nh;
    idx /= nh;
    let c = idx % 3;
    idx /= 3;
    let t = idx % n;
    let b = idx / n;

    let (nh, hd_) = (nh.get(), hd.get());
    let nh_total = nh + 2 * (nh / replicate_factor);
    let row = b * n.get() * nh_total * hd_ + t * nh_total * hd_;
    let (dinp_idx, value) = if c == 0 {
        (row + h * hd_ + d, cache::load(first, Load::Streaming))
    } else {
        if h % replicate_factor != 0 {
            return;
        }
        let mut reduced_sum = 0.0f32;
        for i in 0..replicate_factor.get() {
            if let Some(x) = dout.get(dout_idx + (hd_ * i) as usize) {
                reduced_sum += cache::load(x, Load::Streaming);
            }
        }
        let head = (h / replicate_factor) * hd_ + d;
        if c == 1 { (row + nh * hd_ + head, reduced_sum) } else { (row + (nh * hd_ + (nh / replicate_factor) * hd_) + head, reduced_sum) }
    };
    if let Some(slot) = dinp.get(dinp_idx as usize) {
        slot.store(value);
    }
}

/// llm.c `matmul_forward_kernel1` (dev/cuda/matmul_forward.cu): the naive matmul, `out[bt, oc]
/// = bias[oc] + inp[bt, :] · weight[oc, :]`, one thread per output element on a 2-D grid whose
/// x axis runs over `bt` (rows) and y over `oc` (columns).
///
/// Thread `(x, y)` writes row `x`, column `y`: the transpose of `DisjointMatrix`'s map (row
/// `y`, column `x`), and the source's grid is kept, so the output is an `AtomicSlice` (one
/// relaxed store per thread; the loop over `C` dominates).
#[kernel]
pub fn matmul_forward_kernel1(out: AtomicSlice<f32>, inp: &[f32], weight: &[f32], bias: Option<&[f32]>, bt_len: u32, c: u32, oc_len: u32) {
    let bt = block_idx_x() * block_dim_x() + thread_idx_x();
    let oc = block_idx_y() * block_dim_y() + thread_idx_y();
    if bt < bt_len && oc < oc_len {
        let mut val = match bias {
            Some(bias) => bias.get(oc as usize).copied().unwrap_or(0.0),
            None => 0.0,
        };
        let w0 = (oc * c) as usize;
        let i0 = (bt * c) as usize;
        let (Some(wrow), Some(inp_bt)) = (weight.get(w0..w0 + c as usize), inp.get(i0..i0 + c as usize)) else {
            return;
        };
        for (x, w) in inp_bt.iter().zip(wrow) {
            val += x * w;
        }
        if let Some(slot) = out.get((bt * oc_len + oc) as usize) {
            slot.store(val);
        }
    }
}

/// Session 18 re-port of [`matmul_forward_kernel1()`] with the transposed cell map (issue 30,
/// the sixth port's gap 3): the source's grid (row `bt` from x, column `oc` from y) kept, the
/// output a `DisjointMatrix<f32, true>` of `oc_len` columns written through the thread's
/// `ThreadCell<true>` (`out[bt * OC + oc]`, a plain `st.global`) in place of an `AtomicSlice`
/// store.
#[kernel(cols(out = oc_len))]
pub fn matmul_forward_kernel1_cells(mut out: DisjointMatrix<f32, true>, inp: &[f32], weight: &[f32], bias: Option<&[f32]>, bt_len: u32, c: u32, oc_len: u32) {
    let cell = unique_cell_transposed();
    let (bt, oc) = (cell.row(), cell.col());
    if bt < bt_len && oc < oc_len {
        let mut val = match bias {
            Some(bias) => bias.get(oc as usize).copied().unwrap_or(0.0),
            None => 0.0,
        };
        let w0 = (oc * c) as usize;
        let i0 = (bt * c) as usize;
        let (Some(wrow), Some(inp_bt)) = (weight.get(w0..w0 + c as usize), inp.get(i0..i0 + c as usize)) else {
            return;
        };
        for (x, w) in inp_bt.iter().zip(wrow) {
            val += x * w;
        }
        if let Some(o) = out.get_mut(cell) {
            *o = val;
        }
    }
}

/// Session 18 re-port of [`softmax_forward_kernel2()`] with the per-thread shared region
/// (issue 30, the sixth port's gap 6): `dynamic_shared::<f32>().per_thread::<1>()` checks the
/// launch's `block_size * 4` shared bytes once, and the tree reductions' `shared[tid]`,
/// `shared[tid + stride]` and `shared[0]` are `ThreadSlot` accesses with no bounds test (the
/// first try's `SharedSlice::get`/`set` kept one each, and the kernel its panic path). The row
/// loops are the first try's.
#[kernel(cols(out = c))]
pub fn softmax_forward_kernel2_slots(mut out: DisjointSlice<f32, BlockRows>, inp: &[f32], c: u32) {
    let me = block_row();
    // The same branch in every thread of the block: it returns before any barrier or none does.
    let Some(shared) = dynamic_shared::<f32>().per_thread::<1>() else { return };
    let tid = shared.mine();
    let block_size = block_dim_x();
    let row = me.row() as usize * c as usize;
    let Some(x) = inp.get(row..row + c as usize) else { return };
    // thread coarsening
    let mut maxval = f32::NEG_INFINITY;
    for i in strided_range(tid.get() as usize, x.len(), block_size as usize) {
        maxval = maxval.max(x[i]);
    }
    shared.set(tid, 0, maxval);
    // reductions
    let mut stride = block_size / 2;
    while stride >= 1 {
        sync_threads();
        if let Some(partner) = shared.partner(stride) {
            shared.set(tid, 0, shared.get(tid, 0).max(shared.get(partner, 0)));
        }
        stride /= 2;
    }
    sync_threads();
    let offset = shared.get(shared.first(), 0);
    // exp, written to the output row
    if let Some(r) = out.row_mut(me) {
        r.zip_input(x).for_each(|(x, o)| *o = (x - offset).exp());
    }
    sync_threads();
    // thread coarsening again, for the sum (this thread's own columns of the output)
    let mut sumval = 0.0f32;
    if let Some(r) = out.row_mut(me) {
        for v in r.iter_mut() {
            sumval += *v;
        }
    }
    shared.set(tid, 0, sumval);
    let mut stride = block_size / 2;
    while stride >= 1 {
        sync_threads();
        if let Some(partner) = shared.partner(stride) {
            shared.set(tid, 0, shared.get(tid, 0) + shared.get(partner, 0));
        }
        stride /= 2;
    }
    // broadcast the sum to all threads in the block
    sync_threads();
    let sum = shared.get(shared.first(), 0);
    if let Some(r) = out.row_mut(me) {
        for v in r.iter_mut() {
            *v /= sum;
        }
    }
}

/// Session 18 experiment (issue 30, gap 2, opt-in): [`softmax_forward_kernel2_slots()`] with its
/// four `blockDim.x`-strided row loops unrolled by 4 without a division
/// (`unroll::strided_x4`, `LaneRow::zip_input_for_each_x4`, `LaneRow::for_each_x4`), the
/// shape nvcc gives them; any block size.
#[kernel(cols(out = c))]
pub fn softmax_forward_kernel2_x4(mut out: DisjointSlice<f32, BlockRows>, inp: &[f32], c: u32) {
    let me = block_row();
    let Some(shared) = dynamic_shared::<f32>().per_thread::<1>() else { return };
    let tid = shared.mine();
    let block_size = block_dim_x();
    let row = me.row() as usize * c as usize;
    let Some(x) = inp.get(row..row + c as usize) else { return };
    let mut maxval = f32::NEG_INFINITY;
    ferrocuda_device::unroll::strided_x4(x, tid.get() as usize, block_size as usize, |v| maxval = maxval.max(*v));
    shared.set(tid, 0, maxval);
    let mut stride = block_size / 2;
    while stride >= 1 {
        sync_threads();
        if let Some(partner) = shared.partner(stride) {
            shared.set(tid, 0, shared.get(tid, 0).max(shared.get(partner, 0)));
        }
        stride /= 2;
    }
    sync_threads();
    let offset = shared.get(shared.first(), 0);
    if let Some(r) = out.row_mut(me) {
        r.zip_input_for_each_x4(x, |x, o| *o = (x - offset).exp());
    }
    sync_threads();
    let mut sumval = 0.0f32;
    if let Some(r) = out.row_mut(me) {
        r.for_each_x4(|v| sumval += *v);
    }
    shared.set(tid, 0, sumval);
    let mut stride = block_size / 2;
    while stride >= 1 {
        sync_threads();
        if let Some(partner) = shared.partner(stride) {
            shared.set(tid, 0, shared.get(tid, 0) + shared.get(partner, 0));
        }
        stride /= 2;
    }
    sync_threads();
    let sum = shared.get(shared.first(), 0);
    if let Some(r) = out.row_mut(me) {
        r.for_each_x4(|v| *v /= sum);
    }
}

/// llm.c `softmax_forward_kernel2` (dev/cuda/softmax_forward.cu): softmax over rows of `C`,
/// one block per row, the maximum and the sum each a tree reduction over `blockDim.x` floats of
/// dynamic shared memory (launch with `block_size * 4` shared bytes, a power-of-two block).
/// The output row is written with `exp(x - max)`, read back (each thread its own columns) for
/// the sum, and divided in place.
#[kernel(cols(out = c))]
pub fn softmax_forward_kernel2(mut out: DisjointSlice<f32, BlockRows>, inp: &[f32], c: u32) {
    let shared = dynamic_shared::<f32>();
    let me = block_row();
    let tid = thread_idx_x() as usize;
    let block_size = block_dim_x();
    let row = me.row() as usize * c as usize;
    // The same branch in every thread of the block: it returns before any barrier or none does.
    let Some(x) = inp.get(row..row + c as usize) else { return };
    // thread coarsening
    let mut maxval = f32::NEG_INFINITY;
    for i in strided_range(tid, x.len(), block_size as usize) {
        maxval = maxval.max(x[i]);
    }
    shared.set(tid, maxval);
    // reductions
    let mut stride = block_size / 2;
    while stride >= 1 {
        sync_threads();
        if (tid as u32) < stride {
            shared.set(tid, shared.get(tid).max(shared.get(tid + stride as usize)));
        }
        stride /= 2;
    }
    sync_threads();
    let offset = shared.get(0);
    // exp, written to the output row
    if let Some(r) = out.row_mut(me) {
        r.zip_input(x).for_each(|(x, o)| *o = (x - offset).exp());
    }
    sync_threads();
    // thread coarsening again, for the sum (this thread's own columns of the output)
    let mut sumval = 0.0f32;
    if let Some(r) = out.row_mut(me) {
        for v in r.iter_mut() {
            sumval += *v;
        }
    }
    shared.set(tid, sumval);
    let mut stride = block_size / 2;
    while stride >= 1 {
        sync_threads();
        if (tid as u32) < stride {
            shared.set(tid, shared.get(tid) + shared.get(tid + stride as usize));
        }
        stride /= 2;
    }
    // broadcast the sum to all threads in the block
    sync_threads();
    let sum = shared.get(0);
    if let Some(r) = out.row_mut(me) {
        for v in r.iter_mut() {
            *v /= sum;
        }
    }
}

/// Fix round of [`softmax_forward_kernel2()`] (not the first try): the same body, declared
/// `reqntid(512)` for the bench's block size, as docs/performance.md's trap table teaches for
/// a loop striding by `blockDim.x` (the first try's three row loops stayed rolled, one load in
/// flight per thread, where nvcc unrolls them by 4 with the stride read at run time). The
/// launchers refuse any other block size.
///
/// llm.c `softmax_forward_kernel2` (dev/cuda/softmax_forward.cu): softmax over rows of `C`,
/// one block per row, the maximum and the sum each a tree reduction over `blockDim.x` floats of
/// dynamic shared memory (launch with `block_size * 4` shared bytes, a power-of-two block).
/// The output row is written with `exp(x - max)`, read back (each thread its own columns) for
/// the sum, and divided in place.
#[kernel(cols(out = c), reqntid(512))]
pub fn softmax_forward_kernel2_reqntid512(mut out: DisjointSlice<f32, BlockRows>, inp: &[f32], c: u32) {
    let shared = dynamic_shared::<f32>();
    let me = block_row();
    let tid = thread_idx_x() as usize;
    let block_size = block_dim_x();
    let row = me.row() as usize * c as usize;
    // The same branch in every thread of the block: it returns before any barrier or none does.
    let Some(x) = inp.get(row..row + c as usize) else { return };
    // thread coarsening
    let mut maxval = f32::NEG_INFINITY;
    for i in strided_range(tid, x.len(), block_size as usize) {
        maxval = maxval.max(x[i]);
    }
    shared.set(tid, maxval);
    // reductions
    let mut stride = block_size / 2;
    while stride >= 1 {
        sync_threads();
        if (tid as u32) < stride {
            shared.set(tid, shared.get(tid).max(shared.get(tid + stride as usize)));
        }
        stride /= 2;
    }
    sync_threads();
    let offset = shared.get(0);
    // exp, written to the output row
    if let Some(r) = out.row_mut(me) {
        r.zip_input(x).for_each(|(x, o)| *o = (x - offset).exp());
    }
    sync_threads();
    // thread coarsening again, for the sum (this thread's own columns of the output)
    let mut sumval = 0.0f32;
    if let Some(r) = out.row_mut(me) {
        for v in r.iter_mut() {
            sumval += *v;
        }
    }
    shared.set(tid, sumval);
    let mut stride = block_size / 2;
    while stride >= 1 {
        sync_threads();
        if (tid as u32) < stride {
            shared.set(tid, shared.get(tid) + shared.get(tid + stride as usize));
        }
        stride /= 2;
    }
    // broadcast the sum to all threads in the block
    sync_threads();
    let sum = shared.get(0);
    if let Some(r) = out.row_mut(me) {
        for v in r.iter_mut() {
            *v /= sum;
        }
    }
}

/// llm.c `attention_query_key_kernel1` (dev/cuda/attention_forward.cu): `preatt[b, h, t, t2] =
/// q[b, t, h] · k[b, t2, h] / sqrt(hs)` for `t2 <= t`, `-inf` above the diagonal; `inp` is the
/// `(B, T, 3C)` QKV tensor. One thread per output element, `B NH T T` threads.
///
/// The scale is the source's double arithmetic (`val *= 1.0 / sqrtf(hs)`: a double division
/// and a double multiply, which fast math leaves alone).
#[kernel]
pub fn attention_query_key_kernel1(mut preatt: DisjointSlice<f32>, inp: &[f32], t_len: NonZeroU32, c: u32, nh: NonZeroU32) {
    let i = unique_index();
    // `idx < total_threads`
    let Some(o) = preatt.get_mut(i) else { return };
    let idx = i.get() as u32;
    let t2 = idx % t_len;
    let t = (idx / t_len) % t_len;
    if t2 > t {
        // autoregressive mask
        *o = f32::NEG_INFINITY;
        return;
    }
    let Some(tt) = NonZeroU32::new(t_len.get() * t_len.get()) else { return };
    let Some(nh_tt) = NonZeroU32::new(nh.get() * tt.get()) else { return };
    let h = (idx / tt) % nh;
    let b = idx / nh_tt;

    let c3 = c * 3;
    let hs = c / nh; // head size
    let q0 = (b * t_len.get() * c3 + t * c3 + h * hs) as usize;
    let k0 = (b * t_len.get() * c3 + t2 * c3 + h * hs + c) as usize; // +C because it's key
    let (Some(query_t), Some(key_t2)) = (inp.get(q0..q0 + hs as usize), inp.get(k0..k0 + hs as usize)) else {
        return;
    };
    // (query_t) dot (key_t2)
    let mut val = 0.0f32;
    for (q, k) in query_t.iter().zip(key_t2) {
        val += q * k;
    }
    let scale = 1.0f64 / (hs as f32).sqrt() as f64;
    *o = (val as f64 * scale) as f32;
}
