//! Attention backward on Hopper (FlashAttention-3's layout: a block per 128 keys, the queries
//! streamed past them): `dQ`, `dK`, `dV` from `dO`, the forward's log-sum-exp and
//! `delta = rowsum(dO ∘ O)`, for Q, K, V, dO in bf16 or f16, `[B, H, S, D]` or `[B, S, H, D]`,
//! D 64 or 128, grouped-query heads, any lengths, causal or not.
//!
//! Per block (384 threads; grid `(⌈seq_kv / 128⌉, batch · heads_kv)`):
//! - warpgroup 0 (producer, `setmaxnreg.dec 24`): one thread loads the block's K and V rows
//!   once, then for every 64-query tile of every query head of the group (causal: from the tile
//!   of the block's first key on) the Q and dO tiles (4-D maps, box `[64, 64, 1, 1]`, 128-byte
//!   swizzle) and the tile's `lse·log2 e` and `delta` rows (1-D f32 maps) through TMA into a
//!   [`STAGES`]-deep ring;
//! - warpgroups 1 and 2 (consumers) each own 64 of the keys and keep `dK`, `dV` (64 x D, f32)
//!   in registers. Per query tile, with `wgmma`:
//!   `Sᵀ = K Qᵀ` and `dPᵀ = V dOᵀ` (A and B from shared memory, K-major, m64n64),
//!   `Pᵀ = 2^(Sᵀ·scale·log2 e − lse·log2 e)` (causal and length masks on the tiles that need
//!   them), `dSᵀ = Pᵀ ∘ (dPᵀ − delta)`;
//!   `dSᵀ` stored to shared memory (N-major, 128-byte swizzle, two buffers per consumer), a
//!   barrier of both consumers, then
//!   `dQᵀ = Kᵀ dSᵀ` over the block's 128 keys (both operands MN-major from shared memory; at
//!   D = 128 consumer c takes head columns `64c..` as an m64n64 tile, at D = 64 queries `32c..`
//!   as an m64n32 tile), added to an f32 buffer in global memory with `red.global.add.v2.f32`
//!   (so dQ's rounding order, and its last bits, may differ from call to call), while
//!   `dV += Pᵀ dO` and `dK += dSᵀ Q` run (A from registers, the accumulator fragments rounded
//!   to the element type; B N-major: dO and Q as they sit in shared memory).
//! - Two small kernels of `ferrocuda-kernels-device` run around it: before, the padded
//!   `lse·log2 e` (+inf past the sequence) and `delta` rows `[B·Hq, seq_pad]`; after,
//!   `dQ = scale · dQacc` converted to the element type in the caller's layout.
//!
//! Instances (`attention_backward_d{64,128}[_causal]_{bf16,f16}`): the default schedule above;
//! `_wg`, where each consumer adds the dQ of its own 64 keys (no barrier between the consumers,
//! twice the atomic adds: 0.65-0.85x the default on an H200); `_ov`, where a step's dV/dK group
//! runs on while the next step's scores are issued (D 64: within 3% of the default; D 128:
//! slower, ptxas serialises its `wgmma`s for want of registers, C7512). Figures:
//! `bench/results/s10-attn-bwd-run2-h200/`.
//!
//! Requirements (the kernels' contract; `ferrocuda_kernels::attention::attention_backward` checks
//! them, builds the maps and the scratch buffers): the maps describe live `[B, H, S, D]` arrays
//! (dims `[D, S, H, B]`, or `[D, H, S, B]` with `bshd != 0`) of the element type, box
//! `[64, 64, 1, 1]` (`[64, 1, 64, 1]` for `bshd`), 128-byte swizzle, and the `lse2` and
//! `delta` rows, `B·Hq·seq_pad` f32 each (`seq_pad = ⌈seq_q / 64⌉ · 64`, fewer than 2^31), as
//! 1-D maps with box [`STATS_BOX`], no swizzle; `dq_acc` holds `B·Hq·D·seq_pad` f32 (zeroed,
//! layout `[B·Hq, D, seq_pad]`); `dk`, `dv` `B·Hkv·seq_kv·D` elements in the maps' layout,
//! 4-byte aligned; `heads_q` a multiple of `heads_kv`.

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
/// `dSᵀ` (two buffers per consumer), the ring's `lse2`/`delta` rows, the barriers, 1 KiB to
/// align.
pub const fn shared_bytes(head_dim: u32) -> u32 {
    (4 + 2 * STAGES) * panel_bytes(head_dim) + 4 * SLAB + STATS_BYTES * STAGES + 8 + 16 * STAGES + 1024
}

