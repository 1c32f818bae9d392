//! The library's calls on a real GPU: row kernels against the CPU executor's results (the
//! same kernels, checked against `f64` in rows_cpu.rs), attention and GEMM against `f64`
//! references, and the shape checks before anything is queued. Skipped (printed) without a
//! GPU; failures instead of skips under `REQUIRE_GPU=1`.

#![allow(clippy::needless_range_loop)] // the references index several arrays by one position

mod common;

use common::*;
use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_host::{Context, DeviceBuffer, Stream};
use ferrocuda_kernels::attention::{self, Attention, Layout};
use ferrocuda_kernels::gemm::{self, GemmEngine, GemmEpilogue, GemmShape};
use ferrocuda_kernels::rows::{self, AdamW, Rope, Rows};
use ferrocuda_kernels::{Element, KernelsError, bf16, cpu, f16};

fn up<T: bytemuck::Pod>(context: &Context, x: &[T]) -> DeviceBuffer<T> {
    DeviceBuffer::from_slice(context, x).unwrap()
}

fn zeros<T: bytemuck::Pod>(context: &Context, n: usize) -> DeviceBuffer<T> {
    DeviceBuffer::zeroed(context, n).unwrap()
}

fn rows_on_gpu<T: Element>(context: &Context, stream: &Stream, shape: Rows) {
    let e = CpuExecutor::new();
    let n = shape.len();
    let tol = tolerance::<T>();
    let (x, _) = input::<T>(n, 1, 2.0);
    let (res, _) = input::<T>(n, 2, 1.0);
    let (w, _) = input::<T>(shape.cols, 3, 1.5);
    let (b, _) = input::<T>(shape.cols, 4, 0.5);
    let (dout, _) = input::<T>(n, 5, 1.0);
    let (w_, b_, x_, res_, dout_) = (up(context, &w), up(context, &b), up(context, &x), up(context, &res), up(context, &dout));

    // Fused add + layer norm, then its backward with a residual gradient.
    let (mut out, mut sum, mut mean, mut rstd) =
        (zeros::<T>(context, n), zeros::<T>(context, n), zeros::<f32>(context, shape.rows), zeros::<f32>(context, shape.rows));
    rows::add_layernorm(stream, &x_, &res_, &w_, &b_, &mut out, &mut sum, &mut mean, &mut rstd, shape, 1e-5).unwrap();
    let (mut c_out, mut c_sum, mut c_mean, mut c_rstd) = (vec![T::default(); n], vec![T::default(); n], vec![0.0f32; shape.rows], vec![0.0f32; shape.rows]);
    cpu::add_layernorm(&e, &x, &res, &w, &b, &mut c_out, &mut c_sum, &mut c_mean, &mut c_rstd, shape, 1e-5).unwrap();
    assert_close("gpu add_layernorm out", &widen(&out.to_vec().unwrap()), &widen(&c_out), tol);
    assert_close("gpu add_layernorm sum", &widen(&sum.to_vec().unwrap()), &widen(&c_sum), 0.0);
    assert_close("gpu layernorm rstd", &widen(&rstd.to_vec().unwrap()), &widen(&c_rstd), 1e-5);
    let (mut dx, mut dw, mut db) = (zeros::<T>(context, n), zeros::<f32>(context, shape.cols), zeros::<f32>(context, shape.cols));
    rows::layernorm_backward(stream, &dout_, &sum, &w_, &mean, &rstd, Some(&res_), &mut dx, &mut dw, &mut db, shape).unwrap();
    let (mut c_dx, mut c_dw, mut c_db) = (vec![T::default(); n], vec![0.0f32; shape.cols], vec![0.0f32; shape.cols]);
    cpu::layernorm_backward(&e, &dout, &c_sum, &w, &c_mean, &c_rstd, Some(&res), &mut c_dx, &mut c_dw, &mut c_db, shape).unwrap();
    assert_close("gpu layernorm dx", &widen(&dx.to_vec().unwrap()), &widen(&c_dx), tol);
    assert_close("gpu layernorm dweight", &widen(&dw.to_vec().unwrap()), &widen(&c_dw), 1e-4);
    assert_close("gpu layernorm dbias", &widen(&db.to_vec().unwrap()), &widen(&c_db), 1e-4);

    // RMSNorm forward and backward.
    rows::rmsnorm(stream, &x_, &w_, &mut out, &mut rstd, shape, 1e-6).unwrap();
    cpu::rmsnorm(&e, &x, &w, &mut c_out, &mut c_rstd, shape, 1e-6).unwrap();
    assert_close("gpu rmsnorm", &widen(&out.to_vec().unwrap()), &widen(&c_out), tol);
    rows::rmsnorm_backward(stream, &dout_, &x_, &w_, &rstd, None, &mut dx, &mut dw, shape).unwrap();
    cpu::rmsnorm_backward(&e, &dout, &x, &w, &c_rstd, None, &mut c_dx, &mut c_dw, shape).unwrap();
    assert_close("gpu rmsnorm dx", &widen(&dx.to_vec().unwrap()), &widen(&c_dx), tol);
    assert_close("gpu rmsnorm dweight", &widen(&dw.to_vec().unwrap()), &widen(&c_dw), 1e-4);

    // Softmax and cross-entropy.
    rows::softmax(stream, &x_, &mut out, shape).unwrap();
    cpu::softmax(&e, &x, &mut c_out, shape).unwrap();
    assert_close("gpu softmax", &widen(&out.to_vec().unwrap()), &widen(&c_out), tol);
    let targets: Vec<u32> = (0..shape.rows as u32).map(|r| (r * 37) % shape.cols as u32).collect();
    let (t_, mut losses) = (up(context, &targets), zeros::<f32>(context, shape.rows));
    rows::cross_entropy(stream, &x_, &t_, &mut losses, &mut out, shape, 1.0 / shape.rows as f32).unwrap();
    let mut c_losses = vec![0.0f32; shape.rows];
    cpu::cross_entropy(&e, &x, &targets, &mut c_losses, &mut c_out, shape, 1.0 / shape.rows as f32).unwrap();
    assert_close("gpu cross-entropy loss", &widen(&losses.to_vec().unwrap()), &widen(&c_losses), 1e-5);
    assert_close("gpu cross-entropy dlogits", &widen(&out.to_vec().unwrap()), &widen(&c_out), tol);
    // Its two halves (PyTorch's op): forward with lse, backward with a gradient per row (1000
    // columns: 8 a thread; 998: one element a thread).
    let dlosses: Vec<f32> = (0..shape.rows).map(|r| 0.5 - r as f32 / shape.rows as f32).collect();
    let (mut lse, dl_) = (zeros::<f32>(context, shape.rows), up(context, &dlosses));
    rows::cross_entropy_forward(stream, &x_, &t_, &mut losses, &mut lse, shape).unwrap();
    rows::cross_entropy_backward(stream, &x_, &t_, &lse, &dl_, &mut out, shape).unwrap();
    let mut c_lse = vec![0.0f32; shape.rows];
    cpu::cross_entropy_forward(&e, &x, &targets, &mut c_losses, &mut c_lse, shape).unwrap();
    cpu::cross_entropy_backward(&e, &x, &targets, &c_lse, &dlosses, &mut c_out, shape).unwrap();
    assert_close("gpu cross-entropy forward loss", &widen(&losses.to_vec().unwrap()), &widen(&c_losses), 1e-5);
    assert_close("gpu cross-entropy forward lse", &widen(&lse.to_vec().unwrap()), &widen(&c_lse), 1e-5);
    assert_close("gpu cross-entropy backward dlogits", &widen(&out.to_vec().unwrap()), &widen(&c_out), tol);

    // Activations.
    rows::gelu(stream, &x_, &mut out).unwrap();
    cpu::gelu(&e, &x, &mut c_out).unwrap();
    assert_close("gpu gelu", &widen(&out.to_vec().unwrap()), &widen(&c_out), tol);
    rows::gelu_backward(stream, &x_, &dout_, &mut out).unwrap();
    cpu::gelu_backward(&e, &x, &dout, &mut c_out).unwrap();
    assert_close("gpu gelu backward", &widen(&out.to_vec().unwrap()), &widen(&c_out), tol);
    let half = Rows { rows: shape.rows, cols: shape.cols / 2 };
    let mut small = zeros::<T>(context, half.len());
    let mut c_small = vec![T::default(); half.len()];
    rows::silu_and_mul(stream, &x_, &mut small, half).unwrap();
    cpu::silu_and_mul(&e, &x, &mut c_small, half).unwrap();
    assert_close("gpu silu_and_mul", &widen(&small.to_vec().unwrap()), &widen(&c_small), tol);
    let dsmall = up(context, &dout[..half.len()]);
    rows::silu_and_mul_backward(stream, &x_, &dsmall, &mut out, half).unwrap();
    cpu::silu_and_mul_backward(&e, &x, &dout[..half.len()], &mut c_out, half).unwrap();
    assert_close("gpu silu_and_mul backward", &widen(&out.to_vec().unwrap()), &widen(&c_out), tol);
    // A gate width that is a multiple of 8 (496 of 1000 / 2): the 8-columns-a-thread kernels.
    let d8 = Rows { rows: shape.rows, cols: (shape.cols / 2) & !7 };
    let (input8, dout8) = (x_.slice(..2 * d8.len()), up(context, &dout[..d8.len()]));
    let (mut small8, mut dinput8) = (zeros::<T>(context, d8.len()), zeros::<T>(context, 2 * d8.len()));
    let (mut c_small8, mut c_dinput8) = (vec![T::default(); d8.len()], vec![T::default(); 2 * d8.len()]);
    rows::silu_and_mul(stream, &input8, &mut small8, d8).unwrap();
    cpu::silu_and_mul(&e, &x[..2 * d8.len()], &mut c_small8, d8).unwrap();
    assert_close("gpu silu_and_mul (d % 8 == 0)", &widen(&small8.to_vec().unwrap()), &widen(&c_small8), tol);
    rows::silu_and_mul_backward(stream, &input8, &dout8, &mut dinput8, d8).unwrap();
    cpu::silu_and_mul_backward(&e, &x[..2 * d8.len()], &dout[..d8.len()], &mut c_dinput8, d8).unwrap();
    assert_close("gpu silu_and_mul backward (d % 8 == 0)", &widen(&dinput8.to_vec().unwrap()), &widen(&c_dinput8), tol);

    // Rotary embeddings: 67 tokens x 5 heads x 200 (rotary 128 of each head), here over
    // 67 x 1000 elements (the 998-column pass has no such split; rope is not a row kernel).
    if shape.cols == 1000 {
        let rope = Rope { tokens: 67, heads: 5, head_dim: 200, rotary_dim: 128, max_positions: 100 };
        let positions: Vec<u32> = (0..67).map(|t| (t * 7) % 100).collect();
        let table: Vec<f32> = values(100 * 64, 9, 1.0).iter().map(|&v| v as f32).collect();
        let (p_, cos_, sin_) = (up(context, &positions), up(context, &table), up(context, &table[..].iter().map(|v| v * 0.5).collect::<Vec<_>>()));
        rows::rotary_embedding(stream, &x_, &p_, &cos_, &sin_, &mut out, rope, false).unwrap();
        let sin_host: Vec<f32> = table.iter().map(|v| v * 0.5).collect();
        cpu::rotary_embedding(&e, &x, &positions, &table, &sin_host, &mut c_out, rope, false).unwrap();
        assert_close("gpu rope", &widen(&out.to_vec().unwrap()), &widen(&c_out), tol);
    }

    // Global norm, clipping, AdamW.
    let mut total = zeros::<f32>(context, 1);
    rows::sum_of_squares(stream, &dout_, &mut total).unwrap();
    rows::sum_of_squares(stream, &x_, &mut total).unwrap();
    let want_sq: f64 = widen(&dout).iter().chain(&widen(&x)).map(|v| v * v).sum();
    let got_sq = total.to_vec().unwrap()[0] as f64;
    assert!((got_sq - want_sq).abs() < 1e-4 * want_sq, "gpu sum of squares {got_sq} vs {want_sq}");
    let mut grads = up(context, &dout);
    rows::clip_by_global_norm(stream, &mut grads, &total, 1.0).unwrap();
    let mut c_grads = dout.clone();
    cpu::clip_by_global_norm(&e, &mut c_grads, &[got_sq as f32], 1.0).unwrap();
    assert_close("gpu clip", &widen(&grads.to_vec().unwrap()), &widen(&c_grads), tol);
    let hyper = AdamW { learning_rate: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1 };
    let (mut params, mut m, mut v) = (up(context, &x), zeros::<f32>(context, n), zeros::<f32>(context, n));
    let (mut c_params, mut c_m, mut c_v) = (x.clone(), vec![0.0f32; n], vec![0.0f32; n]);
    for step in 1..=3 {
        rows::adamw(stream, &mut params, &dout_, &mut m, &mut v, hyper, step, 1.0).unwrap();
        cpu::adamw(&e, &mut c_params, &dout, &mut c_m, &mut c_v, hyper, step, 1.0).unwrap();
    }
    assert_close("gpu adamw", &widen(&params.to_vec().unwrap()), &widen(&c_params), tol);
}

