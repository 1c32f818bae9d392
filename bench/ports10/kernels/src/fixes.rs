//! **Fix round, written from the SASS before any GPU run** (session 22 had no GPU time for a
//! fix round after the first tries' measurements): the two first tries whose SASS differs from
//! their twin's in a way expected to cost more than 3%. Each keeps its first try's arithmetic in
//! the same order (the same bits); what changes is how many loads a thread has in flight.
//! bench/ports10/RESULTS.md says which docs gap each shows.

use ferrocuda_device::global::{BlockRows, SegmentRows, block_row, segment_row};
use ferrocuda_device::kernel;
use ferrocuda_device::pack16::Bf16x8;
use ferrocuda_device::prelude::*;
use ferrocuda_device::unroll;

/// [`crate::llmc::layernorm_backward_kernel1()`] with both column loops stepping four columns at a
/// time (the three rows' loads of the four columns issued together, as nvcc's unrolled-by-4
/// loops), then the `c % 4` columns one by one. The first try's first loop, a `for` over core's
/// `zip` of three slice iterators, compiled rolled with plain `ld.global` (no `.nc`): three loads
/// in flight a thread where nvcc's has twelve.
// Launched with 256 threads a block (the bench's); 6 blocks of 256 an SM hold the
// registers ptxas picks (40), so the occupancy check has the size it needs.
#[kernel(cols(dinp = c), launch_bounds(256, 6))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_kernel1_x4(
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
    let c = c as usize;
    let (Some(dout_bt), Some(inp_bt), Some(weight), Some(&mean_bt), Some(&rstd_bt)) =
        (dout.get(span.clone()), inp.get(span), weight.get(..c), mean.get(idx), rstd.get(idx))
    else {
        return;
    };
    // Whole chunks of four columns of the three rows, cut to one count so that no index below
    // needs a check (an index `i + j` below `c / 4 * 4` kept one, and the kernel's panic path).
    let (x4, x_tail) = inp_bt.as_chunks::<4>();
    let n4 = x4.len();
    let (Some(d4), Some(w4)) = (dout_bt.as_chunks::<4>().0.get(..n4), weight.as_chunks::<4>().0.get(..n4)) else { return };
    let c4 = n4 * 4;
    let (Some(d_tail), Some(w_tail)) = (dout_bt.get(c4..), weight.get(c4..)) else { return };

    let mut dnorm_mean = 0.0f32;
    let mut dnorm_norm_mean = 0.0f32;
    for q in 0..n4 {
        let (x, d, w) = (x4[q], d4[q], w4[q]);
        for j in 0..4 {
            let norm_bti = (x[j] - mean_bt) * rstd_bt;
            let dnorm_i = w[j] * d[j];
            dnorm_mean += dnorm_i;
            dnorm_norm_mean += dnorm_i * norm_bti;
        }
    }
    for ((&x, &d), &w) in x_tail.iter().zip(d_tail).zip(w_tail) {
        let norm_bti = (x - mean_bt) * rstd_bt;
        let dnorm_i = w * d;
        dnorm_mean += dnorm_i;
        dnorm_norm_mean += dnorm_i * norm_bti;
    }
    dnorm_mean = dnorm_mean.fast_div(c as f32);
    dnorm_norm_mean = dnorm_norm_mean.fast_div(c as f32);

    let mut column = |i: usize, x: f32, d: f32, w: f32| {
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
    };
    for q in 0..n4 {
        let (x, d, w) = (x4[q], d4[q], w4[q]);
        for j in 0..4 {
            column(4 * q + j, x[j], d[j], w[j]);
        }
    }
    for (j, ((&x, &d), &w)) in x_tail.iter().zip(d_tail).zip(w_tail).enumerate() {
        column(c4 + j, x, d, w);
    }
}