/// Bytes of one step's `lse2` and `delta` rows in the ring (64 f32 each).
pub const STATS_BYTES: u32 = 2 * BQ * 4;

/// Rows of the padded `lse2`/`delta`/`dq_acc` arrays per head: `seq_q` rounded up to [`BQ`].
pub const fn padded_seq(seq_q: u32) -> u32 {
    seq_q.div_ceil(BQ) * BQ
}

pub use body::backward_body;

mod body {
    use super::*;
    use ferrocuda_device::half::{F16x2, pack_bf16x2};
    use ferrocuda_device::math::FastMath;
    use ferrocuda_device::mbarrier::{MBarrier, fence_init};
    use ferrocuda_device::named_barrier::NamedBarrier;
    use ferrocuda_device::pipeline::Ring;
    use ferrocuda_device::sync::sync_threads;
    use ferrocuda_device::thread::{block_idx_x, block_idx_y, thread_idx_x};
    use ferrocuda_device::tma::{TensorMap, dynamic_shared_address, fence_proxy_async_shared};
    use ferrocuda_device::unroll::unroll;
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

    /// Issues and commits `dQᵀ` rows (head columns) `64 m ..` of consumer `consumer`'s 64 keys:
    /// `Kᵀ` from its K panel, `dSᵀ` from its buffer of step `n`.
    ///
    /// # Safety
    /// As for `wgmma::m64n64k16_bf16_ss_mn_major`, after a `wgmma::fence`.
    #[inline(always)]
    unsafe fn issue_own_dq<const D: u32, const F16: bool>(dq: &mut [f32; 32], layout: Layout, consumer: u32, n: u32, m: u32) {
        unroll::<4>(|t| {
            let t = t as u32;
            let a = Descriptor::n_major_128b(layout.k(consumer) + m * SLAB + 2048 * t, SLAB).0;
            let b = Descriptor::n_major_128b(layout.ds(consumer, n % 2) + 2048 * t, SLAB).0;
            // SAFETY: the caller's contract.
            unsafe { ss_mn::<F16>(dq, a, b, t > 0) };
        });
        // SAFETY: the caller's contract.
        unsafe { wgmma::commit() };
    }

    /// Adds an m64n64 `dQᵀ` tile (this thread's rows `d0`, `d0 + 8`, query columns `q0 + 8 i +
    /// c0`, `+ 1`) to `dq_acc` (`[B·Hq, D, seq_pad]`, head `bhq`).
    #[inline(always)]
    fn add_dq_tile<const D: u32>(dq_acc: *mut f32, dq: &[f32; 32], bhq: usize, d0: u32, c0: u32, seq_pad: u32, q0: u32) {
        unroll::<8>(|i| {
            unroll::<2>(|half| {
                let d = (d0 + 8 * half as u32) as usize;
                let at = (bhq * D as usize + d) * seq_pad as usize + q0 as usize + 8 * i + c0 as usize;
                // SAFETY: d < D, q0 + 8 i + c0 + 1 < seq_pad: inside dq_acc (the kernel's
                // contract), 8-byte aligned (`at` even); only atomic adds touch it during the
                // launch.
                unsafe { add_pair(dq_acc.add(at), dq[4 * i + 2 * half], dq[4 * i + 2 * half + 1]) };
            })
        });
    }

