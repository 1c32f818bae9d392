//! [`Backend`] on one GPU: `ferrocuda-kernels` (rows, attention, cuBLASLt GEMMs) and this
//! crate's own kernels, all queued on one stream.

use std::ops::Range;

use bytemuck::Pod;
use ferrocuda_host::{Context, DeviceBuffer, DeviceRead, Stream};
use ferrocuda_kernels::attention::{self, Attention};
use ferrocuda_kernels::gemm::{self, GemmEngine, GemmEpilogue, GemmShape};
use ferrocuda_kernels::rows::{self, AdamW, Rows};
use gpt2_kernels::Heads;

use crate::Result;
use crate::backend::{Act, Backend, In};
use crate::own::grid;

/// The GPU backend: a context, its stream and the GEMM handles bound to that stream.
pub struct Gpu {
    context: Context,
    stream: Stream,
    engine: GemmEngine,
}

impl Gpu {
    /// A backend on `context` with a new stream.
    pub fn new(context: &Context) -> Result<Gpu> {
        let stream = Stream::new(context)?;
        let engine = GemmEngine::new(&stream)?;
        Ok(Gpu { context: context.clone(), stream, engine })
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

    fn encoder_forward<T: Act>(&self, tokens: &DeviceBuffer<u32>, params: &DeviceBuffer<T>, wte: Range<usize>, wpe: Range<usize>, out: &mut DeviceBuffer<T>, seq: usize, channels: usize) -> Result<()> {
        Ok(T::encoder_forward(&self.stream, grid(out.len()), tokens, &params.slice(wte), &params.slice(wpe), out, seq as u32, channels as u32)?)
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
        T::encoder_backward_wte(&self.stream, grid(dout.len()), tokens, dout, &mut grads.slice_mut(wte), channels as u32)?;
        let dwpe = wpe.start..wpe.start + seq * channels;
        Ok(T::encoder_backward_wpe(&self.stream, grid(seq * channels), dout, &mut grads.slice_mut(dwpe), batch as u32)?)
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
        Ok(rows::layernorm(&self.stream, x, &params.slice(w), &params.slice(b), out, mean, rstd, shape, 1e-5)?)
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
        Ok(rows::add_layernorm(&self.stream, x, residual, &params.slice(w), &params.slice(b), out, sum, mean, rstd, shape, 1e-5)?)
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
        assert!(dw.end <= db.start || db.end <= dw.start, "ranges {dw:?} and {db:?} overlap");
        // Two disjoint views of the gradient buffer: split it where the later range starts.
        let split = dw.start.max(db.start);
        let (mut lo, mut hi) = grads.split_at_mut(split);
        let (mut dwv, mut dbv) = if dw.start < db.start {
            (lo.slice_mut(dw), hi.slice_mut(..db.end - split))
        } else {
            (hi.slice_mut(..dw.end - split), lo.slice_mut(db))
        };
        let dresidual = dresidual.map(|d| d as &dyn DeviceRead<T>);
        Ok(rows::layernorm_backward(&self.stream, dout, x, &params.slice(w), mean, rstd, dresidual, dx, &mut dwv, &mut dbv, shape)?)
    }
    fn matmul<T: Act>(&self, a: In<'_, Self, T>, b: In<'_, Self, T>, c: &mut DeviceBuffer<T>, shape: GemmShape, bias: Option<In<'_, Self, T>>) -> Result<()> {
        let bias_view = bias.map(|(buf, r)| buf.slice(r));
        let epilogue = match &bias_view {
            Some(v) => GemmEpilogue::Bias(v as &dyn DeviceRead<T>),
            None => GemmEpilogue::None,
        };
        Ok(gemm::gemm::<T, T>(&self.engine, &a.0.slice(a.1), &b.0.slice(b.1), c, shape, epilogue, 1.0, 0.0)?)
    }
    fn matmul_f32<T: Act>(&self, a: In<'_, Self, T>, b: In<'_, Self, T>, c: &mut DeviceBuffer<f32>, c_range: Range<usize>, shape: GemmShape, beta: f32) -> Result<()> {
        Ok(T::gemm_into_f32(&self.engine, &a.0.slice(a.1), &b.0.slice(b.1), &mut c.slice_mut(c_range), shape, beta)?)
    }
    fn gelu<T: Act>(&self, x: &DeviceBuffer<T>, out: &mut DeviceBuffer<T>) -> Result<()> {
        Ok(rows::gelu(&self.stream, x, out)?)
    }
    fn gelu_backward<T: Act>(&self, x: &DeviceBuffer<T>, dout: &DeviceBuffer<T>, dx: &mut DeviceBuffer<T>) -> Result<()> {
        Ok(rows::gelu_backward(&self.stream, x, dout, dx)?)
    }
    fn split_heads<T: Act>(&self, src: &DeviceBuffer<T>, dst: &mut DeviceBuffer<T>, heads: Heads) -> Result<()> {
        Ok(T::split_heads(&self.stream, grid(dst.len()), src, dst, heads)?)
    }
    fn merge_heads<T: Act>(&self, q: &DeviceBuffer<T>, k: &DeviceBuffer<T>, v: &DeviceBuffer<T>, dst: &mut DeviceBuffer<T>, heads: Heads, parts: u32) -> Result<()> {
        Ok(T::merge_heads(&self.stream, grid(dst.len()), q, k, v, dst, heads, parts)?)
    }
    fn attention_forward<T: Act>(&self, q: &DeviceBuffer<T>, k: &DeviceBuffer<T>, v: &DeviceBuffer<T>, out: &mut DeviceBuffer<T>, lse: &mut DeviceBuffer<f32>, shape: Attention) -> Result<()> {
        Ok(attention::attention_forward(&self.stream, q, k, v, out, lse, shape)?)
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
        Ok(attention::attention_backward(&self.stream, q, k, v, out, dout, lse, dq, dk, dv, shape)?)
    }
    fn cross_entropy<T: Act>(&self, logits: &DeviceBuffer<T>, targets: &DeviceBuffer<u32>, losses: &mut DeviceBuffer<f32>, dlogits: &mut DeviceBuffer<T>, shape: Rows, dloss: f32) -> Result<()> {
        Ok(rows::cross_entropy(&self.stream, logits, targets, losses, dlogits, shape, dloss)?)
    }
    fn global_norm_squared(&self, grads: &DeviceBuffer<f32>, total: &mut DeviceBuffer<f32>) -> Result<()> {
        total.zero_async(&self.stream)?;
        Ok(rows::sum_of_squares(&self.stream, grads, total)?)
    }
    fn clip(&self, grads: &mut DeviceBuffer<f32>, norm_squared: &DeviceBuffer<f32>, max_norm: f32) -> Result<()> {
        Ok(rows::clip_by_global_norm(&self.stream, grads, norm_squared, max_norm)?)
    }
    fn adamw(&self, master: &mut DeviceBuffer<f32>, grads: &DeviceBuffer<f32>, m: &mut DeviceBuffer<f32>, v: &mut DeviceBuffer<f32>, range: Range<usize>, hyper: AdamW, step: u32) -> Result<()> {
        let r = range;
        Ok(rows::adamw(&self.stream, &mut master.slice_mut(r.clone()), &grads.slice(r.clone()), &mut m.slice_mut(r.clone()), &mut v.slice_mut(r), hyper, step, 1.0)?)
    }
    fn cast_params<T: Act>(&self, master: &DeviceBuffer<f32>, params: &mut DeviceBuffer<T>) -> Result<()> {
        Ok(T::cast_from_f32(&self.stream, grid(params.len()), master, params)?)
    }
}
