//! Attention backward on the tensor cores (`mma.sync m16n8k16`, sm_80 and newer):
//! FlashAttention-2's backward split into three launches, so every output element has one
//! writer and the results are deterministic (no atomics):
//!
//! 1. [`attention_backward_delta()`]: `delta[row] = rowsum(dO * O)`, a warp per row of `O`;
//! 2. [`attention_backward_dkv_mma()`]: a block per 64 keys of one key/value head, a warp per
//!    16 of them. The warp keeps its `K` and `V` rows as `mma` A fragments in registers and
//!    its `dK`, `dV` accumulators in `f32`; the block walks the query rows of every query head
//!    of the group (64 at a time at head dimension 64, 32 at 128), staging `Q`, `dO` (and
//!    their `lse`, `delta`) in shared memory with `cp.async`, double-buffered: the next step's
//!    rows are in flight while this step's are used. Per 16 queries a warp computes
//!    `Sᵀ = K Qᵀ` and `dPᵀ = V dOᵀ` (B fragments by `ldmatrix` from the staged rows),
//!    `Pᵀ = exp(scale Sᵀ - lse)` and `dSᵀ = Pᵀ (dPᵀ - delta)` on the accumulator fragments,
//!    then `dV += Pᵀ dO` and `dK += dSᵀ Q` (the accumulators reused as A fragments, the staged
//!    rows as B through `ldmatrix.trans`);
//! 3. [`attention_backward_dq_mma()`]: the mirror image, a block per 64 queries of one query
//!    head, a warp per 16, walking the keys the same way: `S`, `dP`, `P`, `dS`, `dQ += dS K`.
//!
//! `dS` is recomputed in both (seven products instead of FlashAttention-2's five, which adds
//! `dQ` with atomics): the price of determinism and of writing each output once. Each kernel
//! has one body per head dimension (64, 128), so the loops over the head's columns have
//! constant bounds and compile to straight-line `mma` code.
//!
//! Both main kernels read any layout ([`LAYOUT_BHSD`](crate::attention::LAYOUT_BHSD) or
//! `BSHD`), any sequence lengths (rows past the end are staged as zeros and masked), causal or
//! not, head dimension 64 or 128, blocks of [`BWD_THREADS`] threads; anything else makes
//! them return without writing (the host never launches them so). Their outputs are
//! [`UncheckedSlice`]s written in one place (`store_rows`), whose `// SAFETY:` comments say
//! why no two threads write the same element. The other `unsafe` uses are the warp-collective
//! `mma.sync` (two sites), `ldmatrix` (one wrapper) and `cp.async` (one site, alignment and
//! bounds checked before it): eight `unsafe` sites in all.

use ferrocuda_device::cache::{self, Load};
use ferrocuda_device::global::{DisjointChunks, DisjointSlice, PerWarpRow, UncheckedSlice, grid_stride, unique_index, warp_row};
use ferrocuda_device::math::FastMath;
use ferrocuda_device::shared::SharedArray;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, block_dim_y, block_dim_z, block_idx_x, grid_dim_y, grid_dim_z, thread_idx_x};
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::{kernel, shared_array};

use crate::attention::{AttentionShape, MmaElement, dot, load_lane, pack};
use crate::packed::{load8, store8};
use crate::{CHUNK, Float, bf16, f16, write_row_value};

/// Rows (keys in the dK/dV kernel, queries in the dQ kernel) a block owns, and rows of the
/// other side staged per step.
pub const BWD_BLOCK: u32 = 64;
/// Warps per block (each owns 16 of the block's rows).
pub const BWD_WARPS: u32 = 4;
/// Threads per block of the two main kernels.
pub const BWD_THREADS: u32 = 32 * BWD_WARPS;
/// Largest head dimension of the tensor-core backward (64 and 128 are the ones it takes).
pub const BWD_MAX_HEAD_DIM: u32 = 128;

/// Rows staged per step, most (head dimension 64; 32 at 128), and the slots of `lse`/`delta`.
const ROWS: usize = BWD_BLOCK as usize;
/// `u32` words of a staged tile: two buffers (the next step's rows are copied in while this
/// step's are used) of 64 rows of 64 16-bit values or 32 rows of 128, each row padded by 8
/// values (`d / 2 + 4` words), so the 8 rows one `ldmatrix` matrix reads fall in distinct
/// 16-byte bank groups. 36 KiB for the two tiles of a block.
const TILE_WORDS: usize = 2 * ROWS * (64 + 8) / 2;

/// Rows staged per step for head dimension `d`.
#[inline(always)]
fn step_rows(d: usize) -> usize {
    if d == 128 { ROWS / 2 } else { ROWS }
}
/// A fragments per warp row block at the largest head dimension (16 columns each).
const K_STEPS: usize = (BWD_MAX_HEAD_DIM / 16) as usize;
/// Accumulator fragments per 16 rows at the largest head dimension (8 columns each).
const N_TILES: usize = (BWD_MAX_HEAD_DIM / 8) as usize;
/// `log2(e)`: scores go through `ex2`.
const LOG2_E: f32 = core::f32::consts::LOG2_E;

/// 16 bytes, aligned to 16 (one vector load of 8 16-bit values).
#[repr(C, align(16))]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable, ferrocuda_device::LayoutKey)]
struct Vec16([u32; 4]);