/// [`crate::vllm::finalize_moe_routing_kernel()`] taking the token's experts four at a time: the
/// four map entries and scales, then the four rows' 16-byte packs loaded together, then the
/// FMAs in the first try's order (expert 0 first); the `k % 4` last experts one by one. The first
/// try's loop over `k` (known only at run time) stayed rolled: one pack in flight a thread, each
/// behind its map entry's load, where nvcc unrolls vLLM's loop by 2 (eight 4-byte loads in flight).
// 40 registers (the packs kept packed); launched with 256 threads a block, 6 blocks an SM.
#[kernel(cols(out = cols_v), launch_bounds(256, 6))]
pub fn finalize_moe_routing_kernel_x4(
    expanded_permuted_rows: &[Bf16x8],
    mut out: DisjointSlice<Bf16x8, BlockRows>,
    scales: &[f32],
    source_to_dest: &[i32],
    cols_v: u32,
    k: u32,
) {
    let me = block_row();
    let k = k as usize;
    let first = me.row() as usize * k;
    let (Some(map), Some(scales)) = (source_to_dest.get(first..first + k), scales.get(first..first + k)) else {
        return;
    };
    let (map4, map_tail) = map.as_chunks::<4>();
    let (scales4, scales_tail) = scales.as_chunks::<4>();
    let Some(row) = out.row_mut(me) else { return };
    // Packs stay packed (4 registers) until their FMAs (the builder's occupancy warning: widened
    // up front, the four were 72 registers a thread).
    let pack = |dest: i32, col: usize| expanded_permuted_rows.get(dest as usize * cols_v as usize + col).map(Bf16x8::load);
    for (col, o) in row.iter_cols_mut() {
        let mut thread_output = [0.0f32; 8];
        for (dests, row_scales) in map4.iter().zip(scales4) {
            // The four map entries first, then the four packs they name, each a zero pack where
            // its entry is outside the rows (vLLM's kernel reads there: undefined), so that no
            // branch stands between the four loads; then the FMAs in the first try's order.
            let dests: [i32; 4] = *dests;
            let packs: [[f32; 8]; 4] = core::array::from_fn(|e| pack(dests[e], col).unwrap_or_default().to_f32s());
            for (expert_result, &row_scale) in packs.iter().zip(row_scales) {
                for e in 0..8 {
                    thread_output[e] += row_scale * expert_result[e];
                }
            }
        }
        for (&dest, &row_scale) in map_tail.iter().zip(scales_tail) {
            if let Some(p) = pack(dest, col) {
                let expert_result = p.to_f32s();
                for e in 0..8 {
                    thread_output[e] += row_scale * expert_result[e];
                }
            }
        }
        Bf16x8::from_f32s(thread_output).store(o);
    }
}

/// [`crate::llmc::layernorm_backward_kernel1()`] with one change (session 22, gaps2; issue 30's
/// tenth port, gap 3): its first loop, `for ((&x, &d), &w) in inp.iter().zip(dout).zip(weight)`,
/// written as `inp.iter().zip(dout).zip(weight).for_each(|((&x, &d), &w)| ..)`. The `for` loop
/// calls `Zip::next`, whose `Option` of three references LLVM keeps as three pointer phis joined
/// with the null of `None` (the loop's exit test is that null, not the index): NVPTX traces a
/// load to a read-only kernel parameter only through pointers, so all three reads were plain
/// `ld.global`, one column a step. `for_each` runs core's `fold` of a zip of slice iterators,
/// a counted loop over indices: `ld.global.nc`, unrolled by 4 by LLVM and again by ptxas (575
/// SASS instructions against 252, 110 `LDG.E.CONSTANT`). The same sums in the same order: the
/// first try's bits.
// Launched with 256 threads a block (the bench's); 6 blocks of 256 an SM hold its registers.
#[kernel(cols(dinp = c), launch_bounds(256, 6))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_kernel1_zip_fix(
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

    // first: two reduce operations (the one change: `for_each`, not a `for` loop)
    let mut dnorm_mean = 0.0f32;
    let mut dnorm_norm_mean = 0.0f32;
    inp_bt.iter().zip(dout_bt).zip(weight).for_each(|((&x, &d), &w)| {
        let norm_bti = (x - mean_bt) * rstd_bt;
        let dnorm_i = w * d;
        dnorm_mean += dnorm_i;
        dnorm_norm_mean += dnorm_i * norm_bti;
    });
    dnorm_mean = dnorm_mean.fast_div(c as f32);
    dnorm_norm_mean = dnorm_norm_mean.fast_div(c as f32);

    // now iterate again and accumulate all the gradients (as the first try)
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

