//! Shared by the tests (tests/ports4.rs) and the benchmark (examples/ports4_bench.rs): inputs,
//! CPU references written from each source's description (not from the ports), checks, and one
//! runner per kernel for either back end (the CPU executor or a GPU stream).
#![allow(dead_code, reason = "each includer uses a part")]

use std::error::Error;

use ferrocuda::cpu::CpuExecutor;
use ferrocuda::{DeviceBuffer, LaunchConfig, Stream};
use ferrocuda_ports4::{rms_norm_kernel, rms_norm_kernel_broadcast, rms_norm_kernel_cub, rms_norm_kernel_fixed, segmented_max_reduction, silu_and_mul_kernel};
use ferrocuda_ports4_llmc::{
    X128, encoder_backward_kernel1, fused_residual_forward3, gelu_forward_kernel2, softmax_autoregressive_backward_inplace_kernel,
    softmax_autoregressive_backward_inplace_kernel_fixed, softmax_autoregressive_backward_inplace_kernel_fixed_reqntid,
    softmax_autoregressive_backward_inplace_kernel_reqntid, unpermute_kernel,
};
use half::bf16;

pub type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Where a kernel runs.
#[derive(Clone, Copy)]
pub enum Back<'a> {
    /// The CPU executor.
    Cpu(&'a CpuExecutor),
    /// A GPU stream (Rust kernels from the crates' own modules).
    Gpu(&'a Stream),
}

/// A deterministic generator of test values (xorshift).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u32(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 32) as u32
    }
    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * (self.next_u32() as f32 / 4294967296.0)
    }
    pub fn bf16s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<bf16> {
        (0..n).map(|_| bf16::from_f32(self.uniform(lo, hi))).collect()
    }
    pub fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// Largest error of `got` against `want`, each allowed `abs + rel * |want|`; an error names the
/// first element outside.
pub fn close(what: &str, got: &[f32], want: &[f32], abs: f64, rel: f64) -> std::result::Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), want.len()));
    }
    let mut worst = 0.0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w as f64).abs();
        let allowed = abs + rel * (w as f64).abs();
        if err > allowed || g.is_nan() != w.is_nan() {
            return Err(format!("{what}: element {i} is {g}, expected {w} (allowed error {allowed:.3e})"));
        }
        worst = worst.max(err);
    }
    Ok(())
}

pub fn widen(x: &[bf16]) -> Vec<f32> {
    x.iter().map(|v| v.to_f32()).collect()
}

// ------------------------------------------------------------------ gelu_forward_kernel2
/// llm.c's GELU (tanh form), in f64.
pub fn gelu_reference(x: &[bf16]) -> Vec<f32> {
    let s = (2.0f64 / std::f64::consts::PI).sqrt();
    x.iter()
        .map(|v| {
            let x = v.to_f64();
            (0.5 * x * (1.0 + (s * (x + 0.044715 * x * x * x)).tanh())) as f32
        })
        .collect()
}

pub fn gelu_config(n: usize) -> LaunchConfig {
    LaunchConfig::new((n / (512 * 8)) as u32, 512u32)
}

pub fn run_gelu(back: Back, inp: &[X128]) -> Result<Vec<X128>> {
    let config = gelu_config(inp.len() * 8);
    match back {
        Back::Cpu(e) => {
            let mut out = vec![X128::default(); inp.len()];
            gelu_forward_kernel2::launch_cpu(e, config, &mut out, inp)?;
            Ok(out)
        }
        Back::Gpu(s) => {
            let x = DeviceBuffer::from_slice(s.context(), inp)?;
            let mut out = DeviceBuffer::<X128>::zeroed(s.context(), inp.len())?;
            gelu_forward_kernel2::launch(s, config, &mut out, &x)?;
            Ok(out.to_vec()?)
        }
    }
}

pub fn packs(x: &[bf16]) -> Vec<X128> {
    x.chunks_exact(8).map(|c| X128 { v: c.try_into().unwrap() }).collect()
}

pub fn unpack(x: &[X128]) -> Vec<bf16> {
    x.iter().flat_map(|p| p.v).collect()
}

