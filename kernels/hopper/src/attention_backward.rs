//! Attention backward on Hopper (FlashAttention-3's layout: a block per 128 keys, the queries
//! streamed past them): `dQ`, `dK`, `dV` from `dO`, the forward's log-sum-exp and
//! `delta = rowsum(dO ∘ O)`, for Q, K, V, dO in bf16 or f16, `[B, H, S, D]` or `[B, S, H, D]`,
//! D 64 or 128, grouped-query heads, any lengths, causal or not.
//!
//! Per block (384 threads; grid `(`[`blocks_x`]`, batch · heads_kv)`: causal blocks take two key blocks, `x` and `⌈seq_kv / 128⌉ - 1 - x`, one after the other, except `_late`):
//! - warpgroup 0 (producer, `setmaxnreg.dec 24`): one thread loads the block's K and V rows
//!   once, then for every 64-query tile of every query head of the group (causal: from the tile
//!   of the block's first key on; otherwise starting at tile `k0 / 64` and wrapping around, so
//!   the blocks of a head running together work on different tiles) the Q and dO tiles (4-D
//!   maps, box `[64, 64, 1, 1]`, 128-byte swizzle) and the tile's `lse·log2 e` and `delta` rows
//!   (1-D f32 maps) through TMA into a [`STAGES`]-deep ring; its second warp adds the
//!   consumers' `dQ` tiles to the accumulator in global memory, one bulk reduction
//!   (`cp.reduce.async.bulk ... .add.f32`) per consumer per step;
//! - warpgroups 1 and 2 (consumers) each own 64 of the keys and keep `dK`, `dV` (64 x D, f32)
//!   in registers. Per query tile, with `wgmma`:
//!   `Sᵀ = K Qᵀ` and `dPᵀ = V dOᵀ` (A and B from shared memory, K-major, m64n64);
//!   `Pᵀ = 2^(Sᵀ·scale·log2 e − lse·log2 e)` (causal and length masks on the tiles that need
//!   them), then `dV += Pᵀ dO` issued at once (A from registers: P's accumulator fragments
//!   rounded to the element type; B N-major, dO as it sits in shared memory);
//!   `dSᵀ = Pᵀ ∘ (dPᵀ − delta)`, stored to shared memory with `stmatrix` (N-major, 128-byte
//!   swizzle, two buffers per consumer), then `dK += dSᵀ Q` issued from registers;
//!   a barrier of both consumers, then `dQᵀ = Kᵀ dSᵀ` over the block's 128 keys (both operands
//!   MN-major from shared memory; at D = 128 consumer c takes head columns `64c..` as an m64n64
//!   tile, at D = 64 queries `32c..` as an m64n32 tile), written to the consumer's f32 tile in
//!   shared memory for the adding warp (so dQ's rounding order, and its last bits, may differ
//!   from call to call).
//! - Around it: before, a kernel of `ferrocuda-kernels-device` writes the padded `lse·log2 e`
//!   (+inf past the sequence) and `delta` rows `[B·Hq, seq_pad]`, and
//!   `attention_backward_store_maps` the tensor maps; after, one converts
//!   `dQ = scale · dQacc` to the element type in the caller's layout. The `_red_cvt` trial
//!   instances (session 20; bf16, D 64 and 128, D 64 causal) convert dQ themselves instead,
//!   on the `_red` schedule: each consumer warp
//!   arrives on a counter of its 16 rows of the tile (`dq_count`, [`dq_count_index`]) a step
//!   after its adds (every lane fences them at device scope, so the fence's wait overlaps the
//!   step's `dV`/`dK` products; after a unit's last step at once), with `atom.inc` wrapping at
//!   the number of key blocks walking the tile; the warp that sees the last count reads its
//!   quads back from L2, writes them as `scale · dQ` in the element type and the caller's
//!   layout, and zeroes them. So a launch that completes leaves the accumulator and the
//!   counters zeroed (the reset protocol: the next launch could start without a memset; the
//!   library still zeroes them on every call, as a caller's scratch may hold anything), and
//!   whatever the counters held at the launch, each of dQ's elements has at most one writer
//!   (at most one arrival per launch sees the last count). Measured on an H200 (session 20,
//!   `bench/results/s20-attn`): 0.39-0.65x the `_red` schedule with the conversion kernel (D 64,
//!   S 512-4k): the per-step device-scope fence in every consumer lane (`MEMBAR.ALL.GPU`, which
//!   waits for the lane's `red`s to reach L2) costs far more than the conversion pass saves, so
//!   they are not picked.
//!   The `_cvt` trial instances (session 21; bf16, D 64 and 128, causal or not: the bulk
//!   schedule, or with the mask `_late`'s) convert dQ themselves with no fence in the
//!   consumers: the adding warp, after handing both consumers' tiles of step `n` back, waits
//!   for its bulk reductions of step `n - LAG` to complete (`cp.async.bulk.wait_group 2 LAG`:
//!   all but the newest `LAG` steps' groups; `_cvt` LAG 1, `_cvt2` LAG 2) and arrives on a
//!   counter per consumer share of that tile (lane 0: device-scope fence, `atom.inc` wrapping
//!   at the key blocks walking the tile); the arrival that completes a count converts the
//!   share (the warp reads it back four quads a lane at a time, zeroes it and writes
//!   `scale · dQ`, two head columns per 4-byte store). Same counters, the same reset protocol
//!   and the same one-writer argument as `_red_cvt`; `dq` must be 4-byte aligned for both.
//!   Measured on an H200 (session 21, `bench/results/s21-attn`): correct (GPU tests against
//!   f64) but 0.41-0.61x the pick at D 128 (`_cvt2` 115 against 279 TFLOP/s at S 512, 297
//!   against 486 at 4k), 0.29-0.39x with the mask, 0.39-0.48x at D 64: the adding warp's
//!   per-step fence and atomic round trips (two a step) and, at short S, the conversions
//!   themselves hold back its hand-offs, which the consumers wait for. Not picked.
//!
//! Instances (`attention_backward_d{64,128}[_causal]_{bf16,f16}`): the schedule above (with the
//! causal mask, two key blocks per block); `_red`, where each consumer adds its `dQ` tile itself
//! with `red.global.add.v4.f32` (no adding warp; the one `ferrocuda-kernels` picks at D 64);
//! `_late` (bulk `dQ`, but dV and dK issued after the exchange barrier, no staggering and one
//! key block per block: session 10's order; picked at D 128 with the causal mask);
//! `attention_backward_d128_causal_bf16_late_lpt`, a trial (session 12, not yet timed on a GPU,
//! so not picked): `_late` with its blocks in [`crate::attention::longest_first`] order
//! (every head group's longest walks first, the grid ending with the shortest);
//! `attention_backward_d128_bf16_persistent` and `attention_backward_d64_bf16_red_persistent`
//! (session 17, no mask): a grid of at most one block per SM (`(g, 1)`), block `i` taking the
//! key blocks `i, i + g, ..` of all `⌈seq_kv / 128⌉ · batch · heads_kv` (key block fastest) one
//! after the other, the next one's first Q/dO tiles loaded during this one's last steps and
//! its K and V while this one's dK and dV are stored (`d64_bf16_red_persistent` is picked for
//! bf16 D 64 at up to 8 query steps a key block: 1.04x `_red` at S 512 on an H200; at D 128 the
//! persistent form was 0.96-0.98x the bulk one); and their `_persistent_dyn` forms, which take
//! each next unit from the counter `next` (the producer's thread fetches it and hands it to the
//! other warps through a shared slot that `kv_full` publishes; 0.98-1.0x the pick at D 128).
//! Session 10's `_wg` (each consumer's own dQ, twice the atomics: 0.65-0.85x) and `_ov` (C7512
//! at D 128) are gone. Figures: `BENCHMARKS.md`, `bench/results/s11-bwd-*`, `bench/results/s17-attn`.
//!
//! The entries (session 19) take Q, K, V, dO, `lse2` and `delta` as slices beside their maps
//! (a pointer to the start of `map_words`, whose read the launch declares), dK and dV as
//! `UncheckedSlice` outputs of the 16-bit elements' bits, the dQ accumulator and the counter as
//! `AtomicSlice`s, and check everything below but the maps' contents (`launch_ok`: the launch,
//! the problem, the lengths and alignments), returning without writing otherwise; their one
//! `# Safety` requirement is that the maps describe exactly those slices with the boxes and
//! swizzle below. The body (`backward_body`) keeps raw pointers. The requirements in full
//! (`ferrocuda_kernels::attention::attention_backward` meets them, builds the maps and the
//! scratch buffers): the maps describe live `[B, H, S, D]` arrays
//! (dims `[D, S, H, B]`, or `[D, H, S, B]` with `bshd != 0`) of the element type, box
//! `[64, 64, 1, 1]` (`[64, 1, 64, 1]` for `bshd`), 128-byte swizzle, and the `lse2` and
//! `delta` rows, `B·Hq·seq_pad` f32 each (`seq_pad = ⌈seq_q / 64⌉ · 64`, fewer than 2^31), as
//! 1-D maps with box [`STATS_BOX`], no swizzle; `dq_acc` holds `B·Hq·D·seq_pad` f32 (zeroed,
//! 16-byte aligned, tiled as [`dq_acc_index`] says); `dk`, `dv` `B·Hkv·seq_kv·D` elements in
//! the maps' layout, 4-byte aligned; `heads_q` a multiple of `heads_kv`; `batch` the batch
//! entries; for the `_persistent_dyn` instances `next` a zeroed `u32` that only they touch
//! during the launch (the others do not read it); for the `_red_cvt` instances `dq`
//! (`B·Hq·seq_q·D` elements, the maps' layout) and `dq_count` ([`dq_count_len`] counters,
//! zeroed for a complete dQ; the others touch neither).

/// Keys per block (two consumer warpgroups of 64).
pub const BN: u32 = 128;
/// Query rows per pipeline stage.
pub const BQ: u32 = 64;
/// Depth of the Q/dO ring.
pub const STAGES: u32 = 3;
/// Threads per block: one producer and two consumer warpgroups.
pub const THREADS: u32 = 384;
/// Bytes of one TMA box: 64 rows of 64 16-bit values (128 bytes, the swizzle's span).
pub const SLAB: u32 = 64 * 128;
/// The TMA box of the `[B, H, S, D]` maps (dims `[D, S, H, B]`): 64 columns, 64 positions.
pub const BOX_BHSD: [u32; 4] = [64, 64, 1, 1];
/// The TMA box of the `[B, S, H, D]` maps (dims `[D, H, S, B]`).
pub const BOX_BSHD: [u32; 4] = [64, 1, 64, 1];
/// The TMA box of the 1-D `lse2` and `delta` maps (f32, no swizzle): one step's 64 rows.
pub const STATS_BOX: [u32; 1] = [BQ];

/// Bytes of 64 rows of head dimension `head_dim` (one [`SLAB`] per 64 columns).
pub const fn panel_bytes(head_dim: u32) -> u32 {
    head_dim / 64 * SLAB
}

/// Dynamic shared memory per block: K and V (two panels each), the ring of Q and dO panels,
/// `dSᵀ` (two buffers per consumer), each consumer's `dQ` tile (f32, [`dq_tile_bytes`]), the
/// ring's `lse2`/`delta` rows, the barriers, two work-unit slots (`_dyn`), 1 KiB to align
/// (226.6 KiB at D = 128, under the 227 KiB a block may have on sm_90).
pub const fn shared_bytes(head_dim: u32) -> u32 {
    (4 + 2 * STAGES) * panel_bytes(head_dim) + 4 * SLAB + 2 * dq_tile_bytes(head_dim) + STATS_BYTES * STAGES + 16 + 16 * STAGES + 16 + 1024
}

/// Bytes of one consumer's share of a step's `dQ` (f32): 64 queries x `head_dim` / 2.
pub const fn dq_tile_bytes(head_dim: u32) -> u32 {
    BQ * head_dim / 2 * 4
}

/// Where element (query `q`, head column `d`) of query tile `tile` of query head row `bhq`
/// (`b · heads_q + h`) sits in the `dq_acc` accumulator (`tiles = ⌈seq_q / 64⌉` per head), in
/// f32 elements: each tile is `64 · head_dim` f32 in the `wgmma` accumulator order of the two
/// consumers (consumer `c`'s `64 · head_dim / 2`, then thread `t`'s registers `4j..4j + 4` at
/// `(j · 128 + t) · 4`), so that a consumer writes its share with 16-byte stores and the copy
/// engine adds it to global memory as one contiguous block. At D = 128 consumer `c` holds head
/// columns `64c..` (an m64n64 `dQᵀ` tile), at D = 64 queries `32c..` (m64n32).
pub const fn dq_acc_index(head_dim: u32, tiles: u32, bhq: u32, tile: u32, q: u32, d: u32) -> usize {
    // The accumulator's (row, column): row = head column, column = query.
    let (consumer, row, col) = if head_dim == 128 { (d / 64, d % 64, q) } else { (q / 32, d, q % 32) };
    let thread = 32 * (row / 16) + 4 * (row % 8) + (col % 8) / 2;
    let register = 4 * (col / 8) + 2 * ((row % 16) / 8) + col % 2;
    let tile_base = (bhq as usize * tiles as usize + tile as usize) * (BQ * head_dim) as usize;
    tile_base + (consumer * BQ * head_dim / 2) as usize + ((register / 4 * 128 + thread) * 4 + register % 4) as usize
}

