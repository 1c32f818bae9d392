//! What the model needs from a device, once for the GPU ([`crate::gpu::Gpu`]) and once for the
//! CPU executor ([`crate::cpu::Cpu`]): the same model code (forward, backward, optimizer) runs
//! on both, so the CPU executor's tests check the code the GPU runs.
//!
//! Buffers are whole allocations ([`Backend::Buf`]); an operand inside one (a layer's weight
//! in the flat parameter buffer) is the buffer and a range.

use std::ops::Range;

use bytemuck::Pod;
use ferrocuda_kernels::attention::Attention;
use ferrocuda_kernels::gemm::GemmShape;
use ferrocuda_kernels::rows::{AdamW, Rows};
use gpt2_kernels::Heads;

use crate::Result;

/// A storage type of the model's parameters and activations: `f32` (the CPU executor's tests,
/// the tight PyTorch comparison) or `bf16` (training on the GPU).
pub trait Act:
    crate::own::OwnKernels
    + GemmIntoF32
    + ferrocuda_kernels::Element
    + gpt2_kernels::Elem
    + ferrocuda_host::cublas::GemmElement
    + ferrocuda_host::cublas::GemmOutput<Self>
    + Pod
{
    /// `"f32"` or `"bf16"`.
    const NAME: &'static str;
}

impl Act for f32 {
    const NAME: &'static str = "f32";
}

impl Act for half::bf16 {
    const NAME: &'static str = "bf16";
}

/// Time per kernel family: (family, milliseconds, calls).
pub type Profile = Vec<(&'static str, f64, u64)>;

/// An input operand: a buffer and the range of it the operation reads.
pub type In<'a, B, E> = (&'a <B as Backend>::Buf<E>, Range<usize>);

/// The operations of one training step.
#[allow(clippy::too_many_arguments)]
pub trait Backend {
    /// A buffer of `E`s on this device.
    type Buf<E: Pod + Send + Sync + 'static>;

    /// `n` zeros.
    fn zeros<E: Pod + Send + Sync + 'static>(&self, n: usize) -> Result<Self::Buf<E>>;
    /// A copy of `data`.
    fn upload<E: Pod + Send + Sync + 'static>(&self, data: &[E]) -> Result<Self::Buf<E>>;
    /// The buffer's contents (after all queued work).
    fn download<E: Pod + Send + Sync + 'static>(&self, buf: &Self::Buf<E>) -> Result<Vec<E>>;
    /// Overwrites the buffer with `data` (same length), after all queued work.
    fn copy_in<E: Pod + Send + Sync + 'static>(&self, buf: &mut Self::Buf<E>, data: &[E]) -> Result<()>;
    /// Waits for all queued work.
    fn synchronize(&self) -> Result<()>;
    /// Time per kernel family since the last call (family, milliseconds, calls), where the
    /// backend profiles (the GPU's `--profile`); empty otherwise.
    fn take_profile(&self) -> Profile {
        Vec::new()
    }

