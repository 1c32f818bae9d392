//! Kernels of an LLM training step (issue 23's "Speed" rows), written the way the device
//! library recommends, each with a CUDA C++ twin in `bench/cuda/reference_kernels.cu` written
//! the way a CUDA engineer writes it: a layer norm (one warp per row, 16-byte streaming
//! loads), an online softmax, an AdamW step, and a bf16 GELU (its twin, which needs
//! `cuda_bf16.h`, is `bench/cuda/gelu_bf16.cu`). `ferrocuda-bench` times them against the twins;
//! `tests/llm_examples.rs` checks them on the CPU executor (and a GPU when present).

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::cache::{self, Load, Store};
use ferrocuda_device::global::{DisjointSlice, PerWarpRow, unique_index, warp_row};
use ferrocuda_device::half::Bf16x2;
// `DeviceFloat` gives `sqrt`/`mul_add` on the GPU; the host has `std`'s.
#[cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]
use ferrocuda_device::math::DeviceFloat;
use ferrocuda_device::math::FastMath;
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::{kernel, warp};

use crate::examples::Float4;

/// Channels of a [`layernorm_768()`] row (GPT-2 small's width).
pub const LAYERNORM_C: usize = 768;
/// `float4`s per [`layernorm_768()`] row: the row width of its output.
pub const LAYERNORM_ROW_VECTORS: u32 = (LAYERNORM_C / 4) as u32;
/// `float4`s each lane of a row's warp holds.
pub(crate) const LN_V: usize = LAYERNORM_C / 4 / 32;

/// Layer norm of a row-major `rows x 768` matrix, as llm.c's `layernorm_forward` (kernel 3):
/// one warp per row, the row held in registers (six `float4`s per lane, read once with
/// streaming loads), mean and variance by warp shuffles, `out = (x - mean) * rstd * weight +
/// bias` written with streaming stores, and `mean[row]`, `rstd[row]` for the backward pass.
/// Launch with 1-D blocks of whole warps (256 threads: 8 rows per block) and
/// `ceil(rows / warps per block)` blocks.
#[kernel(cols(out = LAYERNORM_ROW_VECTORS, mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_768(
    input: &[Float4],
    weight: &[Float4],
    bias: &[Float4],
    mut out: PerWarpRow<Float4>,
    mut mean: PerWarpRow<f32>,
    mut rstd: PerWarpRow<f32>,
    rows: u32,
) {
    const ROW_VECTORS: usize = LAYERNORM_ROW_VECTORS as usize;
    // Warp w owns row w of `out` (lane l its vectors l + 32 v) and of the one-column `mean`
    // and `rstd` (lane 0 alone has column 0): the launchers checked a 1-D launch of whole
    // warps. Every check below is uniform across the warp, so the shuffles see all lanes.
    let me = warp_row();
    if me.row() >= rows {
        return;
    }
    let start = me.row() as usize * ROW_VECTORS;
    let (Some(x_row), Some(weight), Some(bias), Some(mut out_row)) =
        (input.get(start..start + ROW_VECTORS), weight.get(..ROW_VECTORS), bias.get(..ROW_VECTORS), out.row_mut(me))
    else {
        return;
    };
    let lane = me.lane() as usize;
    // Every loop over the row's six vectors is unrolled (`unroll`), so `x` stays in registers
    // (a loop LLVM leaves rolled indexes it at run time and puts it in local memory). The
    // indices `lane + 32 v < 192` are in bounds of the 192-vector slices by construction.
    let mut x = [Float4::default(); LN_V];
    let mut sum = 0.0f32;
    unroll::<LN_V>(|v| {
        x[v] = cache::load(&x_row[lane + 32 * v], Load::Streaming);
        sum += (x[v].x + x[v].y) + (x[v].z + x[v].w);
    });
    let (m, s) = mean_and_rstd(&x, sum);
    unroll::<LN_V>(|v| {
        let (c, value) = (lane + 32 * v, x[v]);
        let (w, b) = (weight[c], bias[c]);
        let normed =
            Float4 { x: (value.x - m) * s * w.x + b.x, y: (value.y - m) * s * w.y + b.y, z: (value.z - m) * s * w.z + b.z, w: (value.w - m) * s * w.w + b.w };
        if let Some(element) = out_row.get_mut(v) {
            cache::store(element, normed, Store::Streaming);
        }
    });
    if let Some(mut mean_row) = mean.row_mut(me)
        && let Some(element) = mean_row.get_mut(0)
    {
        cache::store(element, m, Store::Streaming);
    }
    if let Some(mut rstd_row) = rstd.row_mut(me)
        && let Some(element) = rstd_row.get_mut(0)
    {
        cache::store(element, s, Store::Streaming);
    }
}