    /// Where the tiles and barriers of a block live in shared memory.
    #[derive(Clone, Copy)]
    struct Layout {
        base: u32,
        panel: u32,
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
        /// Slot `slot`'s `lse2` row (64 f32), then its `delta` row.
        #[inline(always)]
        fn stats(self, slot: u32) -> u32 {
            self.base + self.panel * (4 + 2 * STAGES) + 4 * SLAB + STATS_BYTES * slot
        }
        #[inline(always)]
        fn barriers(self) -> u32 {
            self.base + self.panel * (4 + 2 * STAGES) + 4 * SLAB + STATS_BYTES * STAGES
        }
        #[inline(always)]
        fn kv_full(self) -> MBarrier {
            // SAFETY: the first 8 bytes after the tiles, inside the requested shared memory
            // ([`shared_bytes`]), used only as this barrier.
            unsafe { MBarrier::at(self.barriers()) }
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
        /// The score scale.
        pub scale: f32,
    }

    impl Problem {
        /// TMA coordinates of column `col`, position `s` of head `h` of batch `b`.
        #[inline(always)]
        fn coords(self, col: u32, s: u32, h: u32, b: u32) -> [i32; 4] {
            if self.bshd != 0 { [col as i32, h as i32, s as i32, b as i32] } else { [col as i32, s as i32, h as i32, b as i32] }
        }

        /// The element index of column 0 of key position `s` of key/value head `h`.
        #[inline(always)]
        fn kv_at<const D: u32>(self, b: u32, h: u32, s: u32) -> usize {
            let (b, h, s, heads, seq) = (b as usize, h as usize, s as usize, self.heads_kv as usize, self.seq_kv as usize);
            let row = if self.bshd != 0 { (b * seq + s) * heads + h } else { (b * heads + h) * seq + s };
            row * D as usize
        }
    }