/// Where the arrival counter of warp `warp` of consumer `consumer` on query tile `tile` of
/// query head row `bhq` sits in `dq_count` (the `_red_cvt` instances' in-kernel conversion,
/// session 20): eight per tile, one per consumer warp (its 16 accumulator rows of the tile).
pub const fn dq_count_index(tiles: u32, bhq: u32, tile: u32, consumer: u32, warp: u32) -> usize {
    ((bhq as usize * tiles as usize + tile as usize) * 2 + consumer as usize) * 4 + warp as usize
}

/// `u32` counters of the `_red_cvt` instances' in-kernel `dQ` conversion for `rows` padded query
/// rows in all (`B·Hq·seq_pad`): eight per 64-row tile ([`dq_count_index`]).
pub const fn dq_count_len(rows: usize) -> usize {
    rows / BQ as usize * 8
}

/// Bytes of one step's `lse2` and `delta` rows in the ring (64 f32 each).
pub const STATS_BYTES: u32 = 2 * BQ * 4;

/// Rows of the padded `lse2`/`delta`/`dq_acc` arrays per head: `seq_q` rounded up to [`BQ`].
pub const fn padded_seq(seq_q: u32) -> u32 {
    seq_q.div_ceil(BQ) * BQ
}

/// Blocks along the grid's `x` for `seq_kv` keys: one per 128 keys, or one per pair of key
/// blocks (`x` and `⌈seq_kv / 128⌉ - 1 - x`) for the causal instances that pair them (every
/// causal one but `_late`).
pub const fn blocks_x(seq_kv: u32, paired: bool) -> u32 {
    let blocks = seq_kv.div_ceil(BN);
    if paired { blocks.div_ceil(2) } else { blocks }
}

/// One key block's walk over the query tiles.
#[derive(Clone, Copy)]
struct Walk {
    /// The block's first key.
    k0: u32,
    /// The first query tile (causal: queries before the block's first key see none of its keys).
    first_tile: u32,
    /// Query tiles per head, at least 1 (no division by zero: `steps` is 0 when there are none).
    per_head: u32,
    /// Steps: tiles times the heads of the group.
    steps: u32,
    /// Without the mask every block walks all of a head's tiles: they start at different ones
    /// (with the mask the blocks' first tiles differ already).
    rotate: u32,
}

impl Walk {
    #[inline(always)]
    fn new<const CAUSAL: bool, const STAGGER: bool>(block: u32, tiles: u32, group: u32) -> Walk {
        let k0 = block * BN;
        let first_tile = if CAUSAL { k0 / BQ } else { 0 };
        let per_head = tiles - first_tile.min(tiles);
        let steps = per_head * group;
        let per_head = per_head.max(1);
        let rotate = if STAGGER && !CAUSAL { (k0 / BQ) % per_head } else { 0 };
        Walk { k0, first_tile, per_head, steps, rotate }
    }

    /// Step `n`: query head `first_head + n / per_head`, query tile `first_tile + (n % per_head
    /// + rotate) % per_head` (its first query returned).
    #[inline(always)]
    fn at(self, n: u32, first_head: u32) -> (u32, u32) {
        let i = n % self.per_head + self.rotate;
        (first_head + n / self.per_head, (self.first_tile + if i >= self.per_head { i - self.per_head } else { i }) * BQ)
    }
}

pub use body::backward_body;

mod body {
    use super::*;
    use ferrocuda_device::atomic::Atomic;
    use ferrocuda_device::global::{AtomicSlice, UncheckedSlice};
    use ferrocuda_device::half::{F16x2, pack_bf16x2};
    use ferrocuda_device::kernel;
    use ferrocuda_device::ldmatrix;
    use ferrocuda_device::math::FastMath;
    use ferrocuda_device::mbarrier::{MBarrier, fence_init};
    use ferrocuda_device::named_barrier::NamedBarrier;
    use ferrocuda_device::pipeline::Ring;
    use ferrocuda_device::shared::{SharedElement, dynamic_shared};
    use ferrocuda_device::shared_vector::{SharedX2, SharedX4};
    use ferrocuda_device::sync::sync_threads;
    use ferrocuda_device::sync::{fence_acq_rel_device, sync_warp};
    use ferrocuda_device::thread::{block_dim_x, block_dim_y, block_dim_z, block_idx_x, block_idx_y, grid_dim_x, grid_dim_y, grid_dim_z, thread_idx_x};
    use ferrocuda_device::tma::{TensorMap, bulk_reduce_add_f32, dynamic_shared_address, fence_proxy_async_shared, store_commit, store_wait, store_wait_read};

    use crate::attention::staging;
    use ferrocuda_device::unroll::unroll;
    use ferrocuda_device::warp::{shuffle, shuffle_xor};
    use ferrocuda_device::warpgroup;
    use ferrocuda_device::wgmma::{self, Descriptor, fence_accumulators_32, fence_accumulators_64};

    /// The A fragments of a 64 x 64 product (4 k16 steps of 4 registers).
    type Fragments = [[u32; 4]; 4];

    /// Two f32 rounded to the element type (f16 when `F16`, else bf16) and packed `lo | hi << 16`.
    #[inline(always)]
    fn pack<const F16: bool>(lo: f32, hi: f32) -> u32 {
        if F16 { F16x2::from_f32s(lo, hi).to_bits() } else { pack_bf16x2(lo, hi) }
    }

    /// The accumulators of an m64n64 product as the A fragments of the next `wgmma` (no data
    /// moves between threads; `wgmma::a_fragments_bf16_32` for either element type).
    #[inline(always)]
    fn fragments<const F16: bool>(acc: &[f32; 32]) -> Fragments {
        // SAFETY: all-zero bits are valid `u32`s (not a repeat expression: docs/performance.md).
        let mut f: Fragments = unsafe { core::mem::zeroed() };
        unroll::<4>(|t| {
            f[t] = [
                pack::<F16>(acc[8 * t], acc[8 * t + 1]),
                pack::<F16>(acc[8 * t + 2], acc[8 * t + 3]),
                pack::<F16>(acc[8 * t + 4], acc[8 * t + 5]),
                pack::<F16>(acc[8 * t + 6], acc[8 * t + 7]),
            ];
        });
        f
    }

    /// Keeps the compiler from moving register writes of the fragments of `P` and `dS` (`f[0]`,
    /// `f[1]`) past a `wgmma::fence`.
    #[inline(always)]
    fn fence_fragments(f: &mut [Fragments; 2]) {
        // SAFETY: `[[[u32; 4]; 4]; 2]` and `[f32; 32]` have the same size and alignment, and
        // every bit pattern is valid for both.
        fence_accumulators_32(unsafe { &mut *(f as *mut [Fragments; 2] as *mut [f32; 32]) });
    }

    /// The descriptor of the operand `offset` bytes (a multiple of 16) after `desc`'s: the
    /// start address field (bits 0..14, address / 16) grows by `offset / 16` (shared-window
    /// addresses stay under 256 KiB, so nothing carries into the next field).
    #[inline(always)]
    fn at(desc: u64, offset: u32) -> u64 {
        desc + (offset >> 4) as u64
    }

    /// As [`fence_fragments`] for one product's fragments.
    #[inline(always)]
    fn fence_fragment(f: &mut Fragments) {
        // SAFETY: `[[u32; 4]; 4]` and `[f32; 16]` have the same size and alignment, and every
        // bit pattern is valid for both.
        wgmma::fence_accumulators_16(unsafe { &mut *(f as *mut Fragments as *mut [f32; 16]) });
    }

    /// `D (+)= A·B` m64n64k16 in the element type, both operands K-major from shared memory.
    ///
    /// # Safety
    /// As for `wgmma::m64n64k16_bf16`.
    #[inline(always)]
    unsafe fn ss<const F16: bool>(acc: &mut [f32; 32], a: u64, b: u64, first: bool) {
        // SAFETY: the caller's contract.
        unsafe {
            match (F16, first) {
                (false, true) => wgmma::m64n64k16_bf16_init(acc, a, b),
                (false, false) => wgmma::m64n64k16_bf16(acc, a, b, true),
                (true, true) => wgmma::m64n64k16_f16_init(acc, a, b),
                (true, false) => wgmma::m64n64k16_f16(acc, a, b, true),
            }
        }
    }

    /// `acc += A·B` m64nDk16 with A from registers, B N-major (D = 64: the first 32 of `acc`).
    ///
    /// # Safety
    /// As for `wgmma::m64n128k16_bf16_rs_n_major`.
    #[inline(always)]
    unsafe fn rs<const D: u32, const F16: bool>(acc: &mut [f32; 64], a: [u32; 4], b: u64) {
        // SAFETY: the caller's contract; for D = 64 the accumulators are the first 32 of `acc`.
        unsafe {
            if D == 64 {
                let acc = &mut *(acc.as_mut_ptr() as *mut [f32; 32]);
                if F16 { wgmma::m64n64k16_f16_rs_n_major(acc, a, b, true) } else { wgmma::m64n64k16_bf16_rs_n_major(acc, a, b, true) }
            } else if F16 {
                wgmma::m64n128k16_f16_rs_n_major(acc, a, b, true)
            } else {
                wgmma::m64n128k16_bf16_rs_n_major(acc, a, b, true)
            }
        }
    }

    /// `D (+)= A·B` m64n64k16, both operands MN-major from shared memory.
    ///
    /// # Safety
    /// As for `wgmma::m64n64k16_bf16_ss_mn_major`.
    #[inline(always)]
    unsafe fn ss_mn<const F16: bool>(acc: &mut [f32; 32], a: u64, b: u64, accumulate: bool) {
        // SAFETY: the caller's contract.
        unsafe { if F16 { wgmma::m64n64k16_f16_ss_mn_major(acc, a, b, accumulate) } else { wgmma::m64n64k16_bf16_ss_mn_major(acc, a, b, accumulate) } }
    }

    /// `D (+)= A·B` m64n32k16, both operands MN-major from shared memory.
    ///
    /// # Safety
    /// As for `wgmma::m64n32k16_bf16_ss_mn_major`.
    #[inline(always)]
    unsafe fn ss_mn_narrow<const F16: bool>(acc: &mut [f32; 16], a: u64, b: u64, accumulate: bool) {
        // SAFETY: the caller's contract.
        unsafe { if F16 { wgmma::m64n32k16_f16_ss_mn_major(acc, a, b, accumulate) } else { wgmma::m64n32k16_bf16_ss_mn_major(acc, a, b, accumulate) } }
    }

    /// Where the tiles and barriers of a block live in shared memory.
    #[derive(Clone, Copy)]
    struct Layout {
        base: u32,
        panel: u32,
        dq_bytes: u32,
    }

    impl Layout {
        /// K's rows `64 half ..` (a panel: one [`SLAB`] per 64 columns).
        #[inline(always)]
        fn k(self, half: u32) -> u32 {
            self.base + self.panel * half
        }
        #[inline(always)]
        fn v(self, half: u32) -> u32 {
            self.base + self.panel * (2 + half)
        }
        #[inline(always)]
        fn q(self, slot: u32) -> u32 {
            self.base + self.panel * (4 + 2 * slot)
        }
        #[inline(always)]
        fn dout(self, slot: u32) -> u32 {
            self.base + self.panel * (5 + 2 * slot)
        }
        /// Buffer `buffer` (0, 1) of consumer `consumer`'s `dSᵀ` (64 keys x 64 queries).
        #[inline(always)]
        fn ds(self, consumer: u32, buffer: u32) -> u32 {
            self.base + self.panel * (4 + 2 * STAGES) + SLAB * (2 * consumer + buffer)
        }
        /// Consumer `consumer`'s `dQ` tile (f32, accumulator order: [`dq_acc_index`]).
        #[inline(always)]
        fn dq(self, consumer: u32) -> u32 {
            self.base + self.panel * (4 + 2 * STAGES) + 4 * SLAB + self.dq_bytes * consumer
        }
        /// Slot `slot`'s `lse2` row (64 f32), then its `delta` row.
        #[inline(always)]
        fn stats(self, slot: u32) -> u32 {
            self.base + self.panel * (4 + 2 * STAGES) + 4 * SLAB + 2 * self.dq_bytes + STATS_BYTES * slot
        }
        #[inline(always)]
        fn barriers(self) -> u32 {
            self.base + self.panel * (4 + 2 * STAGES) + 4 * SLAB + 2 * self.dq_bytes + STATS_BYTES * STAGES
        }
        #[inline(always)]
        fn kv_full(self) -> MBarrier {
            // SAFETY: the first 8 bytes after the tiles, inside the requested shared memory
            // ([`shared_bytes`]), used only as this barrier.
            unsafe { MBarrier::at(self.barriers()) }
        }
        /// After `kv_full` and the ring: the consumers are done with a unit's K and V.
        #[inline(always)]
        fn kv_empty(self) -> MBarrier {
            // SAFETY: the 8 bytes after the ring's barriers, inside the requested shared memory
            // ([`shared_bytes`]), used only as this barrier.
            unsafe { MBarrier::at(self.barriers() + 8 + 16 * STAGES) }
        }
        /// The `_dyn` instances' work-unit slot of unit `u` (two, alternating; after `kv_empty`).
        #[inline(always)]
        fn unit_slot(self, u: u32) -> u32 {
            self.barriers() + 16 + 16 * STAGES + 4 * (u & 1)
        }
        #[inline(always)]
        fn ring(self) -> Ring<STAGES> {
            // SAFETY: the next `Ring::BARRIER_BYTES`, inside the requested shared memory, used
            // only by this ring.
            unsafe { Ring::at(self.barriers() + 8) }
        }
    }

