//! Where each parameter tensor lives in the one flat parameter buffer: llm.c's order (every
//! layer's tensor of one kind together), so a checkpoint is that buffer as it is.

use std::ops::Range;

use crate::config::Config;

/// The 16 parameter tensors in llm.c's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tensor {
    /// Token embeddings `[Vp, C]` (tied with the output projection).
    Wte,
    /// Position embeddings `[maxT, C]`.
    Wpe,
    /// First norm's weight `[L, C]`.
    Ln1w,
    /// First norm's bias `[L, C]`.
    Ln1b,
    /// QKV projection `[L, 3C, C]`.
    Qkvw,
    /// QKV bias `[L, 3C]`.
    Qkvb,
    /// Attention output projection `[L, C, C]`.
    Attprojw,
    /// Its bias `[L, C]`.
    Attprojb,
    /// Second norm's weight `[L, C]`.
    Ln2w,
    /// Second norm's bias `[L, C]`.
    Ln2b,
    /// MLP up projection `[L, 4C, C]`.
    Fcw,
    /// Its bias `[L, 4C]`.
    Fcb,
    /// MLP down projection `[L, C, 4C]`.
    Fcprojw,
    /// Its bias `[L, C]`.
    Fcprojb,
    /// Final norm's weight `[C]`.
    Lnfw,
    /// Final norm's bias `[C]`.
    Lnfb,
}

/// Every tensor, in storage order.
pub const TENSORS: [Tensor; 16] = [
    Tensor::Wte,
    Tensor::Wpe,
    Tensor::Ln1w,
    Tensor::Ln1b,
    Tensor::Qkvw,
    Tensor::Qkvb,
    Tensor::Attprojw,
    Tensor::Attprojb,
    Tensor::Ln2w,
    Tensor::Ln2b,
    Tensor::Fcw,
    Tensor::Fcb,
    Tensor::Fcprojw,
    Tensor::Fcprojb,
    Tensor::Lnfw,
    Tensor::Lnfb,
];

impl Tensor {
    /// Matrices get weight decay; biases and norm parameters do not (llm.c and nanoGPT).
    pub fn decays(self) -> bool {
        matches!(self, Tensor::Wte | Tensor::Wpe | Tensor::Qkvw | Tensor::Attprojw | Tensor::Fcw | Tensor::Fcprojw)
    }

    /// True for the tensors with one slice per layer.
    pub fn per_layer(self) -> bool {
        !matches!(self, Tensor::Wte | Tensor::Wpe | Tensor::Lnfw | Tensor::Lnfb)
    }
}

/// The offsets of every tensor in the flat buffer.
#[derive(Clone, Debug)]
pub struct Layout {
    config: Config,
    sizes: [usize; 16],
    offsets: [usize; 16],
    total: usize,
}

impl Layout {
    /// The layout of `config`'s parameters.
    pub fn new(config: &Config) -> Layout {
        let (c, l, v, t) = (config.channels, config.layers, config.padded_vocab, config.max_seq);
        let sizes =
            [v * c, t * c, l * c, l * c, l * 3 * c * c, l * 3 * c, l * c * c, l * c, l * c, l * c, l * 4 * c * c, l * 4 * c, l * c * 4 * c, l * c, c, c];
        let mut offsets = [0; 16];
        let mut total = 0;
        // Packed, in order. Every size is a multiple of the width C, so with C a multiple of 8
        // (768, 64) every tensor and every layer's slice starts 16-byte aligned in bf16, as the
        // GEMM epilogues' bias and the vectorised kernels want.
        for (o, s) in offsets.iter_mut().zip(sizes) {
            *o = total;
            total += s;
        }
        Layout { config: *config, sizes, offsets, total }
    }

    /// Elements in all.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The whole tensor (all layers).
    pub fn all(&self, t: Tensor) -> Range<usize> {
        let i = t as usize;
        self.offsets[i]..self.offsets[i] + self.sizes[i]
    }

    /// Layer `layer`'s slice of a per-layer tensor (the whole tensor for the others).
    pub fn at(&self, t: Tensor, layer: usize) -> Range<usize> {
        let all = self.all(t);
        if !t.per_layer() {
            return all;
        }
        let each = self.sizes[t as usize] / self.config.layers;
        all.start + layer * each..all.start + (layer + 1) * each
    }
}

/// A small deterministic generator (SplitMix64) for initialisation and synthetic data.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// llm.c's initialisation: matrices normal with std 0.02 (the residual projections, attention
/// and MLP output, scaled by `1 / sqrt(2 L)`), biases zero, norm weights one, norm biases
/// zero, the padded rows of the token table zero.
pub fn init_params(layout: &Layout, seed: u64) -> Vec<f32> {
    let config = layout.config();
    let mut p = vec![0.0f32; layout.total()];
    let mut rng = Rng::new(seed);
    let residual_scale = 1.0 / (2.0 * config.layers as f64).sqrt();
    for t in TENSORS {
        let r = layout.all(t);
        match t {
            Tensor::Ln1w | Tensor::Ln2w | Tensor::Lnfw => p[r].fill(1.0),
            Tensor::Wte => {
                let real = config.vocab * config.channels;
                for x in &mut p[r.start..r.start + real] {
                    *x = (0.02 * rng.normal()) as f32;
                }
            }
            Tensor::Wpe | Tensor::Qkvw | Tensor::Fcw => p[r].iter_mut().for_each(|x| *x = (0.02 * rng.normal()) as f32),
            Tensor::Attprojw | Tensor::Fcprojw => p[r].iter_mut().for_each(|x| *x = (0.02 * residual_scale * rng.normal()) as f32),
            _ => {}
        }
    }
    p
}
