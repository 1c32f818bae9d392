//! The eight ports of issue 30's fourth held-out port against their CPU references: on the CPU
//! executor (`cpu::`, always) and on a GPU (`gpu::`, skipped without one unless `REQUIRE_GPU=1`).
//! Small shapes with tails (rows not a multiple of the block, partial warps) where the source
//! allows them.

mod common;

use common::*;
use half::bf16;

/// Runs `check` on the back end; every check returns the first mismatch as an error.
fn gelu(back: Back) -> Result<()> {
    let mut rng = Rng::new(1);
    let x = rng.bf16s(512 * 8 * 3, -4.0, 4.0);
    let got = widen(&unpack(&run_gelu(back, &packs(&x))?));
    close("gelu_forward_kernel2", &got, &gelu_reference(&x), 2e-3, 1e-2)?;
    Ok(())
}

fn softmax_bwd(back: Back) -> Result<()> {
    softmax_bwd_variant(back, SoftmaxBwd::FirstTry)
}

fn softmax_bwd_fixed(back: Back) -> Result<()> {
    softmax_bwd_variant(back, SoftmaxBwd::Fixed)
}

/// Session 14's `reqntid(256)` variants (the block size a constant for the compiler).
fn softmax_bwd_reqntid(back: Back) -> Result<()> {
    softmax_bwd_variant(back, SoftmaxBwd::Reqntid)?;
    softmax_bwd_variant(back, SoftmaxBwd::FixedReqntid)
}

fn softmax_bwd_variant(back: Back, variant: SoftmaxBwd) -> Result<()> {
    let mut rng = Rng::new(2);
    for (matrices, t_len) in [(3usize, 64usize), (2, 320)] {
        let n = matrices * t_len * t_len;
        let att = rng.bf16s(n, 0.0, 0.05);
        let datt = rng.bf16s(n, -1.0, 1.0);
        let got = widen(&run_softmax_bwd(back, variant, &datt, &att, 1, t_len, 0.125)?);
        close("softmax_autoregressive_backward_inplace_kernel", &got, &softmax_bwd_reference(&datt, &att, t_len, 0.125), 1e-4, 1e-2)?;
    }
    Ok(())
}

fn unpermute(back: Back) -> Result<()> {
    let mut rng = Rng::new(3);
    let (b, n, nh, d) = (2usize, 16usize, 3usize, 8usize);
    let x = rng.bf16s(b * n * nh * d, -1.0, 1.0);
    let got = run_unpermute(back, &x, [b as u32, n as u32, nh as u32, d as u32])?;
    let want = unpermute_reference(&x, b, n, nh, d);
    close("unpermute_kernel", &widen(&got), &widen(&want), 0.0, 0.0)?;
    Ok(())
}

fn encoder_backward(back: Back) -> Result<()> {
    let mut rng = Rng::new(4);
    let (b, t, c, v) = (2usize, 8usize, 40usize, 10usize);
    let dout = rng.f32s(b * t * c, -1.0, 1.0);
    let inp: Vec<i32> = (0..b * t).map(|_| (rng.next_u32() % v as u32) as i32).collect();
    let (dwte, dwpe) = run_encoder_backward(back, &dout, &inp, v, [b as u32, t as u32, c as u32])?;
    let (want_te, want_pe) = encoder_backward_reference(&dout, &inp, v, t, c);
    close("encoder_backward_kernel1 dwte", &dwte, &want_te, 1e-5, 1e-5)?;
    close("encoder_backward_kernel1 dwpe", &dwpe, &want_pe, 1e-5, 1e-5)?;
    Ok(())
}

fn fused_residual(back: Back) -> Result<()> {
    let mut rng = Rng::new(5);
    let (rows, c) = (10usize, 100usize);
    let a = rng.bf16s(rows * c, -2.0, 2.0);
    let b = rng.bf16s(rows * c, -2.0, 2.0);
    let w = rng.bf16s(c, 0.5, 1.5);
    let bias = rng.bf16s(c, -0.5, 0.5);
    // Rows past the last (the last block's fourth warp) must be left alone.
    let [res, normed, mean, rstd] = run_fused_residual(back, &a, &b, &w, &bias, c)?;
    let [want_res, want_normed, want_mean, want_rstd] = fused_residual_reference(&a, &b, &w, &bias, c);
    close("fused_residual_forward3 residual", &widen(&res), &want_res, 0.0, 0.0)?;
    close("fused_residual_forward3 normed", &widen(&normed), &want_normed, 2e-2, 1e-2)?;
    close("fused_residual_forward3 mean", &widen(&mean), &want_mean, 1e-3, 1e-2)?;
    close("fused_residual_forward3 rstd", &widen(&rstd), &want_rstd, 1e-3, 1e-2)?;
    Ok(())
}

