//! CPU references of the eight ported kernels (host only), their inputs and the checks that
//! compare a kernel's output with them. Shared by `tests/ports2.rs` (CPU executor, and GPU when
//! present) and `examples/ports2_bench.rs`.

use ferrocuda_device::half::bf16;

/// A small deterministic generator (xorshift64*), so CPU and GPU runs see the same data.
pub struct Random(u64);

impl Random {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    /// `n` uniform `f32`s.
    pub fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }

    /// `n` uniform values rounded to bf16.
    pub fn bf16s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<bf16> {
        (0..n).map(|_| bf16::from_f32(self.uniform(lo, hi))).collect()
    }
}

/// Packs bf16s eight to a 16-byte pack (any `Pod` type of 16 bytes made of 8 bf16s).
pub fn pack<P: bytemuck::Pod>(values: &[bf16]) -> Vec<P> {
    assert_eq!(std::mem::size_of::<P>(), 16);
    assert_eq!(values.len() % 8, 0);
    values.chunks_exact(8).map(|c| bytemuck::pod_read_unaligned(bytemuck::cast_slice(c))).collect()
}

/// The bf16s of packs.
pub fn unpack<P: bytemuck::Pod>(packs: &[P]) -> Vec<bf16> {
    bytemuck::cast_slice::<P, bf16>(packs).to_vec()
}

/// Compares `got` and `expected` element by element within `abs + rel |expected|`; the error
/// names the worst element.
pub fn check_close(what: &str, got: &[f32], expected: &[f32], abs: f32, rel: f32) -> Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), expected.len()));
    }
    let mut bad = 0usize;
    let mut worst = (0usize, 0.0f32);
    for (i, (&g, &e)) in got.iter().zip(expected).enumerate() {
        let err = (g - e).abs();
        let excess = err - (abs + rel * e.abs());
        if excess > 0.0 || g.is_nan() != e.is_nan() {
            bad += 1;
            if excess > worst.1 || worst.1 == 0.0 {
                worst = (i, excess.max(f32::MIN_POSITIVE));
            }
        }
    }
    if bad == 0 {
        Ok(())
    } else {
        let i = worst.0;
        Err(format!("{what}: {bad} of {} values off, worst at {i}: got {}, expected {}", got.len(), got[i], expected[i]))
    }
}

/// As [`check_close`] on bf16 values.
pub fn check_close_bf16(what: &str, got: &[bf16], expected: &[bf16], abs: f32, rel: f32) -> Result<(), String> {
    let g: Vec<f32> = got.iter().map(|x| x.to_f32()).collect();
    let e: Vec<f32> = expected.iter().map(|x| x.to_f32()).collect();
    check_close(what, &g, &e, abs, rel)
}

/// Bitwise equality; the error names the first difference.
pub fn check_exact<T: PartialEq + std::fmt::Debug>(what: &str, got: &[T], expected: &[T]) -> Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), expected.len()));
    }
    match got.iter().zip(expected).position(|(g, e)| g != e) {
        None => Ok(()),
        Some(i) => {
            let n = got.iter().zip(expected).filter(|(g, e)| g != e).count();
            Err(format!("{what}: {n} of {} differ, first at {i}: got {:?}, expected {:?}", got.len(), got[i], expected[i]))
        }
    }
}

// ---- llm.c gelu_backward_inplace ----------------------------------------------------------

/// `sqrt(2 / pi)`.
const GELU_SCALING_FACTOR: f32 = 0.797_884_6;

/// The GELU (tanh approximation) gradient times `dout`, rounded to bf16.
pub fn gelu_backward(inp: &[bf16], dout: &[bf16]) -> Vec<bf16> {
    inp.iter()
        .zip(dout)
        .map(|(&x, &d)| {
            let x = x.to_f32();
            let cube = 0.044715f32 * x * x * x;
            let tanh_arg = GELU_SCALING_FACTOR * (x + cube);
            let tanh_out = tanh_arg.tanh();
            let cosh_out = tanh_arg.cosh();
            let sech_out = 1.0 / (cosh_out * cosh_out);
            let local_grad = 0.5 * (1.0 + tanh_out) + x * 0.5 * sech_out * GELU_SCALING_FACTOR * (1.0 + 3.0 * 0.044715 * x * x);
            bf16::from_f32(local_grad * d.to_f32())
        })
        .collect()
}

// ---- llm.c adamw_kernel3 ------------------------------------------------------------------

