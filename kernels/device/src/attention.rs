//! Attention, forward and backward: the portable path (any GPU from sm_80, and the CPU
//! executor). One warp per output row: lane `l` holds columns `l + 32 j` of the row's vectors
//! in registers (head dimensions that are multiples of 32, up to 256), every score is a warp
//! dot product, and the forward is the online softmax of FlashAttention (no `S x S` matrix is
//! stored). The backward recomputes the probabilities from the forward's log-sum-exp: one
//! kernel writes `dQ` (a warp per query row, and `delta = rowsum(dO * O)`), a second `dK` and
//! `dV` (a warp per key row, summing over the query heads of its group), so no output element
//! has two writers and the results are deterministic.
//!
//! It is correct for every shape the host accepts and much slower than a tiled tensor-core
//! kernel (no reuse of `K`/`V` between query rows beyond the caches).

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::global::{PerWarpRow, warp_row};
// `DeviceFloat` gives `exp`/`ln` on the GPU; the host has `std`'s.
#[cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]
use ferrocuda_device::math::DeviceFloat;
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::{kernel, warp};

use ferrocuda_device::half::F32ToHalf;

use crate::{Float, bf16, f16, write_row_value};

/// Most values of a row one lane holds: head dimension 256 / 32 lanes.
const LANE_VALUES: usize = 8;

/// Memory layout of `Q`, `K`, `V`, `O` and their gradients: the head dimension is contiguous
/// in both.
pub const LAYOUT_BHSD: u32 = 0;
/// `[batch, seq, heads, head_dim]` (the layout of a projection's output reshaped).
pub const LAYOUT_BSHD: u32 = 1;

/// The shape of an attention call (by value); the host checks it before launching.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct AttentionShape {
    /// Batch size.
    pub batch: u32,
    /// Query heads (a multiple of `heads_kv`).
    pub heads_q: u32,
    /// Key/value heads (grouped-query attention when fewer than `heads_q`).
    pub heads_kv: u32,
    /// Query positions.
    pub seq_q: u32,
    /// Key/value positions.
    pub seq_kv: u32,
    /// [`LAYOUT_BHSD`] or [`LAYOUT_BSHD`].
    pub layout: u32,
    /// 1: query `i` sees keys `0..=i` (PyTorch's `is_causal`, top-left aligned).
    pub causal: u32,
    /// Multiplies the scores (usually `1 / sqrt(head_dim)`).
    pub scale: f32,
}

impl AttentionShape {
    /// Query heads per key/value head.
    #[inline(always)]
    fn group(&self) -> u64 {
        (self.heads_q as u64).checked_div(self.heads_kv as u64).unwrap_or(1)
    }

    /// `(batch, head, position)` of row `row` of a tensor with `heads` heads and `seq`
    /// positions in this layout.
    #[inline(always)]
    fn decode(&self, row: u64, heads: u32, seq: u32) -> (u64, u64, u64) {
        let (heads, seq) = (heads as u64, seq as u64);
        if self.layout == LAYOUT_BSHD {
            let h = row.checked_rem(heads).unwrap_or(0);
            let rest = row.checked_div(heads).unwrap_or(0);
            (rest.checked_div(seq).unwrap_or(0), h, rest.checked_rem(seq).unwrap_or(0))
        } else {
            let s = row.checked_rem(seq).unwrap_or(0);
            let rest = row.checked_div(seq).unwrap_or(0);
            (rest.checked_div(heads).unwrap_or(0), rest.checked_rem(heads).unwrap_or(0), s)
        }
    }

    /// The row of `(b, h, s)` in a tensor with `heads` heads and `seq` positions.
    #[inline(always)]
    pub(crate) fn row(&self, b: u64, h: u64, s: u64, heads: u32, seq: u32) -> u64 {
        let (heads, seq) = (heads as u64, seq as u64);
        if self.layout == LAYOUT_BSHD { (b * seq + s) * heads + h } else { (b * heads + h) * seq + s }
    }

    /// Keys query `i` sees.
    #[inline(always)]
    fn keys_for(&self, i: u64) -> u64 {
        if self.causal != 0 { (i + 1).min(self.seq_kv as u64) } else { self.seq_kv as u64 }
    }
}

