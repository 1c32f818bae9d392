//! [`Backend`] on one GPU: `ferrocuda-kernels` (rows, attention, cuBLASLt GEMMs) and this
//! crate's own kernels, all queued on one stream.

use std::cell::{Cell, RefCell, RefMut};
use std::ops::Range;
use std::time::Instant;

use bytemuck::Pod;
use ferrocuda_host::{Context, DeviceBuffer, DeviceRead, GraphExec, Stream};
use ferrocuda_kernels::attention::{self, Attention};
use ferrocuda_kernels::gemm::{self, GemmEngine, GemmEpilogue, GemmShape};
use ferrocuda_kernels::rows::{self, AdamW, Rows};
use gpt2_kernels::Heads;

use crate::Result;
use crate::backend::{Act, Backend, In, Profile};
use crate::own::grid;

/// The GPU backend: a context, its stream and the GEMM handles bound to that stream.
pub struct Gpu {
    context: Context,
    stream: Stream,
    engine: GemmEngine,
    /// Time per kernel family (milliseconds, calls) when profiling.
    profile: Option<RefCell<Profile>>,
    /// `f32` scratch of the operations that need one (bias-gradient partials, the norm
    /// backward's two column partials, the attention backward's row sums), grown on first use
    /// and reused after, so a step recorded into a CUDA graph allocates nothing.
    scratch: [RefCell<Option<DeviceBuffer<f32>>>; 4],
    /// Set once a graph has captured the scratch's addresses: from then on it never moves.
    captured: Cell<bool>,
}

/// The slots of [`Gpu`]'s scratch.
const BIAS_PARTIALS: usize = 0;
const NORM_DW: usize = 1;
const NORM_DB: usize = 2;
const ATTENTION: usize = 3;

impl Gpu {
    /// A backend on `context` with a new stream.
    pub fn new(context: &Context) -> Result<Gpu> {
        let stream = Stream::new(context)?;
        let engine = GemmEngine::new(&stream)?;
        Ok(Gpu { context: context.clone(), stream, engine, profile: None, scratch: Default::default(), captured: Cell::new(false) })
    }

    /// Scratch slot `slot`, at least `len` long (allocated, or reallocated larger, on `len`
    /// growing: never during a capture of a step the eager run already sized).
    fn scratch(&self, slot: usize, len: usize) -> Result<RefMut<'_, DeviceBuffer<f32>>> {
        let mut cell = self.scratch[slot].borrow_mut();
        if cell.as_ref().is_none_or(|b| b.len() < len) {
            if self.captured.get() {
                return Err(format!(
                    "scratch slot {slot} would grow to {len} after a CUDA graph captured it; build a new trainer (and backend) for a new shape"
                )
                .into());
            }
            *cell = Some(DeviceBuffer::zeroed_async(&self.stream, len.max(1))?);
        }
        Ok(RefMut::map(cell, |b| b.as_mut().expect("allocated above")))
    }

    /// Times every operation from now on (synchronizing before and after each, so the step
    /// runs slower): where the time goes, per kernel family.
    pub fn enable_profile(&mut self) {
        self.profile = Some(RefCell::new(Vec::new()));
    }

    /// Runs `f`, timing it under `family` when profiling.
    fn timed<R>(&self, family: &'static str, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let Some(profile) = &self.profile else { return f() };
        self.stream.synchronize()?;
        let started = Instant::now();
        let result = f()?;
        self.stream.synchronize()?;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let mut p = profile.borrow_mut();
        match p.iter_mut().find(|(name, _, _)| *name == family) {
            Some(entry) => {
                entry.1 += ms;
                entry.2 += 1;
            }
            None => p.push((family, ms, 1)),
        }
        Ok(result)
    }

    /// The stream every operation is queued on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.context
    }
}

/// One recorded part of a training step (the backward pass) and the stream it replays on.
///
/// Its kernels use the addresses of the buffers they were captured with: the trainer's
/// parameters, activations, gradients and [`Gpu`]'s scratch, which the trainer keeps alive and
/// in place while it holds the graph, and uses on this stream only. Dropping it waits for the
/// stream, so a replay in flight never outlives those buffers.
pub struct StepGraph {
    exec: GraphExec,
    stream: Stream,
}

impl Drop for StepGraph {
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
    }
}

impl Backend for Gpu {
    type Buf<E: Pod + Send + Sync + 'static> = DeviceBuffer<E>;