/// AdamW's hyperparameters for one step, as llm.c passes them.
#[derive(Clone, Copy, Debug)]
pub struct AdamW {
    /// Learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// `1 - beta1^t`.
    pub beta1_correction: f32,
    /// `1 - beta2^t`.
    pub beta2_correction: f32,
    /// Denominator epsilon.
    pub eps: f32,
    /// Weight decay.
    pub weight_decay: f32,
    /// Gradient scale.
    pub grad_scale: f32,
    /// Stochastic-rounding seed.
    pub seed: u32,
}

impl AdamW {
    /// Step 3 of llm.c's defaults (lr 3e-4, betas 0.9 / 0.95, eps 1e-8, weight decay 0.1).
    pub fn step3() -> Self {
        let (beta1, beta2, t) = (0.9f32, 0.95f32, 3);
        AdamW {
            lr: 3e-4,
            beta1,
            beta2,
            beta1_correction: 1.0 - beta1.powi(t),
            beta2_correction: 1.0 - beta2.powi(t),
            eps: 1e-8,
            weight_decay: 0.1,
            grad_scale: 1.0,
            seed: 0x1234_5678,
        }
    }
}

fn squirrel_noise5(position_x: u32, seed: u32) -> u32 {
    let mut m = position_x.wrapping_mul(0xd2a8_0a3f).wrapping_add(seed);
    m ^= m >> 9;
    m = m.wrapping_add(0xa884_f197);
    m ^= m >> 11;
    m = m.wrapping_mul(0x6C73_6F4B);
    m ^= m >> 13;
    m = m.wrapping_add(0xB79F_3ABB);
    m ^= m >> 15;
    m = m.wrapping_mul(0x1b56_c4f5);
    m ^= m >> 17;
    m
}

/// The outputs of one AdamW step: bf16 params, master params, m, v.
pub struct AdamWOut {
    /// bf16 parameters (stochastically rounded).
    pub params: Vec<bf16>,
    /// f32 master parameters.
    pub master: Vec<f32>,
    /// First moments.
    pub m: Vec<f32>,
    /// Second moments.
    pub v: Vec<f32>,
}

/// One llm.c AdamW step on the host, for blocks of `block` threads (the random numbers depend on
/// the thread and block indices).
pub fn adamw(master: &[f32], grads: &[bf16], m: &[f32], v: &[f32], h: AdamW, block: u32) -> AdamWOut {
    let lerp = |start: f32, end: f32, w: f32| w.mul_add(end, (-w).mul_add(start, start));
    let mut out = AdamWOut { params: vec![], master: vec![], m: vec![], v: vec![] };
    for i in 0..master.len() {
        let grad = h.grad_scale * grads[i].to_f32();
        let mi = lerp(grad, m[i], h.beta1);
        let vi = lerp(grad * grad, v[i], h.beta2);
        out.m.push(mi);
        out.v.push(vi);
        let (mh, vh) = (mi / h.beta1_correction, vi / h.beta2_correction);
        let old = master[i];
        let param = old - (h.lr * (mh / (vh.sqrt() + h.eps) + h.weight_decay * old));
        let (thread, blk) = (i as u32 % block, i as u32 / block);
        let random = squirrel_noise5(thread.wrapping_add(198_491_317u32.wrapping_mul(blk.wrapping_mul(block))), h.seed);
        let threshold = random & 0xFFFF;
        let bits = param.to_bits();
        let bits = if bits & 0xFFFF > threshold { bits | 0xFFFF } else { bits & !0xFFFF };
        out.params.push(bf16::from_f32(f32::from_bits(bits)));
        out.master.push(param);
    }
    out
}

/// Checks an AdamW step: m and v within 1e-6 relative, master within 1e-6 relative plus 1e-9,
/// and the bf16 parameters within two units in the last place: a master value one float ulp off
/// the reference can flip its stochastic rounding from the bf16 below to the one above (the first
/// GPU run saw 1 of 124M values 2 ulps off, for the nvcc twin and the port alike).
pub fn check_adamw(params: &[bf16], master: &[f32], m: &[f32], v: &[f32], e: &AdamWOut) -> Result<(), String> {
    check_close("m", m, &e.m, 1e-12, 1e-6)?;
    check_close("v", v, &e.v, 1e-14, 1e-6)?;
    check_close("master", master, &e.master, 1e-9, 1e-6)?;
    let far = params.iter().zip(&e.params).filter(|(g, x)| (g.to_bits() as i32 - x.to_bits() as i32).abs() > 2).count();
    if far > 0 {
        return Err(format!("params: {far} of {} more than 2 ulps off", params.len()));
    }
    Ok(())
}

