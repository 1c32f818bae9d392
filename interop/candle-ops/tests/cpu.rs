//! The ops on candle's CPU tensors (ferrocuda's CPU executor) against candle's own ops, and
//! the checks' refusals. Runs without a GPU or CUDA libraries.

use candle_core::{DType, Device, IndexOp, Tensor};
use ferrocuda_candle_ops::{attention, rms_norm};

/// Deterministic values in [-2, 2).
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n).map(|i| (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 4096) as f32 / 1024.0 - 2.0).collect()
}

fn tensor(dims: &[usize], seed: u32) -> Tensor {
    Tensor::from_vec(values(dims.iter().product(), seed), dims, &Device::Cpu).unwrap()
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    let a = a.to_dtype(DType::F32).unwrap();
    let b = b.to_dtype(DType::F32).unwrap();
    (a - b).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap()
}

/// candle's attention reference: f32 matmul + softmax, k and v heads repeated for GQA.
fn reference_attention(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool) -> Tensor {
    let (q, k, v) = (q.to_dtype(DType::F32).unwrap(), k.to_dtype(DType::F32).unwrap(), v.to_dtype(DType::F32).unwrap());
    let (b, hq, sq, d) = q.dims4().unwrap();
    let (_, hkv, skv, _) = k.dims4().unwrap();
    let repeat = |t: &Tensor| t.unsqueeze(2).unwrap().expand((b, hkv, hq / hkv, skv, d)).unwrap().reshape((b, hq, skv, d)).unwrap();
    let (k, v) = (repeat(&k), repeat(&v));
    let mut scores = (q.matmul(&k.t().unwrap()).unwrap() * (1.0 / (d as f64).sqrt())).unwrap();
    if causal {
        let mask: Vec<f32> = (0..sq).flat_map(|i| (0..skv).map(move |j| if j <= i { 0.0 } else { f32::NEG_INFINITY })).collect();
        let mask = Tensor::from_vec(mask, (sq, skv), &Device::Cpu).unwrap();
        scores = scores.broadcast_add(&mask).unwrap();
    }
    candle_nn::ops::softmax_last_dim(&scores).unwrap().matmul(&v.contiguous().unwrap()).unwrap()
}

#[test]
fn rms_norm_equals_candles_on_the_cpu() {
    for dims in [&[1usize, 1][..], &[3, 31], &[2, 5, 96], &[7, 1000]] {
        let x = tensor(dims, 1);
        let w = tensor(&dims[dims.len() - 1..], 2);
        let ours = rms_norm(&x, &w, 1e-6).unwrap();
        let theirs = candle_nn::ops::rms_norm(&x, &w, 1e-6).unwrap();
        assert_eq!(ours.dims(), x.dims());
        let diff = max_diff(&ours, &theirs);
        assert!(diff <= 2e-5, "{dims:?}: max |ours - candle's| = {diff}");
    }
}

#[test]
fn rms_norm_in_bf16_and_f16_is_within_one_rounding_of_candles() {
    let x = tensor(&[9, 200], 3);
    let w = tensor(&[200], 4);
    for (dtype, bound) in [(DType::BF16, 2f32.powi(-7) * 8.0), (DType::F16, 2f32.powi(-10) * 8.0)] {
        let (x, w) = (x.to_dtype(dtype).unwrap(), w.to_dtype(dtype).unwrap());
        let ours = rms_norm(&x, &w, 1e-6).unwrap();
        assert_eq!(ours.dtype(), dtype);
        // candle's own op in f32 from the same rounded inputs: ours rounds once at the end.
        let theirs = candle_nn::ops::rms_norm(&x.to_dtype(DType::F32).unwrap(), &w.to_dtype(DType::F32).unwrap(), 1e-6).unwrap();
        let diff = max_diff(&ours, &theirs);
        // |values| < 8 here: one rounding is at most half an ulp of 8 (bf16: 2^-7 * 8 / 2).
        assert!(diff <= bound, "{dtype:?}: max |ours - candle's| = {diff} > {bound}");
    }
}

#[test]
fn rms_norm_reads_an_offset_layout() {
    // Rows 2..5 of a larger tensor: contiguous, with a start offset.
    let big = tensor(&[6, 64], 5);
    let x = big.i(2..5).unwrap();
    assert_ne!(x.layout().start_offset(), 0);
    let w = tensor(&[64], 6);
    let diff = max_diff(&rms_norm(&x, &w, 1e-5).unwrap(), &candle_nn::ops::rms_norm(&x, &w, 1e-5).unwrap());
    assert!(diff <= 2e-5, "max diff {diff}");
}