/// [`crate::vllm::finalize_moe_routing_kernel()`] with its loop over the token's `k` experts
/// (a run-time count) written with session 23's per-loop unroll (issue 30, tenth port, gap 4):
/// `unroll::counted_loads_first::<4, _>(k, load, apply)`, four experts a round, their four
/// packs gathered (each a zero pack where its map entry is outside the rows, a predicated load,
/// no branch) before the four FMA groups, which run in the first try's order (expert 0 first:
/// the first try's bits). What `_x4` does by hand with `as_chunks::<4>()`, in one call.
#[kernel(cols(out = cols_v), launch_bounds(256, 6))]
pub fn finalize_moe_routing_kernel_counted(
    expanded_permuted_rows: &[Bf16x8],
    mut out: DisjointSlice<Bf16x8, BlockRows>,
    scales: &[f32],
    source_to_dest: &[i32],
    cols_v: u32,
    k: u32,
) {
    let me = block_row();
    let k = k as usize;
    let first = me.row() as usize * k;
    let (Some(map), Some(scales)) = (source_to_dest.get(first..first + k), scales.get(first..first + k)) else {
        return;
    };
    let Some(row) = out.row_mut(me) else { return };
    for (col, o) in row.iter_cols_mut() {
        let mut thread_output = [0.0f32; 8];
        unroll::counted_loads_first::<4, _>(
            map.len(),
            |e| expanded_permuted_rows.get(map[e] as usize * cols_v as usize + col).map(Bf16x8::load).unwrap_or_default(),
            |e, pack| {
                let expert_result = pack.to_f32s();
                for j in 0..8 {
                    thread_output[j] += scales[e] * expert_result[j];
                }
            },
        );
        Bf16x8::from_f32s(thread_output).store(o);
    }
}

/// [`crate::vllm::finalize_moe_routing_kernel()`] with the first try's loop body (a `get` per
/// expert, `continue` past a row outside the buffer) under `unroll::counted::<4>(k, ..)`: the
/// plain per-loop unroll, whose four gathers each stay behind their own test (the form
/// `counted_loads_first` exists for; kept to show the difference in SASS and on the GPU).
#[kernel(cols(out = cols_v), launch_bounds(256, 6))]
pub fn finalize_moe_routing_kernel_counted_plain(
    expanded_permuted_rows: &[Bf16x8],
    mut out: DisjointSlice<Bf16x8, BlockRows>,
    scales: &[f32],
    source_to_dest: &[i32],
    cols_v: u32,
    k: u32,
) {
    let me = block_row();
    let k = k as usize;
    let first = me.row() as usize * k;
    let (Some(map), Some(scales)) = (source_to_dest.get(first..first + k), scales.get(first..first + k)) else {
        return;
    };
    let Some(row) = out.row_mut(me) else { return };
    for (col, o) in row.iter_cols_mut() {
        let mut thread_output = [0.0f32; 8];
        unroll::counted::<4>(map.len(), |e| {
            if let Some(pack) = expanded_permuted_rows.get(map[e] as usize * cols_v as usize + col) {
                let expert_result = Bf16x8::load(pack).to_f32s();
                for j in 0..8 {
                    thread_output[j] += scales[e] * expert_result[j];
                }
            }
        });
        Bf16x8::from_f32s(thread_output).store(o);
    }
}