// ---- llm.c layernorm_forward_kernel3 --------------------------------------------------------

/// Layer norm of `n` rows of `c`: (out, mean, rstd), in f64 then rounded.
pub fn layernorm(inp: &[bf16], weight: &[bf16], bias: &[bf16], n: usize, c: usize) -> (Vec<bf16>, Vec<f32>, Vec<f32>) {
    let (mut out, mut mean, mut rstd) = (vec![], vec![], vec![]);
    for r in 0..n {
        let x: Vec<f64> = inp[r * c..(r + 1) * c].iter().map(|v| v.to_f64()).collect();
        let m = x.iter().sum::<f64>() / c as f64;
        let var = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / c as f64;
        let s = 1.0 / (var + 1e-5).sqrt();
        mean.push(m as f32);
        rstd.push(s as f32);
        for (i, v) in x.iter().enumerate() {
            out.push(bf16::from_f64(s * (v - m) * weight[i].to_f64() + bias[i].to_f64()));
        }
    }
    (out, mean, rstd)
}

// ---- llm.c matmul_backward_bias_kernel9 -----------------------------------------------------

/// Column sums of `dout` (`bt` rows of `oc`), in f64.
pub fn column_sums(dout: &[bf16], oc: usize) -> (Vec<f32>, Vec<f32>) {
    let mut sums = vec![0.0f64; oc];
    let mut abs = vec![0.0f64; oc];
    for row in dout.chunks_exact(oc) {
        for (j, v) in row.iter().enumerate() {
            sums[j] += v.to_f64();
            abs[j] += v.to_f64().abs();
        }
    }
    (sums.iter().map(|&s| s as f32).collect(), abs.iter().map(|&s| s as f32).collect())
}

/// Checks the kernel's `grid_y` partial rows of `oc` against the column sums: their sum within
/// `1e-5 Σ|x| + 1e-4` per column.
pub fn check_bias_partials(partials: &[f32], oc: usize, sums: &[f32], abs: &[f32]) -> Result<(), String> {
    let mut total = vec![0.0f32; oc];
    for row in partials.chunks_exact(oc) {
        for (t, p) in total.iter_mut().zip(row) {
            *t += p;
        }
    }
    for j in 0..oc {
        if (total[j] - sums[j]).abs() > 1e-5 * abs[j] + 1e-4 {
            return Err(format!("dbias column {j}: got {}, expected {} (sum |x| {})", total[j], sums[j], abs[j]));
        }
    }
    Ok(())
}

// ---- llm.c permute_kernel -------------------------------------------------------------------

/// q, k, v (B, NH, N, d) from `inp` (B, N, 3, NH, d).
pub fn permute(inp: &[bf16], b: usize, n: usize, nh: usize, d: usize) -> [Vec<bf16>; 3] {
    let mut out = [vec![], vec![], vec![]];
    for bb in 0..b {
        for h in 0..nh {
            for t in 0..n {
                for e in 0..d {
                    for (which, o) in out.iter_mut().enumerate() {
                        o.push(inp[((bb * n + t) * 3 + which) * nh * d + h * d + e]);
                    }
                }
            }
        }
    }
    out
}

// ---- vLLM fused_add_rms_norm_kernel ---------------------------------------------------------

/// `residual += input` (bf16 adds) and `input = bf16(bf16(residual * s) * weight)` per token, as
/// vLLM's packed kernel rounds; `s = rsqrt(mean(residual^2) + eps)` in f64.
pub fn fused_add_rms_norm(input: &[bf16], residual: &[bf16], weight: &[bf16], hidden: usize, eps: f32) -> (Vec<bf16>, Vec<bf16>) {
    let mut out_in = vec![];
    let mut out_res = vec![];
    for (x, r) in input.chunks_exact(hidden).zip(residual.chunks_exact(hidden)) {
        let z: Vec<bf16> = x.iter().zip(r).map(|(a, b)| bf16::from_f32(a.to_f32() + b.to_f32())).collect();
        let var = z.iter().map(|v| v.to_f64() * v.to_f64()).sum::<f64>() / hidden as f64;
        let s = (1.0 / (var + eps as f64).sqrt()) as f32;
        for (i, v) in z.iter().enumerate() {
            let scaled = bf16::from_f32(v.to_f32() * s);
            out_in.push(bf16::from_f32(scaled.to_f32() * weight[i].to_f32()));
        }
        out_res.extend(z);
    }
    (out_in, out_res)
}

