//! Attention forward and backward on the GPU.
//!
//! `Q` is `[batch, heads_q, seq_q, head_dim]` ([`Layout::Bhsd`]) or `[batch, seq_q, heads_q,
//! head_dim]` ([`Layout::Bshd`]); `K` and `V` the same with `heads_kv` and `seq_kv`
//! (grouped-query attention: query head `h` reads key/value head `h / (heads_q / heads_kv)`);
//! `O`, `dO`, `dQ` like `Q`, `dK`, `dV` like `K`. The log-sum-exp `lse` holds one `f32` per
//! row of `O`, in `O`'s row order. `head_dim` is a multiple of 32 up to 256 (64, 128, 256
//! are the usual ones); any sequence lengths; causal masking is PyTorch's `is_causal` (query
//! `i` sees keys `0..=i`, top-left aligned).
//!
//! **Paths of the forward**, picked per call, fastest first:
//! 1. on an sm_90 GPU (H100, H200), the FlashAttention-3-class kernels of
//!    `ferrocuda-kernels-hopper` (TMA, `wgmma`, warp-specialised warpgroups) for `bf16`,
//!    `[B, H, S, D]`, D 64, 128 or 256, `heads_q == heads_kv`, `seq_q == seq_kv`, causal or not
//!    ([`hopper_kernel`]), when Q, K and V start 16-byte aligned and the stream is not being
//!    captured into a graph; the tensor maps are built and tracked inside the call;
//! 2. on the tensor cores of any sm_80+ GPU (FlashAttention-2's schedule over `mma.sync
//!    m16n8k16`) for `bf16`/`f16`, `[B, H, S, D]`, `seq_q % 16 == 0` and head dims up to 128
//!    ([`uses_tensor_cores`]);
//! 3. everything else, the portable path (a warp per row, f32 on the CUDA cores), correct and
//!    far slower than FlashAttention-class kernels.
//!
//! **Paths of the backward**, fastest first:
//! 1. on an sm_90 GPU, the FlashAttention-3-style kernel of `ferrocuda-kernels-hopper` (TMA,
//!    `wgmma`, a block per 128 keys, dQ accumulated in f32 with atomic adds, so its last bits
//!    may vary from call to call) for `bf16`/`f16`, head dims 64 and 128, either layout,
//!    grouped-query heads, any lengths, causal or not ([`hopper_backward_kernel`]), when the
//!    inputs start 16-byte aligned and the stream is not being captured;
//! 2. the tensor cores (`mma.sync`, sm_80+, FlashAttention-2's schedule as three
//!    deterministic launches) for `bf16`/`f16` with head dims 64 and 128 in both layouts, any
//!    lengths, causal or not, grouped-query heads ([`backward_uses_tensor_cores`]);
//! 3. the portable path for the rest.

use ferrocuda_host::{DeviceBuffer, DeviceRead, DeviceWrite, Stream};
use ferrocuda_kernels_device::attention::{AttentionShape, LAYOUT_BHSD, LAYOUT_BSHD, MMA_MAX_HEAD_DIM, MMA_ROWS, MMA_WARPS};
use ferrocuda_kernels_device::attention_backward::{BWD_BLOCK, BWD_THREADS};

use crate::error::{expect_at_least, expect_len, unsupported};
use crate::launchers::Launchers;
use crate::{Element, Result, len_of, warp_per_row};

pub use crate::hopper::{
    backward_scratch_len_sm90, hopper_backward_kernel, hopper_backward_kernels, hopper_backward_trial_kernel, hopper_backward_trial_kernels,
    hopper_forward_instances, hopper_kernel, hopper_kernels,
};

/// Where the heads sit in memory (the head dimension is contiguous in both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Layout {
    /// `[batch, heads, seq, head_dim]`.
    #[default]
    Bhsd,
    /// `[batch, seq, heads, head_dim]`.
    Bshd,
}

