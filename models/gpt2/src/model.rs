//! The forward and backward passes of GPT-2 over a [`Backend`].
//!
//! One block, with `x` the residual stream (`[B T, C]`):
//! `ln1 = LN(x)`, `q, k, v = split(ln1 Wqkvᵀ + b)` (`[B, H, T, D]`), `a = attention(q, k, v)`
//! (causal), `x2 = x + merge(a) Wprojᵀ + b`, `ln2 = LN(x2)`, `h = gelu(ln2 Wfcᵀ + b)`, `x3 = x2
//! + h Wfcprojᵀ + b`. The residual adds are fused into the next norm (`add_layernorm`), the
//! classifier is tied to the token table, and the padded vocabulary's logits get a bias of
//! `-1e30` so they never count. Weight gradients are `f32` (GEMMs with `f32` output);
//! activations and their gradients are `T`.

use ferrocuda_kernels::attention::{Attention, Layout as HeadLayout};
use ferrocuda_kernels::gemm::GemmShape;
use ferrocuda_kernels::rows::Rows;
use gpt2_kernels::Heads;

use crate::Result;
use crate::backend::{Act, Backend};
use crate::config::Config;
use crate::layout::{Layout, Tensor};

/// The activations one layer keeps for its backward pass.
pub struct LayerActs<B: Backend, T: Act> {
    /// The residual stream into the layer `[BT, C]`.
    pub(crate) res_in: B::Buf<T>,
    pub(crate) ln1: B::Buf<T>,
    pub(crate) ln1_mean: B::Buf<f32>,
    pub(crate) ln1_rstd: B::Buf<f32>,
    /// Heads `[B, H, T, D]`.
    pub(crate) q: B::Buf<T>,
    pub(crate) k: B::Buf<T>,
    pub(crate) v: B::Buf<T>,
    /// Attention output `[B, H, T, D]` and its log-sum-exp.
    pub(crate) att: B::Buf<T>,
    pub(crate) lse: B::Buf<f32>,
    /// Attention output as rows `[BT, C]`.
    pub(crate) att_rows: B::Buf<T>,
    /// The residual stream after attention `[BT, C]`.
    pub(crate) res_mid: B::Buf<T>,
    pub(crate) ln2: B::Buf<T>,
    pub(crate) ln2_mean: B::Buf<f32>,
    pub(crate) ln2_rstd: B::Buf<f32>,
    /// MLP pre-activation and activation `[BT, 4C]`.
    pub(crate) fch: B::Buf<T>,
    pub(crate) fch_gelu: B::Buf<T>,
}

/// Every buffer of a training step for one batch shape.
pub struct Acts<B: Backend, T: Act> {
    pub(crate) layers: Vec<LayerActs<B, T>>,
    pub(crate) res_final: B::Buf<T>,
    pub(crate) lnf: B::Buf<T>,
    pub(crate) lnf_mean: B::Buf<f32>,
    pub(crate) lnf_rstd: B::Buf<f32>,
    pub(crate) logits: B::Buf<T>,
    pub(crate) dlogits: B::Buf<T>,
    /// Per-token losses `[BT]`.
    pub losses: B::Buf<f32>,
    /// Input tokens `[BT]`.
    pub tokens: B::Buf<u32>,
    /// Target tokens `[BT]`.
    pub targets: B::Buf<u32>,
    // Scratch of the forward pass.
    pub(crate) qkv: B::Buf<T>,
    pub(crate) proj: B::Buf<T>,
    // Scratch of the backward pass.
    pub(crate) dres_a: B::Buf<T>,
    pub(crate) dres_b: B::Buf<T>,
    pub(crate) dln: B::Buf<T>,
    pub(crate) dbig1: B::Buf<T>,
    pub(crate) dbig2: B::Buf<T>,
    pub(crate) datt: B::Buf<T>,
    pub(crate) dq: B::Buf<T>,
    pub(crate) dk: B::Buf<T>,
    pub(crate) dv: B::Buf<T>,
    pub(crate) dqkv: B::Buf<T>,
    /// `[Vp]`: 0 for real tokens, -1e30 for padding.
    pub(crate) pad_bias: B::Buf<T>,
}