// ---- vLLM rotary_embedding_kernel (NeoX) ----------------------------------------------------

/// NeoX rotary of `rows` rows of `heads` heads of `head` (full rotary) by the cos/sin of each
/// token's position (`cache`: rows of `head` values, cos then sin).
pub fn rotary_neox(x: &[bf16], positions: &[i64], cache: &[bf16], heads: usize, head: usize) -> Vec<bf16> {
    let half = head / 2;
    let mut out = x.to_vec();
    for (t, &pos) in positions.iter().enumerate() {
        let c = &cache[pos as usize * head..(pos as usize + 1) * head];
        for h in 0..heads {
            let base = (t * heads + h) * head;
            for k in 0..half {
                let (cos, sin) = (c[k].to_f32(), c[half + k].to_f32());
                let (xf, yf) = (x[base + k].to_f32(), x[base + k + half].to_f32());
                out[base + k] = bf16::from_f32(xf * cos - yf * sin);
                out[base + k + half] = bf16::from_f32(yf * cos + xf * sin);
            }
        }
    }
    out
}

/// The cos/sin cache of vLLM's rotary embedding: row `p` is `cos(p f_k)` then `sin(p f_k)`,
/// `f_k = base^(-2k / rot_dim)`, rounded to bf16.
pub fn cos_sin_cache(max_position: usize, rot_dim: usize, base: f64) -> Vec<bf16> {
    let half = rot_dim / 2;
    let mut cache = Vec::with_capacity(max_position * rot_dim);
    for p in 0..max_position {
        let angles: Vec<f64> = (0..half).map(|k| p as f64 * base.powf(-2.0 * k as f64 / rot_dim as f64)).collect();
        cache.extend(angles.iter().map(|a| bf16::from_f64(a.cos())));
        cache.extend(angles.iter().map(|a| bf16::from_f64(a.sin())));
    }
    cache
}

// ---- vLLM count_and_sort_expert_tokens_kernel -----------------------------------------------

/// Per expert, the start of its segment in `sorted_token_ids` (each expert's count padded to a
/// multiple of `block_size`, as `moe_align_block_size` computes `cumsum` before this kernel).
pub fn expert_offsets(topk_ids: &[i32], experts: usize, block_size: usize) -> Vec<i32> {
    let mut counts = vec![0usize; experts];
    for &e in topk_ids {
        counts[e as usize] += 1;
    }
    let mut offsets = vec![0i32; experts + 1];
    for e in 0..experts {
        offsets[e + 1] = offsets[e] + (counts[e].div_ceil(block_size) * block_size) as i32;
    }
    offsets
}

/// Checks the sort: each expert's segment starts with exactly the indices routed to it (in any
/// order), and the counters end at `offset + count`.
pub fn check_sorted(sorted: &[i32], cumsum_after: &[i32], topk_ids: &[i32], offsets: &[i32], padding: i32) -> Result<(), String> {
    let experts = offsets.len() - 1;
    let mut expected: Vec<Vec<i32>> = vec![vec![]; experts];
    for (i, &e) in topk_ids.iter().enumerate() {
        expected[e as usize].push(i as i32);
    }
    for e in 0..experts {
        let start = offsets[e] as usize;
        let count = expected[e].len();
        if cumsum_after[e] != offsets[e] + count as i32 {
            return Err(format!("expert {e}: counter ends at {}, expected {}", cumsum_after[e], offsets[e] + count as i32));
        }
        let mut got = sorted[start..start + count].to_vec();
        got.sort_unstable();
        if got != expected[e] {
            return Err(format!("expert {e}: its segment holds other indices"));
        }
        if let Some(p) = sorted[start + count..offsets[e + 1] as usize].iter().position(|&x| x != padding) {
            return Err(format!("expert {e}: padding slot {} was written", start + count + p));
        }
    }
    Ok(())
}

// ---- CUDA samples threadFenceReduction: reduceSinglePass ---------------------------------------

/// Checks a single-precision sum of `x` against the host's (in `f64`): within `1e-5` of the sum
/// of the magnitudes (the blocks add in another order than the host).
pub fn check_sum(what: &str, got: f32, x: &[f32]) -> Result<(), String> {
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    let scale: f64 = x.iter().map(|&v| (v as f64).abs()).sum::<f64>().max(1.0);
    if (got as f64 - want).abs() <= 1e-5 * scale {
        Ok(())
    } else {
        Err(format!("{what}: {got} where the host's sum is {want} (tolerance {:.3e})", 1e-5 * scale))
    }
}