fn silu_and_mul(back: Back) -> Result<()> {
    let mut rng = Rng::new(6);
    for (tokens, d) in [(3usize, 300usize), (2, 1500)] {
        let x = rng.bf16s(tokens * 2 * d, -5.0, 5.0);
        let got = widen(&run_silu_and_mul(back, &x, d)?);
        close("silu_and_mul_kernel", &got, &silu_and_mul_reference(&x, d), 1e-3, 1e-2)?;
    }
    Ok(())
}

fn rms_norm(back: Back) -> Result<()> {
    rms_norm_variant(back, false)
}

fn rms_norm_fixed(back: Back) -> Result<()> {
    rms_norm_variant(back, true)
}

fn rms_norm_variant(back: Back, fixed: bool) -> Result<()> {
    let mut rng = Rng::new(7);
    for (tokens, hidden, stride) in [(5usize, 200usize, 208usize), (3, 2100, 2100)] {
        let x = rng.bf16s(tokens * stride, -2.0, 2.0);
        let w = rng.bf16s(hidden, 0.5, 1.5);
        let got = widen(&run_rms_norm(back, fixed, &x, stride, &w, 1e-6, tokens)?);
        close("rms_norm_kernel", &got, &rms_norm_reference(&x, stride, &w, 1e-6, tokens), 1e-3, RMS_NORM_REL)?;
    }
    Ok(())
}

/// Session 15's `rms_norm_kernel_broadcast`: the reference, and the first try's bits (the same
/// fold in thread 0 and the same `s`, handed over by `sum_broadcast` instead of a
/// `shared_array!`), at a partial last warp (200 columns), 1024 threads (2100) and one warp (20).
fn rms_norm_broadcast(back: Back) -> Result<()> {
    let mut rng = Rng::new(7);
    for (tokens, hidden, stride) in [(5usize, 200usize, 208usize), (3, 2100, 2100), (4, 20, 24)] {
        let x = rng.bf16s(tokens * stride, -2.0, 2.0);
        let w = rng.bf16s(hidden, 0.5, 1.5);
        let got = run_rms_norm_broadcast(back, &x, stride, &w, 1e-6, tokens)?;
        close("rms_norm_kernel_broadcast", &widen(&got), &rms_norm_reference(&x, stride, &w, 1e-6, tokens), 1e-3, RMS_NORM_REL)?;
        let first = run_rms_norm(back, false, &x, stride, &w, 1e-6, tokens)?;
        if got != first {
            return Err(format!("rms_norm_kernel_broadcast ({tokens} x {hidden}): not the first try's bits").into());
        }
    }
    Ok(())
}

/// Session 16's diagnostic `rms_norm_kernel_cub` (cub's second level written in the port):
/// the reference at 1024 threads (2100 columns) and at two warps (64).
fn rms_norm_cub(back: Back) -> Result<()> {
    let mut rng = Rng::new(7);
    for (tokens, hidden, stride) in [(3usize, 2100usize, 2100usize), (4, 64, 72)] {
        let x = rng.bf16s(tokens * stride, -2.0, 2.0);
        let w = rng.bf16s(hidden, 0.5, 1.5);
        let got = run_rms_norm_cub(back, &x, stride, &w, 1e-6, tokens)?;
        close("rms_norm_kernel_cub", &widen(&got), &rms_norm_reference(&x, stride, &w, 1e-6, tokens), 1e-3, RMS_NORM_REL)?;
    }
    Ok(())
}

fn segmented_max(back: Back) -> Result<()> {
    let mut rng = Rng::new(8);
    let (tokens, hidden) = (4usize, 3000usize);
    let mut x = rng.f32s(tokens * hidden, -3.0, 3.0);
    x[tokens * hidden - 5] = -7.25; // the largest magnitude, negative, near the end
    let got = run_segmented_max(back, &x, tokens)?;
    let want = segmented_max_reference(&x);
    if got != want {
        return Err(format!("segmented_max_reduction: scale {got}, expected {want}").into());
    }
    Ok(())
}

#[test]
fn gelu_constant_is_sqrt_2_over_pi_in_f32() {
    assert_eq!(ferrocuda_ports4_llmc::GELU_SCALING_FACTOR, ((2.0f64 / std::f64::consts::PI) as f32).sqrt());
    let _ = bf16::ZERO;
}

mod cpu {
    use super::*;
    use ferrocuda::cpu::CpuExecutor;

    fn on_cpu(check: fn(Back) -> Result<()>) {
        let executor = CpuExecutor::new();
        check(Back::Cpu(&executor)).unwrap();
    }