/// Row `row` (of `dim` elements) of `x`, if inside.
#[inline(always)]
fn row_at<T>(x: &[T], row: u64, dim: u32) -> Option<&[T]> {
    let start = usize::try_from(row * dim as u64).ok()?;
    x.get(start..start.checked_add(dim as usize)?)
}

/// This lane's values of a row (columns `lane + 32 j`, `j < per_lane`), times `scale`.
#[inline(always)]
pub(crate) fn load_lane<T: Float>(row: &[T], lane: usize, per_lane: usize, scale: f32) -> [f32; LANE_VALUES] {
    let mut out = [0.0f32; LANE_VALUES];
    unroll::<LANE_VALUES>(|j| {
        if j < per_lane
            && let Some(v) = row.get(lane + 32 * j)
        {
            out[j] = v.to_f32() * scale;
        }
    });
    out
}

/// Keys (or queries, in the dK/dV kernel) handled together: their rows are loaded before any
/// is used and their dot products reduced together, so loads and shuffles overlap.
const GROUP: usize = 4;

/// This lane's part of the dot product of two rows the warp holds.
#[inline(always)]
fn partial_dot(a: &[f32; LANE_VALUES], b: &[f32; LANE_VALUES]) -> f32 {
    let mut sum = 0.0f32;
    unroll::<LANE_VALUES>(|j| sum += a[j] * b[j]);
    sum
}

/// Sums each of `N` values over the warp (every lane gets the sums); the `N` butterflies are
/// interleaved, so their shuffles are in flight together.
#[inline(always)]
fn reduce_many<const N: usize>(values: &mut [f32; N])
where
    ferrocuda_device::unroll::Const<N>: ferrocuda_device::unroll::Unrolled,
{
    let mut mask = 16;
    while mask > 0 {
        unroll::<N>(|u| values[u] += warp::shuffle_xor(values[u], mask));
        mask /= 2;
    }
}

/// The dot product of two rows the warp holds, in every lane.
#[inline(always)]
pub(crate) fn dot(a: &[f32; LANE_VALUES], b: &[f32; LANE_VALUES]) -> f32 {
    let mut sum = [partial_dot(a, b)];
    reduce_many(&mut sum);
    sum[0]
}

/// Writes this lane's values of a row the warp holds into `out`'s row (times `scale`).
#[inline(always)]
fn store_lane<T: Float>(out: &mut PerWarpRow<T>, me: ferrocuda_device::global::WarpRow, values: &[f32; LANE_VALUES], per_lane: usize, scale: f32) {
    if let Some(mut row) = out.row_mut(me) {
        unroll::<LANE_VALUES>(|j| {
            if j < per_lane
                && let Some(o) = row.get_mut(j)
            {
                *o = T::from_f32(values[j] * scale);
            }
        });
    }
}

