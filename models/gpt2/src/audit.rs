//! An operation-by-operation check of one forward pass on the device's own data (`GPT2_TRACE=1`
//! prints it for the rows with the largest losses): for a token row, every operation of every
//! layer is recomputed in `f64` on the host from the inputs the device stored for it (so each
//! error is that operation's alone, not an accumulation) and compared with what the device
//! wrote. Where a loss is far from the reference's, the first operation with an error far
//! above its type's rounding (bf16: a few 1e-3 of the output's magnitude) is the one to look at.

use crate::Result;
use crate::backend::{Act, Backend};
use crate::layout::{Layout, Tensor};
use crate::model::{Acts, Shape};

/// `max |got - want| / max |want|` (`want` all zero: the absolute error).
fn rel(got: &[f64], want: &[f64]) -> f64 {
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let err = got.iter().zip(want).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    if scale > 0.0 { err / scale } else { err }
}

fn widen<T: Act>(x: &[T]) -> Vec<f64> {
    x.iter().map(|v| gpt2_kernels::Elem::widen(*v) as f64).collect()
}

fn layer_norm(x: &[f64], w: &[f64], b: &[f64]) -> Vec<f64> {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let rstd = 1.0 / (var + 1e-5).sqrt();
    x.iter().zip(w.iter().zip(b)).map(|(v, (w, b))| (v - mean) * rstd * w + b).collect()
}