// ------------------------------------------------------------------ softmax_autoregressive_backward_inplace_kernel
/// `(matrices, T)` -> the new `datt`: for row `t`, `scale * att[t3] * (datt[t3] - sum_{t2 <= t}
/// att[t2] datt[t2])` for `t3 <= t`, 0 above the diagonal.
pub fn softmax_bwd_reference(datt: &[bf16], att: &[bf16], t_len: usize, scale: f32) -> Vec<f32> {
    let mut out = vec![0.0f32; datt.len()];
    for (r, (d_row, a_row)) in datt.chunks_exact(t_len).zip(att.chunks_exact(t_len)).enumerate() {
        let t = r % t_len;
        let sum: f64 = (0..=t).map(|k| a_row[k].to_f64() * d_row[k].to_f64()).sum();
        for k in 0..=t {
            out[r * t_len + k] = (scale as f64 * a_row[k].to_f64() * (d_row[k].to_f64() - sum)) as f32;
        }
    }
    out
}

/// The port's launch: a 1-D grid of `rows / 4` blocks of 256 threads.
pub fn softmax_bwd_config(matrices: usize, t_len: usize) -> LaunchConfig {
    LaunchConfig::new((matrices * t_len / 4) as u32, 256u32)
}

/// The source's launch: `(T / 4, B * NH)` blocks of 256.
pub fn softmax_bwd_twin_config(matrices: usize, t_len: usize) -> LaunchConfig {
    LaunchConfig::new(((t_len / 4) as u32, matrices as u32), 256u32)
}

/// Which `softmax_autoregressive_backward_inplace_kernel` to run.
#[derive(Clone, Copy, Debug)]
pub enum SoftmaxBwd {
    /// The first try.
    FirstTry,
    /// The fix round's `_fixed`.
    Fixed,
    /// Session 14: the first try under `reqntid(256)`.
    Reqntid,
    /// Session 14: the fix round's variant under `reqntid(256)`.
    FixedReqntid,
}

/// `softmax_autoregressive_backward_inplace_kernel` (the `variant`) on `back`, in place over a
/// copy of `datt`.
pub fn run_softmax_bwd(back: Back, variant: SoftmaxBwd, datt: &[bf16], att: &[bf16], b: i32, t_len: usize, scale: f32) -> Result<Vec<bf16>> {
    let config = softmax_bwd_config(datt.len() / (t_len * t_len), t_len);
    let t = t_len as u32;
    match back {
        Back::Cpu(e) => {
            let mut d = datt.to_vec();
            match variant {
                SoftmaxBwd::FirstTry => softmax_autoregressive_backward_inplace_kernel::launch_cpu(e, config, &mut d, att, b, t, 0, scale)?,
                SoftmaxBwd::Fixed => softmax_autoregressive_backward_inplace_kernel_fixed::launch_cpu(e, config, &mut d, att, b, t, 0, scale)?,
                SoftmaxBwd::Reqntid => softmax_autoregressive_backward_inplace_kernel_reqntid::launch_cpu(e, config, &mut d, att, b, t, 0, scale)?,
                SoftmaxBwd::FixedReqntid => softmax_autoregressive_backward_inplace_kernel_fixed_reqntid::launch_cpu(e, config, &mut d, att, b, t, 0, scale)?,
            }
            Ok(d)
        }
        Back::Gpu(s) => {
            let mut d = DeviceBuffer::from_slice(s.context(), datt)?;
            let a = DeviceBuffer::from_slice(s.context(), att)?;
            match variant {
                SoftmaxBwd::FirstTry => softmax_autoregressive_backward_inplace_kernel::launch(s, config, &mut d, &a, b, t, 0, scale)?,
                SoftmaxBwd::Fixed => softmax_autoregressive_backward_inplace_kernel_fixed::launch(s, config, &mut d, &a, b, t, 0, scale)?,
                SoftmaxBwd::Reqntid => softmax_autoregressive_backward_inplace_kernel_reqntid::launch(s, config, &mut d, &a, b, t, 0, scale)?,
                SoftmaxBwd::FixedReqntid => softmax_autoregressive_backward_inplace_kernel_fixed_reqntid::launch(s, config, &mut d, &a, b, t, 0, scale)?,
            }
            Ok(d.to_vec()?)
        }
    }
}