/// The shape of an attention call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attention {
    /// Batch size.
    pub batch: usize,
    /// Query heads (a multiple of `heads_kv`).
    pub heads_q: usize,
    /// Key/value heads.
    pub heads_kv: usize,
    /// Query positions.
    pub seq_q: usize,
    /// Key/value positions.
    pub seq_kv: usize,
    /// Elements per head: a multiple of 32, at most 256.
    pub head_dim: usize,
    /// Memory layout of every tensor.
    pub layout: Layout,
    /// Query `i` sees keys `0..=i` only.
    pub causal: bool,
    /// Score scale; `None` is `1 / sqrt(head_dim)`.
    pub scale: Option<f32>,
}

impl Attention {
    /// Elements of `Q` (and `O`, `dO`, `dQ`).
    pub fn q_len(&self) -> usize {
        self.batch * self.heads_q * self.seq_q * self.head_dim
    }

    /// Elements of `K` (and `V`, `dK`, `dV`).
    pub fn kv_len(&self) -> usize {
        self.batch * self.heads_kv * self.seq_kv * self.head_dim
    }

    /// Rows of `O`: the length of `lse`.
    pub fn q_rows(&self) -> usize {
        self.batch * self.heads_q * self.seq_q
    }

    /// Rows of `K`.
    pub fn kv_rows(&self) -> usize {
        self.batch * self.heads_kv * self.seq_kv
    }

    /// The kernels' shape; refuses what they do not support.
    pub(crate) fn check(&self) -> Result<(u32, AttentionShape)> {
        let u = |name: &'static str, v: usize| u32::try_from(v).map_err(|_| unsupported(name, v, "at most u32::MAX"));
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(32) || self.head_dim > 256 {
            return Err(unsupported("head_dim", self.head_dim, "a multiple of 32 up to 256 (64, 128 and 256 are the usual)"));
        }
        if self.heads_kv == 0 || !self.heads_q.is_multiple_of(self.heads_kv) {
            return Err(unsupported("heads_kv", self.heads_kv, format!("a divisor of heads_q {} (grouped-query attention)", self.heads_q)));
        }
        // A warp per row: rows * 32 threads must fit the launch's u32 thread count.
        let too_big = |n: Option<usize>| n.filter(|&r| r < (1 << 26)).is_none();
        let q_rows = self.batch.checked_mul(self.heads_q).and_then(|r| r.checked_mul(self.seq_q));
        let kv_rows = self.batch.checked_mul(self.heads_kv).and_then(|r| r.checked_mul(self.seq_kv));
        if too_big(q_rows) || too_big(kv_rows) {
            return Err(unsupported("batch", self.batch, "batch x heads x seq must stay below 2^26 rows per call (one warp each)"));
        }
        let scale = self.scale.unwrap_or(1.0 / (self.head_dim as f32).sqrt());
        let shape = AttentionShape {
            batch: u("batch", self.batch)?,
            heads_q: u("heads_q", self.heads_q)?,
            heads_kv: u("heads_kv", self.heads_kv)?,
            seq_q: u("seq_q", self.seq_q)?,
            seq_kv: u("seq_kv", self.seq_kv)?,
            layout: match self.layout {
                Layout::Bhsd => LAYOUT_BHSD,
                Layout::Bshd => LAYOUT_BSHD,
            },
            causal: self.causal as u32,
            scale,
        };
        Ok((self.head_dim as u32, shape))
    }

    /// [`check`](Self::check), then the forward's operands against the shape, in this order:
    /// `q` and `out` hold [`q_len`](Self::q_len) elements, `k` and `v`
    /// [`kv_len`](Self::kv_len), `lse` one per row of `out`. `lens` are their lengths as
    /// `[q, k, v, out, lse]`. Every forward (the GPU's, the sm_90 instances', the CPU
    /// executor's) checks through here, so they refuse the same calls with the same errors.
    pub(crate) fn check_forward(&self, lens: [usize; 5]) -> Result<(u32, AttentionShape)> {
        let checked = self.check()?;
        let [q, k, v, out, lse] = lens;
        self.q("q", q)?;
        self.kv("k", k)?;
        self.kv("v", v)?;
        self.q("out", out)?;
        self.lse("lse", lse)?;
        Ok(checked)
    }

