//! ferrocuda-kernels' RMSNorm and attention as candle [`CustomOp2`] / [`CustomOp3`]s.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use ferrocuda_candle_ops::{attention, rms_norm};
//! # fn main() -> candle_core::Result<()> {
//! let device = Device::Cpu; // or Device::new_cuda(0)? with the `cuda` feature
//! let x = Tensor::randn(0f32, 1.0, (4, 64), &device)?;
//! let w = Tensor::ones(64, DType::F32, &device)?;
//! let y = rms_norm(&x, &w, 1e-6)?; // on CUDA: ferrocuda's kernel on candle's memory and stream
//! let q = Tensor::randn(0f32, 1.0, (1, 2, 16, 32), &device)?; // [batch, heads, seq, head_dim]
//! let o = attention(&q, &q, &q, true, None)?; // causal, scale 1/sqrt(head_dim)
//! assert_eq!((y.dims(), o.dims()), (x.dims(), q.dims()));
//! # Ok(())
//! # }
//! ```
//!
//! On a CUDA tensor (feature `cuda`), `cuda_fwd` runs `ferrocuda_kernels::rows::rmsnorm` /
//! `ferrocuda_kernels::attention::attention_forward` on candle's own memory and stream: the
//! `CudaSlice` of each `CudaStorage` and `CudaDevice::cuda_stream()` are lent to ferrocuda
//! through `ferrocuda_host::borrowed::cudarc` (no copy; the kernel is queued on candle's stream,
//! after candle's earlier work on the inputs and before its later work on the output, cudarc's
//! per-slice events included). The output is a fresh `CudaSlice` of candle's device, wrapped
//! as a `CudaStorage`.
//!
//! On a CPU tensor, `cpu_fwd` runs the same kernels on ferrocuda's CPU executor (which runs
//! every GPU thread and reports races): exact but slow, for tests and small shapes.
//!
//! What is checked, with an error that says what to pass instead: the element type (f32, bf16
//! or f16, the same for every input), the shapes (`x` is `[..., cols]` and `weight` `[cols]`;
//! `q` is `[batch, heads_q, seq_q, head_dim]`, `k` and `v` `[batch, heads_kv, seq_kv,
//! head_dim]`, `heads_kv` dividing `heads_q`, `head_dim` a multiple of 32 up to 256), and
//! contiguity (a row-major layout, any start offset: call `.contiguous()` on a transposed or
//! broadcast tensor first). No backward: these are inference ops (`bwd` reports it).

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Result, Shape, Tensor};
use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_kernels::Element;
use ferrocuda_kernels::attention::{Attention as AttentionShape, Layout as AttentionLayout};
use ferrocuda_kernels::rows::Rows;
use half::{bf16, f16};

#[cfg(feature = "cuda")]
mod cuda;

/// `x * rsqrt(mean(x²) + eps) * weight` over the last dimension of `x`, by ferrocuda's
/// RMSNorm kernel: [`RmsNorm`] applied with [`Tensor::apply_op2_no_bwd`].
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f32) -> Result<Tensor> {
    x.apply_op2_no_bwd(weight, &RmsNorm { eps })
}

/// `softmax(scale * q kᵀ [causal mask]) v` per batch and head, by ferrocuda's attention
/// forward: [`Attention`] applied with [`Tensor::apply_op3_no_bwd`]. `q`, `k`, `v` are
/// `[batch, heads, seq, head_dim]`; `k` and `v` may have fewer heads (grouped-query
/// attention) and another sequence length. `scale` `None` is `1 / sqrt(head_dim)`; `causal`
/// lets query `i` see keys `0..=i` (top-left aligned, PyTorch's `is_causal`).
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, scale: Option<f32>) -> Result<Tensor> {
    q.apply_op3_no_bwd(k, v, &Attention { causal, scale })
}

/// RMSNorm as a candle [`CustomOp2`] (`x`, `weight`): see [`rms_norm`].
#[derive(Clone, Copy, Debug)]
pub struct RmsNorm {
    /// Added to the mean of squares before the square root.
    pub eps: f32,
}

/// Attention forward as a candle [`CustomOp3`] (`q`, `k`, `v`): see [`attention`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Attention {
    /// Query `i` sees keys `0..=i` only.
    pub causal: bool,
    /// Score scale; `None` is `1 / sqrt(head_dim)`.
    pub scale: Option<f32>,
}

/// An operand's elements in its storage: a contiguous layout's start and end offsets.
type Range = (usize, usize);

