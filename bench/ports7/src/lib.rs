//! Issue 30's seventh held-out port: the CPU references of the llm.c and vLLM kernels, written
//! from the public sources (bench/ports7/cuda/ports7.cu), and the inputs the tests and the GPU
//! bench share.

pub use half::bf16;

/// Deterministic pseudo-random `f32` in `[-1, 1)` (an xorshift; the same on every machine).
pub fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// [`random_f32`] times `scale`, rounded to bf16.
pub fn random_bf16(n: usize, seed: u64, scale: f32) -> Vec<bf16> {
    random_f32(n, seed).into_iter().map(|x| bf16::from_f32(x * scale)).collect()
}

/// The largest `|a - b| / max(|b|, floor)` over the pairs.
pub fn max_rel_err(a: &[f32], b: &[f32], floor: f32) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs() / y.abs().max(floor)).fold(0.0, f32::max)
}

/// `residual_forward_kernel`: `out = bf16(inp1 + inp2)`.
pub fn residual_forward(inp1: &[bf16], inp2: &[bf16]) -> Vec<bf16> {
    inp1.iter().zip(inp2).map(|(a, b)| bf16::from_f32(a.to_f32() + b.to_f32())).collect()
}

/// `unpermute_kernel_backward`: `dinp[b][nh][n][d] = dout[b][n][nh][d]`.
pub fn unpermute_backward(dout: &[bf16], b: usize, n: usize, nh: usize, d: usize) -> Vec<bf16> {
    let mut dinp = vec![bf16::ZERO; b * nh * n * d];
    for ib in 0..b {
        for ih in 0..nh {
            for i in 0..n {
                for k in 0..d {
                    dinp[((ib * nh + ih) * n + i) * d + k] = dout[((ib * n + i) * nh + ih) * d + k];
                }
            }
        }
    }
    dinp
}

/// `permute_kernel_backward`: `dinp[b][n][j][nh][d] = (dq, dk, dv)[j][b][nh][n][d]`.
pub fn permute_backward(dq: &[bf16], dk: &[bf16], dv: &[bf16], b: usize, n: usize, nh: usize, d: usize) -> Vec<bf16> {
    let mut dinp = vec![bf16::ZERO; 3 * b * nh * n * d];
    for ib in 0..b {
        for ih in 0..nh {
            for i in 0..n {
                for k in 0..d {
                    let idx = ((ib * nh + ih) * n + i) * d + k;
                    let inp = (ib * n + i) * 3 * nh * d + ih * d + k;
                    dinp[inp] = dq[idx];
                    dinp[inp + nh * d] = dk[idx];
                    dinp[inp + 2 * nh * d] = dv[idx];
                }
            }
        }
    }
    dinp
}

/// `reduce_add_sum_kernel`: `dst[i] = bf16(dst[i] + sum_l src[i + n l])`, the sum in `f32`
/// in order of `l`.
pub fn reduce_add_sum(dst: &mut [bf16], src: &[f32], m: usize) {
    let n = dst.len();
    for (i, x) in dst.iter_mut().enumerate() {
        let mut acc = 0.0f32;
        for l in 0..m {
            acc += src[i + n * l];
        }
        *x = bf16::from_f32(x.to_f32() + acc);
    }
}

/// `fused_residual_forward_kernel5`'s outputs: residual, normed, mean, rstd.
pub struct FusedResidual {
    /// `bf16(inp1 + inp2)`.
    pub residual: Vec<bf16>,
    /// The layer norm of `residual`.
    pub normed: Vec<bf16>,
    /// Per row.
    pub mean: Vec<f32>,
    /// Per row.
    pub rstd: Vec<f32>,
}

/// `fused_residual_forward_kernel5` over `rows` rows of `c` (exact `f32` sums in row order;
/// the GPU's warp sums differ in the last bits).
pub fn fused_residual_forward(inp1: &[bf16], inp2: &[bf16], weight: &[bf16], bias: &[bf16], rows: usize, c: usize) -> FusedResidual {
    let residual = residual_forward(inp1, inp2);
    let mut normed = vec![bf16::ZERO; rows * c];
    let (mut mean, mut rstd) = (vec![0.0; rows], vec![0.0; rows]);
    for r in 0..rows {
        let x = &residual[r * c..(r + 1) * c];
        let m = x.iter().map(|v| v.to_f32()).sum::<f32>() / c as f32;
        let v = x.iter().map(|v| (v.to_f32() - m) * (v.to_f32() - m)).sum::<f32>() / c as f32;
        let s = 1.0 / (v + 1e-5f32).sqrt();
        for k in 0..c {
            normed[r * c + k] = bf16::from_f32(s * (x[k].to_f32() - m) * weight[k].to_f32() + bias[k].to_f32());
        }
        mean[r] = m;
        rstd[r] = s;
    }
    FusedResidual { residual, normed, mean, rstd }
}

/// `act_and_mul_kernel_with_param<bf16, fatrelu_kernel>`: `bf16(x > t ? x : 0) * y`, the
/// product rounded once to bf16.
pub fn fatrelu_and_mul(input: &[bf16], tokens: usize, d: usize, threshold: f32) -> Vec<bf16> {
    let mut out = vec![bf16::ZERO; tokens * d];
    for t in 0..tokens {
        for i in 0..d {
            let x = input[t * 2 * d + i].to_f32();
            let y = input[t * 2 * d + d + i].to_f32();
            let a = bf16::from_f32(if x > threshold { x } else { 0.0 }).to_f32();
            out[t * d + i] = bf16::from_f32(a * y);
        }
    }
    out
}

/// `float_to_int8_rn`: nearest, ties to even, saturated (`cvt.rni.sat.s8.f32`).
pub fn to_i8_rn_sat(x: f32) -> i8 {
    if x.is_nan() { 0 } else { x.round_ties_even().clamp(-128.0, 127.0) as i8 }
}

/// `static_scaled_int8_quant_kernel`: `rn_sat_i8(x / scale)`.
pub fn static_scaled_int8_quant(input: &[bf16], scale: f32) -> Vec<i8> {
    input.iter().map(|x| to_i8_rn_sat(x.to_f32() / scale)).collect()
}

/// `dynamic_scaled_int8_quant_kernel`: per token `absmax`, `scale = absmax / 127`,
/// `rn_sat_i8(x * (127 / absmax))`.
pub fn dynamic_scaled_int8_quant(input: &[bf16], tokens: usize, hidden: usize) -> (Vec<i8>, Vec<f32>) {
    let mut out = vec![0i8; tokens * hidden];
    let mut scales = vec![0.0f32; tokens];
    for t in 0..tokens {
        let row = &input[t * hidden..(t + 1) * hidden];
        let absmax = row.iter().map(|x| x.to_f32().abs()).fold(0.0f32, f32::max);
        scales[t] = absmax / 127.0;
        let tmp = 127.0f32 / absmax;
        for (o, x) in out[t * hidden..(t + 1) * hidden].iter_mut().zip(row) {
            *o = to_i8_rn_sat(x.to_f32() * tmp);
        }
    }
    (out, scales)
}

/// `x` copied into a vector of a wider, more aligned `Pod` type (`X128`, `F128`, `Bf16x8`): the
/// element sizes must divide evenly.
pub fn pack<S: bytemuck::Pod, T: bytemuck::Pod + bytemuck::Zeroable>(x: &[S]) -> Vec<T> {
    let bytes: &[u8] = bytemuck::cast_slice(x);
    let mut out = vec![T::zeroed(); bytes.len() / std::mem::size_of::<T>()];
    bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(bytes);
    out
}