/// Row-wise softmax of a row-major `rows x cols` matrix (`cols` a multiple of 4, given as
/// `cols4 = cols / 4`) with the online algorithm: one warp per row reads the row once keeping
/// a running maximum and a sum rescaled when the maximum grows, combines the 32 lanes'
/// (maximum, sum) pairs by shuffles, then reads the row again to write `exp(x - max) / sum`
/// (a second read that L2 serves for rows up to a few hundred KiB). `exp` is `ex2.approx`
/// (CUDA's `__expf`). Launch like [`layernorm_768()`].
#[kernel(cols(output = cols4))]
pub fn softmax_online(input: &[Float4], mut output: PerWarpRow<Float4>, rows: u32, cols4: u32) {
    // Warp w owns row w, lane l its vectors l, l + 32, ... (1-D launch of whole warps,
    // checked by the launchers); the checks are uniform across the warp.
    let me = warp_row();
    if me.row() >= rows {
        return;
    }
    let lane = me.lane() as usize;
    // The row as its own slice, read with a strided iterator: pointer increments, no index
    // arithmetic or bounds checks.
    let start = me.row() as usize * cols4 as usize;
    let (Some(row_in), Some(row_out)) = (input.get(start..start + cols4 as usize), output.row_mut(me)) else { return };
    let (max, sum) = online_max_and_sum(row_in, lane);
    let scale = 1.0 / sum;
    // The lane's output vectors beside its input vectors (the same columns), one bound.
    for (v, y) in row_out.zip_input(row_in) {
        let v = cache::load(v, Load::Streaming);
        let value = Float4 {
            x: (v.x - max).fast_exp() * scale,
            y: (v.y - max).fast_exp() * scale,
            z: (v.z - max).fast_exp() * scale,
            w: (v.w - max).fast_exp() * scale,
        };
        cache::store(y, value, Store::Streaming);
    }
}

/// Layer norm's mean and `1 / sqrt(variance + 1e-5)` of the row a warp holds: `x` is this
/// lane's six vectors of it and `sum` the sum of their elements; both reductions are warp
/// shuffles. Shared with the benchmark's `unsafe` twin, so that the two kernels differ only in
/// how they reach memory.
#[inline(always)]
pub(crate) fn mean_and_rstd(x: &[Float4; LN_V], sum: f32) -> (f32, f32) {
    let m = warp::reduce_sum(sum) * (1.0 / LAYERNORM_C as f32);
    let mut squares = 0.0f32;
    unroll::<LN_V>(|v| {
        let (a, b, c, d) = (x[v].x - m, x[v].y - m, x[v].z - m, x[v].w - m);
        squares += (a * a + b * b) + (c * c + d * d);
    });
    (m, (warp::reduce_sum(squares) * (1.0 / LAYERNORM_C as f32) + 1e-5).fast_rsqrt())
}

/// The online softmax's statistics of the row a warp holds: its maximum and `sum(exp(x -
/// max))`, kept by each lane over its vectors `lane, lane + 32, ...` of `row` (the sum
/// rescaled when the maximum grows), then combined over the warp by shuffles. Shared with the
/// benchmark's `unsafe` twin, like [`mean_and_rstd`].
#[inline(always)]
pub(crate) fn online_max_and_sum(row: &[Float4], lane: usize) -> (f32, f32) {
    // A finite start: a lane that sees no element (cols4 < 32) combines as (MIN, 0) without
    // the NaN of -inf - -inf.
    let (mut max, mut sum) = (f32::MIN, 0.0f32);
    for &v in row.iter().skip(lane).step_by(32) {
        let block_max = v.x.max(v.y).max(v.z.max(v.w));
        if block_max > max {
            sum *= (max - block_max).fast_exp();
            max = block_max;
        }
        sum += ((v.x - max).fast_exp() + (v.y - max).fast_exp()) + ((v.z - max).fast_exp() + (v.w - max).fast_exp());
    }
    let mut mask = warp::WARP_SIZE / 2;
    while mask > 0 {
        let (other_max, other_sum) = (warp::shuffle_xor(max, mask), warp::shuffle_xor(sum, mask));
        let new_max = max.max(other_max);
        sum = sum * (max - new_max).fast_exp() + other_sum * (other_max - new_max).fast_exp();
        max = new_max;
        mask /= 2;
    }
    (max, sum)
}