// ------------------------------------------------------------------ unpermute_kernel
pub fn unpermute_reference(inp: &[bf16], b: usize, n: usize, nh: usize, d: usize) -> Vec<bf16> {
    let mut out = vec![bf16::ZERO; inp.len()];
    for bb in 0..b {
        for h in 0..nh {
            for nn in 0..n {
                for dd in 0..d {
                    out[((bb * n + nn) * nh + h) * d + dd] = inp[((bb * nh + h) * n + nn) * d + dd];
                }
            }
        }
    }
    out
}

pub fn unpermute_config(total: usize) -> LaunchConfig {
    LaunchConfig::new(total.div_ceil(256) as u32, 256u32)
}

pub fn run_unpermute(back: Back, inp: &[bf16], shape: [u32; 4]) -> Result<Vec<bf16>> {
    let [b, n, nh, d] = shape;
    let config = unpermute_config(inp.len());
    match back {
        Back::Cpu(e) => {
            let mut out = vec![bf16::ZERO; inp.len()];
            unpermute_kernel::launch_cpu(e, config, inp, &mut out, b, n, nh, d)?;
            Ok(out)
        }
        Back::Gpu(s) => {
            let x = DeviceBuffer::from_slice(s.context(), inp)?;
            let mut out = DeviceBuffer::<bf16>::zeroed(s.context(), inp.len())?;
            unpermute_kernel::launch(s, config, &x, &mut out, b, n, nh, d)?;
            Ok(out.to_vec()?)
        }
    }
}

// ------------------------------------------------------------------ encoder_backward_kernel1
/// `(dwte, dwpe)` accumulated from zero, in f64.
pub fn encoder_backward_reference(dout: &[f32], inp: &[i32], v: usize, t: usize, c: usize) -> (Vec<f32>, Vec<f32>) {
    let mut dwte = vec![0.0f64; v * c];
    let mut dwpe = vec![0.0f64; t * c];
    for (bt, &ix) in inp.iter().enumerate() {
        let tt = bt % t;
        for k in 0..c {
            let g = dout[bt * c + k] as f64;
            dwte[ix as usize * c + k] += g;
            dwpe[tt * c + k] += g;
        }
    }
    (dwte.iter().map(|&x| x as f32).collect(), dwpe.iter().map(|&x| x as f32).collect())
}

pub fn encoder_backward_config(total: usize) -> LaunchConfig {
    LaunchConfig::new(total.div_ceil(256) as u32, 256u32)
}

pub fn run_encoder_backward(back: Back, dout: &[f32], inp: &[i32], v: usize, shape: [u32; 3]) -> Result<(Vec<f32>, Vec<f32>)> {
    let [b, t, c] = shape;
    let config = encoder_backward_config(dout.len());
    match back {
        Back::Cpu(e) => {
            let mut dwte = vec![0.0f32; v * c as usize];
            let mut dwpe = vec![0.0f32; (t * c) as usize];
            encoder_backward_kernel1::launch_cpu(e, config, &mut dwte, &mut dwpe, dout, inp, b, t, c)?;
            Ok((dwte, dwpe))
        }
        Back::Gpu(s) => {
            let mut dwte = DeviceBuffer::<f32>::zeroed(s.context(), v * c as usize)?;
            let mut dwpe = DeviceBuffer::<f32>::zeroed(s.context(), (t * c) as usize)?;
            let g = DeviceBuffer::from_slice(s.context(), dout)?;
            let ix = DeviceBuffer::from_slice(s.context(), inp)?;
            encoder_backward_kernel1::launch(s, config, &mut dwte, &mut dwpe, &g, &ix, b, t, c)?;
            Ok((dwte.to_vec()?, dwpe.to_vec()?))
        }
    }
}