    /// The problem, as the kernel's scalar parameters give it.
    #[derive(Clone, Copy)]
    #[cfg_attr(not(target_arch = "nvptx64"), derive(Debug))]
    pub struct Problem {
        /// Query positions.
        pub seq_q: u32,
        /// Key positions.
        pub seq_kv: u32,
        /// Query heads.
        pub heads_q: u32,
        /// Key/value heads (a divisor of `heads_q`).
        pub heads_kv: u32,
        /// 0: `[B, H, S, D]`; otherwise `[B, S, H, D]`.
        pub bshd: u32,
        /// Batch entries (read by the `_persistent` instances, whose grid does not give it).
        pub batch: u32,
        /// The score scale.
        pub scale: f32,
    }

    impl Problem {
        /// TMA coordinates of column `col`, position `s` of head `h` of batch `b`.
        #[inline(always)]
        fn coords(self, col: u32, s: u32, h: u32, b: u32) -> [i32; 4] {
            if self.bshd != 0 { [col as i32, h as i32, s as i32, b as i32] } else { [col as i32, s as i32, h as i32, b as i32] }
        }

        /// The element index of column 0 of query position `s` of query head `h`.
        #[inline(always)]
        fn q_at<const D: u32>(self, b: u32, h: u32, s: u32) -> usize {
            let (b, h, s, heads, seq) = (b as usize, h as usize, s as usize, self.heads_q as usize, self.seq_q as usize);
            let row = if self.bshd != 0 { (b * seq + s) * heads + h } else { (b * heads + h) * seq + s };
            row * D as usize
        }

        /// The element index of column 0 of key position `s` of key/value head `h`.
        #[inline(always)]
        fn kv_at<const D: u32>(self, b: u32, h: u32, s: u32) -> usize {
            let (b, h, s, heads, seq) = (b as usize, h as usize, s as usize, self.heads_kv as usize, self.seq_kv as usize);
            let row = if self.bshd != 0 { (b * seq + s) * heads + h } else { (b * heads + h) * seq + s };
            row * D as usize
        }
    }

    /// `x`, through an instruction the compilers neither move nor merge (a `mov` with side
    /// effects), so that what is computed from it is computed again here.
    #[inline(always)]
    fn opaque(x: u32) -> u32 {
        #[cfg(target_arch = "nvptx64")]
        {
            let mut y = x;
            // SAFETY: a register move; no memory, no other effect.
            unsafe { core::arch::asm!("mov.u32 {0}, {0};", inout(reg32) y, options(nomem, nostack)) };
            y
        }
        #[cfg(not(target_arch = "nvptx64"))]
        x
    }