/// The 8 values of `x` at `at .. at + 8` as 16-bit patterns, two per word: one 16-byte load
/// when the run is aligned (the common case), element loads otherwise, zeros past the end.
#[inline(always)]
fn load8_bits<T: MmaElement>(x: &[T], at: usize) -> [u32; 4] {
    let Some(run) = x.get(at..at + 8) else {
        let bits = |i: usize| x.get(at + i).map_or(0, |v| v.bits16());
        return [pack(bits(0), bits(1)), pack(bits(2), bits(3)), pack(bits(4), bits(5)), pack(bits(6), bits(7))];
    };
    match bytemuck::try_cast_slice::<T, Vec16>(run) {
        Ok(vectors) if vectors.len() == 1 && core::mem::size_of::<T>() == 2 => cache::load(&vectors[0], Load::CacheAll).0,
        _ => [
            pack(run[0].bits16(), run[1].bits16()),
            pack(run[2].bits16(), run[3].bits16()),
            pack(run[4].bits16(), run[5].bits16()),
            pack(run[6].bits16(), run[7].bits16()),
        ],
    }
}

/// Where the rows of one head sit: `(batch, head)` of a tensor with `heads` heads and `seq`
/// positions.
#[derive(Clone, Copy)]
struct Head {
    b: u64,
    h: u64,
    heads: u32,
    seq: u32,
}

impl Head {
    /// The element index of column 0 of position `s`.
    #[inline(always)]
    fn at(&self, shape: &AttentionShape, s: usize, d: usize) -> usize {
        shape.row(self.b, self.h, s as u64, self.heads, self.seq) as usize * d
    }

    /// The row index (for `lse`, `delta`) of position `s`.
    #[inline(always)]
    fn row(&self, shape: &AttentionShape, s: usize) -> usize {
        shape.row(self.b, self.h, s as u64, self.heads, self.seq) as usize
    }
}

/// Starts copying positions `first .. first + step_rows(d)` of `head` of `x` (zeros past the
/// sequence) into buffer `buffer` of `tile` (its row `r` at words `(buffer * rows + r) *
/// stride ..`, `stride = d / 2 + 4`): `cp.async` of 16 bytes per chunk where the chunk is
/// 16-byte aligned, plain loads and stores otherwise. Every thread of the block takes part
/// (chunks `BWD_THREADS` apart); the caller commits, waits and synchronises the block before
/// anyone reads the buffer, and nobody reads or writes the buffer until then.
#[inline(always)]
fn stage<T: MmaElement>(x: &[T], shape: &AttentionShape, head: Head, first: usize, d: usize, tile: SharedArray<u32, TILE_WORDS>, buffer: usize) {
    let shift = if d == 128 { 4 } else { 3 };
    let rows = step_rows(d);
    let chunks = rows << shift;
    let stride = d / 2 + 4;
    let mut c = thread_idx_x() as usize;
    while c < chunks {
        let (r, cc) = (c >> shift, c & ((1 << shift) - 1));
        let s = first + r;
        let word = (buffer * rows + r) * stride + 4 * cc;
        if s >= head.seq as usize {
            tile.set_x4(word / 4, [0; 4]);
        } else {
            let at = head.at(shape, s, d) + 8 * cc;
            match x.get(at..at + 8) {
                Some(run) if core::mem::size_of::<T>() == 2 && (run.as_ptr() as usize).is_multiple_of(16) && word + 4 <= TILE_WORDS => {
                    // SAFETY: `run` is 8 16-bit values (16 bytes) of a kernel input, in
                    // global memory and 16-byte aligned (checked); the destination is 4 words
                    // inside the tile (checked), 16-byte aligned (`word` is a multiple of 4),
                    // in a buffer that nobody reads or writes until the caller's wait and
                    // block barrier (this function's contract).
                    unsafe { ferrocuda_device::cp_async::copy_16(tile.shared_address() + 4 * word as u32, run.as_ptr().cast()) }
                }
                _ => tile.set_x4(word / 4, load8_bits(x, at)),
            }
        }
        c += BWD_THREADS as usize;
    }
}

/// Stages `factor * values[row(first + r)]` for `r < step_rows(d)` (0 past the sequence) in slots
/// `buffer * 64 + r` of `out` (plain loads: one per thread).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn stage_rows(values: &[f32], factor: f32, shape: &AttentionShape, head: Head, first: usize, d: usize, out: SharedArray<f32, { 2 * ROWS }>, buffer: usize) {
    let t = thread_idx_x() as usize;
    if t < step_rows(d) {
        let s = first + t;
        let value = if s < head.seq as usize { values.get(head.row(shape, s)).copied().unwrap_or(0.0) * factor } else { 0.0 };
        out.set(buffer * ROWS + t, value);
    }
}

/// `ldmatrix` x4 (`trans` or not) at word `word` of `tile` for this lane.
#[inline(always)]
fn ldsm(tile: SharedArray<u32, TILE_WORDS>, word: usize, trans: bool) -> [u32; 4] {
    let word = word.min(TILE_WORDS - 4);
    let address = tile.shared_address() + 4 * word as u32;
    // SAFETY: every caller runs this with the whole warp converged (its conditions are
    // uniform over the warp); `word` is clamped into the tile, and every row address is a
    // multiple of 16 bytes (rows are `d / 2 + 4` words, a multiple of 4, and columns
    // multiples of 8 16-bit values), so each lane's 16 bytes lie inside the tile.
    unsafe { if trans { ferrocuda_device::ldmatrix::load_x4_trans(address) } else { ferrocuda_device::ldmatrix::load_x4(address) } }
}

/// B fragments of `X[rows]ᵀ` for the 16 staged rows from `row0`, columns `16 kk ..`: the
/// fragments of the two 8-row n-tiles (`[n-tile 0 b0, b1, n-tile 1 b0, b1]`). For `S = A Xᵀ`.
#[inline(always)]
fn b_rows(tile: SharedArray<u32, TILE_WORDS>, stride: usize, row0: usize, kk: usize, lane: usize) -> [u32; 4] {
    let row = row0 + lane % 8 + 8 * (lane / 16);
    let col = 16 * kk + 8 * ((lane / 8) % 2);
    ldsm(tile, row * stride + col / 2, false)
}

