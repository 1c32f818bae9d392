//! Inputs (deterministic pseudo-random) and the CPU references every GPU result is checked
//! against before its time is reported.

use gpu_kernels::examples::{SOFTMAX_COLS, STENCIL_CENTRE, STENCIL_NEIGHBOUR};

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