/// A batch shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Sequences per batch.
    pub batch: usize,
    /// Tokens per sequence.
    pub seq: usize,
}

impl Shape {
    /// Tokens per batch.
    pub fn tokens(&self) -> usize {
        self.batch * self.seq
    }
}

impl<B: Backend, T: Act> Acts<B, T> {
    /// Allocates every buffer for `config` and `shape`.
    pub fn new(backend: &B, config: &Config, shape: Shape) -> Result<Self> {
        let (bt, c, vp) = (shape.tokens(), config.channels, config.padded_vocab);
        let rows = bt;
        if bt * 4 * c >= u32::MAX as usize {
            return Err(format!("batch x seq x 4 x channels = {} must stay below 2^32 (the own kernels' 32-bit index math)", bt * 4 * c).into());
        }
        let z = |n: usize| backend.zeros::<T>(n);
        let f = |n: usize| backend.zeros::<f32>(n);
        let mut layers = Vec::with_capacity(config.layers);
        for _ in 0..config.layers {
            layers.push(LayerActs {
                res_in: z(bt * c)?,
                ln1: z(bt * c)?,
                ln1_mean: f(rows)?,
                ln1_rstd: f(rows)?,
                q: z(bt * c)?,
                k: z(bt * c)?,
                v: z(bt * c)?,
                att: z(bt * c)?,
                lse: f(shape.batch * config.heads * shape.seq)?,
                att_rows: z(bt * c)?,
                res_mid: z(bt * c)?,
                ln2: z(bt * c)?,
                ln2_mean: f(rows)?,
                ln2_rstd: f(rows)?,
                fch: z(bt * 4 * c)?,
                fch_gelu: z(bt * 4 * c)?,
            });
        }
        let pad: Vec<T> = (0..vp).map(|i| <T as gpt2_kernels::Elem>::narrow(if i < config.vocab { 0.0 } else { -1e30 })).collect();
        Ok(Acts {
            layers,
            res_final: z(bt * c)?,
            lnf: z(bt * c)?,
            lnf_mean: f(rows)?,
            lnf_rstd: f(rows)?,
            logits: z(bt * vp)?,
            dlogits: z(bt * vp)?,
            losses: f(rows)?,
            tokens: backend.zeros::<u32>(bt)?,
            targets: backend.zeros::<u32>(bt)?,
            qkv: z(bt * 3 * c)?,
            proj: z(bt * c)?,
            dres_a: z(bt * c)?,
            dres_b: z(bt * c)?,
            dln: z(bt * c)?,
            dbig1: z(bt * 4 * c)?,
            dbig2: z(bt * 4 * c)?,
            datt: z(bt * c)?,
            dq: z(bt * c)?,
            dk: z(bt * c)?,
            dv: z(bt * c)?,
            dqkv: z(bt * 3 * c)?,
            pad_bias: backend.upload(&pad)?,
        })
    }
}

impl<B: Backend, T: Act> Acts<B, T> {
    /// Diagnostics of the last forward pass as one line (`GPT2_TRACE=1`; the PyTorch
    /// reference's `--trace` prints the same line): the three largest per-token losses as
    /// `row:target:loss`, then the largest magnitude of each layer's residual input (`resL`),
    /// attention output (`attL`) and MLP activation (`mlpL`), of the final residual stream
    /// (`resf`) and of the logits over the real vocabulary (`logits`).
    pub fn trace(&self, b: &B, config: &Config) -> Result<String> {
        let maxabs = |buf: &B::Buf<T>| -> Result<f32> { Ok(b.download(buf)?.iter().map(|x| gpt2_kernels::Elem::widen(*x).abs()).fold(0.0f32, f32::max)) };
        let losses = b.download(&self.losses)?;
        let targets = b.download(&self.targets)?;
        let mut order: Vec<usize> = (0..losses.len()).collect();
        order.sort_by(|&i, &j| losses[j].total_cmp(&losses[i]));
        let top: Vec<String> = order.iter().take(3).map(|&i| format!("{i}:{}:{:.3}", targets[i], losses[i])).collect();
        let mut stats = Vec::new();
        for (l, layer) in self.layers.iter().enumerate() {
            stats.push(format!("res{l} {:.4}", maxabs(&layer.res_in)?));
            stats.push(format!("att{l} {:.4}", maxabs(&layer.att_rows)?));
            stats.push(format!("mlp{l} {:.4}", maxabs(&layer.fch_gelu)?));
        }
        stats.push(format!("resf {:.4}", maxabs(&self.res_final)?));
        let (vocab, padded) = (config.vocab, config.padded_vocab);
        let logits = b.download(&self.logits)?;
        let real = logits.chunks(padded).flat_map(|row| &row[..vocab]).map(|x| gpt2_kernels::Elem::widen(*x).abs()).fold(0.0f32, f32::max);
        stats.push(format!("logits {real:.4}"));
        Ok(format!("top {} | {}", top.join(" "), stats.join(" ")))
    }
}