    pub(crate) fn q(&self, operand: &'static str, got: usize) -> Result<()> {
        expect_len(operand, got, self.q_len(), || {
            format!("batch {} x heads_q {} x seq_q {} x head_dim {}", self.batch, self.heads_q, self.seq_q, self.head_dim)
        })
    }

    pub(crate) fn kv(&self, operand: &'static str, got: usize) -> Result<()> {
        expect_len(operand, got, self.kv_len(), || {
            format!("batch {} x heads_kv {} x seq_kv {} x head_dim {}", self.batch, self.heads_kv, self.seq_kv, self.head_dim)
        })
    }

    pub(crate) fn lse(&self, operand: &'static str, got: usize) -> Result<()> {
        expect_len(operand, got, self.q_rows(), || format!("one f32 per row of O: batch {} x heads_q {} x seq_q {}", self.batch, self.heads_q, self.seq_q))
    }
}

/// True when [`attention_forward`] runs this shape on the tensor cores (`mma.sync`, sm_80+):
/// `bf16` or `f16`, [`Layout::Bhsd`], `seq_q` a multiple of 16, `head_dim` a multiple of 16
/// up to 128. Every other shape takes the portable path (the backward has its own rule:
/// [`backward_uses_tensor_cores`]).
pub fn uses_tensor_cores<T: Element>(shape: &Attention) -> bool {
    T::TENSOR_CORES
        && shape.layout == Layout::Bhsd
        && shape.seq_q.is_multiple_of(MMA_ROWS as usize)
        && shape.head_dim.is_multiple_of(16)
        && shape.head_dim <= MMA_MAX_HEAD_DIM as usize
}

/// The launch of the tensor-core forward: a warp per 16 query rows, 4 warps per block.
pub(crate) fn mma_config(shape: &Attention) -> ferrocuda_host::LaunchConfig {
    let warps = shape.q_rows() / MMA_ROWS as usize;
    ferrocuda_host::LaunchConfig::new(warps.div_ceil(MMA_WARPS as usize) as u32, 32 * MMA_WARPS)
}

/// Attention forward: `out = softmax(scale * q kᵀ [causal mask]) v` and `lse` (f32, one per
/// row of `out`: `log(sum(exp(scores)))`, for [`attention_backward`]).
#[allow(clippy::too_many_arguments)]
pub fn attention_forward<T: Element>(
    stream: &Stream,
    q: &(impl DeviceRead<T> + ?Sized),
    k: &(impl DeviceRead<T> + ?Sized),
    v: &(impl DeviceRead<T> + ?Sized),
    out: &mut (impl DeviceWrite<T> + ?Sized),
    lse: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Attention,
) -> Result<()> {
    let (head_dim, kernel_shape) = shape.check_forward([len_of(q), len_of(k), len_of(v), len_of(out), len_of(lse)])?;
    if shape.q_rows() == 0 {
        return Ok(());
    }
    if T::HOPPER {
        let arch = stream.context().device().arch()?;
        if let Some(kernel) = hopper_kernel::<T>(&shape, arch)
            && crate::hopper::attention_forward(stream, kernel, q, k, v, out, lse, shape)?
        {
            return Ok(());
        }
    }
    if uses_tensor_cores::<T>(&shape) {
        let config = mma_config(&shape);
        return Ok(<T as Launchers>::attention_forward_mma(stream, config, q, k, v, out, lse, MMA_ROWS * head_dim, head_dim, kernel_shape)?);
    }
    Ok(<T as Launchers>::attention_forward(stream, warp_per_row(shape.q_rows()), q, k, v, out, lse, head_dim, kernel_shape)?)
}