#[test]
fn attention_equals_candles_matmul_softmax_on_the_cpu() {
    // (batch, heads_q, heads_kv, seq_q, seq_kv, head_dim): equal heads, grouped-query heads,
    // seq_q != seq_kv.
    for (b, hq, hkv, sq, skv, d) in [(1, 2, 2, 16, 16, 32), (1, 4, 2, 5, 9, 64), (2, 1, 1, 3, 7, 32)] {
        for causal in [false, true] {
            let q = (tensor(&[b, hq, sq, d], 7) * 0.5).unwrap();
            let k = (tensor(&[b, hkv, skv, d], 8) * 0.5).unwrap();
            let v = tensor(&[b, hkv, skv, d], 9);
            let ours = attention(&q, &k, &v, causal, None).unwrap();
            assert_eq!(ours.dims(), q.dims());
            let diff = max_diff(&ours, &reference_attention(&q, &k, &v, causal));
            assert!(diff <= 1e-5, "({b},{hq},{hkv},{sq},{skv},{d}) causal {causal}: max diff {diff}");
        }
    }
}

#[test]
fn attention_in_bf16_is_within_bounds_of_candles() {
    let q = (tensor(&[1, 2, 16, 64], 10) * 0.5).unwrap().to_dtype(DType::BF16).unwrap();
    let k = (tensor(&[1, 2, 16, 64], 11) * 0.5).unwrap().to_dtype(DType::BF16).unwrap();
    let v = tensor(&[1, 2, 16, 64], 12).to_dtype(DType::BF16).unwrap();
    let ours = attention(&q, &k, &v, true, None).unwrap();
    assert_eq!(ours.dtype(), DType::BF16);
    let diff = max_diff(&ours, &reference_attention(&q, &k, &v, true));
    // |out| < 2; one bf16 rounding of the output (2^-8 relative) plus the tensor-core path's
    // bf16 probabilities: bounded by 2e-2.
    assert!(diff <= 2e-2, "max diff {diff}");
}

/// The message of the error `result` holds.
fn refusal(result: candle_core::Result<Tensor>) -> String {
    result.expect_err("the op should refuse this").to_string()
}

#[test]
fn refusals_say_what_to_pass() {
    let x = tensor(&[4, 32], 1);
    let w = tensor(&[32], 2);
    let m = refusal(rms_norm(&x, &w.to_dtype(DType::BF16).unwrap(), 1e-6));
    assert!(m.contains("`weight` is BF16 but `x` is F32"), "{m}");
    let m = refusal(rms_norm(&x.to_dtype(DType::U32).unwrap(), &w.to_dtype(DType::U32).unwrap(), 1e-6));
    assert!(m.contains("take f32, bf16 or f16"), "{m}");
    let m = refusal(rms_norm(&x.t().unwrap(), &tensor(&[4], 2), 1e-6));
    assert!(m.contains("is not contiguous; call `.contiguous()`"), "{m}");
    let m = refusal(rms_norm(&x, &tensor(&[31], 2), 1e-6));
    assert!(m.contains("pass a weight of shape [32]"), "{m}");

    let q = tensor(&[1, 4, 8, 32], 3);
    let m = refusal(attention(&q, &tensor(&[1, 3, 8, 32], 4), &tensor(&[1, 3, 8, 32], 5), false, None));
    assert!(m.contains("does not divide"), "{m}");
    let q48 = tensor(&[1, 1, 8, 48], 3);
    let m = refusal(attention(&q48, &q48, &q48, false, None));
    assert!(m.contains("head_dim 48 is not supported"), "{m}");
    let m = refusal(attention(&q.i(0).unwrap(), &q, &q, false, None));
    assert!(m.contains("4 dimensions"), "{m}");
    let m = refusal(attention(&q, &q, &tensor(&[1, 4, 9, 32], 6), false, None));
    assert!(m.contains("`v` has shape [1, 4, 9, 32] but `k` has [1, 4, 8, 32]"), "{m}");
    // [1, 8, 4, 32] with q's strides: a valid shape, not a row-major layout.
    let m = refusal(attention(&q.transpose(1, 2).unwrap(), &q, &q, false, None));
    assert!(m.contains("`q` (shape [1, 8, 4, 32]") && m.contains("is not contiguous"), "{m}");
}
