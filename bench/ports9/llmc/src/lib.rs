//! Issue 30's ninth held-out port, llm.c part: five kernels of karpathy/llm.c (commit
//! f1e2ace6) written in safe Rust from ferrocuda's docs alone, each beside its CUDA C++ twin
//! in `bench/ports9/cuda/ports9.cu`. The first try of each is kept as written; see
//! bench/ports9/RESULTS.md for what the docs did and did not say.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]

use core::num::NonZeroU32;

use ferrocuda_device::global::{AtomicSlice, BlockRows, DisjointSlice, PerBlockTile, PerWarpRow, block_row, block_tile, unique_index, warp_row};
use ferrocuda_device::half::{F32ToHalf, HalfFloat, bf16};
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, block_idx_x, index_1d, strided_range, thread_idx_x};
use ferrocuda_device::{kernel, warp};

ferrocuda_device::embed_kernels!();

/// llmc/attention.cuh `unpermute_kernel_backward` (bf16): `dinp[b][nh][n][d] =
/// dout[b][n][nh][d]`, one element of `dinp` (length `B NH N d`) per thread: a gather.
#[kernel]
pub fn unpermute_kernel_backward(mut dinp: DisjointSlice<bf16>, dout: &[bf16], b: u32, n: u32, nh: u32, d: u32) {
    let i = unique_index();
    // The divisors once, as `NonZeroU32` (docs/performance.md: no check per division).
    let (Some(nhnd), Some(nd), Some(dd)) = (NonZeroU32::new(nh * n * d), NonZeroU32::new(n * d), NonZeroU32::new(d)) else {
        return;
    };
    // The source's `idx >= B * NH * N * d` guard: `dinp` holds exactly that many.
    let _ = b;
    let Some(o) = dinp.get_mut(i) else { return };
    let idx = i.get() as u32;
    let bb = idx / nhnd;
    let rest = idx % nhnd;
    let nh_ = rest / nd;
    let rest = rest % nd;
    let n_ = rest / dd;
    let d_ = rest % dd;
    let other = bb * nhnd.get() + n_ * nh * d + nh_ * d + d_;
    if let Some(&v) = dout.get(other as usize) {
        *o = v;
    }
}

/// llmc/attention.cuh `permute_kernel_backward` (bf16): `dinp[b][n][k][nh][d] =
/// (dq, dk, dv)[k][b][nh][n][d]`. The source's thread writes three elements of `dinp` at
/// computed indices, which no output partition gives one thread; the port gathers instead:
/// one element of `dinp` (length `B N 3 NH d`) per thread, three times the source's threads.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn permute_kernel_backward(mut dinp: DisjointSlice<bf16>, dq: &[bf16], dk: &[bf16], dv: &[bf16], b: u32, n: u32, nh: u32, d: u32) {
    let i = unique_index();
    let (Some(per_bn), Some(nhd), Some(dd), Some(nn)) = (NonZeroU32::new(3 * nh * d), NonZeroU32::new(nh * d), NonZeroU32::new(d), NonZeroU32::new(n)) else {
        return;
    };
    let _ = b;
    let Some(o) = dinp.get_mut(i) else { return };
    let idx = i.get() as u32;
    let bn = idx / per_bn;
    let rest = idx % per_bn;
    let k = rest / nhd;
    let rest = rest % nhd;
    let nh_ = rest / dd;
    let d_ = rest % dd;
    let bb = bn / nn;
    let n_ = bn % nn;
    let src = bb * nh * n * d + nh_ * n * d + n_ * d + d_;
    let from = match k {
        0 => dq,
        1 => dk,
        _ => dv,
    };
    if let Some(&v) = from.get(src as usize) {
        *o = v;
    }
}

