//! Issue 30's tenth held-out port (session 22): the inputs and CPU references shared by the
//! tests (`tests/ports10.rs`, on the CPU executor and the GPU) and the GPU bench
//! (`src/bin/ports10_bench.rs`, each port beside its nvcc-built twin). The kernels are in
//! `ferrocuda-ports10-kernels` (`kernels/`), the twins in `cuda/ports10.cu`.

use half::bf16;

/// A small deterministic generator (a 32-bit LCG): inputs that differ in every run of a seed
/// alike, without a dependency.
#[derive(Clone, Debug)]
pub struct Lcg(u64);

impl Lcg {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Lcg(seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407))
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * (self.next_u32() as f32 / (1u64 << 31) as f32)
    }

    /// `n` values uniform in `[lo, hi)`.
    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }

    /// `n` bf16 values uniform in `[lo, hi)` (rounded to nearest).
    pub fn vec_bf16(&mut self, n: usize, lo: f32, hi: f32) -> Vec<bf16> {
        (0..n).map(|_| bf16::from_f32(self.uniform(lo, hi))).collect()
    }

    /// A random permutation of `0..n` (Fisher-Yates).
    pub fn permutation(&mut self, n: usize) -> Vec<i32> {
        let mut p: Vec<i32> = (0..n as i32).collect();
        for i in (1..n).rev() {
            let j = (self.next_u32() as usize) % (i + 1);
            p.swap(i, j);
        }
        p
    }
}

/// Softmax of each row of `c` values, in `f64`.
pub fn softmax_ref(inp: &[f32], c: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(inp.len());
    for row in inp.chunks(c) {
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
        let e: Vec<f64> = row.iter().map(|&x| (x as f64 - max).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| v / s));
    }
    out
}

/// Layer norm backward of rows of `c` (llm.c's `layernorm_backward_cpu`), in `f64`:
/// `(dinp0 + dx, dweight, dbias)`, `dinp0` the gradient already in `dinp`.
pub fn layernorm_backward_ref(
    dinp0: &[f32],
    dout: &[f32],
    inp: &[f32],
    weight: &[f32],
    mean: &[f32],
    rstd: &[f32],
    c: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let rows = inp.len() / c;
    let mut dinp: Vec<f64> = dinp0.iter().map(|&v| v as f64).collect();
    let (mut dw, mut db) = (vec![0.0f64; c], vec![0.0f64; c]);
    for r in 0..rows {
        let (m, s) = (mean[r] as f64, rstd[r] as f64);
        let (mut dm, mut dnm) = (0.0f64, 0.0f64);
        for i in 0..c {
            let norm = (inp[r * c + i] as f64 - m) * s;
            let dn = weight[i] as f64 * dout[r * c + i] as f64;
            dm += dn;
            dnm += dn * norm;
        }
        dm /= c as f64;
        dnm /= c as f64;
        for i in 0..c {
            let d = dout[r * c + i] as f64;
            let norm = (inp[r * c + i] as f64 - m) * s;
            let dn = weight[i] as f64 * d;
            db[i] += d;
            dw[i] += norm * d;
            dinp[r * c + i] += (dn - dm - norm * dnm) * s;
        }
    }
    (dinp, dw, db)
}

/// `dbias[o] + Σ_rows dout[row, o]` for `dout` of `rows x oc`, in `f64` (before the bf16 rounding).
pub fn matmul_backward_bias_ref(dbias0: &[bf16], dout: &[bf16], oc: usize) -> Vec<f64> {
    let mut out: Vec<f64> = dbias0.iter().map(|v| v.to_f64()).collect();
    for row in dout.chunks(oc) {
        for (o, v) in out.iter_mut().zip(row) {
            *o += v.to_f64();
        }
    }
    out
}

/// llm.c's encoder forward: `out[b, t, :] = wte[inp[b, t], :] + wpe[t, :]`, added in `f32` and
/// rounded to bf16 (exactly what the kernel computes).
pub fn encoder_forward_ref(inp: &[i32], wte: &[bf16], wpe: &[bf16], t: usize, c: usize) -> Vec<bf16> {
    let mut out = Vec::with_capacity(inp.len() * c);
    for (bt, &ix) in inp.iter().enumerate() {
        let tt = bt % t;
        for i in 0..c {
            out.push(bf16::from_f32(wte[ix as usize * c + i].to_f32() + wpe[tt * c + i].to_f32()));
        }
    }
    out
}

/// vLLM's MoE finalize: `out[r, :] = Σ_e scales[r k + e] · rows[source_to_dest[r k + e], :]`,
/// in `f64` (before the bf16 rounding); rows of `cols` values.
pub fn finalize_ref(rows: &[bf16], scales: &[f32], source_to_dest: &[i32], cols: usize, k: usize) -> Vec<f64> {
    let tokens = scales.len() / k;
    let mut out = vec![0.0f64; tokens * cols];
    for r in 0..tokens {
        for e in 0..k {
            let d = source_to_dest[r * k + e] as usize;
            let s = scales[r * k + e] as f64;
            for i in 0..cols {
                out[r * cols + i] += s * rows[d * cols + i].to_f64();
            }
        }
    }
    out
}

/// vLLM's MoE expand: `(permuted, source_to_dest, permuted_idx)` for `dest_to_source` (a
/// permutation of the expanded rows) and input rows of `cols`.
pub fn expand_ref(input: &[bf16], dest_to_source: &[i32], cols: usize, k: usize) -> (Vec<bf16>, Vec<i32>, Vec<i32>) {
    let n = dest_to_source.len();
    let mut out = Vec::with_capacity(n * cols);
    let mut source_to_dest = vec![-1i32; n];
    for (d, &s) in dest_to_source.iter().enumerate() {
        source_to_dest[s as usize] = d as i32;
        let src = s as usize / k;
        out.extend_from_slice(&input[src * cols..(src + 1) * cols]);
    }
    (out, source_to_dest, dest_to_source.to_vec())
}

/// vLLM's top-k id preprocessing: `map[id]`, or `id + num_experts` where the map holds -1.
pub fn preprocess_ref(topk: &[i32], map: &[i32]) -> Vec<i32> {
    let e = map.len() as i32;
    topk.iter().map(|&id| if map[id as usize] == -1 { id + e } else { map[id as usize] }).collect()
}

/// The largest `|got - want| / max(|want|, floor)`.
pub fn max_rel_err_f64(got: impl IntoIterator<Item = f64>, want: &[f64], floor: f64) -> f64 {
    got.into_iter().zip(want).map(|(g, &w)| (g - w).abs() / w.abs().max(floor)).fold(0.0, f64::max)
}