/// [`attention_forward`] on the sm_90 kernel instance `kernel` (one of
/// [`hopper_forward_instances`]`(shape, arch)`: the one the call picks, its persistent or
/// one-tile-per-block twin ([`hopper_kernels`]) and the other schedules of the same head
/// dimension and mask), for benchmarks and tests that compare the instances. Refuses
/// another name, another GPU, or inputs that kernel cannot take (Q, K, V not 16-byte aligned,
/// a capturing stream) instead of falling back.
#[allow(clippy::too_many_arguments)]
pub fn attention_forward_sm90<T: Element>(
    stream: &Stream,
    kernel: &str,
    q: &(impl DeviceRead<T> + ?Sized),
    k: &(impl DeviceRead<T> + ?Sized),
    v: &(impl DeviceRead<T> + ?Sized),
    out: &mut (impl DeviceWrite<T> + ?Sized),
    lse: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Attention,
) -> Result<()> {
    shape.check_forward([len_of(q), len_of(k), len_of(v), len_of(out), len_of(lse)])?;
    let arch = stream.context().device().arch()?;
    let names = hopper_forward_instances::<T>(&shape, arch);
    let Some(&kernel) = names.iter().find(|&&name| name == kernel) else {
        return Err(unsupported("kernel", kernel, format!("one of the sm_90 forward's instances for this shape on sm_{arch}: {names:?}")));
    };
    if crate::hopper::attention_forward(stream, kernel, q, k, v, out, lse, shape)? {
        Ok(())
    } else {
        Err(unsupported("q", "a misaligned view or a capturing stream", "16-byte aligned inputs on a stream that is not being captured"))
    }
}

/// True when [`attention_backward`] runs this shape on the tensor cores (`mma.sync
/// m16n8k16`, sm_80+): `bf16` or `f16` with `head_dim` 64 or 128, in either layout, any
/// sequence lengths, causal or not, grouped-query heads. Every other shape takes the portable
/// path.
pub fn backward_uses_tensor_cores<T: Element>(shape: &Attention) -> bool {
    T::TENSOR_CORES && matches!(shape.head_dim, 64 | 128)
}

/// The launches of the tensor-core backward: (dK/dV, dQ), a block of [`BWD_THREADS`] per 64
/// rows of each (batch, head).
pub(crate) fn backward_mma_configs(shape: &Attention) -> (ferrocuda_host::LaunchConfig, ferrocuda_host::LaunchConfig) {
    let blocks = |seq: usize, heads: usize| (seq.div_ceil(BWD_BLOCK as usize) * shape.batch * heads) as u32;
    (
        ferrocuda_host::LaunchConfig::new(blocks(shape.seq_kv, shape.heads_kv), BWD_THREADS),
        ferrocuda_host::LaunchConfig::new(blocks(shape.seq_q, shape.heads_q), BWD_THREADS),
    )
}

/// The operands of an attention backward: what the forward read (`q`, `k`, `v`) and wrote
/// (`out`, `lse`), the gradient of its output (`dout`), and the three gradients the call writes
/// (`dq`, `dk`, `dv`). One struct for both sides: [`Backward`] holds device buffers or views,
/// for [`attention_backward`] and its variants; [`cpu::Backward`](crate::cpu::Backward) holds
/// host slices, for their twins on the CPU executor. Every call checks each length against the
/// [`Attention`] shape first and names the operand that is off.
///
/// ```no_run
/// use ferrocuda_host::{Context, DeviceBuffer, Stream};
/// use ferrocuda_kernels::attention::{self, Attention, Backward, Layout};
/// use ferrocuda_kernels::bf16;
/// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
/// let context = Context::primary(0)?;
/// let stream = Stream::new(&context)?;
/// let shape = Attention { batch: 1, heads_q: 8, heads_kv: 8, seq_q: 512, seq_kv: 512, head_dim: 64, layout: Layout::Bhsd, causal: true, scale: None };
/// let (q, k, v) = (DeviceBuffer::<bf16>::zeroed(&context, shape.q_len())?, DeviceBuffer::<bf16>::zeroed(&context, shape.kv_len())?, DeviceBuffer::<bf16>::zeroed(&context, shape.kv_len())?);
/// let (mut out, mut lse) = (DeviceBuffer::<bf16>::zeroed(&context, shape.q_len())?, DeviceBuffer::<f32>::zeroed(&context, shape.q_rows())?);
/// attention::attention_forward(&stream, &q, &k, &v, &mut out, &mut lse, shape)?;
/// let dout = DeviceBuffer::<bf16>::zeroed(&context, shape.q_len())?;
/// let mut dq = DeviceBuffer::<bf16>::zeroed(&context, shape.q_len())?;
/// let (mut dk, mut dv) = (DeviceBuffer::<bf16>::zeroed(&context, shape.kv_len())?, DeviceBuffer::<bf16>::zeroed(&context, shape.kv_len())?);
/// let gradients = Backward { q: &q, k: &k, v: &v, out: &out, dout: &dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv };
/// attention::attention_backward(&stream, gradients, shape)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct AttentionBackward<In, Stats, Out> {
    /// Queries, `[B, Hq, Sq, D]` (or `[B, Sq, Hq, D]`): [`Attention::q_len`] elements.
    pub q: In,
    /// Keys: [`Attention::kv_len`] elements.
    pub k: In,
    /// Values: [`Attention::kv_len`] elements.
    pub v: In,
    /// The forward's output `O`, like `q`.
    pub out: In,
    /// The gradient of the loss with respect to `out` (`dO`), like `q`.
    pub dout: In,
    /// The forward's log-sum-exp, one `f32` per row of `out` ([`Attention::q_rows`]).
    pub lse: Stats,
    /// Written: the gradient with respect to `q`.
    pub dq: Out,
    /// Written: the gradient with respect to `k`.
    pub dk: Out,
    /// Written: the gradient with respect to `v`.
    pub dv: Out,
}