/// B fragments of the staged rows `row0 .. row0 + 16` as a K x N matrix (rows are k),
/// columns `16 nn .. 16 nn + 16` as two n-tiles (`[n-tile 0 b0, b1, n-tile 1 b0, b1]`).
/// For `acc += A X`.
#[inline(always)]
fn b_cols(tile: SharedArray<u32, TILE_WORDS>, stride: usize, row0: usize, nn: usize, lane: usize) -> [u32; 4] {
    let row = row0 + lane % 8 + 8 * ((lane / 8) % 2);
    let col = 16 * nn + 8 * (lane / 16);
    ldsm(tile, row * stride + col / 2, true)
}

/// The A fragments of 16 rows from position `first` of `head` of `x` (zeros past the
/// sequence), one per 16 columns.
#[inline(always)]
fn a_rows<T: MmaElement>(x: &[T], shape: &AttentionShape, head: Head, first: usize, d: usize, lane: usize) -> [[u32; 4]; K_STEPS] {
    let (g, p) = (lane / 4, lane % 4);
    let word = |s: usize, col: usize| {
        if s < head.seq as usize {
            let at = head.at(shape, s, d) + col;
            pack(x.get(at).map_or(0, |v| v.bits16()), x.get(at + 1).map_or(0, |v| v.bits16()))
        } else {
            0
        }
    };
    let mut a = [[0u32; 4]; K_STEPS];
    unroll::<K_STEPS>(|kk| {
        if kk < d / 16 {
            let c = 16 * kk + 2 * p;
            a[kk] = [word(first + g, c), word(first + g + 8, c), word(first + g, c + 8), word(first + g + 8, c + 8)];
        }
    });
    a
}

/// The 16 x 16 tile of two accumulator n-tiles as an A fragment, rounded to `T`.
#[inline(always)]
fn to_a<T: MmaElement>(x: &[[f32; 4]; 2]) -> [u32; 4] {
    let b = |v: f32| T::bits16_of(v);
    [pack(b(x[0][0]), b(x[0][1])), pack(b(x[0][2]), b(x[0][3])), pack(b(x[1][0]), b(x[1][1])), pack(b(x[1][2]), b(x[1][3]))]
}

/// `C = A Xᵀ` for 16 rows of A (fragments `a`) against 16 staged rows of `tile` from `row0`:
/// two n-tiles of 8.
#[inline(always)]
fn product_t<T: MmaElement>(a: &[[u32; 4]; K_STEPS], tile: SharedArray<u32, TILE_WORDS>, stride: usize, row0: usize, d: usize, lane: usize) -> [[f32; 4]; 2] {
    let mut c = [[0.0f32; 4]; 2];
    unroll::<K_STEPS>(|kk| {
        if kk < d / 16 {
            let b = b_rows(tile, stride, row0, kk, lane);
            // SAFETY: uniform bounds: the whole warp runs every iteration together.
            unsafe {
                c[0] = T::mma(a[kk], [b[0], b[1]], c[0]);
                c[1] = T::mma(a[kk], [b[2], b[3]], c[1]);
            }
        }
    });
    c
}

/// `acc += A X` for a 16 x 16 A fragment against staged rows `row0 .. row0 + 16` (all the
/// head's columns).
#[inline(always)]
fn accumulate<T: MmaElement>(
    acc: &mut [[f32; 4]; N_TILES],
    a: [u32; 4],
    tile: SharedArray<u32, TILE_WORDS>,
    stride: usize,
    row0: usize,
    d: usize,
    lane: usize,
) {
    unroll::<{ N_TILES / 2 }>(|nn| {
        if nn < d / 16 {
            let b = b_cols(tile, stride, row0, nn, lane);
            // SAFETY: as in `product_t`.
            unsafe {
                acc[2 * nn] = T::mma(a, [b[0], b[1]], acc[2 * nn]);
                acc[2 * nn + 1] = T::mma(a, [b[2], b[3]], acc[2 * nn + 1]);
            }
        }
    });
}

/// Writes a warp's 16 accumulator rows (times `scale`) at positions `first ..` of `head`.
///
/// # Safety
/// No other thread of the launch writes or reads these rows of `out`: the caller's block and
/// warp own positions `first .. first + 16` of `head`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store_rows<T: MmaElement>(
    out: &mut UncheckedSlice<T>,
    acc: &[[f32; 4]; N_TILES],
    shape: &AttentionShape,
    head: Head,
    first: usize,
    d: usize,
    lane: usize,
    scale: f32,
) {
    let (g, p) = (lane / 4, lane % 4);
    let len = out.len();
    unroll::<N_TILES>(|nd| {
        if nd < d / 8 {
            unroll::<4>(|e| {
                let s = first + g + 8 * (e / 2);
                if s < head.seq as usize {
                    let at = head.at(shape, s, d) + 8 * nd + 2 * p + e % 2;
                    if at < len {
                        // SAFETY: in bounds (checked); the element is row `s`, column
                        // `8 nd + 2 p + e % 2`: one lane of one warp of one block has it
                        // (the caller's contract for the rows, the fragment layout for the
                        // columns).
                        unsafe { out.write_unchecked(at, T::from_f32(acc[nd][e] * scale)) };
                    }
                }
            });
        }
    });
}