    /// `red.global.add.v4.f32`: adds `v` to the four f32 at `p` (16-byte aligned).
    ///
    /// # Safety
    /// `p` points to four f32 of global memory that only atomic adds touch while the kernel runs.
    #[inline(always)]
    unsafe fn add_quad(p: *mut f32, v: [f32; 4]) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "red.global.add.v4.f32 [{p}], {{{a}, {b}, {c}, {d}}};",
                p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3], options(nostack)
            )
        };
        #[cfg(not(target_arch = "nvptx64"))]
        // SAFETY: the caller's contract (the executor's atomics on the four words).
        unsafe {
            for (i, x) in v.into_iter().enumerate() {
                ferrocuda_device::atomic::Atomic::from_ptr(p.add(i)).add(x);
            }
        }
    }

    /// `ld.relaxed.gpu.global.v4.f32`: the four f32 at `p` (16-byte aligned), read atomically
    /// each (device scope, from L2: what other blocks' `red`s added).
    ///
    /// # Safety
    /// As for [`add_quad`].
    #[inline(always)]
    unsafe fn load_quad(p: *const f32) -> [f32; 4] {
        #[cfg(target_arch = "nvptx64")]
        {
            let (a, b, c, d): (f32, f32, f32, f32);
            // SAFETY: the caller's contract.
            unsafe {
                core::arch::asm!(
                    "ld.relaxed.gpu.global.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];",
                    p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, options(nostack)
                )
            };
            [a, b, c, d]
        }
        #[cfg(not(target_arch = "nvptx64"))]
        // SAFETY: the caller's contract (the executor's atomics on the four words).
        unsafe {
            core::array::from_fn(|i| Atomic::from_ptr(p.add(i) as *mut f32).load())
        }
    }

    /// `st.relaxed.gpu.global.v4.f32` of four zeros at `p` (16-byte aligned): the accumulator
    /// left as the next launch needs it.
    ///
    /// # Safety
    /// As for [`add_quad`].
    #[inline(always)]
    unsafe fn zero_quad(p: *mut f32) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!("st.relaxed.gpu.global.v4.f32 [{p}], {{{z}, {z}, {z}, {z}}};", p = in(reg64) p, z = in(reg32) 0.0f32, options(nostack))
        };
        #[cfg(not(target_arch = "nvptx64"))]
        // SAFETY: the caller's contract (the executor's atomics on the four words).
        unsafe {
            for i in 0..4 {
                Atomic::from_ptr(p.add(i)).store(0.0);
            }
        }
    }

    /// `atom.acq_rel.gpu.global.inc.u32` with limit `last`: returns the counter's old value and
    /// stores `old + 1`, or 0 when `old >= last`. Whatever the counter held at the launch, at
    /// most one of `last + 1` arrivals in a row sees `old == last` (the values seen climb to
    /// `last` once and wrap to 0, or start above it, wrap to 0 and stay below it), and after
    /// exactly `last + 1` arrivals on a counter that started at 0 it is 0 again.
    ///
    /// # Safety
    /// `p` points to a `u32` of global memory that only atomic operations touch during the launch.
    #[inline(always)]
    unsafe fn inc_wrapping(p: *mut u32, last: u32) -> u32 {
        #[cfg(target_arch = "nvptx64")]
        {
            let old: u32;
            // SAFETY: the caller's contract.
            unsafe {
                core::arch::asm!("atom.acq_rel.gpu.global.inc.u32 {o}, [{p}], {l};", o = out(reg32) old, p = in(reg64) p, l = in(reg32) last, options(nostack))
            };
            old
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the caller's contract (the executor's atomics).
            let cell = unsafe { Atomic::from_ptr(p) };
            let mut old = cell.load();
            loop {
                let seen = cell.compare_exchange(old, if old >= last { 0 } else { old + 1 });
                if seen == old {
                    return old;
                }
                old = seen;
            }
        }
    }

    /// A warp's arrival on its rows of a `dQ` tile, after its lanes' `red.global.add`s of the
    /// step, and the conversion of those rows when it is the last of the `contributors` (the
    /// key blocks walking the tile): every lane fences its adds at device scope (release), the
    /// warp meets, lane 0 increments the rows' counter (`inc_wrapping`, acquire and release);
    /// the warp that sees `contributors - 1` reads its quads back (their sums from every key
    /// block, from L2), zeroes them and the counter is 0 again (so a launch that completes
    /// leaves the accumulator and the counters as the next one needs them: the reset
    /// protocol), and writes `scale · dQ` to `dq` in the problem's layout, rounded to the
    /// element type, queries `>= seq_q` skipped. `acc` is the thread's first quad (quad `j`:
    /// `512 j` f32 further); its registers `4j..4j + 4` are accumulator rows `row0`, `row0 + 8`
    /// and columns `8j + col0`, `+ 1` (rows: head columns `64 consumer + row` at D = 128, `row`
    /// at D = 64; columns: queries `q0 + col` at D = 128, `q0 + 32 consumer + col` at D = 64).
    ///
    /// # Safety
    /// The whole warp runs it with the same `count` and `contributors >= 1`; `acc`'s quads and
    /// `count` are global memory that only atomic operations touch during the launch; `dq`
    /// holds `B·Hq·seq_q·D` elements that nothing else reads or writes during the launch but
    /// this conversion, whose writers are distinct per counter (one per launch: `inc_wrapping`)
    /// and whose counters cover distinct elements.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn convert_if_last<const D: u32, const F16: bool>(
        acc: *mut f32,
        count: *mut u32,
        contributors: u32,
        dq: *mut u16,
        problem: Problem,
        (b, h, q0): (u32, u32, u32),
        (consumer, row0, col0, lane): (u32, u32, u32, u32),
    ) {
        // Each lane's adds before the warp's arrival (the threadfence-reduction pattern).
        fence_acq_rel_device();
        sync_warp(u32::MAX);
        let mut old = 0;
        if lane == 0 {
            // SAFETY: the caller's contract.
            old = unsafe { inc_wrapping(count, contributors - 1) };
        }
        if shuffle(old, 0) != contributors - 1 {
            return;
        }
        // Lane 0's acquire, then every lane's reads after it.
        sync_warp(u32::MAX);
        fence_acq_rel_device();
        unroll::<8>(|j| {
            if j < D as usize / 16 {
                // SAFETY: the caller's contract (quad j of this thread's share).
                let v = unsafe {
                    let p = acc.add(512 * j);
                    let v = load_quad(p);
                    zero_quad(p);
                    v
                };
                unroll::<4>(|e| {
                    let (row, col) = (row0 + 8 * (e as u32 >> 1), 8 * j as u32 + col0 + (e as u32 & 1));
                    let (d, q) = if D == 128 { (64 * consumer + row, q0 + col) } else { (row, q0 + 32 * consumer + col) };
                    if q < problem.seq_q {
                        let at = problem.q_at::<D>(b, h, q) + d as usize;
                        // SAFETY: q < seq_q, d < D, (b, h) a query head of the problem: inside
                        // dq; this warp alone writes these elements in this launch (the caller's
                        // contract).
                        unsafe { *dq.add(at) = pack::<F16>(v[e] * problem.scale, 0.0) as u16 };
                    }
                });
            }
        });
    }

    /// The adding warp's arrival on consumer `consumer`'s share of a `dQ` tile (the bulk path's
    /// in-kernel conversion, session 21), once lane 0 has waited for its bulk reduction of it to
    /// complete (`cp.async.bulk.wait_group`, a step after it was issued, so the wait is
    /// normally over at once), and the conversion of the share when this arrival is the last of
    /// the `contributors` (the key blocks walking the tile): lane 0 orders the completed bulk
    /// adds before its arrival (device-scope fence) and increments the share's
    /// counter (`inc_wrapping`, acquire and release); the warp that sees `contributors - 1`
    /// reads the share back (its sums from every key block, from L2), zeroes it (so a launch
    /// that completes leaves the accumulator and the counters as the next one needs them: the
    /// reset protocol) and writes `scale · dQ` to `dq` in the problem's layout, rounded to the
    /// element type, two neighbouring head columns per 4-byte store (lanes `l` and `l ^ 4` hold
    /// neighbouring accumulator rows: a shuffle pairs them), queries `>= seq_q` skipped. The
    /// consumers never wait for any of it: this warp is otherwise idle between hand-offs.
    ///
    /// `share` is the share's first f32 (`dq_acc_index(.., 0, 0)` plus `consumer · 64 · D / 2`):
    /// lane `l` handles the quads of consumer threads `32 w + l` (quad `j` of thread `t` at
    /// `4 (128 j + t)`, registers `4j..4j + 4` = accumulator rows `16 w + l / 4`, `+ 8`, columns
    /// `8 j + 2 (l % 4)`, `+ 1`; rows are head columns `64 consumer + row` at D = 128, `row` at
    /// D = 64; columns queries `q0 + col` at D = 128, `q0 + 32 consumer + col` at D = 64).
    ///
    /// # Safety
    /// The whole warp runs it with the same arguments, `contributors >= 1`; lane 0 has waited
    /// for this thread's bulk reduction into the share to complete; the share (`64 · D / 2`
    /// f32 from `share`, 16-byte aligned) and `count` are global memory that only atomic
    /// operations touch during the launch; `dq` (4-byte aligned) holds `B·Hq·seq_q·D` elements
    /// that nothing else reads or writes during the launch but this conversion, whose writers
    /// are distinct per counter (one per launch: `inc_wrapping`) and whose counters cover
    /// distinct elements.
    #[inline(always)]
    unsafe fn convert_share_if_last<const D: u32, const F16: bool>(
        share: *mut f32,
        count: *mut u32,
        contributors: u32,
        dq: *mut u16,
        problem: Problem,
        (b, h, q0): (u32, u32, u32),
        (consumer, lane): (u32, u32),
    ) {
        let mut old = 0;
        if lane == 0 {
            // The copy engine's adds are complete (`cp.async.bulk.wait_group`): the release of the
            // arrival orders them, as FlashAttention-3's deterministic mode orders its bulk adds
            // (no proxy fence here: `fence.proxy.async.global` would wait for this thread's bulk
            // reductions still in flight, this step's too).
            fence_acq_rel_device();
            // SAFETY: the caller's contract.
            old = unsafe { inc_wrapping(count, contributors - 1) };
        }
        if shuffle(old, 0) != contributors - 1 {
            return;
        }
        // Lane 0's acquire, then every lane's reads (of what other blocks' copy engines added).
        sync_warp(u32::MAX);
        fence_acq_rel_device();
        // Lanes whose accumulator rows are even (`l / 4` even) write the pair at query `col`,
        // their partners (`l ^ 4`, the odd rows) the pair at `col + 1`.
        let even = (lane / 4) % 2 == 0;
        let col = 2 * (lane % 4) + if even { 0 } else { 1 };
        // Four quads in flight per lane (the producer warpgroup has 24 registers a thread), in
        // chunks of one consumer warp's quads `j0..j0 + 4` (2 KiB apart): the four loads are
        // issued together (each `asm!` keeps its place, so they are written first), then the
        // zeros, then the conversions, so that the chunk waits for L2 once.
        for chunk in 0..D / 16 {
            let (w, j0) = (4 * chunk / (D / 16), 4 * chunk % (D / 16));
            // SAFETY: quads j0..j0 + 4 of consumer thread `32 w + lane` of the share (the
            // caller's contract: inside it, atomic accesses only).
            let base = unsafe { share.add(4 * (128 * j0 + 32 * w + lane) as usize) };
            // SAFETY: as above (quad k: 512 f32 further).
            let v: [[f32; 4]; 4] = core::array::from_fn(|k| unsafe { load_quad(base.add(512 * k)) });
            unroll::<4>(|k| {
                // SAFETY: as above.
                unsafe { zero_quad(base.add(512 * k)) };
            });
            // The pair's first (even) accumulator row.
            let row = 16 * w + ((lane / 4) & !1);
            unroll::<4>(|k| {
                let v = v[k];
                let o: [f32; 4] = core::array::from_fn(|e| shuffle_xor(v[e], 4));
                // (row, row + 1) at column `col` for rows `row` and `row + 8`.
                let pairs = if even { [(v[0], o[0]), (v[2], o[2])] } else { [(o[1], v[1]), (o[3], v[3])] };
                let c = 8 * (j0 + k as u32) + col;
                let q = if D == 128 { q0 + c } else { q0 + 32 * consumer + c };
                if q < problem.seq_q {
                    unroll::<2>(|half| {
                        let r = row + 8 * half as u32;
                        let d = if D == 128 { 64 * consumer + r } else { r };
                        let at = problem.q_at::<D>(b, h, q) + d as usize;
                        let (lo, hi) = pairs[half];
                        // SAFETY: q < seq_q, d + 1 < D, (b, h) a query head of the problem:
                        // inside dq; `at` is even (D and d even) and dq 4-byte aligned; this warp
                        // alone writes these elements in this launch (the caller's contract).
                        unsafe { *(dq.add(at) as *mut u32) = pack::<F16>(lo * problem.scale, hi * problem.scale) };
                    });
                }
            });
        }
    }

    /// The kernel body (see the module docs). `BULK_DQ`: the consumers hand their `dQ` tiles to
    /// the producer warpgroup's second warp through shared memory, which adds them to `dq_acc`
    /// with the copy engine (`cp.reduce.async.bulk`); otherwise each consumer adds its tile
    /// with `red.global.add.v4.f32`. `EARLY_DV`: `dV += Pᵀ dO` is issued as soon as `P` is
    /// known, before `dPᵀ` is waited for, so the tensor cores run it while `dSᵀ` is computed,
    /// stored and exchanged. `STAGGER`: without the causal mask, the block of keys `k0..`
    /// starts its walk over a head's query tiles at tile `2 k0 / 128` (wrapping around), so
    /// that the blocks of one head running together add to different `dQ` tiles.
    /// `LONGEST_FIRST` (with the causal mask and without `STAGGER`): the grid's blocks take the
    /// key blocks in [`crate::attention::longest_first`] order instead of key block `x` of head
    /// row `y` (a trial: the `_late_lpt` instance, not picked by `ferrocuda-kernels` until the
    /// GPU has timed it).
    ///
    /// `PERSISTENT` (not with `CAUSAL`): block `i` of a grid `(g, 1)` takes the key blocks
    /// (units) `i, i + g, ..` of the `⌈seq_kv / 128⌉ · batch · heads_kv`, key block fastest; a
    /// later unit's first [`STAGES`] Q/dO tiles are loaded before its K and V.
    ///
    /// # Safety
    /// The module's requirements; 384 threads, [`shared_bytes`]`(D)` of dynamic shared memory,
    /// grid `(blocks_x(seq_kv, CAUSAL && STAGGER), batch·heads_kv)`, or with `PERSISTENT`
    /// `(g, 1)` with `1 <= g <=` the units (`problem.batch` the batch entries); run as every
    /// thread of the grid. With `CONVERT`: `dq_out` holds `B·Hq·seq_q·D` elements that
    /// nothing else touches during the launch, `dq_count` [`dq_count_len`] `u32`s that only
    /// atomic operations touch.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn backward_body<
        const D: u32,
        const CAUSAL: bool,
        const F16: bool,
        const BULK_DQ: bool,
        const EARLY_DV: bool,
        const STAGGER: bool,
        const LONGEST_FIRST: bool,
        const PERSISTENT: bool,
        const DYNAMIC: bool,
        const CONVERT: bool,
        const LAG: u32,
        const EPI: u32,
    >(
        maps: [*const TensorMap; 6],
        dq_acc: *mut f32,
        dk: *mut u32,
        dv: *mut u32,
        problem: Problem,
        next: *mut u32,
        dq_out: *mut u16,
        dq_count: *mut u32,
    ) {
        const { assert!(PERSISTENT || !DYNAMIC) };
        // The bulk path's in-kernel conversion (the adding warp's) counts whole units, not a
        // work counter's.
        const { assert!(!(CONVERT && DYNAMIC)) };
        // The persistent schedule walks key blocks of equal length (no mask): its blocks'
        // units are taken in turn, not balanced.
        const { assert!(!(PERSISTENT && CAUSAL)) };
        // The staged epilogue writes dK and dV over K, V and the Q/dO ring, which a persistent
        // block's next unit loads while this one's are stored.
        const { assert!(EPI == 0 || !PERSISTENT) };
        let [q_map, k_map, v_map, do_map, lse_map, delta_map] = maps;
        let tid = thread_idx_x();
        let panel = panel_bytes(D);
        let layout = Layout { base: (dynamic_shared_address() + 1023) & !1023, panel, dq_bytes: dq_tile_bytes(D) };
        if tid == 0 {
            layout.kv_full().init(1);
            // One arrival per consumer warp.
            layout.kv_empty().init(8);
            // One release per consumer warp.
            layout.ring().init(8);
            fence_init();
        }
        sync_threads();
        // Divisors kept nonzero (`max(1)`) so that no panic path is compiled: ptxas 13.0
        // crashes (SIGSEGV) on a call into core's panic functions from both sides of a
        // `setmaxnreg` split (seen 2026-11-27 on this kernel's rotation below).
        let heads_kv = problem.heads_kv.max(1);
        // `LONGEST_FIRST` (causal, one key block per block: `_late_lpt`): the blocks in
        // `longest_first` order (key block 0's walk is the longest), so the grid's tail is short
        // walks. Otherwise block (x, y) is key block x of head row y.
        let (x, by) = if CAUSAL && !STAGGER && LONGEST_FIRST {
            let linear = block_idx_x() + grid_dim_x() * block_idx_y();
            crate::attention::longest_first(linear, grid_dim_x(), grid_dim_y())
        } else {
            (block_idx_x(), block_idx_y())
        };
        let (b_block, hk_block) = (by / heads_kv, by % heads_kv);
        let group = problem.heads_q / heads_kv;
        let seq_pad = padded_seq(problem.seq_q);
        let tiles = seq_pad / BQ;
        // This block's key blocks ("units", one after the other): with the causal mask and
        // `STAGGER`, blocks `x` and `nkb - 1 - x` (the longest walk with the shortest, so every
        // block does about the same work: [`blocks_x`]); `PERSISTENT` (a grid of at most one
        // block per SM), units `block + u · grid` of the `nkb · batch · heads_kv` (key block
        // fastest, so the blocks running together share a head's Q and dO in L2, as the
        // one-block-per-unit grid's do); else block `x`.
        let nkb = problem.seq_kv.div_ceil(BN).max(1);
        let paired = CAUSAL && STAGGER;
        let stride = grid_dim_x().max(1);
        let units_total = nkb * problem.batch * heads_kv;
        // `DYNAMIC`: the units are taken from the counter `next` (the producer's thread fetches
        // the next as it starts one and hands each to the others through `unit_slot`, published
        // by `kv_full`; `units_total` or more: none left), so a block that falls behind takes
        // fewer; the loops below (`units` = u32::MAX) run until that end mark.
        let decode = |linear: u32| {
            let row = linear / nkb;
            (linear % nkb, row / heads_kv, row % heads_kv)
        };
        let units = if DYNAMIC {
            u32::MAX
        } else if PERSISTENT {
            units_total.saturating_sub(block_idx_x()).div_ceil(stride)
        } else if paired && nkb - 1 - x > x {
            2
        } else {
            1
        };
        // Unit `u`'s key block and its head row `b · heads_kv + hk`, as `(kb, b, hk)`.
        let unit = |u: u32| {
            if PERSISTENT { decode(block_idx_x() + u * stride) } else { (if u == 0 { x } else { nkb - 1 - x }, b_block, hk_block) }
        };
        let walk = |u: u32| Walk::new::<CAUSAL, STAGGER>(unit(u).0, tiles, group);
        let total_steps = if DYNAMIC {
            // Not known here: the adding warp arrives after every tile, the consumers wait once more at the end.
            u32::MAX
        } else if PERSISTENT {
            // Every unit has the same walk without the mask.
            walk(0).steps * units
        } else {
            walk(0).steps + if units == 2 { walk(1).steps } else { 0 }
        };
        // A consumer's `dQ` tile is full (the consumer's 128 threads arrive, the adding warp
        // waits) and empty again (the adding warp arrives, the consumer waits before it writes
        // the next one).
        // SAFETY (both): ids 6..=9 are the dQ hand-offs' only, always with 160 threads (one
        // consumer warpgroup and the producer's warp).
        let dq_full = |c: u32| unsafe { NamedBarrier::new(6 + c, 160) };
        let dq_empty = |c: u32| unsafe { NamedBarrier::new(8 + c, 160) };
        if tid / 128 == 0 {
            // SAFETY: the whole warpgroup executes it; the producer needs few registers.
            unsafe { warpgroup::dealloc_registers::<24>() };
            if tid == 0 {
                // SAFETY: the maps are valid (the kernel's contract); every box starts inside
                // its array or past its end in the position dimension (rows past the end are
                // filled with zeros by the copy engine); each ring slot is free (its `empty`
                // phase waited for) before it is refilled; `next` (`DYNAMIC` only) is the
                // launch's zeroed counter, which only this thread touches, atomically.
                unsafe {
                    for map in maps {
                        TensorMap::acquire(map);
                    }
                    let mut g = 0;
                    let counter = if DYNAMIC { Some(Atomic::from_ptr(next)) } else { None };
                    let mut item = block_idx_x();
                    for u in 0..units {
                        let (kb, b, hk) = if DYNAMIC {
                            if item >= units_total {
                                // None left: the end mark, once the consumers are done with the
                                // previous unit (the slot's last reader of unit u - 2 is done).
                                if u > 0 {
                                    layout.kv_empty().wait((u - 1) & 1);
                                }
                                u32::store_shared(layout.unit_slot(u), item);
                                layout.kv_full().arrive();
                                break;
                            }
                            decode(item)
                        } else {
                            unit(u)
                        };
                        // The next unit, fetched now so that the atomic's latency passes while
                        // this unit's loads are issued.
                        // Saturating: whatever the counter held at the launch, the units handed
                        // out stay distinct (`stride + c` for distinct `c`, all past the grid's
                        // first units `block_idx_x()`), so no two blocks write one key block of
                        // dK and dV.
                        let following = counter.map_or(0, |c| stride.saturating_add(c.fetch_add(1)));
                        let w = Walk::new::<CAUSAL, STAGGER>(kb, tiles, group);
                        let kv = |u: u32| {
                            if u > 0 {
                                // Both consumers are done with the previous unit's K and V.
                                layout.kv_empty().wait((u - 1) & 1);
                            }
                            if DYNAMIC {
                                // Read for unit u - 2 by the consumers (done: they finished unit
                                // u - 1) and the adding warp (at most a unit behind them).
                                u32::store_shared(layout.unit_slot(u), item);
                            }
                            layout.kv_full().arrive_expect_tx(4 * panel);
                            for half in 0..2 {
                                for c in 0..D / 64 {
                                    let at = problem.coords(64 * c, w.k0 + 64 * half, hk, b);
                                    TensorMap::load_4d(k_map, layout.k(half) + c * SLAB, layout.kv_full(), at);
                                    TensorMap::load_4d(v_map, layout.v(half) + c * SLAB, layout.kv_full(), at);
                                }
                            }
                        };
                        // `PERSISTENT`: the first steps' Q and dO of a later unit are loaded
                        // before its K and V (their ring slots free up during the previous
                        // unit's last steps; K and V only after its last), so a unit starts
                        // with its first tiles in and waits only for K and V, which load
                        // while the consumers store the previous unit's dK and dV.
                        let prefetch = PERSISTENT && u > 0;
                        let early = STAGES.min(w.steps);
                        if !prefetch {
                            kv(u);
                        }
                        for n in 0..w.steps {
                            if prefetch && n == early {
                                kv(u);
                            }
                            let (h, q0) = w.at(n, hk * group);
                            let slot = Ring::<STAGES>::slot(g);
                            let full = layout.ring().produce(g, 2 * panel + STATS_BYTES);
                            let row = ((b * problem.heads_q + h) * seq_pad + q0) as i32;
                            TensorMap::load_1d(lse_map, layout.stats(slot), full, row);
                            TensorMap::load_1d(delta_map, layout.stats(slot) + BQ * 4, full, row);
                            for c in 0..D / 64 {
                                let at = problem.coords(64 * c, q0, h, b);
                                TensorMap::load_4d(q_map, layout.q(slot) + c * SLAB, full, at);
                                TensorMap::load_4d(do_map, layout.dout(slot) + c * SLAB, full, at);
                            }
                            g += 1;
                        }
                        if prefetch && early >= w.steps {
                            kv(u);
                        }
                        item = following;
                    }
                }
            } else if BULK_DQ && tid / 32 == 1 {
                // The second warp adds the consumers' dQ tiles to dq_acc, one bulk reduction
                // per consumer per step, issued by lane 0.
                let lane = tid % 32;
                // `CONVERT` on this path (`_cvt`, session 21): this warp's arrival on both
                // consumers' shares of the tile of query head `h`, queries `q0..`, of batch entry
                // `b`, once lane 0 has waited for its reductions of them to complete; the
                // arrival that completes a share's count converts it (`convert_share_if_last`).
                // Called a step after the reductions (or after a unit's last step), so the wait is
                // normally over; the consumers never wait for it (the hand-offs are done first).
                let arrive_bulk = |b: u32, h: u32, q0: u32| {
                    let bhq = b * problem.heads_q + h;
                    let contributors = if CAUSAL { (q0 / BQ / 2 + 1).min(nkb) } else { nkb };
                    for c in 0..2 {
                        let at = dq_acc_index(D, tiles, bhq, q0 / BQ, 0, 0) + (c * BQ * D / 2) as usize;
                        // SAFETY: `at` starts consumer c's share of the tile (inside dq_acc, 16-byte
                        // aligned: a multiple of 4 f32 from its aligned start), which this block's
                        // bulk reduction (complete: waited for above) added to; the counter of
                        // (tile, c) lies inside `dq_count` (`dq_count_len`, checked at the launch);
                        // `dq_out` holds the shape's `B·Hq·seq_q·D` elements, 4-byte aligned
                        // (checked), of which this warp writes only the share's, and only when
                        // the counter hands it the last arrival (at most once per launch:
                        // `inc_wrapping`); the whole warp calls it with the same arguments.
                        unsafe {
                            convert_share_if_last::<D, F16>(
                                dq_acc.add(at),
                                dq_count.add(dq_count_index(tiles, bhq, q0 / BQ, c, 0)),
                                contributors,
                                dq_out,
                                problem,
                                (b, h, q0),
                                (c, lane),
                            )
                        };
                    }
                };
                let mut g = 0;
                for u in 0..units {
                    let (kb, b, hk) = if DYNAMIC {
                        // The unit (published with its K and V; this warp is at most one unit
                        // behind the consumers, so the phase cannot have moved on twice).
                        layout.kv_full().wait(u & 1);
                        // SAFETY: the slot, written before the arrival waited for.
                        let item = unsafe { u32::load_shared(layout.unit_slot(u)) };
                        if item >= units_total {
                            break;
                        }
                        decode(item)
                    } else {
                        unit(u)
                    };
                    let w = Walk::new::<CAUSAL, STAGGER>(kb, tiles, group);
                    for n in 0..w.steps {
                        let (h, q0) = w.at(n, hk * group);
                        let bhq = b * problem.heads_q + h;
                        for c in 0..2 {
                            dq_full(c).sync();
                            if lane == 0 {
                                let at = dq_acc_index(D, tiles, bhq, q0 / BQ, 0, 0) + (c * BQ * D / 2) as usize;
                                // SAFETY: `at` starts consumer c's share of tile (bhq, q0 / 64), 16-byte
                                // aligned (a multiple of 4 f32 from dq_acc, which the contract aligns)
                                // and inside dq_acc (`B·Hq·D·seq_pad` f32); only atomic adds touch
                                // dq_acc during the launch. The consumer wrote its tile and fenced
                                // before arriving on `dq_full(c)`, and writes it again only after
                                // this warp arrives on `dq_empty(c)`, after the read has finished.
                                unsafe { bulk_reduce_add_f32(dq_acc.add(at), layout.dq(c), layout.dq_bytes) };
                                store_commit();
                                store_wait_read::<0>();
                            }
                            sync_warp(u32::MAX);
                            if DYNAMIC || g + 1 < total_steps {
                                dq_empty(c).arrive();
                            }
                        }
                        if CONVERT && n >= LAG {
                            // Step n - LAG's two reductions (all but the newest 2 LAG groups)
                            // are complete: arrive on them, converting a share that is done.
                            if lane == 0 {
                                if LAG == 1 {
                                    store_wait::<2>();
                                } else {
                                    store_wait::<4>();
                                }
                            }
                            let (h, q0) = w.at(n - LAG, hk * group);
                            arrive_bulk(b, h, q0);
                        }
                        g += 1;
                    }
                    if CONVERT && w.steps > 0 {
                        // The unit's last LAG steps' reductions.
                        if lane == 0 {
                            store_wait::<0>();
                        }
                        for n in w.steps.saturating_sub(LAG)..w.steps {
                            let (h, q0) = w.at(n, hk * group);
                            arrive_bulk(b, h, q0);
                        }
                    }
                }
                if lane == 0 {
                    store_wait::<0>();
                }
            }
            return;
        }
        // SAFETY: the whole warpgroup executes it; 2 x 128 x 240 + 128 x 24 registers fit.
        unsafe { warpgroup::alloc_registers::<240>() };
        let consumer = tid / 128 - 1;
        let lane = tid % 32;
        let warp = (tid % 128) / 32;
        // This thread's key rows in its consumer's 64 (the accumulator rows): `row0`, `row0 + 8`.
        let row0 = 16 * warp + lane / 4;
        // This thread's query columns in a tile: `8 i + 2 (lane % 4) + j`.
        let col0 = 2 * (lane % 4);
        let scale_log2 = problem.scale * core::f32::consts::LOG2_E;
        // The threads of both consumers (each reads the other's `dSᵀ`) meet here between
        // writing it and the `wgmma`s reading it.
        // SAFETY: id 4 is used here with 256 threads (the two consumer warpgroups) only.
        let written = unsafe { NamedBarrier::new(4, 256) };
        // Not `[0.0; 64]`: a repeat expression becomes a store loop that keeps the array in
        // local memory (docs/performance.md). SAFETY: all-zero bits are 0.0.
        let (mut dk_acc, mut dv_acc): ([f32; 64], [f32; 64]) = unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
        // SAFETY: as above.
        let (mut s, mut dp, mut dq): ([f32; 32], [f32; 32], [f32; 32]) = unsafe { (core::mem::zeroed(), core::mem::zeroed(), core::mem::zeroed()) };
        // SAFETY: as above. (dQᵀ's tile at D = 64: 64 x 32.)
        let mut dq_narrow: [f32; 16] = unsafe { core::mem::zeroed() };
        // The A fragments of P and dS. SAFETY: as above.
        let mut frags: [Fragments; 2] = unsafe { core::mem::zeroed() };
        // The `wgmma` descriptors, built once: a descriptor's low 14 bits are its address / 16,
        // so the one of `address + offset` is `desc(address) + offset / 16` ([`at`]).
        let k_mine = Descriptor::k_major_128b(layout.k(consumer)).0;
        let v_mine = Descriptor::k_major_128b(layout.v(consumer)).0;
        // Slot 0's Q and dO tiles, K-major (scores) and N-major (dV, dK); slot `j` is `2 j`
        // panels further.
        let q_k = Descriptor::k_major_128b(layout.q(0)).0;
        let do_k = Descriptor::k_major_128b(layout.dout(0)).0;
        let q_n = Descriptor::n_major_128b(layout.q(0), SLAB).0;
        let do_n = Descriptor::n_major_128b(layout.dout(0), SLAB).0;
        // dQᵀ's A (Kᵀ: head columns 64c.. at D = 128) and B (dSᵀ buffer 0 of consumer 0; at
        // D = 64 queries 32c..).
        let (m_dq, n_dq) = if D == 128 { (consumer, 0) } else { (0, 32 * consumer) };
        let kt_n = Descriptor::n_major_128b(layout.k(0) + m_dq * SLAB, SLAB).0;
        let ds_n = Descriptor::n_major_128b(layout.ds(0, 0) + 2 * n_dq, SLAB).0;
        // This thread's `lse2` entries in slot 0's row (`delta`'s are 256 bytes further).
        let stats_me = layout.stats(0) + 4 * col0;
        // This thread's index in its consumer (the accumulator order of `dq_acc_index`), and
        // where its first quad of the consumer's `dQ` tile goes (quad j: 2 KiB further).
        let me = (tid % 128) as usize;
        let dq_me = layout.dq(consumer) + 16 * me as u32;
        // `CONVERT` (`_red_cvt`, in-kernel conversion, session 20): this warp's arrival on its rows of the tile
        // of query head `h`, queries `q0..`, of batch entry `b`, after its lanes' adds to them:
        // the rows are done once every key block walking the tile has added them (all of a
        // head's key blocks, or with the causal mask those starting at or before the tile's
        // last query), and the warp whose arrival completes the count converts them
        // (`convert_if_last`). Called a step after the adds (or after a unit's last step), so
        // that the fence's wait for them overlaps the tensor cores' `dV` and `dK`.
        let arrive = |b: u32, h: u32, q0: u32| {
            let bhq = b * problem.heads_q + h;
            let at = dq_acc_index(D, tiles, bhq, q0 / BQ, 0, 0) + (consumer * BQ * D / 2) as usize;
            let contributors = if CAUSAL { (q0 / BQ / 2 + 1).min(nkb) } else { nkb };
            let count_at = dq_count_index(tiles, bhq, q0 / BQ, consumer, warp);
            // SAFETY: `at + 4 me` is this thread's first quad of its consumer's share of the
            // tile (its quads `j·128 + me`, which it added to); `count_at` lies inside
            // `dq_count` (checked at the launch: `dq_count_len`); `dq_out` holds the shape's
            // `B·Hq·seq_q·D` elements (checked), of which this warp writes only its rows of
            // this tile, and only when the counter hands it the last arrival (at most one warp
            // per launch: `inc_wrapping`); the whole warp calls it with the same arguments.
            unsafe {
                convert_if_last::<D, F16>(
                    dq_acc.add(at + 4 * me),
                    dq_count.add(count_at),
                    contributors,
                    dq_out,
                    problem,
                    (b, h, q0),
                    (consumer, row0, col0, lane),
                )
            };
        };
        let mut g = 0;
        for u in 0..units {
            let (kb, b, hk) = if DYNAMIC {
                layout.kv_full().wait(u & 1);
                // SAFETY: the slot, written before the arrival waited for; rewritten only after
                // this warp has finished the next unit.
                let item = unsafe { u32::load_shared(layout.unit_slot(u)) };
                if item >= units_total {
                    if BULK_DQ && g > 0 {
                        // The adding warp's arrival after the last tile.
                        dq_empty(consumer).sync();
                    }
                    break;
                }
                decode(item)
            } else {
                unit(u)
            };
            let w = Walk::new::<CAUSAL, STAGGER>(kb, tiles, group);
            let k0 = w.k0;
            let key0 = k0 + 64 * consumer + row0;
            if !DYNAMIC {
                layout.kv_full().wait(u & 1);
            }
            if u > 0 {
                // A new unit's accumulators. SAFETY: all-zero bits are 0.0.
                (dk_acc, dv_acc) = unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
            }
            // Every `unsafe` block below issues or waits for `wgmma`s: the consumer warpgroup's 128
            // threads run this code together (the branch is on `tid / 128`, the loop bounds are the
            // block's); the shared tiles a group reads stay untouched until the arrival on their
            // `empty` barrier (after the wait for that group) or, for `dSᵀ`, until the next-but-one
            // step (its two buffers alternate; the barrier `written` of the step between orders it);
            // the registers of a group in flight are fenced before its issue and not touched until
            // it has been waited for.
            for n in 0..w.steps {
                let (h, q0) = w.at(n, hk * group);
                let slot = Ring::<STAGES>::slot(g);
                layout.ring().consume(g);
                // This slot's tiles: Q and dO `2 slot` panels after slot 0's.
                let slot_off = 2 * panel * slot;
                let (q_k, do_k, q_n, do_n) = (at(q_k, slot_off), at(do_k, slot_off), at(q_n, slot_off), at(do_n, slot_off));
                // SAFETY: see above.
                unsafe {
                    wgmma::fence();
                    unroll::<8>(|step| {
                        let step = step as u32;
                        if step < D / 16 {
                            let offset = (step / 4) * SLAB + 32 * (step % 4);
                            ss::<F16>(&mut s, at(k_mine, offset), at(q_k, offset), step == 0);
                        }
                    });
                    wgmma::commit();
                    unroll::<8>(|step| {
                        let step = step as u32;
                        if step < D / 16 {
                            let offset = (step / 4) * SLAB + 32 * (step % 4);
                            ss::<F16>(&mut dp, at(v_mine, offset), at(do_k, offset), step == 0);
                        }
                    });
                    wgmma::commit();
                    wgmma::wait::<1>();
                }
                fence_accumulators_32(&mut s);
                // This thread's `lse2` (then `delta`) pairs in this slot's rows (padded rows: +inf
                // and 0): columns `8 i + col0`, `+ 1` at `stats + 32 i`.
                let stats = stats_me + STATS_BYTES * slot;
                // SAFETY: 8-byte aligned (col0 even) pairs inside this slot's rows (8 i + col0 + 1 <
                // 64), which the copy engine has written (the slot's `full` phase waited for) and
                // nobody writes until this warp releases the slot.
                let pair = |offset: u32| unsafe { <f32 as SharedX2>::load_x2(stats + offset) };
                // Pᵀ, masked where a key is past the sequence or (causal) after the query (a
                // branch the whole warp takes the same way: the other tiles skip the mask).
                let mut p = s;
                let edge = k0 + BN > problem.seq_kv || (CAUSAL && k0 + 64 * consumer + 63 > q0);
                unroll::<8>(|i| {
                    let lse = pair(32 * i as u32);
                    unroll::<4>(|e| p[4 * i + e] = (s[4 * i + e] * scale_log2 - lse[e & 1]).fast_exp2());
                });
                if edge {
                    unroll::<8>(|i| {
                        unroll::<4>(|e| {
                            let col = 8 * i as u32 + col0 + (e & 1) as u32;
                            let key = key0 + 8 * (e >> 1) as u32;
                            if key >= problem.seq_kv || (CAUSAL && key > q0 + col) {
                                p[4 * i + e] = 0.0;
                            }
                        })
                    });
                }
                if EARLY_DV {
                    // dV += Pᵀ dO now: the tensor cores run it while dSᵀ is made and exchanged.
                    frags[0] = fragments::<F16>(&p);
                    fence_fragments(&mut frags);
                    fence_accumulators_64(&mut dv_acc);
                    // SAFETY: see above (P's fragments and dV are not touched until the wait for
                    // this group, below).
                    unsafe {
                        wgmma::fence();
                        unroll::<4>(|t| rs::<D, F16>(&mut dv_acc, frags[0][t], at(do_n, 2048 * t as u32)));
                        wgmma::commit();
                        // dPᵀ is done; dV may still run.
                        wgmma::wait::<1>();
                    }
                } else {
                    // SAFETY: see above.
                    unsafe { wgmma::wait::<0>() };
                }
                fence_accumulators_32(&mut dp);
                let mut ds = dp;
                unroll::<8>(|i| {
                    // `delta` follows `lse2` in the slot.
                    let delta = pair(BQ * 4 + 32 * i as u32);
                    unroll::<4>(|e| ds[4 * i + e] = p[4 * i + e] * (dp[4 * i + e] - delta[e & 1]));
                });
                if EARLY_DV {
                    frags[1] = fragments::<F16>(&ds);
                } else {
                    frags = [fragments::<F16>(&p), fragments::<F16>(&ds)];
                }
                // dSᵀ to shared memory, N-major for `dQᵀ = Kᵀ dSᵀ`: row = key, 64 queries per row,
                // with `stmatrix` (the accumulator layout is that of its 8x8 matrices: register j
                // of K step t holds keys `16 warp + 8 (j & 1) ..`, queries `16 t + 8 (j >> 1) ..`;
                // lane l gives the address of row `l % 8` of matrix `l / 8`).
                let ds_tile = layout.ds(consumer, g % 2);
                let matrix = lane / 8;
                let ds_key = 16 * warp + lane % 8 + 8 * (matrix & 1);
                unroll::<4>(|t| {
                    let address = Descriptor::swizzled_128b_address(ds_tile, ds_key, 16 * t as u32 + 8 * (matrix >> 1));
                    // SAFETY: the whole warp runs it; each row address is a 16-byte chunk (8
                    // queries) of this consumer's `dSᵀ` buffer (key < 64, query < 64: 8 KiB from
                    // `ds_tile`, inside the requested shared memory), 16-byte aligned; no `wgmma`
                    // reads this buffer now (see above), and each chunk has one writer.
                    unsafe { ldmatrix::store_x4(address, frags[1][t]) };
                });
                fence_accumulators_64(&mut dk_acc);
                if EARLY_DV {
                    // dK += dSᵀ Q from registers now too (after `stmatrix` has read dS's fragments,
                    // which nothing touches again until this group is waited for): the tensor
                    // cores run dV and dK while the consumers exchange dSᵀ.
                    // Not P's fragments: the dV group in flight reads them.
                    fence_fragment(&mut frags[1]);
                    // SAFETY: see above.
                    unsafe {
                        wgmma::fence();
                        unroll::<4>(|t| rs::<D, F16>(&mut dk_acc, frags[1][t], at(q_n, 2048 * t as u32)));
                        wgmma::commit();
                    }
                }
                if CONVERT && !BULK_DQ && n > 0 {
                    // The previous step's adds (dV and dK run meanwhile).
                    let (h, q0) = w.at(n - 1, hk * group);
                    arrive(b, h, q0);
                }
                fence_proxy_async_shared();
                written.sync();
                fence_accumulators_32(&mut dq);
                wgmma::fence_accumulators_16(&mut dq_narrow);
                if !EARLY_DV {
                    fence_fragments(&mut frags);
                    fence_accumulators_64(&mut dv_acc);
                }
                // dQᵀ over all 128 keys, split between the consumers without a branch (a `wgmma`
                // under a condition the compiler cannot prove uniform serialises them all, C7520):
                // at D = 128 consumer c takes head columns 64c.. (an m64n64 tile), at D = 64 the
                // queries 32c.. (an m64n32 tile).
                // SAFETY: see above.
                unsafe {
                    wgmma::fence();
                    // Kᵀ: rows (M) are head columns, k the block's 128 keys (16 per step: K's panel
                    // t / 4); dSᵀ: k the keys (consumer t / 4's buffer), n the queries.
                    unroll::<8>(|t| {
                        let t = t as u32;
                        let a = at(kt_n, panel * (t / 4) + 2048 * (t % 4));
                        let b = at(ds_n, SLAB * (2 * (t / 4) + g % 2) + 2048 * (t % 4));
                        if D == 128 {
                            ss_mn::<F16>(&mut dq, a, b, t > 0);
                        } else {
                            ss_mn_narrow::<F16>(&mut dq_narrow, a, b, t > 0);
                        }
                    });
                    wgmma::commit();
                    if EARLY_DV {
                        // dQ is the newest group; dV and dK (issued before it) are done too.
                        wgmma::wait::<0>();
                    } else {
                        unroll::<4>(|t| rs::<D, F16>(&mut dv_acc, frags[0][t], at(do_n, 2048 * t as u32)));
                        unroll::<4>(|t| rs::<D, F16>(&mut dk_acc, frags[1][t], at(q_n, 2048 * t as u32)));
                        wgmma::commit();
                        // The dQ group is done; dV and dK may still run.
                        wgmma::wait::<1>();
                    }
                }
                fence_accumulators_32(&mut dq);
                wgmma::fence_accumulators_16(&mut dq_narrow);
                if EARLY_DV {
                    fence_accumulators_64(&mut dv_acc);
                    fence_accumulators_64(&mut dk_acc);
                }
                // This thread's dQ registers 4j..4j + 4, in `dq_acc_index`'s order.
                let quad = |j: usize| -> [f32; 4] {
                    if D == 128 {
                        [dq[4 * j], dq[4 * j + 1], dq[4 * j + 2], dq[4 * j + 3]]
                    } else {
                        [dq_narrow[4 * j], dq_narrow[4 * j + 1], dq_narrow[4 * j + 2], dq_narrow[4 * j + 3]]
                    }
                };
                if BULK_DQ {
                    if g > 0 {
                        // The adding warp has read the previous step's tile.
                        dq_empty(consumer).sync();
                    }
                    unroll::<8>(|j| {
                        if j < D as usize / 16 {
                            // SAFETY: 16-byte aligned (the tile starts on 1 KiB), inside this
                            // consumer's tile (`(j·128 + t)·4 + 4 <= 64·D/2` f32), which nobody
                            // reads until the arrival below; each thread writes its own quads.
                            unsafe { <f32 as SharedX4>::store_x4(dq_me + 2048 * j as u32, quad(j)) };
                        }
                    });
                    fence_proxy_async_shared();
                    dq_full(consumer).arrive();
                } else {
                    let at = dq_acc_index(D, tiles, b * problem.heads_q + h, q0 / BQ, 0, 0) + (consumer * BQ * D / 2) as usize;
                    unroll::<8>(|j| {
                        if j < D as usize / 16 {
                            // SAFETY: this consumer's share of the tile (`dq_acc_index`), inside
                            // dq_acc, 16-byte aligned (a multiple of 4 f32 from its start, which the
                            // contract aligns); only atomic accesses touch it during the launch.
                            unsafe { add_quad(dq_acc.add(at + 4 * (j * 128 + me)), quad(j)) };
                        }
                    });
                    // `CONVERT` (session 20): this warp's arrival on the tile's rows comes in the
                    // next step, while its `dV`/`dK` products run (`arrive` above).
                }
                // SAFETY: see above.
                unsafe { wgmma::wait::<0>() };
                fence_accumulators_64(&mut dv_acc);
                fence_accumulators_64(&mut dk_acc);
                if lane == 0 {
                    // Q and dO of this slot are read by nothing any more.
                    layout.ring().release(g);
                }
                g += 1;
            }
            if lane == 0 {
                // This warp's reads of the unit's K and V (its wgmmas, all waited for) are done.
                layout.kv_empty().arrive();
            }
            // `PERSISTENT`: the unit's head row again, from an opaque copy of `u`, so that the
            // step loop does not hold `b` and `hk` (the bulk-dQ loop does not read them) on top
            // of the unit counters: at D 128 every register the loop holds is one more spill.
            let (b, hk) = if DYNAMIC {
                // SAFETY: as above (the slot is rewritten for unit u + 2).
                let (_, b, hk) = decode(unsafe { u32::load_shared(layout.unit_slot(opaque(u))) });
                (b, hk)
            } else if PERSISTENT {
                let (_, b, hk) = unit(opaque(u));
                (b, hk)
            } else {
                (b, hk)
            };
            if CONVERT && !BULK_DQ && w.steps > 0 {
                // The unit's last step's adds.
                let (h, q0) = w.at(w.steps - 1, hk * group);
                arrive(b, h, q0);
            }
            // `EPI` 1 and 2 (session 24, trials): the block's last unit's dK and dV through shared
            // memory (`crate::attention::staging`), in whole rows, 16 bytes a lane (1) or one bulk
            // copy a row (2), when both start 16-byte aligned.
            let staged = EPI != 0 && u + 1 == units && (dk as usize).is_multiple_of(16) && (dv as usize).is_multiple_of(16);
            if staged {
                // Both consumers have waited for every `wgmma` of the block's last unit, and the
                // producer loads nothing more: K, V and the Q/dO ring (the first `4 + 2 STAGES`
                // panels, at least 2 x 128 staging rows) are free. The adding warp reads only the
                // consumers' dQ tiles, after them.
                written.sync();
                let stride = staging::row_bytes(D);
                let first = 64 * consumer + 16 * warp;
                let (dk_rows, dv_rows) = (layout.base + first * stride, layout.base + (BN + first) * stride);
                let row_at = |out: *mut u32| {
                    move |r: u32| {
                        let key = k0 + first + r;
                        // Inside dK / dV (key < seq_kv), 16-byte aligned (the array is, and a row
                        // is 2D bytes in either layout).
                        (key < problem.seq_kv).then(|| out.cast::<u8>().wrapping_add(2 * problem.kv_at::<D>(b, hk, key)))
                    }
                };
                // SAFETY: the warp's lanes run it together; its 16 rows of each staging area are
                // its own (the areas: free, above); each row of dK and dV is this warp's alone
                // (this block owns keys k0.. of head (b, hk), this warp keys `first..first + 16`
                // of them); with bulk copies the consumer waits for them before the block exits.
                unsafe {
                    staging::write::<D>(&dk_acc, [problem.scale; 2], dk_rows, lane, pack::<F16>);
                    staging::write::<D>(&dv_acc, [1.0; 2], dv_rows, lane, pack::<F16>);
                    if EPI == 2 {
                        staging::copy_out::<D, true>(dk_rows, lane, row_at(dk));
                        staging::copy_out::<D, true>(dv_rows, lane, row_at(dv));
                    } else {
                        staging::copy_out::<D, false>(dk_rows, lane, row_at(dk));
                        staging::copy_out::<D, false>(dv_rows, lane, row_at(dv));
                    }
                }
                continue;
            }
            // Epilogue: this thread's two key rows of dK (times the scale) and dV.
            unroll::<2>(|half| {
                let key = key0 + 8 * half as u32;
                if key < problem.seq_kv {
                    let at = problem.kv_at::<D>(b, hk, key);
                    unroll::<16>(|i| {
                        if i < D as usize / 8 {
                            let col = 8 * i + col0 as usize;
                            let (e0, e1) = (4 * i + 2 * half, 4 * i + 2 * half + 1);
                            // SAFETY: key < seq_kv and col + 1 < D: inside dK and dV (the kernel's
                            // contract); this block owns keys k0.. of head (b, hk), this thread the
                            // columns `col, col + 1` of its two rows.
                            unsafe {
                                *dk.add((at + col) / 2) = pack::<F16>(dk_acc[e0] * problem.scale, dk_acc[e1] * problem.scale);
                                *dv.add((at + col) / 2) = pack::<F16>(dv_acc[e0], dv_acc[e1]);
                            }
                        }
                    });
                }
            });
        }
        if EPI == 2 {
            // The block's shared memory (the bulk copies' source) must outlive the copies.
            store_wait::<0>();
        }
    }

    /// The arguments of every backward instance, as the host passes them (host builds only):
    /// the six maps (Q, K, V, dO, `lse2`, `delta`), the memory they describe (the launch
    /// declares its reads of it), the dQ accumulator, dK and dV, the problem and the `_dyn`
    /// instances' work counter. The 16-bit elements are bf16 or f16 bits, as the instance's
    /// name says. [`GpuBackwardArgs`] on a GPU, [`CpuBackwardArgs`] on the CPU executor.
    #[cfg(not(target_arch = "nvptx64"))]
    pub struct BackwardArgs<M, R64, R, S, F, W, N> {
        /// The address of the six maps (Q, K, V, dO, `lse2`, `delta`; 64-byte aligned): the
        /// start of `map_words`.
        pub maps: M,
        /// The memory holding them ([`MAP_WORDS`] words at least), which the launch declares.
        pub map_words: R64,
        /// Q, dO (`B·Hq·seq_q·D` elements), K, V (`B·Hkv·seq_kv·D`): what `maps[0..4]` describe.
        pub q: R,
        /// K.
        pub k: R,
        /// V.
        pub v: R,
        /// dO.
        pub dout: R,
        /// The padded `lse·log2 e` rows (`B·Hq·seq_pad` f32): what `maps[4]` describes.
        pub lse2: S,
        /// The padded `delta` rows (`maps[5]`).
        pub delta: S,
        /// The dQ accumulator (at least `B·Hq·D·seq_pad` f32, 16-byte aligned, zeroed for a
        /// correct result).
        pub dq_acc: F,
        /// dK (at least `B·Hkv·seq_kv·D` elements, 4-byte aligned).
        pub dk: W,
        /// dV (as dK).
        pub dv: W,
        /// The shape.
        pub problem: Problem,
        /// The `_dyn` instances' work counter (a `u32`, zeroed for a complete result).
        pub next: N,
        /// dQ (`B·Hq·seq_q·D` elements), which the instances that convert it themselves
        /// ([`BackwardKernel::converts_dq`]: `_red_cvt`) write; the others do not touch it.
        pub dq: W,
        /// Their arrival counters ([`dq_count_len`], zeroed for a complete result; a launch
        /// that completes leaves them zeroed, as it leaves `dq_acc`); the others do not touch it.
        pub dq_count: N,
    }

    /// [`BackwardArgs`] on a GPU.
    #[cfg(not(target_arch = "nvptx64"))]
    pub type GpuBackwardArgs<'a> = BackwardArgs<
        ferrocuda_host::DevicePtr<TensorMap>,
        &'a dyn ferrocuda_host::DeviceRead<u64>,
        &'a dyn ferrocuda_host::DeviceRead<u16>,
        &'a dyn ferrocuda_host::DeviceRead<f32>,
        &'a mut dyn ferrocuda_host::DeviceWrite<f32>,
        &'a mut dyn ferrocuda_host::DeviceWrite<u16>,
        &'a mut dyn ferrocuda_host::DeviceWrite<u32>,
    >;
    /// [`BackwardArgs`] on the CPU executor (emulated maps).
    #[cfg(not(target_arch = "nvptx64"))]
    pub type CpuBackwardArgs<'a> = BackwardArgs<*const TensorMap, &'a [u64], &'a [u16], &'a [f32], &'a mut [f32], &'a mut [u16], &'a mut [u32]>;

    /// One sm_90 backward instance, for the host to pick by name (host builds only).
    #[cfg(not(target_arch = "nvptx64"))]
    #[derive(Clone, Copy, Debug)]
    pub struct BackwardKernel {
        /// The kernel's symbol (its name).
        pub name: &'static str,
        /// Whether it converts `dQ` itself (the `_red_cvt` instances, session 20: the last warp to
        /// add to its rows of a tile converts them and zeroes them in the accumulator), so that
        /// no conversion kernel follows it.
        pub converts_dq: bool,
        /// The kernel as loaded into a context (for its shared-memory attribute).
        pub function: fn(&ferrocuda_host::Context) -> Result<ferrocuda_host::Function, ferrocuda_host::Error>,
        /// Its typed launcher.
        ///
        /// # Safety
        /// The instance's `# Safety` contract (the maps) holds for this launch.
        pub launch: unsafe fn(&ferrocuda_host::Stream, ferrocuda_host::LaunchConfig, GpuBackwardArgs<'_>) -> Result<(), ferrocuda_host::Error>,
        /// Its CPU launcher.
        ///
        /// # Safety
        /// As for `launch`, with emulated maps (`TensorMap::emulated`) of the host slices.
        pub launch_cpu: unsafe fn(
            &ferrocuda_device::cpu::CpuExecutor,
            ferrocuda_device::cpu::LaunchConfig,
            CpuBackwardArgs<'_>,
        ) -> Result<(), ferrocuda_device::cpu::CpuError>,
    }

    /// The backward instance named `name`, if there is one (host builds only).
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn backward_kernel(name: &str) -> Option<&'static BackwardKernel> {
        BACKWARD.iter().find(|kernel| kernel.name == name)
    }

    /// What an entry checks before anything else, the same in every thread of the grid (so
    /// either every thread returns before the first barrier or none does): 1-D blocks of
    /// [`THREADS`], at least [`shared_bytes`]`(D)` of dynamic shared memory, the grid of the
    /// instance (`(blocks_x(seq_kv, paired), batch·heads_kv, 1)`, or `(g, 1, 1)` for a
    /// `PERSISTENT` one with at most `u32::MAX` key blocks in all), a problem the body can
    /// index (`heads_q` a nonzero multiple of `heads_kv >= 1`, `batch`, `seq_q`, `seq_kv`
    /// at least 1, fewer than 2^31 padded query rows), `maps` 64-byte aligned and the start of
    /// `map_words`, which holds six maps, the operands' lengths (Q, dO
    /// `B·Hq·seq_q·D`, K, V `B·Hkv·seq_kv·D`, `lse2` and `delta` `B·Hq·seq_pad`: what the maps
    /// must describe; dQ's accumulator at least `B·Hq·D·seq_pad` from a 16-byte aligned start,
    /// dK and dV at least `B·Hkv·seq_kv·D` from a 4-byte aligned one), and for `DYNAMIC` a
    /// counter; for `CONVERT` (the `_red_cvt` instances, which convert `dQ` themselves) `dq` at
    /// least `B·Hq·seq_q·D` elements and `dq_count` at least [`dq_count_len`] counters.
    ///
    /// dQ's ownership (`CONVERT`): element `(b, h, q, d)` is written only by the warp whose
    /// arrival on the counter of its rows of tile `q / 64` ([`dq_count_index`]) sees the last
    /// count, at most one per launch whatever the counters held (`inc_wrapping`), and the
    /// counters' rows are disjoint.
    ///
    /// dK and dV's ownership rests on it: with this grid the blocks' units (key blocks of one
    /// head row) are distinct (block `(x, y)`: key block `x`, and with the causal pairing
    /// `⌈seq_kv/128⌉ - 1 - x`, or the `longest_first` bijection, of head row `y`; a persistent
    /// block its units `block_idx_x + u·grid_dim_x`, or from the counter, saturating), a
    /// unit's keys `< seq_kv` of head `(b, hk)` with `b < batch` lie inside dK and dV, and
    /// within a block each consumer thread writes its own two key rows' column pairs. dQ's
    /// accumulator is only added to, atomically (`red.global.add`, the copy engine's bulk
    /// reductions), inside its checked length.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn launch_ok<const D: u32, const PAIRED: bool, const PERSISTENT: bool, const DYNAMIC: bool, const CONVERT: bool>(
        maps: *const TensorMap,
        map_words: &[u64],
        inputs: [&[u16]; 4],
        stats: [&[f32]; 2],
        dq_acc: &AtomicSlice<f32>,
        dk: &mut UncheckedSlice<u16>,
        dv: &mut UncheckedSlice<u16>,
        problem: Problem,
        next: &AtomicSlice<u32>,
        dq: &mut UncheckedSlice<u16>,
        dq_count: &AtomicSlice<u32>,
    ) -> bool {
        let Problem { seq_q, seq_kv, heads_q, heads_kv, batch, .. } = problem;
        let shape = heads_kv >= 1 && heads_q >= heads_kv && heads_q % heads_kv == 0 && batch >= 1 && seq_q >= 1 && seq_kv >= 1;
        let (b, hq, hkv) = (batch as u64, heads_q as u64, heads_kv as u64);
        let rows = b * hq * padded_seq(seq_q) as u64;
        let key_blocks = seq_kv.div_ceil(BN) as u64 * b * hkv;
        let launch = block_dim_x() == THREADS
            && block_dim_y() == 1
            && block_dim_z() == 1
            && grid_dim_z() == 1
            && dynamic_shared::<u32>().len() >= (shared_bytes(D) / 4) as usize
            && rows < 1 << 31
            && if PERSISTENT {
                grid_dim_y() == 1 && key_blocks <= u32::MAX as u64
            } else {
                grid_dim_x() == blocks_x(seq_kv, PAIRED) && grid_dim_y() as u64 == b * hkv
            };
        let (q_len, kv_len) = (b * hq * seq_q as u64 * D as u64, b * hkv * seq_kv as u64 * D as u64);
        let [q, k, v, dout] = inputs;
        let [lse2, delta] = stats;
        let operands = core::ptr::eq(maps, map_words.as_ptr().cast())
            && map_words.len() >= MAP_WORDS
            && maps.is_aligned()
            && q.len() as u64 == q_len
            && dout.len() as u64 == q_len
            && k.len() as u64 == kv_len
            && v.len() as u64 == kv_len
            && lse2.len() as u64 == rows
            && delta.len() as u64 == rows
            && dq_acc.len() as u64 >= rows * D as u64
            && (dq_acc.as_ptr() as usize).is_multiple_of(16)
            && dk.len() as u64 >= kv_len
            && dv.len() as u64 >= kv_len
            && (dk.as_mut_ptr() as usize).is_multiple_of(4)
            && (dv.as_mut_ptr() as usize).is_multiple_of(4)
            && (!DYNAMIC || !next.is_empty())
            && (!CONVERT || (dq.len() as u64 >= q_len && (dq.as_mut_ptr() as usize).is_multiple_of(4) && dq_count.len() as u64 >= rows / BQ as u64 * 8));
        shape && launch && operands
    }

    macro_rules! kernels {
        ($($name:ident: $d:literal, $causal:literal, $f16:literal, $bulk:literal, $early:literal, $stagger:literal, $lpt:literal, $persistent:literal, $dynamic:literal, $convert:literal $(, epi $epi:literal)?;)*) => {$(
            /// Attention backward (see the module docs), head dimension, mask and element type
            /// in the name (the 16-bit operands are its bits). Launch: 384 threads,
            /// `shared_bytes(D)` of dynamic shared memory, grid `(blocks_x(seq_kv, paired),
            /// batch·heads_kv)` (paired: causal, not `_late`), or for `_persistent` `(g, 1)`
            /// (at most one block per SM is best). The kernel checks the launch and the
            /// operands' lengths and alignment and returns without writing anything otherwise.
            ///
            /// # Safety
            /// `maps` points to six tensor maps (128 bytes each, in the order Q, K, V, dO,
            /// `lse2`, `delta`; the start of `map_words`, 64-byte aligned: checked; not written
            /// during the launch, whose read of `map_words` the launch declares) that describe
            /// exactly `q`, `k`, `v`, `dout` (dims `[D, S, H, B]`, or `[D, H, S, B]`
            /// with `bshd != 0`, of the element type; box [`BOX_BHSD`] or [`BOX_BSHD`], 128-byte
            /// swizzle) and `lse2`, `delta` (1-D f32, box [`STATS_BOX`], no swizzle): the copy
            /// engine writes a box of the map's size into each ring slot, so another box would
            /// overrun the slot's shared memory, and a map of other memory would read memory
            /// the launch did not declare (the kernel cannot read the opaque maps).
            #[kernel(launch_bounds(384, 1))]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name(
                maps: *const TensorMap, map_words: &[u64], q: &[u16], k: &[u16], v: &[u16], dout: &[u16], lse2: &[f32], delta: &[f32],
                dq_acc: AtomicSlice<f32>, mut dk: UncheckedSlice<u16>, mut dv: UncheckedSlice<u16>,
                seq_q: u32, seq_kv: u32, heads_q: u32, heads_kv: u32, bshd: u32, scale: f32, batch: u32, next: AtomicSlice<u32>,
                mut dq: UncheckedSlice<u16>, dq_count: AtomicSlice<u32>,
            ) {
                let problem = Problem { seq_q, seq_kv, heads_q, heads_kv, bshd, scale, batch };
                const DYNAMIC: bool = $dynamic;
                // 0: dQ converted by the conversion kernel; otherwise in the kernel, the arrivals
                // `$convert` steps after the adds (the bulk path; `_red_cvt`: 1).
                const LAG: u32 = $convert;
                const CONVERT: bool = LAG > 0;
                if !launch_ok::<$d, { $causal && $stagger }, $persistent, DYNAMIC, CONVERT>(
                    maps, map_words, [q, k, v, dout], [lse2, delta], &dq_acc, &mut dk, &mut dv, problem, &next, &mut dq, &dq_count,
                ) {
                    return;
                }
                // SAFETY: the maps: the kernel's contract; the launch, the shared memory, the
                // problem, the lengths and alignments: checked above (`launch_ok`, which also
                // says why no two threads write one element of dK or dV, nothing reads them,
                // and dQ's accumulator is only added to atomically); `next` is the launch's
                // counter (an `AtomicSlice`: every access to it is atomic).
                unsafe {
                    backward_body::<$d, $causal, $f16, $bulk, $early, $stagger, $lpt, $persistent, DYNAMIC, CONVERT, LAG, { 0 $(+ $epi)? }>(
                        [0, 1, 2, 3, 4, 5].map(|i| maps.wrapping_add(i)), dq_acc.as_ptr(), dk.as_mut_ptr().cast(), dv.as_mut_ptr().cast(), problem, next.as_ptr(),
                        dq.as_mut_ptr(), dq_count.as_ptr(),
                    )
                }
            }
        )*
            #[cfg(not(target_arch = "nvptx64"))]
            const BACKWARD: &[BackwardKernel] = &[$(BackwardKernel {
                name: $name::SYMBOL,
                converts_dq: $convert > 0,
                function: $name::function,
                // SAFETY: forwarded (the field's contract).
                launch: |stream: &ferrocuda_host::Stream, config: ferrocuda_host::LaunchConfig, a: GpuBackwardArgs<'_>| unsafe {
                    let p = a.problem;
                    $name::launch(
                        stream, config, a.maps, a.map_words, a.q, a.k, a.v, a.dout, a.lse2, a.delta, a.dq_acc, a.dk, a.dv,
                        p.seq_q, p.seq_kv, p.heads_q, p.heads_kv, p.bshd, p.scale, p.batch, a.next, a.dq, a.dq_count,
                    )
                },
                // SAFETY: forwarded (the field's contract).
                launch_cpu: |executor: &ferrocuda_device::cpu::CpuExecutor, config: ferrocuda_device::cpu::LaunchConfig, a: CpuBackwardArgs<'_>| unsafe {
                    let p = a.problem;
                    $name::launch_cpu(
                        executor, config, a.maps, a.map_words, a.q, a.k, a.v, a.dout, a.lse2, a.delta, a.dq_acc, a.dk, a.dv,
                        p.seq_q, p.seq_kv, p.heads_q, p.heads_kv, p.bshd, p.scale, p.batch, a.next, a.dq, a.dq_count,
                    )
                },
            }),*];
        };
    }

    kernels! {
        attention_backward_d64_bf16: 64, false, false, true, true, true, false, false, false, 0;
        attention_backward_d64_bf16_red: 64, false, false, false, true, true, false, false, false, 0;
        attention_backward_d64_bf16_late: 64, false, false, true, false, false, false, false, false, 0;
        attention_backward_d64_bf16_red_persistent: 64, false, false, false, true, true, false, true, false, 0;
        attention_backward_d64_bf16_red_persistent_dyn: 64, false, false, false, true, true, false, true, true, 0;
        attention_backward_d64_causal_bf16: 64, true, false, true, true, true, false, false, false, 0;
        attention_backward_d64_causal_bf16_red: 64, true, false, false, true, true, false, false, false, 0;
        attention_backward_d64_causal_bf16_late: 64, true, false, true, false, false, false, false, false, 0;
        attention_backward_d128_bf16: 128, false, false, true, true, true, false, false, false, 0;
        attention_backward_d128_bf16_red: 128, false, false, false, true, true, false, false, false, 0;
        attention_backward_d128_bf16_late: 128, false, false, true, false, false, false, false, false, 0;
        attention_backward_d128_bf16_persistent: 128, false, false, true, true, true, false, true, false, 0;
        attention_backward_d128_bf16_persistent_dyn: 128, false, false, true, true, true, false, true, true, 0;
        attention_backward_d128_causal_bf16: 128, true, false, true, true, true, false, false, false, 0;
        attention_backward_d128_causal_bf16_red: 128, true, false, false, true, true, false, false, false, 0;
        attention_backward_d128_causal_bf16_late: 128, true, false, true, false, false, false, false, false, 0;
        attention_backward_d128_causal_bf16_late_lpt: 128, true, false, true, false, false, true, false, false, 0;
        attention_backward_d64_f16: 64, false, true, true, true, true, false, false, false, 0;
        attention_backward_d64_f16_red: 64, false, true, false, true, true, false, false, false, 0;
        attention_backward_d64_f16_late: 64, false, true, true, false, false, false, false, false, 0;
        attention_backward_d64_causal_f16: 64, true, true, true, true, true, false, false, false, 0;
        attention_backward_d64_causal_f16_red: 64, true, true, false, true, true, false, false, false, 0;
        attention_backward_d64_causal_f16_late: 64, true, true, true, false, false, false, false, false, 0;
        attention_backward_d128_f16: 128, false, true, true, true, true, false, false, false, 0;
        attention_backward_d128_f16_red: 128, false, true, false, true, true, false, false, false, 0;
        attention_backward_d128_f16_late: 128, false, true, true, false, false, false, false, false, 0;
        attention_backward_d128_causal_f16: 128, true, true, true, true, true, false, false, false, 0;
        attention_backward_d128_causal_f16_red: 128, true, true, false, true, true, false, false, false, 0;
        attention_backward_d128_causal_f16_late: 128, true, true, true, false, false, false, false, false, 0;
        attention_backward_d64_bf16_red_cvt: 64, false, false, false, true, true, false, false, false, 1;
        attention_backward_d64_causal_bf16_red_cvt: 64, true, false, false, true, true, false, false, false, 1;
        attention_backward_d128_bf16_red_cvt: 128, false, false, false, true, true, false, false, false, 1;
        attention_backward_d128_bf16_cvt: 128, false, false, true, true, true, false, false, false, 1;
        attention_backward_d128_bf16_cvt2: 128, false, false, true, true, true, false, false, false, 2;
        attention_backward_d128_causal_bf16_late_cvt2: 128, true, false, true, false, false, false, false, false, 2;
        attention_backward_d64_bf16_cvt2: 64, false, false, true, true, true, false, false, false, 2;
        attention_backward_d64_causal_bf16_late_cvt2: 64, true, false, true, false, false, false, false, false, 2;
        // Session 24 (trials): the picks at D 128 (bulk dQ; with the mask `_late`) storing dK
        // and dV through shared memory in whole rows, 16 bytes a lane (`_ostg`) or one bulk
        // copy a row (`_obulk`).
        attention_backward_d128_bf16_ostg: 128, false, false, true, true, true, false, false, false, 0, epi 1;
        attention_backward_d128_bf16_obulk: 128, false, false, true, true, true, false, false, false, 0, epi 2;
        attention_backward_d128_causal_bf16_late_ostg: 128, true, false, true, false, false, false, false, false, 0, epi 1;
        attention_backward_d128_causal_bf16_late_obulk: 128, true, false, true, false, false, false, false, false, 0, epi 2;
        // Session 24 (trials for the final call): the D 64 `_red` schedule the same way.
        attention_backward_d64_bf16_red_obulk: 64, false, false, false, true, true, false, false, false, 0, epi 2;
        attention_backward_d64_causal_bf16_red_obulk: 64, true, false, false, true, true, false, false, false, 0, epi 2;
    }
}

