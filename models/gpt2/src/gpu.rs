//! [`Backend`] on one GPU: `ferrocuda-kernels` (rows, attention, cuBLASLt GEMMs) and this
//! crate's own kernels, all queued on one stream.

use std::cell::RefCell;
use std::ops::Range;
use std::time::Instant;

use bytemuck::Pod;
use ferrocuda_host::{Context, DeviceBuffer, DeviceRead, Stream};
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
}

impl Gpu {
    /// A backend on `context` with a new stream.
    pub fn new(context: &Context) -> Result<Gpu> {
        let stream = Stream::new(context)?;
        let engine = GemmEngine::new(&stream)?;
        Ok(Gpu { context: context.clone(), stream, engine, profile: None })
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
            Ok(rows::layernorm_backward(&self.stream, dout, x, &params.slice(w), mean, rstd, dresidual, dx, &mut dwv, &mut dbv, shape)?)
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
            let mut partial = DeviceBuffer::<f32>::zeroed_async(&self.stream, chunks * cols)?;
            T::column_partials(&self.stream, grid(partial.len()), &dout.slice(..rows * cols), &mut partial, rows as u32, cols as u32)?;
            Ok(gpt2_kernels::sum_partials::launch(&self.stream, grid(cols), &partial, &mut grads.slice_mut(range), chunks as u32)?)
        })
    }
    fn gelu<T: Act>(&self, x: &DeviceBuffer<T>, out: &mut DeviceBuffer<T>) -> Result<()> {
        self.timed("gelu", || Ok(rows::gelu(&self.stream, x, out)?))
    }
    fn gelu_backward<T: Act>(&self, x: &DeviceBuffer<T>, dout: &DeviceBuffer<T>, dx: &mut DeviceBuffer<T>) -> Result<()> {
        self.timed("gelu backward", || Ok(rows::gelu_backward(&self.stream, x, dout, dx)?))
    }
    fn split_heads<T: Act>(&self, src: &DeviceBuffer<T>, dst: &mut DeviceBuffer<T>, heads: Heads) -> Result<()> {
        self.timed("head split/merge", || Ok(T::split_heads(&self.stream, grid(dst.len()), src, dst, heads)?))
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
        self.timed("head split/merge", || Ok(T::merge_heads(&self.stream, grid(dst.len()), q, k, v, dst, heads, parts)?))
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
        self.timed("attention backward", || Ok(attention::attention_backward(&self.stream, q, k, v, out, dout, lse, dq, dk, dv, shape)?))
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