    /// A recorded piece of work to replay ([`Backend::capture`]).
    type Graph;
    /// Records what `work` queues into a graph without running it (a CUDA graph on the GPU),
    /// or `None` where this backend does not record (the CPU executor, a profiling GPU).
    /// An error means the work could not be recorded; the caller then runs it eagerly.
    fn capture(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<Option<Self::Graph>>;
    /// Queues one replay of `graph`.
    fn replay(&self, graph: &Self::Graph) -> Result<()>;

    /// `out = wte[tokens] + wpe[position]` (`[B T, C]`).
    fn encoder_forward<T: Act>(
        &self,
        tokens: &Self::Buf<u32>,
        params: &Self::Buf<T>,
        wte: Range<usize>,
        wpe: Range<usize>,
        out: &mut Self::Buf<T>,
        seq: usize,
        channels: usize,
    ) -> Result<()>;
    /// `grads[wte] += scatter(dout)` by token, `grads[wpe] = sum over the batch of dout`.
    fn encoder_backward<T: Act>(
        &self,
        tokens: &Self::Buf<u32>,
        dout: &Self::Buf<T>,
        grads: &mut Self::Buf<f32>,
        wte: Range<usize>,
        wpe: Range<usize>,
        batch: usize,
        seq: usize,
        channels: usize,
    ) -> Result<()>;
    /// Layer norm of `x` with weight and bias at `w`, `b` of `params`.
    fn layernorm<T: Act>(
        &self,
        x: &Self::Buf<T>,
        params: &Self::Buf<T>,
        w: Range<usize>,
        b: Range<usize>,
        out: &mut Self::Buf<T>,
        mean: &mut Self::Buf<f32>,
        rstd: &mut Self::Buf<f32>,
        shape: Rows,
    ) -> Result<()>;
    /// `sum = x + residual`, `out = layernorm(sum)`.
    fn add_layernorm<T: Act>(
        &self,
        x: &Self::Buf<T>,
        residual: &Self::Buf<T>,
        params: &Self::Buf<T>,
        w: Range<usize>,
        b: Range<usize>,
        out: &mut Self::Buf<T>,
        sum: &mut Self::Buf<T>,
        mean: &mut Self::Buf<f32>,
        rstd: &mut Self::Buf<f32>,
        shape: Rows,
    ) -> Result<()>;
    /// Layer norm backward: `dx` (plus `dresidual`), weight and bias gradients written into
    /// `grads` at `dw`, `db`.
    fn layernorm_backward<T: Act>(
        &self,
        dout: &Self::Buf<T>,
        x: &Self::Buf<T>,
        params: &Self::Buf<T>,
        w: Range<usize>,
        mean: &Self::Buf<f32>,
        rstd: &Self::Buf<f32>,
        dresidual: Option<&Self::Buf<T>>,
        dx: &mut Self::Buf<T>,
        grads: &mut Self::Buf<f32>,
        dw: Range<usize>,
        db: Range<usize>,
        shape: Rows,
    ) -> Result<()>;
    /// Row-major `c = op(a) op(b) (+ bias per column)` (`ferrocuda_kernels::gemm::gemm`'s
    /// conventions), `c` of the activation type, overwritten.
    fn matmul<T: Act>(&self, a: In<'_, Self, T>, b: In<'_, Self, T>, c: &mut Self::Buf<T>, shape: GemmShape, bias: Option<In<'_, Self, T>>) -> Result<()>;
    /// `c[range] = op(a) op(b) + beta c[range]` into `f32` (weight and bias gradients).
    fn matmul_f32<T: Act>(
        &self,
        a: In<'_, Self, T>,
        b: In<'_, Self, T>,
        c: &mut Self::Buf<f32>,
        c_range: Range<usize>,
        shape: GemmShape,
        beta: f32,
    ) -> Result<()>;
    /// `grads[range] = sum over the rows of dout` (`rows x cols`): a bias gradient.
    fn bias_grad<T: Act>(&self, dout: &Self::Buf<T>, grads: &mut Self::Buf<f32>, range: Range<usize>, rows: usize, cols: usize) -> Result<()>;
    /// `out = gelu(x)`.
    fn gelu<T: Act>(&self, x: &Self::Buf<T>, out: &mut Self::Buf<T>) -> Result<()>;
    /// `dx = gelu'(x) dout`.
    fn gelu_backward<T: Act>(&self, x: &Self::Buf<T>, dout: &Self::Buf<T>, dx: &mut Self::Buf<T>) -> Result<()>;
    /// One tensor's heads out of row-major rows into `[B, H, T, D]`.
    fn split_heads<T: Act>(&self, src: &Self::Buf<T>, dst: &mut Self::Buf<T>, heads: Heads) -> Result<()>;
    /// `[B, H, T, D]` tensors (1 or 3) back into row-major rows, side by side.
    fn merge_heads<T: Act>(&self, q: &Self::Buf<T>, k: &Self::Buf<T>, v: &Self::Buf<T>, dst: &mut Self::Buf<T>, heads: Heads, parts: u32) -> Result<()>;
    /// Causal attention forward, `[B, H, T, D]`.
    fn attention_forward<T: Act>(
        &self,
        q: &Self::Buf<T>,
        k: &Self::Buf<T>,
        v: &Self::Buf<T>,
        out: &mut Self::Buf<T>,
        lse: &mut Self::Buf<f32>,
        shape: Attention,
    ) -> Result<()>;
    /// Causal attention backward.
    fn attention_backward<T: Act>(
        &self,
        q: &Self::Buf<T>,
        k: &Self::Buf<T>,
        v: &Self::Buf<T>,
        out: &Self::Buf<T>,
        dout: &Self::Buf<T>,
        lse: &Self::Buf<f32>,
        dq: &mut Self::Buf<T>,
        dk: &mut Self::Buf<T>,
        dv: &mut Self::Buf<T>,
        shape: Attention,
    ) -> Result<()>;
    /// The fused classifier: per-row losses and `dlogits`.
    fn cross_entropy<T: Act>(
        &self,
        logits: &Self::Buf<T>,
        targets: &Self::Buf<u32>,
        losses: &mut Self::Buf<f32>,
        dlogits: &mut Self::Buf<T>,
        shape: Rows,
        dloss: f32,
    ) -> Result<()>;
    /// `total[0] = sum(grads^2)` (zeroes `total` first).
    fn global_norm_squared(&self, grads: &Self::Buf<f32>, total: &mut Self::Buf<f32>) -> Result<()>;
    /// Scales `grads` so their norm is at most `max_norm`.
    fn clip(&self, grads: &mut Self::Buf<f32>, norm_squared: &Self::Buf<f32>, max_norm: f32) -> Result<()>;
    /// One AdamW step on `master[range]`.
    fn adamw(
        &self,
        master: &mut Self::Buf<f32>,
        grads: &Self::Buf<f32>,
        m: &mut Self::Buf<f32>,
        v: &mut Self::Buf<f32>,
        range: Range<usize>,
        hyper: AdamW,
        step: u32,
    ) -> Result<()>;
    /// `params = round(master)`.
    fn cast_params<T: Act>(&self, master: &Self::Buf<f32>, params: &mut Self::Buf<T>) -> Result<()>;
}

/// The GEMM into `f32` for each activation type (`f32: GemmOutput<T>` for both, spelled out
/// once per type because generic code cannot name that bound).
pub trait GemmIntoF32: Sized {
    /// `gemm::gemm::<Self, f32>`.
    #[allow(clippy::too_many_arguments)]
    fn gemm_into_f32(
        engine: &ferrocuda_kernels::gemm::GemmEngine,
        a: &ferrocuda_host::DeviceView<'_, Self>,
        b: &ferrocuda_host::DeviceView<'_, Self>,
        c: &mut ferrocuda_host::DeviceViewMut<'_, f32>,
        shape: GemmShape,
        beta: f32,
    ) -> ferrocuda_kernels::Result<()>;
}

macro_rules! gemm_into_f32 {
    ($($ty:ty),*) => {$(
        impl GemmIntoF32 for $ty {
            fn gemm_into_f32(
                engine: &ferrocuda_kernels::gemm::GemmEngine,
                a: &ferrocuda_host::DeviceView<'_, Self>,
                b: &ferrocuda_host::DeviceView<'_, Self>,
                c: &mut ferrocuda_host::DeviceViewMut<'_, f32>,
                shape: GemmShape,
                beta: f32,
            ) -> ferrocuda_kernels::Result<()> {
                ferrocuda_kernels::gemm::gemm::<$ty, f32>(engine, a, b, c, shape, ferrocuda_kernels::gemm::GemmEpilogue::None, 1.0, beta)
            }
        }
    )*};
}
gemm_into_f32!(f32, half::bf16);