/// The launch's conditions both main kernels need, uniform over the launch.
///
/// Their outputs are `UncheckedSlice`s whose ownership (a tile per block from `blockIdx.x`, a
/// row per lane from `threadIdx.x`) holds only in a 1-D launch: blocks of exactly
/// `(BWD_THREADS, 1, 1)` in a grid of `(n, 1, 1)`. A 2-D grid or 2-D blocks would give two
/// blocks (two rows of threads) the same elements and shared words (audit 2026-11-28f, G18R-1),
/// so every other shape does nothing.
///
/// The ownership also needs the element index `row(b, h, s) * d` to be one-to-one in machine
/// arithmetic: it is computed in `u64` from the shape's `u32` fields, and a shape whose
/// `batch * heads * seq * d` passes 2^64 would wrap two blocks' rows onto one element (audit
/// 2026-11-28g, G19R-2: `[B, S, H, D]` with 2^31 heads). Every index the kernels form is below
/// that product for its side (`b < batch`, `h < heads`, `s < seq`, column `< d`), so refusing
/// shapes whose product overflows, for queries and for keys, keeps the map injective.
#[inline(always)]
fn supported(head_dim: u32, shape: &AttentionShape) -> bool {
    (head_dim == 64 || head_dim == 128)
        && block_dim_x() == BWD_THREADS
        && block_dim_y() == 1
        && block_dim_z() == 1
        && grid_dim_y() == 1
        && grid_dim_z() == 1
        && shape.heads_kv != 0
        && shape.heads_q.is_multiple_of(shape.heads_kv)
        && elements_fit(shape.batch, shape.heads_q, shape.seq_q, head_dim)
        && elements_fit(shape.batch, shape.heads_kv, shape.seq_kv, head_dim)
}

/// `batch * heads * seq * d` fits in a `u64` (so no element index of that side wraps).
#[inline(always)]
fn elements_fit(batch: u32, heads: u32, seq: u32, d: u32) -> bool {
    // batch * heads < 2^64 always; the two further products are checked.
    let rows = batch as u64 * heads as u64;
    rows.checked_mul(seq as u64).and_then(|n| n.checked_mul(d as u64)).is_some()
}

/// Attention backward, step 1: `delta[row] = Σ_c dO[row, c] O[row, c]` (a warp per row of
/// `O`, in `O`'s row order; `head_dim` a multiple of 32 up to 256).
#[kernel(instances(f32, bf16, f16), cols(delta = 1))]
pub fn attention_backward_delta<T: Float>(out: &[T], dout: &[T], mut delta: PerWarpRow<f32>, head_dim: u32) {
    let me = warp_row();
    let r = me.row() as u64;
    let start = r as usize * head_dim as usize;
    let (Some(o_row), Some(do_row)) = (out.get(start..start + head_dim as usize), dout.get(start..start + head_dim as usize)) else { return };
    let (lane, per_lane) = (me.lane() as usize, (head_dim / 32) as usize);
    let d = dot(&load_lane(do_row, lane, per_lane, 1.0), &load_lane(o_row, lane, per_lane, 1.0));
    write_row_value(&mut delta, me, d);
}

/// Attention backward, step 2: `dK` and `dV` on the tensor cores (module docs). Grid: one
/// block of [`BWD_THREADS`] per 64 keys of each (batch, key/value head), block
/// `tile + tiles * (batch * heads_kv + head)` with `tiles = ⌈seq_kv / 64⌉`.
#[kernel(instances(f32, bf16, f16))]
#[allow(clippy::too_many_arguments)]
pub fn attention_backward_dkv_mma<T: MmaElement>(
    q: &[T],
    k: &[T],
    v: &[T],
    dout: &[T],
    lse: &[f32],
    delta: &[f32],
    mut dk: UncheckedSlice<T>,
    mut dv: UncheckedSlice<T>,
    head_dim: u32,
    shape: AttentionShape,
) {
    if !supported(head_dim, &shape) || shape.seq_kv == 0 {
        return;
    }
    // One body per head dimension, so every loop over the head's columns has constant bounds
    // (straight-line code the scheduler can interleave).
    if head_dim == 128 {
        dkv_body::<T, 128>(q, k, v, dout, lse, delta, &mut dk, &mut dv, shape);
    } else {
        dkv_body::<T, 64>(q, k, v, dout, lse, delta, &mut dk, &mut dv, shape);
    }
}