/// dev/cuda/matmul_backward_bias.cu `matmul_backward_bias_kernel4` (floatX = bf16):
/// `dbias[oc] += sum over rows of dout[row][oc]`, a block per 32 columns (grid `OC / 32`),
/// its warps splitting the rows, folded by warp 0 through shared memory (`blockDim.x` floats
/// of dynamic shared memory). `dbias` is a row of 32 per block: thread `t < 32` (warp 0's
/// lane) owns column `t`.
#[kernel(cols(dbias = 32))]
pub fn matmul_backward_bias_kernel4(mut dbias: DisjointSlice<bf16, BlockRows>, dout: &[bf16], b: u32, t: u32, oc: u32) {
    let smem = dynamic_shared::<f32>();
    let tid = thread_idx_x();
    let warp_id = tid / 32;
    let lane_id = tid % 32;
    let tl = block_idx_x() * 32;
    let vstep = block_dim_x() / 32;

    let mut dout_sum = 0.0f32;
    if let Some(all) = dout.get(..(b * t) as usize * oc as usize) {
        let len = all.len() as u32;
        for i in strided_range(warp_id * oc + tl + lane_id, len, vstep * oc) {
            dout_sum += all[i as usize].widen();
        }
    }
    smem.set((lane_id + warp_id * 32) as usize, dout_sum);
    sync_threads();

    if warp_id == 0 {
        let mut sum = 0.0f32;
        for j in 0..vstep {
            sum += smem.get((lane_id + j * 32) as usize);
        }
        if let Some(mut row) = dbias.row_mut(block_row())
            && let Some(o) = row.get_mut(0)
        {
            *o = (o.widen() + sum).to_bf16();
        }
    }
}

/// dev/cuda/encoder_backward.cu `encoder_backward_kernel2` (f32): thread `c` owns column `c`
/// of `dwte` (`[V][C]`) and `dwpe` (`[T][C]`) and adds every token's gradient into the row
/// its token id (and position) names. The rows come from data, which no partition proves
/// disjoint between threads; the column is this thread's alone, so the updates go through
/// `AtomicSlice` (`red.add`, in program order per address: the source's sums, bit for bit).
#[kernel]
pub fn encoder_backward_kernel2(dwte: AtomicSlice<f32>, dwpe: AtomicSlice<f32>, dout: &[f32], inp: &[i32], b: u32, t: u32, c: u32) {
    let col = index_1d();
    let Some(tt) = NonZeroU32::new(t) else { return };
    if col >= c as usize {
        return;
    }
    let bt = b * t;
    for i in 0..bt {
        let pos = i % tt;
        let (Some(&ix), Some(&g)) = (inp.get(i as usize), dout.get(i as usize * c as usize + col)) else { return };
        if let Some(w) = dwte.get(ix as usize * c as usize + col) {
            w.add(g);
        }
        if let Some(p) = dwpe.get(pos as usize * c as usize + col) {
            p.add(g);
        }
    }
}

// ---- The fix round (after the first try's SASS, before the one GPU call) --------------------

/// [`permute_kernel_backward()`]'s fix round, written after the GPU call (so not measured on a
/// GPU): the source's work per thread (three loads, three stores, one set of index divisions)
/// with `dinp` seen as a matrix of `B N 3` rows and `NH d` columns (`nhd`), cut into tiles of
/// 3 rows (one `(b, n)`) and 256 columns: block `(x, y)` owns tile `(x, y)`, thread `t` its
/// column `256 x + t` in the tile's three rows, which are the source's three stores. The
/// first try's gather ran 3x the threads, each with four run-time divisions: 0.48x nvcc on
/// an H200. Launch: grid `(ceil(NH d / 256), B N)`, blocks of exactly 256 threads.
#[kernel(cols(dinp = nhd))]
#[allow(clippy::too_many_arguments)]
pub fn permute_kernel_backward_fixed(
    mut dinp: PerBlockTile<bf16, 3, 256, 256, 1>,
    dq: &[bf16],
    dk: &[bf16],
    dv: &[bf16],
    b: u32,
    n: u32,
    nh: u32,
    d: u32,
    nhd: u32,
) {
    let (Some(dd), Some(nn)) = (NonZeroU32::new(d), NonZeroU32::new(n)) else { return };
    let _ = (b, nhd);
    let Some(mut tile) = dinp.tile_clipped_mut(block_tile()) else { return };
    let (bn, c) = (tile.origin().0 / 3, tile.col(0));
    let (nh_, d_) = (c / dd, c % dd);
    let (bb, n_) = (bn / nn, bn % nn);
    let src = (bb * nh * n * d + nh_ * n * d + n_ * d + d_) as usize;
    for (k, from) in [dq, dk, dv].into_iter().enumerate() {
        if let (Some(o), Some(&v)) = (tile.get_mut(k as u32, 0), from.get(src)) {
            *o = v;
        }
    }
}

