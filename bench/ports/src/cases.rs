//! Host side of the ports: inputs, CPU references and the checks both the CPU-executor tests
//! (`tests/ports.rs`) and the GPU benchmark (`examples/ports_bench.rs`) apply to a kernel's
//! output. References are written from the public sources' semantics, in `f64` where the
//! source computes in floating point, bit-exact where the result is determined (integer
//! rounding, a bf16 sum of two bf16s).

use crate::{I8x16, MOE_TOPK, X128};
use ferrocuda_device::half::{Bf16x2, bf16};

/// A small deterministic generator (xorshift64*), so that every run and both back ends see
/// the same inputs.
pub struct Random(u64);

impl Random {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Self {
        Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// Uniform in `[low, high)`.
    pub fn uniform(&mut self, low: f32, high: f32) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        low + (high - low) * (bits as f32 / (1u64 << 24) as f32)
    }

    /// `len` bf16 values uniform in `[low, high)`.
    pub fn bf16s(&mut self, len: usize, low: f32, high: f32) -> Vec<bf16> {
        (0..len).map(|_| bf16::from_f32(self.uniform(low, high))).collect()
    }

    /// `len` f32 values uniform in `[low, high)`.
    pub fn f32s(&mut self, len: usize, low: f32, high: f32) -> Vec<f32> {
        (0..len).map(|_| self.uniform(low, high)).collect()
    }
}

/// bf16 values packed eight to an [`X128`] (`values.len() % 8 == 0`).
pub fn pack(values: &[bf16]) -> Vec<X128> {
    assert!(values.len().is_multiple_of(8), "{} values do not fill whole packs of 8", values.len());
    values.chunks_exact(8).map(|c| X128 { pairs: [0, 2, 4, 6].map(|k| Bf16x2::from_bits(c[k].to_bits() as u32 | (c[k + 1].to_bits() as u32) << 16)) }).collect()
}

/// The bf16 values of packs, in memory order.
pub fn unpack(packs: &[X128]) -> Vec<bf16> {
    packs.iter().flat_map(|p| p.pairs.iter().flat_map(|q| [bf16::from_bits(q.to_bits() as u16), bf16::from_bits((q.to_bits() >> 16) as u16)])).collect()
}

/// A bf16's distance from `expected` in units of bf16's last place at `expected` (relative
/// 2^-8), with a floor for values near zero.
pub fn bf16_ulps(got: bf16, expected: f64) -> f64 {
    let ulp = (expected.abs() * 2f64.powi(-8)).max(1e-30);
    (got.to_f64() - expected).abs() / ulp
}

/// Fails with the first index where `ok(i)` is false, naming `what`.
pub fn check_all(what: &str, len: usize, mut ok: impl FnMut(usize) -> Result<(), String>) -> Result<(), String> {
    for i in 0..len {
        ok(i).map_err(|e| format!("{what}: element {i}: {e}"))?;
    }
    Ok(())
}

// 1. gelu_and_mul ---------------------------------------------------------------------------

/// `gelu(x) * y` for each token: `input` `[tokens, 2, d]`.
pub fn gelu_and_mul(input: &[bf16], d: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(input.len() / 2);
    for row in input.chunks_exact(2 * d) {
        for i in 0..d {
            let x = row[i].to_f64();
            let g = x * 0.5 * (1.0 + libm::erf(x / 2f64.sqrt()));
            out.push(bf16::from_f64(g).to_f64() * row[d + i].to_f64());
        }
    }
    out
}

/// Within 3 bf16 ulps of the reference: GELU is rounded to bf16 before the product (half an
/// ulp of the factor, carried through the product), then the product is rounded (half an
/// ulp); nvcc's own twin reaches 2.2 ulps on the benchmark's inputs.
pub fn check_gelu_and_mul(got: &[bf16], expected: &[f64]) -> Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!("{} values, expected {}", got.len(), expected.len()));
    }
    check_all("gelu_and_mul", got.len(), |i| {
        let u = bf16_ulps(got[i], expected[i]);
        if u <= 3.0 { Ok(()) } else { Err(format!("{} against {} ({u:.1} bf16 ulps)", got[i], expected[i])) }
    })
}

// 2. encoder_forward -----------------------------------------------------------------------

/// `out[b, t, c] = bf16(wte[inp[b, t], c] + wpe[t, c])`, with the sum rounded to f32 first (as
/// the source adds two floats): bit-exact.
pub fn encoder_forward(inp: &[i32], wte: &[bf16], wpe: &[bf16], t: usize, c: usize) -> Vec<bf16> {
    let mut out = Vec::with_capacity(inp.len() * c);
    for (bt, &token) in inp.iter().enumerate() {
        let position = bt % t;
        for ch in 0..c {
            out.push(bf16::from_f32(wte[token as usize * c + ch].to_f32() + wpe[position * c + ch].to_f32()));
        }
    }
    out
}

/// Bit-exact.
pub fn check_exact<T: PartialEq + core::fmt::Debug>(what: &str, got: &[T], expected: &[T]) -> Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), expected.len()));
    }
    check_all(what, got.len(), |i| if got[i] == expected[i] { Ok(()) } else { Err(format!("{:?} against {:?}", got[i], expected[i])) })
}

// 3. global_norm_squared -------------------------------------------------------------------

/// The sum of squares (f64).
pub fn sum_of_squares(data: &[bf16]) -> f64 {
    data.iter().map(|v| v.to_f64() * v.to_f64()).sum()
}

/// The partials' total is `before + sum of squares` within 1e-4 relative (f32 accumulation).
pub fn check_norm_partials(partials: &[f32], before: f64, expected: f64) -> Result<(), String> {
    let total: f64 = partials.iter().map(|&p| p as f64).sum();
    let want = before + expected;
    if (total - want).abs() <= 1e-4 * want.abs() { Ok(()) } else { Err(format!("global_norm_squared: partials sum to {total}, expected {want}")) }
}