/// The body of [`attention_backward_dkv_mma()`] for head dimension `D`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn dkv_body<T: MmaElement, const D: usize>(
    q: &[T],
    k: &[T],
    v: &[T],
    dout: &[T],
    lse: &[f32],
    delta: &[f32],
    dk: &mut UncheckedSlice<T>,
    dv: &mut UncheckedSlice<T>,
    shape: AttentionShape,
) {
    let d = D;
    let stride = d / 2 + 4;
    let tiles = shape.seq_kv.div_ceil(BWD_BLOCK);
    let (tile, bh) = (block_idx_x() % tiles, block_idx_x() / tiles);
    let (b, hk) = (bh / shape.heads_kv, bh % shape.heads_kv);
    if b >= shape.batch {
        return;
    }
    let lane = thread_idx_x() as usize % 32;
    let (g, p) = (lane / 4, lane % 4);
    let block_first = (tile * BWD_BLOCK) as usize;
    let first = block_first + 16 * (thread_idx_x() as usize / 32);
    let kv_head = Head { b: b as u64, h: hk as u64, heads: shape.heads_kv, seq: shape.seq_kv };
    let ka = a_rows(k, &shape, kv_head, first, d, lane);
    let va = a_rows(v, &shape, kv_head, first, d, lane);
    let (mut dk_acc, mut dv_acc) = ([[0.0f32; 4]; N_TILES], [[0.0f32; 4]; N_TILES]);
    let q_tile = shared_array![u32; TILE_WORDS];
    let do_tile = shared_array![u32; TILE_WORDS];
    let lse_tile = shared_array![f32; 2 * ROWS];
    let delta_tile = shared_array![f32; 2 * ROWS];
    let causal = shape.causal != 0;
    let seq_q = shape.seq_q as usize;
    let scale_log2 = shape.scale * LOG2_E;
    let group = (shape.heads_q / shape.heads_kv) as usize;
    let rows = step_rows(d);
    // Queries before the block's first key see none of its keys (causal).
    let q_start = if causal { block_first } else { 0 };
    // Steps: `rows` queries of one query head of the group each, head by head.
    let per_head = seq_q.saturating_sub(q_start).div_ceil(rows);
    let steps = per_head * group;
    let at_step = |n: usize| {
        let head = Head { b: b as u64, h: (hk as usize * group + n / per_head) as u64, heads: shape.heads_q, seq: shape.seq_q };
        (head, q_start + (n % per_head) * rows)
    };
    let issue = |n: usize| {
        let (head, q0) = at_step(n);
        stage(q, &shape, head, q0, d, q_tile, n % 2);
        stage(dout, &shape, head, q0, d, do_tile, n % 2);
        stage_rows(lse, LOG2_E, &shape, head, q0, d, lse_tile, n % 2);
        stage_rows(delta, 1.0, &shape, head, q0, d, delta_tile, n % 2);
        ferrocuda_device::cp_async::commit();
    };
    if steps > 0 {
        issue(0);
    }
    let mut n = 0;
    while n < steps {
        // The next step's rows are copied in while this one's are used.
        if n + 1 < steps {
            issue(n + 1);
            ferrocuda_device::cp_async::wait::<1>();
        } else {
            ferrocuda_device::cp_async::wait::<0>();
        }
        sync_threads();
        {
            let q0 = at_step(n).1;
            let buffer = n % 2;
            for step in 0..rows / 16 {
                let r0 = 16 * step;
                let (row0, slot0) = (buffer * rows + r0, buffer * ROWS + r0);
                // Causal: these 16 queries all come before the warp's first key (uniform).
                if !(causal && q0 + r0 + 15 < first) && q0 + r0 < seq_q {
                    let st = product_t::<T>(&ka, q_tile, stride, row0, d, lane);
                    let dpt = product_t::<T>(&va, do_tile, stride, row0, d, lane);
                    let (mut pt, mut dst) = ([[0.0f32; 4]; 2], [[0.0f32; 4]; 2]);
                    // Every (key, query) pair of the 16 x 16 tile visible: no mask to compute.
                    let full = q0 + r0 + 16 <= seq_q && first + 16 <= shape.seq_kv as usize && !(causal && q0 + r0 < first + 15);
                    let mut element = |nt: usize, e: usize, visible: bool| {
                        // `& (2 * ROWS - 1)`: the slot is below 2 * ROWS anyway; the mask lets
                        // the compiler see it (no bounds check in the loop).
                        let slot = (slot0 + 8 * nt + 2 * p + e % 2) & (2 * ROWS - 1);
                        let probability = if visible { (st[nt][e] * scale_log2 - lse_tile.get(slot)).fast_exp2() } else { 0.0 };
                        pt[nt][e] = probability;
                        dst[nt][e] = probability * (dpt[nt][e] - delta_tile.get(slot));
                    };
                    if full {
                        unroll::<2>(|nt| unroll::<4>(|e| element(nt, e, true)));
                    } else {
                        unroll::<2>(|nt| {
                            unroll::<4>(|e| {
                                let key = first + g + 8 * (e / 2);
                                let query = q0 + r0 + 8 * nt + 2 * p + e % 2;
                                element(nt, e, query < seq_q && key < shape.seq_kv as usize && (!causal || key <= query));
                            })
                        });
                    }
                    accumulate::<T>(&mut dv_acc, to_a::<T>(&pt), do_tile, stride, row0, d, lane);
                    accumulate::<T>(&mut dk_acc, to_a::<T>(&dst), q_tile, stride, row0, d, lane);
                }
            }
        }
        // Everyone is done with this buffer before step n + 2 refills it.
        sync_threads();
        n += 1;
    }
    // SAFETY: block (tile, b, hk) owns keys `tile * 64 ..` of head (b, hk); its warp w the 16
    // from `first`; `store_rows` gives each element of those rows to one lane.
    unsafe {
        store_rows(dk, &dk_acc, &shape, kv_head, first, d, lane, shape.scale);
        store_rows(dv, &dv_acc, &shape, kv_head, first, d, lane, 1.0);
    }
}

/// Attention backward, step 3: `dQ` on the tensor cores (module docs). Grid: one block of
/// [`BWD_THREADS`] per 64 queries of each (batch, query head), block
/// `tile + tiles * (batch * heads_q + head)` with `tiles = ⌈seq_q / 64⌉`.
#[kernel(instances(f32, bf16, f16))]
#[allow(clippy::too_many_arguments)]
pub fn attention_backward_dq_mma<T: MmaElement>(
    q: &[T],
    k: &[T],
    v: &[T],
    dout: &[T],
    lse: &[f32],
    delta: &[f32],
    mut dq: UncheckedSlice<T>,
    head_dim: u32,
    shape: AttentionShape,
) {
    if !supported(head_dim, &shape) || shape.seq_q == 0 {
        return;
    }
    // One body per head dimension, as in the dK/dV kernel.
    if head_dim == 128 {
        dq_body::<T, 128>(q, k, v, dout, lse, delta, &mut dq, shape);
    } else {
        dq_body::<T, 64>(q, k, v, dout, lse, delta, &mut dq, shape);
    }
}