    /// `red.global.add.v2.f32`: adds `(x, y)` to the two f32 at `p` (8-byte aligned).
    ///
    /// # Safety
    /// `p` points to two f32 of global memory that only atomic adds touch while the kernel runs.
    #[inline(always)]
    unsafe fn add_pair(p: *mut f32, x: f32, y: f32) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!("red.global.add.v2.f32 [{p}], {{{x}, {y}}};", p = in(reg64) p, x = in(reg32) x, y = in(reg32) y, options(nostack))
        };
        #[cfg(not(target_arch = "nvptx64"))]
        // SAFETY: the caller's contract (the executor's atomics on the two words).
        unsafe {
            ferrocuda_device::atomic::Atomic::from_ptr(p).add(x);
            ferrocuda_device::atomic::Atomic::from_ptr(p.add(1)).add(y);
        }
    }

    /// The kernel body (see the module docs).
    ///
    /// # Safety
    /// The module's requirements; 384 threads, [`shared_bytes`]`(D)` of dynamic shared memory,
    /// grid `(⌈seq_kv / 128⌉, batch·heads_kv)`; run as every thread of the grid.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn backward_body<const D: u32, const CAUSAL: bool, const F16: bool, const SHARED_DQ: bool, const OVERLAP: bool>(
        maps: [*const TensorMap; 6],
        dq_acc: *mut f32,
        dk: *mut u32,
        dv: *mut u32,
        problem: Problem,
    ) {
        let [q_map, k_map, v_map, do_map, lse_map, delta_map] = maps;
        let tid = thread_idx_x();
        let panel = panel_bytes(D);
        let layout = Layout { base: (dynamic_shared_address() + 1023) & !1023, panel };
        if tid == 0 {
            layout.kv_full().init(1);
            // One release per consumer warp.
            layout.ring().init(8);
            fence_init();
        }
        sync_threads();
        let k0 = block_idx_x() * BN;
        let (b, hk) = (block_idx_y() / problem.heads_kv, block_idx_y() % problem.heads_kv);
        let group = problem.heads_q / problem.heads_kv;
        let seq_pad = padded_seq(problem.seq_q);
        // Causal: queries before the block's first key see none of its keys.
        let first_tile = if CAUSAL { k0 / BQ } else { 0 };
        let per_head = padded_seq(problem.seq_q) / BQ - first_tile.min(seq_pad / BQ);
        let steps = per_head * group;
        // Step n: query head `hk·group + n / per_head`, query tile `first_tile + n % per_head`.
        let at_step = |n: u32| (hk * group + n / per_head, (first_tile + n % per_head) * BQ);
        if tid / 128 == 0 {
            // SAFETY: the whole warpgroup executes it; the producer needs few registers.
            unsafe { warpgroup::dealloc_registers::<24>() };
            if tid == 0 {
                // SAFETY: the maps are valid (the kernel's contract); every box starts inside
                // its array or past its end in the position dimension (rows past the end are
                // filled with zeros by the copy engine); each ring slot is free (its `empty`
                // phase waited for) before it is refilled.
                unsafe {
                    for map in maps {
                        TensorMap::acquire(map);
                    }
                    layout.kv_full().arrive_expect_tx(4 * panel);
                    for half in 0..2 {
                        for c in 0..D / 64 {
                            let at = problem.coords(64 * c, k0 + 64 * half, hk, b);
                            TensorMap::load_4d(k_map, layout.k(half) + c * SLAB, layout.kv_full(), at);
                            TensorMap::load_4d(v_map, layout.v(half) + c * SLAB, layout.kv_full(), at);
                        }
                    }
                    for n in 0..steps {
                        let (h, q0) = at_step(n);
                        let slot = Ring::<STAGES>::slot(n);
                        let full = layout.ring().produce(n, 2 * panel + STATS_BYTES);
                        let row = ((b * problem.heads_q + h) * seq_pad + q0) as i32;
                        TensorMap::load_1d(lse_map, layout.stats(slot), full, row);
                        TensorMap::load_1d(delta_map, layout.stats(slot) + BQ * 4, full, row);
                        for c in 0..D / 64 {
                            let at = problem.coords(64 * c, q0, h, b);
                            TensorMap::load_4d(q_map, layout.q(slot) + c * SLAB, full, at);
                            TensorMap::load_4d(do_map, layout.dout(slot) + c * SLAB, full, at);
                        }
                    }
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
        let key0 = k0 + 64 * consumer + row0;
        // This thread's query columns in a tile: `8 i + 2 (lane % 4) + j`.
        let col0 = 2 * (lane % 4);
        let scale_log2 = problem.scale * core::f32::consts::LOG2_E;
        // The threads that read a consumer's `dSᵀ` (both consumers' 256 with `SHARED_DQ`, else
        // its own 128) meet here between writing it and the `wgmma`s reading it.
        let written = if SHARED_DQ { NamedBarrier::new(4, 256) } else { NamedBarrier::new(4 + consumer, 128) };
        // Not `[0.0; 64]`: a repeat expression becomes a store loop that keeps the array in
        // local memory (docs/performance.md). SAFETY: all-zero bits are 0.0.
        let (mut dk_acc, mut dv_acc): ([f32; 64], [f32; 64]) = unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
        // SAFETY: as above.
        let (mut s, mut dp, mut dq): ([f32; 32], [f32; 32], [f32; 32]) = unsafe { (core::mem::zeroed(), core::mem::zeroed(), core::mem::zeroed()) };
        // SAFETY: as above. (dQᵀ's tile at D = 64: 64 x 32.)
        let mut dq_narrow: [f32; 16] = unsafe { core::mem::zeroed() };
        // The A fragments of P and dS (with `OVERLAP` read by a dV/dK group that runs into the
        // next step). SAFETY: as above.
        let mut frags: [Fragments; 2] = unsafe { core::mem::zeroed() };
        let shared = ferrocuda_device::shared::dynamic_shared::<u32>();
        let shared_f32 = ferrocuda_device::shared::dynamic_shared::<f32>();
        let shared_base = shared.shared_address();
        let (k_mine, v_mine) = (layout.k(consumer), layout.v(consumer));
        layout.kv_full().wait(0);
        // Every `unsafe` block below issues or waits for `wgmma`s: the consumer warpgroup's 128
        // threads run this code together (the branch is on `tid / 128`, the loop bounds are the
        // block's); the shared tiles a group reads stay untouched until the arrival on their
        // `empty` barrier (after the wait for that group) or, for `dSᵀ`, until the next-but-one
        // step (its two buffers alternate; the barrier `written` of the step between orders it);
        // the registers of a group in flight are fenced before its issue and not touched until
        // it has been waited for.
        for n in 0..steps {
            let (h, q0) = at_step(n);
            let slot = Ring::<STAGES>::slot(n);
            layout.ring().consume(n);
            let (q_tile, do_tile) = (layout.q(slot), layout.dout(slot));
            // SAFETY: see above.
            unsafe {
                wgmma::fence();
                unroll::<8>(|step| {
                    let step = step as u32;
                    if step < D / 16 {
                        let offset = (step / 4) * SLAB + 32 * (step % 4);
                        ss::<F16>(&mut s, Descriptor::k_major_128b(k_mine + offset).0, Descriptor::k_major_128b(q_tile + offset).0, step == 0);
                    }
                });
                wgmma::commit();
                unroll::<8>(|step| {
                    let step = step as u32;
                    if step < D / 16 {
                        let offset = (step / 4) * SLAB + 32 * (step % 4);
                        ss::<F16>(&mut dp, Descriptor::k_major_128b(v_mine + offset).0, Descriptor::k_major_128b(do_tile + offset).0, step == 0);
                    }
                });
                wgmma::commit();
                // With `OVERLAP`, the previous step's dV/dK group (issued before these) too.
                wgmma::wait::<1>();
            }
            fence_accumulators_32(&mut s);
            if OVERLAP && n > 0 {
                fence_accumulators_64(&mut dv_acc);
                fence_accumulators_64(&mut dk_acc);
                fence_fragments(&mut frags);
                if lane == 0 {
                    // The previous step's Q and dO are read by nothing any more.
                    layout.ring().release(n - 1);
                }
            }
            // lse·log2 e and delta of this thread's 16 query columns (padded rows: +inf and 0).
            let stats = ((layout.stats(slot) - shared_base) / 4) as usize;
            let mut lse_cols = [0.0f32; 16];
            let mut delta_cols = [0.0f32; 16];
            unroll::<8>(|i| {
                unroll::<2>(|j| {
                    let at = stats + 8 * i + col0 as usize + j;
                    // SAFETY: inside this slot's rows (8 i + col0 + j < 64), which the copy
                    // engine has written (the slot's `full` phase waited for) and nobody writes
                    // until this warp releases the slot.
                    unsafe {
                        lse_cols[2 * i + j] = shared_f32.get_unchecked(at);
                        delta_cols[2 * i + j] = shared_f32.get_unchecked(at + BQ as usize);
                    }
                })
            });

            // Pᵀ, masked where a key is past the sequence or (causal) after the query.
            let mut p = s;
            let edge = k0 + BN > problem.seq_kv || (CAUSAL && k0 + 64 * consumer + 63 > q0);
            unroll::<8>(|i| {
                unroll::<4>(|e| {
                    let col = 8 * i as u32 + col0 + (e as u32 & 1);
                    let key = key0 + 8 * (e as u32 >> 1);
                    let x = (s[4 * i + e] * scale_log2 - lse_cols[2 * i + (e & 1)]).fast_exp2();
                    let hidden = edge && (key >= problem.seq_kv || (CAUSAL && key > q0 + col));
                    p[4 * i + e] = if hidden { 0.0 } else { x };
                })
            });
            // SAFETY: see above.
            unsafe { wgmma::wait::<0>() };
            fence_accumulators_32(&mut dp);
            let mut ds = dp;
            unroll::<8>(|i| unroll::<4>(|e| ds[4 * i + e] = p[4 * i + e] * (dp[4 * i + e] - delta_cols[2 * i + (e & 1)])));
            frags = [fragments::<F16>(&p), fragments::<F16>(&ds)];
            // dSᵀ to shared memory, N-major for `dQᵀ = Kᵀ dSᵀ`: row = key, 64 queries per row.
            let ds_tile = layout.ds(consumer, n % 2);
            unroll::<4>(|t| {
                unroll::<4>(|r| {
                    let (key, query) = (row0 + 8 * (r as u32 & 1), 16 * t as u32 + 8 * (r as u32 >> 1) + col0);
                    let address = Descriptor::swizzled_128b_address(ds_tile, key, query);
                    // SAFETY: inside this consumer's `dSᵀ` buffer (key < 64, query < 64: 8 KiB
                    // from `ds_tile`, inside the requested shared memory), 4-byte aligned; no
                    // `wgmma` reads this buffer now (see above), and each (key, query pair) has
                    // one writer.
                    unsafe { shared.set_unchecked(((address - shared_base) / 4) as usize, frags[1][t][r]) };
                })
            });
            fence_proxy_async_shared();
            written.sync();
            fence_accumulators_64(&mut dv_acc);
            fence_accumulators_64(&mut dk_acc);
            fence_accumulators_32(&mut dq);
            wgmma::fence_accumulators_16(&mut dq_narrow);
            fence_fragments(&mut frags);
            let bhq = (b * problem.heads_q + h) as usize;
            if SHARED_DQ {
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
                        let (m, n0) = if D == 128 { (consumer, 0) } else { (0, 32 * consumer) };
                        let a = Descriptor::n_major_128b(layout.k(t / 4) + m * SLAB + 2048 * (t % 4), SLAB).0;
                        let b = Descriptor::n_major_128b(layout.ds(t / 4, n % 2) + 2048 * (t % 4) + 2 * n0, SLAB).0;
                        if D == 128 {
                            ss_mn::<F16>(&mut dq, a, b, t > 0);
                        } else {
                            ss_mn_narrow::<F16>(&mut dq_narrow, a, b, t > 0);
                        }
                    });
                    wgmma::commit();
                    unroll::<4>(|t| {
                        let t = t as u32;
                        rs::<D, F16>(&mut dv_acc, frags[0][t as usize], Descriptor::n_major_128b(do_tile + 2048 * t, SLAB).0);
                    });
                    unroll::<4>(|t| {
                        let t = t as u32;
                        rs::<D, F16>(&mut dk_acc, frags[1][t as usize], Descriptor::n_major_128b(q_tile + 2048 * t, SLAB).0);
                    });
                    wgmma::commit();
                    // The dQ group (the older one) is done; dV and dK may still run.
                    wgmma::wait::<1>();
                }
                fence_accumulators_32(&mut dq);
                wgmma::fence_accumulators_16(&mut dq_narrow);
                // This thread's dQᵀ rows (head columns) and first query column.
                let (d0, c0) = if D == 128 { (64 * consumer + row0, col0) } else { (row0, 32 * consumer + col0) };
                unroll::<8>(|i| {
                    unroll::<2>(|half| {
                        if D == 128 || i < 4 {
                            let d = (d0 + 8 * half as u32) as usize;
                            let at = (bhq * D as usize + d) * seq_pad as usize + q0 as usize + 8 * i + c0 as usize;
                            let (x, y) = if D == 128 {
                                (dq[4 * i + 2 * half], dq[4 * i + 2 * half + 1])
                            } else {
                                (dq_narrow[4 * i + 2 * half], dq_narrow[4 * i + 2 * half + 1])
                            };
                            // SAFETY: d < D, q0 + 8 i + c0 + 1 < seq_pad: inside dq_acc (the kernel's
                            // contract), 8-byte aligned (`at` even); only atomic adds touch it
                            // during the launch.
                            unsafe { add_pair(dq_acc.add(at), x, y) };
                        }
                    })
                });
            } else {
                // dQᵀ of this consumer's 64 keys (its own `dSᵀ`), added to dq_acc beside the
                // other consumer's: twice the atomic adds, no barrier between the consumers.
                // SAFETY: see above.
                unsafe {
                    wgmma::fence();
                    issue_own_dq::<D, F16>(&mut dq, layout, consumer, n, 0);
                    unroll::<4>(|t| {
                        let t = t as u32;
                        rs::<D, F16>(&mut dv_acc, frags[0][t as usize], Descriptor::n_major_128b(do_tile + 2048 * t, SLAB).0);
                    });
                    unroll::<4>(|t| {
                        let t = t as u32;
                        rs::<D, F16>(&mut dk_acc, frags[1][t as usize], Descriptor::n_major_128b(q_tile + 2048 * t, SLAB).0);
                    });
                    wgmma::commit();
                    wgmma::wait::<1>();
                }
                fence_accumulators_32(&mut dq);
                add_dq_tile::<D>(dq_acc, &dq, bhq, row0, col0, seq_pad, q0);
                if D == 128 {
                    // SAFETY: see above (the fence: the atomics above read these accumulators).
                    unsafe {
                        wgmma::fence();
                        issue_own_dq::<D, F16>(&mut dq, layout, consumer, n, 1);
                        wgmma::wait::<0>();
                    }
                    fence_accumulators_32(&mut dq);
                    add_dq_tile::<D>(dq_acc, &dq, bhq, 64 + row0, col0, seq_pad, q0);
                }
            }
            if !OVERLAP {
                // SAFETY: see above.
                unsafe { wgmma::wait::<0>() };
                fence_accumulators_64(&mut dv_acc);
                fence_accumulators_64(&mut dk_acc);
                if lane == 0 {
                    // Q and dO of this slot are read by nothing any more.
                    layout.ring().release(n);
                }
            }
            // With `OVERLAP` the dV/dK group runs on while the next step's scores are issued.
        }
        if OVERLAP {
            // SAFETY: see above.
            unsafe { wgmma::wait::<0>() };
            fence_accumulators_64(&mut dv_acc);
            fence_accumulators_64(&mut dk_acc);
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

    macro_rules! kernels {
        ($($name:ident: $d:literal, $causal:literal, $f16:literal, $shared_dq:literal, $overlap:literal;)*) => {$(
            ferrocuda_device::launch_bounds!($name, 384, 1);
            /// Attention backward (see the module docs), head dimension, mask and element type
            /// in the name.
            ///
            /// # Safety
            /// The module's requirements; 384 threads, `shared_bytes(D)` of dynamic shared
            /// memory, grid `(⌈seq_kv / 128⌉, batch·heads_kv)`.
            #[cfg(target_arch = "nvptx64")]
            #[unsafe(no_mangle)]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn $name(
                q_map: *const TensorMap, k_map: *const TensorMap, v_map: *const TensorMap, do_map: *const TensorMap,
                lse_map: *const TensorMap, delta_map: *const TensorMap, dq_acc: *mut f32, dk: *mut u32, dv: *mut u32,
                seq_q: u32, seq_kv: u32, heads_q: u32, heads_kv: u32, bshd: u32, scale: f32,
            ) {
                let problem = Problem { seq_q, seq_kv, heads_q, heads_kv, bshd, scale };
                // SAFETY: the kernel's contract.
                unsafe { backward_body::<$d, $causal, $f16, $shared_dq, $overlap>([q_map, k_map, v_map, do_map, lse_map, delta_map], dq_acc, dk, dv, problem) }
            }
        )*};
    }

    kernels! {
        attention_backward_d64_bf16: 64, false, false, true, false;
        attention_backward_d64_bf16_ov: 64, false, false, true, true;
        attention_backward_d64_bf16_wg: 64, false, false, false, false;
        attention_backward_d64_causal_bf16: 64, true, false, true, false;
        attention_backward_d64_causal_bf16_ov: 64, true, false, true, true;
        attention_backward_d64_causal_bf16_wg: 64, true, false, false, false;
        attention_backward_d128_bf16: 128, false, false, true, false;
        attention_backward_d128_bf16_ov: 128, false, false, true, true;
        attention_backward_d128_bf16_wg: 128, false, false, false, false;
        attention_backward_d128_causal_bf16: 128, true, false, true, false;
        attention_backward_d128_causal_bf16_ov: 128, true, false, true, true;
        attention_backward_d128_causal_bf16_wg: 128, true, false, false, false;
        attention_backward_d64_f16: 64, false, true, true, false;
        attention_backward_d64_f16_ov: 64, false, true, true, true;
        attention_backward_d64_f16_wg: 64, false, true, false, false;
        attention_backward_d64_causal_f16: 64, true, true, true, false;
        attention_backward_d64_causal_f16_ov: 64, true, true, true, true;
        attention_backward_d64_causal_f16_wg: 64, true, true, false, false;
        attention_backward_d128_f16: 128, false, true, true, false;
        attention_backward_d128_f16_ov: 128, false, true, true, true;
        attention_backward_d128_f16_wg: 128, false, true, false, false;
        attention_backward_d128_causal_f16: 128, true, true, true, false;
        attention_backward_d128_causal_f16_ov: 128, true, true, true, true;
        attention_backward_d128_causal_f16_wg: 128, true, true, false, false;
    }
}

pub use body::Problem;