/// The operands of the GPU backward calls: device buffers or views (`&buffer`,
/// `&buffer.slice(a..b)`; the gradients `&mut`).
pub type Backward<'a, T> = AttentionBackward<&'a dyn DeviceRead<T>, &'a dyn DeviceRead<f32>, &'a mut dyn DeviceWrite<T>>;

impl<In, Stats, Out> AttentionBackward<In, Stats, Out> {
    /// Checks every operand's length (given by `len`, `stats_len`, `out_len`) against `shape`,
    /// naming the first that is off.
    pub(crate) fn check_lengths(
        &self,
        shape: &Attention,
        len: impl Fn(&In) -> usize,
        stats_len: impl Fn(&Stats) -> usize,
        out_len: impl Fn(&Out) -> usize,
    ) -> Result<()> {
        for (name, x) in [("q", &self.q), ("out", &self.out), ("dout", &self.dout)] {
            shape.q(name, len(x))?;
        }
        for (name, x) in [("k", &self.k), ("v", &self.v)] {
            shape.kv(name, len(x))?;
        }
        shape.lse("lse", stats_len(&self.lse))?;
        shape.q("dq", out_len(&self.dq))?;
        shape.kv("dk", out_len(&self.dk))?;
        shape.kv("dv", out_len(&self.dv))
    }
}

impl<T> Backward<'_, T> {
    /// [`AttentionBackward::check_lengths`] on device memory.
    fn check(&self, shape: &Attention) -> Result<()> {
        self.check_lengths(shape, |x| len_of(*x), |x| len_of(*x), |x| len_of(&**x))
    }
}