/// The body of [`attention_backward_dq_mma()`] for head dimension `D`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn dq_body<T: MmaElement, const D: usize>(
    q: &[T],
    k: &[T],
    v: &[T],
    dout: &[T],
    lse: &[f32],
    delta: &[f32],
    dq: &mut UncheckedSlice<T>,
    shape: AttentionShape,
) {
    let d = D;
    let stride = d / 2 + 4;
    let tiles = shape.seq_q.div_ceil(BWD_BLOCK);
    let (tile, bh) = (block_idx_x() % tiles, block_idx_x() / tiles);
    let (b, h) = (bh / shape.heads_q, bh % shape.heads_q);
    if b >= shape.batch {
        return;
    }
    let lane = thread_idx_x() as usize % 32;
    let (g, p) = (lane / 4, lane % 4);
    let block_first = (tile * BWD_BLOCK) as usize;
    let first = block_first + 16 * (thread_idx_x() as usize / 32);
    let q_head = Head { b: b as u64, h: h as u64, heads: shape.heads_q, seq: shape.seq_q };
    let kv_head = Head { b: b as u64, h: (h / (shape.heads_q / shape.heads_kv)) as u64, heads: shape.heads_kv, seq: shape.seq_kv };
    let qa = a_rows(q, &shape, q_head, first, d, lane);
    let doa = a_rows(dout, &shape, q_head, first, d, lane);
    // lse and delta of rows g and g + 8.
    let (mut row_lse, mut row_delta) = ([0.0f32; 2], [0.0f32; 2]);
    unroll::<2>(|r| {
        let s = first + g + 8 * r;
        if s < shape.seq_q as usize {
            row_lse[r] = lse.get(q_head.row(&shape, s)).copied().unwrap_or(0.0) * LOG2_E;
            row_delta[r] = delta.get(q_head.row(&shape, s)).copied().unwrap_or(0.0);
        }
    });
    let mut dq_acc = [[0.0f32; 4]; N_TILES];
    let k_tile = shared_array![u32; TILE_WORDS];
    let v_tile = shared_array![u32; TILE_WORDS];
    let causal = shape.causal != 0;
    let seq_kv = shape.seq_kv as usize;
    let seq_q = shape.seq_q as usize;
    let scale_log2 = shape.scale * LOG2_E;
    let rows = step_rows(d);
    // Causal: keys after the block's last query are never seen.
    let k_end = if causal { seq_kv.min(block_first + ROWS) } else { seq_kv };
    let steps = k_end.div_ceil(rows);
    let issue = |n: usize| {
        stage(k, &shape, kv_head, n * rows, d, k_tile, n % 2);
        stage(v, &shape, kv_head, n * rows, d, v_tile, n % 2);
        ferrocuda_device::cp_async::commit();
    };
    if steps > 0 {
        issue(0);
    }
    let mut n = 0;
    while n < steps {
        if n + 1 < steps {
            issue(n + 1);
            ferrocuda_device::cp_async::wait::<1>();
        } else {
            ferrocuda_device::cp_async::wait::<0>();
        }
        sync_threads();
        let k0 = n * rows;
        for step in 0..rows / 16 {
            let r0 = 16 * step;
            let row0 = (n % 2) * rows + r0;
            // Causal: these 16 keys all come after the warp's last query (uniform).
            if !(causal && k0 + r0 > first + 15) && k0 + r0 < seq_kv {
                let s = product_t::<T>(&qa, k_tile, stride, row0, d, lane);
                let dp = product_t::<T>(&doa, v_tile, stride, row0, d, lane);
                let mut ds = [[0.0f32; 4]; 2];
                // Every (query, key) pair of the 16 x 16 tile visible: no mask to compute.
                let full = first + 16 <= seq_q && k0 + r0 + 16 <= seq_kv && !(causal && k0 + r0 + 15 > first);
                let mut element = |nt: usize, e: usize, visible: bool| {
                    let probability = if visible { (s[nt][e] * scale_log2 - row_lse[e / 2]).fast_exp2() } else { 0.0 };
                    ds[nt][e] = probability * (dp[nt][e] - row_delta[e / 2]);
                };
                if full {
                    unroll::<2>(|nt| unroll::<4>(|e| element(nt, e, true)));
                } else {
                    unroll::<2>(|nt| {
                        unroll::<4>(|e| {
                            let query = first + g + 8 * (e / 2);
                            let key = k0 + r0 + 8 * nt + 2 * p + e % 2;
                            element(nt, e, query < seq_q && key < seq_kv && (!causal || key <= query));
                        })
                    });
                }
                accumulate::<T>(&mut dq_acc, to_a::<T>(&ds), k_tile, stride, row0, d, lane);
            }
        }
        // Everyone is done with this buffer before step n + 2 refills it.
        sync_threads();
        n += 1;
    }
    // SAFETY: block (tile, b, h) owns queries `tile * 64 ..` of head (b, h); its warp w the 16
    // from `first`; `store_rows` gives each element of those rows to one lane.
    unsafe { store_rows(dq, &dq_acc, &shape, q_head, first, d, lane, shape.scale) };
}

/// Threads per block of [`attention_backward_prep()`] (its launch bounds).
pub const PREP_THREADS: u32 = 128;

/// Queries per tile of the sm_90 backward (`ferrocuda-kernels-hopper`): its per-head `lse`,
/// `delta` and `dQ` accumulator rows are padded to a multiple of this.
pub const HOPPER_QUERY_TILE: u32 = 64;

/// The sm_90 backward's rows per query head: `seq_q` rounded up to [`HOPPER_QUERY_TILE`].
#[inline(always)]
pub const fn hopper_padded_seq(seq_q: u32) -> u32 {
    seq_q.div_ceil(HOPPER_QUERY_TILE) * HOPPER_QUERY_TILE
}