    #[test]
    fn gelu_forward_kernel2_matches_the_reference() {
        on_cpu(gelu);
    }
    #[test]
    fn softmax_autoregressive_backward_inplace_kernel_matches_the_reference() {
        on_cpu(softmax_bwd);
    }
    #[test]
    fn unpermute_kernel_matches_the_reference() {
        on_cpu(unpermute);
    }
    #[test]
    fn encoder_backward_kernel1_matches_the_reference() {
        on_cpu(encoder_backward);
    }
    #[test]
    fn fused_residual_forward3_matches_the_reference() {
        on_cpu(fused_residual);
    }
    #[test]
    fn silu_and_mul_kernel_matches_the_reference() {
        on_cpu(silu_and_mul);
    }
    #[test]
    fn rms_norm_kernel_matches_the_reference() {
        on_cpu(rms_norm);
    }
    #[test]
    fn segmented_max_reduction_matches_the_reference() {
        on_cpu(segmented_max);
    }
    #[test]
    fn softmax_autoregressive_backward_inplace_kernel_fixed_matches_the_reference() {
        on_cpu(softmax_bwd_fixed);
    }
    #[test]
    fn rms_norm_kernel_fixed_matches_the_reference() {
        on_cpu(rms_norm_fixed);
    }
    #[test]
    fn rms_norm_kernel_broadcast_matches_the_reference_and_the_first_try() {
        on_cpu(rms_norm_broadcast);
    }
    #[test]
    fn s16_rms_norm_kernel_cub_matches_the_reference() {
        on_cpu(rms_norm_cub);
    }
    #[test]
    fn softmax_autoregressive_backward_inplace_kernel_reqntid_variants_match_the_reference() {
        on_cpu(softmax_bwd_reqntid);
    }
}

mod gpu {
    use super::*;
    use ferrocuda::{Context, Stream};

    fn on_gpu(name: &str, check: fn(Back) -> Result<()>) {
        let context = match Context::primary(0) {
            Ok(context) => context,
            Err(e) if !ferrocuda_test_support::gpu_required() => {
                println!("SKIPPED {name}: {e}");
                return;
            }
            Err(e) => panic!("{name}: no GPU ({e}) but REQUIRE_GPU=1"),
        };
        let stream = Stream::new(&context).unwrap();
        check(Back::Gpu(&stream)).unwrap();
    }

    #[test]
    fn gelu_forward_kernel2_matches_the_reference() {
        on_gpu("gpu::gelu_forward_kernel2", gelu);
    }
    #[test]
    fn softmax_autoregressive_backward_inplace_kernel_matches_the_reference() {
        on_gpu("gpu::softmax_autoregressive_backward_inplace_kernel", softmax_bwd);
    }
    #[test]
    fn unpermute_kernel_matches_the_reference() {
        on_gpu("gpu::unpermute_kernel", unpermute);
    }
    #[test]
    fn encoder_backward_kernel1_matches_the_reference() {
        on_gpu("gpu::encoder_backward_kernel1", encoder_backward);
    }
    #[test]
    fn fused_residual_forward3_matches_the_reference() {
        on_gpu("gpu::fused_residual_forward3", fused_residual);
    }
    #[test]
    fn silu_and_mul_kernel_matches_the_reference() {
        on_gpu("gpu::silu_and_mul_kernel", silu_and_mul);
    }
    #[test]
    fn rms_norm_kernel_matches_the_reference() {
        on_gpu("gpu::rms_norm_kernel", rms_norm);
    }
    #[test]
    fn segmented_max_reduction_matches_the_reference() {
        on_gpu("gpu::segmented_max_reduction", segmented_max);
    }
    #[test]
    fn softmax_autoregressive_backward_inplace_kernel_fixed_matches_the_reference() {
        on_gpu("gpu::softmax_autoregressive_backward_inplace_kernel_fixed", softmax_bwd_fixed);
    }
    #[test]
    fn rms_norm_kernel_fixed_matches_the_reference() {
        on_gpu("gpu::rms_norm_kernel_fixed", rms_norm_fixed);
    }
    #[test]
    fn rms_norm_kernel_broadcast_matches_the_reference_and_the_first_try() {
        on_gpu("gpu::rms_norm_kernel_broadcast", rms_norm_broadcast);
    }
    #[test]
    fn s16_rms_norm_kernel_cub_matches_the_reference() {
        on_gpu("gpu::s16_rms_norm_kernel_cub", rms_norm_cub);
    }
    #[test]
    fn softmax_autoregressive_backward_inplace_kernel_reqntid_variants_match_the_reference() {
        on_gpu("gpu::softmax_autoregressive_backward_inplace_kernel_reqntid_variants", softmax_bwd_reqntid);
    }
}