// ------------------------------------------------------------------ fused_residual_forward3
/// `(residual, normed, mean, rstd)`: residual rounded to bf16, the rest in f64 from it.
pub fn fused_residual_reference(inp1: &[bf16], inp2: &[bf16], weight: &[bf16], bias: &[bf16], c: usize) -> [Vec<f32>; 4] {
    let rows = inp1.len() / c;
    let residual: Vec<f32> = inp1.iter().zip(inp2).map(|(a, b)| bf16::from_f32(a.to_f32() + b.to_f32()).to_f32()).collect();
    let mut normed = vec![0.0f32; inp1.len()];
    let (mut mean, mut rstd) = (vec![0.0f32; rows], vec![0.0f32; rows]);
    for r in 0..rows {
        let x = &residual[r * c..(r + 1) * c];
        let m = x.iter().map(|&v| v as f64).sum::<f64>() / c as f64;
        let var = x.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / c as f64;
        let s = 1.0 / (var + 1e-5).sqrt();
        for k in 0..c {
            normed[r * c + k] = ((x[k] as f64 - m) * s * weight[k].to_f64() + bias[k].to_f64()) as f32;
        }
        mean[r] = m as f32;
        rstd[r] = s as f32;
    }
    [residual, normed, mean, rstd]
}

/// The port's launch: 128 threads (four warps) per block in 1-D, a row per warp.
pub fn fused_residual_config(rows: usize) -> LaunchConfig {
    LaunchConfig::new(rows.div_ceil(4) as u32, 128u32)
}

/// The source's launch: `dim3(32, 4)` blocks.
pub fn fused_residual_twin_config(rows: usize) -> LaunchConfig {
    LaunchConfig::new(rows.div_ceil(4) as u32, (32u32, 4u32))
}

pub fn run_fused_residual(back: Back, inp1: &[bf16], inp2: &[bf16], weight: &[bf16], bias: &[bf16], c: usize) -> Result<[Vec<bf16>; 4]> {
    let rows = inp1.len() / c;
    let config = fused_residual_config(rows);
    match back {
        Back::Cpu(e) => {
            let (mut res, mut normed) = (vec![bf16::ZERO; inp1.len()], vec![bf16::ZERO; inp1.len()]);
            let (mut mean, mut rstd) = (vec![bf16::ZERO; rows], vec![bf16::ZERO; rows]);
            fused_residual_forward3::launch_cpu(e, config, &mut res, &mut normed, &mut mean, &mut rstd, inp1, inp2, weight, bias, rows as i32, c as u32)?;
            Ok([res, normed, mean, rstd])
        }
        Back::Gpu(s) => {
            let ctx = s.context();
            let (mut res, mut normed) = (DeviceBuffer::<bf16>::zeroed(ctx, inp1.len())?, DeviceBuffer::<bf16>::zeroed(ctx, inp1.len())?);
            let (mut mean, mut rstd) = (DeviceBuffer::<bf16>::zeroed(ctx, rows)?, DeviceBuffer::<bf16>::zeroed(ctx, rows)?);
            let (a, b) = (DeviceBuffer::from_slice(ctx, inp1)?, DeviceBuffer::from_slice(ctx, inp2)?);
            let (w, bi) = (DeviceBuffer::from_slice(ctx, weight)?, DeviceBuffer::from_slice(ctx, bias)?);
            fused_residual_forward3::launch(s, config, &mut res, &mut normed, &mut mean, &mut rstd, &a, &b, &w, &bi, rows as i32, c as u32)?;
            Ok([res.to_vec()?, normed.to_vec()?, mean.to_vec()?, rstd.to_vec()?])
        }
    }
}

// ------------------------------------------------------------------ silu_and_mul_kernel
/// `bf16(bf16(silu(x)) * y)` per token row `[x | y]`, silu in f64.
pub fn silu_and_mul_reference(input: &[bf16], d: usize) -> Vec<f32> {
    input
        .chunks_exact(2 * d)
        .flat_map(|row| {
            (0..d).map(move |i| {
                let x = row[i].to_f64();
                let act = bf16::from_f64(x / (1.0 + (-x).exp()));
                bf16::from_f32(act.to_f32() * row[d + i].to_f32()).to_f32()
            })
        })
        .collect()
}