#[test]
fn row_kernels_on_the_gpu_match_the_cpu_executor() {
    let Some((context, stream)) = gpu("row_kernels_on_the_gpu_match_the_cpu_executor") else { return };
    // 1000 columns: the packed kernels (125 threads a row: a partial warp); 998: the
    // warp-per-row ones (not a multiple of 8).
    for shape in [Rows { rows: 67, cols: 1000 }, Rows { rows: 67, cols: 998 }] {
        rows_on_gpu::<f32>(&context, &stream, shape);
        rows_on_gpu::<bf16>(&context, &stream, shape);
        rows_on_gpu::<f16>(&context, &stream, shape);
    }
}

/// The norms at the width of the benchmarks (4096), against the CPU executor: layer norm's
/// 16-columns-a-thread forward kernel, the fused backward passes (layer norm with a residual
/// gradient, RMSNorm without) walking several rows a block with the next row's loads in
/// flight, RMSNorm's split weight-gradient sum, and `sum_of_squares`' packed kernel; then the
/// same calls on a `dout` one element in (the element-wise paths) give the same bits.
fn norms_at_4096_on_gpu<T: Element>(context: &Context, stream: &Stream) {
    let e = CpuExecutor::new();
    // 300 rows: the fused backward runs 38 blocks of 512 threads, 7 or 8 rows each.
    let shape = Rows { rows: 300, cols: 4096 };
    let n = shape.len();
    let tol = tolerance::<T>();
    let (x, _) = input::<T>(n, 61, 2.0);
    let (w, _) = input::<T>(shape.cols, 62, 1.5);
    let (b, _) = input::<T>(shape.cols, 63, 0.5);
    let (dout, _) = input::<T>(n, 64, 1.0);
    let (dres, _) = input::<T>(n, 65, 1.0);
    let (x_, w_, b_, dout_, dres_) = (up(context, &x), up(context, &w), up(context, &b), up(context, &dout), up(context, &dres));
    let (mut out, mut mean, mut rstd) = (zeros::<T>(context, n), zeros::<f32>(context, shape.rows), zeros::<f32>(context, shape.rows));
    rows::layernorm(stream, &x_, &w_, &b_, &mut out, &mut mean, &mut rstd, shape, 1e-5).unwrap();
    let (mut c_out, mut c_mean, mut c_rstd) = (vec![T::default(); n], vec![0.0f32; shape.rows], vec![0.0f32; shape.rows]);
    cpu::layernorm(&e, &x, &w, &b, &mut c_out, &mut c_mean, &mut c_rstd, shape, 1e-5).unwrap();
    assert_close("gpu layernorm 4096 out", &widen(&out.to_vec().unwrap()), &widen(&c_out), tol);
    assert_close("gpu layernorm 4096 mean", &widen(&mean.to_vec().unwrap()), &widen(&c_mean), 1e-5);
    assert_close("gpu layernorm 4096 rstd", &widen(&rstd.to_vec().unwrap()), &widen(&c_rstd), 1e-5);
    // RMSNorm at 4096 and 8192: the 16-columns-a-thread kernel (256 and 512 threads a row).
    for cols in [4096, 8192] {
        let wide = Rows { rows: n / cols, cols };
        let (wx, _) = input::<T>(cols, 66, 1.5);
        let w_wide = up(context, &wx);
        let (mut o, mut r) = (zeros::<T>(context, n), zeros::<f32>(context, wide.rows));
        rows::rmsnorm(stream, &x_, &w_wide, &mut o, &mut r, wide, 1e-6).unwrap();
        let (mut c_o, mut c_r) = (vec![T::default(); n], vec![0.0f32; wide.rows]);
        cpu::rmsnorm(&e, &x, &wx, &mut c_o, &mut c_r, wide, 1e-6).unwrap();
        assert_close(&format!("gpu rmsnorm {cols} out"), &widen(&o.to_vec().unwrap()), &widen(&c_o), tol);
        assert_close(&format!("gpu rmsnorm {cols} rstd"), &widen(&r.to_vec().unwrap()), &widen(&c_r), 1e-5);
    }
    // Session 14 (2): the kernels compiled for one block (`reqntid`): RMSNorm at 768 and 1024
    // (96 and 128 threads), the fused residual RMSNorm and softmax at 4096 (512).
    for cols in [768, 1024] {
        let narrow = Rows { rows: n / cols, cols };
        let (wx, _) = input::<T>(cols, 67, 1.5);
        let w_narrow = up(context, &wx);
        let (mut o, mut r) = (zeros::<T>(context, n), zeros::<f32>(context, narrow.rows));
        rows::rmsnorm(stream, &x_, &w_narrow, &mut o, &mut r, narrow, 1e-6).unwrap();
        let (mut c_o, mut c_r) = (vec![T::default(); n], vec![0.0f32; narrow.rows]);
        cpu::rmsnorm(&e, &x, &wx, &mut c_o, &mut c_r, narrow, 1e-6).unwrap();
        assert_close(&format!("gpu rmsnorm {cols} out"), &widen(&o.to_vec().unwrap()), &widen(&c_o), tol);
        assert_close(&format!("gpu rmsnorm {cols} rstd"), &widen(&r.to_vec().unwrap()), &widen(&c_r), 1e-5);
    }
    {
        let (mut o, mut sum, mut r) = (zeros::<T>(context, n), zeros::<T>(context, n), zeros::<f32>(context, shape.rows));
        rows::add_rmsnorm(stream, &x_, &dres_, &w_, &mut o, &mut sum, &mut r, shape, 1e-6).unwrap();
        let (mut c_o, mut c_sum, mut c_r) = (vec![T::default(); n], vec![T::default(); n], vec![0.0f32; shape.rows]);
        cpu::add_rmsnorm(&e, &x, &dres, &w, &mut c_o, &mut c_sum, &mut c_r, shape, 1e-6).unwrap();
        assert_close("gpu add_rmsnorm 4096 out", &widen(&o.to_vec().unwrap()), &widen(&c_o), tol);
        assert_close("gpu add_rmsnorm 4096 sum", &widen(&sum.to_vec().unwrap()), &widen(&c_sum), 0.0);
        assert_close("gpu add_rmsnorm 4096 rstd", &widen(&r.to_vec().unwrap()), &widen(&c_r), 1e-5);
        rows::softmax(stream, &x_, &mut o, shape).unwrap();
        cpu::softmax(&e, &x, &mut c_o, shape).unwrap();
        assert_close("gpu softmax 4096", &widen(&o.to_vec().unwrap()), &widen(&c_o), tol);
    }
    let mut shifted = vec![T::default(); n + 1];
    shifted[1..].copy_from_slice(&dout);
    let dout_shifted = up(context, &shifted);
    let mut results = Vec::new();
    for misaligned in [false, true] {
        let d = if misaligned { dout_shifted.slice(1..) } else { dout_.slice(..) };
        let (mut dx, mut dw, mut db) = (zeros::<T>(context, n), zeros::<f32>(context, shape.cols), zeros::<f32>(context, shape.cols));
        rows::layernorm_backward(stream, &d, &x_, &w_, &mean, &rstd, Some(&dres_), &mut dx, &mut dw, &mut db, shape).unwrap();
        let (mut rdx, mut rdw) = (zeros::<T>(context, n), zeros::<f32>(context, shape.cols));
        rows::rmsnorm_backward(stream, &d, &x_, &w_, &rstd, None, &mut rdx, &mut rdw, shape).unwrap();
        results.push((widen(&dx.to_vec().unwrap()), dw.to_vec().unwrap(), db.to_vec().unwrap(), widen(&rdx.to_vec().unwrap()), rdw.to_vec().unwrap()));
    }
    let (mut c_dx, mut c_dw, mut c_db) = (vec![T::default(); n], vec![0.0f32; shape.cols], vec![0.0f32; shape.cols]);
    cpu::layernorm_backward(&e, &dout, &x, &w, &c_mean, &c_rstd, Some(&dres), &mut c_dx, &mut c_dw, &mut c_db, shape).unwrap();
    let (gdx, gdw, gdb, grdx, grdw) = &results[0];
    assert_close("gpu layernorm 4096 dx", gdx, &widen(&c_dx), tol);
    assert_close("gpu layernorm 4096 dweight", &widen(gdw), &widen(&c_dw), 1e-4);
    assert_close("gpu layernorm 4096 dbias", &widen(gdb), &widen(&c_db), 1e-4);
    cpu::rmsnorm_backward(&e, &dout, &x, &w, &c_rstd, None, &mut c_dx, &mut c_dw, shape).unwrap();
    assert_close("gpu rmsnorm 4096 dx", grdx, &widen(&c_dx), tol);
    assert_close("gpu rmsnorm 4096 dweight", &widen(grdw), &widen(&c_dw), 1e-4);
    assert!(results[0] == results[1], "gpu norm backward 4096: the misaligned dout gives other bits");
    let mut total = zeros::<f32>(context, 1);
    rows::sum_of_squares(stream, &x_, &mut total).unwrap();
    let want: f64 = widen(&x).iter().map(|v| v * v).sum();
    let got = total.to_vec().unwrap()[0] as f64;
    assert!((got - want).abs() < 1e-4 * want, "gpu sum of squares 4096: {got} vs {want}");
}

#[test]
fn norms_at_4096_on_the_gpu_match_the_cpu_executor() {
    let Some((context, stream)) = gpu("norms_at_4096_on_the_gpu_match_the_cpu_executor") else { return };
    norms_at_4096_on_gpu::<f32>(&context, &stream);
    norms_at_4096_on_gpu::<bf16>(&context, &stream);
}

/// The packed kernels on views one element in (not 16-byte aligned): the element-wise
/// fallback inside the same kernels, the same values as on aligned buffers.
fn packed_misaligned_on_gpu<T: Element>(context: &Context, stream: &Stream) {
    let shape = Rows { rows: 33, cols: 4096 };
    let n = shape.len();
    let (x, _) = input::<T>(n, 31, 2.0);
    let (w, _) = input::<T>(shape.cols, 32, 1.5);
    let (xa, wa) = (up(context, &x), up(context, &w));
    let mut shifted = vec![T::default(); n + 1];
    shifted[1..].copy_from_slice(&x);
    let xs = up(context, &shifted);
    let (mut oa, mut os) = (zeros::<T>(context, n), zeros::<T>(context, n + 1));
    let mut rstd = zeros::<f32>(context, shape.rows);
    rows::rmsnorm(stream, &xa, &wa, &mut oa, &mut rstd, shape, 1e-6).unwrap();
    rows::rmsnorm(stream, &xs.slice(1..), &wa, &mut os.slice_mut(1..), &mut rstd, shape, 1e-6).unwrap();
    assert_eq!(widen(&oa.to_vec().unwrap()), widen(&os.to_vec().unwrap()[1..]), "gpu rmsnorm: misaligned view");
    rows::softmax(stream, &xa, &mut oa, shape).unwrap();
    rows::softmax(stream, &xs.slice(1..), &mut os.slice_mut(1..), shape).unwrap();
    assert_eq!(widen(&oa.to_vec().unwrap()), widen(&os.to_vec().unwrap()[1..]), "gpu softmax: misaligned view");
    rows::gelu(stream, &xa, &mut oa).unwrap();
    rows::gelu(stream, &xs.slice(1..), &mut os.slice_mut(1..)).unwrap();
    assert_eq!(widen(&oa.to_vec().unwrap()), widen(&os.to_vec().unwrap()[1..]), "gpu gelu: misaligned view");
    // Issue 31: these kernels choose their path once a launch; the element path is a rolled
    // loop with its own copy of the arithmetic (squares as explicit fma in both), so its bits
    // are checked here on the GPU, where the compiler's fusing could differ.
    let (b, _) = input::<T>(shape.cols, 33, 0.5);
    let ba = up(context, &b);
    let mut mean = zeros::<f32>(context, shape.rows);
    rows::layernorm(stream, &xa, &wa, &ba, &mut oa, &mut mean, &mut rstd, shape, 1e-5).unwrap();
    rows::layernorm(stream, &xs.slice(1..), &wa, &ba, &mut os.slice_mut(1..), &mut mean, &mut rstd, shape, 1e-5).unwrap();
    assert_eq!(widen(&oa.to_vec().unwrap()), widen(&os.to_vec().unwrap()[1..]), "gpu layernorm (16 columns a thread): misaligned view");
    let narrow = Rows { rows: shape.rows, cols: 768 };
    let m = narrow.len();
    rows::rmsnorm(stream, &xa.slice(..m), &wa.slice(..768), &mut oa.slice_mut(..m), &mut rstd, narrow, 1e-6).unwrap();
    rows::rmsnorm(stream, &xs.slice(1..m + 1), &wa.slice(..768), &mut os.slice_mut(1..m + 1), &mut rstd, narrow, 1e-6).unwrap();
    assert_eq!(widen(&oa.to_vec().unwrap()[..m]), widen(&os.to_vec().unwrap()[1..m + 1]), "gpu rmsnorm (8 columns a thread, 768): misaligned view");
    let rope = Rope { tokens: 33, heads: 4, head_dim: 128, rotary_dim: 128, max_positions: 64 };
    let r = rope.tokens * rope.heads * rope.head_dim;
    let half = rope.rotary_dim / 2;
    let cos: Vec<f32> = (0..rope.max_positions * half).map(|i| (i as f32 * 0.37).cos()).collect();
    let sin: Vec<f32> = (0..rope.max_positions * half).map(|i| (i as f32 * 0.37).sin()).collect();
    let positions: Vec<u32> = (0..rope.tokens as u32).map(|t| (t * 7) % 64).collect();
    let (pd, cd, sd) = (up(context, &positions), up(context, &cos), up(context, &sin));
    rows::rotary_embedding(stream, &xa.slice(..r), &pd, &cd, &sd, &mut oa.slice_mut(..r), rope, false).unwrap();
    rows::rotary_embedding(stream, &xs.slice(1..r + 1), &pd, &cd, &sd, &mut os.slice_mut(1..r + 1), rope, false).unwrap();
    assert_eq!(widen(&oa.to_vec().unwrap()[..r]), widen(&os.to_vec().unwrap()[1..r + 1]), "gpu rotary embedding: misaligned view");
}