pub use body::Problem;
#[cfg(not(target_arch = "nvptx64"))]
pub use body::{BackwardArgs, BackwardKernel, CpuBackwardArgs, GpuBackwardArgs, backward_kernel};

/// `u64` words of the six tensor maps of one backward call (Q, K, V, dO, `lse2`, `delta`: 128
/// bytes each).
pub const MAP_WORDS: usize = 6 * 16;

/// `u64` words the maps' area holds: the [`MAP_WORDS`], then the `_dyn` instances' work-unit
/// counter (its first 4 bytes; the launch of `attention_backward_store_maps` zeroes the word).
pub const MAPS_AREA_WORDS: usize = MAP_WORDS + 16;

macro_rules! store_maps {
    ($(#[$doc:meta])* $($w:ident),*) => {
        $(#[$doc])*
        #[ferrocuda_device::kernel]
        #[allow(clippy::too_many_arguments)]
        pub fn attention_backward_store_maps(mut dst: ferrocuda_device::global::UncheckedSlice<u64>, $($w: u64),*) {
            use ferrocuda_device::thread::{block_dim_x, block_dim_y, block_dim_z, grid_dim_x, grid_dim_y, grid_dim_z};
            // One block of 1-D threads, at least a warp: thread t < 32 alone writes words
            // `32 i + t`, thread 0 also the counter (the ownership the writes below rely on);
            // every thread returns otherwise, or when `dst` is too short.
            let launch = grid_dim_x() == 1 && grid_dim_y() == 1 && grid_dim_z() == 1 && block_dim_x() >= 32 && block_dim_y() == 1 && block_dim_z() == 1;
            if !launch || dst.len() < MAPS_AREA_WORDS {
                return;
            }
            let dst = dst.as_mut_ptr();
            let words: [u64; MAP_WORDS] = [$($w),*];
            let t = ferrocuda_device::thread::thread_idx_x() as usize;
            ferrocuda_device::unroll::unroll::<3>(|i| {
                let at = 32 * i + t;
                if t < 32 {
                    // SAFETY: at < MAP_WORDS <= dst.len() (checked); with the launch checked
                    // above, this thread alone writes word `at`, and nothing reads `dst`.
                    unsafe { *dst.add(at) = words[at] };
                }
            });
            if t == 0 {
                // SAFETY: MAP_WORDS < MAPS_AREA_WORDS <= dst.len(); thread 0 alone writes it.
                // The `_dyn` instances' work-unit counter starts at 0 on every call (and replay).
                unsafe { *dst.add(MAP_WORDS) = 0 };
            }
        }

        /// Launches [`attention_backward_store_maps()`] (one block of 32 threads) on `stream`,
        /// writing `words` and the zeroed counter to `dst` (host builds only).
        ///
        /// # Errors
        /// The launch's.
        #[cfg(not(target_arch = "nvptx64"))]
        pub fn store_maps(
            stream: &ferrocuda_host::Stream,
            dst: &mut (impl ferrocuda_host::DeviceWrite<u64> + ?Sized),
            words: [u64; MAP_WORDS],
        ) -> Result<(), ferrocuda_host::Error> {
            let [$($w),*] = words;
            attention_backward_store_maps::launch(stream, ferrocuda_host::LaunchConfig::new(1, 32), dst, $($w),*)
        }
    };
}
store_maps!(
    /// Writes the tensor maps of one backward call (kernel parameters, so a CUDA graph that
    /// records this launch replays it with the same words) to `dst`, and zeroes the word after
    /// them (the `_dyn` instances' work-unit counter), where the backward kernel
    /// reads them: launched with one block of at least 32 threads, just before the backward on
    /// the same stream (which makes the writes visible to it; the backward's `fence.proxy.tensormap`
    /// acquire orders them for the copy engine). Host memory copied with `cuMemcpyHtoDAsync` would
    /// do outside a graph, but a captured copy would read the host buffer again at every replay.
    /// The [`MAP_WORDS`] words are [`MAP_WORDS`] scalar parameters after `dst` (rustc's PTX ABI
    /// rejects an aggregate passed by value: an internal compiler error on 2026-05-19's nightly).
    ///
    /// `dst`: at least [`MAPS_AREA_WORDS`] `u64` (64-byte aligned for the maps' use); a launch
    /// other than one block of at least 32 1-D threads, or a shorter `dst`, writes nothing.
    w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15, w16, w17, w18, w19, w20, w21, w22, w23, w24, w25, w26, w27, w28, w29, w30, w31, w32, w33, w34, w35, w36, w37, w38, w39, w40, w41, w42, w43, w44, w45, w46, w47, w48, w49, w50, w51, w52, w53, w54, w55, w56, w57, w58, w59, w60, w61, w62, w63, w64, w65, w66, w67, w68, w69, w70, w71, w72, w73, w74, w75, w76, w77, w78, w79, w80, w81, w82, w83, w84, w85, w86, w87, w88, w89, w90, w91, w92, w93, w94, w95);