pub fn silu_and_mul_config(tokens: usize, d: usize) -> LaunchConfig {
    LaunchConfig::new(tokens as u32, d.min(1024) as u32)
}

pub fn run_silu_and_mul(back: Back, input: &[bf16], d: usize) -> Result<Vec<bf16>> {
    let tokens = input.len() / (2 * d);
    let config = silu_and_mul_config(tokens, d);
    match back {
        Back::Cpu(e) => {
            let mut out = vec![bf16::ZERO; tokens * d];
            silu_and_mul_kernel::launch_cpu(e, config, &mut out, input, d as u32)?;
            Ok(out)
        }
        Back::Gpu(s) => {
            let x = DeviceBuffer::from_slice(s.context(), input)?;
            let mut out = DeviceBuffer::<bf16>::zeroed(s.context(), tokens * d)?;
            silu_and_mul_kernel::launch(s, config, &mut out, &x, d as u32)?;
            Ok(out.to_vec()?)
        }
    }
}

// ------------------------------------------------------------------ rms_norm_kernel
/// `bf16(bf16(x * s) * w)`, `s = 1 / sqrt(mean(x^2) + eps)` in f64, rows `stride` apart.
pub fn rms_norm_reference(input: &[bf16], stride: usize, weight: &[bf16], eps: f32, tokens: usize) -> Vec<f32> {
    let hidden = weight.len();
    let mut out = Vec::with_capacity(tokens * hidden);
    for t in 0..tokens {
        let x = &input[t * stride..t * stride + hidden];
        let ms = x.iter().map(|v| v.to_f64().powi(2)).sum::<f64>() / hidden as f64;
        let s = 1.0 / (ms + eps as f64).sqrt();
        for k in 0..hidden {
            let scaled = bf16::from_f64(x[k].to_f64() * s);
            out.push(bf16::from_f32(scaled.to_f32() * weight[k].to_f32()).to_f32());
        }
    }
    out
}

/// The relative tolerance of the RMS norm check: two bf16 roundings in a row (`bf16(x * s)`, then
/// the product with `weight`), so an `s` that differs from the f64 reference's in its last bits
/// can move the first rounding by one bf16 ulp, which `weight` (up to 1.5) carries into the
/// result: 1 ulp of bf16 is 2^-8 relative. The first GPU run's check at 1e-2 failed for the Rust
/// port and the nvcc twin alike at one element of 16.8 M (0.29296875 against 0.2890625).
pub const RMS_NORM_REL: f64 = 2e-2;

pub fn rms_norm_config(tokens: usize, hidden: usize) -> LaunchConfig {
    LaunchConfig::new(tokens as u32, hidden.min(1024) as u32)
}

/// With `fixed`, the fix round's `rms_norm_kernel_fixed`.
pub fn run_rms_norm(back: Back, fixed: bool, input: &[bf16], stride: usize, weight: &[bf16], eps: f32, tokens: usize) -> Result<Vec<bf16>> {
    let hidden = weight.len();
    let config = rms_norm_config(tokens, hidden);
    match back {
        Back::Cpu(e) => {
            let mut out = vec![bf16::ZERO; tokens * hidden];
            if fixed {
                rms_norm_kernel_fixed::launch_cpu(e, config, &mut out, input, stride as i64, weight, eps, tokens as i32, hidden as u32)?;
            } else {
                rms_norm_kernel::launch_cpu(e, config, &mut out, input, stride as i64, weight, eps, tokens as i32, hidden as u32)?;
            }
            Ok(out)
        }
        Back::Gpu(s) => {
            let x = DeviceBuffer::from_slice(s.context(), input)?;
            let w = DeviceBuffer::from_slice(s.context(), weight)?;
            let mut out = DeviceBuffer::<bf16>::zeroed(s.context(), tokens * hidden)?;
            if fixed {
                rms_norm_kernel_fixed::launch(s, config, &mut out, &x, stride as i64, &w, eps, tokens as i32, hidden as u32)?;
            } else {
                rms_norm_kernel::launch(s, config, &mut out, &x, stride as i64, &w, eps, tokens as i32, hidden as u32)?;
            }
            Ok(out.to_vec()?)
        }
    }
}