/// Attention forward: `O = softmax(scale * Q K^T [masked]) V` for every (batch, query head),
/// with key/value head `h / (heads_q / heads_kv)`, and `lse[row] = log(sum(exp(scores)))` for
/// the backward pass, one `f32` per row of `O` in `O`'s row order. A warp per row of `O`;
/// `head_dim` a multiple of 32 up to 256.
#[kernel(instances(f32, bf16, f16), cols(out = head_dim, lse = 1))]
#[allow(clippy::too_many_arguments)]
pub fn attention_forward<T: Float>(q: &[T], k: &[T], v: &[T], mut out: PerWarpRow<T>, mut lse: PerWarpRow<f32>, head_dim: u32, shape: AttentionShape) {
    let me = warp_row();
    let r = me.row() as u64;
    if r >= shape.batch as u64 * shape.heads_q as u64 * shape.seq_q as u64 {
        return;
    }
    let (lane, per_lane) = (me.lane() as usize, (head_dim / 32) as usize);
    let (b, h, i) = shape.decode(r, shape.heads_q, shape.seq_q);
    let hk = h.checked_div(shape.group()).unwrap_or(0);
    let Some(q_row) = row_at(q, r, head_dim) else { return };
    let qv = load_lane(q_row, lane, per_lane, shape.scale);
    let (mut max, mut sum, mut acc) = (f32::MIN, 0.0f32, [0.0f32; LANE_VALUES]);
    let keys = shape.keys_for(i);
    let mut j0 = 0;
    while j0 < keys {
        // GROUP keys at once: all their K and V rows requested before any is used.
        let (mut kv, mut vv) = ([[0.0f32; LANE_VALUES]; GROUP], [[0.0f32; LANE_VALUES]; GROUP]);
        let mut valid = [false; GROUP];
        unroll::<GROUP>(|u| {
            let kr = shape.row(b, hk, j0 + u as u64, shape.heads_kv, shape.seq_kv);
            if j0 + (u as u64) < keys
                && let (Some(k_row), Some(v_row)) = (row_at(k, kr, head_dim), row_at(v, kr, head_dim))
            {
                valid[u] = true;
                kv[u] = load_lane(k_row, lane, per_lane, 1.0);
                vv[u] = load_lane(v_row, lane, per_lane, 1.0);
            }
        });
        let mut s = [0.0f32; GROUP];
        unroll::<GROUP>(|u| s[u] = partial_dot(&qv, &kv[u]));
        reduce_many(&mut s);
        let mut new_max = max;
        unroll::<GROUP>(|u| {
            if valid[u] {
                new_max = new_max.max(s[u]);
            }
        });
        let correction = (max - new_max).exp();
        let mut p = [0.0f32; GROUP];
        unroll::<GROUP>(|u| p[u] = if valid[u] { (s[u] - new_max).exp() } else { 0.0 });
        sum = sum * correction + ((p[0] + p[1]) + (p[2] + p[3]));
        unroll::<LANE_VALUES>(|c| acc[c] = acc[c] * correction + ((p[0] * vv[0][c] + p[1] * vv[1][c]) + (p[2] * vv[2][c] + p[3] * vv[3][c])));
        max = new_max;
        j0 += GROUP as u64;
    }
    let inverse = if sum > 0.0 { 1.0 / sum } else { 0.0 };
    store_lane(&mut out, me, &acc, per_lane, inverse);
    write_row_value(&mut lse, me, if sum > 0.0 { max + sum.ln() } else { f32::NEG_INFINITY });
}

/// Attention backward, part 1: `dQ` (a warp per query row) and `delta[row] = rowsum(dO * O)`,
/// which part 2 reads. `lse` is the forward's.
#[kernel(instances(f32, bf16, f16), cols(dq = head_dim, delta = 1))]
#[allow(clippy::too_many_arguments)]
pub fn attention_backward_dq<T: Float>(
    q: &[T],
    k: &[T],
    v: &[T],
    out: &[T],
    dout: &[T],
    lse: &[f32],
    mut dq: PerWarpRow<T>,
    mut delta: PerWarpRow<f32>,
    head_dim: u32,
    shape: AttentionShape,
) {
    let me = warp_row();
    let r = me.row() as u64;
    if r >= shape.batch as u64 * shape.heads_q as u64 * shape.seq_q as u64 {
        return;
    }
    let (lane, per_lane) = (me.lane() as usize, (head_dim / 32) as usize);
    let (b, h, i) = shape.decode(r, shape.heads_q, shape.seq_q);
    let hk = h.checked_div(shape.group()).unwrap_or(0);
    let (Some(q_row), Some(o_row), Some(do_row), Some(&l)) = (row_at(q, r, head_dim), row_at(out, r, head_dim), row_at(dout, r, head_dim), lse.get(r as usize))
    else {
        return;
    };
    let qv = load_lane(q_row, lane, per_lane, shape.scale);
    let dov = load_lane(do_row, lane, per_lane, 1.0);
    let d = dot(&dov, &load_lane(o_row, lane, per_lane, 1.0));
    let mut acc = [0.0f32; LANE_VALUES];
    let keys = shape.keys_for(i);
    let mut j0 = 0;
    while j0 < keys {
        let (mut kv, mut vv) = ([[0.0f32; LANE_VALUES]; GROUP], [[0.0f32; LANE_VALUES]; GROUP]);
        let mut valid = [false; GROUP];
        unroll::<GROUP>(|u| {
            let kr = shape.row(b, hk, j0 + u as u64, shape.heads_kv, shape.seq_kv);
            if j0 + (u as u64) < keys
                && let (Some(k_row), Some(v_row)) = (row_at(k, kr, head_dim), row_at(v, kr, head_dim))
            {
                valid[u] = true;
                kv[u] = load_lane(k_row, lane, per_lane, 1.0);
                vv[u] = load_lane(v_row, lane, per_lane, 1.0);
            }
        });
        // Scores and dP of the group, reduced together.
        let mut sums = [0.0f32; 2 * GROUP];
        unroll::<GROUP>(|u| {
            sums[u] = partial_dot(&qv, &kv[u]);
            sums[GROUP + u] = partial_dot(&dov, &vv[u]);
        });
        reduce_many(&mut sums);
        unroll::<GROUP>(|u| {
            let p = if valid[u] { (sums[u] - l).exp() } else { 0.0 };
            let ds = p * (sums[GROUP + u] - d);
            unroll::<LANE_VALUES>(|c| acc[c] += ds * kv[u][c]);
        });
        j0 += GROUP as u64;
    }
    store_lane(&mut dq, me, &acc, per_lane, shape.scale);
    write_row_value(&mut delta, me, d);
}