/// Before the sm_90 backward: for padded row `r = (b · heads_q + h) · seq_pad + s` (a thread
/// per row, `seq_pad` = [`hopper_padded_seq`]`(seq_q)`), `lse2[r] = lse · log2 e` and
/// `delta[r] = Σ_c dO[c] O[c]` of query `s` of head `(b, h)` (read in `shape`'s layout), or
/// `+inf` and 0 past the sequence (so that the backward's probabilities there are 0).
///
/// At head dimension 64 or 128 (the sm_90 backward's) with whole warps of rows (`lse2.len()`
/// and the block a multiple of 32), the 32 lanes of a warp read their 32 rows together:
/// `head_dim / 8` lanes per row, one 16-byte chunk each, so every load instruction reads whole
/// rows (2 at D 128, 4 at D 64; the per-thread form read 32 rows 16 bytes each per
/// instruction); the partial sums are then reduce-scattered across the row's lanes with
/// shuffles and handed to the row's own lane (`warp_row_dots`). Other shapes: each thread
/// reads its row, eight 16-byte loads in flight. Blocks of at most 128 threads, three per SM
/// ([`PREP_THREADS`]; ptxas 13.0: 132 registers for bf16 unbounded, and at two blocks of 256
/// per SM the f16 instance spilled).
#[kernel(instances(f32, bf16, f16), same_len(lse2, delta), launch_bounds(128, 3))]
pub fn attention_backward_prep<T: Float>(
    out: &[T],
    dout: &[T],
    lse: &[f32],
    mut lse2: DisjointSlice<f32>,
    mut delta: DisjointSlice<f32>,
    head_dim: u32,
    shape: AttentionShape,
) {
    let seq_pad = hopper_padded_seq(shape.seq_q).max(1) as u64;
    // Whole warps of rows: every lane of a warp takes the loop's iterations together (the
    // stride and the length are multiples of 32), so the shuffles below see all 32 lanes.
    // 16-bit elements, O and dO as 16-byte vectors (16-byte aligned, whole vectors).
    let vectors = match (core::mem::size_of::<T>() == 2, bytemuck::try_cast_slice::<T, Vec16>(out), bytemuck::try_cast_slice::<T, Vec16>(dout)) {
        (true, Ok(o), Ok(g)) => Some((o, g)),
        _ => None,
    };
    let cooperative = (head_dim == 64 || head_dim == 128) && vectors.is_some() && lse2.len().is_multiple_of(32) && block_dim_x().is_multiple_of(32);
    let lane = ferrocuda_device::warp::lane_id();
    for r in grid_stride(lse2.len()) {
        let row = r.get() as u64;
        let (bh, s) = (row / seq_pad, row % seq_pad);
        let (b, h) = (bh / shape.heads_q.max(1) as u64, bh % shape.heads_q.max(1) as u64);
        let (mut l, mut d) = (f32::INFINITY, 0.0f32);
        if let (true, Some((o, g))) = (cooperative, vectors) {
            // This warp's rows: positions `s - lane .. s - lane + 32` of head (b, h) (32
            // divides `seq_pad`), the lane's own `s`.
            let first = s - lane as u64;
            d = if head_dim == 128 {
                warp_row_dots::<T, 16>(o, g, &shape, (b, h), first, lane)
            } else {
                warp_row_dots::<T, 8>(o, g, &shape, (b, h), first, lane)
            };
        }
        if s < shape.seq_q as u64 {
            let row = shape.row(b, h, s, shape.heads_q, shape.seq_q) as usize;
            if !cooperative {
                let start = row * head_dim as usize;
                let chunks = head_dim as usize / CHUNK;
                let mut j = 0;
                while j < chunks {
                    let (mut o, mut g) = ([[0.0f32; CHUNK]; 4], [[0.0f32; CHUNK]; 4]);
                    unroll::<4>(|u| {
                        if j + u < chunks {
                            o[u] = load8(out, start + CHUNK * (j + u), Load::EvictFirst);
                            g[u] = load8(dout, start + CHUNK * (j + u), Load::EvictFirst);
                        }
                    });
                    unroll::<4>(|u| unroll::<CHUNK>(|e| d += o[u][e] * g[u][e]));
                    j += 4;
                }
            }
            l = lse.get(row).copied().unwrap_or(0.0) * LOG2_E;
        }
        if let Some(x) = lse2.get_mut(r) {
            *x = l;
        }
        if let Some(x) = delta.get_mut(r) {
            *x = d;
        }
    }
}

/// `Σ_c dO[c] O[c]` of position `first + lane` of head `(b, h)` (0 past the sequence), the
/// warp's 32 positions `first .. first + 32` read together: `L = head_dim / 8` lanes per row (lane `g·L + c` reads
/// 16-byte chunk `c` of row `first + p·(32/L) + g` in pass `p < L`, so each load instruction
/// reads `32/L` whole rows), then the `L` partial sums of each lane are reduce-scattered over
/// the `L` lanes of its row group (`log2 L` halving steps: after them lane `g·L + c` holds the
/// whole sum of pass `c`'s row) and a last shuffle hands each row's sum to its own lane.
/// Every lane of the warp must call it (it shuffles).
#[inline(always)]
fn warp_row_dots<T: Float, const L: usize>(out: &[Vec16], dout: &[Vec16], shape: &AttentionShape, (b, h): (u64, u64), first: u64, lane: u32) -> f32 {
    let rows_per_pass = 32 / L;
    let (g, c) = (lane as usize / L, lane as usize % L);
    // Vector index of this lane's chunk of position `first`, and the step between positions.
    let base = shape.row(b, h, first, shape.heads_q, shape.seq_q) as usize * L + c;
    let step = if shape.layout == crate::attention::LAYOUT_BSHD { shape.heads_q as usize * L } else { L };
    let mut part = [0.0f32; 16];
    // Passes in batches of 4 (eight 16-byte loads in flight), every index a constant (a
    // function, not a closure: `inline(always)` keeps `part` in registers).
    let at = |j: usize| (first + (j as u64) < shape.seq_q as u64).then(|| base + j * step);
    dots_batch::<T, L, 0>(out, dout, &at, rows_per_pass, g, &mut part);
    dots_batch::<T, L, 1>(out, dout, &at, rows_per_pass, g, &mut part);
    if L == 16 {
        dots_batch::<T, L, 2>(out, dout, &at, rows_per_pass, g, &mut part);
        dots_batch::<T, L, 3>(out, dout, &at, rows_per_pass, g, &mut part);
    }
    if L == 16 {
        reduce_scatter_step::<8>(&mut part, c);
    }
    reduce_scatter_step::<4>(&mut part, c);
    reduce_scatter_step::<2>(&mut part, c);
    reduce_scatter_step::<1>(&mut part, c);
    // Row `j` of the warp (pass `j / rows_per_pass`, group `j % rows_per_pass`) ended on lane
    // `(j % rows_per_pass) · L + j / rows_per_pass`.
    let me = lane as usize;
    ferrocuda_device::warp::shuffle(part[0], ((me % rows_per_pass) * L + me / rows_per_pass) as u32)
}