/// [`crate::llmc::layernorm_backward_kernel1()`] with both column loops (over a run-time `c`)
/// written `unroll::counted::<4>(c, |i| ..)`: nvcc's unroll by 4 of llm.c's `for (int i = 0;
/// i < C; i++)` loops, per loop, under the builder's default flags. The inputs are cut to the
/// row's length first so that no index in the closures needs a check. The same sums in the
/// same order: the first try's bits.
// Launched with 256 threads a block (the bench's); 6 blocks of 256 an SM hold its registers.
#[kernel(cols(dinp = c), launch_bounds(256, 6))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_kernel1_counted(
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
    let Some(inp_bt) = inp.get(span.clone()) else { return };
    let n = inp_bt.len();
    let (Some(dout_bt), Some(weight), Some(&mean_bt), Some(&rstd_bt)) = (dout.get(span.start..span.start + n), weight.get(..n), mean.get(idx), rstd.get(idx))
    else {
        return;
    };

    // first: two reduce operations
    let mut dnorm_mean = 0.0f32;
    let mut dnorm_norm_mean = 0.0f32;
    unroll::counted::<4>(n, |i| {
        let norm_bti = (inp_bt[i] - mean_bt) * rstd_bt;
        let dnorm_i = weight[i] * dout_bt[i];
        dnorm_mean += dnorm_i;
        dnorm_norm_mean += dnorm_i * norm_bti;
    });
    dnorm_mean = dnorm_mean.fast_div(c as f32);
    dnorm_norm_mean = dnorm_norm_mean.fast_div(c as f32);

    // now iterate again and accumulate all the gradients
    unroll::counted::<4>(n, |i| {
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
    });
}

/// [`layernorm_backward_kernel1_counted()`] with only the first (read-only) column loop
/// unrolled by `unroll::counted::<4>`; the second, whose atomics bound it, stays the first
/// try's `for` loop (the port's `_x4`, which unrolled both, measured 0.86x where the first
/// try measured 1.07x).
#[kernel(cols(dinp = c), launch_bounds(256, 6))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_kernel1_counted_first(
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
    let Some(inp_bt) = inp.get(span.clone()) else { return };
    let n = inp_bt.len();
    let (Some(dout_bt), Some(weight), Some(&mean_bt), Some(&rstd_bt)) = (dout.get(span.start..span.start + n), weight.get(..n), mean.get(idx), rstd.get(idx))
    else {
        return;
    };
    let mut dnorm_mean = 0.0f32;
    let mut dnorm_norm_mean = 0.0f32;
    unroll::counted::<4>(n, |i| {
        let norm_bti = (inp_bt[i] - mean_bt) * rstd_bt;
        let dnorm_i = weight[i] * dout_bt[i];
        dnorm_mean += dnorm_i;
        dnorm_norm_mean += dnorm_i * norm_bti;
    });
    dnorm_mean = dnorm_mean.fast_div(c as f32);
    dnorm_norm_mean = dnorm_norm_mean.fast_div(c as f32);
    for i in 0..n {
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

/// [`crate::vllm::finalize_moe_routing_kernel()`] with its loop over the token's `k` experts
/// written `unroll::counted_gather::<4, _, _>(k, index, load, apply)` (session 23, after the
/// mid-session measurement of [`finalize_moe_routing_kernel_counted()`] at 0.922x): a round reads
/// its four map entries, then issues the four 16-byte gathers (a zero pack outside the rows),
/// then the FMAs in the first try's order. The hand-written `_x4`'s structure (1.051x), as one call.
#[kernel(cols(out = cols_v), launch_bounds(256, 6))]
pub fn finalize_moe_routing_kernel_gather(
    expanded_permuted_rows: &[Bf16x8],
    mut out: DisjointSlice<Bf16x8, BlockRows>,
    scales: &[f32],
    source_to_dest: &[i32],
    cols_v: u32,
    k: u32,
) {
    let me = block_row();
    let k = k as usize;
    let first = me.row() as usize * k;
    let (Some(map), Some(scales)) = (source_to_dest.get(first..first + k), scales.get(first..first + k)) else {
        return;
    };
    let Some(row) = out.row_mut(me) else { return };
    for (col, o) in row.iter_cols_mut() {
        let mut thread_output = [0.0f32; 8];
        unroll::counted_gather::<4, _, _>(
            map.len(),
            |e| map[e],
            |_, dest| expanded_permuted_rows.get(dest as usize * cols_v as usize + col).map(Bf16x8::load).unwrap_or_default(),
            |e, pack| {
                let expert_result = pack.to_f32s();
                for j in 0..8 {
                    thread_output[j] += scales[e] * expert_result[j];
                }
            },
        );
        Bf16x8::from_f32s(thread_output).store(o);
    }
}
