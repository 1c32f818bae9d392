//! A training step: forward, backward, (all-reduce, by the caller), clipping, AdamW on the
//! `f32` master weights, and the cast of the master weights to the parameters' type.

use ferrocuda_kernels::rows::AdamW;

use crate::Result;
use crate::backend::{Act, Backend};
use crate::config::Config;
use crate::layout::{Layout, TENSORS};
use crate::model::{self, Acts, Shape};

/// Optimizer settings (llm.c's defaults except the learning rate schedule: constant here).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hyper {
    /// Learning rate.
    pub learning_rate: f32,
    /// AdamW's beta1.
    pub beta1: f32,
    /// AdamW's beta2.
    pub beta2: f32,
    /// AdamW's epsilon.
    pub eps: f32,
    /// Weight decay of the matrices (biases and norms get none).
    pub weight_decay: f32,
    /// Global gradient norm clip (0: none).
    pub max_norm: f32,
}

impl Default for Hyper {
    fn default() -> Hyper {
        Hyper { learning_rate: 3e-4, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, max_norm: 1.0 }
    }
}

/// Model, optimizer state and activations on one backend.
pub struct Trainer<B: Backend, T: Act> {
    /// The backward pass recorded as a graph (with [`Trainer::use_graph`]); declared first so
    /// it is dropped (waiting for its replays) before the buffers it uses.
    graph: Option<B::Graph>,
    /// Record the backward pass once and replay it (`--graph`); falls back to eager
    /// launches, with a note, when the backend cannot record it.
    pub use_graph: bool,
    /// The device.
    pub backend: B,
    /// Parameter offsets.
    pub layout: Layout,
    /// The batch shape.
    pub shape: Shape,
    /// Optimizer settings.
    pub hyper: Hyper,
    /// Parameters as the model reads them.
    pub params: B::Buf<T>,
    /// `f32` master weights.
    pub master: B::Buf<f32>,
    /// `f32` gradients (after [`Trainer::backward`]; averaged across ranks by the caller).
    pub grads: B::Buf<f32>,
    m: B::Buf<f32>,
    v: B::Buf<f32>,
    norm: B::Buf<f32>,
    pub(crate) acts: Acts<B, T>,
    /// Optimizer steps taken.
    pub step: u32,
    /// Eager backward passes run (the graph is recorded after the first).
    backward_runs: u64,
}

impl<B: Backend, T: Act> Trainer<B, T> {
    /// A trainer starting from `master` (`f32`, [`Layout`] order).
    pub fn new(backend: B, config: &Config, shape: Shape, hyper: Hyper, master: &[f32]) -> Result<Self> {
        config.check()?;
        if shape.seq > config.max_seq {
            return Err(format!("sequence length {} is longer than the model's context {}", shape.seq, config.max_seq).into());
        }
        let layout = Layout::new(config);
        if master.len() != layout.total() {
            return Err(format!("{} parameters given, the model has {}", master.len(), layout.total()).into());
        }
        let master_buf = backend.upload(master)?;
        let mut params = backend.zeros::<T>(layout.total())?;
        backend.cast_params(&master_buf, &mut params)?;
        let n = layout.total();
        Ok(Trainer {
            graph: None,
            use_graph: false,
            grads: backend.zeros(n)?,
            m: backend.zeros(n)?,
            v: backend.zeros(n)?,
            norm: backend.zeros(1)?,
            acts: Acts::new(&backend, config, shape)?,
            params,
            master: master_buf,
            layout,
            shape,
            hyper,
            step: 0,
            backward_runs: 0,
            backend,
        })
    }

    /// Loads a batch.
    pub fn set_batch(&mut self, inputs: &[u32], targets: &[u32]) -> Result<()> {
        self.backend.copy_in(&mut self.acts.tokens, inputs)?;
        self.backend.copy_in(&mut self.acts.targets, targets)
    }

    /// The forward pass (ending with the fused classifier, which also leaves the gradient of
    /// the mean loss for [`Trainer::backward`]); returns the mean loss.
    pub fn forward(&mut self) -> Result<f32> {
        let dloss = 1.0 / self.shape.tokens() as f32;
        model::forward(&self.backend, &self.layout, &self.params, &mut self.acts, self.shape, dloss)?;
        let losses = self.backend.download(&self.acts.losses)?;
        Ok((losses.iter().map(|&x| x as f64).sum::<f64>() / losses.len() as f64) as f32)
    }

    /// The forward pass without waiting for the loss (for timing).
    pub fn forward_queued(&mut self) -> Result<()> {
        let dloss = 1.0 / self.shape.tokens() as f32;
        model::forward(&self.backend, &self.layout, &self.params, &mut self.acts, self.shape, dloss)
    }

    /// Diagnostics of the last forward pass ([`model::Acts::trace`]).
    pub fn trace(&self) -> Result<String> {
        self.acts.trace(&self.backend, self.layout.config())
    }

    /// [`model::Acts::audit`] of the last forward pass at the `n` rows with the largest losses.
    pub fn audit_worst(&self, n: usize) -> Result<Vec<crate::audit::RowAudit>> {
        let losses = self.backend.download(&self.acts.losses)?;
        let mut order: Vec<usize> = (0..losses.len()).collect();
        order.sort_by(|&i, &j| losses[j].total_cmp(&losses[i]));
        order.truncate(n);
        self.acts.audit(&self.backend, &self.layout, &self.params, self.shape, &order)
    }