/// Attention backward, part 2: `dK` and `dV` (a warp per key/value row, summing over every
/// query of every query head of its group), from the forward's `lse` and part 1's `delta`.
#[kernel(instances(f32, bf16, f16), cols(dk = head_dim, dv = head_dim))]
#[allow(clippy::too_many_arguments)]
pub fn attention_backward_dkv<T: Float>(
    q: &[T],
    k: &[T],
    v: &[T],
    dout: &[T],
    lse: &[f32],
    delta: &[f32],
    mut dk: PerWarpRow<T>,
    mut dv: PerWarpRow<T>,
    head_dim: u32,
    shape: AttentionShape,
) {
    let me = warp_row();
    let r = me.row() as u64;
    if r >= shape.batch as u64 * shape.heads_kv as u64 * shape.seq_kv as u64 {
        return;
    }
    let (lane, per_lane) = (me.lane() as usize, (head_dim / 32) as usize);
    let (b, hk, j) = shape.decode(r, shape.heads_kv, shape.seq_kv);
    let (Some(k_row), Some(v_row)) = (row_at(k, r, head_dim), row_at(v, r, head_dim)) else { return };
    let (kv, vv) = (load_lane(k_row, lane, per_lane, 1.0), load_lane(v_row, lane, per_lane, 1.0));
    let (mut dk_acc, mut dv_acc) = ([0.0f32; LANE_VALUES], [0.0f32; LANE_VALUES]);
    let group = shape.group();
    let first_query = if shape.causal != 0 { j } else { 0 };
    for h in hk * group..(hk + 1) * group {
        let mut i0 = first_query;
        while i0 < shape.seq_q as u64 {
            // GROUP queries at once.
            let (mut qv, mut dov) = ([[0.0f32; LANE_VALUES]; GROUP], [[0.0f32; LANE_VALUES]; GROUP]);
            let (mut l, mut d, mut valid) = ([0.0f32; GROUP], [0.0f32; GROUP], [false; GROUP]);
            unroll::<GROUP>(|u| {
                let i = i0 + u as u64;
                let rq = shape.row(b, h, i, shape.heads_q, shape.seq_q);
                if i < shape.seq_q as u64
                    && let (Some(q_row), Some(do_row), Some(&lse_i), Some(&delta_i)) =
                        (row_at(q, rq, head_dim), row_at(dout, rq, head_dim), lse.get(rq as usize), delta.get(rq as usize))
                {
                    valid[u] = true;
                    qv[u] = load_lane(q_row, lane, per_lane, shape.scale);
                    dov[u] = load_lane(do_row, lane, per_lane, 1.0);
                    l[u] = lse_i;
                    d[u] = delta_i;
                }
            });
            let mut sums = [0.0f32; 2 * GROUP];
            unroll::<GROUP>(|u| {
                sums[u] = partial_dot(&qv[u], &kv);
                sums[GROUP + u] = partial_dot(&dov[u], &vv);
            });
            reduce_many(&mut sums);
            unroll::<GROUP>(|u| {
                let p = if valid[u] { (sums[u] - l[u]).exp() } else { 0.0 };
                let ds = p * (sums[GROUP + u] - d[u]);
                unroll::<LANE_VALUES>(|c| {
                    dv_acc[c] += p * dov[u][c];
                    dk_acc[c] += ds * qv[u][c];
                });
            });
            i0 += GROUP as u64;
        }
    }
    store_lane(&mut dk, me, &dk_acc, per_lane, 1.0);
    store_lane(&mut dv, me, &dv_acc, per_lane, 1.0);
}