/// The L3 first try's (`first-try/layernorm_backward_kernel2.rs`, not built) fix round: the same computation with its panic paths
/// removed (the first try's SASS: 6 `CALL`s to the panic handler, 1148 instructions against
/// nvcc's 365) and without the 16-byte spill that `launch_bounds(256)` brought (ptxas aims at
/// full occupancy under a bare `.maxntid 256`: 32 registers). Shared regions of exactly `C`
/// floats (`region`, so `i < C` proves every index), the shared and global indices tested
/// where the compiler cannot see them below `C`, `AtomicSlice::get` in place of `add`'s
/// panicking index, and `launch_bounds(256, 6)` (42 registers allowed).
#[kernel(cols(dinp = c), launch_bounds(256, 6))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_kernel2_fixed(
    mut dinp: PerWarpRow<bf16>,
    dout: &[bf16],
    inp: &[bf16],
    weight: &[bf16],
    mean: &[bf16],
    rstd: &[bf16],
    b: u32,
    t: u32,
    c: u32,
    dweight_tmp: AtomicSlice<f32>,
    dbias_tmp: AtomicSlice<f32>,
) {
    let shared = dynamic_shared::<f32>();
    let cols = c as usize;
    let (Some(dbias_shared), Some(dweight_shared)) = (shared.region(0, cols), shared.region(1, cols)) else { return };
    let (tid, threads) = (thread_idx_x(), block_dim_x());
    for i in strided_range(tid as usize, cols, threads as usize) {
        dbias_shared.set(i, 0.0);
        dweight_shared.set(i, 0.0);
    }
    sync_threads();

    let me = warp_row();
    let idx = me.row();
    let lane = warp::lane_id();
    if idx < b * t
        && let Some(row) = dinp.row_mut(me)
    {
        let start = idx as usize * cols;
        if let (Some(dout_bt), Some(inp_bt), Some(weight), Some(mean_bt), Some(rstd_bt)) =
            (dout.get(start..start + cols), inp.get(start..start + cols), weight.get(..cols), mean.get(idx as usize), rstd.get(idx as usize))
        {
            let (mean_bt, rstd_bt) = (mean_bt.widen(), rstd_bt.widen());
            let mut dnorm_mean = 0.0f32;
            let mut dnorm_norm_mean = 0.0f32;
            for i in strided_range(lane as usize, cols, 32) {
                let norm_bti = (inp_bt[i].widen() - mean_bt) * rstd_bt;
                let dnorm_i = weight[i].widen() * dout_bt[i].widen();
                dnorm_mean += dnorm_i;
                dnorm_norm_mean += dnorm_i * norm_bti;
            }
            let dnorm_mean = warp::reduce_sum(dnorm_mean) / c as f32;
            let dnorm_norm_mean = warp::reduce_sum(dnorm_norm_mean) / c as f32;

            for (i, o) in row.iter_cols_mut() {
                if i >= cols {
                    break;
                }
                let g = dout_bt[i].widen();
                let norm_bti = (inp_bt[i].widen() - mean_bt) * rstd_bt;
                let dnorm_i = weight[i].widen() * g;
                dbias_shared.fetch_add(i, g);
                dweight_shared.fetch_add(i, norm_bti * g);
                let mut dval = 0.0f32;
                dval += dnorm_i;
                dval -= dnorm_mean;
                dval -= norm_bti * dnorm_norm_mean;
                dval *= rstd_bt;
                *o = (o.widen() + dval).to_bf16();
            }
        }
    }
    sync_threads();

    for i in strided_range(tid as usize, cols, threads as usize) {
        if let (Some(db), Some(dw)) = (dbias_tmp.get(i), dweight_tmp.get(i)) {
            db.add(dbias_shared.get(i));
            dw.add(dweight_shared.get(i));
        }
    }
}