/// The element types the kernels take, as candle names them.
fn check_dtype(op: &str, operands: &[(&str, DType)]) -> Result<DType> {
    let (_, first) = operands[0];
    if !matches!(first, DType::F32 | DType::BF16 | DType::F16) {
        candle_core::bail!("{op}: `{}` is {first:?}; ferrocuda's kernels take f32, bf16 or f16 (convert with `.to_dtype(..)`)", operands[0].0);
    }
    for &(name, dtype) in &operands[1..] {
        if dtype != first {
            candle_core::bail!("{op}: `{name}` is {dtype:?} but `{}` is {first:?}; pass them in one dtype", operands[0].0);
        }
    }
    Ok(first)
}

/// The element range of a row-major layout (any start offset), or an error naming the operand.
fn contiguous(op: &str, name: &str, layout: &Layout) -> Result<Range> {
    layout.contiguous_offsets().ok_or_else(|| {
        candle_core::Error::msg(format!(
            "{op}: `{name}` (shape {:?}, strides {:?}) is not contiguous; call `.contiguous()` on it first",
            layout.dims(),
            layout.stride()
        ))
    })
}

impl RmsNorm {
    /// The kernel's shape from candle's layouts: `x` `[..., cols]`, `weight` `[cols]`.
    fn shape(&self, x: &Layout, weight: &Layout) -> Result<Rows> {
        let dims = x.dims();
        let Some(&cols) = dims.last() else {
            candle_core::bail!("ferrocuda-rms-norm: `x` is a scalar; it needs at least one dimension (the normalised one)");
        };
        if weight.dims() != [cols] {
            candle_core::bail!(
                "ferrocuda-rms-norm: `weight` has shape {:?} but `x`'s last dimension is {cols}; pass a weight of shape [{cols}]",
                weight.dims()
            );
        }
        if cols == 0 {
            candle_core::bail!("ferrocuda-rms-norm: `x` has an empty last dimension; RMSNorm needs at least one column");
        }
        Ok(Rows { rows: x.shape().elem_count() / cols, cols })
    }

    fn check(&self, x: (&Layout, DType), weight: (&Layout, DType)) -> Result<(DType, Rows, Range, Range)> {
        let dtype = check_dtype(self.name(), &[("x", x.1), ("weight", weight.1)])?;
        let shape = self.shape(x.0, weight.0)?;
        let x_range = contiguous(self.name(), "x", x.0)?;
        let w_range = contiguous(self.name(), "weight", weight.0)?;
        Ok((dtype, shape, x_range, w_range))
    }

    fn cpu<T: Element + Copy + Default>(&self, x: &[T], weight: &[T], shape: Rows) -> Result<Vec<T>> {
        let mut out = vec![T::default(); shape.rows * shape.cols];
        let mut rstd = vec![0f32; shape.rows];
        ferrocuda_kernels::cpu::rmsnorm(&CpuExecutor::default(), x, weight, &mut out, &mut rstd, shape, self.eps).map_err(candle_core::Error::wrap)?;
        Ok(out)
    }
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "ferrocuda-rms-norm"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (_, shape, (x0, x1), (w0, w1)) = self.check((l1, s1.dtype()), (l2, s2.dtype()))?;
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(w)) => CpuStorage::F32(self.cpu::<f32>(&x[x0..x1], &w[w0..w1], shape)?),
            (CpuStorage::BF16(x), CpuStorage::BF16(w)) => CpuStorage::BF16(self.cpu::<bf16>(&x[x0..x1], &w[w0..w1], shape)?),
            (CpuStorage::F16(x), CpuStorage::F16(w)) => CpuStorage::F16(self.cpu::<f16>(&x[x0..x1], &w[w0..w1], shape)?),
            _ => unreachable!("check_dtype admits f32, bf16 and f16, one for both"),
        };
        Ok((out, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s1: &candle_core::CudaStorage, l1: &Layout, s2: &candle_core::CudaStorage, l2: &Layout) -> Result<(candle_core::CudaStorage, Shape)> {
        let (dtype, shape, x_range, w_range) = self.check((l1, s1.dtype()), (l2, s2.dtype()))?;
        let out = match dtype {
            DType::F32 => cuda::rms_norm::<f32>(s1, x_range, s2, w_range, shape, self.eps)?,
            DType::BF16 => cuda::rms_norm::<bf16>(s1, x_range, s2, w_range, shape, self.eps)?,
            _ => cuda::rms_norm::<f16>(s1, x_range, s2, w_range, shape, self.eps)?,
        };
        Ok((out, l1.shape().clone()))
    }
}