/// Query rows a warp owns in [`attention_forward_mma()`].
pub const MMA_ROWS: u32 = 16;
/// Warps per block of [`attention_forward_mma()`] (blocks of 128 threads).
pub const MMA_WARPS: u32 = 4;
/// Largest head dimension of [`attention_forward_mma()`].
pub const MMA_MAX_HEAD_DIM: u32 = 128;

/// An element type the tensor-core path multiplies: its 16-bit pattern for an `mma.sync`
/// fragment and the matching instruction (`bf16`, `f16`; `f32` goes through `bf16`, which the
/// host never asks for: `f32` attention stays on the portable path).
pub trait MmaElement: Float {
    /// The value's 16-bit pattern as the instruction reads it.
    fn bits16(self) -> u16;
    /// `value` rounded to the instruction's 16-bit type, as bits.
    fn bits16_of(value: f32) -> u16;
    /// `D = A·B + C` (`mma.sync.aligned.m16n8k16`) for this type.
    ///
    /// # Safety
    /// Every lane of the warp executes the same call together (see
    /// [`ferrocuda_device::mma::m16n8k16_bf16`]).
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
}

impl MmaElement for bf16 {
    #[inline(always)]
    fn bits16(self) -> u16 {
        self.to_bits()
    }
    #[inline(always)]
    fn bits16_of(value: f32) -> u16 {
        value.to_bf16().to_bits()
    }
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: the caller's contract (a converged warp).
        unsafe { ferrocuda_device::mma::m16n8k16_bf16(a, b, c) }
    }
}

impl MmaElement for f16 {
    #[inline(always)]
    fn bits16(self) -> u16 {
        self.to_bits()
    }
    #[inline(always)]
    fn bits16_of(value: f32) -> u16 {
        value.to_f16().to_bits()
    }
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: the caller's contract (a converged warp).
        unsafe { ferrocuda_device::mma::m16n8k16_f16(a, b, c) }
    }
}

impl MmaElement for f32 {
    #[inline(always)]
    fn bits16(self) -> u16 {
        self.to_bf16().to_bits()
    }
    #[inline(always)]
    fn bits16_of(value: f32) -> u16 {
        value.to_bf16().to_bits()
    }
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: the caller's contract (a converged warp).
        unsafe { ferrocuda_device::mma::m16n8k16_bf16(a, b, c) }
    }
}

/// Two 16-bit patterns in one fragment register (low element first).
#[inline(always)]
pub(crate) fn pack(low: u16, high: u16) -> u32 {
    low as u32 | ((high as u32) << 16)
}

/// Sum over the four lanes of a quad (the lanes holding one row of an accumulator fragment).
#[inline(always)]
fn quad_sum(x: f32) -> f32 {
    let x = x + warp::shuffle_xor(x, 1);
    x + warp::shuffle_xor(x, 2)
}

/// Maximum over the four lanes of a quad.
#[inline(always)]
fn quad_max(x: f32) -> f32 {
    let x = x.max(warp::shuffle_xor(x, 1));
    x.max(warp::shuffle_xor(x, 2))
}