/// `x Wᵀ + b` for one row `x` (`inp`) and `W` of `out x inp`.
fn linear(x: &[f64], w: &[f64], b: Option<&[f64]>, out: usize) -> Vec<f64> {
    let inp = x.len();
    (0..out).map(|j| w[j * inp..(j + 1) * inp].iter().zip(x).map(|(w, x)| w * x).sum::<f64>() + b.map_or(0.0, |b| b[j])).collect()
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

fn log_sum_exp(x: &[f64]) -> f64 {
    let max = x.iter().fold(f64::NEG_INFINITY, |m, v| m.max(*v));
    max + x.iter().map(|v| (v - max).exp()).sum::<f64>().ln()
}

/// The largest error of each operation over the layers: `(name, error, layer)`.
#[derive(Default)]
struct Worst(Vec<(&'static str, f64, usize)>);

/// The audit of one token row ([`Acts::audit`]).
#[derive(Clone, Debug)]
pub struct RowAudit {
    /// The row (`sequence x seq + position`).
    pub row: usize,
    /// Its loss as the device computed it.
    pub loss: f32,
    /// Its loss recomputed in `f64` along the whole forward pass from the device's parameters
    /// (from the last residual stream on: the final norm, the logits, the cross-entropy).
    pub reference: f64,
    /// For each operation, in forward order: its name, its largest error over the layers
    /// (relative to the output's largest magnitude; `lse(abs)` and `ce(abs)` absolute, the
    /// latter the loss from the device's own logits) and the layer where it was largest.
    pub errors: Vec<(&'static str, f64, usize)>,
    /// The row's sequence, position, input token and target.
    pub at: (usize, usize, u32, u32),
}

impl RowAudit {
    /// The largest error of `name` (0 when there is no such operation).
    pub fn error(&self, name: &str) -> (f64, usize) {
        self.errors.iter().find(|(n, _, _)| *n == name).map_or((0.0, 0), |(_, e, l)| (*e, *l))
    }
}

impl std::fmt::Display for RowAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (batch, pos, token, target) = self.at;
        write!(f, "row {} (seq {batch} pos {pos} token {token} target {target}) loss {:.4} ref {:.4}:", self.row, self.loss, self.reference)?;
        for (name, err, layer) in &self.errors {
            write!(f, " {name} {err:.1e}@{layer}")?;
        }
        Ok(())
    }
}

impl Worst {
    fn note(&mut self, name: &'static str, err: f64, layer: usize) {
        match self.0.iter_mut().find(|(n, _, _)| *n == name) {
            Some(entry) if err > entry.1 || err.is_nan() => *entry = (name, err, layer),
            Some(_) => {}
            None => self.0.push((name, err, layer)),
        }
    }
}

impl<B: Backend, T: Act> Acts<B, T> {
    /// Checks every operation of the last forward pass at token rows `rows` (see the module
    /// docs); displayed, one line per row: `row R (...) loss L ref L': op error@layer ...`.
    pub fn audit(&self, b: &B, layout: &Layout, params: &B::Buf<T>, shape: Shape, rows: &[usize]) -> Result<Vec<RowAudit>> {
        let config = *layout.config();
        let (c, h, d, seq, vocab, vp) = (config.channels, config.heads, config.head_dim(), shape.seq, config.vocab, config.padded_vocab);
        let p = b.download(params)?;
        let param = |t: Tensor, l: usize| widen(&p[layout.at(t, l)]);
        let tokens = b.download(&self.tokens)?;
        let targets = b.download(&self.targets)?;
        let losses = b.download(&self.losses)?;
        let logits = b.download(&self.logits)?;
        let res_final = b.download(&self.res_final)?;
        let lnf = b.download(&self.lnf)?;
        struct Layer<T> {
            res_in: Vec<T>,
            ln1: Vec<T>,
            q: Vec<T>,
            k: Vec<T>,
            v: Vec<T>,
            att: Vec<T>,
            lse: Vec<f32>,
            att_rows: Vec<T>,
            res_mid: Vec<T>,
            ln2: Vec<T>,
            fch: Vec<T>,
            fch_gelu: Vec<T>,
        }
        let mut layers = Vec::with_capacity(self.layers.len());
        for a in &self.layers {
            layers.push(Layer {
                res_in: b.download(&a.res_in)?,
                ln1: b.download(&a.ln1)?,
                q: b.download(&a.q)?,
                k: b.download(&a.k)?,
                v: b.download(&a.v)?,
                att: b.download(&a.att)?,
                lse: b.download(&a.lse)?,
                att_rows: b.download(&a.att_rows)?,
                res_mid: b.download(&a.res_mid)?,
                ln2: b.download(&a.ln2)?,
                fch: b.download(&a.fch)?,
                fch_gelu: b.download(&a.fch_gelu)?,
            });
        }
        let scale = 1.0 / (d as f64).sqrt();
        let mut lines = Vec::new();
        for &r in rows {
            let (batch, t) = (r / seq, r % seq);
            let at = |x: &[T], width: usize| widen(&x[r * width..(r + 1) * width]);
            // `[B, H, T, D]` element (head, position, dim).
            let bhtd = |hh: usize, pos: usize| ((batch * h + hh) * seq + pos) * d;
            let mut worst = Worst::default();
            let (wte, wpe) = (widen(&p[layout.all(Tensor::Wte)]), widen(&p[layout.all(Tensor::Wpe)]));
            let token = tokens[r] as usize;
            let embedded: Vec<f64> = (0..c).map(|i| wte[token * c + i] + wpe[t * c + i]).collect();
            worst.note("embed", rel(&at(&layers[0].res_in, c), &embedded), 0);
            for (l, a) in layers.iter().enumerate() {
                let res_in = at(&a.res_in, c);
                worst.note("ln1", rel(&at(&a.ln1, c), &layer_norm(&res_in, &param(Tensor::Ln1w, l), &param(Tensor::Ln1b, l))), l);
                let qkv = linear(&at(&a.ln1, c), &param(Tensor::Qkvw, l), Some(&param(Tensor::Qkvb, l)), 3 * c);
                let mut got = Vec::with_capacity(3 * c);
                for part in [&a.q, &a.k, &a.v] {
                    for hh in 0..h {
                        got.extend(widen(&part[bhtd(hh, t)..bhtd(hh, t) + d]));
                    }
                }
                worst.note("qkv", rel(&got, &qkv), l);
                let (mut out, mut want, mut lse_err) = (Vec::new(), Vec::new(), 0.0f64);
                for hh in 0..h {
                    let q = widen(&a.q[bhtd(hh, t)..bhtd(hh, t) + d]);
                    let scores: Vec<f64> =
                        (0..=t).map(|j| widen(&a.k[bhtd(hh, j)..bhtd(hh, j) + d]).iter().zip(&q).map(|(k, q)| k * q).sum::<f64>() * scale).collect();
                    let lse = log_sum_exp(&scores);
                    lse_err = lse_err.max((a.lse[(batch * h + hh) * seq + t] as f64 - lse).abs());
                    let mut o = vec![0.0f64; d];
                    for (j, s) in scores.iter().enumerate() {
                        let (w, v) = ((s - lse).exp(), widen(&a.v[bhtd(hh, j)..bhtd(hh, j) + d]));
                        o.iter_mut().zip(&v).for_each(|(o, v)| *o += w * v);
                    }
                    want.extend(o);
                    out.extend(widen(&a.att[bhtd(hh, t)..bhtd(hh, t) + d]));
                }
                worst.note("att", rel(&out, &want), l);
                worst.note("lse(abs)", lse_err, l);
                worst.note("merge", rel(&at(&a.att_rows, c), &out), l);
                let proj = linear(&at(&a.att_rows, c), &param(Tensor::Attprojw, l), Some(&param(Tensor::Attprojb, l)), c);
                let res_mid: Vec<f64> = res_in.iter().zip(&proj).map(|(x, y)| x + y).collect();
                worst.note("res_mid", rel(&at(&a.res_mid, c), &res_mid), l);
                worst.note("ln2", rel(&at(&a.ln2, c), &layer_norm(&at(&a.res_mid, c), &param(Tensor::Ln2w, l), &param(Tensor::Ln2b, l))), l);
                worst.note("fc", rel(&at(&a.fch, 4 * c), &linear(&at(&a.ln2, c), &param(Tensor::Fcw, l), Some(&param(Tensor::Fcb, l)), 4 * c)), l);
                worst.note("gelu", rel(&at(&a.fch_gelu, 4 * c), &at(&a.fch, 4 * c).iter().map(|x| gelu(*x)).collect::<Vec<_>>()), l);
                let mlp = linear(&at(&a.fch_gelu, 4 * c), &param(Tensor::Fcprojw, l), Some(&param(Tensor::Fcprojb, l)), c);
                let res_out: Vec<f64> = at(&a.res_mid, c).iter().zip(&mlp).map(|(x, y)| x + y).collect();
                let next = match layers.get(l + 1) {
                    Some(n) => at(&n.res_in, c),
                    None => at(&res_final, c),
                };
                worst.note("res_out", rel(&next, &res_out), l);
            }
            let last = config.layers - 1;
            let lnf_ref = layer_norm(&at(&res_final, c), &param(Tensor::Lnfw, 0), &param(Tensor::Lnfb, 0));
            worst.note("lnf", rel(&at(&lnf, c), &lnf_ref), last);
            let logits_ref = linear(&at(&lnf, c), &wte[..vocab * c], None, vocab);
            let row_logits = widen(&logits[r * vp..r * vp + vocab]);
            worst.note("logits", rel(&row_logits, &logits_ref), last);
            let target = targets[r] as usize;
            let loss_of_gpu_logits = log_sum_exp(&row_logits) - row_logits[target];
            let loss_ref = log_sum_exp(&logits_ref) - logits_ref[target];
            worst.note("ce(abs)", (losses[r] as f64 - loss_of_gpu_logits).abs(), last);
            lines.push(RowAudit { row: r, loss: losses[r], reference: loss_ref, errors: worst.0, at: (batch, t, tokens[r], targets[r]) });
        }
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::Act;
    use crate::config::Config;
    use crate::cpu::Cpu;
    use crate::data::{Loader, synthetic_corpus};
    use crate::layout::{Layout, init_params};
    use crate::model::Shape;
    use crate::train::{Hyper, Trainer};

    /// The tiny model after one step, with a second batch's forward pass done: every row audited.
    fn audited<T: Act>(corrupt: bool) -> Vec<super::RowAudit> {
        audited_on::<T>(Config::tiny(), Cpu::new(), corrupt)
    }

    /// [`audited`] for `config` (two sequences of its context) on `backend`.
    fn audited_on<T: Act>(config: Config, backend: Cpu, corrupt: bool) -> Vec<super::RowAudit> {
        let shape = Shape { batch: 2, seq: config.max_seq };
        let master = init_params(&Layout::new(&config), 5);
        let mut trainer = Trainer::<Cpu, T>::new(backend, &config, shape, Hyper { learning_rate: 3e-3, ..Hyper::default() }, &master).unwrap();
        let mut loader = Loader::new(synthetic_corpus(8192, 61, 2), shape.batch, shape.seq, 0, 1).unwrap();
        for step in 0..2 {
            let (x, y) = loader.next_batch();
            trainer.set_batch(&x, &y).unwrap();
            trainer.forward().unwrap();
            if step == 0 {
                trainer.backward().unwrap();
                trainer.update().unwrap();
            }
        }
        if corrupt {
            // Layer 1's attention output at row 21 (sequence 1, position 5), head 1, dim 3.
            let (h, d, seq) = (config.heads, config.head_dim(), shape.seq);
            let at = ((h + 1) * seq + 5) * d + 3;
            let att = &mut trainer.acts.layers[1].att;
            att[at] = <T as gpt2_kernels::Elem>::narrow(gpt2_kernels::Elem::widen(att[at]) + 1.0);
        }
        let rows: Vec<usize> = (0..shape.tokens()).collect();
        trainer.acts.audit(&trainer.backend, &trainer.layout, &trainer.params, shape, &rows).unwrap()
    }

    /// f32: every operation of every row agrees with the f64 recomputation to f32 rounding, and
    /// so does each row's loss along the whole pass.
    #[test]
    fn audit_finds_every_f32_operation_exact() {
        for row in audited::<f32>(false) {
            for (name, err, layer) in &row.errors {
                assert!(*err < 2e-5, "f32 {name} at layer {layer}: error {err:e} ({row})");
            }
            assert!((row.loss as f64 - row.reference).abs() < 1e-4, "{row}");
        }
    }

    /// bf16: every operation within bf16 rounding of its output (a few 1e-3), the losses close.
    #[test]
    fn audit_finds_every_bf16_operation_within_rounding() {
        for row in audited::<half::bf16>(false) {
            for (name, err, layer) in &row.errors {
                let bound = if name.ends_with("(abs)") { 1e-4 } else { 1e-2 };
                assert!(*err < bound, "bf16 {name} at layer {layer}: error {err:e} > {bound:e} ({row})");
            }
            assert!((row.loss as f64 - row.reference).abs() < 2e-2, "{row}");
        }
    }

    /// The sm_90 attention forward (TMA, `wgmma`, emulated: the GPU's path on an H100/H200) in
    /// the model, head dim 64, 160 tokens a sequence (two query and key tiles, causal): every
    /// operation of every row within bf16 rounding.
    #[test]
    fn audit_finds_the_sm90_attention_forward_within_bf16_rounding() {
        let config = Config { channels: 128, max_seq: 160, ..Config::tiny() };
        let rows = audited_on::<half::bf16>(config, Cpu::with_sm90_attention(), false);
        assert_eq!(rows.len(), 320);
        for row in rows {
            for (name, err, layer) in &row.errors {
                let bound = if name.ends_with("(abs)") { 1e-4 } else { 1e-2 };
                assert!(*err < bound, "bf16 {name} at layer {layer}: error {err:e} > {bound:e} ({row})");
            }
        }
    }

    /// A wrong attention output (one element of layer 1 off by 1) is found at its operation
    /// and layer, and only in its row.
    #[test]
    fn audit_points_at_a_corrupted_attention_output() {
        for row in audited::<f32>(true) {
            let (err, layer) = row.error("att");
            if row.row == 21 {
                assert!(err > 0.1 && layer == 1, "the corrupted element was not found: {row}");
            } else {
                assert!(err < 2e-5, "row {} flagged: {row}", row.row);
            }
        }
    }
}