/// [`layernorm_backward_kernel2_fixed()`] under `launch_bounds(256, 8)`, session 21's gaps
/// round: 8 blocks of 256 a SM allow 32 registers, the count nvcc's twin uses (it has no
/// bound). `(256, 6)` gave ptxas 42 and it took 38: 6 blocks a SM where nvcc has 8, 4-8%
/// slower on a kernel that waits on shared-memory atomics; the first try's bare
/// `launch_bounds(256)` let ptxas cap it at 32 with its panic paths, which spilled.
#[kernel(cols(dinp = c), launch_bounds(256, 8))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_kernel2_fixed8(
    mut dinp: PerWarpRow<bf16>,
    dout: &[bf16],
    inp: &[bf16],
    weight: &[bf16],
    mean: &[bf16],
    rstd: &[bf16],
    b: u32,
    t: u32,
    c: u32,
    dweight_tmp: AtomicSlice<f32>,
    dbias_tmp: AtomicSlice<f32>,
) {
    let shared = dynamic_shared::<f32>();
    let cols = c as usize;
    let (Some(dbias_shared), Some(dweight_shared)) = (shared.region(0, cols), shared.region(1, cols)) else { return };
    let (tid, threads) = (thread_idx_x(), block_dim_x());
    for i in strided_range(tid as usize, cols, threads as usize) {
        dbias_shared.set(i, 0.0);
        dweight_shared.set(i, 0.0);
    }
    sync_threads();

    let me = warp_row();
    let idx = me.row();
    let lane = warp::lane_id();
    if idx < b * t
        && let Some(row) = dinp.row_mut(me)
    {
        let start = idx as usize * cols;
        if let (Some(dout_bt), Some(inp_bt), Some(weight), Some(mean_bt), Some(rstd_bt)) =
            (dout.get(start..start + cols), inp.get(start..start + cols), weight.get(..cols), mean.get(idx as usize), rstd.get(idx as usize))
        {
            let (mean_bt, rstd_bt) = (mean_bt.widen(), rstd_bt.widen());
            let mut dnorm_mean = 0.0f32;
            let mut dnorm_norm_mean = 0.0f32;
            for i in strided_range(lane as usize, cols, 32) {
                let norm_bti = (inp_bt[i].widen() - mean_bt) * rstd_bt;
                let dnorm_i = weight[i].widen() * dout_bt[i].widen();
                dnorm_mean += dnorm_i;
                dnorm_norm_mean += dnorm_i * norm_bti;
            }
            let dnorm_mean = warp::reduce_sum(dnorm_mean) / c as f32;
            let dnorm_norm_mean = warp::reduce_sum(dnorm_norm_mean) / c as f32;

            for (i, o) in row.iter_cols_mut() {
                if i >= cols {
                    break;
                }
                let g = dout_bt[i].widen();
                let norm_bti = (inp_bt[i].widen() - mean_bt) * rstd_bt;
                let dnorm_i = weight[i].widen() * g;
                dbias_shared.fetch_add(i, g);
                dweight_shared.fetch_add(i, norm_bti * g);
                let mut dval = 0.0f32;
                dval += dnorm_i;
                dval -= dnorm_mean;
                dval -= norm_bti * dnorm_norm_mean;
                dval *= rstd_bt;
                *o = (o.widen() + dval).to_bf16();
            }
        }
    }
    sync_threads();

    for i in strided_range(tid as usize, cols, threads as usize) {
        if let (Some(db), Some(dw)) = (dbias_tmp.get(i), dweight_tmp.get(i)) {
            db.add(dbias_shared.get(i));
            dw.add(dweight_shared.get(i));
        }
    }
}

/// [`matmul_backward_bias_kernel4()`]'s fix round: its shared accesses tested against the
/// dynamic shared memory's length in the kernel, and the column's length taken as a `u32` by
/// `try_from` (the first try's `as u32` let the compiler see no bound for `all[i]`): the first
/// try kept 5 panic `CALL`s (341 SASS instructions against nvcc's 177).
#[kernel(cols(dbias = 32))]
pub fn matmul_backward_bias_kernel4_fixed(mut dbias: DisjointSlice<bf16, BlockRows>, dout: &[bf16], b: u32, t: u32, oc: u32) {
    let smem = dynamic_shared::<f32>();
    let tid = thread_idx_x();
    let warp_id = tid / 32;
    let lane_id = tid % 32;
    let tl = block_idx_x() * 32;
    let vstep = block_dim_x() / 32;

    let mut dout_sum = 0.0f32;
    if let Some(all) = dout.get(..(b * t) as usize * oc as usize)
        && let Ok(len) = u32::try_from(all.len())
    {
        for i in strided_range(warp_id * oc + tl + lane_id, len, vstep * oc) {
            dout_sum += all[i as usize].widen();
        }
    }
    let slot = (lane_id + warp_id * 32) as usize;
    if slot < smem.len() {
        smem.set(slot, dout_sum);
    }
    sync_threads();

    if warp_id == 0 {
        let mut sum = 0.0f32;
        for j in 0..vstep {
            let k = (lane_id + j * 32) as usize;
            if k < smem.len() {
                sum += smem.get(k);
            }
        }
        if let Some(mut row) = dbias.row_mut(block_row())
            && let Some(o) = row.get_mut(0)
        {
            *o = (o.widen() + sum).to_bf16();
        }
    }
}