/// Attention forward on the tensor cores (FlashAttention-2's schedule with `mma.sync
/// m16n8k16`): a warp owns 16 query rows, computes `S = Q Kᵀ` for 16 keys at a time from
/// fragments loaded straight from the `Q` and `K` rows, keeps the online softmax on the
/// accumulator fragments (quad shuffles), and reuses `P` (rounded to `T`) as the A operand of
/// `P V`; `f32` accumulators. The output is a `PerWarpRow` of width `16 * head_dim`: warp `w`
/// owns `O` rows `16 w .. 16 w + 16`, contiguous in `[B, H, S, D]` because `seq_q` is a
/// multiple of 16; the accumulator tile goes through shared memory into the lanes' columns.
/// `lse` has 16 values per warp (`O`'s row order). The host launches it only for `[B, H, S,
/// D]`, `seq_q % 16 == 0`, `head_dim` a multiple of 16 up to 128, blocks of 128 threads;
/// any other shape makes a warp return without writing.
#[kernel(instances(f32, bf16, f16), cols(out = tile_width, lse = 16))]
#[allow(clippy::too_many_arguments)]
pub fn attention_forward_mma<T: MmaElement>(
    q: &[T],
    k: &[T],
    v: &[T],
    mut out: PerWarpRow<T>,
    mut lse: PerWarpRow<f32>,
    tile_width: u32,
    head_dim: u32,
    shape: AttentionShape,
) {
    let me = warp_row();
    let first = me.row() as u64 * MMA_ROWS as u64;
    // Every condition is uniform over the warp, so the mma calls below see converged warps.
    if first >= shape.batch as u64 * shape.heads_q as u64 * shape.seq_q as u64
        || head_dim == 0
        || head_dim > MMA_MAX_HEAD_DIM
        || !head_dim.is_multiple_of(16)
        || !shape.seq_q.is_multiple_of(MMA_ROWS)
        || shape.layout != LAYOUT_BHSD
        || tile_width != MMA_ROWS * head_dim
    {
        return;
    }
    let lane = me.lane() as usize;
    let (g, p) = (lane / 4, lane % 4);
    let d = head_dim as usize;
    let (k_steps, d_tiles) = (d / 16, d / 8);
    let (b, h, i0) = shape.decode(first, shape.heads_q, shape.seq_q);
    let hk = h.checked_div(shape.group()).unwrap_or(0);
    let kv_first = shape.row(b, hk, 0, shape.heads_kv, shape.seq_kv) as usize;
    let seq_kv = shape.seq_kv as usize;
    let bits = |x: &[T], at: usize| x.get(at).map_or(0, |v| v.bits16());
    let q_at = |row: usize, col: usize| {
        let at = (first as usize + row) * d + col;
        pack(bits(q, at), bits(q, at + 1))
    };
    // Q's A fragments, one per 16 columns of the head.
    let mut qa = [[0u32; 4]; (MMA_MAX_HEAD_DIM / 16) as usize];
    unroll::<{ (MMA_MAX_HEAD_DIM / 16) as usize }>(|kk| {
        if kk < k_steps {
            let c = 16 * kk + 2 * p;
            qa[kk] = [q_at(g, c), q_at(g + 8, c), q_at(g, c + 8), q_at(g + 8, c + 8)];
        }
    });
    // K and V elements, zero past the key/value rows (masked keys never reach the sums).
    let k_at = |key: usize, col: usize| if key < seq_kv { pack(bits(k, (kv_first + key) * d + col), bits(k, (kv_first + key) * d + col + 1)) } else { 0 };
    let v_bits = |key: usize, col: usize| if key < seq_kv { bits(v, (kv_first + key) * d + col) } else { 0 };
    let keys = shape.keys_for(i0 + MMA_ROWS as u64 - 1) as usize;
    // Rows g and g + 8 of the tile: running maximum and this lane's part of the sum.
    let (mut max, mut sum) = ([f32::MIN; 2], [0.0f32; 2]);
    let mut acc = [[0.0f32; 4]; (MMA_MAX_HEAD_DIM / 8) as usize];
    let mut j0 = 0usize;
    while j0 < keys {
        // S for keys j0 .. j0 + 16: two 16 x 8 tiles.
        let mut s = [[0.0f32; 4]; 2];
        unroll::<2>(|nt| {
            let key = j0 + 8 * nt + g;
            let mut c = [0.0f32; 4];
            unroll::<{ (MMA_MAX_HEAD_DIM / 16) as usize }>(|kk| {
                if kk < k_steps {
                    let col = 16 * kk + 2 * p;
                    // SAFETY: every lane of the warp runs this loop with the same bounds.
                    c = unsafe { T::mma(qa[kk], [k_at(key, col), k_at(key, col + 8)], c) };
                }
            });
            s[nt] = c;
        });
        // Scale, mask (past the keys, or causal), and the block's row maxima.
        let mut block_max = [f32::MIN; 2];
        unroll::<2>(|nt| {
            unroll::<4>(|e| {
                let key = j0 + 8 * nt + 2 * p + (e % 2);
                let row = i0 as usize + g + 8 * (e / 2);
                let visible = key < seq_kv && (shape.causal == 0 || key <= row);
                s[nt][e] = if visible { s[nt][e] * shape.scale } else { f32::NEG_INFINITY };
                block_max[e / 2] = block_max[e / 2].max(s[nt][e]);
            });
        });
        let mut correction = [0.0f32; 2];
        unroll::<2>(|r| {
            let new_max = max[r].max(quad_max(block_max[r]));
            correction[r] = (max[r] - new_max).exp();
            max[r] = new_max;
            sum[r] *= correction[r];
        });
        let mut probability = [[0.0f32; 4]; 2];
        unroll::<2>(|nt| {
            unroll::<4>(|e| {
                let value = (s[nt][e] - max[e / 2]).exp();
                probability[nt][e] = value;
                sum[e / 2] += value;
            });
        });
        unroll::<{ (MMA_MAX_HEAD_DIM / 8) as usize }>(|nd| {
            unroll::<4>(|e| acc[nd][e] *= correction[e / 2]);
        });
        // P as the A operand (16 rows x 16 keys), rounded to T.
        let pb = |x: f32| T::bits16_of(x);
        let pa = [
            pack(pb(probability[0][0]), pb(probability[0][1])),
            pack(pb(probability[0][2]), pb(probability[0][3])),
            pack(pb(probability[1][0]), pb(probability[1][1])),
            pack(pb(probability[1][2]), pb(probability[1][3])),
        ];
        unroll::<{ (MMA_MAX_HEAD_DIM / 8) as usize }>(|nd| {
            if nd < d_tiles {
                let col = 8 * nd + g;
                let key = j0 + 2 * p;
                let vb = [pack(v_bits(key, col), v_bits(key + 1, col)), pack(v_bits(key + 8, col), v_bits(key + 9, col))];
                // SAFETY: as above, uniform bounds.
                acc[nd] = unsafe { T::mma(pa, vb, acc[nd]) };
            }
        });
        j0 += 16;
    }
    let total = [quad_sum(sum[0]), quad_sum(sum[1])];
    let inverse = [if total[0] > 0.0 { 1.0 / total[0] } else { 0.0 }, if total[1] > 0.0 { 1.0 / total[1] } else { 0.0 }];
    // The tile through shared memory: this warp's 16 x head_dim slot, written as fragments,
    // read back as the lanes' columns of the output row.
    let tile = ferrocuda_device::shared_array![f32; (MMA_WARPS * MMA_ROWS * MMA_MAX_HEAD_DIM) as usize];
    let slot = (ferrocuda_device::thread::thread_idx_x() / 32) as usize * (MMA_ROWS * MMA_MAX_HEAD_DIM) as usize;
    unroll::<{ (MMA_MAX_HEAD_DIM / 8) as usize }>(|nd| {
        if nd < d_tiles {
            let col = 8 * nd + 2 * p;
            tile.set(slot + g * d + col, acc[nd][0] * inverse[0]);
            tile.set(slot + g * d + col + 1, acc[nd][1] * inverse[0]);
            tile.set(slot + (g + 8) * d + col, acc[nd][2] * inverse[1]);
            tile.set(slot + (g + 8) * d + col + 1, acc[nd][3] * inverse[1]);
        }
    });
    ferrocuda_device::sync::sync_warp(warp::FULL_MASK);
    if let Some(mut row) = out.row_mut(me) {
        let mut j = 0;
        while j < (MMA_ROWS as usize * d) / 32 {
            if let Some(o) = row.get_mut(j) {
                *o = T::from_f32(tile.get(slot + lane + 32 * j));
            }
            j += 1;
        }
    }
    // LSE of row r (< 16) lives in lane 4 (r % 8), half r / 8.
    let lse_low = if total[0] > 0.0 { max[0] + total[0].ln() } else { f32::NEG_INFINITY };
    let lse_high = if total[1] > 0.0 { max[1] + total[1].ln() } else { f32::NEG_INFINITY };
    let source = 4 * (lane as u32 % 8);
    let (low, high) = (warp::shuffle(lse_low, source), warp::shuffle(lse_high, source));
    if let Some(mut row) = lse.row_mut(me)
        && let Some(o) = row.get_mut(0)
    {
        *o = if lane < 8 { low } else { high };
    }
}
