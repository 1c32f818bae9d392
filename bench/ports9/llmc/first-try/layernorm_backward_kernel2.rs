// bench/ports9 L3's first try, as it stood at the first GPU call (session 21), kept as text:
// not built (no module includes it), because under its `launch_bounds(256)` ptxas capped it at
// 32 registers with a 16-byte spill and the builder's local-memory warning then printed in every
// workspace build. Measured 0.879x / 0.866x nvcc on an H200 (RESULTS.md). The crate builds the
// fix rounds (`layernorm_backward_kernel2_fixed`, `_fixed8`) instead.

/// dev/cuda/layernorm_backward.cu `layernorm_backward_kernel2` with every tensor bf16 (as
/// its file instantiates it): a row of `dinp` per warp (`+=` in place), `dbias`/`dweight`
/// partials folded by shared-memory atomics in the block, then by global atomics into
/// `dbias_tmp`/`dweight_tmp` (f32, zeroed before the launch). The source's `dweight` and
/// `dbias` parameters are unused by this kernel (its launcher's second kernel copies the
/// f32 sums into them) and are left out. Dynamic shared memory: `2 C` floats. Blocks of at
/// most 256 threads (the bench's; the builder warned of 39 registers at 1024).
#[kernel(cols(dinp = c), launch_bounds(256))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_kernel2(
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
    // The same split in every thread: a block-uniform return, before any barrier.
    let Some((dbias_shared, dweight_shared)) = shared.split_at_checked(c as usize) else { return };
    let (tid, threads) = (thread_idx_x(), block_dim_x());
    for i in strided_range(tid, c, threads) {
        dbias_shared.set(i as usize, 0.0);
        dweight_shared.set(i as usize, 0.0);
    }
    sync_threads();

    let me = warp_row();
    let idx = me.row();
    let lane = warp::lane_id();
    // The source returns here for warps past the rows; they still meet the barriers below.
    if idx < b * t
        && let Some(mut row) = dinp.row_mut(me)
    {
        let start = idx as usize * c as usize;
        let cols = c as usize;
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

            for j in 0.. {
                let i = lane as usize + 32 * j;
                let Some(o) = row.get_mut(j) else { break };
                let (Some(x), Some(w), Some(g)) = (inp_bt.get(i), weight.get(i), dout_bt.get(i)) else { break };
                let g = g.widen();
                let norm_bti = (x.widen() - mean_bt) * rstd_bt;
                let dnorm_i = w.widen() * g;
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

    for i in strided_range(tid, c, threads) {
        dbias_tmp.add(i as usize, dbias_shared.get(i as usize));
        dweight_tmp.add(i as usize, dweight_shared.get(i as usize));
    }
}