#[test]
fn packed_kernels_on_misaligned_views_match_aligned_ones() {
    let Some((context, stream)) = gpu("packed_kernels_on_misaligned_views_match_aligned_ones") else { return };
    packed_misaligned_on_gpu::<f32>(&context, &stream);
    packed_misaligned_on_gpu::<bf16>(&context, &stream);
    packed_misaligned_on_gpu::<f16>(&context, &stream);
}

/// Which backward call `attention_on_gpu` checks.
#[derive(Clone, Copy, Debug)]
enum Backward {
    /// `attention_backward` (the path it picks).
    Picked,
    /// `attention_backward_deterministic`.
    Deterministic,
    /// `attention_backward_sm90` with this instance.
    Sm90(&'static str),
}

/// The forward and the backward (`attention_backward`, or `attention_backward_deterministic`
/// when `deterministic`) on the GPU against f64.
fn attention_on_gpu<T: Element>(context: &Context, stream: &Stream, shape: Attention, tol: f64, deterministic: bool) {
    attention_backward_on_gpu::<T>(context, stream, shape, tol, if deterministic { Backward::Deterministic } else { Backward::Picked });
}

/// As `attention_on_gpu`, with the backward call named.
/// Session 24's staged-epilogue backward trials (`_ostg`, `_obulk`: the D 128 picks, bulk dQ
/// and causal `_late`, storing dK and dV through shared memory in whole rows) against f64:
/// without the mask (`[B, H, S, D]`, grouped heads, ragged: 300 positions, the last key block's
/// rows past S not stored), with it in `[B, S, H, D]` (333 queries over 200 keys) and with more
/// keys than queries. A staged row stored to the wrong place, or not at all, shows as dK or dV
/// far from f64.
#[test]
fn s24_staged_backward_epilogue_on_sm_90_matches_f64() {
    let Some((context, stream)) = gpu("s24_staged_backward_epilogue_on_sm_90_matches_f64") else { return };
    if context.device().arch().unwrap() != 90 {
        eprintln!("not sm_90: no sm_90 backward here");
        return;
    }
    let base = Attention { batch: 2, heads_q: 8, heads_kv: 2, seq_q: 300, seq_kv: 300, head_dim: 128, layout: Layout::Bhsd, causal: false, scale: None };
    let cases =
        [base, Attention { causal: true, layout: Layout::Bshd, seq_q: 333, seq_kv: 200, ..base }, Attention { causal: true, seq_q: 130, seq_kv: 500, ..base }];
    let mut ran = 0;
    for shape in cases {
        for trial in attention::hopper_backward_trial_kernels::<bf16>(&shape, 90) {
            // The `_obulk` instances are the picks now (run by
            // `attention_backward_on_sm_90_matches_f64`); the `_ostg` ones stay trials.
            if trial.ends_with("_ostg") || trial.ends_with("_obulk") {
                attention_backward_on_gpu::<bf16>(&context, &stream, shape, 2e-2, Backward::Sm90(trial));
                ran += 1;
            }
        }
    }
    assert!(ran >= cases.len(), "an `_ostg` trial per shape at least (ran {ran})");
}

fn attention_backward_on_gpu<T: Element>(context: &Context, stream: &Stream, shape: Attention, tol: f64, backward: Backward) {
    let (q, qf) = input::<T>(shape.q_len(), 21, 1.0);
    let (k, kf) = input::<T>(shape.kv_len(), 22, 1.0);
    let (v, vf) = input::<T>(shape.kv_len(), 23, 1.0);
    let (dout, doutf) = input::<T>(shape.q_len(), 24, 1.0);
    let (q_, k_, v_, do_) = (up(context, &q), up(context, &k), up(context, &v), up(context, &dout));
    let (mut out, mut lse) = (zeros::<T>(context, shape.q_len()), zeros::<f32>(context, shape.q_rows()));
    attention::attention_forward(stream, &q_, &k_, &v_, &mut out, &mut lse, shape).unwrap();
    let (mut dq, mut dk, mut dv) = (zeros::<T>(context, shape.q_len()), zeros::<T>(context, shape.kv_len()), zeros::<T>(context, shape.kv_len()));
    match backward {
        Backward::Picked => attention::attention_backward(
            stream,
            attention::Backward { q: &q_, k: &k_, v: &v_, out: &out, dout: &do_, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
            shape,
        )
        .unwrap(),
        Backward::Deterministic => attention::attention_backward_deterministic(
            stream,
            attention::Backward { q: &q_, k: &k_, v: &v_, out: &out, dout: &do_, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
            shape,
        )
        .unwrap(),
        Backward::Sm90(kernel) => attention::attention_backward_sm90(
            stream,
            kernel,
            attention::Backward { q: &q_, k: &k_, v: &v_, out: &out, dout: &do_, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
            shape,
        )
        .unwrap(),
    }
    let dims = (shape.batch, shape.heads_q, shape.heads_kv, shape.seq_q, shape.seq_kv, shape.head_dim);
    let scale = shape.scale.map_or(1.0 / (shape.head_dim as f64).sqrt(), f64::from);
    let want = attention_ref_scaled(&qf, &kf, &vf, &doutf, dims, shape.layout == Layout::Bshd, shape.causal, scale);
    let what = format!("{backward:?} {shape:?}");
    assert_close(&format!("gpu out {what}"), &widen(&out.to_vec().unwrap()), &want.out, tol);
    assert_close(&format!("gpu lse {what}"), &widen(&lse.to_vec().unwrap()), &want.lse, 1e-4);
    assert_close(&format!("gpu dq {what}"), &widen(&dq.to_vec().unwrap()), &want.dq, tol * 2.0);
    assert_close(&format!("gpu dk {what}"), &widen(&dk.to_vec().unwrap()), &want.dk, tol * 2.0);
    assert_close(&format!("gpu dv {what}"), &widen(&dv.to_vec().unwrap()), &want.dv, tol * 2.0);
}

#[test]
fn attention_on_the_gpu_matches_f64() {
    let Some((context, stream)) = gpu("attention_on_the_gpu_matches_f64") else { return };
    let base = Attention { batch: 2, heads_q: 4, heads_kv: 2, seq_q: 130, seq_kv: 130, head_dim: 128, layout: Layout::Bhsd, causal: true, scale: None };
    attention_on_gpu::<bf16>(&context, &stream, base, 2e-2, false);
    attention_on_gpu::<f16>(&context, &stream, Attention { layout: Layout::Bshd, causal: false, head_dim: 64, seq_kv: 77, ..base }, 4e-3, false);
    attention_on_gpu::<bf16>(&context, &stream, Attention { head_dim: 256, heads_kv: 1, seq_q: 33, seq_kv: 65, ..base }, 2e-2, false);
    attention_on_gpu::<f32>(&context, &stream, Attention { layout: Layout::Bshd, ..base }, 1e-4, false);
    // The tensor-core forward (BHSD, seq_q % 16 == 0, D <= 128).
    let mma = Attention { seq_q: 128, seq_kv: 200, causal: false, ..base };
    assert!(attention::uses_tensor_cores::<bf16>(&mma));
    attention_on_gpu::<bf16>(&context, &stream, mma, 2e-2, false);
    attention_on_gpu::<f16>(&context, &stream, Attention { seq_q: 64, seq_kv: 64, head_dim: 64, causal: true, ..mma }, 4e-3, false);
}

/// The tensor-core backward (`mma.sync`: delta, dK/dV, dQ; `attention_backward_deterministic`,
/// so also on sm_90) on the GPU against f64: both
/// layouts, D 64 and 128, causal or not, grouped-query heads, lengths that are not multiples
/// of its 64-row blocks, `seq_q != seq_kv`, bf16 and f16.
#[test]
fn attention_backward_on_the_tensor_cores_matches_f64() {
    let Some((context, stream)) = gpu("attention_backward_on_the_tensor_cores_matches_f64") else { return };
    let base = Attention { batch: 2, heads_q: 8, heads_kv: 2, seq_q: 300, seq_kv: 300, head_dim: 128, layout: Layout::Bhsd, causal: true, scale: None };
    let cases = [
        base,
        Attention { layout: Layout::Bshd, head_dim: 64, causal: false, seq_q: 200, seq_kv: 333, heads_kv: 8, ..base },
        Attention { layout: Layout::Bshd, head_dim: 64, seq_q: 257, seq_kv: 257, ..base },
        Attention { causal: false, seq_q: 100, seq_kv: 64, heads_kv: 4, ..base },
    ];
    for (i, shape) in cases.into_iter().enumerate() {
        assert!(attention::backward_uses_tensor_cores::<bf16>(&shape) && attention::backward_uses_tensor_cores::<f16>(&shape));
        if i % 2 == 0 {
            attention_on_gpu::<bf16>(&context, &stream, shape, 2e-2, true);
        } else {
            attention_on_gpu::<f16>(&context, &stream, shape, 4e-3, true);
        }
    }
}

/// The sm_90 backward (`ferrocuda-kernels-hopper`'s `wgmma` kernel, picked by
/// `attention_backward` on sm_90) against f64: D 64 and 128, bf16 and f16, both layouts,
/// causal or not, grouped-query heads, lengths that are not multiples of its 128-key blocks
/// or 64-query tiles, `seq_q != seq_kv`, a custom scale. Then two calls on the same inputs:
/// dK and dV equal bit for bit (one writer each), dQ (atomic adds) within rounding of each
/// other and of the deterministic path's. On another GPU the same shapes take the other paths.
/// Session 13's prep (a warp reads its 32 rows of O and dO together, `head_dim / 8` lanes a
/// row, blocks of 128 threads): the sm_90 backward, every instance, against f64. D 128 causal
/// with grouped heads, D 64 with a padded second tile, D 128 with a ragged last tile (208).
#[test]
fn s13_attention_backward_warp_prep_on_sm_90_matches_f64() {
    let Some((context, stream)) = gpu("s13_attention_backward_warp_prep_on_sm_90_matches_f64") else { return };
    let arch = context.device().arch().unwrap();
    let base = Attention { batch: 2, heads_q: 4, heads_kv: 2, seq_q: 256, seq_kv: 256, head_dim: 128, layout: Layout::Bhsd, causal: true, scale: None };
    let cases = [
        base,
        Attention { batch: 1, heads_kv: 4, seq_q: 96, seq_kv: 96, head_dim: 64, causal: false, ..base },
        Attention { batch: 1, heads_q: 2, heads_kv: 1, seq_q: 208, seq_kv: 208, causal: false, ..base },
    ];
    for shape in cases {
        if arch == 90 {
            for kernel in attention::hopper_backward_kernels::<bf16>(&shape, 90).unwrap() {
                attention_backward_on_gpu::<bf16>(&context, &stream, shape, 2e-2, Backward::Sm90(kernel));
            }
        } else {
            eprintln!("sm_{arch}: {shape:?} takes the mma.sync path here, not the sm_90 backward");
        }
        attention_backward_on_gpu::<f16>(&context, &stream, shape, 4e-3, Backward::Picked);
    }
}

#[test]
fn attention_backward_on_sm_90_matches_f64() {
    let Some((context, stream)) = gpu("attention_backward_on_sm_90_matches_f64") else { return };
    let arch = context.device().arch().unwrap();
    let base = Attention { batch: 2, heads_q: 8, heads_kv: 2, seq_q: 300, seq_kv: 300, head_dim: 128, layout: Layout::Bhsd, causal: true, scale: None };
    let cases = [
        base,
        Attention { layout: Layout::Bshd, head_dim: 64, causal: false, seq_q: 200, seq_kv: 333, heads_kv: 8, ..base },
        Attention { layout: Layout::Bshd, head_dim: 64, seq_q: 257, seq_kv: 257, ..base },
        Attention { causal: false, seq_q: 100, seq_kv: 64, heads_kv: 4, scale: Some(0.05), ..base },
        Attention { batch: 1, heads_q: 2, heads_kv: 1, seq_q: 1000, seq_kv: 1000, layout: Layout::Bshd, ..base },
        Attention { causal: true, seq_q: 130, seq_kv: 500, ..base },
    ];
    for (i, shape) in cases.into_iter().enumerate() {
        assert!(attention::hopper_backward_kernel::<bf16>(&shape, 90).is_some() && attention::hopper_backward_kernel::<f16>(&shape, 90).is_some());
        if arch != 90 {
            eprintln!("sm_{arch}: {shape:?} takes the mma.sync path here, not the sm_90 backward");
        }
        attention_on_gpu::<bf16>(&context, &stream, shape, 2e-2, false);
        if i % 2 == 1 {
            attention_on_gpu::<f16>(&context, &stream, shape, 4e-3, false);
        }
        // The other instances too (bulk or `_red`, and `_late`), where the GPU has them.
        if arch == 90 {
            let [_, other, late] = attention::hopper_backward_kernels::<bf16>(&shape, 90).unwrap();
            attention_backward_on_gpu::<bf16>(&context, &stream, shape, 2e-2, Backward::Sm90(if i % 2 == 0 { other } else { late }));
            if i % 3 == 0 {
                // (GPU run 2 passed f16 the bf16 instance's name here: refused, as it should be.)
                let [_, _, late] = attention::hopper_backward_kernels::<f16>(&shape, 90).unwrap();
                attention_backward_on_gpu::<f16>(&context, &stream, shape, 4e-3, Backward::Sm90(late));
            }
            // The trial instance (`_late_lpt`: bf16, D 128, causal), where the shape has one.
            if let Some(trial) = attention::hopper_backward_trial_kernel::<bf16>(&shape, 90) {
                attention_backward_on_gpu::<bf16>(&context, &stream, shape, 2e-2, Backward::Sm90(trial));
            }
        }
    }
    // Repeatability: dK, dV bit for bit; dQ close to itself and to the deterministic path.
    let shape = Attention { batch: 1, heads_q: 4, heads_kv: 2, seq_q: 700, seq_kv: 700, head_dim: 64, layout: Layout::Bshd, causal: true, scale: None };
    let (q, _) = input::<bf16>(shape.q_len(), 51, 1.0);
    let (k, _) = input::<bf16>(shape.kv_len(), 52, 1.0);
    let (v, _) = input::<bf16>(shape.kv_len(), 53, 1.0);
    let (dout, _) = input::<bf16>(shape.q_len(), 54, 1.0);
    let (q_, k_, v_, do_) = (up(&context, &q), up(&context, &k), up(&context, &v), up(&context, &dout));
    let (mut out, mut lse) = (zeros::<bf16>(&context, shape.q_len()), zeros::<f32>(&context, shape.q_rows()));
    attention::attention_forward(&stream, &q_, &k_, &v_, &mut out, &mut lse, shape).unwrap();
    let run = |deterministic: bool| {
        let (mut dq, mut dk, mut dv) =
            (zeros::<bf16>(&context, shape.q_len()), zeros::<bf16>(&context, shape.kv_len()), zeros::<bf16>(&context, shape.kv_len()));
        if deterministic {
            attention::attention_backward_deterministic(
                &stream,
                attention::Backward { q: &q_, k: &k_, v: &v_, out: &out, dout: &do_, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
                shape,
            )
            .unwrap();
        } else {
            attention::attention_backward(
                &stream,
                attention::Backward { q: &q_, k: &k_, v: &v_, out: &out, dout: &do_, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
                shape,
            )
            .unwrap();
        }
        (widen(&dq.to_vec().unwrap()), widen(&dk.to_vec().unwrap()), widen(&dv.to_vec().unwrap()))
    };
    let (first, second, exact) = (run(false), run(false), run(true));
    assert_eq!((&first.1, &first.2), (&second.1, &second.2), "dK and dV should not change between calls");
    assert_close("dq, second call", &second.0, &first.0, 2e-2);
    for (name, got, want) in [("dq", &first.0, &exact.0), ("dk", &first.1, &exact.1), ("dv", &first.2, &exact.2)] {
        assert_close(&format!("sm_90 {name} vs the deterministic path"), got, want, 2e-2);
    }
}

/// Session 21's `_cvt` backward instances (`hopper_backward_trial_kernels`: the bulk schedule
/// converting dQ in the kernel, the adding warp arriving on a counter per tile share a step
/// after its bulk reductions, the last arrival converting the share) against f64: D 128 without
/// the mask (`[B, H, S, D]`, grouped heads, ragged: 300 positions), D 128 causal (`_late_cvt`,
/// `[B, S, H, D]`, 333 queries over 200 keys and 130 over 500), D 64 with and without the mask
/// (ragged, grouped). A share converted before every key block has added to it, or twice, or
/// never, shows as a dQ far from f64.
#[test]
fn s21_bulk_dq_conversion_on_sm_90_matches_f64() {
    let Some((context, stream)) = gpu("s21_bulk_dq_conversion_on_sm_90_matches_f64") else { return };
    if context.device().arch().unwrap() != 90 {
        eprintln!("not sm_90: no sm_90 backward here");
        return;
    }
    let base = Attention { batch: 2, heads_q: 8, heads_kv: 2, seq_q: 300, seq_kv: 300, head_dim: 128, layout: Layout::Bhsd, causal: false, scale: None };
    let cases = [
        base,
        Attention { causal: true, layout: Layout::Bshd, seq_q: 333, seq_kv: 200, ..base },
        Attention { causal: true, seq_q: 130, seq_kv: 500, ..base },
        Attention { head_dim: 64, seq_q: 257, seq_kv: 257, layout: Layout::Bshd, ..base },
        Attention { head_dim: 64, causal: true, seq_q: 300, seq_kv: 300, heads_kv: 8, ..base },
    ];
    let mut ran = 0;
    for shape in cases {
        for trial in attention::hopper_backward_trial_kernels::<bf16>(&shape, 90) {
            if trial.contains("_cvt") && !trial.ends_with("_red_cvt") {
                attention_backward_on_gpu::<bf16>(&context, &stream, shape, 2e-2, Backward::Sm90(trial));
                ran += 1;
            }
        }
    }
    assert!(ran >= cases.len(), "a `_cvt` instance per shape at least ({ran})");
}

/// Session 17's persistent backward instances (`hopper_backward_trial_kernels` for bf16 without
/// the mask: a grid of at most one block per SM, each block taking key blocks `block, block +
/// grid, ..` of all heads, or with `_dyn` the next from a counter) with more key blocks than the GPU has SMs, so that blocks take
/// several and cross heads: against f64 (D 128 `[B, H, S, D]` 140 heads x 2 key blocks; D 64
/// `[B, S, H, D]` 144 query heads over 72, 2 key blocks, ragged), then at a benchmark shape
/// (B 8, H 16, S 1024, D 128: 1024 key blocks, about 8 a block) against the instance the call
/// picks: dK and dV are computed in the same order (equal but for code generation), dQ summed
/// by atomic adds in another order.
#[test]
fn s17_persistent_backward_on_sm_90_matches_f64_and_the_pick() {
    let Some((context, stream)) = gpu("s17_persistent_backward_on_sm_90_matches_f64_and_the_pick") else { return };
    if context.device().arch().unwrap() != 90 {
        eprintln!("not sm_90: no persistent sm_90 backward here");
        return;
    }
    let sms = context.device().multiprocessor_count().unwrap() as usize;
    let d128 = Attention { batch: 1, heads_q: 140, heads_kv: 140, seq_q: 130, seq_kv: 130, head_dim: 128, layout: Layout::Bhsd, causal: false, scale: None };
    let d64 = Attention { heads_q: 144, heads_kv: 72, seq_q: 140, seq_kv: 140, head_dim: 64, layout: Layout::Bshd, ..d128 };
    for shape in [d128, d64] {
        assert!(2 * shape.heads_kv > sms, "{shape:?}: more key blocks than the {sms} SMs");
        // The persistent instances among the pick and the trials (D 128: the two trials; D 64
        // at 6 steps a key block: the pick and the `_dyn` trial).
        let picked = attention::hopper_backward_kernel::<bf16>(&shape, 90).unwrap();
        let mut persistent = attention::hopper_backward_trial_kernels::<bf16>(&shape, 90);
        persistent.insert(0, picked);
        persistent.retain(|name| name.contains("_persistent"));
        assert_eq!(persistent.len(), 2, "{persistent:?}");
        for trial in persistent {
            attention_backward_on_gpu::<bf16>(&context, &stream, shape, 2e-2, Backward::Sm90(trial));
        }
    }
    let shape = Attention { batch: 8, heads_q: 16, heads_kv: 16, seq_q: 1024, seq_kv: 1024, ..d128 };
    let (q, _) = input::<bf16>(shape.q_len(), 61, 1.0);
    let (k, _) = input::<bf16>(shape.kv_len(), 62, 1.0);
    let (v, _) = input::<bf16>(shape.kv_len(), 63, 1.0);
    let (dout, _) = input::<bf16>(shape.q_len(), 64, 1.0);
    let (q_, k_, v_, do_) = (up(&context, &q), up(&context, &k), up(&context, &v), up(&context, &dout));
    let (mut out, mut lse) = (zeros::<bf16>(&context, shape.q_len()), zeros::<f32>(&context, shape.q_rows()));
    attention::attention_forward(&stream, &q_, &k_, &v_, &mut out, &mut lse, shape).unwrap();
    let run = |kernel: &str| {
        let (mut dq, mut dk, mut dv) =
            (zeros::<bf16>(&context, shape.q_len()), zeros::<bf16>(&context, shape.kv_len()), zeros::<bf16>(&context, shape.kv_len()));
        attention::attention_backward_sm90(
            &stream,
            kernel,
            attention::Backward { q: &q_, k: &k_, v: &v_, out: &out, dout: &do_, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
            shape,
        )
        .unwrap();
        [widen(&dq.to_vec().unwrap()), widen(&dk.to_vec().unwrap()), widen(&dv.to_vec().unwrap())]
    };
    let picked = attention::hopper_backward_kernel::<bf16>(&shape, 90).unwrap();
    let want = run(picked);
    for trial in attention::hopper_backward_trial_kernels::<bf16>(&shape, 90) {
        let got = run(trial);
        for ((name, got), want) in ["dq", "dk", "dv"].iter().zip(&got).zip(&want) {
            let same = got.iter().zip(want).filter(|(g, w)| g.to_bits() == w.to_bits()).count();
            eprintln!("{trial} vs {picked}: {name} {same} of {} equal bit for bit", got.len());
            assert_close(&format!("{trial} {name} vs {picked}"), got, want, 1e-2);
        }
    }
}

/// The sm_90 kernels (`ferrocuda-kernels-hopper`) through the safe call: every schedule the
/// call picks (pingpong, pingpong with 3-deep rings, the plain overlap one, the persistent
/// ones; session 14's picks), D 64 and 128,
/// causal or not, lengths that are not multiples of the 128-row tiles, a custom scale; the
/// backward (portable) reads their LSE. On another GPU the same shapes take the other paths
/// (printed), so the test still checks the results.
#[test]
fn attention_forward_takes_the_hopper_kernels_on_sm_90_and_matches_f64() {
    let Some((context, stream)) = gpu("attention_forward_takes_the_hopper_kernels_on_sm_90_and_matches_f64") else { return };
    let arch = context.device().arch().unwrap();
    let base = Attention { batch: 1, heads_q: 3, heads_kv: 3, seq_q: 1000, seq_kv: 1000, head_dim: 128, layout: Layout::Bhsd, causal: false, scale: None };
    let one = Attention { batch: 1, heads_q: 1, heads_kv: 1, ..base };
    let cases = [
        (base, "attention_d128_pingpong_persistent_chain_ostg"),
        (Attention { seq_q: 1100, seq_kv: 1100, ..base }, "attention_d128_pingpong"),
        (Attention { seq_q: 700, seq_kv: 700, ..base }, "attention_d128_pingpong_persistent_chain_ostg"),
        (Attention { causal: true, ..base }, "attention_d128_causal_persistent"),
        (Attention { head_dim: 64, seq_q: 300, seq_kv: 300, causal: true, ..base }, "attention_d64_causal_pingpong_persistent"),
        (Attention { head_dim: 64, seq_q: 1000, seq_kv: 1000, causal: true, ..base }, "attention_d64_causal_pingpong_persistent_q2"),
        (Attention { head_dim: 64, seq_q: 130, seq_kv: 130, scale: Some(0.05), ..base }, "attention_d64_persistent"),
        (Attention { head_dim: 64, seq_q: 1500, seq_kv: 1500, ..one }, "attention_d64_persistent"),
        (Attention { head_dim: 64, seq_q: 2100, seq_kv: 2100, ..one }, "attention_d64"),
        (Attention { head_dim: 64, seq_q: 2100, seq_kv: 2100, causal: true, ..one }, "attention_d64_causal_pingpong"),
        (Attention { seq_q: 2050, seq_kv: 2050, ..one }, "attention_d128_pingpong_s3"),
        (Attention { seq_q: 2050, seq_kv: 2050, causal: true, ..one }, "attention_d128_causal_pingpong_s3"),
        (Attention { seq_q: 4200, seq_kv: 4200, causal: true, ..one }, "attention_d128_causal_pingpong"),
    ];
    for (shape, kernel) in cases {
        assert_eq!(attention::hopper_kernel::<bf16>(&shape, 90), Some(kernel), "{shape:?}");
        if arch != 90 {
            eprintln!("sm_{arch}: {shape:?} takes the tensor-core or portable path here, not {kernel}");
        }
        attention_on_gpu::<bf16>(&context, &stream, shape, 2e-2, false);
    }
}

/// Session 22 (issue 31: D 256): the forward at D 256 through the safe call (on sm_90 the
/// `attention_d256` / `attention_d256_causal` kernels: 64-key tiles, 64-row boxes; elsewhere,
/// and for `Bshd` or grouped heads, the portable path) and the backward (portable at D 256)
/// against f64: lengths that are not multiples of the tiles, causal, a custom scale, bf16 and
/// f16. Then, on sm_90, a shape with many more query tiles than SMs (B 2, H 40, S 1030): sampled
/// rows of every D 256 instance (the picks and their `_serial` forms) against f64
/// (`reference_row`, `within_bound`).
#[test]
fn s22_d256_forward_and_backward_on_the_gpu_match_f64() {
    use ferrocuda_kernels_hopper::attention::{reference_row, within_bound};
    let Some((context, stream)) = gpu("s22_d256_forward_and_backward_on_the_gpu_match_f64") else { return };
    let arch = context.device().arch().unwrap();
    let base = Attention { batch: 1, heads_q: 3, heads_kv: 3, seq_q: 300, seq_kv: 300, head_dim: 256, layout: Layout::Bhsd, causal: false, scale: None };
    let cases = [
        (base, Some("attention_d256")),
        (Attention { causal: true, ..base }, Some("attention_d256_causal")),
        (Attention { heads_q: 1, heads_kv: 1, seq_q: 700, seq_kv: 700, causal: true, scale: Some(0.05), ..base }, Some("attention_d256_causal")),
        (Attention { seq_q: 40, seq_kv: 40, ..base }, Some("attention_d256")),
        (Attention { layout: Layout::Bshd, heads_q: 4, heads_kv: 2, seq_q: 100, seq_kv: 130, causal: true, ..base }, None),
    ];
    for (shape, kernel) in cases {
        assert_eq!(attention::hopper_kernel::<bf16>(&shape, 90), kernel, "{shape:?}");
        eprintln!("sm_{arch}: {shape:?}: forward {}", if arch == 90 { kernel.unwrap_or("portable") } else { "portable" });
        attention_on_gpu::<bf16>(&context, &stream, shape, 2e-2, false);
    }
    attention_on_gpu::<f16>(&context, &stream, Attention { seq_q: 130, seq_kv: 130, ..base }, 4e-3, false);
    if arch != 90 {
        eprintln!("sm_{arch}: no sm_90 D 256 kernels to check on many tiles here");
        return;
    }
    let shape = Attention { batch: 2, heads_q: 40, heads_kv: 40, seq_q: 1030, seq_kv: 1030, ..base };
    let (d, s, heads) = (256, shape.seq_q, shape.batch * shape.heads_q);
    let (q, _) = input::<bf16>(shape.q_len(), 71, 1.0);
    let (k, _) = input::<bf16>(shape.kv_len(), 72, 1.0);
    let (v, _) = input::<bf16>(shape.kv_len(), 73, 1.0);
    let (q_, k_, v_) = (up(&context, &q), up(&context, &k), up(&context, &v));
    for causal in [false, true] {
        let shape = Attention { causal, ..shape };
        let names = attention::hopper_forward_instances::<bf16>(&shape, 90);
        assert_eq!(names.len(), 2, "{names:?}");
        for kernel in names {
            let (mut out, mut lse) = (zeros::<bf16>(&context, shape.q_len()), zeros::<f32>(&context, shape.q_rows()));
            out.fill(bf16::from_bits(0x7fc1)).unwrap();
            attention::attention_forward_sm90(&stream, kernel, &q_, &k_, &v_, &mut out, &mut lse, shape).unwrap();
            let (out, lse) = (out.to_vec().unwrap(), lse.to_vec().unwrap());
            assert!(out.iter().all(|x| !x.is_nan()), "{kernel} {shape:?}: an element of O left unwritten");
            for i in 0..64usize {
                let (head, row) = match i {
                    0 => (0, 0),
                    1 => (heads - 1, s - 1),
                    2 => (heads - 1, 1023),
                    _ => ((i * 7919) % heads, (i * 104_729) % s),
                };
                let reference = reference_row(&q, &k, &v, d, s, head, row, causal);
                let at = (head * s + row) * d;
                let got: Vec<f32> = out[at..at + d].iter().map(|x| x.to_f32()).collect();
                within_bound(&reference, &got, lse[head * s + row]).unwrap_or_else(|why| panic!("{kernel} {shape:?}: head {head} row {row}: {why}"));
            }
            eprintln!("{shape:?}: {kernel} on sm_90, 64 sampled rows within the f64 bound");
        }
    }
}

/// The persistent forward kernels (`_persistent`: at most a block per SM, each taking query
/// tiles from a counter until all are done, the K/V rings and the ping-pong turns running on
/// across tiles), their one-tile-per-block twins and every other schedule of the shape
/// (`hopper_forward_instances`: D 64 and 128, causal or not, 2- and 3-deep rings), on shapes with several times more query tiles
/// than SMs and lengths that are not multiples of 128: all instances but the `_poly` ones agree
/// with the first (the same arithmetic per tile: within one bf16 rounding of O, 1e-5 of the LSE),
/// and sampled rows of each are within the f64 reference's bound (`reference_row`, `within_bound`). sm_90 only.
#[test]
fn attention_forward_persistent_kernels_match_their_twins_and_f64() {
    use ferrocuda_kernels_hopper::attention::{reference_row, within_bound};
    let Some((context, stream)) = gpu("attention_forward_persistent_kernels_match_their_twins_and_f64") else { return };
    let arch = context.device().arch().unwrap();
    if arch != 90 {
        eprintln!("sm_{arch}: no sm_90 forward kernels to compare here");
        return;
    }
    let base = Attention { batch: 2, heads_q: 80, heads_kv: 80, seq_q: 300, seq_kv: 300, head_dim: 128, layout: Layout::Bhsd, causal: false, scale: None };
    let long = Attention { batch: 1, heads_q: 20, heads_kv: 20, seq_q: 2050, seq_kv: 2050, ..base };
    let shapes = [
        base,
        Attention { causal: true, ..base },
        Attention { head_dim: 64, ..base },
        Attention { head_dim: 64, causal: true, ..base },
        long,
        Attention { seq_q: 2048, seq_kv: 2048, causal: true, ..long },
        Attention { head_dim: 64, seq_q: 2100, seq_kv: 2100, heads_q: 40, heads_kv: 40, ..long },
    ];
    for shape in shapes {
        // Every schedule of the shape (session 14: not only the pick and its twin), so that
        // any of them can be picked after a benchmark.
        let names = attention::hopper_forward_instances::<bf16>(&shape, 90);
        assert!(names.len() >= 2, "{shape:?}: no sm_90 forward instances");
        let (d, s, heads) = (shape.head_dim, shape.seq_q, shape.batch * shape.heads_q);
        let (q, _) = input::<bf16>(shape.q_len(), 31, 1.0);
        let (k, _) = input::<bf16>(shape.kv_len(), 32, 1.0);
        let (v, _) = input::<bf16>(shape.kv_len(), 33, 1.0);
        let (q_, k_, v_) = (up(&context, &q), up(&context, &k), up(&context, &v));
        let mut results = Vec::new();
        for kernel in names {
            let (mut out, mut lse) = (zeros::<bf16>(&context, shape.q_len()), zeros::<f32>(&context, shape.q_rows()));
            out.fill(bf16::from_bits(0x7fc1)).unwrap();
            attention::attention_forward_sm90(&stream, kernel, &q_, &k_, &v_, &mut out, &mut lse, shape).unwrap();
            let (out, lse) = (out.to_vec().unwrap(), lse.to_vec().unwrap());
            // Sampled rows against f64 (the first and last rows included).
            for i in 0..48usize {
                let (head, row) = match i {
                    0 => (0, 0),
                    1 => (heads - 1, s - 1),
                    _ => ((i * 7919) % heads, (i * 104_729) % s),
                };
                let reference = reference_row(&q, &k, &v, d, s, head, row, shape.causal);
                let at = (head * s + row) * d;
                let got: Vec<f32> = out[at..at + d].iter().map(|x| x.to_f32()).collect();
                within_bound(&reference, &got, lse[head * s + row]).unwrap_or_else(|why| panic!("{kernel} {shape:?}: head {head} row {row}: {why}"));
            }
            results.push((kernel, out, lse));
        }
        let (a, out_a, lse_a) = &results[0];
        // The `_poly` instances compute part of the exponentials with a polynomial (relative
        // error up to 1e-4), not the pick's arithmetic: they are held to the f64 bound above,
        // not to one bf16 rounding of the pick (session 15's GPU run: O[2] -0.0014114 against
        // -0.0014267, a small value from cancellation).
        for (b, out_b, lse_b) in results[1..].iter().filter(|r| !r.0.contains("_poly")) {
            for (i, (x, y)) in out_a.iter().zip(out_b).enumerate() {
                let (x, y) = (x.to_f32(), y.to_f32());
                assert!((x - y).abs() <= x.abs().max(y.abs()) / 128.0 + 1e-6, "{a} vs {b} {shape:?}: O[{i}] {x} vs {y}");
            }
            for (i, (x, y)) in lse_a.iter().zip(lse_b).enumerate() {
                assert!((x - y).abs() <= 1e-5 * x.abs().max(1.0), "{a} vs {b} {shape:?}: LSE[{i}] {x} vs {y}");
            }
        }
        let names: Vec<&str> = results.iter().map(|r| r.0).collect();
        eprintln!("{names:?} agree, sampled rows within the f64 bound: {shape:?}");
    }
}

/// Q, K, V views that do not start 16-byte aligned (TMA's rule) are not given to the sm_90
/// kernels: the call takes the tensor-core path and is still right; O and LSE outside the
/// views are untouched.
#[test]
fn attention_forward_with_misaligned_views_falls_back_and_matches_f64() {
    let Some((context, stream)) = gpu("attention_forward_with_misaligned_views_falls_back_and_matches_f64") else { return };
    let shape = Attention { batch: 1, heads_q: 2, heads_kv: 2, seq_q: 256, seq_kv: 256, head_dim: 128, layout: Layout::Bhsd, causal: true, scale: None };
    let n = shape.q_len();
    let (q, qf) = input::<bf16>(n + 1, 31, 1.0);
    let (k, kf) = input::<bf16>(n + 1, 32, 1.0);
    let (v, vf) = input::<bf16>(n + 1, 33, 1.0);
    let (q_, k_, v_) = (up(&context, &q), up(&context, &k), up(&context, &v));
    let mut out = up(&context, &vec![bf16::from_f32(7.0); n + 1]);
    let mut lse = up(&context, &vec![7.0f32; shape.q_rows() + 1]);
    attention::attention_forward(&stream, &q_.slice(1..), &k_.slice(1..), &v_.slice(1..), &mut out.slice_mut(1..), &mut lse.slice_mut(1..), shape).unwrap();
    let dims = (shape.batch, shape.heads_q, shape.heads_kv, shape.seq_q, shape.seq_kv, shape.head_dim);
    let want = attention_ref(&qf[1..], &kf[1..], &vf[1..], &vec![0.0; n], dims, false, true);
    let (out, lse) = (widen(&out.to_vec().unwrap()), lse.to_vec().unwrap());
    assert_eq!((out[0], lse[0]), (7.0, 7.0), "the element before the views was written");
    assert_close("misaligned out", &out[1..], &want.out, 2e-2);
    assert_close("misaligned lse", &lse[1..].iter().map(|&x| x as f64).collect::<Vec<_>>(), &want.lse, 1e-4);
}

/// The deterministic tensor-core backward on views that start one element in (2 bytes: its 16-byte
/// `cp.async` staging declines them and loads element by element) gives the gradients of the
/// aligned call, bit for bit, and leaves the element before each output view alone.
#[test]
fn attention_backward_on_misaligned_views_matches_the_aligned_call() {
    let Some((context, stream)) = gpu("attention_backward_on_misaligned_views_matches_the_aligned_call") else { return };
    let shape = Attention { batch: 1, heads_q: 4, heads_kv: 2, seq_q: 200, seq_kv: 200, head_dim: 128, layout: Layout::Bshd, causal: true, scale: None };
    let (n, m) = (shape.q_len(), shape.kv_len());
    let (q, _) = input::<bf16>(n + 1, 41, 1.0);
    let (k, _) = input::<bf16>(m + 1, 42, 1.0);
    let (v, _) = input::<bf16>(m + 1, 43, 1.0);
    let (dout, _) = input::<bf16>(n + 1, 44, 1.0);
    // The same values at offset 0 (aligned buffers of exactly the shape) and at offset 1.
    let aligned = (up(&context, &q[1..]), up(&context, &k[1..]), up(&context, &v[1..]), up(&context, &dout[1..]));
    let shifted = (up(&context, &q), up(&context, &k), up(&context, &v), up(&context, &dout));
    let run = |(q_, k_, v_, do_): &(DeviceBuffer<bf16>, DeviceBuffer<bf16>, DeviceBuffer<bf16>, DeviceBuffer<bf16>), at: usize| {
        let mut out = zeros::<bf16>(&context, n + 1);
        let mut lse = zeros::<f32>(&context, shape.q_rows() + 1);
        let (q, k, v, dout) = (q_.slice(at..at + n), k_.slice(at..at + m), v_.slice(at..at + m), do_.slice(at..at + n));
        attention::attention_forward(&stream, &q, &k, &v, &mut out.slice_mut(at..at + n), &mut lse.slice_mut(at..at + shape.q_rows()), shape).unwrap();
        let seven = bf16::from_f32(7.0);
        let (mut dq, mut dk, mut dv) = (up(&context, &vec![seven; n + 1]), up(&context, &vec![seven; m + 1]), up(&context, &vec![seven; m + 1]));
        let (o, l) = (out.slice(at..at + n), lse.slice(at..at + shape.q_rows()));
        attention::attention_backward_deterministic(
            &stream,
            attention::Backward {
                q: &q,
                k: &k,
                v: &v,
                out: &o,
                dout: &dout,
                lse: &l,
                dq: &mut dq.slice_mut(at..at + n),
                dk: &mut dk.slice_mut(at..at + m),
                dv: &mut dv.slice_mut(at..at + m),
            },
            shape,
        )
        .unwrap();
        let (dq, dk, dv) = (dq.to_vec().unwrap(), dk.to_vec().unwrap(), dv.to_vec().unwrap());
        if at == 1 {
            assert_eq!((dq[0], dk[0], dv[0]), (seven, seven, seven), "the element before the views was written");
        }
        (dq[at..at + n].to_vec(), dk[at..at + m].to_vec(), dv[at..at + m].to_vec())
    };
    assert_eq!(run(&aligned, 0), run(&shifted, 1));
}

/// Captured into a graph, an sm_90 shape takes the tensor-core path (the sm_90 call copies its
/// tensor maps from host memory that a replay could not read); the replayed graph is right.
#[test]
fn attention_forward_captured_in_a_graph_replays_correctly() {
    let Some((context, _)) = gpu("attention_forward_captured_in_a_graph_replays_correctly") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let shape = Attention { batch: 1, heads_q: 2, heads_kv: 2, seq_q: 256, seq_kv: 256, head_dim: 64, layout: Layout::Bhsd, causal: false, scale: None };
    let (q, qf) = input::<bf16>(shape.q_len(), 41, 1.0);
    let (k, kf) = input::<bf16>(shape.kv_len(), 42, 1.0);
    let (v, vf) = input::<bf16>(shape.kv_len(), 43, 1.0);
    let (q_, k_, v_) = (up(&context, &q), up(&context, &k), up(&context, &v));
    let (mut out, mut lse) = (zeros::<bf16>(&context, shape.q_len()), zeros::<f32>(&context, shape.q_rows()));
    // Loads the modules outside the capture (loading inside one is refused).
    attention::attention_forward(&stream, &q_, &k_, &v_, &mut out, &mut lse, shape).unwrap();
    out.copy_from_host(&vec![bf16::from_f32(0.0); shape.q_len()]).unwrap();
    let graph = stream
        .capture(|s| {
            attention::attention_forward(s, &q_, &k_, &v_, &mut out, &mut lse, shape).map_err(|e| match e {
                KernelsError::Gpu(e) => e,
                other => panic!("{other}"),
            })
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    // SAFETY: every captured buffer lives until after the synchronisation below, used on `stream` only.
    unsafe { exec.launch(&stream) }.unwrap();
    stream.synchronize().unwrap();
    let dims = (shape.batch, shape.heads_q, shape.heads_kv, shape.seq_q, shape.seq_kv, shape.head_dim);
    let want = attention_ref(&qf, &kf, &vf, &vec![0.0; shape.q_len()], dims, false, false);
    assert_close("graph out", &widen(&out.to_vec().unwrap()), &want.out, 2e-2);
}

/// Regression (s10-torch; audit 2026-11-27d D3): the tensor-core backward allocated its `delta` rows itself instead of
/// taking them from the caller's scratch, so `attention_backward_with_scratch` ("allocates
/// nothing") was refused inside a graph capture (AllocationInCapture), which a captured torch
/// training step (ferrocuda_torch's attention op) meets. Captured now, and the replay matches the
/// eager call.
#[test]
fn d3_attention_backward_with_scratch_on_the_tensor_cores_is_captured_into_a_graph() {
    let Some((context, _)) = gpu("d3_attention_backward_with_scratch_on_the_tensor_cores_is_captured_into_a_graph") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let shape = Attention { batch: 1, heads_q: 4, heads_kv: 2, seq_q: 96, seq_kv: 96, head_dim: 64, layout: Layout::Bhsd, causal: true, scale: None };
    assert!(attention::backward_uses_tensor_cores::<bf16>(&shape));
    let (q, _) = input::<bf16>(shape.q_len(), 51, 1.0);
    let (k, _) = input::<bf16>(shape.kv_len(), 52, 1.0);
    let (v, _) = input::<bf16>(shape.kv_len(), 53, 1.0);
    let (dout, _) = input::<bf16>(shape.q_len(), 54, 1.0);
    let (q_, k_, v_, do_) = (up(&context, &q), up(&context, &k), up(&context, &v), up(&context, &dout));
    let (mut out, mut lse) = (zeros::<bf16>(&context, shape.q_len()), zeros::<f32>(&context, shape.q_rows()));
    attention::attention_forward(&stream, &q_, &k_, &v_, &mut out, &mut lse, shape).unwrap();
    let mut scratch = zeros::<f32>(&context, attention::backward_scratch_len(&shape));
    let grads = |context: &Context| (zeros::<bf16>(context, shape.q_len()), zeros::<bf16>(context, shape.kv_len()), zeros::<bf16>(context, shape.kv_len()));
    // Eager, which also loads the modules (loading inside a capture is refused). On sm_90 the
    // eager call takes the sm_90 kernel (dQ by atomic adds) and the captured one the tensor
    // cores, so the replay is compared with the deterministic call (the same kernels).
    let (mut dq, mut dk, mut dv) = grads(&context);
    attention::attention_backward_with_scratch(
        &stream,
        attention::Backward { q: &q_, k: &k_, v: &v_, out: &out, dout: &do_, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
        &mut scratch,
        shape,
    )
    .unwrap();
    attention::attention_backward_deterministic(
        &stream,
        attention::Backward { q: &q_, k: &k_, v: &v_, out: &out, dout: &do_, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
        shape,
    )
    .unwrap();
    let (mut gq, mut gk, mut gv) = grads(&context);
    let graph = stream
        .capture(|s| {
            attention::attention_backward_with_scratch(
                s,
                attention::Backward { q: &q_, k: &k_, v: &v_, out: &out, dout: &do_, lse: &lse, dq: &mut gq, dk: &mut gk, dv: &mut gv },
                &mut scratch,
                shape,
            )
            .map_err(|e| match e {
                KernelsError::Gpu(e) => e,
                other => panic!("{other}"),
            })
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    // SAFETY: every captured buffer lives until after the synchronisation below, used on `stream` only.
    unsafe { exec.launch(&stream) }.unwrap();
    stream.synchronize().unwrap();
    for (what, got, want) in [("dq", &gq, &dq), ("dk", &gk, &dk), ("dv", &gv, &dv)] {
        assert_eq!(got.to_vec().unwrap(), want.to_vec().unwrap(), "{what}: the replayed graph differs from the eager call (deterministic kernels)");
    }
}

/// The sm_90 backward on the caller's scratch (`backward_scratch_len_sm90` long) allocates
/// nothing and writes its tensor maps with a kernel launch, so it is recorded into a CUDA graph
/// (before s11-bwd a capturing stream always took the `mma.sync` path). The replay runs the
/// sm_90 kernel: its dK and dV (summed in registers in a fixed order) equal the eager sm_90
/// call's bit for bit, dQ (atomic adds) is close to it, and all three match f64. A scratch one
/// element short takes the tensor cores inside the capture, as before.
#[test]
fn attention_backward_with_scratch_on_sm_90_is_captured_into_a_graph() {
    let Some((context, _)) = gpu("attention_backward_with_scratch_on_sm_90_is_captured_into_a_graph") else { return };
    let arch = context.device().arch().unwrap();
    let stream = Stream::non_blocking(&context).unwrap();
    let shape = Attention { batch: 2, heads_q: 4, heads_kv: 2, seq_q: 200, seq_kv: 200, head_dim: 128, layout: Layout::Bshd, causal: true, scale: None };
    let (q, qf) = input::<bf16>(shape.q_len(), 61, 1.0);
    let (k, kf) = input::<bf16>(shape.kv_len(), 62, 1.0);
    let (v, vf) = input::<bf16>(shape.kv_len(), 63, 1.0);
    let (dout, doutf) = input::<bf16>(shape.q_len(), 64, 1.0);
    let (q_, k_, v_, do_) = (up(&context, &q), up(&context, &k), up(&context, &v), up(&context, &dout));
    let (mut out, mut lse) = (zeros::<bf16>(&context, shape.q_len()), zeros::<f32>(&context, shape.q_rows()));
    attention::attention_forward(&stream, &q_, &k_, &v_, &mut out, &mut lse, shape).unwrap();
    let len = attention::backward_scratch_len_sm90(&shape);
    assert!(len > attention::backward_scratch_len(&shape));
    let grads = |context: &Context| (zeros::<bf16>(context, shape.q_len()), zeros::<bf16>(context, shape.kv_len()), zeros::<bf16>(context, shape.kv_len()));
    let dims = (shape.batch, shape.heads_q, shape.heads_kv, shape.seq_q, shape.seq_kv, shape.head_dim);
    let want = attention_ref(&qf, &kf, &vf, &doutf, dims, true, true);
    for short in [false, true] {
        let mut scratch = zeros::<f32>(&context, len - short as usize);
        // Eager (loads the modules, which a capture may not): the sm_90 kernel on sm_90, here
        // on the caller's scratch when it is long enough.
        let (mut dq, mut dk, mut dv) = grads(&context);
        attention::attention_backward_with_scratch(
            &stream,
            attention::Backward { q: &q_, k: &k_, v: &v_, out: &out, dout: &do_, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
            &mut scratch,
            shape,
        )
        .unwrap();
        let (mut gq, mut gk, mut gv) = grads(&context);
        let graph = stream
            .capture(|s| {
                attention::attention_backward_with_scratch(
                    s,
                    attention::Backward { q: &q_, k: &k_, v: &v_, out: &out, dout: &do_, lse: &lse, dq: &mut gq, dk: &mut gk, dv: &mut gv },
                    &mut scratch,
                    shape,
                )
                .map_err(|e| match e {
                    KernelsError::Gpu(e) => e,
                    other => panic!("{other}"),
                })
            })
            .unwrap();
        let exec = graph.instantiate().unwrap();
        // Twice: the second replay starts from the first one's scratch (dQ is zeroed inside).
        for _ in 0..2 {
            // SAFETY: every captured buffer lives until after the synchronisation below, used on `stream` only.
            unsafe { exec.launch(&stream) }.unwrap();
        }
        stream.synchronize().unwrap();
        let what = if short { "short scratch" } else { "sm_90 scratch" };
        assert_close(&format!("graph dq, {what}"), &widen(&gq.to_vec().unwrap()), &want.dq, 2e-2);
        assert_close(&format!("graph dk, {what}"), &widen(&gk.to_vec().unwrap()), &want.dk, 2e-2);
        assert_close(&format!("graph dv, {what}"), &widen(&gv.to_vec().unwrap()), &want.dv, 2e-2);
        if arch == 90 && !short {
            for (name, got, eager) in [("dk", &gk, &dk), ("dv", &gv, &dv)] {
                assert_eq!(got.to_vec().unwrap(), eager.to_vec().unwrap(), "{name}: the replay did not run the sm_90 kernel the eager call ran");
            }
            assert_close("graph dq vs eager", &widen(&gq.to_vec().unwrap()), &widen(&dq.to_vec().unwrap()), 1e-2);
        }
    }
}

fn gemm_ref(a: &[f64], b: &[f64], s: GemmShape, bias: Option<&[f64]>, gelu: bool) -> Vec<f64> {
    let mut c = vec![0.0; s.batch * s.m * s.n];
    for p in 0..s.batch {
        let (a, b) = (&a[p * s.m * s.k..], &b[p * s.k * s.n..]);
        for i in 0..s.m {
            for j in 0..s.n {
                let mut acc = 0.0;
                for l in 0..s.k {
                    let x = if s.transpose_a { a[l * s.m + i] } else { a[i * s.k + l] };
                    let y = if s.transpose_b { b[j * s.k + l] } else { b[l * s.n + j] };
                    acc += x * y;
                }
                acc += bias.map_or(0.0, |b| b[j]);
                c[p * s.m * s.n + i * s.n + j] = if gelu { gelu_ref(acc) } else { acc };
            }
        }
    }
    c
}

#[test]
fn gemm_on_the_gpu_matches_f64() {
    let Some((context, stream)) = gpu("gemm_on_the_gpu_matches_f64") else { return };
    let engine = GemmEngine::new(&stream).unwrap();
    for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
        let s = GemmShape { m: 96, n: 80, k: 72, batch: 1, transpose_a: ta, transpose_b: tb };
        let (a, af) = input::<bf16>(s.m * s.k, 31, 1.0);
        let (b, bf) = input::<bf16>(s.k * s.n, 32, 1.0);
        let (bias, biasf) = input::<bf16>(s.n, 33, 1.0);
        let (a_, b_, bias_) = (up(&context, &a), up(&context, &b), up(&context, &bias));
        let mut c = zeros::<bf16>(&context, s.m * s.n);
        gemm::gemm(&engine, &a_, &b_, &mut c, s, GemmEpilogue::BiasGelu(&bias_), 1.0, 0.0).unwrap();
        assert_close(&format!("gemm bf16 bias+gelu {s:?}"), &widen(&c.to_vec().unwrap()), &gemm_ref(&af, &bf, s, Some(&biasf), true), 2e-2);
        let mut c32 = zeros::<f32>(&context, s.m * s.n);
        gemm::gemm(&engine, &a_, &b_, &mut c32, s, GemmEpilogue::None, 1.0, 0.0).unwrap();
        assert_close(&format!("gemm bf16->f32 {s:?}"), &widen(&c32.to_vec().unwrap()), &gemm_ref(&af, &bf, s, None, false), 1e-4);
    }
    // A strided batch in f32 (TF32 is not used: f32 accumulation of f32 products).
    let s = GemmShape { m: 33, n: 17, k: 65, batch: 3, transpose_a: false, transpose_b: true };
    let (a, af) = input::<f32>(s.batch * s.m * s.k, 34, 1.0);
    let (b, bf) = input::<f32>(s.batch * s.k * s.n, 35, 1.0);
    let mut c = zeros::<f32>(&context, s.batch * s.m * s.n);
    gemm::gemm(&engine, &up(&context, &a), &up(&context, &b), &mut c, s, GemmEpilogue::None, 1.0, 0.0).unwrap();
    assert_close("gemm f32 batched", &widen(&c.to_vec().unwrap()), &gemm_ref(&af, &bf, s, None, false), 1e-4);
    // f16 with a bias only.
    let s = GemmShape::new(64, 48, 40);
    let (a, af) = input::<f16>(s.m * s.k, 36, 1.0);
    let (b, bf) = input::<f16>(s.k * s.n, 37, 1.0);
    let (bias, biasf) = input::<f16>(s.n, 38, 1.0);
    let mut c = zeros::<f16>(&context, s.m * s.n);
    gemm::gemm(&engine, &up(&context, &a), &up(&context, &b), &mut c, s, GemmEpilogue::Bias(&up(&context, &bias)), 1.0, 0.0).unwrap();
    assert_close("gemm f16 bias", &widen(&c.to_vec().unwrap()), &gemm_ref(&af, &bf, s, Some(&biasf), false), 4e-3);
}

#[test]
fn wrong_shapes_are_refused_on_the_gpu_before_anything_is_queued() {
    let Some((context, stream)) = gpu("wrong_shapes_are_refused_on_the_gpu_before_anything_is_queued") else { return };
    let shape = Rows { rows: 4, cols: 768 };
    let x = up(&context, &vec![bf16::from_f32(1.0); shape.len()]);
    let gamma = up(&context, &vec![bf16::from_f32(1.0); 512]);
    let mut out = up(&context, &vec![bf16::from_f32(7.0); shape.len()]);
    let mut rstd = zeros::<f32>(&context, shape.rows);
    let err = rows::rmsnorm(&stream, &x, &gamma, &mut out, &mut rstd, shape, 1e-6).unwrap_err();
    assert!(matches!(err, KernelsError::Shape { operand: "weight", got: 512, .. }), "{err}");
    stream.synchronize().unwrap();
    assert!(out.to_vec().unwrap().iter().all(|v| v.to_f32() == 7.0), "nothing was queued");
    let engine = GemmEngine::new(&stream).unwrap();
    let a = zeros::<bf16>(&context, 8 * 4);
    let mut c = zeros::<bf16>(&context, 8 * 8);
    let err = gemm::gemm(&engine, &a, &a, &mut c, GemmShape::new(8, 8, 5), GemmEpilogue::None, 1.0, 0.0).unwrap_err();
    assert!(matches!(err, KernelsError::Shape { operand: "a", .. }), "{err}");
}

/// Audit 2026-11-28, S1: `hopper_gemm_bf16` builds its two tensor maps per call, copies them
/// from its stack and launches on them: memory that lives only for the call. It checked for a
/// capture first, and a capture begun by another thread during the call recorded the rest of it
/// (a graph whose replays read a dead stack frame and freed maps). Now the call holds
/// `Stream::hold_off_capture` from its check to its launch. One thread runs the GEMM on a stream
/// while another keeps capturing the same stream with nothing of its own: every graph must stay
/// empty (a node is the other thread's work; a capture the driver invalidated over it fails its
/// `expect`), and every call runs or is refused by name. sm_90 only (elsewhere the GEMM refuses
/// `arch`, which `hopper_gemm_on_sm_90_matches_f64_and_cublas_at_ragged_shapes` checks).
#[test]
fn s1_hopper_gemm_beside_captures_on_another_thread_records_nothing_into_them() {
    let Some((context, _)) = gpu("s1_hopper_gemm_beside_captures_on_another_thread_records_nothing_into_them") else { return };
    if context.device().arch().unwrap() != 90 {
        eprintln!("SKIPPED s1_hopper_gemm_beside_captures_on_another_thread_records_nothing_into_them: not sm_90");
        return;
    }
    let stream = Stream::non_blocking(&context).unwrap();
    let (m, n, k) = (128, 256, 64);
    let (a, b) = (zeros::<bf16>(&context, m * k), zeros::<bf16>(&context, n * k));
    let mut c = zeros::<bf16>(&context, m * n);
    // Once outside any capture: its module loads now (a capture refuses a load).
    gemm::hopper_gemm_bf16(&stream, &a, &b, &mut c, m, n, k).unwrap();
    stream.synchronize().unwrap();
    // Gaps between the captures, so that some calls get through.
    let capturer = ferrocuda_test_support::CaptureLoop::start(&stream, std::time::Duration::from_micros(20));
    let (mut ran, mut refused) = (0u32, 0u32);
    for _ in 0..2000 {
        match gemm::hopper_gemm_bf16(&stream, &a, &b, &mut c, m, n, k) {
            Ok(()) => ran += 1,
            Err(KernelsError::Unsupported { parameter: "stream", .. })
            | Err(KernelsError::Gpu(ferrocuda_host::Error::CallMemoryInCapture { .. } | ferrocuda_host::Error::AllocationInCapture { .. })) => refused += 1,
            Err(other) => panic!("hopper_gemm_bf16 beside a capture failed otherwise: {other}"),
        }
    }
    let seen = capturer.finish();
    eprintln!(
        "s1 hopper_gemm_bf16: {ran} ran, {refused} refused during {} captures, {} graphs with a node, {} failed",
        seen.captures, seen.with_nodes, seen.failed
    );
    assert!(ran > 0 && seen.captures > 0, "one side never ran: the test shows nothing");
    assert_eq!(seen.with_nodes, 0, "a capture recorded another thread's GEMM (its maps live only for the call)");
    assert_eq!(seen.failed, 0, "an empty capture failed (the driver refused work another thread put in it)");
    stream.synchronize().unwrap();
}

/// The sm_90 bf16 GEMM (`gemm::hopper_gemm_bf16`, `c = a · bᵀ`) on an H100/H200, C poisoned
/// with NaN first: small shapes entry by entry against f64, with partial tiles at the M, N
/// and K edges; larger ones (persistent blocks walking several tiles, 4096³) against cuBLAS
/// (bf16 in, f32 out: never the sm_90 kernel) everywhere and f64 on samples. Two GEMMs of
/// different shapes are queued back to back before either is read (each has its own maps).
/// On another GPU the call must refuse, naming `arch`.
#[test]
fn hopper_gemm_on_sm_90_matches_f64_and_cublas_at_ragged_shapes() {
    use ferrocuda_kernels_hopper::gemm::{reference_entry, within_bound};
    let Some((context, stream)) = gpu("hopper_gemm_on_sm_90_matches_f64_and_cublas_at_ragged_shapes") else { return };
    let arch = context.device().arch().unwrap();
    let engine = GemmEngine::new(&stream).unwrap();
    let shapes = [(128, 256, 64), (200, 300, 72), (1, 2, 8), (129, 258, 8), (333, 510, 1000), (2048 + 64, 1536 + 2, 776), (4096, 4096, 4096)];
    if arch != 90 {
        let (a, b) = (zeros::<bf16>(&context, 128 * 64), zeros::<bf16>(&context, 256 * 64));
        let mut c = zeros::<bf16>(&context, 128 * 256);
        let err = gemm::hopper_gemm_bf16(&stream, &a, &b, &mut c, 128, 256, 64).unwrap_err();
        assert!(matches!(err, KernelsError::Unsupported { parameter: "arch", .. }), "{err}");
        return;
    }
    let mut pending = Vec::new();
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        let (a, _) = input::<bf16>(m * k, 40 + i as u64, 1.0);
        let (b, _) = input::<bf16>(n * k, 60 + i as u64, 1.0);
        let (a_, b_) = (up(&context, &a), up(&context, &b));
        let mut c = up(&context, &vec![bf16::NAN; m * n]);
        gemm::hopper_gemm_bf16(&stream, &a_, &b_, &mut c, m, n, k).unwrap();
        pending.push((m, n, k, a, b, a_, b_, c));
    }
    for (m, n, k, a, b, a_, b_, c) in pending {
        let got = c.to_vec().unwrap();
        let what = format!("hopper_gemm_bf16 {m}x{n}x{k}");
        let entries: Vec<(usize, usize)> = if m * n * k <= 1 << 27 {
            (0..m).flat_map(|i| (0..n).map(move |j| (i, j))).collect()
        } else {
            (0..4096).map(|s: usize| ((s * 7919) % m, (s * 104_729) % n)).collect()
        };
        for (i, j) in entries {
            let reference = reference_entry(&a, &b, k, i, j);
            let value = got[i * n + j].to_f32();
            assert!(within_bound(value, reference), "{what}: C[{i}][{j}] = {value}, f64 {}", reference.0);
        }
        let mut blas = zeros::<f32>(&context, m * n);
        let shape = GemmShape { transpose_b: true, ..GemmShape::new(m, n, k) };
        gemm::gemm(&engine, &a_, &b_, &mut blas, shape, GemmEpilogue::None, 1.0, 0.0).unwrap();
        let blas = blas.to_vec().unwrap();
        for (x, (g, w)) in got.iter().zip(&blas).enumerate() {
            let (g, w) = (g.to_f32(), *w);
            // Ours is rounded to bf16 (half an ulp: 2^-9 relative), cuBLAS's f32 is not; both
            // sum in f32 in different orders.
            assert!((g - w).abs() <= w.abs() / 256.0 + 1e-3 * (k as f32).sqrt(), "{what} vs cuBLAS at {x}: {g} vs {w}");
        }
    }
    // Refusals, before anything is queued, naming the operand.
    let (a, b) = (zeros::<bf16>(&context, 64 * 24 + 8), zeros::<bf16>(&context, 64 * 24));
    let mut c = up(&context, &vec![bf16::from_f32(7.0); 64 * 64]);
    let refused = |err: KernelsError| match err {
        KernelsError::Unsupported { parameter, .. } | KernelsError::Shape { operand: parameter, .. } => parameter,
        other => panic!("unexpected error {other}"),
    };
    assert_eq!(refused(gemm::hopper_gemm_bf16(&stream, &a.slice(0..64 * 20), &b.slice(0..64 * 20), &mut c, 64, 64, 20).unwrap_err()), "k");
    assert_eq!(refused(gemm::hopper_gemm_bf16(&stream, &a.slice(0..64 * 24), &b, &mut c.slice_mut(0..64 * 63), 64, 63, 24).unwrap_err()), "n");
    assert_eq!(refused(gemm::hopper_gemm_bf16(&stream, &a.slice(4..4 + 64 * 24), &b, &mut c, 64, 64, 24).unwrap_err()), "a", "8-byte aligned view");
    assert_eq!(refused(gemm::hopper_gemm_bf16(&stream, &a, &b, &mut c, 64, 64, 24).unwrap_err()), "a", "wrong length");
    stream.synchronize().unwrap();
    assert!(c.to_vec().unwrap().iter().all(|v| v.to_f32() == 7.0), "nothing was queued");
    // The host's map of a view (what the call builds): refused for a view that does not start
    // 16-byte aligned or is shorter than the array it would describe.
    use ferrocuda_host::{TensorDataType, TensorMap, TensorSwizzle};
    let tiled =
        |view: &ferrocuda_host::DeviceView<'_, bf16>| TensorMap::tiled_view(view, TensorDataType::Bf16, &[64, 8], &[64, 8], TensorSwizzle::B128).is_ok();
    assert!(tiled(&a.slice(0..64 * 8)));
    assert!(!tiled(&a.slice(4..4 + 64 * 8)), "an 8-byte aligned view");
    assert!(!tiled(&a.slice(0..64 * 8 - 1)), "a view shorter than the array");
}

/// The engine's sm_90 path (`GemmEngine::hopper_gemm_bf16_with`: tensor maps cached per
/// operand address and shape) with every schedule (plain, balanced grid, grouped tile order,
/// clusters of two sharing B by multicast, and a cluster schedule on an odd number of M tiles,
/// which runs the plain kernel), C poisoned with NaN, against f64 (every entry of the small
/// shapes, samples of the large). Then the cache: a second call on the same operands builds
/// no map; a buffer freed and another allocated (possibly at the same address) with other
/// values gives that buffer's product (a map is only an address and a layout, and the
/// launch passes and declares the operand itself); views of one buffer at other offsets get
/// their own maps; the cache never holds more than `MAP_CACHE_CAPACITY` maps.
#[test]
fn hopper_gemm_engine_schedules_and_cached_maps_match_f64() {
    use ferrocuda_kernels::gemm::{HopperSchedule, HopperStore, MAP_CACHE_CAPACITY};
    use ferrocuda_kernels_hopper::gemm::{reference_entry, within_bound};
    let Some((context, stream)) = gpu("hopper_gemm_engine_schedules_and_cached_maps_match_f64") else { return };
    if context.device().arch().unwrap() != 90 {
        eprintln!("not sm_90: the engine's sm_90 path refuses (checked by hopper_gemm_on_sm_90_matches_f64_and_cublas_at_ragged_shapes)");
        return;
    }
    let engine = GemmEngine::new(&stream).unwrap();
    let plain = HopperSchedule::PLAIN;
    let schedules = [
        plain,
        HopperSchedule { balanced_grid: true, ..plain },
        HopperSchedule { group: 3, balanced_grid: true, ..plain },
        HopperSchedule { cluster: true, ..plain },
        HopperSchedule { cluster: true, group: 2, balanced_grid: true, ..HopperSchedule::PLAIN },
        // The copy-engine epilogue (session 16): both ring depths, plain and in clusters (N not
        // a multiple of 8 runs the direct stores).
        HopperSchedule { store: HopperStore::Tma, group: 8, balanced_grid: true, ..plain },
        HopperSchedule { store: HopperStore::Tma3, group: 16, balanced_grid: true, ..plain },
        HopperSchedule { store: HopperStore::Tma, cluster: true, group: 2, balanced_grid: true },
        HopperSchedule { store: HopperStore::Tma3, cluster: true, ..plain },
    ];
    let check = |what: &str, a: &[bf16], b: &[bf16], got: &[bf16], (m, n, k): (usize, usize, usize)| {
        let entries: Vec<(usize, usize)> = if m * n <= 1 << 18 {
            (0..m).flat_map(|i| (0..n).map(move |j| (i, j))).collect()
        } else {
            (0..4096).map(|s: usize| ((s * 7919) % m, (s * 104_729) % n)).collect()
        };
        for (i, j) in entries {
            let reference = reference_entry(a, b, k, i, j);
            let value = got[i * n + j].to_f32();
            assert!(within_bound(value, reference), "{what} {m}x{n}x{k}: C[{i}][{j}] = {value}, f64 {}", reference.0);
        }
    };
    // (M tiles even: 512 and 2048 + 256; odd: 300 and 1000.)
    for (i, &(m, n, k)) in [(512, 768, 128), (300, 258, 72), (2048 + 256, 1536 + 2, 776), (1000, 512, 512), (700, 1000, 200)].iter().enumerate() {
        let (a, _) = input::<bf16>(m * k, 140 + i as u64, 1.0);
        let (b, _) = input::<bf16>(n * k, 160 + i as u64, 1.0);
        let (a_, b_) = (up(&context, &a), up(&context, &b));
        for schedule in schedules {
            let mut c = up(&context, &vec![bf16::NAN; m * n]);
            engine.hopper_gemm_bf16_with(schedule, &a_, &b_, &mut c, m, n, k).unwrap();
            check(&format!("{schedule:?}"), &a, &b, &c.to_vec().unwrap(), (m, n, k));
        }
    }
    // The cache: the same operands again build nothing.
    let (m, n, k) = (256, 512, 64);
    let (a, _) = input::<bf16>(m * k, 200, 1.0);
    let (b, _) = input::<bf16>(n * k, 201, 1.0);
    let b_ = up(&context, &b);
    let mut c = up(&context, &vec![bf16::NAN; m * n]);
    {
        let a_ = up(&context, &a);
        engine.hopper_gemm_bf16_with(plain, &a_, &b_, &mut c, m, n, k).unwrap();
        let built = engine.tensor_maps_built();
        for _ in 0..3 {
            engine.hopper_gemm_bf16_with(plain, &a_, &b_, &mut c, m, n, k).unwrap();
        }
        assert_eq!(engine.tensor_maps_built(), built, "steady calls on the same operands built maps");
        check("cached", &a, &b, &c.to_vec().unwrap(), (m, n, k));
    }
    // `a_` is dropped; new buffers (the allocator may hand out the same address) with other
    // values: each call's result is its own operands' product.
    // (Odd rounds store through the copy engine: C's cached map meets reallocated buffers too.)
    for round in 0..4u64 {
        let (a2, _) = input::<bf16>(m * k, 300 + round, 1.0);
        let a2_ = up(&context, &a2);
        let mut c2 = up(&context, &vec![bf16::NAN; m * n]);
        let schedule = if round % 2 == 1 { HopperSchedule { store: HopperStore::Tma, ..plain } } else { plain };
        engine.hopper_gemm_bf16_with(schedule, &a2_, &b_, &mut c2, m, n, k).unwrap();
        check(&format!("a reallocated (round {round})"), &a2, &b, &c2.to_vec().unwrap(), (m, n, k));
    }
    // Views at other offsets of one buffer: other addresses, other maps, the right rows.
    let (big, _) = input::<bf16>(2 * m * k, 400, 1.0);
    let big_ = up(&context, &big);
    for half in 0..2 {
        let view = big_.slice(half * m * k..(half + 1) * m * k);
        let mut c3 = up(&context, &vec![bf16::NAN; m * n]);
        engine.hopper_gemm_bf16_with(plain, &view, &b_, &mut c3, m, n, k).unwrap();
        check(&format!("view {half}"), &big[half * m * k..(half + 1) * m * k], &b, &c3.to_vec().unwrap(), (m, n, k));
    }
    // Many distinct operands: the cache stays bounded and every result is right.
    let mut keep = Vec::new();
    for round in 0..MAP_CACHE_CAPACITY as u64 {
        let (x, _) = input::<bf16>(64 * 64, 500 + round, 1.0);
        keep.push((x.clone(), up(&context, &x)));
    }
    for (x, x_) in &keep {
        let mut c4 = up(&context, &vec![bf16::NAN; 64 * 64]);
        engine.hopper_gemm_bf16_with(plain, x_, x_, &mut c4, 64, 64, 64).unwrap();
        check("many operands", x, x, &c4.to_vec().unwrap(), (64, 64, 64));
        assert!(engine.tensor_maps_cached() <= MAP_CACHE_CAPACITY);
    }
    // `gemm` on the sm_90 path goes through the engine's cache too (when the table picks it);
    // the per-call form builds its own maps and matches.
    let a_ = up(&context, &a);
    let mut c5 = up(&context, &vec![bf16::NAN; m * n]);
    gemm::hopper_gemm_bf16(&stream, &a_, &b_, &mut c5, m, n, k).unwrap();
    check("per-call maps", &a, &b, &c5.to_vec().unwrap(), (m, n, k));
}

/// `gemm::gemm` on bf16 `x · Wᵀ` shapes: whichever path the table picks (the sm_90 kernel
/// where it measured a win, cuBLASLt elsewhere), the result matches f64 on samples.
#[test]
fn gemm_on_bf16_linear_shapes_matches_f64_on_the_path_the_table_picks() {
    use ferrocuda_kernels_hopper::gemm::{reference_entry, within_bound};
    let Some((context, stream)) = gpu("gemm_on_bf16_linear_shapes_matches_f64_on_the_path_the_table_picks") else { return };
    let arch = context.device().arch().unwrap();
    let engine = GemmEngine::new(&stream).unwrap();
    for (m, n, k) in [(4096, 4096, 4096), (8192, 8192, 8192), (1000, 768, 3072)] {
        let shape = GemmShape { transpose_b: true, ..GemmShape::new(m, n, k) };
        let path = gemm::gemm_path(shape, gemm::hopper_gemm_fits(shape, true, false, arch));
        let (a, _) = input::<bf16>(m * k, 80, 1.0);
        let (b, _) = input::<bf16>(n * k, 81, 1.0);
        let mut c = up(&context, &vec![bf16::NAN; m * n]);
        gemm::gemm(&engine, &up(&context, &a), &up(&context, &b), &mut c, shape, GemmEpilogue::None, 1.0, 0.0).unwrap();
        let got = c.to_vec().unwrap();
        for s in 0..2048usize {
            let (i, j) = ((s * 7919) % m, (s * 104_729) % n);
            let reference = reference_entry(&a, &b, k, i, j);
            let value = got[i * n + j].to_f32();
            assert!(within_bound(value, reference), "gemm {m}x{n}x{k} on {path:?}: C[{i}][{j}] = {value}, f64 {}", reference.0);
        }
        eprintln!("gemm bf16 {m}x{n}x{k}: path {path:?}, 2048 samples within bound");
    }
}

/// Audit 2026-11-27f F12-4: the allocating forms (`attention_backward`,
/// `attention_backward_deterministic`, `rmsnorm_backward`, `layernorm_backward`) check every
/// operand before they allocate their scratch. With one operand one element short, inside a
/// capture, each names that operand; it used to be the scratch allocation's
/// `AllocationInCapture`, which named nothing of the caller's mistake (and outside a capture an
/// allocation and a memset were queued for a call then refused).
#[test]
fn f12_4_allocating_forms_name_a_short_operand_before_allocating_even_inside_a_capture() {
    let Some((context, stream)) = gpu("f12_4_allocating_forms_name_a_short_operand_before_allocating_even_inside_a_capture") else { return };
    let shape = Attention { batch: 1, heads_q: 2, heads_kv: 2, seq_q: 64, seq_kv: 64, head_dim: 64, layout: Layout::Bhsd, causal: false, scale: None };
    let (ql, kl) = (shape.q_len(), shape.kv_len());
    let (q, k, v, o, d_o) =
        (zeros::<bf16>(&context, ql), zeros::<bf16>(&context, kl), zeros::<bf16>(&context, kl), zeros::<bf16>(&context, ql), zeros::<bf16>(&context, ql));
    let lse = zeros::<f32>(&context, shape.q_rows());
    let (mut dq, mut dk, mut dv) = (zeros::<bf16>(&context, ql), zeros::<bf16>(&context, kl), zeros::<bf16>(&context, kl - 1));
    let rs = Rows { rows: 8, cols: 768 };
    let (dout, x, w) = (zeros::<bf16>(&context, rs.len()), zeros::<bf16>(&context, rs.len()), zeros::<bf16>(&context, 768));
    let (mean, rstd) = (zeros::<f32>(&context, 8), zeros::<f32>(&context, 8));
    let mut dx = zeros::<bf16>(&context, rs.len() - 1);
    let (mut dw, mut db) = (zeros::<f32>(&context, 768), zeros::<f32>(&context, 768));
    let mut errors: Vec<(&str, Result<(), KernelsError>)> = Vec::new();
    let graph = stream
        .capture(|s| {
            errors.push((
                "dv",
                attention::attention_backward(
                    s,
                    attention::Backward { q: &q, k: &k, v: &v, out: &o, dout: &d_o, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
                    shape,
                ),
            ));
            errors.push((
                "dv",
                attention::attention_backward_deterministic(
                    s,
                    attention::Backward { q: &q, k: &k, v: &v, out: &o, dout: &d_o, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
                    shape,
                ),
            ));
            errors.push(("dx", rows::rmsnorm_backward(s, &dout, &x, &w, &rstd, None, &mut dx, &mut dw, rs)));
            errors.push(("dx", rows::layernorm_backward(s, &dout, &x, &w, &mean, &rstd, None, &mut dx, &mut dw, &mut db, rs)));
            Ok(())
        })
        .unwrap();
    assert_eq!(graph.node_count().unwrap(), 0, "a refused call recorded work");
    for (want, got) in errors {
        match got {
            Err(KernelsError::Shape { operand, .. }) => assert_eq!(operand, want),
            other => panic!("expected a Shape error naming `{want}`, got {other:?}"),
        }
    }
}

/// Session 21, G20R-4's class: the sm_90 attention paths encoded their tensor maps after
/// `Context::bind_to_thread`, which left the stream's context current on the caller's thread (a
/// created context then got other libraries' runtime allocations there). They push it for the
/// encoding and pop it: with a created context's stream, the thread's current context (the
/// primary one here) is current again after the forward and the backward. sm_90 only (other
/// GPUs take paths that never bound a context themselves).
#[test]
fn g21_hopper_attention_leaves_the_threads_current_context_unchanged() {
    let Some((primary, _)) = gpu("g21_hopper_attention_leaves_the_threads_current_context_unchanged") else { return };
    if primary.device().arch().unwrap() != 90 {
        eprintln!("not sm_90: no hopper attention here");
        return;
    }
    let current = || {
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one handle.
        assert_eq!(unsafe { ferrocuda_host::sys::cuCtxGetCurrent(&mut raw) }, ferrocuda_host::sys::CUresult::CUDA_SUCCESS);
        raw
    };
    primary.bind_to_thread().unwrap();
    let before = current();
    let created = Context::create(0, ferrocuda_host::SchedulePolicy::Auto).unwrap();
    let stream = Stream::new(&created).unwrap();
    let shape = Attention { batch: 1, heads_q: 2, heads_kv: 2, seq_q: 256, seq_kv: 256, head_dim: 128, layout: Layout::Bhsd, causal: false, scale: None };
    assert!(attention::hopper_kernel::<bf16>(&shape, 90).is_some(), "{shape:?} takes no hopper kernel");
    let (q, _) = input::<bf16>(shape.q_len(), 31, 1.0);
    let (q_, k_, v_, do_) = (up(&created, &q), up(&created, &q), up(&created, &q), up(&created, &q));
    let (mut out, mut lse) = (zeros::<bf16>(&created, shape.q_len()), zeros::<f32>(&created, shape.q_rows()));
    assert_eq!(current(), before);
    attention::attention_forward(&stream, &q_, &k_, &v_, &mut out, &mut lse, shape).unwrap();
    assert_eq!(current(), before, "the hopper forward left the stream's context current");
    let (mut dq, mut dk, mut dv) = (zeros::<bf16>(&created, shape.q_len()), zeros::<bf16>(&created, shape.kv_len()), zeros::<bf16>(&created, shape.kv_len()));
    let backward = attention::Backward { q: &q_, k: &k_, v: &v_, out: &out, dout: &do_, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv };
    attention::attention_backward(&stream, backward, shape).unwrap();
    assert_eq!(current(), before, "the hopper backward left the stream's context current");
    stream.synchronize().unwrap();
    assert!(widen(&out.to_vec().unwrap()).iter().all(|x| x.is_finite()));
}