impl Attention {
    /// The kernel's shape from candle's layouts (`[batch, heads, seq, head_dim]` each).
    fn shape(&self, q: &Layout, k: &Layout, v: &Layout) -> Result<AttentionShape> {
        let op = self.name();
        let four = |name: &str, layout: &Layout| -> Result<[usize; 4]> {
            <[usize; 4]>::try_from(layout.dims()).map_err(|_| {
                candle_core::Error::msg(format!("{op}: `{name}` has shape {:?}; it must be [batch, heads, seq, head_dim] (4 dimensions)", layout.dims()))
            })
        };
        let [batch, heads_q, seq_q, head_dim] = four("q", q)?;
        let [kb, heads_kv, seq_kv, kd] = four("k", k)?;
        if v.dims() != k.dims() {
            candle_core::bail!("{op}: `v` has shape {:?} but `k` has {:?}; they must be equal", v.dims(), k.dims());
        }
        if kb != batch || kd != head_dim {
            candle_core::bail!("{op}: `k` has shape {:?} but `q` has {:?}; batch and head_dim must be equal", k.dims(), q.dims());
        }
        if heads_kv == 0 || !heads_q.is_multiple_of(heads_kv) {
            candle_core::bail!(
                "{op}: `k` has {heads_kv} heads, which does not divide `q`'s {heads_q} (grouped-query attention needs heads_q a multiple of heads_kv)"
            );
        }
        if head_dim == 0 || !head_dim.is_multiple_of(32) || head_dim > 256 {
            candle_core::bail!("{op}: head_dim {head_dim} is not supported; the kernels take a multiple of 32 up to 256 (64, 128, 256 are the usual)");
        }
        Ok(AttentionShape { batch, heads_q, heads_kv, seq_q, seq_kv, head_dim, layout: AttentionLayout::Bhsd, causal: self.causal, scale: self.scale })
    }

    fn check(&self, q: (&Layout, DType), k: (&Layout, DType), v: (&Layout, DType)) -> Result<(DType, AttentionShape, [Range; 3])> {
        let dtype = check_dtype(self.name(), &[("q", q.1), ("k", k.1), ("v", v.1)])?;
        let shape = self.shape(q.0, k.0, v.0)?;
        let ranges = [contiguous(self.name(), "q", q.0)?, contiguous(self.name(), "k", k.0)?, contiguous(self.name(), "v", v.0)?];
        Ok((dtype, shape, ranges))
    }

    fn cpu<T: Element + Copy + Default>(&self, q: &[T], k: &[T], v: &[T], shape: AttentionShape) -> Result<Vec<T>> {
        let mut out = vec![T::default(); shape.q_len()];
        let mut lse = vec![0f32; shape.q_rows()];
        ferrocuda_kernels::cpu::attention_forward(&CpuExecutor::default(), q, k, v, &mut out, &mut lse, shape).map_err(candle_core::Error::wrap)?;
        Ok(out)
    }
}

impl CustomOp3 for Attention {
    fn name(&self) -> &'static str {
        "ferrocuda-attention"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout, s3: &CpuStorage, l3: &Layout) -> Result<(CpuStorage, Shape)> {
        let (_, shape, [(q0, q1), (k0, k1), (v0, v1)]) = self.check((l1, s1.dtype()), (l2, s2.dtype()), (l3, s3.dtype()))?;
        let out = match (s1, s2, s3) {
            (CpuStorage::F32(q), CpuStorage::F32(k), CpuStorage::F32(v)) => CpuStorage::F32(self.cpu(&q[q0..q1], &k[k0..k1], &v[v0..v1], shape)?),
            (CpuStorage::BF16(q), CpuStorage::BF16(k), CpuStorage::BF16(v)) => CpuStorage::BF16(self.cpu(&q[q0..q1], &k[k0..k1], &v[v0..v1], shape)?),
            (CpuStorage::F16(q), CpuStorage::F16(k), CpuStorage::F16(v)) => CpuStorage::F16(self.cpu(&q[q0..q1], &k[k0..k1], &v[v0..v1], shape)?),
            _ => unreachable!("check_dtype admits f32, bf16 and f16, one for all"),
        };
        Ok((out, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
        s3: &candle_core::CudaStorage,
        l3: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        let (dtype, shape, ranges) = self.check((l1, s1.dtype()), (l2, s2.dtype()), (l3, s3.dtype()))?;
        let storages = [s1, s2, s3];
        let out = match dtype {
            DType::F32 => cuda::attention::<f32>(storages, ranges, shape)?,
            DType::BF16 => cuda::attention::<bf16>(storages, ranges, shape)?,
            _ => cuda::attention::<f16>(storages, ranges, shape)?,
        };
        Ok((out, l1.shape().clone()))
    }
}