/// Attention backward: `dq`, `dk`, `dv` from `dout` and the forward's `out` and `lse`
/// ([`Backward`]), with an `f32` scratch buffer allocated on `stream`
/// ([`attention_backward_with_scratch`] takes the caller's).
///
/// Paths (module docs): on sm_90, for `bf16`/`f16` with `head_dim` 64 or 128
/// ([`hopper_backward_kernel`]), the `wgmma` kernel of `ferrocuda-kernels-hopper` (launches:
/// the padded `lse`/`delta` rows, its tensor maps, the kernel, dQ's conversion; scratch
/// [`backward_scratch_len_sm90`] `f32`). It accumulates dQ with atomic adds, so dQ's last bits may differ
/// between two calls on the same inputs (dK and dV do not); [`attention_backward_deterministic`]
/// never takes it. Otherwise, for `bf16`/`f16` with `head_dim` 64 or 128
/// ([`backward_uses_tensor_cores`]), three launches on the tensor cores of any sm_80+ GPU
/// (`delta`, then dK and dV with a block per 64 keys, then dQ with a block per 64 queries;
/// FlashAttention-2's backward without atomics); otherwise two launches of the portable path
/// (dQ with `delta`, then dK and dV).
pub fn attention_backward<T: Element>(stream: &Stream, operands: Backward<'_, T>, shape: Attention) -> Result<()> {
    shape.check()?;
    // Every operand first, so that a refused call allocates nothing (audit 2026-11-27f F12-4:
    // inside a capture the allocation's refusal hid the operand at fault).
    operands.check(&shape)?;
    // The sm_90 kernel allocates its own (zeroed) scratch when this one is too short for it.
    let mut scratch = DeviceBuffer::<f32>::zeroed_async(stream, backward_scratch_len(&shape))?;
    // The scratch is freed on return: no capture may record the launches that use it (S1).
    let _stretch = stream.hold_off_capture("attention_backward")?;
    attention_backward_with_scratch(stream, operands, &mut scratch, shape)
}

/// The least length of the `f32` scratch area of [`attention_backward_with_scratch`] for
/// `shape`: what the deterministic paths need (one value per row of `out`). The sm_90 kernel
/// runs on the caller's scratch when it is at least [`backward_scratch_len_sm90`] long (and
/// 128-byte aligned, as an allocation is).
pub fn backward_scratch_len(shape: &Attention) -> usize {
    shape.q_rows()
}

/// The length of the `f32` scratch area with which [`attention_backward_with_scratch`] takes
/// its fastest path on any GPU: the larger of [`backward_scratch_len`] and
/// [`backward_scratch_len_sm90`]. A call on it recorded into a CUDA graph keeps the sm_90
/// kernel (with a shorter scratch it falls back to the deterministic paths).
pub fn backward_scratch_len_fastest(shape: &Attention) -> usize {
    backward_scratch_len(shape).max(backward_scratch_len_sm90(shape))
}

/// [`attention_backward`] on the deterministic paths only (never the sm_90 kernel, whose dQ
/// is summed with atomic adds): the same inputs give the same gradients, bit for bit, on
/// every call (the `mma.sync` tensor-core path for `bf16`/`f16` with `head_dim` 64 or 128,
/// the portable path otherwise). Slower than [`attention_backward`] on sm_90.
pub fn attention_backward_deterministic<T: Element>(stream: &Stream, operands: Backward<'_, T>, shape: Attention) -> Result<()> {
    shape.check()?;
    // Every operand first (F12-4), then the allocation.
    operands.check(&shape)?;
    let mut scratch = DeviceBuffer::<f32>::zeroed_async(stream, backward_scratch_len(&shape))?;
    // As in `attention_backward` (S1).
    let _stretch = stream.hold_off_capture("attention_backward_deterministic")?;
    backward(stream, operands, &mut scratch, shape, false)
}

/// [`attention_backward`] on the sm_90 kernel instance `kernel` (one of
/// [`hopper_backward_kernels`]`(shape, arch)`, or one of the [`hopper_backward_trial_kernels`]), for
/// benchmarks and tests that compare the instances. Refuses another name, another GPU, or inputs that kernel cannot take (not
/// 16-byte aligned, a capturing stream) instead of falling back.
pub fn attention_backward_sm90<T: Element>(stream: &Stream, kernel: &str, mut operands: Backward<'_, T>, shape: Attention) -> Result<()> {
    shape.check()?;
    operands.check(&shape)?;
    let arch = stream.context().device().arch()?;
    let names = crate::hopper::backward_instances::<T>(&shape, arch);
    let Some(&kernel) = names.iter().flatten().find(|&&name| name == kernel) else {
        return Err(unsupported("kernel", kernel, format!("one of the sm_90 backward's instances for this shape on sm_{arch}: {names:?}")));
    };
    if crate::hopper::attention_backward(stream, kernel, &mut operands, None::<&mut DeviceBuffer<f32>>, shape)? {
        Ok(())
    } else {
        Err(unsupported("q", "a misaligned view or a capturing stream", "16-byte aligned inputs on a stream that is not being captured"))
    }
}