/// [`run_rms_norm`] for session 15's `rms_norm_kernel_broadcast` (`sum_broadcast`).
#[allow(dead_code, reason = "the benchmark shares this module and calls only some helpers")]
pub fn run_rms_norm_broadcast(back: Back, input: &[bf16], stride: usize, weight: &[bf16], eps: f32, tokens: usize) -> Result<Vec<bf16>> {
    let hidden = weight.len();
    let config = rms_norm_config(tokens, hidden);
    match back {
        Back::Cpu(e) => {
            let mut out = vec![bf16::ZERO; tokens * hidden];
            rms_norm_kernel_broadcast::launch_cpu(e, config, &mut out, input, stride as i64, weight, eps, tokens as i32, hidden as u32)?;
            Ok(out)
        }
        Back::Gpu(s) => {
            let x = DeviceBuffer::from_slice(s.context(), input)?;
            let w = DeviceBuffer::from_slice(s.context(), weight)?;
            let mut out = DeviceBuffer::<bf16>::zeroed(s.context(), tokens * hidden)?;
            rms_norm_kernel_broadcast::launch(s, config, &mut out, &x, stride as i64, &w, eps, tokens as i32, hidden as u32)?;
            Ok(out.to_vec()?)
        }
    }
}

/// [`run_rms_norm`] for session 16's diagnostic `rms_norm_kernel_cub` (cub's second level in
/// the port; whole warps only).
pub fn run_rms_norm_cub(back: Back, input: &[bf16], stride: usize, weight: &[bf16], eps: f32, tokens: usize) -> Result<Vec<bf16>> {
    let hidden = weight.len();
    let config = rms_norm_config(tokens, hidden);
    match back {
        Back::Cpu(e) => {
            let mut out = vec![bf16::ZERO; tokens * hidden];
            rms_norm_kernel_cub::launch_cpu(e, config, &mut out, input, stride as i64, weight, eps, tokens as i32, hidden as u32)?;
            Ok(out)
        }
        Back::Gpu(s) => {
            let x = DeviceBuffer::from_slice(s.context(), input)?;
            let w = DeviceBuffer::from_slice(s.context(), weight)?;
            let mut out = DeviceBuffer::<bf16>::zeroed(s.context(), tokens * hidden)?;
            rms_norm_kernel_cub::launch(s, config, &mut out, &x, stride as i64, &w, eps, tokens as i32, hidden as u32)?;
            Ok(out.to_vec()?)
        }
    }
}

// ------------------------------------------------------------------ segmented_max_reduction
/// `max |x| / 448` (exact: a maximum and one correctly rounded division).
pub fn segmented_max_reference(input: &[f32]) -> f32 {
    input.iter().fold(0.0f32, |m, x| m.max(x.abs())) / 448.0
}

pub fn segmented_max_config(tokens: usize) -> LaunchConfig {
    LaunchConfig::new(tokens as u32, 1024u32)
}

pub fn run_segmented_max(back: Back, input: &[f32], tokens: usize) -> Result<f32> {
    let config = segmented_max_config(tokens);
    match back {
        Back::Cpu(e) => {
            let mut scale = [0i32];
            segmented_max_reduction::launch_cpu(e, config, &mut scale, input, input.len() as i64)?;
            Ok(f32::from_bits(scale[0] as u32))
        }
        Back::Gpu(s) => {
            let x = DeviceBuffer::from_slice(s.context(), input)?;
            let mut scale = DeviceBuffer::<i32>::zeroed(s.context(), 1)?;
            segmented_max_reduction::launch(s, config, &mut scale, &x, input.len() as i64)?;
            Ok(f32::from_bits(scale.to_vec()?[0] as u32))
        }
    }
}