/// `out = x Wᵀ (+ b)` for `x` of `rows x inp` and `W` of `out x inp`.
fn linear(rows: usize, inp: usize, out: usize) -> GemmShape {
    GemmShape { m: rows, n: out, k: inp, batch: 1, transpose_a: false, transpose_b: true }
}

/// `dW = doutᵀ x` (`out x inp`) for `dout` of `rows x out`, `x` of `rows x inp`.
fn weight_grad(rows: usize, inp: usize, out: usize) -> GemmShape {
    GemmShape { m: out, n: inp, k: rows, batch: 1, transpose_a: true, transpose_b: false }
}

/// `dx = dout W` (`rows x inp`).
fn input_grad(rows: usize, inp: usize, out: usize) -> GemmShape {
    GemmShape::new(rows, inp, out)
}

/// The causal self-attention of `config` and `shape`.
pub fn attention_shape(config: &Config, shape: Shape) -> Attention {
    Attention {
        batch: shape.batch,
        heads_q: config.heads,
        heads_kv: config.heads,
        seq_q: shape.seq,
        seq_kv: shape.seq,
        head_dim: config.head_dim(),
        layout: HeadLayout::Bhsd,
        causal: true,
        scale: None,
    }
}

fn heads(config: &Config, shape: Shape, row_stride: usize, offset: usize) -> Heads {
    Heads { seq: shape.seq as u32, heads: config.heads as u32, head_dim: config.head_dim() as u32, row_stride: row_stride as u32, offset: offset as u32 }
}