/// [`attention_backward`] with its `f32` scratch passed in (`scratch`, at least
/// [`backward_scratch_len`] long, contents ignored). On the `mma.sync` and portable paths it
/// allocates nothing else, and neither does the sm_90 kernel when `scratch` is at least
/// [`backward_scratch_len_sm90`] long and 128-byte aligned, so the call may be recorded into a
/// CUDA graph on memory its caller owns. With a shorter scratch the sm_90 kernel allocates its
/// own outside a capture, and a capturing stream takes the `mma.sync` path.
pub fn attention_backward_with_scratch<T: Element>(
    stream: &Stream,
    operands: Backward<'_, T>,
    scratch: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Attention,
) -> Result<()> {
    backward(stream, operands, scratch, shape, true)
}

/// The backward's checks and paths; `sm90` allows the sm_90 kernel.
fn backward<T: Element>(
    stream: &Stream,
    mut operands: Backward<'_, T>,
    scratch: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Attention,
    sm90: bool,
) -> Result<()> {
    let (head_dim, kernel_shape) = shape.check()?;
    expect_at_least("scratch", len_of(scratch), backward_scratch_len(&shape), || "backward_scratch_len: one f32 per row of O".into())?;
    operands.check(&shape)?;
    if sm90 && T::HOPPER_BACKWARD && shape.q_rows() > 0 && shape.kv_rows() > 0 {
        let arch = stream.context().device().arch()?;
        if let Some(kernel) = hopper_backward_kernel::<T>(&shape, arch)
            && crate::hopper::attention_backward(stream, kernel, &mut operands, Some(&mut *scratch), shape)?
        {
            return Ok(());
        }
    }
    let AttentionBackward { q, k, v, out, dout, lse, dq, dk, dv } = operands;
    // The tensor cores need queries (with none, the portable path below writes the zero
    // gradients of K and V). `delta` lives in the caller's scratch: nothing is allocated here,
    // so the call may be recorded into a CUDA graph (torch's ops capture it).
    // The first `q_rows` of the scratch (it may be longer: `backward_scratch_len_sm90`).
    let mut delta_rows = crate::hopper::Part::<f32>::of::<f32>(scratch.kernel_arg_mut(), 0, shape.q_rows());
    if backward_uses_tensor_cores::<T>(&shape) && shape.q_rows() > 0 {
        let delta = &mut delta_rows;
        let (dkv_config, dq_config) = backward_mma_configs(&shape);
        <T as Launchers>::attention_backward_delta(stream, warp_per_row(shape.q_rows()), out, dout, &mut *delta, head_dim)?;
        <T as Launchers>::attention_backward_dq_mma(stream, dq_config, q, k, v, dout, lse, &*delta, dq, head_dim, kernel_shape)?;
        if shape.kv_rows() > 0 {
            <T as Launchers>::attention_backward_dkv_mma(stream, dkv_config, q, k, v, dout, lse, &*delta, dk, dv, head_dim, kernel_shape)?;
        }
        return Ok(());
    }
    if shape.q_rows() > 0 {
        let delta = &mut delta_rows;
        <T as Launchers>::attention_backward_dq(stream, warp_per_row(shape.q_rows()), q, k, v, out, dout, lse, dq, delta, head_dim, kernel_shape)?;
        if shape.kv_rows() > 0 {
            <T as Launchers>::attention_backward_dkv(stream, warp_per_row(shape.kv_rows()), q, k, v, dout, lse, &*delta, dk, dv, head_dim, kernel_shape)?;
        }
    } else if shape.kv_rows() > 0 {
        // No queries: the kernel writes zero gradients for K and V (it reads neither table).
        <T as Launchers>::attention_backward_dkv(stream, warp_per_row(shape.kv_rows()), q, k, v, dout, lse, lse, dk, dv, head_dim, kernel_shape)?;
    }
    Ok(())
}