    /// The mean loss of the last forward pass.
    pub fn last_loss(&self) -> Result<f32> {
        let losses = self.backend.download(&self.acts.losses)?;
        Ok((losses.iter().map(|&x| x as f64).sum::<f64>() / losses.len() as f64) as f32)
    }

    /// The backward pass after [`Trainer::forward`]: gradients into [`Trainer::grads`].
    ///
    /// With [`Trainer::use_graph`], the first call runs eagerly (sizing every scratch buffer
    /// and warming the GEMM plans), the second records the pass into a graph and every call
    /// from then on replays it: one launch instead of ~17 per layer. Where recording fails it
    /// says why once and stays eager.
    pub fn backward(&mut self) -> Result<()> {
        if let Some(graph) = &self.graph {
            return self.backend.replay(graph);
        }
        if self.use_graph && self.backward_runs > 0 {
            let (b, layout, params, acts, grads, shape) = (&self.backend, &self.layout, &self.params, &mut self.acts, &mut self.grads, self.shape);
            match b.capture(&mut || model::backward(b, layout, params, acts, grads, shape)) {
                Ok(Some(graph)) => {
                    self.backend.replay(&graph)?;
                    self.graph = Some(graph);
                    return Ok(());
                }
                Ok(None) => eprintln!("note: this backend records no graphs; the backward pass runs eagerly"),
                Err(e) => eprintln!("note: the backward pass could not be recorded as a CUDA graph ({e}); it runs eagerly"),
            }
            self.use_graph = false;
        }
        self.backward_runs += 1;
        model::backward(&self.backend, &self.layout, &self.params, &mut self.acts, &mut self.grads, self.shape)
    }

    /// True once the backward pass replays a recorded graph.
    pub fn graph_recorded(&self) -> bool {
        self.graph.is_some()
    }

    /// Clipping, AdamW and the cast: one optimizer step on the gradients in
    /// [`Trainer::grads`] (already averaged across ranks). Returns nothing; the gradient norm
    /// before clipping is [`Trainer::grad_norm`].
    pub fn update(&mut self) -> Result<()> {
        self.update_with(|_, _| Ok(()))
    }

    /// [`Trainer::update`] for one rank of several: `agree` gets the squared gradient norm
    /// (one `f32` on the device) before it is used and must leave every rank the same value
    /// (an all-reduce with `Max`). The norm is a sum of `f32` atomics, so each rank's copy may
    /// differ in the last bits; used as it is, the clipping scale would differ too and the
    /// ranks' weights would drift apart (the CPU data-parallel test caught it).
    pub fn update_with(&mut self, agree: impl FnOnce(&B, &mut B::Buf<f32>) -> Result<()>) -> Result<()> {
        let h = self.hyper;
        self.step += 1;
        self.backend.global_norm_squared(&self.grads, &mut self.norm)?;
        agree(&self.backend, &mut self.norm)?;
        if h.max_norm > 0.0 {
            self.backend.clip(&mut self.grads, &self.norm, h.max_norm)?;
        }
        for t in TENSORS {
            let hyper = AdamW {
                learning_rate: h.learning_rate,
                beta1: h.beta1,
                beta2: h.beta2,
                eps: h.eps,
                weight_decay: if t.decays() { h.weight_decay } else { 0.0 },
            };
            self.backend.adamw(&mut self.master, &self.grads, &mut self.m, &mut self.v, self.layout.all(t), hyper, self.step)?;
        }
        self.backend.cast_params(&self.master, &mut self.params)
    }

    /// The global gradient norm of the last [`Trainer::update`] (before clipping).
    pub fn grad_norm(&self) -> Result<f32> {
        Ok(self.backend.download(&self.norm)?[0].sqrt())
    }

    /// The optimizer state, for a checkpoint.
    pub fn state(&self) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
        Ok((self.backend.download(&self.master)?, self.backend.download(&self.m)?, self.backend.download(&self.v)?))
    }

    /// Restores the optimizer state of a checkpoint.
    pub fn restore(&mut self, master: &[f32], m: &[f32], v: &[f32], step: u32) -> Result<()> {
        self.backend.copy_in(&mut self.master, master)?;
        self.backend.copy_in(&mut self.m, m)?;
        self.backend.copy_in(&mut self.v, v)?;
        self.step = step;
        self.backend.cast_params(&self.master, &mut self.params)
    }

    /// Overwrites the master weights (and parameters): the gradient check's perturbations.
    pub fn set_master(&mut self, master: &[f32]) -> Result<()> {
        self.backend.copy_in(&mut self.master, master)?;
        self.backend.cast_params(&self.master, &mut self.params)
    }

    /// The gradients.
    pub fn gradients(&self) -> Result<Vec<f32>> {
        self.backend.download(&self.grads)
    }

    /// The parameters as the model reads them, as `f32`.
    pub fn parameters(&self) -> Result<Vec<f32>> {
        Ok(self.backend.download(&self.params)?.iter().map(|x| gpt2_kernels::Elem::widen(*x)).collect())
    }
}

/// FNV-1a over the bytes of `values`: the fingerprint two ranks' weights must share.
pub fn fingerprint<E: bytemuck::Pod>(values: &[E]) -> u64 {
    bytemuck::cast_slice::<E, u8>(values).iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}