    fn zeros<E: Pod + Send + Sync + 'static>(&self, n: usize) -> Result<DeviceBuffer<E>> {
        Ok(DeviceBuffer::zeroed(&self.context, n)?)
    }
    fn upload<E: Pod + Send + Sync + 'static>(&self, data: &[E]) -> Result<DeviceBuffer<E>> {
        Ok(DeviceBuffer::from_slice(&self.context, data)?)
    }
    fn download<E: Pod + Send + Sync + 'static>(&self, buf: &DeviceBuffer<E>) -> Result<Vec<E>> {
        self.stream.synchronize()?;
        Ok(buf.to_vec()?)
    }
    fn copy_in<E: Pod + Send + Sync + 'static>(&self, buf: &mut DeviceBuffer<E>, data: &[E]) -> Result<()> {
        self.stream.synchronize()?;
        Ok(buf.copy_from_host(data)?)
    }
    fn synchronize(&self) -> Result<()> {
        Ok(self.stream.synchronize()?)
    }
    fn take_profile(&self) -> Profile {
        self.profile.as_ref().map(|p| std::mem::take(&mut *p.borrow_mut())).unwrap_or_default()
    }

    type Graph = StepGraph;

    fn capture(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<Option<StepGraph>> {
        if self.profile.is_some() {
            // Profiling synchronises around every operation, which a capture cannot hold.
            return Ok(None);
        }
        // The closure form: the GEMM engine's cuBLAS handles hold clones of the stream made
        // before the capture, which queue into it only inside `Stream::capture`'s closure (a
        // capture belongs to the handle that began it, audit 2026-11-28b G14R-4).
        let mut worked = Ok(());
        let ended = self.stream.capture(|_| {
            worked = work();
            Ok(())
        });
        worked?;
        let exec = ended?.instantiate()?;
        self.captured.set(true);
        Ok(Some(StepGraph { exec, stream: self.stream.clone() }))
    }

    fn replay(&self, graph: &StepGraph) -> Result<()> {
        // SAFETY: see `StepGraph`: the captured buffers are the trainer's and this backend's
        // scratch (never reallocated once a graph exists: `scratch` refuses), which outlive
        // the graph (dropped first, after waiting for its replays); every use of them is
        // queued on this one stream, the one the graph was captured on, so replays are ordered
        // with the eager work.
        unsafe { graph.exec.launch(&graph.stream) }?;
        Ok(())
    }

    fn encoder_forward<T: Act>(
        &self,
        tokens: &DeviceBuffer<u32>,
        params: &DeviceBuffer<T>,
        wte: Range<usize>,
        wpe: Range<usize>,
        out: &mut DeviceBuffer<T>,
        seq: usize,
        channels: usize,
    ) -> Result<()> {
        self.timed("encoder", || {
            Ok(T::encoder_forward(&self.stream, grid(out.len()), tokens, &params.slice(wte), &params.slice(wpe), out, seq as u32, channels as u32)?)
        })
    }
    fn encoder_backward<T: Act>(
        &self,
        tokens: &DeviceBuffer<u32>,
        dout: &DeviceBuffer<T>,
        grads: &mut DeviceBuffer<f32>,
        wte: Range<usize>,
        wpe: Range<usize>,
        batch: usize,
        seq: usize,
        channels: usize,
    ) -> Result<()> {
        self.timed("encoder backward", || {
            T::encoder_backward_wte(&self.stream, grid(dout.len()), tokens, dout, &mut grads.slice_mut(wte), channels as u32)?;
            let dwpe = wpe.start..wpe.start + seq * channels;
            Ok(T::encoder_backward_wpe(&self.stream, grid(seq * channels), dout, &mut grads.slice_mut(dwpe), batch as u32)?)
        })
    }
    fn layernorm<T: Act>(
        &self,
        x: &DeviceBuffer<T>,
        params: &DeviceBuffer<T>,
        w: Range<usize>,
        b: Range<usize>,
        out: &mut DeviceBuffer<T>,
        mean: &mut DeviceBuffer<f32>,
        rstd: &mut DeviceBuffer<f32>,
        shape: Rows,
    ) -> Result<()> {
        self.timed("layernorm", || Ok(rows::layernorm(&self.stream, x, &params.slice(w), &params.slice(b), out, mean, rstd, shape, 1e-5)?))
    }
    fn add_layernorm<T: Act>(
        &self,
        x: &DeviceBuffer<T>,
        residual: &DeviceBuffer<T>,
        params: &DeviceBuffer<T>,
        w: Range<usize>,
        b: Range<usize>,
        out: &mut DeviceBuffer<T>,
        sum: &mut DeviceBuffer<T>,
        mean: &mut DeviceBuffer<f32>,
        rstd: &mut DeviceBuffer<f32>,
        shape: Rows,
    ) -> Result<()> {
        self.timed("layernorm", || Ok(rows::add_layernorm(&self.stream, x, residual, &params.slice(w), &params.slice(b), out, sum, mean, rstd, shape, 1e-5)?))
    }
    fn layernorm_backward<T: Act>(
        &self,
        dout: &DeviceBuffer<T>,
        x: &DeviceBuffer<T>,
        params: &DeviceBuffer<T>,
        w: Range<usize>,
        mean: &DeviceBuffer<f32>,
        rstd: &DeviceBuffer<f32>,
        dresidual: Option<&DeviceBuffer<T>>,
        dx: &mut DeviceBuffer<T>,
        grads: &mut DeviceBuffer<f32>,
        dw: Range<usize>,
        db: Range<usize>,
        shape: Rows,
    ) -> Result<()> {
        self.timed("layernorm backward", || {
            assert!(dw.end <= db.start || db.end <= dw.start, "ranges {dw:?} and {db:?} overlap");
            // Two disjoint views of the gradient buffer: split it where the later range starts.
            let split = dw.start.max(db.start);
            let (mut lo, mut hi) = grads.split_at_mut(split);
            let (mut dwv, mut dbv) =
                if dw.start < db.start { (lo.slice_mut(dw), hi.slice_mut(..db.end - split)) } else { (hi.slice_mut(..dw.end - split), lo.slice_mut(db)) };
            let dresidual = dresidual.map(|d| d as &dyn DeviceRead<T>);
            let n = rows::norm_backward_scratch_len(shape);
            let (mut pdw, mut pdb) = (self.scratch(NORM_DW, n)?, self.scratch(NORM_DB, n)?);
            Ok(rows::layernorm_backward_with_scratch(
                &self.stream,
                dout,
                x,
                &params.slice(w),
                mean,
                rstd,
                dresidual,
                dx,
                &mut dwv,
                &mut dbv,
                &mut pdw.slice_mut(..n),
                &mut pdb.slice_mut(..n),
                shape,
            )?)
        })
    }
    fn matmul<T: Act>(&self, a: In<'_, Self, T>, b: In<'_, Self, T>, c: &mut DeviceBuffer<T>, shape: GemmShape, bias: Option<In<'_, Self, T>>) -> Result<()> {
        self.timed("GEMM (activations)", || {
            let bias_view = bias.map(|(buf, r)| buf.slice(r));
            let epilogue = match &bias_view {
                Some(v) => GemmEpilogue::Bias(v as &dyn DeviceRead<T>),
                None => GemmEpilogue::None,
            };
            Ok(gemm::gemm::<T, T>(&self.engine, &a.0.slice(a.1), &b.0.slice(b.1), c, shape, epilogue, 1.0, 0.0)?)
        })
    }
    fn matmul_f32<T: Act>(
        &self,
        a: In<'_, Self, T>,
        b: In<'_, Self, T>,
        c: &mut DeviceBuffer<f32>,
        c_range: Range<usize>,
        shape: GemmShape,
        beta: f32,
    ) -> Result<()> {
        self.timed("GEMM (weight gradients)", || Ok(T::gemm_into_f32(&self.engine, &a.0.slice(a.1), &b.0.slice(b.1), &mut c.slice_mut(c_range), shape, beta)?))
    }
    fn bias_grad<T: Act>(&self, dout: &DeviceBuffer<T>, grads: &mut DeviceBuffer<f32>, range: Range<usize>, rows: usize, cols: usize) -> Result<()> {
        self.timed("bias gradients", || {
            let chunks = rows.div_ceil(gpt2_kernels::ROWS_PER_CHUNK as usize).max(1);
            let mut scratch = self.scratch(BIAS_PARTIALS, chunks * cols)?;
            let mut partial = scratch.slice_mut(..chunks * cols);
            T::column_partials(&self.stream, &dout.slice(..rows * cols), &mut partial, rows as u32, cols as u32)?;
            match crate::own::sum_split_grid(cols) {
                Some(config) => gpt2_kernels::sum_partials_split::launch(&self.stream, config, &partial, &mut grads.slice_mut(range), chunks as u32)?,
                None => gpt2_kernels::sum_partials::launch(&self.stream, grid(cols), &partial, &mut grads.slice_mut(range), chunks as u32)?,
            }
            Ok(())
        })
    }
    fn gelu<T: Act>(&self, x: &DeviceBuffer<T>, out: &mut DeviceBuffer<T>) -> Result<()> {
        self.timed("gelu", || Ok(rows::gelu(&self.stream, x, out)?))
    }
    fn gelu_backward<T: Act>(&self, x: &DeviceBuffer<T>, dout: &DeviceBuffer<T>, dx: &mut DeviceBuffer<T>) -> Result<()> {
        self.timed("gelu backward", || Ok(rows::gelu_backward(&self.stream, x, dout, dx)?))
    }
    fn split_heads<T: Act>(&self, src: &DeviceBuffer<T>, dst: &mut DeviceBuffer<T>, heads: Heads) -> Result<()> {
        self.timed("head split/merge", || Ok(T::split_heads(&self.stream, src, dst, heads)?))
    }
    fn merge_heads<T: Act>(
        &self,
        q: &DeviceBuffer<T>,
        k: &DeviceBuffer<T>,
        v: &DeviceBuffer<T>,
        dst: &mut DeviceBuffer<T>,
        heads: Heads,
        parts: u32,
    ) -> Result<()> {
        self.timed("head split/merge", || Ok(T::merge_heads(&self.stream, q, k, v, dst, heads, parts)?))
    }
    fn attention_forward<T: Act>(
        &self,
        q: &DeviceBuffer<T>,
        k: &DeviceBuffer<T>,
        v: &DeviceBuffer<T>,
        out: &mut DeviceBuffer<T>,
        lse: &mut DeviceBuffer<f32>,
        shape: Attention,
    ) -> Result<()> {
        self.timed("attention forward", || Ok(attention::attention_forward(&self.stream, q, k, v, out, lse, shape)?))
    }
    fn attention_backward<T: Act>(
        &self,
        q: &DeviceBuffer<T>,
        k: &DeviceBuffer<T>,
        v: &DeviceBuffer<T>,
        out: &DeviceBuffer<T>,
        dout: &DeviceBuffer<T>,
        lse: &DeviceBuffer<f32>,
        dq: &mut DeviceBuffer<T>,
        dk: &mut DeviceBuffer<T>,
        dv: &mut DeviceBuffer<T>,
        shape: Attention,
    ) -> Result<()> {
        self.timed("attention backward", || {
            // GPT2_DETERMINISTIC=1: the attention backward without atomic dQ sums (slower; for
            // run-to-run comparisons; the embedding gradient's atomics remain).
            if std::env::var("GPT2_DETERMINISTIC").is_ok_and(|v| v == "1") {
                let operands = attention::Backward { q, k, v, out, dout, lse, dq, dk, dv };
                return Ok(attention::attention_backward_deterministic(&self.stream, operands, shape)?);
            }
            // Long enough for the sm_90 backward, so a captured step (`--graph`) keeps it.
            let n = attention::backward_scratch_len_fastest(&shape);
            let mut scratch = self.scratch(ATTENTION, n)?;
            Ok(attention::attention_backward_with_scratch(
                &self.stream,
                attention::Backward { q, k, v, out, dout, lse, dq, dk, dv },
                &mut scratch.slice_mut(..n),
                shape,
            )?)
        })
    }
    fn cross_entropy<T: Act>(
        &self,
        logits: &DeviceBuffer<T>,
        targets: &DeviceBuffer<u32>,
        losses: &mut DeviceBuffer<f32>,
        dlogits: &mut DeviceBuffer<T>,
        shape: Rows,
        dloss: f32,
    ) -> Result<()> {
        self.timed("classifier (cross-entropy)", || Ok(rows::cross_entropy(&self.stream, logits, targets, losses, dlogits, shape, dloss)?))
    }
    fn global_norm_squared(&self, grads: &DeviceBuffer<f32>, total: &mut DeviceBuffer<f32>) -> Result<()> {
        self.timed("optimizer (norm, clip, AdamW, cast)", || {
            total.zero_async(&self.stream)?;
            Ok(rows::sum_of_squares(&self.stream, grads, total)?)
        })
    }
    fn clip(&self, grads: &mut DeviceBuffer<f32>, norm_squared: &DeviceBuffer<f32>, max_norm: f32) -> Result<()> {
        self.timed("optimizer (norm, clip, AdamW, cast)", || Ok(rows::clip_by_global_norm(&self.stream, grads, norm_squared, max_norm)?))
    }
    fn adamw(
        &self,
        master: &mut DeviceBuffer<f32>,
        grads: &DeviceBuffer<f32>,
        m: &mut DeviceBuffer<f32>,
        v: &mut DeviceBuffer<f32>,
        range: Range<usize>,
        hyper: AdamW,
        step: u32,
    ) -> Result<()> {
        self.timed("optimizer (norm, clip, AdamW, cast)", || {
            let r = range;
            Ok(rows::adamw(
                &self.stream,
                &mut master.slice_mut(r.clone()),
                &grads.slice(r.clone()),
                &mut m.slice_mut(r.clone()),
                &mut v.slice_mut(r),
                hyper,
                step,
                1.0,
            )?)
        })
    }
    fn cast_params<T: Act>(&self, master: &DeviceBuffer<f32>, params: &mut DeviceBuffer<T>) -> Result<()> {
        self.timed("optimizer (norm, clip, AdamW, cast)", || Ok(T::cast_from_f32(&self.stream, grid(params.len()), master, params)?))
    }
}
