//! Inputs (deterministic pseudo-random) and the CPU references every GPU result is checked
//! against before its time is reported.

use crate::examples::{SOFTMAX_COLS, STENCIL_CENTRE, STENCIL_NEIGHBOUR};

/// SplitMix64: a fast, seedable generator; good enough for benchmark inputs.
pub struct Random(u64);

impl Random {
    /// A generator with a fixed seed (runs are reproducible).
    pub fn new(seed: u64) -> Self {
        Random(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[low, high)`.
    pub fn uniform(&mut self, low: f32, high: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        low + (high - low) * unit
    }

    /// `len` values uniform in `[low, high)`.
    pub fn floats(&mut self, len: usize, low: f32, high: f32) -> Vec<f32> {
        (0..len).map(|_| self.uniform(low, high)).collect()
    }
}

/// A mismatch between the GPU and the CPU, with where and by how much.
pub fn mismatch(what: &str, index: usize, got: f64, expected: f64, tolerance: f64) -> String {
    format!("{what}[{index}] = {got:e} but the CPU says {expected:e} (tolerance {tolerance:e})")
}

/// `a * x + y` rounded once, as the GPU's `fma.rn.f32` computes it.
pub fn saxpy(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(&x, &y)| a.mul_add(x, y)).collect()
}

/// The exact sum (in f64) and the sum of absolute values (for the error bound).
pub fn sum(x: &[f32]) -> (f64, f64) {
    x.iter().fold((0.0, 0.0), |(s, a), &v| (s + v as f64, a + (v as f64).abs()))
}

/// The transpose of a row-major `rows x cols` matrix.
pub fn transpose(input: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = input[r * cols + c];
        }
    }
    out
}

/// One element of `a * b` (row-major, `a` is `m x k`, `b` is `k x n`) in f64, and the sum of
/// the absolute products (the scale of its rounding error).
pub fn matmul_element(a: &[f32], b: &[f32], n: usize, k: usize, row: usize, col: usize) -> (f64, f64) {
    (0..k).fold((0.0, 0.0), |(s, m), p| {
        let product = a[row * k + p] as f64 * b[p * n + col] as f64;
        (s + product, m + product.abs())
    })
}

/// Row-wise softmax of a `rows x SOFTMAX_COLS` matrix, in f64.
pub fn softmax(input: &[f32]) -> Vec<f64> {
    let mut out = Vec::with_capacity(input.len());
    for row in input.chunks_exact(SOFTMAX_COLS) {
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
        let exps: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
        let total: f64 = exps.iter().sum();
        out.extend(exps.iter().map(|e| e / total));
    }
    out
}

/// Counts of each byte value.
pub fn histogram(bytes: &[u8]) -> [u64; 256] {
    let mut bins = [0u64; 256];
    for &b in bytes {
        bins[b as usize] += 1;
    }
    bins
}

/// One Jacobi step of the 5-point stencil (border copied), in f64.
pub fn stencil(input: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            let at = r * cols + c;
            out[at] = if r == 0 || c == 0 || r + 1 == rows || c + 1 == cols {
                input[at] as f64
            } else {
                let neighbours = input[at - cols] as f64 + input[at + cols] as f64 + input[at - 1] as f64 + input[at + 1] as f64;
                STENCIL_CENTRE as f64 * input[at] as f64 + STENCIL_NEIGHBOUR as f64 * neighbours
            };
        }
    }
    out
}

/// Layer norm of each row of `channels` floats (eps 1e-5), in f64.
pub fn layernorm(input: &[f32], weight: &[f32], bias: &[f32], channels: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(input.len());
    for row in input.chunks_exact(channels) {
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / channels as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / channels as f64;
        let rstd = 1.0 / (var + 1e-5).sqrt();
        out.extend(row.iter().zip(weight.iter().zip(bias)).map(|(&v, (&w, &b))| (v as f64 - mean) * rstd * w as f64 + b as f64));
    }
    out
}

/// Softmax of each row of `cols` floats, in f64.
pub fn softmax_rows(input: &[f32], cols: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(input.len());
    for row in input.chunks_exact(cols) {
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
        let exps: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
        let total: f64 = exps.iter().sum();
        out.extend(exps.iter().map(|e| e / total));
    }
    out
}

/// One AdamW step's new parameters, in f32 with the kernels' fma sequence.
pub fn adamw(params: &[f32], grads: &[f32], m: &[f32], v: &[f32], hp: &crate::llm::AdamW) -> Vec<f64> {
    let lerp = |a: f32, b: f32, w: f32| w.mul_add(b, (-w).mul_add(a, a));
    (0..params.len())
        .map(|i| {
            let (g, p) = (grads[i], params[i]);
            let mean = lerp(g, m[i], hp.beta1) / hp.beta1_correction;
            let var = lerp(g * g, v[i], hp.beta2) / hp.beta2_correction;
            (p - hp.learning_rate * (mean / (var.sqrt() + hp.eps) + hp.weight_decay * p)) as f64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_swaps_rows_and_columns() {
        // 2 x 3 -> 3 x 2
        assert_eq!(transpose(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 3), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    }

    #[test]
    fn stencil_copies_the_border_and_averages_inside() {
        let (rows, cols) = (3, 3);
        let input: Vec<f32> = (0..9).map(|v| v as f32).collect();
        let out = stencil(&input, rows, cols);
        // Centre (1, 1) = 4: 0.5 * 4 + 0.125 * (1 + 7 + 3 + 5).
        assert_eq!(out[4], 0.5 * 4.0 + 0.125 * 16.0);
        for border in [0, 1, 2, 3, 5, 6, 7, 8] {
            assert_eq!(out[border], input[border] as f64);
        }
    }

    #[test]
    fn softmax_rows_sum_to_one_and_keep_order() {
        let mut random = Random::new(3);
        let input = random.floats(2 * SOFTMAX_COLS, -8.0, 8.0);
        let out = softmax(&input);
        for (row_in, row_out) in input.chunks(SOFTMAX_COLS).zip(out.chunks(SOFTMAX_COLS)) {
            assert!((row_out.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            let (imax, _) = row_in.iter().enumerate().fold((0, f32::MIN), |m, (i, &v)| if v > m.1 { (i, v) } else { m });
            assert!(row_out.iter().all(|&p| p <= row_out[imax]));
        }
    }

    #[test]
    fn histogram_counts_every_byte() {
        let bins = histogram(&[0, 255, 255, 7]);
        assert_eq!((bins[0], bins[7], bins[255], bins.iter().sum::<u64>()), (1, 1, 2, 4));
    }

    #[test]
    fn uniform_values_stay_in_range_and_vary() {
        let values = Random::new(1).floats(10_000, -1.0, 1.0);
        assert!(values.iter().all(|&v| (-1.0..1.0).contains(&v)));
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64;
        assert!(mean.abs() < 0.05, "mean {mean}");
    }

    #[test]
    fn matmul_element_is_a_dot_product() {
        // a = [[1, 2], [3, 4]], b = [[5, 6], [7, 8]]: (a b)[1][0] = 3*5 + 4*7 = 43.
        let (value, scale) = matmul_element(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0], 2, 2, 1, 0);
        assert_eq!((value, scale), (43.0, 43.0));
    }
}