// 4. moe_softmax ---------------------------------------------------------------------------

/// Softmax of each `cols`-wide row in f64; rows with `finished != 0` are `None`.
pub fn moe_softmax(input: &[f32], finished: &[u8], cols: usize) -> Vec<Option<f64>> {
    let mut out = Vec::with_capacity(input.len());
    for (r, row) in input.chunks_exact(cols).enumerate() {
        if finished[r] != 0 {
            out.extend(std::iter::repeat_n(None, cols));
            continue;
        }
        let max = row.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
        let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
        out.extend(row.iter().map(|&v| Some((v as f64 - max).exp() / sum)));
    }
    out
}

/// Within 1e-5 relative of the reference (precise `expf`, an f32 sum of at most a few hundred
/// terms); a finished row keeps `sentinel`.
pub fn check_moe_softmax(got: &[f32], expected: &[Option<f64>], sentinel: f32) -> Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!("{} values, expected {}", got.len(), expected.len()));
    }
    check_all("moe_softmax", got.len(), |i| match expected[i] {
        None if got[i].to_bits() == sentinel.to_bits() => Ok(()),
        None => Err(format!("a finished row was written: {}", got[i])),
        Some(e) if (got[i] as f64 - e).abs() <= 1e-5 * e.abs() + 1e-12 => Ok(()),
        Some(e) => Err(format!("{} against {e}", got[i])),
    })
}

// 5. dynamic_scaled_int8_quant -------------------------------------------------------------

/// Per token: `scale = absmax / 127` and `q = sat_i8(rint(x * (127 / absmax)))`, in f32 as the
/// source (bit-exact).
pub fn int8_quant(input: &[bf16], hidden: usize) -> (Vec<i8>, Vec<f32>) {
    let mut q = Vec::with_capacity(input.len());
    let mut scales = Vec::new();
    for row in input.chunks_exact(hidden) {
        let absmax = row.iter().fold(0.0f32, |m, v| m.max(v.to_f32().abs()));
        scales.push(absmax / 127.0);
        let tmp_scale = 127.0 / absmax;
        q.extend(row.iter().map(|v| (v.to_f32() * tmp_scale).round_ties_even() as i8));
    }
    (q, scales)
}

/// The `i8`s of the 16-value packs, in memory order.
pub fn unpack_i8(packs: &[I8x16]) -> Vec<i8> {
    packs.iter().flat_map(|p| p.values).collect()
}

// 6. softmax_forward (causal) --------------------------------------------------------------

/// Row `(n, t)` of `inp` (`n` matrices `T x T`): `softmax(inv_temperature * x[0 ..= t])` in
/// f64 for its first `t + 1` entries, `None` after them (left alone).
pub fn causal_softmax(inp: &[bf16], inv_temperature: f32, t: usize) -> Vec<Option<f64>> {
    let mut out = Vec::with_capacity(inp.len());
    let scale = inv_temperature as f64;
    for (r, row) in inp.chunks_exact(t).enumerate() {
        let own = r % t;
        let max = row[..=own].iter().fold(f64::MIN, |m, v| m.max(v.to_f64()));
        let sum: f64 = row[..=own].iter().map(|v| (scale * (v.to_f64() - max)).exp()).sum();
        out.extend(row[..=own].iter().map(|v| Some((scale * (v.to_f64() - max)).exp() / sum)));
        out.extend(std::iter::repeat_n(None, t - own - 1));
    }
    out
}

/// Within 2 bf16 ulps (plus `ex2.approx`'s error on each term) of the reference; entries past
/// the diagonal keep `sentinel`.
pub fn check_causal_softmax(got: &[bf16], expected: &[Option<f64>], sentinel: bf16) -> Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!("{} values, expected {}", got.len(), expected.len()));
    }
    check_all("softmax_forward", got.len(), |i| match expected[i] {
        None if got[i].to_bits() == sentinel.to_bits() => Ok(()),
        None => Err(format!("an entry past the diagonal was written: {}", got[i])),
        Some(e) if bf16_ulps(got[i], e) <= 2.0 || (got[i].to_f64() - e).abs() < 1e-6 => Ok(()),
        Some(e) => Err(format!("{} against {e} ({:.1} bf16 ulps)", got[i], bf16_ulps(got[i], e))),
    })
}

// 7. moe_sum -------------------------------------------------------------------------------

/// `out[t, i] = sum_k input[t, k, i]`, each `+=` rounded to bf16 (through f32, as the Rust
/// kernel: the same bits as the GPU's `add.rn.bf16` but in the rare double-rounding cases).
pub fn moe_sum(input: &[bf16], d: usize) -> Vec<bf16> {
    let mut out = Vec::with_capacity(input.len() / MOE_TOPK);
    for rows in input.chunks_exact(MOE_TOPK * d) {
        for i in 0..d {
            let mut x = bf16::ZERO;
            for k in 0..MOE_TOPK {
                x = bf16::from_f32(x.to_f32() + rows[k * d + i].to_f32());
            }
            out.push(x);
        }
    }
    out
}

/// Within one bf16 ulp of the reference (a GPU twin adds with one rounding).
pub fn check_moe_sum(got: &[bf16], expected: &[bf16]) -> Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!("{} values, expected {}", got.len(), expected.len()));
    }
    check_all(
        "moe_sum",
        got.len(),
        |i| {
            if bf16_ulps(got[i], expected[i].to_f64()) <= 1.0 { Ok(()) } else { Err(format!("{} against {}", got[i], expected[i])) }
        },
    )
}