/// AdamW's hyperparameters for one step (passed by value).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct AdamW {
    /// Learning rate.
    pub learning_rate: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// `1 - beta1^t`.
    pub beta1_correction: f32,
    /// `1 - beta2^t`.
    pub beta2_correction: f32,
    /// Added to the denominator.
    pub eps: f32,
    /// Decoupled weight decay.
    pub weight_decay: f32,
}

/// `a + weight * (b - a)` as two fused multiply-adds (CUDA's `lerp` in llm.c).
#[inline(always)]
fn lerp(a: f32, b: f32, weight: f32) -> f32 {
    weight.mul_add(b, (-weight).mul_add(a, a))
}

/// One AdamW step over every parameter, as llm.c's `adamw_kernel2`: `m` and `v` are the
/// moments (updated in place), `params` the weights. One element per thread.
#[kernel]
pub fn adamw_step(mut params: DisjointSlice<f32>, grads: &[f32], mut m: DisjointSlice<f32>, mut v: DisjointSlice<f32>, hp: AdamW) {
    let i = unique_index();
    let (Some(p), Some(m_i), Some(v_i), Some(&g)) = (params.get_mut(i), m.get_mut(i), v.get_mut(i), grads.get(i.get())) else {
        return;
    };
    let mean = lerp(g, *m_i, hp.beta1);
    *m_i = mean;
    let var = lerp(g * g, *v_i, hp.beta2);
    *v_i = var;
    let (mean, var) = (mean / hp.beta1_correction, var / hp.beta2_correction);
    *p -= hp.learning_rate * (mean / (var.sqrt() + hp.eps) + hp.weight_decay * *p);
}

/// Eight bf16 in 16 bytes (CUDA's `x128` of llm.c: four `__nv_bfloat162` in a `uint4`), so a
/// thread moves them with one `ld.global.v4`/`st.global.v4`. Element `2k` is `pairs[k].lo()`.
#[repr(C, align(16))]
#[derive(Clone, Copy, Default, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct Bf16x8 {
    /// The four pairs, in memory order.
    pub pairs: [Bf16x2; 4],
}

/// `sqrt(2 / pi)`, GPT-2's GELU scaling factor.
pub const GELU_SCALING_FACTOR: f32 = 0.797_884_6;

/// GPT-2's GELU (the tanh approximation of llm.c's `gelu_forward`):
/// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, as three FMAs, two multiplies and
/// `tanh.approx.f32`.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    let u = x * (0.044_715 * GELU_SCALING_FACTOR).mul_add(x * x, GELU_SCALING_FACTOR);
    let half = 0.5 * x;
    half.mul_add(u.fast_tanh(), half)
}

/// GELU of a bf16 tensor, as llm.c's `gelu_forward_kernel2` with `floatX = bf16`: eight
/// values per thread in one 16-byte streaming load ([`Bf16x8`]), widened to f32 in pairs
/// ([`Bf16x2::to_f32s`]: two shifts), [`gelu`] in f32, rounded back two at a time
/// ([`Bf16x2::from_f32s`]: one `cvt.rn.bf16x2.f32`), one 16-byte store. Written in the safe
/// style: a [`unique_index`] witness, `get` and `get_mut` (one bounds check each, both out of
/// the loop), no `unsafe`. Launch with one thread per `Bf16x8`, any 1-D configuration.
#[kernel]
pub fn gelu_bf16(input: &[Bf16x8], mut out: DisjointSlice<Bf16x8>) {
    let i = unique_index();
    let (Some(x), Some(y)) = (input.get(i.get()), out.get_mut(i)) else {
        return;
    };
    let x = cache::load(x, Load::Streaming);
    let mut result = Bf16x8::default();
    unroll::<4>(|k| {
        let (a, b) = x.pairs[k].to_f32s();
        result.pairs[k] = Bf16x2::from_f32s(gelu(a), gelu(b));
    });
    *y = result;
}