/// Passes `4B .. 4B + 4` of [`warp_row_dots`] (16-bit `T`, O and dO as 16-byte vectors): this
/// lane's chunk of row `p · rows_per_pass + g`
/// of the warp in pass `p` (`at(j)`: where row `j`'s chunk starts, `None` past the sequence)
/// dotted into `part[p]`; all eight loads issued before the first product.
#[inline(always)]
fn dots_batch<T: Float, const L: usize, const B: usize>(
    out: &[Vec16],
    dout: &[Vec16],
    at: &impl Fn(usize) -> Option<usize>,
    rows_per_pass: usize,
    g: usize,
    part: &mut [f32; 16],
) {
    let (mut o, mut dd) = ([Vec16::default(); 4], [Vec16::default(); 4]);
    unroll::<4>(|u| {
        if let Some(i) = at((4 * B + u) * rows_per_pass + g)
            && let (Some(x), Some(y)) = (out.get(i), dout.get(i))
        {
            o[u] = cache::load(x, Load::EvictFirst);
            dd[u] = cache::load(y, Load::EvictFirst);
        }
    });
    unroll::<4>(|u| {
        // Eight 16-bit values per vector (the caller's `size_of::<T>() == 2`).
        let (x, y): (&[T], &[T]) = (bytemuck::cast_slice(core::slice::from_ref(&o[u])), bytemuck::cast_slice(core::slice::from_ref(&dd[u])));
        let mut sum = 0.0f32;
        unroll::<CHUNK>(|e| sum += x[e].to_f32() * y[e].to_f32());
        part[4 * B + u] = sum;
    });
}

/// One halving step of [`warp_row_dots`]' reduce-scatter: of the `2H` partial sums
/// `part[..2H]`, a lane whose chunk index has bit `H` keeps the upper `H` (moved down), the
/// other the lower `H`, each adding its partner's (lane `^ H`) copy of the half it keeps.
#[inline(always)]
fn reduce_scatter_step<const H: usize>(part: &mut [f32; 16], c: usize)
where
    ferrocuda_device::unroll::Const<H>: ferrocuda_device::unroll::Unrolled,
{
    let upper = c & H != 0;
    unroll::<H>(|i| {
        let (keep, send) = if upper { (part[i + H], part[i]) } else { (part[i], part[i + H]) };
        part[i] = keep + ferrocuda_device::warp::shuffle_xor(send, H as u32);
    });
}

/// Where the sm_90 backward keeps element (query `q` of query tile `tile`, head column `d`) of
/// query head row `bhq` (`b · heads_q + h`) in its f32 `dQ` accumulator (`tiles` query tiles of
/// [`HOPPER_QUERY_TILE`] per head): `ferrocuda_kernels_hopper::attention_backward::dq_acc_index`
/// (the `wgmma` accumulator order of its two consumer warpgroups, so that each adds its share of
/// a tile as one contiguous block), repeated here for the conversion kernel (a test checks that
/// the two agree).
#[inline(always)]
pub const fn hopper_dq_acc_index(head_dim: u32, tiles: u32, bhq: u32, tile: u32, q: u32, d: u32) -> usize {
    let (consumer, row, col) = if head_dim == 128 { (d / 64, d % 64, q) } else { (q / 32, d, q % 32) };
    let thread = 32 * (row / 16) + 4 * (row % 8) + (col % 8) / 2;
    let register = 4 * (col / 8) + 2 * ((row % 16) / 8) + col % 2;
    let tile_base = (bhq as usize * tiles as usize + tile as usize) * (HOPPER_QUERY_TILE * head_dim) as usize;
    tile_base + (consumer * HOPPER_QUERY_TILE * head_dim / 2) as usize + ((register / 4 * 128 + thread) * 4 + register % 4) as usize
}

/// After the sm_90 backward: chunk `i` of `dq` (elements `8i .. 8i + 8` in `shape`'s layout,
/// a thread per chunk: one 16-byte store) is `scale · dq_acc` of its query and head columns,
/// read from the accumulator's tiled order ([`hopper_dq_acc_index`]: eight loads in flight).
#[kernel(instances(f32, bf16, f16))]
pub fn attention_backward_dq_convert<T: Float>(dq_acc: &[f32], mut dq: DisjointChunks<T, 8>, head_dim: u32, shape: AttentionShape) {
    let i = unique_index();
    let e0 = (i.get() * CHUNK) as u64;
    let dim = head_dim.max(1) as u64;
    let (r, d0) = (e0 / dim, (e0 % dim) as u32);
    let (heads, seq) = (shape.heads_q.max(1) as u64, shape.seq_q.max(1) as u64);
    let (b, h, s) = if shape.layout == crate::attention::LAYOUT_BSHD {
        (r / (seq * heads), r % heads, (r / heads) % seq)
    } else {
        (r / (seq * heads), (r / seq) % heads, r % seq)
    };
    let tiles = hopper_padded_seq(shape.seq_q) / HOPPER_QUERY_TILE;
    let bhq = (b * heads + h) as u32;
    let (tile, q) = (s as u32 / HOPPER_QUERY_TILE, s as u32 % HOPPER_QUERY_TILE);
    let mut v = [0.0f32; CHUNK];
    unroll::<CHUNK>(|u| {
        let at = hopper_dq_acc_index(head_dim, tiles, bhq, tile, q, d0 + u as u32);
        v[u] = dq_acc.get(at).copied().unwrap_or(0.0) * shape.scale;
    });
    store8(&mut dq, i, v);
}
