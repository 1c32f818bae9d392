//! ferrocuda's RMSNorm and attention as candle ops on a GPU, against candle's own ops
//! (`candle_nn::ops::rms_norm`; attention as candle's matmul + softmax), in one binary with
//! candle's CUDA backend: results within stated bounds, then times of both.
//!
//! `cargo run --release --features cuda --example candle_ops_gpu` (scripts/check-candle-ops.sh
//! builds it against link stubs; on a machine without a GPU it says so and exits 0, unless
//! REQUIRE_GPU=1).
//!
//! Bounds (max |ours - reference| over all elements, the reference in f32 from the same
//! inputs): RMSNorm f32 `1e-5 * (1 + max|ref|)`, bf16/f16 one rounding of the output (half an
//! ulp of `max|ref|`: 2^-8 resp. 2^-11 relative) plus the f32 reference's own error; attention
//! f32 `1e-4`, f16 `5e-3`, bf16 `2e-2` (outputs of magnitude below 2; the tensor-core paths
//! round the probabilities to the input type before the second product, as FlashAttention does).

use std::process::ExitCode;
use std::time::Instant;

use candle_core::{DType, Device, IndexOp, Result, Tensor};
use ferrocuda_candle_ops::{attention, rms_norm};

fn main() -> ExitCode {
    let device = match Device::new_cuda(0) {
        Ok(device) => device,
        Err(error) if std::env::var_os("REQUIRE_GPU").is_none_or(|v| v != "1") => {
            let error = error.to_string();
            let error = error.lines().next().unwrap_or_default();
            println!("nothing to run (no usable GPU: {error}); REQUIRE_GPU=1 makes this a failure");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("error: REQUIRE_GPU=1 and candle found no GPU: {error}");
            return ExitCode::FAILURE;
        }
    };
    match run(&device) {
        Ok(0) => {
            println!("all checks passed");
            ExitCode::SUCCESS
        }
        Ok(failures) => {
            eprintln!("error: {failures} check(s) failed");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Deterministic values in [-2, 2) (the same on every run).
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n).map(|i| (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 4096) as f32 / 1024.0 - 2.0).collect()
}

fn tensor(dims: &[usize], seed: u32, scale: f64, dtype: DType, device: &Device) -> Result<Tensor> {
    (Tensor::from_vec(values(dims.iter().product(), seed), dims, device)? * scale)?.to_dtype(dtype)
}

/// (max |a - b|, max |b|), in f32.
fn compare(a: &Tensor, b: &Tensor) -> Result<(f32, f32)> {
    let (a, b) = (a.to_dtype(DType::F32)?, b.to_dtype(DType::F32)?);
    let diff = (a - &b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
    let scale = b.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
    Ok((diff, scale))
}

/// candle's attention: matmul + causal mask + softmax + matmul, k and v heads repeated for
/// grouped-query attention. In the inputs' dtype (for the timings) or f32 (the reference).
fn candle_attention(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool) -> Result<Tensor> {
    let (b, hq, sq, d) = q.dims4()?;
    let (_, hkv, skv, _) = k.dims4()?;
    let (k, v) = if hq == hkv {
        (k.clone(), v.clone())
    } else {
        let repeat = |t: &Tensor| t.unsqueeze(2)?.expand((b, hkv, hq / hkv, skv, d))?.reshape((b, hq, skv, d));
        (repeat(k)?, repeat(v)?)
    };
    let mut scores = (q.matmul(&k.t()?)? * (1.0 / (d as f64).sqrt()))?;
    if causal {
        let mask: Vec<f32> = (0..sq).flat_map(|i| (0..skv).map(move |j| if j <= i { 0.0 } else { f32::NEG_INFINITY })).collect();
        let mask = Tensor::from_vec(mask, (sq, skv), q.device())?.to_dtype(q.dtype())?;
        scores = scores.broadcast_add(&mask)?;
    }
    candle_nn::ops::softmax_last_dim(&scores)?.matmul(&v)
}

/// The first line of an error (candle's carry a backtrace after it).
fn first_line(error: &candle_core::Error) -> String {
    error.to_string().lines().next().unwrap_or_default().to_string()
}

/// Runs every check and timing; one that errs is reported and counted, and the rest still run.
fn run(device: &Device) -> Result<usize> {
    let mut failures = 0;
    // One comparison: `result` is (max |ours - reference|, bound), or the error that stopped it.
    let mut check = |what: String, result: Result<(f32, f32)>| match result {
        Ok((diff, bound)) => {
            let ok = diff <= bound;
            println!("{} {what}: max |ferrocuda - candle| = {diff:.3e} (bound {bound:.1e})", if ok { "ok  " } else { "FAIL" });
            failures += usize::from(!ok);
        }
        Err(error) => {
            println!("FAIL {what}: error: {}", first_line(&error));
            failures += 1;
        }
    };

    // RMSNorm against candle_nn::ops::rms_norm (candle's own kernel), in every dtype; the
    // reference is candle's f32 op on the same (rounded) inputs.
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        for dims in [&[1usize, 1][..], &[3, 31], &[64, 1000], &[4, 16, 768], &[4096, 4096], &[8, 8192]] {
            let result = (|| {
                let x = tensor(dims, 1, 1.0, dtype, device)?;
                let w = tensor(&dims[dims.len() - 1..], 2, 1.0, dtype, device)?;
                let ours = rms_norm(&x, &w, 1e-6)?;
                let reference = candle_nn::ops::rms_norm(&x.to_dtype(DType::F32)?, &w.to_dtype(DType::F32)?, 1e-6)?;
                let (diff, scale) = compare(&ours, &reference)?;
                if dtype != DType::F32 {
                    // candle's own op in the same dtype, for information (it rounds the same way).
                    let (same, _) = compare(&ours, &candle_nn::ops::rms_norm(&x, &w, 1e-6)?)?;
                    println!("     (rms_norm {dtype:?} {dims:?} vs candle's {dtype:?} op itself: {same:.3e})");
                }
                let bound = match dtype {
                    DType::F32 => 1e-5 * (1.0 + scale),
                    DType::BF16 => scale * 2f32.powi(-8) + 1e-5 * (1.0 + scale),
                    _ => scale * 2f32.powi(-11) + 1e-5 * (1.0 + scale),
                };
                Ok((diff, bound))
            })();
            check(format!("rms_norm {dtype:?} {dims:?}"), result);
        }
    }
    // An offset layout (rows 100..300 of a larger tensor), and ordering on candle's stream: the
    // input computed by candle just before, the output used by candle just after.
    check(
        "rms_norm f32 on an offset view [100..300] of [512, 1024], output scaled by candle".into(),
        (|| {
            let big = tensor(&[512, 1024], 3, 1.0, DType::F32, device)?;
            let w = tensor(&[1024], 4, 1.0, DType::F32, device)?;
            let ours = (rms_norm(&big.i(100..300)?, &w, 1e-6)? * 2.0)?;
            let theirs = (candle_nn::ops::rms_norm(&big.i(100..300)?, &w, 1e-6)? * 2.0)?;
            let (diff, scale) = compare(&ours, &theirs)?;
            Ok((diff, 1e-5 * (1.0 + scale)))
        })(),
    );
    check(
        "rms_norm f32 on a tensor candle computed just before (same stream)".into(),
        (|| {
            let big = tensor(&[2048, 4096], 5, 1.0, DType::F32, device)?;
            let w = tensor(&[4096], 6, 1.0, DType::F32, device)?;
            let x = ((&big * 3.0)? + 1.0)?.exp()?;
            let (diff, scale) = compare(&rms_norm(&x, &w, 1e-6)?, &candle_nn::ops::rms_norm(&x, &w, 1e-6)?)?;
            Ok((diff, 1e-5 * (1.0 + scale)))
        })(),
    );

    // Attention against candle's matmul + softmax in f32 on the same (rounded) inputs.
    // (batch, heads_q, heads_kv, seq_q, seq_kv, head_dim)
    let shapes = [(1, 4, 4, 128, 128, 64), (2, 8, 8, 1024, 1024, 128), (1, 8, 2, 256, 256, 64), (1, 2, 2, 100, 160, 64), (1, 2, 2, 64, 64, 256)];
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        for &(b, hq, hkv, sq, skv, d) in &shapes {
            for causal in [false, true] {
                let result = (|| {
                    let q = tensor(&[b, hq, sq, d], 5, 0.5, dtype, device)?;
                    let k = tensor(&[b, hkv, skv, d], 6, 0.5, dtype, device)?;
                    let v = tensor(&[b, hkv, skv, d], 7, 0.5, dtype, device)?;
                    let ours = attention(&q, &k, &v, causal, None)?;
                    let f32s = |t: &Tensor| t.to_dtype(DType::F32);
                    let reference = candle_attention(&f32s(&q)?, &f32s(&k)?, &f32s(&v)?, causal)?;
                    let (diff, _) = compare(&ours, &reference)?;
                    let bound = match dtype {
                        DType::F32 => 1e-4,
                        DType::BF16 => 2e-2,
                        _ => 5e-3,
                    };
                    Ok((diff, bound))
                })();
                check(format!("attention {dtype:?} [{b},{hq},{sq},{d}] kv [{b},{hkv},{skv},{d}] causal {causal}"), result);
            }
        }
    }

    // Times: per call on candle's stream (wall time of 20 calls after 5 warm-ups and a sync,
    // then a sync).
    println!("times (per call, candle's stream: 20 calls after 5 warm-ups, synchronised):");
    let time = |name: &str, f: &dyn Fn() -> Result<Tensor>| -> Result<f64> {
        for _ in 0..5 {
            f()?;
        }
        device.synchronize()?;
        let start = Instant::now();
        for _ in 0..20 {
            f()?;
        }
        device.synchronize()?;
        let us = start.elapsed().as_secs_f64() * 1e6 / 20.0;
        println!("  {name:<66} {us:>9.1} µs");
        Ok(us)
    };
    let mut timed = |what: String, result: Result<(f64, f64)>| match result {
        Ok((ours, theirs)) => println!("  {what}: candle / ferrocuda = {:.2}", theirs / ours),
        Err(error) => {
            println!("FAIL timing {what}: error: {}", first_line(&error));
            failures += 1;
        }
    };
    for dtype in [DType::F32, DType::BF16] {
        let result = (|| {
            let x = tensor(&[4096, 4096], 8, 1.0, dtype, device)?;
            let w = tensor(&[4096], 9, 1.0, dtype, device)?;
            let ours = time(&format!("ferrocuda rms_norm {dtype:?} [4096, 4096]"), &|| rms_norm(&x, &w, 1e-6))?;
            let theirs = time(&format!("candle_nn::ops::rms_norm {dtype:?} [4096, 4096]"), &|| candle_nn::ops::rms_norm(&x, &w, 1e-6))?;
            Ok((ours, theirs))
        })();
        timed(format!("rms_norm {dtype:?} [4096, 4096]"), result);
    }
    for (s, causal) in [(1024, false), (2048, false), (2048, true), (4096, true)] {
        let (b, h, d) = (2, 16, 128);
        let shape = format!("BF16 [{b},{h},{s},{d}] causal {causal}");
        let result = (|| {
            let q = tensor(&[b, h, s, d], 10, 0.5, DType::BF16, device)?;
            let k = tensor(&[b, h, s, d], 11, 0.5, DType::BF16, device)?;
            let v = tensor(&[b, h, s, d], 12, 0.5, DType::BF16, device)?;
            let ours = time(&format!("ferrocuda attention {shape}"), &|| attention(&q, &k, &v, causal, None))?;
            let theirs = time(&format!("candle matmul+softmax+matmul {shape}"), &|| candle_attention(&q, &k, &v, causal))?;
            Ok((ours, theirs))
        })();
        timed(format!("attention {shape}"), result);
    }
    Ok(failures)
}