/// The forward pass over `acts.tokens`, ending with the fused classifier: per-token losses
/// in `acts.losses` and `dlogits` (scaled by `dloss`) ready for [`backward`].
pub fn forward<B: Backend, T: Act>(b: &B, layout: &Layout, params: &B::Buf<T>, acts: &mut Acts<B, T>, shape: Shape, dloss: f32) -> Result<()> {
    let config = *layout.config();
    let (bt, c, vp) = (shape.tokens(), config.channels, config.padded_vocab);
    let rows = Rows { rows: bt, cols: c };
    let att_shape = attention_shape(&config, shape);
    let p = params;
    b.encoder_forward(&acts.tokens, p, layout.all(Tensor::Wte), layout.all(Tensor::Wpe), &mut acts.layers[0].res_in, shape.seq, c)?;
    for l in 0..config.layers {
        let (done, rest) = acts.layers.split_at_mut(l);
        let cur = &mut rest[0];
        if l == 0 {
            b.layernorm(&cur.res_in, p, layout.at(Tensor::Ln1w, l), layout.at(Tensor::Ln1b, l), &mut cur.ln1, &mut cur.ln1_mean, &mut cur.ln1_rstd, rows)?;
        } else {
            let prev = &done[l - 1];
            b.add_layernorm(
                &acts.proj,
                &prev.res_mid,
                p,
                layout.at(Tensor::Ln1w, l),
                layout.at(Tensor::Ln1b, l),
                &mut cur.ln1,
                &mut cur.res_in,
                &mut cur.ln1_mean,
                &mut cur.ln1_rstd,
                rows,
            )?;
        }
        b.matmul((&cur.ln1, 0..bt * c), (p, layout.at(Tensor::Qkvw, l)), &mut acts.qkv, linear(bt, c, 3 * c), Some((p, layout.at(Tensor::Qkvb, l))))?;
        b.split_heads(&acts.qkv, &mut cur.q, heads(&config, shape, 3 * c, 0))?;
        b.split_heads(&acts.qkv, &mut cur.k, heads(&config, shape, 3 * c, c))?;
        b.split_heads(&acts.qkv, &mut cur.v, heads(&config, shape, 3 * c, 2 * c))?;
        b.attention_forward(&cur.q, &cur.k, &cur.v, &mut cur.att, &mut cur.lse, att_shape)?;
        b.merge_heads(&cur.att, &cur.att, &cur.att, &mut cur.att_rows, heads(&config, shape, c, 0), 1)?;
        b.matmul((&cur.att_rows, 0..bt * c), (p, layout.at(Tensor::Attprojw, l)), &mut acts.proj, linear(bt, c, c), Some((p, layout.at(Tensor::Attprojb, l))))?;
        b.add_layernorm(
            &acts.proj,
            &cur.res_in,
            p,
            layout.at(Tensor::Ln2w, l),
            layout.at(Tensor::Ln2b, l),
            &mut cur.ln2,
            &mut cur.res_mid,
            &mut cur.ln2_mean,
            &mut cur.ln2_rstd,
            rows,
        )?;
        b.matmul((&cur.ln2, 0..bt * c), (p, layout.at(Tensor::Fcw, l)), &mut cur.fch, linear(bt, c, 4 * c), Some((p, layout.at(Tensor::Fcb, l))))?;
        b.gelu(&cur.fch, &mut cur.fch_gelu)?;
        b.matmul(
            (&cur.fch_gelu, 0..bt * 4 * c),
            (p, layout.at(Tensor::Fcprojw, l)),
            &mut acts.proj,
            linear(bt, 4 * c, c),
            Some((p, layout.at(Tensor::Fcprojb, l))),
        )?;
    }
    let last = &acts.layers[config.layers - 1];
    b.add_layernorm(
        &acts.proj,
        &last.res_mid,
        p,
        layout.all(Tensor::Lnfw),
        layout.all(Tensor::Lnfb),
        &mut acts.lnf,
        &mut acts.res_final,
        &mut acts.lnf_mean,
        &mut acts.lnf_rstd,
        rows,
    )?;
    b.matmul((&acts.lnf, 0..bt * c), (p, layout.all(Tensor::Wte)), &mut acts.logits, linear(bt, c, vp), Some((&acts.pad_bias, 0..vp)))?;
    b.cross_entropy(&acts.logits, &acts.targets, &mut acts.losses, &mut acts.dlogits, Rows { rows: bt, cols: vp }, dloss)?;
    Ok(())
}

/// The backward pass after [`forward`]: every parameter's gradient written into `grads`
/// (`f32`, [`Layout`] order).
pub fn backward<B: Backend, T: Act>(b: &B, layout: &Layout, params: &B::Buf<T>, acts: &mut Acts<B, T>, grads: &mut B::Buf<f32>, shape: Shape) -> Result<()> {
    let config = *layout.config();
    let (bt, c, vp) = (shape.tokens(), config.channels, config.padded_vocab);
    let rows = Rows { rows: bt, cols: c };
    let att_shape = attention_shape(&config, shape);
    let p = params;
    let a = acts;
    // Classifier (tied): dWte = dlogitsᵀ lnf, dlnf = dlogits Wte.
    b.matmul_f32((&a.dlogits, 0..bt * vp), (&a.lnf, 0..bt * c), grads, layout.all(Tensor::Wte), weight_grad(bt, c, vp), 0.0)?;
    b.matmul((&a.dlogits, 0..bt * vp), (p, layout.all(Tensor::Wte)), &mut a.dln, input_grad(bt, c, vp), None)?;
    b.layernorm_backward(
        &a.dln,
        &a.res_final,
        p,
        layout.all(Tensor::Lnfw),
        &a.lnf_mean,
        &a.lnf_rstd,
        None,
        &mut a.dres_a,
        grads,
        layout.all(Tensor::Lnfw),
        layout.all(Tensor::Lnfb),
        rows,
    )?;
    for l in (0..config.layers).rev() {
        let cur = &a.layers[l];
        // dres_a: the gradient of this layer's output (x3).
        b.matmul_f32((&a.dres_a, 0..bt * c), (&cur.fch_gelu, 0..bt * 4 * c), grads, layout.at(Tensor::Fcprojw, l), weight_grad(bt, 4 * c, c), 0.0)?;
        b.bias_grad(&a.dres_a, grads, layout.at(Tensor::Fcprojb, l), bt, c)?;
        b.matmul((&a.dres_a, 0..bt * c), (p, layout.at(Tensor::Fcprojw, l)), &mut a.dbig1, input_grad(bt, 4 * c, c), None)?;
        b.gelu_backward(&cur.fch, &a.dbig1, &mut a.dbig2)?;
        b.matmul_f32((&a.dbig2, 0..bt * 4 * c), (&cur.ln2, 0..bt * c), grads, layout.at(Tensor::Fcw, l), weight_grad(bt, c, 4 * c), 0.0)?;
        b.bias_grad(&a.dbig2, grads, layout.at(Tensor::Fcb, l), bt, 4 * c)?;
        b.matmul((&a.dbig2, 0..bt * 4 * c), (p, layout.at(Tensor::Fcw, l)), &mut a.dln, input_grad(bt, c, 4 * c), None)?;
        b.layernorm_backward(
            &a.dln,
            &cur.res_mid,
            p,
            layout.at(Tensor::Ln2w, l),
            &cur.ln2_mean,
            &cur.ln2_rstd,
            Some(&a.dres_a),
            &mut a.dres_b,
            grads,
            layout.at(Tensor::Ln2w, l),
            layout.at(Tensor::Ln2b, l),
            rows,
        )?;
        // dres_b: the gradient of x2.
        b.matmul_f32((&a.dres_b, 0..bt * c), (&cur.att_rows, 0..bt * c), grads, layout.at(Tensor::Attprojw, l), weight_grad(bt, c, c), 0.0)?;
        b.bias_grad(&a.dres_b, grads, layout.at(Tensor::Attprojb, l), bt, c)?;
        b.matmul((&a.dres_b, 0..bt * c), (p, layout.at(Tensor::Attprojw, l)), &mut a.dln, input_grad(bt, c, c), None)?;
        b.split_heads(&a.dln, &mut a.datt, heads(&config, shape, c, 0))?;
        b.attention_backward(&cur.q, &cur.k, &cur.v, &cur.att, &a.datt, &cur.lse, &mut a.dq, &mut a.dk, &mut a.dv, att_shape)?;
        b.merge_heads(&a.dq, &a.dk, &a.dv, &mut a.dqkv, heads(&config, shape, 3 * c, 0), 3)?;
        b.matmul_f32((&a.dqkv, 0..bt * 3 * c), (&cur.ln1, 0..bt * c), grads, layout.at(Tensor::Qkvw, l), weight_grad(bt, c, 3 * c), 0.0)?;
        b.bias_grad(&a.dqkv, grads, layout.at(Tensor::Qkvb, l), bt, 3 * c)?;
        b.matmul((&a.dqkv, 0..bt * 3 * c), (p, layout.at(Tensor::Qkvw, l)), &mut a.dln, input_grad(bt, c, 3 * c), None)?;
        b.layernorm_backward(
            &a.dln,
            &cur.res_in,
            p,
            layout.at(Tensor::Ln1w, l),
            &cur.ln1_mean,
            &cur.ln1_rstd,
            Some(&a.dres_b),
            &mut a.dres_a,
            grads,
            layout.at(Tensor::Ln1w, l),
            layout.at(Tensor::Ln1b, l),
            rows,
        )?;
    }
    // dres_a: the gradient of the embeddings' sum.
    b.encoder_backward(&a.tokens, &a.dres_a, grads, layout.all(Tensor::Wte), layout.all(Tensor::Wpe), shape.batch, shape.seq, c)
}
