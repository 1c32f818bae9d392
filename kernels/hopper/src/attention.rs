//! Attention forward on Hopper (FlashAttention-style, one pass over the keys with an online
//! softmax): `O = softmax(scale · Q·Kᵀ) · V` per (batch, head), with the log-sum-exp of each
//! query row, `lse = ln Σ_j exp(scale · q·k_j)` (natural log, for a later backward pass).
//!
//! Layout: Q, K, V and O are bf16 `[batch·heads, seq_len, D]` (PyTorch's `[B, H, S, D]`,
//! contiguous), `lse` f32 `[batch·heads, seq_len]`; `D` is 64 or 128; any `seq_len >= 1` (the
//! last key tile is masked, the last query tile's extra rows are not stored); optionally
//! causal (key `j` attends to query `i` only when `j <= i`).
//!
//! Per block (384 threads, one 128-row query tile of one head; grid `(⌈S/128⌉, B·H)`):
//! - warpgroup 0 (producer, `setmaxnreg.dec 24`): one thread loads the Q tile once, then each
//!   128-row key tile and value tile, the last key tile first (the one tile that may need the
//!   mask: ragged past `seq_len`, or the causal diagonal), through TMA (3-D maps, 128-byte
//!   swizzle, one box per 64 columns) into a [`STAGES`]-deep ring, K and V with their own
//!   full/empty mbarriers so the consumers can start on K while V is still on its way;
//! - warpgroups 1 and 2 (consumers, `setmaxnreg.inc 240`) each own 64 query rows: per key tile,
//!   `S = Q·Kᵀ` with `wgmma` m64n128k16 (A and B from shared memory), the mask on the tiles
//!   that need it, the online softmax in registers (`ex2.approx` with `scale·log2 e` folded in:
//!   one FFMA and one MUFU.EX2 per score), `P` converted from the accumulator fragment to the
//!   register A fragment (`wgmma::a_fragments_bf16_64`: no shared memory), and `O += P·V` with
//!   `wgmma` A-from-registers, B N-major (V as stored). The `OVERLAP` variant (the default
//!   kernels) issues the next tile's `Q·Kᵀ` before this tile's `P·V`, so the softmax of tile
//!   `j+1` runs while the tensor cores compute `P_j·V_j` (FlashAttention-3's intra-warpgroup
//!   overlap; `consume_tile` peels the first tile, the only masked one, and the last
//!   `P·V`, and waits for `P·V` at the top of the next step, where ptxas keeps the wait after
//!   the softmax); the `_serial` kernels wait for each product; the `_pingpong` kernels add
//!   FlashAttention-3's inter-warpgroup schedule (the two consumers take turns issuing their
//!   products through named barriers, so one's softmax overlaps the other's products); the
//!   `_s3` kernels have 3-deep K/V rings ([`STAGES_DEEP`]).
//!
//! The `_persistent` kernels ([`attention_body_persistent`]) run the overlapped schedules on a
//! grid of at most one block per SM: each block takes query tiles ([`work_item`]) from a
//! counter until all are done, and loads the next tile while it finishes this one. Their two
//! more parameters: `heads` (`B·H`) and `next` (the counter, a `u32` zeroed before the launch).
//!
//! The entries (`#[kernel]`s, typed launchers; session 19) take Q, K and V as slices beside
//! their maps, O and LSE as `UncheckedSlice` outputs, the persistent kernels' counter as an
//! `AtomicSlice`, and the maps as a pointer to the start of `map_words` (whose read the launch
//! declares); each checks its launch, the lengths and O's alignment (`launch_ok`) and returns
//! without writing anything otherwise. Their one `# Safety` requirement is the maps'
//! contents, which no kernel can check: maps of exactly Q, K and V with the layout above, box
//! `[64, 128, 1]`, 128-byte swizzle (`ferrocuda_kernels::attention::attention_forward` and
//! `bench/hopper`'s `attention_host::Problem` build them so). The bodies
//! (`attention_body*`) keep raw pointers, for the CPU tests of every schedule. Design notes,
//! checks and figures: `docs/kernels/attention.md`.

/// Query rows per block (two consumer warpgroups of 64).
pub const BM: u32 = 128;
/// Key rows per pipeline stage.
pub const BN: u32 = 128;
/// Depth of the K and V rings.
pub const STAGES: u32 = 2;
/// Depth of the rings of the `_s3` kernels (the whole 227 KiB of shared memory at D = 128).
pub const STAGES_DEEP: u32 = 3;
/// Threads per block: one producer and two consumer warpgroups.
pub const THREADS: u32 = 384;
/// Bytes of one TMA box: 128 rows of 64 bf16 (128 bytes, the 128-byte swizzle's span).
pub const SLAB: u32 = 128 * 128;
/// TMA box of every map: 64 columns, 128 rows, one head.
pub const BOX: [u32; 3] = [64, 128, 1];

/// Bytes of a 128-row tile of head dimension `head_dim` (one [`SLAB`] per 64 columns).
pub const fn tile_bytes(head_dim: u32) -> u32 {
    head_dim / 64 * SLAB
}

/// Dynamic shared memory per block: Q, the K and V rings, the barriers (with the persistent
/// kernels' Q "empty" barrier and their two work-item slots: 32 bytes), 1 KiB to align.
pub const fn shared_bytes(head_dim: u32, stages: u32) -> u32 {
    (1 + 2 * stages) * tile_bytes(head_dim) + 8 * (1 + 4 * stages) + 32 + 1024
}

/// Dynamic shared memory per block of the persistent `_q2` kernels: [`shared_bytes`] plus a
/// second Q buffer and 40 bytes of barriers and work-item slots.
pub const fn shared_bytes_q2(head_dim: u32, stages: u32) -> u32 {
    shared_bytes(head_dim, stages) + tile_bytes(head_dim) + 40
}

/// Bytes of one row of the `_ostg` / `_obulk` kernels' O staging buffer: `D` bf16 and 16 bytes
/// of padding, so that the 8 rows of each `stmatrix` 8x8 matrix fall in distinct 16-byte bank
/// groups (a row of `2·D` bytes would put them all in the same four banks).
pub const fn o_stage_row(head_dim: u32) -> u32 {
    2 * head_dim + 16
}

/// Where the O staging buffer starts, in bytes after the barriers (which take at most 176 bytes:
/// [`shared_bytes_q2`]'s with 3-deep rings).
pub const O_STAGE_OFFSET: u32 = 256;

/// Dynamic shared memory per block of the persistent kernels that write O through shared memory
/// (`_ostg`, `_obulk`; issue 31, session 24): the tiles of [`shared_bytes`], the barriers, then
/// (at [`O_STAGE_OFFSET`]) a staging buffer of 128 rows of [`o_stage_row`] bytes, 1 KiB to
/// align (D 128 with 2-deep rings: 199 936 bytes).
pub const fn shared_bytes_ostage(head_dim: u32, stages: u32) -> u32 {
    (1 + 2 * stages) * tile_bytes(head_dim) + O_STAGE_OFFSET + BM * o_stage_row(head_dim) + 1024
}

/// Query tiles of a head: `⌈seq_len / 128⌉`, at least 1.
pub const fn q_tiles(seq_len: u32) -> u32 {
    let tiles = seq_len.div_ceil(BM);
    if tiles == 0 { 1 } else { tiles }
}

/// Work units in one group of [`longest_first`]: about one wave of blocks on an H100 (132 SMs).
pub const WAVE: u32 = 128;

/// The order of the causal kernels' work units, longest first within groups of heads: unit
/// `unit` of the `per_head · heads` units (each head's `per_head` units ranked by length, rank
/// 0 the longest) is `(rank, head)`. The heads go in groups of `⌈WAVE / per_head⌉` (about a
/// wave of units each; the last group may be smaller), and each group's rank-0 units come
/// first, then its rank-1 units, and so on. So the units running at the same time belong to a
/// few heads (their K and V, or Q and dO, stay in L2, as in a head-by-head order), and the
/// grid ends with its shortest units instead of a head's longest (a short tail). A bijection
/// of `0..per_head · heads` onto `0..per_head` x `0..heads`.
#[inline(always)]
pub const fn longest_first(unit: u32, per_head: u32, heads: u32) -> (u32, u32) {
    let per_head = if per_head == 0 { 1 } else { per_head };
    let group_heads = if WAVE / per_head == 0 { 1 } else { WAVE / per_head };
    let group = unit / (group_heads * per_head);
    let first_head = group * group_heads;
    let left = heads.saturating_sub(first_head);
    let size = if left == 0 {
        1
    } else if left < group_heads {
        left
    } else {
        group_heads
    };
    let r = unit - group * group_heads * per_head;
    (r / size, first_head + r % size)
}

/// The query tile and head of work item `item` of a persistent kernel (items `0..q_tiles ·
/// heads`): head by head, tile `item % q_tiles` of head `item / q_tiles`; with the causal mask
/// [`longest_first`] (a tile's length is its number of key tiles: the last tile of a head
/// is the longest). `q_tiles` is [`q_tiles`]`(seq_len)` (at least 1).
#[inline(always)]
pub const fn work_item(causal: bool, item: u32, q_tiles: u32, heads: u32) -> (u32, u32) {
    let q_tiles = if q_tiles == 0 { 1 } else { q_tiles };
    if causal {
        let (rank, head) = longest_first(item, q_tiles, heads);
        (q_tiles - 1 - rank, head)
    } else {
        (item % q_tiles, item / q_tiles)
    }
}

/// Key tiles a query tile starting at row `q0` visits: all of them, or (causal) those up to
/// the one holding its last row.
pub const fn kv_tiles(causal: bool, q0: u32, seq_len: u32) -> u32 {
    let all = seq_len.div_ceil(BN);
    let upto = (q0 + BM - 1) / BN + 1;
    if causal && upto < all { upto } else { all }
}

/// Key rows per ring stage of the D 256 kernels (`attention_d256`, `attention_d256_causal`):
/// at D 256 a consumer's O accumulator is m64n256 (128 f32 registers a thread), so the scores
/// of a step are m64n64 (32 registers) to stay within the 240 registers a consumer thread has.
pub const BN_D256: u32 = 64;
/// Depth of the D 256 kernels' K and V rings (Q 64 KiB, each K or V tile 32 KiB: 192 KiB).
pub const STAGES_D256: u32 = 2;
/// TMA box of every map of the D 256 kernels: 64 columns, 64 rows, one head (Q's 128-row tile
/// is two boxes a 64-column slab).
pub const BOX_D256: [u32; 3] = [64, 64, 1];
/// Bytes of one D 256 box: 64 rows of 64 bf16 (128 bytes, the 128-byte swizzle's span).
pub const SLAB_D256: u32 = 64 * 128;

/// Dynamic shared memory per block of the D 256 kernels: Q (8 boxes: 2 row halves x 4 column
/// slabs), the K and V rings ([`STAGES_D256`] tiles of 4 boxes each), Q's barrier and the
/// rings' barriers, 1 KiB to align: 197 704 bytes.
pub const fn shared_bytes_d256() -> u32 {
    (8 + 8 * STAGES_D256) * SLAB_D256 + 8 * (1 + 4 * STAGES_D256) + 1024
}

/// Key tiles of [`BN_D256`] keys a query tile of the D 256 kernels starting at row `q0` visits:
/// all of them, or (causal) those up to the one holding its last row.
pub const fn kv_tiles_d256(causal: bool, q0: u32, seq_len: u32) -> u32 {
    let all = seq_len.div_ceil(BN_D256);
    let upto = (q0 + BM - 1) / BN_D256 + 1;
    if causal && upto < all { upto } else { all }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use body::{ForwardArgs, ForwardKernel, ForwardLaunch, forward_kernel};
pub use body::{
    attention_body, attention_body_d256, attention_body_persistent, attention_body_persistent_chain, attention_body_persistent_q2,
    attention_body_persistent_staged, attention_body_persistent_with, attention_body_with,
};

/// Degree of [`exp2_poly`]'s polynomial in the `_poly` kernels.
pub const EXP2_POLY_DEGREE: usize = 3;

/// The column pairs (of the 16 per row and score tile) whose exponentials the `_poly` kernels
/// compute with [`exp2_poly`] on the FMA pipe (`_poly4`: 4 of 16, a quarter; `_poly6`: 6 of 16),
/// the others with `ex2.approx` on the MUFU pipe; the pairs are spread over the row
/// ([`exp2_poly_pair`]).
pub const EXP2_POLY_SPLITS: [u32; 2] = [4, 6];

/// Whether column pair `i` (0..16) of a score row takes [`exp2_poly`] when `poly` of the 16 do:
/// the pairs where `i·poly/16` steps (`poly` of them, spread evenly: pairs 3, 7, 11 and 15 for
/// `poly = 4`).
#[inline(always)]
pub const fn exp2_poly_pair(i: u32, poly: u32) -> bool {
    (i * poly) / 16 != ((i + 1) * poly) / 16
}

/// `2^f` on `[-1/2, 1/2]` as `1 + f·(c1 + f·(c2 + ..))`: minimax for the relative error with the
/// constant term exactly 1 (so that `exp2_poly(-127) == 0.0` exactly), by degree 3, 4 and 5
/// (worst relative error about 1.0e-4, 2.8e-6, 9e-8 in exact arithmetic; Lawson's iteration,
/// 2000 Chebyshev points).
const EXP2_COEFFICIENTS: [[f32; 5]; 3] = [
    [0.693_282_9, 0.242_210_95, 0.055_008_93, 0.0, 0.0],
    [0.693_124_2, 0.240_240_99, 0.055_906_426, 0.009_582_853, 0.0],
    [0.693_146_94, 0.240_222_42, 0.055_507_336, 0.009_671_513, 0.001_326_472_7],
];

/// `2^x` without the MUFU pipe (FlashAttention-3's trick, for kernels bound by `ex2.approx`'s
/// throughput, 16 a clock per SM against 128 FMAs): `x` clamped to `>= -127`, rounded to the
/// nearest integer `j` by adding and subtracting `1.5·2^23` (two FADDs, no conversion
/// instruction), `2^(x - j)` by a polynomial of degree `DEGREE` (3, 4 or 5: `DEGREE - 1`
/// FFMAs after the first product) on `[-1/2, 1/2]`, and `2^j` applied by adding `j << 23` to
/// the result's bits (the rounded sum's low bits are `j`: one shift and one integer add).
///
/// Accuracy, for the softmax's inputs (`x <= 0`): relative error at most the polynomial's
/// (tested: degree 3 below 1.1e-4, 4 below 4e-6, 5 below 5e-7, f32 evaluation included) where
/// `2^x` is a normal f32 (`x >= -126`); below, an absolute error under `2^-126` (where
/// `ex2.approx.ftz` flushes to 0); `x <= -127` (also `-inf`, a masked score) gives `+0.0`
/// exactly, as does NaN (`max` takes the other operand). Valid up to `x < 128`.
#[inline(always)]
pub fn exp2_poly<const DEGREE: usize>(x: f32) -> f32 {
    use ferrocuda_device::math::DeviceFloat;
    const { assert!(DEGREE >= 3 && DEGREE <= 5, "exp2_poly: degree 3, 4 or 5") };
    // 1.5·2^23: adding it rounds any |x| < 2^22 to an integer (ties to even), kept in the
    // mantissa's low bits.
    const ROUND: f32 = 12_582_912.0;
    let x = x.max(-127.0);
    let t = x + ROUND;
    let j = t - ROUND;
    // Exact (Sterbenz): |x - j| <= 1/2.
    let f = x - j;
    let c = EXP2_COEFFICIENTS[DEGREE - 3];
    let mut p = c[DEGREE - 1];
    let mut k = DEGREE - 1;
    while k > 0 {
        k -= 1;
        p = DeviceFloat::mul_add(p, f, c[k]);
    }
    p = DeviceFloat::mul_add(p, f, 1.0);
    // t's bits are 0x4b40_0000 + j; shifted by 23 only j's low 9 bits remain, j << 23 (mod 2^32).
    // p lies in [0.70, 1.42] (exponent field 126 or 127), so the sum's exponent field is
    // 126 + j or 127 + j >= 0 for j >= -126; for j = -127 (x in [-127, -126.5]) f >= 0, p >= 1,
    // field 0: a subnormal under 2^-126 (x = -127: f = 0, p = 1, +0.0 exactly).
    f32::from_bits(p.to_bits().wrapping_add(t.to_bits() << 23))
}

/// One query row of the f64 reference: `o[c]`, the softmax-weighted magnitude
/// `weight[c] = Σ_j p_j |v_jc| / Σ_j p_j` (the scale of `o[c]`'s rounding error) and the LSE.
#[cfg(not(target_arch = "nvptx64"))]
pub struct Reference {
    /// The exact output row.
    pub o: Vec<f64>,
    /// `Σ p |v| / Σ p` per column.
    pub weight: Vec<f64>,
    /// `ln Σ_j exp(scale · q·k_j)`.
    pub lse: f64,
}

/// The f64 reference of row `row` of head `head` (arrays `[heads, seq_len, d]` bf16, scale
/// `1/sqrt(d)`, keys after `row` left out when `causal`).
#[cfg(not(target_arch = "nvptx64"))]
#[allow(clippy::too_many_arguments)] // the problem's shape, spelled out
pub fn reference_row(
    q: &[ferrocuda_device::half::bf16],
    k: &[ferrocuda_device::half::bf16],
    v: &[ferrocuda_device::half::bf16],
    d: usize,
    seq_len: usize,
    head: usize,
    row: usize,
    causal: bool,
) -> Reference {
    let at = |i: usize| head * seq_len * d + i * d;
    let scale = 1.0 / (d as f64).sqrt();
    let keys = if causal { row + 1 } else { seq_len };
    let scores: Vec<f64> = (0..keys).map(|j| scale * (0..d).map(|c| q[at(row) + c].to_f32() as f64 * k[at(j) + c].to_f32() as f64).sum::<f64>()).collect();
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let p: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let l: f64 = p.iter().sum();
    let column = |c: usize, f: fn(f64) -> f64| (0..keys).map(|j| p[j] * f(v[at(j) + c].to_f32() as f64)).sum::<f64>() / l;
    Reference { o: (0..d).map(|c| column(c, |x| x)).collect(), weight: (0..d).map(|c| column(c, f64::abs)).collect(), lse: max + l.ln() }
}

/// Checks a computed row against its reference: every `|o - ref| <= (weight + |ref|) / 256 +
/// 1e-6` (P rounded to bf16 before `P·V`, relative error 2^-9 per element, on the numerator
/// only, plus O's bf16 rounding: about 2^-8 weight + 2^-9 |ref|, bound doubled), and `|lse -
/// ref| <= 1e-3 + 1e-5 |ref|` (f32 sums, `ex2`/`lg2.approx`). Returns the worst error / bound,
/// or which element is off. A NaN (an unwritten output) fails.
#[cfg(not(target_arch = "nvptx64"))]
pub fn within_bound(reference: &Reference, o: &[f32], lse: f32) -> Result<f64, String> {
    let mut worst = 0.0f64;
    for (c, &got) in o.iter().enumerate() {
        let bound = (reference.weight[c] + reference.o[c].abs()) / 256.0 + 1e-6;
        let error = (got as f64 - reference.o[c]).abs();
        if error.is_nan() || error > bound {
            return Err(format!("O[{c}] = {got}, expected {} (bound {bound:.3e})", reference.o[c]));
        }
        worst = worst.max(error / bound);
    }
    let bound = 1e-3 + 1e-5 * reference.lse.abs();
    let error = (lse as f64 - reference.lse).abs();
    if error.is_nan() || error > bound {
        return Err(format!("LSE = {lse}, expected {} (bound {bound:.1e})", reference.lse));
    }
    Ok(worst.max(error / bound))
}

/// Writing a `wgmma` accumulator tile out through shared memory (issue 31, session 24): the
/// forward's `_ostg` / `_obulk` epilogue and the backward's dK/dV epilogue trials. A tile of
/// `m64nD` accumulators (rows `16 warp + lane / 4` and `+ 8`, columns `8 i + 2 (lane % 4)` and
/// `+ 1` in registers `4 i + 2 h` and `+ 1`) stored straight from the registers takes 4-byte
/// stores that touch 8 rows a warp instruction (16 bytes of each); through shared memory each
/// warp writes its 16 rows with `stmatrix` and stores them in whole rows.
pub(crate) mod staging {
    use ferrocuda_device::ldmatrix;
    use ferrocuda_device::sync::sync_warp;
    use ferrocuda_device::tma::{bulk_store, fence_proxy_async_shared, store_commit, store_wait_read};
    use ferrocuda_device::unroll::unroll;
    use ferrocuda_device::vector::store_v4;

    /// Bytes of one staging row for head dimension `d`: `d` 16-bit values and 16 bytes of
    /// padding ([`super::o_stage_row`]).
    #[inline(always)]
    pub(crate) const fn row_bytes(d: u32) -> u32 {
        super::o_stage_row(d)
    }

    /// `ld.shared.v4.b32`: 16 bytes of shared memory at `address`.
    ///
    /// # Safety
    /// `address` is a 16-byte aligned shared-window address of 16 readable bytes.
    #[inline(always)]
    unsafe fn load_shared_v4(address: u32) -> [u32; 4] {
        #[cfg(target_arch = "nvptx64")]
        {
            let (a, b, c, d): (u32, u32, u32, u32);
            // SAFETY: the caller's contract.
            unsafe {
                core::arch::asm!(
                    "ld.shared.v4.b32 {{{a}, {b}, {c}, {d}}}, [{p}];",
                    a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, p = in(reg32) address, options(nostack, readonly)
                )
            };
            [a, b, c, d]
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            use ferrocuda_device::shared::SharedElement;
            // SAFETY: the caller's contract, for each of the four words.
            unsafe { [u32::load_shared(address), u32::load_shared(address + 4), u32::load_shared(address + 8), u32::load_shared(address + 12)] }
        }
    }

    /// Before this warp rewrites its staging rows: its lanes' bulk copies out of them have read
    /// them (`BULK`), and every lane's reads of them are done.
    #[inline(always)]
    pub(crate) fn reuse<const BULK: bool>() {
        if BULK {
            store_wait_read::<0>();
        }
        sync_warp(u32::MAX);
    }

    /// Writes this warp's 16 rows of the accumulator tile `acc` (its row `16 warp + r` as staging
    /// row `r` at `base + r · row_bytes(D)`), row half `h` times `factor[h]`, each value pair
    /// packed by `pack`, with `stmatrix` (conflict-free: the 8 padded rows of a matrix fall in
    /// distinct 16-byte bank groups).
    ///
    /// # Safety
    /// The warp's 32 lanes call it together with the same `base`: 16 rows of
    /// [`row_bytes`]`(D)` bytes of shared memory, 16-byte aligned, that nothing else reads or
    /// writes until this warp is done with them (after [`reuse`], for a second use).
    #[inline(always)]
    pub(crate) unsafe fn write<const D: u32>(acc: &[f32; 64], factor: [f32; 2], base: u32, lane: u32, pack: impl Fn(f32, f32) -> u32) {
        let matrix = lane / 8;
        let (row, half) = (lane % 8 + 8 * (matrix & 1), 8 * (matrix >> 1));
        unroll::<8>(|t| {
            let t = t as u32;
            if t < D / 16 {
                // Matrices 0..4: rows 0..8 and 8..16 of columns 16t.., then of columns 16t + 8..;
                // lane l holds row l / 4, columns 2 (l % 4) and + 1 of each (registers 4i + 2h).
                let (i, j) = (8 * t as usize, 8 * t as usize + 4);
                let value = [
                    pack(acc[i] * factor[0], acc[i + 1] * factor[0]),
                    pack(acc[i + 2] * factor[1], acc[i + 3] * factor[1]),
                    pack(acc[j] * factor[0], acc[j + 1] * factor[0]),
                    pack(acc[j + 2] * factor[1], acc[j + 3] * factor[1]),
                ];
                // SAFETY: the warp's lanes run it together; each row address is a 16-byte chunk
                // (8 columns) of the warp's 16 rows (row < 16, column < D), 16-byte aligned,
                // written by this one lane (the caller's contract for the rest).
                unsafe { ldmatrix::store_x4(base + row * row_bytes(D) + 2 * (16 * t + half), value) };
            }
        });
    }

    /// Stores this warp's 16 staging rows at `base` (written by [`write`]) to global memory:
    /// row `r` to `row_at(r)` (`None`: not stored, e.g. a row past the array's end), `2·D`
    /// bytes; with `BULK` one bulk copy a row (lanes 0..16 issue them and commit a group),
    /// otherwise 16 bytes a lane with `st.global.v4` (`32 / (D / 8)` rows a warp instruction).
    ///
    /// # Safety
    /// The warp's 32 lanes call it together after [`write`] with the same `base` and `row_at`;
    /// each `Some` address is 16-byte aligned global memory of `2·D` bytes that only this warp
    /// writes and nothing reads during the kernel (with `BULK`: every lane waits for its copies,
    /// `store_wait`, before the block exits, and calls [`reuse`] before it rewrites the rows).
    #[inline(always)]
    pub(crate) unsafe fn copy_out<const D: u32, const BULK: bool>(base: u32, lane: u32, row_at: impl Fn(u32) -> Option<*mut u8>) {
        let stride = row_bytes(D);
        if BULK {
            // The copy engine reads what `stmatrix` wrote: each writer's proxy fence, then the
            // warp's barrier with the issuing lanes.
            fence_proxy_async_shared();
            sync_warp(u32::MAX);
            if lane < 16 {
                if let Some(dst) = row_at(lane) {
                    // SAFETY: the caller's contract for `dst`; the source is staging row `lane`,
                    // fenced above and rewritten only after `reuse`.
                    unsafe { bulk_store(dst, base + lane * stride, 2 * D) };
                }
                store_commit();
            }
        } else {
            sync_warp(u32::MAX);
            // 16-byte chunks a row (D 128: 16, two rows a warp instruction).
            let chunks = 2 * D / 16;
            unroll::<8>(|k| {
                let k = k as u32;
                if k < D / 16 {
                    let (r, c) = (k * (32 / chunks) + lane / chunks, lane % chunks);
                    // SAFETY: row r < 16, chunk c < 2D / 16: inside the warp's staging rows,
                    // 16-byte aligned, written by `write` before the barrier.
                    let value = unsafe { load_shared_v4(base + r * stride + 16 * c) };
                    if let Some(dst) = row_at(r) {
                        // SAFETY: the caller's contract: this lane's 16 bytes of the row.
                        unsafe { store_v4(dst.add(16 * c as usize).cast::<[u32; 4]>(), value) };
                    }
                }
            });
        }
    }
}

mod body {
    use super::*;
    use ferrocuda_device::atomic::Atomic;
    use ferrocuda_device::global::{AtomicSlice, UncheckedSlice};
    use ferrocuda_device::half::{bf16, pack_bf16x2};
    use ferrocuda_device::kernel;
    use ferrocuda_device::math::FastMath;
    use ferrocuda_device::mbarrier::{MBarrier, fence_init};
    use ferrocuda_device::named_barrier::NamedBarrier;
    use ferrocuda_device::pipeline::Ring;
    use ferrocuda_device::shared::{SharedElement, dynamic_shared};
    use ferrocuda_device::sync::sync_threads;
    use ferrocuda_device::thread::{block_dim_x, block_dim_y, block_dim_z, block_idx_x, block_idx_y, grid_dim_x, grid_dim_y, grid_dim_z, thread_idx_x};
    use ferrocuda_device::tma::{TensorMap, dynamic_shared_address, store_wait};
    use ferrocuda_device::unroll::unroll;
    use ferrocuda_device::warp::shuffle_xor;
    use ferrocuda_device::warpgroup;
    use ferrocuda_device::wgmma::{
        self, Descriptor, a_fragments_bf16_64, fence_accumulators_32, fence_accumulators_64, m64n64k16_bf16_rs_n_major, m64n128k16_bf16, m64n128k16_bf16_init,
        m64n128k16_bf16_rs_n_major,
    };

    /// The P fragments of one 128-key tile: 8 k16 steps of 4 registers.
    type Fragments = [[u32; 4]; 8];

    /// Issues `S = Q·Kᵀ` for one consumer warpgroup (64 query rows at `q`, 128 keys at `k`,
    /// each a stack of [`SLAB`]s): `D / 16` `wgmma` m64n128k16 stepping 32 bytes along the
    /// swizzled rows, then a new slab every 4 steps.
    ///
    /// # Safety
    /// The whole warpgroup calls it together after a `wgmma::fence`; Q and the K tile are in
    /// shared memory (written by TMA) until the group is waited for.
    #[inline(always)]
    unsafe fn issue_scores<const D: u32, const TIED: bool>(s: &mut [f32; 64], q: u32, k: u32) {
        // The descriptors are stepped by adding the offset / 16 to the start-address field
        // (shared addresses stay below 2^18, so the 14-bit field never carries). Q's base goes
        // through an opaque move, so that LLVM does not hoist Q's `D / 16` descriptors out of
        // the key loop (ptxas may still do so: it did while the loop spilled, session 14; the
        // kernels were measured with this form).
        let (qd, kd) = (opaque_u64(Descriptor::k_major_128b(q).0), Descriptor::k_major_128b(k).0);
        unroll::<8>(|step| {
            let step = step as u32;
            if step < D / 16 {
                let offset = ((step / 4) * SLAB + 32 * (step % 4)) as u64 >> 4;
                // SAFETY: the caller's contract; the offsets stay inside the tiles.
                unsafe {
                    let (a, b) = (qd + offset, kd + offset);
                    if step == 0 && !TIED { m64n128k16_bf16_init(s, a, b) } else { m64n128k16_bf16(s, a, b, step != 0) }
                }
            }
        });
        // SAFETY: the caller's contract.
        unsafe { wgmma::commit() };
    }

    /// [`opaque_u64`] for a `u32` (`mov.b32`).
    #[inline(always)]
    fn opaque_u32(x: u32) -> u32 {
        #[cfg(target_arch = "nvptx64")]
        {
            let r: u32;
            // SAFETY: a register move; no memory, no side effects.
            unsafe { core::arch::asm!("mov.b32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
            r
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            x
        }
    }

    /// `x`, through an instruction LLVM cannot evaluate (`mov.b64` in inline PTX), so that
    /// values computed from it are not hoisted out of a loop.
    #[inline(always)]
    fn opaque_u64(x: u64) -> u64 {
        #[cfg(target_arch = "nvptx64")]
        {
            let r: u64;
            // SAFETY: a register move; no memory, no side effects.
            unsafe { core::arch::asm!("mov.b64 {r}, {x};", r = out(reg64) r, x = in(reg64) x, options(pure, nomem, nostack)) };
            r
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            x
        }
    }

    /// Issues `O += P·V` (V tile at `v`: 128 keys, N-major, one [`SLAB`] per 64 columns):
    /// 8 `wgmma` (k16 steps of 16 keys = 2048 bytes) with A from the registers `p`.
    ///
    /// # Safety
    /// As for [`issue_scores`]; `p` and `o` stay untouched until the group is waited for.
    #[inline(always)]
    unsafe fn issue_pv<const D: u32>(o: &mut [f32; 64], p: &Fragments, v: u32) {
        unroll::<8>(|step| {
            let b = Descriptor::n_major_128b(v + 2048 * step as u32, SLAB).0;
            // SAFETY: the caller's contract. For D = 64 the accumulators are the first 32 of
            // `o` (columns 0..64 in the m64n64 layout, the same registers as in m64n128).
            unsafe {
                if D == 64 {
                    m64n64k16_bf16_rs_n_major(&mut *(o.as_mut_ptr() as *mut [f32; 32]), p[step], b, true);
                } else {
                    m64n128k16_bf16_rs_n_major(o, p[step], b, true);
                }
            }
        });
        // SAFETY: the caller's contract.
        unsafe { wgmma::commit() };
    }

    /// Sets the scores of keys past `seq_len` and (causal) past the query to -inf. `col0`: the
    /// tile's first key plus `2 (lane % 4)`; `row0`: this thread's first query row.
    #[inline(always)]
    fn mask<const CAUSAL: bool>(s: &mut [f32; 64], col0: u32, row0: u32, seq_len: u32) {
        unroll::<16>(|i| {
            unroll::<4>(|e| {
                let col = col0 + 8 * i as u32 + (e as u32 & 1);
                let row = row0 + 8 * (e as u32 >> 1);
                if col >= seq_len || (CAUSAL && col > row) {
                    s[4 * i + e] = f32::NEG_INFINITY;
                }
            })
        });
    }

    /// The online softmax of one score tile for this thread's two rows: the new running maxima
    /// `m` (in log2 units, `scale_log2` folded in), `s` replaced by `p = 2^(s·scale_log2 - m)`,
    /// the running sums `l` (this thread's columns only) rescaled and extended. Returns the
    /// factor by which the rows of O must be rescaled.
    ///
    /// `split` (a constant after inlining): four partial maxima and sums per row, combined (a chain of 8 dependent FMNMX
    /// and FADD per row instead of 32). Measured on one H200 (session 14, both forms in one
    /// job): 2-7% faster in the persistent ping-pong kernels, but 3-9% slower in the others,
    /// where ptxas then computed both rows' maxima before the first exponential instead of
    /// overlapping the second row's chain with the first row's exponentials; so only the
    /// persistent ping-pong kernels take it.
    ///
    /// `POLY` (0..=16): the column pairs of each row whose exponentials go through
    /// [`exp2_poly`] (FMA pipe) instead of `ex2.approx` (MUFU pipe), spread over the row
    /// ([`exp2_poly_pair`]); the `_poly` kernels' split. The two rows are two calls of an
    /// `#[inline(always)]` function, not an `unroll` closure: with the polynomial in it LLVM
    /// left that closure a call (one function for every kernel, local memory for `s`).
    #[inline(always)]
    fn softmax<const POLY: u32>(s: &mut [f32; 64], m: &mut [f32; 2], l: &mut [f32; 2], scale_log2: f32, split: bool) -> [f32; 2] {
        [softmax_row::<POLY>(s, m, l, scale_log2, split, 0), softmax_row::<POLY>(s, m, l, scale_log2, split, 1)]
    }

    /// [`softmax`] of this thread's row `h` (0 or 1): updates `m[h]`, `l[h]` and the row's
    /// scores; returns the row's rescale factor.
    #[inline(always)]
    fn softmax_row<const POLY: u32>(s: &mut [f32; 64], m: &mut [f32; 2], l: &mut [f32; 2], scale_log2: f32, split: bool, h: usize) -> f32 {
        {
            let mut max = f32::NEG_INFINITY;
            if split {
                let mut part = [f32::NEG_INFINITY; 4];
                unroll::<16>(|i| part[i % 4] = part[i % 4].max(s[4 * i + 2 * h]).max(s[4 * i + 2 * h + 1]));
                max = part[0].max(part[1]).max(part[2].max(part[3]));
            } else {
                unroll::<16>(|i| max = max.max(s[4 * i + 2 * h]).max(s[4 * i + 2 * h + 1]));
            }
            // The row's other columns live in the 3 other lanes of the quad.
            max = max.max(shuffle_xor(max, 1));
            max = max.max(shuffle_xor(max, 2));
            let new = m[h].max(max * scale_log2);
            // A row with every score so far masked keeps m = -inf; subtract 0 instead so that
            // no -inf - -inf = NaN appears (its p and rescale factor are then 0).
            let shift = if new == f32::NEG_INFINITY { 0.0 } else { new };
            let rescale = (m[h] - shift).fast_exp2();
            let sum = if split {
                let mut sums = [0.0f32; 4];
                unroll::<16>(|i| {
                    unroll::<2>(|j| {
                        let p = exp2_mixed(i as u32, POLY, s[4 * i + 2 * h + j] * scale_log2 - shift);
                        s[4 * i + 2 * h + j] = p;
                        sums[i % 4] += p;
                    })
                });
                (sums[0] + sums[1]) + (sums[2] + sums[3])
            } else {
                let mut sum = 0.0f32;
                unroll::<16>(|i| {
                    unroll::<2>(|j| {
                        let p = exp2_mixed(i as u32, POLY, s[4 * i + 2 * h + j] * scale_log2 - shift);
                        s[4 * i + 2 * h + j] = p;
                        sum += p;
                    })
                });
                sum
            };
            l[h] = l[h] * rescale + sum;
            m[h] = new;
            rescale
        }
    }

    /// `2^x` for column pair `i` of a row: [`exp2_poly`] where [`exp2_poly_pair`]`(i, poly)`,
    /// else `ex2.approx` (a function, not a closure: LLVM left the closure a call).
    #[inline(always)]
    fn exp2_mixed(i: u32, poly: u32, x: f32) -> f32 {
        if exp2_poly_pair(i, poly) { exp2_poly::<EXP2_POLY_DEGREE>(x) } else { x.fast_exp2() }
    }

    /// Multiplies this thread's two rows of O by `factor`.
    #[inline(always)]
    fn rescale_rows(o: &mut [f32; 64], factor: [f32; 2]) {
        unroll::<16>(|i| unroll::<4>(|e| o[4 * i + e] *= factor[e >> 1]));
    }

    /// Where the tiles and barriers of a block live in shared memory: `qbufs` Q buffers, the K
    /// ring's `STAGES` tiles, the V ring's, then the barriers, every buffer `tile` bytes.
    /// `qbufs` (a constant after inlining): 1, 2 for the persistent `_q2` kernels, and 2 for
    /// the D 256 kernels (`tile` a 64-key K/V tile: Q's 128 rows are two such buffers, consumer
    /// `c`'s 64 rows in buffer `c`; session 23: one layout for both, which had repeated it). The
    /// shared memory requested covers the barriers and slots each kernel uses ([`shared_bytes`],
    /// [`shared_bytes_q2`], [`shared_bytes_d256`]: the D 256 kernels use Q's barrier and the two
    /// rings' only).
    #[derive(Clone, Copy)]
    struct Layout<const STAGES: u32> {
        base: u32,
        tile: u32,
        qbufs: u32,
    }

    impl<const STAGES: u32> Layout<STAGES> {
        /// Q's buffer `slot` (`< qbufs`).
        #[inline(always)]
        fn q_at(self, slot: u32) -> u32 {
            self.base + self.tile * slot
        }
        #[inline(always)]
        fn q(self) -> u32 {
            self.base
        }
        #[inline(always)]
        fn k(self, slot: u32) -> u32 {
            self.base + self.tile * (self.qbufs + slot)
        }
        #[inline(always)]
        fn v(self, slot: u32) -> u32 {
            self.base + self.tile * (self.qbufs + STAGES + slot)
        }
        /// The barriers after the tiles: Q's "full", then the K ring's, then the V ring's.
        #[inline(always)]
        fn barriers(self) -> u32 {
            self.base + self.tile * (self.qbufs + 2 * STAGES)
        }
        #[inline(always)]
        fn q_full(self) -> MBarrier {
            // SAFETY: the first 8-byte slot after the tiles, inside the requested shared
            // memory, used only as this barrier.
            unsafe { MBarrier::at(self.barriers()) }
        }
        /// The K tiles' ring.
        #[inline(always)]
        fn keys(self) -> Ring<STAGES> {
            // SAFETY: the next `Ring::BARRIER_BYTES`, inside the requested shared memory
            // ([`shared_bytes`], [`shared_bytes_d256`]), used only by this ring.
            unsafe { Ring::at(self.barriers() + 8) }
        }
        /// The V tiles' ring.
        #[inline(always)]
        fn values(self) -> Ring<STAGES> {
            // SAFETY: as for `keys`, the bytes after them.
            unsafe { Ring::at(self.barriers() + 8 + Ring::<STAGES>::BARRIER_BYTES) }
        }
        /// Persistent kernels: Q's "empty" barrier (one arrival per consumer warp when the last
        /// scores of a work item are done), after the rings' barriers.
        #[inline(always)]
        fn q_empty(self) -> MBarrier {
            // SAFETY: the 8 bytes after the rings' barriers, inside the requested shared memory
            // ([`shared_bytes`] counts 32 bytes for these), used only as this barrier.
            unsafe { MBarrier::at(self.barriers() + 8 + 2 * Ring::<STAGES>::BARRIER_BYTES) }
        }
        /// The `_q2` kernels' region after the persistent kernels' 32 bytes of barriers and
        /// slots ([`shared_bytes_q2`] counts its 40 bytes): Q buffer 1's "full" and "empty"
        /// barriers, work-item slots 2 and 3's barriers, then those two slots.
        #[inline(always)]
        fn q2_region(self) -> u32 {
            self.barriers() + 40 + 2 * Ring::<STAGES>::BARRIER_BYTES
        }
        /// Q buffer `slot`'s "full" barrier (the producer's expected bytes, the copy engine's).
        #[inline(always)]
        fn q_full_at(self, slot: u32) -> MBarrier {
            // SAFETY: slot 0: `q_full`; slot 1 (the `_q2` kernels only): the first 8 bytes of
            // their region, used only as this barrier.
            if slot == 0 { self.q_full() } else { unsafe { MBarrier::at(self.q2_region()) } }
        }
        /// Q buffer `slot`'s "empty" barrier (persistent kernels).
        #[inline(always)]
        fn q_empty_at(self, slot: u32) -> MBarrier {
            // SAFETY: slot 0: `q_empty`; slot 1 (the `_q2` kernels only): the next 8 bytes of
            // their region, used only as this barrier.
            if slot == 0 { self.q_empty() } else { unsafe { MBarrier::at(self.q2_region() + 8) } }
        }
        /// The `_ostg` / `_obulk` kernels' O staging buffer: 128 rows of [`o_stage_row`] bytes,
        /// [`O_STAGE_OFFSET`] bytes after the barriers' start (16-byte aligned).
        #[inline(always)]
        fn o_stage(self) -> u32 {
            self.barriers() + O_STAGE_OFFSET
        }
        /// Persistent kernels' work-item slots: 2 (4 with two Q buffers, so that the producer,
        /// up to two items ahead, never rewrites a slot the consumers have not read: it
        /// rewrites slot `n % 4` at item `n` after the consumers released Q after item `n - 3`).
        #[inline(always)]
        fn item_slots(self) -> u32 {
            2 * self.qbufs
        }
        /// Persistent kernels: the barrier of work-item slot `n % item_slots` (the producer's
        /// one arrival after writing the slot).
        #[inline(always)]
        fn item_full(self, n: u32) -> MBarrier {
            let s = n % self.item_slots();
            // SAFETY: slots 0 and 1: the 16 bytes after `q_empty`, as for it, one barrier per
            // slot; slots 2 and 3 (the `_q2` kernels): bytes 16..32 of their region.
            unsafe {
                if s < 2 {
                    MBarrier::at(self.barriers() + 16 + 2 * Ring::<STAGES>::BARRIER_BYTES + 8 * s)
                } else {
                    MBarrier::at(self.q2_region() + 16 + 8 * (s - 2))
                }
            }
        }
        /// Persistent kernels: the address of work-item slot `n % item_slots` (a `u32`, after
        /// the barriers).
        #[inline(always)]
        fn item(self, n: u32) -> u32 {
            let s = n % self.item_slots();
            if s < 2 { self.barriers() + 32 + 2 * Ring::<STAGES>::BARRIER_BYTES + 4 * s } else { self.q2_region() + 32 + 4 * (s - 2) }
        }
    }

    /// What one consumer thread needs to finish a score tile.
    #[derive(Clone, Copy)]
    struct Rows {
        lane: u32,
        /// This thread's first query row (the second is 8 further).
        row0: u32,
        /// The block's first query row.
        q0: u32,
        seq_len: u32,
        scale_log2: f32,
    }

    /// The consumer's running state: O's accumulators, the row maxima (log2 units) and sums.
    struct Running {
        acc: [f32; 64],
        m: [f32; 2],
        l: [f32; 2],
    }

    /// The chained persistent kernels' hand-off from one work item's tail to the next item
    /// (`consume_tile` with `CHAIN`): the tail reads work-item slot `n` (`read`, the item in
    /// `item`) and issues its first scores when it is one of the `items`.
    #[derive(Clone, Copy)]
    struct Chain {
        n: u32,
        items: u32,
        item: u32,
        read: bool,
    }

    impl Chain {
        /// No hand-off (the kernels without `CHAIN`).
        #[inline(always)]
        fn none() -> Chain {
            Chain { n: 0, items: 0, item: 0, read: false }
        }
    }

    /// Keeps the compiler from moving register writes of `p` past a `wgmma::fence` (the same
    /// empty `asm` as the accumulator fences): `p` is read by an asynchronous `wgmma`.
    #[inline(always)]
    fn fence_fragments(p: &mut Fragments) {
        // SAFETY: `[[u32; 4]; 8]` and `[f32; 32]` have the same size and alignment, and every bit
        // pattern is valid for both.
        fence_accumulators_32(unsafe { &mut *(p as *mut Fragments as *mut [f32; 32]) });
    }

    /// Finishes the scores of key tile `j` (their group already waited for; ring round
    /// `round`): releases K_j's slot, masks if needed (only with `MASK`: the tile may be
    /// ragged or on the causal diagonal), runs the online softmax. Returns the rescale factor
    /// of O's rows and the probabilities P (f32, in the accumulator layout;
    /// `a_fragments_bf16_64` makes them the next `wgmma`'s A operand).
    #[inline(always)]
    fn finish_scores<const CAUSAL: bool, const STAGES: u32, const MASK: bool, const POLY: u32>(
        s: &mut [f32; 64],
        state: &mut Running,
        rows: Rows,
        layout: Layout<STAGES>,
        j: u32,
        round: u32,
        split: bool,
    ) -> ([f32; 2], [f32; 64]) {
        fence_accumulators_64(s);
        if rows.lane == 0 {
            layout.keys().release(round);
        }
        // Work on a copy: `s` stays as the last `wgmma` wrote it (it is the next score group's
        // accumulator operand), so nothing but a `wgmma` defines it while P·V is in flight
        // (otherwise ptxas serialises the `wgmma`s: C7513).
        let mut x = *s;
        if MASK && ((j + 1) * BN > rows.seq_len || (CAUSAL && (j + 1) * BN > rows.q0 + 1)) {
            mask::<CAUSAL>(&mut x, j * BN + 2 * (rows.lane % 4), rows.row0, rows.seq_len);
        }
        let factor = softmax::<POLY>(&mut x, &mut state.m, &mut state.l, rows.scale_log2, split);
        (factor, x)
    }

    /// The two consumers' turn barriers of the ping-pong schedule, as (this consumer's, the
    /// other's): consumer `c` issues its tensor-core work only after waiting on barrier `4 + c`
    /// (ids 1..=3 are the reducing block barriers'), then arrives on the other's, so the two
    /// warpgroups take turns and one's softmax overlaps the other's products. (Constants:
    /// `NamedBarrier::new` checks its arguments, at compile time here.)
    #[inline(always)]
    fn turns(consumer: u32) -> (NamedBarrier, NamedBarrier) {
        // SAFETY: ids 4 and 5 are used with 256 threads (the two consumer warpgroups) only.
        const TURN: [NamedBarrier; 2] = unsafe { [NamedBarrier::new(4, 256), NamedBarrier::new(5, 256)] };
        if consumer == 0 { (TURN[0], TURN[1]) } else { (TURN[1], TURN[0]) }
    }

    /// The producer's loads for one query tile (rows `q0..` of `head`): the Q tile, then its
    /// `tiles` key and value tiles, last first (round `round + i` holds key tile
    /// `tiles - 1 - i`: the one tile that may need the mask, ragged past `seq_len` or on the
    /// causal diagonal, comes first, and the consumers' steady loop has no mask), as rounds
    /// `round..round + tiles` of the rings.
    ///
    /// # Safety
    /// One thread calls it; the maps are valid and acquired (the kernel's contract); Q's buffer
    /// `q_slot` is free (nothing reads it until its `q_full` completes again).
    #[inline(always)]
    unsafe fn produce_tile<const D: u32, const STAGES: u32>(
        layout: Layout<STAGES>,
        maps: [*const TensorMap; 3],
        q0: u32,
        head: u32,
        tiles: u32,
        round: u32,
        q_slot: u32,
    ) {
        let [q_map, k_map, v_map] = maps;
        let tile = tile_bytes(D);
        // SAFETY: every box starts inside its array (rows past `seq_len` are filled with zeros by
        // the copy engine); Q's buffer is free (the caller's contract) and each ring slot is
        // free (its `empty` phase waited for by `produce`) before it is refilled.
        unsafe {
            let q_full = layout.q_full_at(q_slot);
            q_full.arrive_expect_tx(tile);
            for c in 0..D / 64 {
                TensorMap::load_3d(q_map, layout.q_at(q_slot) + c * SLAB, q_full, (64 * c) as i32, q0 as i32, head as i32);
            }
            for i in 0..tiles {
                let (slot, row) = (Ring::<STAGES>::slot(round + i), ((tiles - 1 - i) * BN) as i32);
                let full = layout.keys().produce(round + i, tile);
                for c in 0..D / 64 {
                    TensorMap::load_3d(k_map, layout.k(slot) + c * SLAB, full, (64 * c) as i32, row, head as i32);
                }
                let full = layout.values().produce(round + i, tile);
                for c in 0..D / 64 {
                    TensorMap::load_3d(v_map, layout.v(slot) + c * SLAB, full, (64 * c) as i32, row, head as i32);
                }
            }
        }
    }

    /// One consumer warpgroup's overlapped schedule over the `tiles` key tiles of its query
    /// tile (rings' rounds `round..`; Q's buffer already full): see the module docs. With
    /// `PINGPONG` it takes its turns on [`turns`]`(consumer)`; the caller arrives once on the
    /// other's barrier (consumer 1) before the first call and syncs once on its own (consumer 0)
    /// after the last, so that the turns stay strictly alternating across tiles. `RELEASE_Q`
    /// (the persistent kernels): one arrival per warp on Q buffer `q_slot`'s `q_empty` as soon
    /// as the last score group has been waited for. Returns O's accumulators and the rows' maxima and sums.
    /// `s`: the scores' registers. `CHAIN` (the chained persistent kernels, with `RELEASE_Q`):
    /// `s` holds this tile's first scores (key round `round`, issued in the caller's turn and
    /// waited for); the tail reads work-item slot `chain.n` into `chain.item` (`chain.read`)
    /// and issues the next scores into `s` behind the last `P·V`: for an item below
    /// `chain.items`, its first (its Q buffer `chain.n % qbufs` and key round `round + tiles`
    /// waited for), otherwise a group the caller drops; it returns with that group in flight,
    /// for the caller to wait for after storing O.
    ///
    /// # Safety
    /// The consumer warpgroup's 128 threads call it together with the same arguments; Q's
    /// buffer holds the query tile; the producer fills rounds `round..round + tiles` (with
    /// `CHAIN`, the persistent producer's order: the items one after the other, rounds
    /// counting on); with `CHAIN`, `tiles >= 1`, `s` holds this tile's first scores and no
    /// group is in flight.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn consume_tile<
        const D: u32,
        const CAUSAL: bool,
        const PINGPONG: bool,
        const STAGES: u32,
        const RELEASE_Q: bool,
        const POLY: u32,
        const CHAIN: bool,
    >(
        layout: Layout<STAGES>,
        rows: Rows,
        q: u32,
        consumer: u32,
        tiles: u32,
        round: u32,
        q_slot: u32,
        s: &mut [f32; 64],
        chain: &mut Chain,
    ) -> Running {
        let lane = rows.lane;
        // The softmax's split reductions where they measured faster (see `softmax`): the
        // persistent (`RELEASE_Q`) ping-pong kernels.
        let split = RELEASE_Q && PINGPONG;
        // Not `[0.0; 64]`: a repeat expression becomes a store loop that keeps the array in
        // local memory (docs/performance.md). SAFETY: all-zero bits are 0.0.
        let mut state = Running { acc: unsafe { core::mem::zeroed() }, m: [f32::NEG_INFINITY; 2], l: [0.0; 2] };
        if !CHAIN {
            // Dead on entry (the first score `wgmma` only writes it): not live across a
            // persistent kernel's items. SAFETY: all-zero bits are 0.0.
            *s = unsafe { core::mem::zeroed() };
        }
        // (`CHAIN`: never 0, the caller's contract. Its early return would join the tail's
        // path with a group in flight, which ptxas answers by serialising every `wgmma`, C7515.)
        if !CHAIN && tiles == 0 {
            return state;
        }
        // Every `unsafe` block below issues or waits for `wgmma`s: the consumer warpgroup's 128
        // threads run this code together (the caller's contract; the loop bounds are the
        // tile's); the shared tiles a group reads stay untouched until the arrival on their
        // `empty` barrier, which follows the wait for that group; the registers of a group in
        // flight (`s`, `state.acc`, `p`) are fenced before its issue and not touched until it
        // has been waited for.
        let (mine, other) = turns(consumer);
        // Step 0: the scores of the last key tile (the only one that may need the mask);
        // with `CHAIN` already in `s`, issued by the caller or the previous tile's tail (in the
        // same turn as its last P·V) and waited for by the caller.
        if !CHAIN {
            layout.keys().consume(round);
            if PINGPONG {
                mine.sync();
            }
            // (No fence of `s` here: the first score `wgmma` only writes it.)
            // SAFETY: see above.
            unsafe {
                wgmma::fence();
                issue_scores::<D, false>(s, q, layout.k(Ring::<STAGES>::slot(round)));
            }
            if PINGPONG {
                other.arrive();
            }
            // SAFETY: see above.
            unsafe { wgmma::wait::<0>() };
        }
        if RELEASE_Q && tiles == 1 && lane == 0 {
            layout.q_empty_at(q_slot).arrive();
        }
        // The probabilities are kept in `s` (the next scores' `wgmma` takes them as its
        // accumulator operand, scaled by 0), so they are converted before it.
        (_, *s) = finish_scores::<CAUSAL, STAGES, true, POLY>(s, &mut state, rows, layout, tiles - 1, round, split);
        // The factor by which O's rows must be rescaled before the next P·V.
        let mut factor = [1.0f32; 2];
        // SAFETY: all-zero bits are valid `u32`s (replaced before the first P·V reads them).
        let mut p: Fragments = unsafe { core::mem::zeroed() };
        // Steps 1..tiles, FlashAttention-3's intra-warpgroup overlap with every branch out of
        // the loop: issue the scores of step i, then P·V of step i - 1; wait for the scores
        // (the older group) and run their softmax while P·V is on the tensor cores. The wait
        // for that P·V opens the next step (or the tail): ptxas schedules within a step, and
        // placed at the end of the step it hoisted the wait above the softmax in some kernels,
        // which then waited for P·V before any of it. No mask here (the key tiles after the
        // first are whole and below the causal diagonal).
        for i in 1..tiles {
            // SAFETY: see above. P·V of step i - 2 (if any) is done: its P and V are free.
            unsafe { wgmma::wait::<0>() };
            fence_accumulators_64(&mut state.acc);
            fence_fragments(&mut p);
            if i >= 2 && lane == 0 {
                layout.values().release(round + i - 2);
            }
            p = a_fragments_bf16_64(s);
            // Pinned here, before the scores' `wgmma` (LLVM sank the conversion below it,
            // which kept the f32 probabilities and the new scores live together: spills).
            fence_fragments(&mut p);
            layout.keys().consume(round + i);
            if PINGPONG {
                mine.sync();
            }
            // (No fence of `s` here: the first score `wgmma` only writes it.)
            // SAFETY: see above. The scores go first, so that they are done (the older group)
            // while P·V still runs.
            unsafe {
                wgmma::fence();
                issue_scores::<D, true>(s, q, layout.k(Ring::<STAGES>::slot(round + i)));
            }
            // O is not in flight here (the previous P·V was waited for); this overlaps S.
            rescale_rows(&mut state.acc, factor);
            // V after issuing S: V may still be on its way (the producer loads it after K);
            // waiting for it first kept the tensor cores idle (H100 run 2: d64 overlap 20%
            // slower than with this order in run 1).
            layout.values().consume(round + i - 1);
            fence_accumulators_64(&mut state.acc);
            fence_fragments(&mut p);
            // SAFETY: see above.
            unsafe {
                wgmma::fence();
                issue_pv::<D>(&mut state.acc, &p, layout.v(Ring::<STAGES>::slot(round + i - 1)));
            }
            if PINGPONG {
                other.arrive();
            }
            // SAFETY: see above. The scores are done; P·V may still run.
            unsafe { wgmma::wait::<1>() };
            // The scores of the last step are done: Q's buffer is free.
            if RELEASE_Q && i + 1 == tiles && lane == 0 {
                layout.q_empty_at(q_slot).arrive();
            }
            // The softmax runs while P·V is on the tensor cores. Its probabilities become A
            // fragments only after the next wait: registers that a later `wgmma` reads must
            // not be written while a group is in flight, or ptxas serialises every `wgmma` of
            // the kernel (C7513).
            let (f, x) = finish_scores::<CAUSAL, STAGES, false, POLY>(s, &mut state, rows, layout, tiles - 1 - i, round + i, split);
            factor = f;
            *s = x;
        }
        // The tail: the last P·V.
        // SAFETY: see above.
        unsafe { wgmma::wait::<0>() };
        fence_accumulators_64(&mut state.acc);
        fence_fragments(&mut p);
        if tiles >= 2 && lane == 0 {
            layout.values().release(round + tiles - 2);
        }
        p = a_fragments_bf16_64(s);
        if PINGPONG {
            mine.sync();
        }
        rescale_rows(&mut state.acc, factor);
        layout.values().consume(round + tiles - 1);
        fence_accumulators_64(&mut state.acc);
        fence_fragments(&mut p);
        // SAFETY: see above.
        unsafe {
            wgmma::fence();
            issue_pv::<D>(&mut state.acc, &p, layout.v(Ring::<STAGES>::slot(round + tiles - 1)));
        }
        // `CHAIN`: the next work item's first scores go out behind this P·V (in the same
        // turn), so that they run on the tensor cores while the caller stores this tile's O.
        // The item's slot and Q's buffer are waited for here, as the loop would at its top.
        // Without a next item the same group reads this tile's Q and last key tile, whose
        // slot nothing refills any more (the producer has stopped), and the caller drops the
        // result: the issue and the waits stay out of any branch (ptxas serialises every
        // `wgmma` of the kernel when one is issued or waited for on a divergent path, C7518,
        // or when a register of a group in flight is copied, C7515).
        if CHAIN {
            let n = chain.n;
            layout.item_full(n).wait((n / layout.item_slots()) & 1);
            // SAFETY: the slot's address, inside the requested shared memory; written by the
            // producer before its arrival, which the wait above observed.
            chain.item = unsafe { u32::load_shared(layout.item(n)) };
            chain.read = true;
            let next = chain.item < chain.items;
            let (next_q, next_k) = if next {
                let q_slot = n % layout.qbufs;
                layout.q_full_at(q_slot).wait((n / layout.qbufs) & 1);
                layout.keys().consume(round + tiles);
                (layout.q_at(q_slot) + consumer * 64 * 128, layout.k(Ring::<STAGES>::slot(round + tiles)))
            } else {
                (q, layout.k(Ring::<STAGES>::slot(round + tiles - 1)))
            };
            // SAFETY: see above; the next item's Q is in its buffer and its first key tile in
            // round `round + tiles` (the producer's order), both waited for; or, without one,
            // this tile's, which nothing writes any more.
            unsafe {
                wgmma::fence();
                issue_scores::<D, false>(s, next_q, next_k);
            }
        }
        if PINGPONG {
            other.arrive();
        }
        // SAFETY: see above (with `CHAIN` the next scores are in flight: P·V is the older group).
        unsafe {
            if CHAIN {
                wgmma::wait::<1>();
            } else {
                wgmma::wait::<0>();
            }
        }
        fence_accumulators_64(&mut state.acc);
        if lane == 0 {
            layout.values().release(round + tiles - 1);
        }
        state
    }

    /// The epilogue: normalises this thread's two rows of O, stores them and (one lane per
    /// row) the LSE; rows past `seq_len` are not stored.
    ///
    /// # Safety
    /// `o` holds `(head + 1) · seq_len · D` bf16 (as pairs), `lse` `(head + 1) · seq_len` f32.
    #[inline(always)]
    unsafe fn store_rows<const D: u32>(state: Running, rows: Rows, o: *mut u32, lse: *mut f32, head: u32) {
        let Running { acc, m, l } = state;
        let (lane, seq_len) = (rows.lane, rows.seq_len);
        unroll::<2>(|h| {
            let mut total = l[h];
            total += shuffle_xor(total, 1);
            total += shuffle_xor(total, 2);
            let row = rows.row0 + 8 * h as u32;
            if row < seq_len {
                let inverse = if total > 0.0 { 1.0 / total } else { 0.0 };
                let at = (head as usize * seq_len as usize + row as usize) * D as usize;
                unroll::<16>(|i| {
                    if i < D as usize / 8 {
                        let col = 8 * i + 2 * (lane as usize % 4);
                        let pair = pack_bf16x2(acc[4 * i + 2 * h] * inverse, acc[4 * i + 2 * h + 1] * inverse);
                        // SAFETY: row < seq_len and col + 1 < D: inside O (the caller's contract).
                        unsafe { *o.add((at + col) / 2) = pair };
                    }
                });
                if lane.is_multiple_of(4) {
                    // SAFETY: inside `lse` (the caller's contract).
                    unsafe { *lse.add(head as usize * seq_len as usize + row as usize) = (m[h] + total.fast_log2()) * core::f32::consts::LN_2 };
                }
            }
        });
    }

    /// The epilogues of the persistent bodies (their `EPI` parameter): [`store_rows`]' 4-byte
    /// stores straight from the accumulators (every kernel before session 24), ...
    const EPI_SCATTER: u32 = 0;
    /// ... O through the staging buffer, read back in whole rows and stored 16 bytes a lane
    /// (`_ostg`), ...
    const EPI_STG: u32 = 1;
    /// ... or O through the staging buffer and the copy engine, one bulk copy a row (`_obulk`).
    const EPI_BULK: u32 = 2;

    /// The epilogue through shared memory (`_ostg` with `BULK` false, `_obulk` with it; issue
    /// 31, session 24): this warp's 16 rows of O, normalised, go into its 16 rows of the
    /// staging buffer with `stmatrix` (the accumulator layout is that of its 8x8 matrices; the
    /// padded rows make it conflict-free), then out in whole rows: with `BULK` one bulk copy a
    /// row (lanes 0..15, the copy engine), otherwise read back 16 bytes a lane and stored with
    /// `st.global.v4` (two 256-byte rows a warp instruction at D 128, where [`store_rows`]'
    /// 4-byte stores touch 8 rows an instruction, 16 bytes each). Rows past `seq_len` are not
    /// stored. The LSE as in [`store_rows`].
    ///
    /// # Safety
    /// As for [`store_rows`], with O 16-byte aligned; the warp's 32 lanes call it together
    /// (`stmatrix`, `bar.warp.sync`); `stage` is the staging buffer (128 rows of
    /// [`o_stage_row`]`(D)` bytes, 16-byte aligned), whose 16 rows of this warp nothing else
    /// touches; with `BULK`, every lane waits for its bulk copies (`store_wait`) before the
    /// block exits.
    #[inline(always)]
    unsafe fn store_rows_staged<const D: u32, const BULK: bool>(state: Running, rows: Rows, o: *mut u32, lse: *mut f32, head: u32, stage: u32) {
        let Running { acc, m, l } = state;
        let (lane, seq_len) = (rows.lane, rows.seq_len);
        let mut inverse = [0.0f32; 2];
        unroll::<2>(|h| {
            let mut total = l[h];
            total += shuffle_xor(total, 1);
            total += shuffle_xor(total, 2);
            inverse[h] = if total > 0.0 { 1.0 / total } else { 0.0 };
            let row = rows.row0 + 8 * h as u32;
            if row < seq_len && lane.is_multiple_of(4) {
                // SAFETY: inside `lse` (the caller's contract).
                unsafe { *lse.add(head as usize * seq_len as usize + row as usize) = (m[h] + total.fast_log2()) * core::f32::consts::LN_2 };
            }
        });
        // The warp's first row (of O, and of the block's 128-row tile) and its staging rows.
        let first = rows.row0 - lane / 4;
        let base = stage + (first - rows.q0) * o_stage_row(D);
        staging::reuse::<BULK>();
        // SAFETY: the warp's lanes call it together (the caller's contract); its 16 staging
        // rows are its own, free after `reuse`.
        unsafe { staging::write::<D>(&acc, inverse, base, lane, pack_bf16x2) };
        let row_at = |r: u32| {
            let row = first + r;
            // Inside O (row < seq_len), 16-byte aligned (O is; rows are 2D bytes).
            (row < seq_len).then(|| o.cast::<u8>().wrapping_add((head as usize * seq_len as usize + row as usize) * 2 * D as usize))
        };
        // SAFETY: each row of this warp's item is written by this warp alone (the item is the
        // block's, the rows the warp's), O 16-byte aligned (the caller's contract); `_obulk`
        // waits for its copies before the block exits (`persistent`).
        unsafe { staging::copy_out::<D, BULK>(base, lane, row_at) };
    }

    /// The kernel body (see the module docs), every exponential on the MUFU pipe:
    /// [`attention_body_with`] with `POLY = 0`.
    ///
    /// # Safety
    /// As for [`attention_body_with`].
    #[inline(always)]
    pub unsafe fn attention_body<const D: u32, const CAUSAL: bool, const OVERLAP: bool, const PINGPONG: bool, const STAGES: u32>(
        q_map: *const TensorMap,
        k_map: *const TensorMap,
        v_map: *const TensorMap,
        o: *mut u32,
        lse: *mut f32,
        seq_len: u32,
        scale_log2: f32,
    ) {
        // SAFETY: the caller's contract.
        unsafe { attention_body_with::<D, CAUSAL, OVERLAP, PINGPONG, STAGES, 0>(q_map, k_map, v_map, o, lse, seq_len, scale_log2) }
    }

    /// The kernel body (see the module docs); `POLY` (0..=16) of the 16 column pairs of each
    /// score row take their exponentials through [`exp2_poly`] (FMA pipe), the others
    /// `ex2.approx` (MUFU pipe).
    ///
    /// # Safety
    /// The module's requirements; 384 threads, [`shared_bytes`]`(D, STAGES)` of dynamic shared memory,
    /// grid `(⌈seq_len / 128⌉, batch·heads)`; run as every thread of the grid.
    #[inline(always)]
    pub unsafe fn attention_body_with<const D: u32, const CAUSAL: bool, const OVERLAP: bool, const PINGPONG: bool, const STAGES: u32, const POLY: u32>(
        q_map: *const TensorMap,
        k_map: *const TensorMap,
        v_map: *const TensorMap,
        o: *mut u32,
        lse: *mut f32,
        seq_len: u32,
        scale_log2: f32,
    ) {
        const { assert!(POLY <= 16, "POLY: at most the 16 column pairs of a row") };
        let tid = thread_idx_x();
        let tile = tile_bytes(D);
        let layout = Layout::<STAGES> { base: (dynamic_shared_address() + 1023) & !1023, tile, qbufs: 1 };
        if tid == 0 {
            layout.q_full().init(1);
            // One release per consumer warp.
            layout.keys().init(8);
            layout.values().init(8);
            fence_init();
        }
        sync_threads();
        // Causal: the longest query tiles (the last ones) first, so the short ones fill the tail.
        let q_tile = if CAUSAL { grid_dim_x() - 1 - block_idx_x() } else { block_idx_x() };
        let q0 = q_tile * BM;
        let head = block_idx_y();
        let tiles = kv_tiles(CAUSAL, q0, seq_len);
        if tid / 128 == 0 {
            // SAFETY: the whole warpgroup executes it; the producer needs few registers.
            unsafe { warpgroup::dealloc_registers::<24>() };
            if tid == 0 {
                // SAFETY: the maps are valid (the kernel's contract); Q's buffer is unused yet.
                unsafe {
                    TensorMap::acquire(q_map);
                    TensorMap::acquire(k_map);
                    TensorMap::acquire(v_map);
                    produce_tile::<D, STAGES>(layout, [q_map, k_map, v_map], q0, head, tiles, 0, 0);
                }
            }
            return;
        }
        // SAFETY: the whole warpgroup executes it; 2 x 128 x 240 + 128 x 24 registers fit.
        unsafe { warpgroup::alloc_registers::<240>() };
        let consumer = tid / 128 - 1;
        let lane = tid % 32;
        let rows = Rows { lane, row0: q0 + 64 * consumer + 16 * ((tid % 128) / 32) + lane / 4, q0, seq_len, scale_log2 };
        let q = layout.q() + consumer * 64 * 128;
        layout.q_full().wait(0);
        let state = if !OVERLAP {
            // Not `[0.0; 64]`: a repeat expression becomes a store loop that keeps the array in
            // local memory (docs/performance.md). SAFETY: all-zero bits are 0.0.
            let mut state = Running { acc: unsafe { core::mem::zeroed() }, m: [f32::NEG_INFINITY; 2], l: [0.0; 2] };
            // SAFETY: as above.
            let mut s: [f32; 64] = unsafe { core::mem::zeroed() };
            // Every `unsafe` block below issues or waits for `wgmma`s, as in `consume_tile`.
            for j in 0..tiles {
                let slot = Ring::<STAGES>::slot(j);
                layout.keys().consume(j);
                // (No fence of `s` here: the first score `wgmma` only writes it.)
                // SAFETY: see above.
                unsafe {
                    wgmma::fence();
                    issue_scores::<D, false>(&mut s, q, layout.k(slot));
                    wgmma::wait::<0>();
                }
                let (factor, probabilities) = finish_scores::<CAUSAL, STAGES, true, POLY>(&mut s, &mut state, rows, layout, tiles - 1 - j, j, false);
                let mut p = a_fragments_bf16_64(&probabilities);
                rescale_rows(&mut state.acc, factor);
                layout.values().consume(j);
                fence_accumulators_64(&mut state.acc);
                fence_fragments(&mut p);
                // SAFETY: see above.
                unsafe {
                    wgmma::fence();
                    issue_pv::<D>(&mut state.acc, &p, layout.v(slot));
                    wgmma::wait::<0>();
                }
                fence_accumulators_64(&mut state.acc);
                if lane == 0 {
                    layout.values().release(j);
                }
            }
            state
        } else {
            // Consumer 0 goes first (consumer 1's arrival); each consumer passes its barrier
            // tiles + 1 times (consumer 0 once more at the end, taking consumer 1's last
            // arrival, so no phase is left open).
            let (mine, other) = turns(consumer);
            if PINGPONG && consumer == 1 {
                other.arrive();
            }
            // SAFETY: all-zero bits are 0.0 (the first score `wgmma` only writes it).
            let mut s: [f32; 64] = unsafe { core::mem::zeroed() };
            // SAFETY: the warpgroup's threads call it together; Q is in its buffer (waited for).
            let state =
                unsafe { consume_tile::<D, CAUSAL, PINGPONG, STAGES, false, POLY, false>(layout, rows, q, consumer, tiles, 0, 0, &mut s, &mut Chain::none()) };
            if PINGPONG && consumer == 0 {
                mine.sync();
            }
            state
        };
        // SAFETY: O and LSE hold every head's rows (the kernel's contract).
        unsafe { store_rows::<D>(state, rows, o, lse, head) };
    }

    /// The persistent kernel body: the overlapped schedule of [`attention_body`] (`PINGPONG` or
    /// not) on a grid of at most one block per SM, each block taking query tiles ("work items",
    /// [`work_item`]) one after the other until all `q_tiles · heads` are done: its first is
    /// item `block_idx_x`, each next one `grid_dim_x + atomicAdd(next, 1)` (fetched by the
    /// producer thread and handed to the consumers through one of two shared slots, each with
    /// an mbarrier). The K/V rings run on across items (round numbers count on), and the
    /// producer loads the next item's Q as soon as the consumers have released Q's buffer after
    /// their last scores, so the next tile's loads overlap this tile's last `P·V` and epilogue
    /// (the short-sequence cost of the one-tile-per-block grid). The consumers' ping-pong turns
    /// alternate across items.
    ///
    /// # Safety
    /// The module's requirements; 384 threads, [`shared_bytes`]`(D, STAGES)` of dynamic shared
    /// memory, grid `(g, 1)` with `1 <= g`; `heads` is `batch·heads`; `next` points to a `u32`
    /// of global memory that is 0 at the launch and touched by nothing else during it; run as
    /// every thread of the grid.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn attention_body_persistent<const D: u32, const CAUSAL: bool, const PINGPONG: bool, const STAGES: u32>(
        q_map: *const TensorMap,
        k_map: *const TensorMap,
        v_map: *const TensorMap,
        o: *mut u32,
        lse: *mut f32,
        seq_len: u32,
        scale_log2: f32,
        heads: u32,
        next: *mut u32,
    ) {
        // SAFETY: the caller's contract.
        unsafe { attention_body_persistent_with::<D, CAUSAL, PINGPONG, STAGES, 0>(q_map, k_map, v_map, o, lse, seq_len, scale_log2, heads, next) }
    }

    /// [`attention_body_persistent`] with two Q buffers (the `_q2` kernels, issue 31 session
    /// 16): the producer loads the next work item's Q as soon as it has issued this item's
    /// K and V loads, into the other buffer, instead of after the consumers' last scores of
    /// this item; so at short sequences (a few key tiles an item) the consumers do not wait for
    /// Q at the start of each item. Work-item slots: 4.
    ///
    /// # Safety
    /// As for [`attention_body_persistent`], with [`shared_bytes_q2`]`(D, STAGES)` of dynamic
    /// shared memory.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn attention_body_persistent_q2<const D: u32, const CAUSAL: bool, const PINGPONG: bool, const STAGES: u32>(
        q_map: *const TensorMap,
        k_map: *const TensorMap,
        v_map: *const TensorMap,
        o: *mut u32,
        lse: *mut f32,
        seq_len: u32,
        scale_log2: f32,
        heads: u32,
        next: *mut u32,
    ) {
        // SAFETY: the caller's contract.
        unsafe { persistent::<D, CAUSAL, PINGPONG, STAGES, 0, 2, false, EPI_SCATTER>(q_map, k_map, v_map, o, lse, seq_len, scale_log2, heads, next) }
    }

    /// [`attention_body_persistent`] (`QB` 1) or [`attention_body_persistent_q2`] (`QB` 2)
    /// with the work items chained (the `_chain` kernels, issue 31 session 23): each consumer
    /// issues the next item's first scores in its last turn of this item, right behind the last
    /// `P·V`, and stores this item's O while they run; so the tensor cores do not wait, between
    /// two items, for an epilogue and then a first score group with nothing behind it.
    ///
    /// # Safety
    /// As for [`attention_body_persistent`], with [`shared_bytes`]`(D, STAGES)` (`QB` 1) or
    /// [`shared_bytes_q2`]`(D, STAGES)` (`QB` 2) of dynamic shared memory.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn attention_body_persistent_chain<const D: u32, const CAUSAL: bool, const PINGPONG: bool, const STAGES: u32, const QB: u32>(
        q_map: *const TensorMap,
        k_map: *const TensorMap,
        v_map: *const TensorMap,
        o: *mut u32,
        lse: *mut f32,
        seq_len: u32,
        scale_log2: f32,
        heads: u32,
        next: *mut u32,
    ) {
        // SAFETY: the caller's contract.
        unsafe { persistent::<D, CAUSAL, PINGPONG, STAGES, 0, QB, true, EPI_SCATTER>(q_map, k_map, v_map, o, lse, seq_len, scale_log2, heads, next) }
    }

    /// [`attention_body_persistent`] (`CHAIN` false) or [`attention_body_persistent_chain`]
    /// (`CHAIN` true) with one Q buffer, writing O through shared memory (the `_ostg` kernels,
    /// `BULK` false, and `_obulk`, `BULK` true; issue 31, session 24): each warp puts its 16
    /// normalised rows into a staging buffer with `stmatrix` and stores them in whole rows, 16
    /// bytes a lane (`_ostg`) or one bulk copy a row through the copy engine (`_obulk`), instead
    /// of 4-byte stores that touch 8 rows a warp instruction. A launch whose O is not 16-byte
    /// aligned takes the 4-byte stores.
    ///
    /// # Safety
    /// As for [`attention_body_persistent`], with [`shared_bytes_ostage`]`(D, STAGES)` of
    /// dynamic shared memory.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn attention_body_persistent_staged<
        const D: u32,
        const CAUSAL: bool,
        const PINGPONG: bool,
        const STAGES: u32,
        const CHAIN: bool,
        const BULK: bool,
    >(
        q_map: *const TensorMap,
        k_map: *const TensorMap,
        v_map: *const TensorMap,
        o: *mut u32,
        lse: *mut f32,
        seq_len: u32,
        scale_log2: f32,
        heads: u32,
        next: *mut u32,
    ) {
        // SAFETY: the caller's contract.
        unsafe {
            if BULK {
                persistent::<D, CAUSAL, PINGPONG, STAGES, 0, 1, CHAIN, EPI_BULK>(q_map, k_map, v_map, o, lse, seq_len, scale_log2, heads, next)
            } else {
                persistent::<D, CAUSAL, PINGPONG, STAGES, 0, 1, CHAIN, EPI_STG>(q_map, k_map, v_map, o, lse, seq_len, scale_log2, heads, next)
            }
        }
    }

    /// [`attention_body_persistent`] with `POLY` of the 16 column pairs of each score row
    /// taking their exponentials through [`exp2_poly`] (as [`attention_body_with`]).
    ///
    /// # Safety
    /// As for [`attention_body_persistent`].
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn attention_body_persistent_with<const D: u32, const CAUSAL: bool, const PINGPONG: bool, const STAGES: u32, const POLY: u32>(
        q_map: *const TensorMap,
        k_map: *const TensorMap,
        v_map: *const TensorMap,
        o: *mut u32,
        lse: *mut f32,
        seq_len: u32,
        scale_log2: f32,
        heads: u32,
        next: *mut u32,
    ) {
        // SAFETY: the caller's contract.
        unsafe { persistent::<D, CAUSAL, PINGPONG, STAGES, POLY, 1, false, EPI_SCATTER>(q_map, k_map, v_map, o, lse, seq_len, scale_log2, heads, next) }
    }

    /// The persistent body with `QB` (1 or 2) Q buffers: [`attention_body_persistent_with`]
    /// (1) and [`attention_body_persistent_q2`] (2); `EPI` the epilogue ([`EPI_SCATTER`],
    /// or through shared memory with one Q buffer: [`EPI_STG`], [`EPI_BULK`]).
    ///
    /// # Safety
    /// As for [`attention_body_persistent`], with [`shared_bytes`]`(D, STAGES)` (`QB` 1) or
    /// [`shared_bytes_q2`]`(D, STAGES)` (`QB` 2) of dynamic shared memory
    /// ([`shared_bytes_ostage`]`(D, STAGES)` with `EPI` other than [`EPI_SCATTER`]).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn persistent<
        const D: u32,
        const CAUSAL: bool,
        const PINGPONG: bool,
        const STAGES: u32,
        const POLY: u32,
        const QB: u32,
        const CHAIN: bool,
        const EPI: u32,
    >(
        q_map: *const TensorMap,
        k_map: *const TensorMap,
        v_map: *const TensorMap,
        o: *mut u32,
        lse: *mut f32,
        seq_len: u32,
        scale_log2: f32,
        heads: u32,
        next: *mut u32,
    ) {
        const { assert!(POLY <= 16, "POLY: at most the 16 column pairs of a row") };
        const { assert!(QB == 1 || QB == 2, "QB: one or two Q buffers") };
        const { assert!(EPI == EPI_SCATTER || QB == 1, "EPI: the staging buffer follows one Q buffer's barriers") };
        let tid = thread_idx_x();
        let tile = tile_bytes(D);
        let layout = Layout::<STAGES> { base: (dynamic_shared_address() + 1023) & !1023, tile, qbufs: QB };
        if tid == 0 {
            for slot in 0..QB {
                layout.q_full_at(slot).init(1);
                // One arrival per consumer warp.
                layout.q_empty_at(slot).init(8);
            }
            for slot in 0..layout.item_slots() {
                layout.item_full(slot).init(1);
            }
            // One release per consumer warp.
            layout.keys().init(8);
            layout.values().init(8);
            fence_init();
        }
        sync_threads();
        let q_tiles = q_tiles(seq_len);
        let items = q_tiles * heads;
        if tid / 128 == 0 {
            // SAFETY: the whole warpgroup executes it; the producer needs few registers.
            unsafe { warpgroup::dealloc_registers::<24>() };
            if tid == 0 {
                // SAFETY: the maps are valid (the kernel's contract); `next` is the launch's
                // counter, accessed only atomically (the contract).
                unsafe {
                    TensorMap::acquire(q_map);
                    TensorMap::acquire(k_map);
                    TensorMap::acquire(v_map);
                    let counter = Atomic::from_ptr(next);
                    let (mut item, mut n, mut round) = (block_idx_x(), 0u32, 0u32);
                    loop {
                        // Slot n % item_slots was last read for item n - item_slots, before the
                        // consumers released Q after item n - 1 - QB (waited for below, at item
                        // n - 1; item_slots = 2 QB).
                        u32::store_shared(layout.item(n), item);
                        layout.item_full(n).arrive();
                        if item >= items {
                            break;
                        }
                        let (q_tile, head) = work_item(CAUSAL, item, q_tiles, heads);
                        let tiles = kv_tiles(CAUSAL, q_tile * BM, seq_len);
                        // Q's buffer n % QB was last filled for item n - QB: wait until the
                        // consumers are done with it (its use k = n / QB waits for release k - 1).
                        if n >= QB {
                            layout.q_empty_at(n % QB).wait((n / QB - 1) & 1);
                        }
                        produce_tile::<D, STAGES>(layout, [q_map, k_map, v_map], q_tile * BM, head, tiles, round, n % QB);
                        round += tiles;
                        n += 1;
                        // Saturating: whatever the counter held at the launch, the items handed
                        // out stay distinct (`grid_dim_x() + c` for distinct `c`, all at least
                        // the grid's first items `block_idx_x()`), so no two blocks write one
                        // tile of O (a counter near u32::MAX would otherwise wrap onto tiles
                        // already done).
                        item = grid_dim_x().saturating_add(counter.fetch_add(1));
                    }
                }
            }
            return;
        }
        // SAFETY: the whole warpgroup executes it; 2 x 128 x 240 + 128 x 24 registers fit.
        unsafe { warpgroup::alloc_registers::<240>() };
        let consumer = tid / 128 - 1;
        let lane = tid % 32;
        // The turns alternate across items: consumer 1's first arrival here, consumer 0's last
        // sync after the loop (see `consume_tile`).
        let (mine, other) = turns(consumer);
        if PINGPONG && consumer == 1 {
            other.arrive();
        }
        let (mut n, mut round) = (0u32, 0u32);
        // O through the staging buffer: only from a 16-byte aligned start (the same in every
        // thread; otherwise the 4-byte stores).
        let staged = EPI != EPI_SCATTER && (o as usize).is_multiple_of(16);
        // `CHAIN`: the previous item's tail (or, for the first, the code below) read this
        // item's slot and, for an item, waited for its Q and first key tile and issued its
        // first scores into `s` (waited for before the item starts: no group is in flight
        // across the loop's back edge, where the copies of `s` would serialise the `wgmma`s).
        let mut chain = Chain { n: 0, items, item: 0, read: false };
        // SAFETY: all-zero bits are 0.0 (the first score `wgmma` only writes it).
        let mut s: [f32; 64] = unsafe { core::mem::zeroed() };
        if CHAIN {
            layout.item_full(0).wait(0);
            // SAFETY: as in the loop below.
            chain.item = unsafe { u32::load_shared(layout.item(0)) };
            chain.read = true;
            if chain.item < items {
                layout.q_full_at(0).wait(0);
                layout.keys().consume(0);
                if PINGPONG {
                    mine.sync();
                }
                // SAFETY: the warpgroup's threads run it together; Q's buffer 0 and key round 0
                // hold the first item's tiles (waited for); the group is waited for at once.
                unsafe {
                    wgmma::fence();
                    issue_scores::<D, false>(&mut s, layout.q_at(0) + consumer * 64 * 128, layout.k(Ring::<STAGES>::slot(0)));
                }
                if PINGPONG {
                    other.arrive();
                }
                // SAFETY: as above.
                unsafe { wgmma::wait::<0>() };
                fence_accumulators_64(&mut s);
            }
        }
        loop {
            let item = if CHAIN && chain.read {
                chain.item
            } else {
                layout.item_full(n).wait((n / layout.item_slots()) & 1);
                // SAFETY: the slot's address, inside the requested shared memory; written by
                // the producer before its arrival, which the wait above observed.
                unsafe { u32::load_shared(layout.item(n)) }
            };
            if item >= items {
                break;
            }
            let (q_tile, head) = work_item(CAUSAL, item, q_tiles, heads);
            let q0 = q_tile * BM;
            let tiles = kv_tiles(CAUSAL, q0, seq_len);
            let rows = Rows { lane, row0: q0 + 64 * consumer + 16 * ((tid % 128) / 32) + lane / 4, q0, seq_len, scale_log2 };
            let q_slot = n % QB;
            if !CHAIN {
                layout.q_full_at(q_slot).wait((n / QB) & 1);
            }
            let q = layout.q_at(q_slot) + consumer * 64 * 128;
            chain.n = n + 1;
            chain.read = false;
            // SAFETY: the warpgroup's threads call it together (the item is the block's); Q is
            // in its buffer (waited for, here or by the previous item's tail); the producer
            // fills these rounds; `tiles >= 1` (`kv_tiles` of `seq_len >= 1`, which every entry
            // checks).
            let state =
                unsafe { consume_tile::<D, CAUSAL, PINGPONG, STAGES, true, POLY, CHAIN>(layout, rows, q, consumer, tiles, round, q_slot, &mut s, &mut chain) };
            // SAFETY: O and LSE hold every head's rows (the kernel's contract); head < heads;
            // staged: O is 16-byte aligned, the warpgroup's lanes are all here, the staging
            // buffer is in the requested shared memory (the contract) and each warp's 16 rows of
            // it are its own; `_obulk` waits for its copies after the loop.
            unsafe {
                if staged && EPI == EPI_BULK {
                    store_rows_staged::<D, true>(state, rows, o, lse, head, layout.o_stage());
                } else if staged {
                    store_rows_staged::<D, false>(state, rows, o, lse, head, layout.o_stage());
                } else {
                    store_rows::<D>(state, rows, o, lse, head);
                }
            }
            if CHAIN {
                // The next item's first scores (or the dropped group), issued by the tail.
                // SAFETY: the warpgroup's threads run it together.
                unsafe { wgmma::wait::<0>() };
                fence_accumulators_64(&mut s);
            }
            round += tiles;
            n += 1;
        }
        if PINGPONG && consumer == 0 {
            mine.sync();
        }
        if EPI == EPI_BULK {
            // The block's shared memory (the copies' source) must outlive the copies.
            store_wait::<0>();
        }
    }

    /// The arguments of every forward instance, as the host passes them (host builds only):
    /// the three maps (Q, K, V), Q, K and V themselves (the launch declares
    /// its reads of them; the maps must describe exactly these), O and LSE, the sequence
    /// length, the scale in log2 units; the persistent instances also take `heads` (`B·H`)
    /// and the work counter `next` (the others ignore both).
    #[cfg(not(target_arch = "nvptx64"))]
    pub struct ForwardArgs<'a> {
        /// The device address of the Q, K and V maps (128 bytes each, one after the other,
        /// 64-byte aligned): the start of `map_words`.
        pub maps: ferrocuda_host::DevicePtr<TensorMap>,
        /// The memory holding the three maps (at least 48 words), which the launch declares.
        pub map_words: &'a dyn ferrocuda_host::DeviceRead<u64>,
        /// Q, `B·H·S·D` bf16 (what `maps[0]` describes).
        pub q: &'a dyn ferrocuda_host::DeviceRead<bf16>,
        /// K (`maps[1]`).
        pub k: &'a dyn ferrocuda_host::DeviceRead<bf16>,
        /// V (`maps[2]`).
        pub v: &'a dyn ferrocuda_host::DeviceRead<bf16>,
        /// O, at least `B·H·S·D` bf16, 4-byte aligned.
        pub o: &'a mut dyn ferrocuda_host::DeviceWrite<bf16>,
        /// LSE, at least `B·H·S` f32.
        pub lse: &'a mut dyn ferrocuda_host::DeviceWrite<f32>,
        /// S.
        pub seq_len: u32,
        /// The softmax scale times `log2 e`.
        pub scale_log2: f32,
        /// `B·H` (persistent instances).
        pub heads: u32,
        /// The work counter, a `u32` (persistent instances; 0 for a complete result: a
        /// counter that starts higher makes the blocks skip tiles, never repeat one).
        pub next: &'a mut dyn ferrocuda_host::DeviceWrite<u32>,
    }

    /// A forward instance's typed launcher, as a function pointer (host builds only).
    ///
    /// # Safety
    /// The instance's `# Safety` contract (the maps) holds for this launch.
    #[cfg(not(target_arch = "nvptx64"))]
    pub type ForwardLaunch = unsafe fn(&ferrocuda_host::Stream, ferrocuda_host::LaunchConfig, ForwardArgs<'_>) -> Result<(), ferrocuda_host::Error>;

    /// One sm_90 forward instance, for the host to pick by name (host builds only).
    #[cfg(not(target_arch = "nvptx64"))]
    #[derive(Clone, Copy, Debug)]
    pub struct ForwardKernel {
        /// The kernel's symbol (its name).
        pub name: &'static str,
        /// The kernel as loaded into a context (for its shared-memory attribute).
        pub function: fn(&ferrocuda_host::Context) -> Result<ferrocuda_host::Function, ferrocuda_host::Error>,
        /// Its typed launcher.
        pub launch: ForwardLaunch,
    }

    /// The forward instance named `name`, if there is one (host builds only).
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn forward_kernel(name: &str) -> Option<&'static ForwardKernel> {
        [PLAIN, PERSISTENT, PERSISTENT_Q2, PERSISTENT_CHAIN, PERSISTENT_CHAIN_STAGED, d256::D256].into_iter().flatten().find(|kernel| kernel.name == name)
    }

    /// The table of a group of forward instances: `$table` names it; `plain` or `persistent`
    /// the launchers' parameters after the config.
    macro_rules! forward_table {
        ($table:ident, plain: $($name:ident)*) => {
            #[cfg(not(target_arch = "nvptx64"))]
            const $table: &[ForwardKernel] = &[$(ForwardKernel {
                name: $name::SYMBOL,
                function: $name::function,
                // SAFETY: forwarded (the table's `ForwardLaunch` contract).
                launch: |stream: &ferrocuda_host::Stream, config: ferrocuda_host::LaunchConfig, a: ForwardArgs<'_>| unsafe {
                    $name::launch(stream, config, a.maps, a.map_words, a.q, a.k, a.v, a.o, a.lse, a.seq_len, a.scale_log2)
                },
            }),*];
        };
        ($table:ident, persistent: $($name:ident)*) => {
            #[cfg(not(target_arch = "nvptx64"))]
            const $table: &[ForwardKernel] = &[$(ForwardKernel {
                name: $name::SYMBOL,
                function: $name::function,
                // SAFETY: forwarded (the table's `ForwardLaunch` contract).
                launch: |stream: &ferrocuda_host::Stream, config: ferrocuda_host::LaunchConfig, a: ForwardArgs<'_>| unsafe {
                    $name::launch(stream, config, a.maps, a.map_words, a.q, a.k, a.v, a.o, a.lse, a.seq_len, a.scale_log2, a.heads, a.next)
                },
            }),*];
        };
    }

    /// `u64` words of one tensor map (128 bytes).
    const MAP_WORDS: usize = 16;

    /// What an entry checks before anything else, the same in every thread of the grid (so
    /// either every thread returns before the first barrier or none does): 1-D blocks of
    /// [`THREADS`], at least `shared` bytes of dynamic shared memory, a grid `(⌈S/128⌉, heads,
    /// 1)` (one query tile per block: `heads` is `grid_dim_y`) or `(g, 1, 1)` (`persistent`),
    /// `S >= 1`, at most `u32::MAX` query tiles in all, `maps` 64-byte aligned and the start
    /// of `map_words`, which holds three maps, Q, K and V of exactly `heads·S·D`
    /// elements (what the maps must describe), O of at least that many from a 4-byte aligned
    /// start (bf16 pairs are stored), LSE of at least `heads·S`.
    ///
    /// The outputs' ownership rests on it: with this launch a tile-per-block block `(x, y)`
    /// writes only query tile `x` (or, causal, its mirror `⌈S/128⌉ - 1 - x`: a bijection) of
    /// head `y`, a persistent block only the work items it was handed (distinct across the
    /// grid: `block_idx_x`, then `grid_dim_x +` a counter value, saturating), each item's rows
    /// `< S` inside O and LSE, and within a block each consumer thread its own two rows and
    /// column pairs (the `wgmma` accumulator layout; one lane per row writes the LSE).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn launch_ok<const D: u32>(
        persistent: bool,
        shared: u32,
        heads: u32,
        seq_len: u32,
        maps: *const TensorMap,
        map_words: &[u64],
        q: &[bf16],
        k: &[bf16],
        v: &[bf16],
        o: &mut UncheckedSlice<bf16>,
        lse: &UncheckedSlice<f32>,
    ) -> bool {
        let launch = block_dim_x() == THREADS
            && block_dim_y() == 1
            && block_dim_z() == 1
            && grid_dim_z() == 1
            && dynamic_shared::<u32>().len() >= (shared / 4) as usize
            && if persistent { grid_dim_y() == 1 } else { grid_dim_x() == q_tiles(seq_len) && grid_dim_y() == heads };
        let rows = heads as u64 * seq_len as u64;
        let elements = rows * D as u64;
        let operands = seq_len > 0
            && core::ptr::eq(maps, map_words.as_ptr().cast())
            && map_words.len() >= 3 * MAP_WORDS
            && maps.is_aligned()
            && q_tiles(seq_len) as u64 * heads as u64 <= u32::MAX as u64
            && q.len() as u64 == elements
            && k.len() as u64 == elements
            && v.len() as u64 == elements
            && o.len() as u64 >= elements
            && (o.as_mut_ptr() as usize).is_multiple_of(4)
            && lse.len() as u64 >= rows;
        launch && operands
    }

    macro_rules! kernels {
        ($($name:ident: $d:literal, $causal:literal, $overlap:literal, $pingpong:literal, $stages:literal $(, poly $poly:literal)?;)*) => {$(
            /// Attention forward (see the module docs), head dimension and variant in the name.
            /// Launch: 384 threads, `shared_bytes(D, STAGES)` of dynamic shared memory, grid
            /// `(⌈seq_len / 128⌉, batch·heads)`; Q, K, V `[batch·heads, seq_len, D]` bf16, O the
            /// same shape, LSE `[batch·heads, seq_len]` f32. The kernel checks the launch and the
            /// lengths and returns without writing anything otherwise.
            ///
            /// # Safety
            /// `maps` points to three tensor maps (Q, K, V: 128 bytes each) of exactly `q`, `k`
            /// and `v` as `[D, seq_len, batch·heads]` bf16 (innermost first), box [`BOX`],
            /// 128-byte swizzle, not written during the launch. (`maps` must be the start of
            /// `map_words`, at least 48 words, 64-byte aligned: checked; the launch declares
            /// its read of `map_words` as of `q`, `k` and `v`.) The copy
            /// engine writes a box of the map's size into each ring slot, so another box would
            /// overrun the slot's shared memory, and a map of other memory would read memory the
            /// launch did not declare (the kernel cannot read the opaque maps).
            #[kernel(launch_bounds(384, 1))]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name(
                maps: *const TensorMap, map_words: &[u64], q: &[bf16], k: &[bf16], v: &[bf16],
                mut o: UncheckedSlice<bf16>, mut lse: UncheckedSlice<f32>, seq_len: u32, scale_log2: f32,
            ) {
                if !launch_ok::<$d>(false, shared_bytes($d, $stages), grid_dim_y(), seq_len, maps, map_words, q, k, v, &mut o, &lse) {
                    return;
                }
                let (o, lse) = (o.as_mut_ptr().cast::<u32>(), lse.as_mut_ptr());
                // SAFETY: the maps: the kernel's contract; the launch, the shared memory, the
                // lengths and O's alignment: checked above (`launch_ok`, which also says why
                // no two threads write one element of O or LSE, and nothing reads them).
                unsafe { attention_body_with::<$d, $causal, $overlap, $pingpong, $stages, { 0 $(+ $poly)? }>(maps, maps.wrapping_add(1), maps.wrapping_add(2), o, lse, seq_len, scale_log2) }
            }
        )*
            forward_table!(PLAIN, plain: $($name)*);
        };
    }

    kernels! {
        attention_d64: 64, false, true, false, 2;
        attention_d64_causal: 64, true, true, false, 2;
        attention_d128: 128, false, true, false, 2;
        attention_d128_causal: 128, true, true, false, 2;
        attention_d64_serial: 64, false, false, false, 2;
        attention_d64_causal_serial: 64, true, false, false, 2;
        attention_d128_serial: 128, false, false, false, 2;
        attention_d128_causal_serial: 128, true, false, false, 2;
        attention_d64_pingpong: 64, false, true, true, 2;
        attention_d64_causal_pingpong: 64, true, true, true, 2;
        attention_d128_pingpong: 128, false, true, true, 2;
        attention_d128_causal_pingpong: 128, true, true, true, 2;
        attention_d64_s3: 64, false, true, false, 3;
        attention_d64_causal_s3: 64, true, true, false, 3;
        attention_d128_s3: 128, false, true, false, 3;
        attention_d128_causal_s3: 128, true, true, false, 3;
        attention_d64_pingpong_s3: 64, false, true, true, 3;
        attention_d64_causal_pingpong_s3: 64, true, true, true, 3;
        attention_d128_pingpong_s3: 128, false, true, true, 3;
        attention_d128_causal_pingpong_s3: 128, true, true, true, 3;
        // `POLY` of the 16 column pairs of each row through `exp2_poly` (EXP2_POLY_SPLITS):
        // the D 64 picks at S 2k-4k (issue 31: bound by the MUFU pipe's exponentials).
        attention_d64_poly4: 64, false, true, false, 2, poly 4;
        attention_d64_poly6: 64, false, true, false, 2, poly 6;
        attention_d64_causal_pingpong_poly4: 64, true, true, true, 2, poly 4;
        attention_d64_causal_pingpong_poly6: 64, true, true, true, 2, poly 6;
    }

    macro_rules! persistent_kernels {
        ($($name:ident: $d:literal, $causal:literal, $pingpong:literal, $stages:literal $(, poly $poly:literal)?;)*) => {$(
            /// Attention forward, persistent (see the module docs and
            /// [`attention_body_persistent`]), head dimension and variant in the name. Launch:
            /// 384 threads, `shared_bytes(D, STAGES)` of dynamic shared memory, grid `(g, 1)`
            /// (at most one block per SM is best); `heads` is `batch·heads`; `next` a `u32`
            /// work counter, 0 for a complete result. Checked as for the one-tile-per-block
            /// kernels.
            ///
            /// # Safety
            /// As for the one-tile-per-block kernels (the maps).
            #[kernel(launch_bounds(384, 1))]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name(
                maps: *const TensorMap, map_words: &[u64], q: &[bf16], k: &[bf16], v: &[bf16],
                mut o: UncheckedSlice<bf16>, mut lse: UncheckedSlice<f32>, seq_len: u32, scale_log2: f32, heads: u32, next: AtomicSlice<u32>,
            ) {
                if next.is_empty() || !launch_ok::<$d>(true, shared_bytes($d, $stages), heads, seq_len, maps, map_words, q, k, v, &mut o, &lse) {
                    return;
                }
                let (o, lse) = (o.as_mut_ptr().cast::<u32>(), lse.as_mut_ptr());
                // SAFETY: as for the one-tile-per-block kernels; `next` is the launch's counter
                // (an `AtomicSlice`: every access to it is atomic).
                unsafe { attention_body_persistent_with::<$d, $causal, $pingpong, $stages, { 0 $(+ $poly)? }>(maps, maps.wrapping_add(1), maps.wrapping_add(2), o, lse, seq_len, scale_log2, heads, next.as_ptr()) }
            }
        )*
            forward_table!(PERSISTENT, persistent: $($name)*);
        };
    }

    macro_rules! persistent_q2_kernels {
        ($($name:ident: $d:literal, $causal:literal, $pingpong:literal, $stages:literal;)*) => {$(
            /// Attention forward, persistent with two Q buffers (see
            /// [`attention_body_persistent_q2`]), head dimension and variant in the name. As the
            /// `_persistent` kernels, with `shared_bytes_q2(D, STAGES)` of dynamic shared memory.
            ///
            /// # Safety
            /// As for the one-tile-per-block kernels (the maps).
            #[kernel(launch_bounds(384, 1))]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name(
                maps: *const TensorMap, map_words: &[u64], q: &[bf16], k: &[bf16], v: &[bf16],
                mut o: UncheckedSlice<bf16>, mut lse: UncheckedSlice<f32>, seq_len: u32, scale_log2: f32, heads: u32, next: AtomicSlice<u32>,
            ) {
                if next.is_empty() || !launch_ok::<$d>(true, shared_bytes_q2($d, $stages), heads, seq_len, maps, map_words, q, k, v, &mut o, &lse) {
                    return;
                }
                let (o, lse) = (o.as_mut_ptr().cast::<u32>(), lse.as_mut_ptr());
                // SAFETY: as for the `_persistent` kernels.
                unsafe { attention_body_persistent_q2::<$d, $causal, $pingpong, $stages>(maps, maps.wrapping_add(1), maps.wrapping_add(2), o, lse, seq_len, scale_log2, heads, next.as_ptr()) }
            }
        )*
            forward_table!(PERSISTENT_Q2, persistent: $($name)*);
        };
    }

    macro_rules! persistent_chain_kernels {
        ($($name:ident: $d:literal, $causal:literal, $pingpong:literal, $stages:literal, $qb:literal;)*) => {$(
            /// Attention forward, persistent with the work items chained (see
            /// [`attention_body_persistent_chain`]), head dimension and variant in the name. As
            /// the `_persistent` kernels (`_q2`: two Q buffers, `shared_bytes_q2(D, STAGES)` of
            /// dynamic shared memory).
            ///
            /// # Safety
            /// As for the one-tile-per-block kernels (the maps).
            #[kernel(launch_bounds(384, 1))]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name(
                maps: *const TensorMap, map_words: &[u64], q: &[bf16], k: &[bf16], v: &[bf16],
                mut o: UncheckedSlice<bf16>, mut lse: UncheckedSlice<f32>, seq_len: u32, scale_log2: f32, heads: u32, next: AtomicSlice<u32>,
            ) {
                let shared = if $qb == 2 { shared_bytes_q2($d, $stages) } else { shared_bytes($d, $stages) };
                if next.is_empty() || !launch_ok::<$d>(true, shared, heads, seq_len, maps, map_words, q, k, v, &mut o, &lse) {
                    return;
                }
                let (o, lse) = (o.as_mut_ptr().cast::<u32>(), lse.as_mut_ptr());
                // SAFETY: as for the `_persistent` kernels.
                unsafe { attention_body_persistent_chain::<$d, $causal, $pingpong, $stages, $qb>(maps, maps.wrapping_add(1), maps.wrapping_add(2), o, lse, seq_len, scale_log2, heads, next.as_ptr()) }
            }
        )*
            forward_table!(PERSISTENT_CHAIN, persistent: $($name)*);
        };
    }

    // Session 23 (issue 31): for short sequences, each consumer issuing the next work item's
    // first scores behind this item's last P·V (`attention_body_persistent_chain`). The
    // mid-session call (one H200) timed five: with the ping-pong turns 1.04x / 1.05x the pick
    // at S 512 / 1k without the mask (two Q buffers: the same at 512, slower from 1k); without
    // the turns, and every causal one without them, slower than the picks (0.90-0.99x): those
    // were dropped. The 3-deep rings' and the causal ping-pong form are the final call's trials.
    persistent_chain_kernels! {
        attention_d128_pingpong_persistent_chain: 128, false, true, 2, 1;
        attention_d128_pingpong_persistent_chain_s3: 128, false, true, 3, 1;
        attention_d128_causal_pingpong_persistent_chain: 128, true, true, 2, 1;
    }

    macro_rules! persistent_staged_kernels {
        ($($name:ident: $d:literal, $causal:literal, $pingpong:literal, $stages:literal, $chain:literal, $bulk:literal;)*) => {$(
            /// Attention forward, persistent (`_chain`: the work items chained), O written
            /// through shared memory (see [`attention_body_persistent_staged`]), head dimension
            /// and variant in the name. As the `_persistent` kernels, with
            /// `shared_bytes_ostage(D, STAGES)` of dynamic shared memory.
            ///
            /// # Safety
            /// As for the one-tile-per-block kernels (the maps).
            #[kernel(launch_bounds(384, 1))]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name(
                maps: *const TensorMap, map_words: &[u64], q: &[bf16], k: &[bf16], v: &[bf16],
                mut o: UncheckedSlice<bf16>, mut lse: UncheckedSlice<f32>, seq_len: u32, scale_log2: f32, heads: u32, next: AtomicSlice<u32>,
            ) {
                if next.is_empty() || !launch_ok::<$d>(true, shared_bytes_ostage($d, $stages), heads, seq_len, maps, map_words, q, k, v, &mut o, &lse) {
                    return;
                }
                let (o, lse) = (o.as_mut_ptr().cast::<u32>(), lse.as_mut_ptr());
                // SAFETY: as for the `_persistent` kernels (the staging buffer is in the shared
                // memory checked above).
                unsafe {
                    attention_body_persistent_staged::<$d, $causal, $pingpong, $stages, $chain, $bulk>(
                        maps, maps.wrapping_add(1), maps.wrapping_add(2), o, lse, seq_len, scale_log2, heads, next.as_ptr(),
                    )
                }
            }
        )*
            forward_table!(PERSISTENT_CHAIN_STAGED, persistent: $($name)*);
        };
    }

    // Session 24 (issue 31): the chained ping-pong kernel (the pick at D 128 up to S 1k without
    // the mask) writing O through shared memory: whole rows 16 bytes a lane (`_ostg`) or one
    // bulk copy a row (`_obulk`), instead of 4-byte stores touching 8 rows a warp instruction.
    persistent_staged_kernels! {
        attention_d128_pingpong_persistent_chain_ostg: 128, false, true, 2, true, false;
        attention_d128_pingpong_persistent_chain_obulk: 128, false, true, 2, true, true;
        // The other persistent picks the same way (16 bytes a lane: 1.05-1.11x the bulk copies
        // at D 128 in session 24's mid call), trials for its final call.
        attention_d128_causal_persistent_ostg: 128, true, false, 2, false, false;
        attention_d64_persistent_ostg: 64, false, false, 2, false, false;
        attention_d64_causal_pingpong_persistent_ostg: 64, true, true, 2, false, false;
    }

    // Session 16 (issue 31): the short-sequence persistent kernels with two Q buffers.
    persistent_q2_kernels! {
        attention_d64_persistent_q2: 64, false, false, 2;
        attention_d64_causal_pingpong_persistent_q2: 64, true, true, 2;
        attention_d128_pingpong_persistent_q2: 128, false, true, 2;
        attention_d128_causal_pingpong_persistent_q2: 128, true, true, 2;
        // D 128 without the ping-pong turns (each consumer issues as soon as its data is in;
        // the turns chain one consumer's epilogue into the other's next issue).
        attention_d128_persistent_q2: 128, false, false, 2;
        attention_d128_causal_persistent_q2: 128, true, false, 2;
    }

    persistent_kernels! {
        attention_d64_persistent: 64, false, false, 2;
        attention_d64_pingpong_persistent: 64, false, true, 2;
        attention_d64_causal_pingpong_persistent: 64, true, true, 2;
        attention_d128_pingpong_persistent: 128, false, true, 2;
        // Session 16: D 128 persistent without the ping-pong turns.
        attention_d128_persistent: 128, false, false, 2;
        attention_d128_causal_persistent: 128, true, false, 2;
        attention_d128_causal_pingpong_persistent: 128, true, true, 2;
        attention_d128_pingpong_s3_persistent: 128, false, true, 3;
        attention_d128_causal_pingpong_s3_persistent: 128, true, true, 3;
        attention_d64_causal_pingpong_persistent_poly4: 64, true, true, 2, poly 4;
        attention_d64_causal_pingpong_persistent_poly6: 64, true, true, 2, poly 6;
    }

    pub use d256::attention_body_d256;

    /// The D 256 forward (issue 31, session 22): the one-tile-per-block grid of the other
    /// kernels (a 128-row query tile a block, one producer and two consumer warpgroups of 64
    /// rows), with key tiles of [`BN_D256`] = 64 keys so that a consumer's registers hold O
    /// (m64n256: 128 f32 a thread), the scores (m64n64: 32) and P's fragments (16) without
    /// spilling. Each consumer runs the overlapped schedule (`attention_d256`,
    /// `attention_d256_causal`: FlashAttention-3's intra-warpgroup overlap, as the D 64/128
    /// kernels) or the serial one (`_serial`: `S = Q·Kᵀ`, wait, mask and online softmax,
    /// `O += P·V`, wait); the two consumers take no turns. Shared memory: Q 64 KiB, 2-deep K
    /// and V rings of 32 KiB tiles ([`shared_bytes_d256`]); every map's box is [`BOX_D256`]
    /// (64 rows).
    mod d256 {
        use super::*;
        use ferrocuda_device::wgmma::{
            a_fragments_bf16_32, fence_accumulators_16, fence_accumulators_128, m64n64k16_bf16, m64n64k16_bf16_init, m64n256k16_bf16_rs_n_major,
        };

        /// The P fragments of one 64-key tile: 4 k16 steps of 4 registers.
        type Fragments64 = [[u32; 4]; 4];

        /// Issues `S = Q·Kᵀ` for one consumer (64 query rows at `q`, 64 keys at `k`, each four
        /// 64-column boxes): 16 `wgmma` m64n64k16 stepping 32 bytes along the swizzled rows,
        /// a new box every 4 steps.
        ///
        /// # Safety
        /// The whole warpgroup calls it together after a `wgmma::fence`; Q and the K tile are
        /// in shared memory (written by TMA) until the group is waited for.
        #[inline(always)]
        unsafe fn issue_scores(s: &mut [f32; 32], q: u32, k: u32) {
            // Every K-major 128-byte-swizzle descriptor has the same high word (stride and
            // swizzle): a constant, so only the low words (start address and leading offset,
            // stepped by adding offset / 16 to the 14-bit start field, which never carries:
            // shared addresses stay below 2^18) are computed. Q's low words are K's plus an
            // opaque difference: K's slot changes from one key tile to the next, so ptxas cannot
            // hoist Q's 16 descriptors out of the key loop (session 22: it did, as 32 registers,
            // and spilled them: 5 `STL.64` and 10 `LDL.64` a step).
            const HIGH: u64 = Descriptor::k_major_128b(0).0 & !0xffff_ffff;
            let kl = Descriptor::k_major_128b(k).0 as u32;
            let delta = opaque_u32((Descriptor::k_major_128b(q).0 as u32).wrapping_sub(kl));
            unroll::<16>(|step| {
                let step = step as u32;
                let offset = ((step / 4) * SLAB_D256 + 32 * (step % 4)) >> 4;
                let b = kl + offset;
                let (a, b) = (HIGH | b.wrapping_add(delta) as u64, HIGH | b as u64);
                // SAFETY: the caller's contract; the offsets stay inside the tiles.
                unsafe { if step == 0 { m64n64k16_bf16_init(s, a, b) } else { m64n64k16_bf16(s, a, b, true) } }
            });
            // SAFETY: the caller's contract.
            unsafe { wgmma::commit() };
        }

        /// Issues `O += P·V` (V tile at `v`: 64 keys, N-major, one box per 64 columns, the
        /// next box [`SLAB_D256`] further): 4 `wgmma` m64n256k16 (k16 steps of 16 keys = 2048
        /// bytes) with A from the registers `p`.
        ///
        /// # Safety
        /// As for [`issue_scores`]; `p` and `o` stay untouched until the group is waited for.
        #[inline(always)]
        unsafe fn issue_pv(o: &mut [f32; 128], p: &Fragments64, v: u32) {
            unroll::<4>(|step| {
                let b = Descriptor::n_major_128b(v + 2048 * step as u32, SLAB_D256).0;
                // SAFETY: the caller's contract.
                unsafe { m64n256k16_bf16_rs_n_major(o, p[step], b, true) };
            });
            // SAFETY: the caller's contract.
            unsafe { wgmma::commit() };
        }

        /// Sets the scores of keys past `seq_len` and (causal) past the query to -inf (as the
        /// other kernels' `mask`, for a 64-key tile).
        #[inline(always)]
        fn mask<const CAUSAL: bool>(s: &mut [f32; 32], col0: u32, row0: u32, seq_len: u32) {
            unroll::<8>(|i| {
                unroll::<4>(|e| {
                    let col = col0 + 8 * i as u32 + (e as u32 & 1);
                    let row = row0 + 8 * (e as u32 >> 1);
                    if col >= seq_len || (CAUSAL && col > row) {
                        s[4 * i + e] = f32::NEG_INFINITY;
                    }
                })
            });
        }

        /// The online softmax of a 64-key score tile for this thread's row `h` (the other
        /// kernels' `softmax_row` for 16 columns a thread): updates `m[h]`, `l[h]` and the
        /// row's scores (to `p`); returns the row's rescale factor for O.
        #[inline(always)]
        fn softmax_row(s: &mut [f32; 32], m: &mut [f32; 2], l: &mut [f32; 2], scale_log2: f32, h: usize) -> f32 {
            let mut max = f32::NEG_INFINITY;
            unroll::<8>(|i| max = max.max(s[4 * i + 2 * h]).max(s[4 * i + 2 * h + 1]));
            max = max.max(shuffle_xor(max, 1));
            max = max.max(shuffle_xor(max, 2));
            let new = m[h].max(max * scale_log2);
            // A row with every score so far masked keeps m = -inf: subtract 0 (no NaN).
            let shift = if new == f32::NEG_INFINITY { 0.0 } else { new };
            let rescale = (m[h] - shift).fast_exp2();
            let mut sum = 0.0f32;
            unroll::<8>(|i| {
                unroll::<2>(|j| {
                    let p = (s[4 * i + 2 * h + j] * scale_log2 - shift).fast_exp2();
                    s[4 * i + 2 * h + j] = p;
                    sum += p;
                })
            });
            l[h] = l[h] * rescale + sum;
            m[h] = new;
            rescale
        }

        /// One consumer warpgroup's serial schedule (the `_serial` instances) over the `tiles` key tiles (rounds
        /// `0..tiles`, key tile `tiles - 1 - i` in round `i`) of its 64 query rows. Returns O's
        /// accumulators and the rows' maxima and sums.
        ///
        /// # Safety
        /// The consumer warpgroup's 128 threads call it together with the same arguments; Q
        /// is in its buffer; the producer fills rounds `0..tiles`.
        #[inline(always)]
        unsafe fn consume<const CAUSAL: bool>(layout: Layout<STAGES_D256>, rows: Rows, q: u32, last_row: u32, tiles: u32) -> ([f32; 128], [f32; 2], [f32; 2]) {
            let lane = rows.lane;
            // Not `[0.0; 128]`: a repeat expression becomes a store loop that keeps the array in
            // local memory (docs/performance.md). SAFETY: all-zero bits are 0.0.
            let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
            // SAFETY: as above.
            let mut s: [f32; 32] = unsafe { core::mem::zeroed() };
            let (mut m, mut l) = ([f32::NEG_INFINITY; 2], [0.0f32; 2]);
            // Every `unsafe` block below issues or waits for `wgmma`s: the warpgroup's 128
            // threads run this code together (the loop bounds and the skip are the warpgroup's);
            // the shared tiles a group reads stay untouched until the arrival on their `empty`
            // barrier, after the wait for that group; the registers of a group in flight are
            // fenced before its issue and not touched until it has been waited for.
            for i in 0..tiles {
                let j = tiles - 1 - i;
                let slot = Ring::<STAGES_D256>::slot(i);
                layout.keys().consume(i);
                // Causal: a key tile wholly after this consumer's last row adds nothing (every
                // score masked); its slots are still waited for and released (the rings count
                // both consumers' warps).
                if CAUSAL && j * BN_D256 > last_row {
                    layout.values().consume(i);
                    if lane == 0 {
                        layout.keys().release(i);
                        layout.values().release(i);
                    }
                    continue;
                }
                // SAFETY: see above (the first score `wgmma` only writes `s`).
                unsafe {
                    wgmma::fence();
                    issue_scores(&mut s, q, layout.k(slot));
                    wgmma::wait::<0>();
                }
                fence_accumulators_32(&mut s);
                if lane == 0 {
                    layout.keys().release(i);
                }
                if (j + 1) * BN_D256 > rows.seq_len || (CAUSAL && (j + 1) * BN_D256 > last_row - 62) {
                    mask::<CAUSAL>(&mut s, j * BN_D256 + 2 * (lane % 4), rows.row0, rows.seq_len);
                }
                let factor = [softmax_row(&mut s, &mut m, &mut l, rows.scale_log2, 0), softmax_row(&mut s, &mut m, &mut l, rows.scale_log2, 1)];
                let mut p = a_fragments_bf16_32(&s);
                unroll::<32>(|c| unroll::<4>(|e| acc[4 * c + e] *= factor[e >> 1]));
                layout.values().consume(i);
                fence_accumulators_128(&mut acc);
                fence_fragments64(&mut p);
                // SAFETY: see above.
                unsafe {
                    wgmma::fence();
                    issue_pv(&mut acc, &p, layout.v(slot));
                    wgmma::wait::<0>();
                }
                fence_accumulators_128(&mut acc);
                if lane == 0 {
                    layout.values().release(i);
                }
            }
            (acc, m, l)
        }

        /// One consumer warpgroup's overlapped schedule (FlashAttention-3's intra-warpgroup
        /// overlap, as the other kernels' `consume_tile`): per step, issue this tile's scores,
        /// then the previous tile's `P·V`; wait for the scores and run their softmax while
        /// `P·V` is on the tensor cores. With the causal mask the rounds wholly after this
        /// consumer's rows (the first ones: the producer loads the last key tile first) are
        /// waited for and released without work; the first tile worked on is the only one
        /// that may need the mask (ragged past `seq_len`, or on this consumer's diagonal), so
        /// it is peeled and the loop has no mask. Returns O's accumulators and the rows' maxima
        /// and sums.
        ///
        /// # Safety
        /// As for [`consume`].
        #[inline(always)]
        unsafe fn consume_overlap<const CAUSAL: bool>(
            layout: Layout<STAGES_D256>,
            rows: Rows,
            q: u32,
            last_row: u32,
            tiles: u32,
        ) -> ([f32; 128], [f32; 2], [f32; 2]) {
            let lane = rows.lane;
            // SAFETY: all-zero bits are 0.0 (not a repeat expression: docs/performance.md).
            let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
            // SAFETY: as above.
            let mut s: [f32; 32] = unsafe { core::mem::zeroed() };
            let (mut m, mut l) = ([f32::NEG_INFINITY; 2], [0.0f32; 2]);
            // Rounds `first..tiles` hold key tiles `mine - 1` down to 0.
            let mine = if CAUSAL { tiles.min(last_row / BN_D256 + 1) } else { tiles };
            let first = tiles - mine;
            for i in 0..first {
                layout.keys().consume(i);
                layout.values().consume(i);
                if lane == 0 {
                    layout.keys().release(i);
                    layout.values().release(i);
                }
            }
            if mine == 0 {
                return (acc, m, l);
            }
            // Every `unsafe` block below issues or waits for `wgmma`s, as in `consume`; the
            // registers of a group in flight (`s`, `acc`, `p`) are fenced before its issue and
            // not written until it has been waited for (ptxas serialises every `wgmma` of the
            // kernel otherwise: C7513), so the softmax works on a copy of `s`.
            layout.keys().consume(first);
            // SAFETY: see above (the first score `wgmma` only writes `s`).
            unsafe {
                wgmma::fence();
                issue_scores(&mut s, q, layout.k(Ring::<STAGES_D256>::slot(first)));
                wgmma::wait::<0>();
            }
            fence_accumulators_32(&mut s);
            if lane == 0 {
                layout.keys().release(first);
            }
            let j = mine - 1;
            let mut x = s;
            if (j + 1) * BN_D256 > rows.seq_len || (CAUSAL && (j + 1) * BN_D256 > last_row - 62) {
                mask::<CAUSAL>(&mut x, j * BN_D256 + 2 * (lane % 4), rows.row0, rows.seq_len);
            }
            // (O is still 0: the first rescale factor is not needed.)
            softmax_row(&mut x, &mut m, &mut l, rows.scale_log2, 0);
            softmax_row(&mut x, &mut m, &mut l, rows.scale_log2, 1);
            s = x;
            let mut factor = [1.0f32; 2];
            // SAFETY: all-zero bits are valid `u32`s (replaced before the first P·V reads them).
            let mut p: Fragments64 = unsafe { core::mem::zeroed() };
            for i in first + 1..tiles {
                // SAFETY: see above. P·V of round i - 2 (if any) is done: its P and V are free.
                unsafe { wgmma::wait::<0>() };
                fence_accumulators_128(&mut acc);
                fence_fragments64(&mut p);
                if i >= first + 2 && lane == 0 {
                    layout.values().release(i - 2);
                }
                p = a_fragments_bf16_32(&s);
                fence_fragments64(&mut p);
                layout.keys().consume(i);
                // SAFETY: see above (the first score `wgmma` only writes `s`).
                unsafe {
                    wgmma::fence();
                    issue_scores(&mut s, q, layout.k(Ring::<STAGES_D256>::slot(i)));
                }
                // O is not in flight here (the previous P·V was waited for); this overlaps S.
                unroll::<32>(|c| unroll::<4>(|e| acc[4 * c + e] *= factor[e >> 1]));
                layout.values().consume(i - 1);
                fence_accumulators_128(&mut acc);
                fence_fragments64(&mut p);
                // SAFETY: see above.
                unsafe {
                    wgmma::fence();
                    issue_pv(&mut acc, &p, layout.v(Ring::<STAGES_D256>::slot(i - 1)));
                    // The scores are done; P·V may still run.
                    wgmma::wait::<1>();
                }
                fence_accumulators_32(&mut s);
                if lane == 0 {
                    layout.keys().release(i);
                }
                let mut x = s;
                factor = [softmax_row(&mut x, &mut m, &mut l, rows.scale_log2, 0), softmax_row(&mut x, &mut m, &mut l, rows.scale_log2, 1)];
                s = x;
            }
            // The tail: the last P·V.
            // SAFETY: see above.
            unsafe { wgmma::wait::<0>() };
            fence_accumulators_128(&mut acc);
            fence_fragments64(&mut p);
            if tiles >= first + 2 && lane == 0 {
                layout.values().release(tiles - 2);
            }
            p = a_fragments_bf16_32(&s);
            unroll::<32>(|c| unroll::<4>(|e| acc[4 * c + e] *= factor[e >> 1]));
            layout.values().consume(tiles - 1);
            fence_accumulators_128(&mut acc);
            fence_fragments64(&mut p);
            // SAFETY: see above.
            unsafe {
                wgmma::fence();
                issue_pv(&mut acc, &p, layout.v(Ring::<STAGES_D256>::slot(tiles - 1)));
                wgmma::wait::<0>();
            }
            fence_accumulators_128(&mut acc);
            if lane == 0 {
                layout.values().release(tiles - 1);
            }
            (acc, m, l)
        }

        /// Keeps the compiler from moving register writes of `p` past a `wgmma::fence` (as the
        /// other kernels' `fence_fragments`).
        #[inline(always)]
        fn fence_fragments64(p: &mut Fragments64) {
            // SAFETY: `[[u32; 4]; 4]` and `[f32; 16]` have the same size and alignment, and
            // every bit pattern is valid for both.
            fence_accumulators_16(unsafe { &mut *(p as *mut Fragments64 as *mut [f32; 16]) });
        }

        /// The epilogue: normalises this thread's two rows of O (256 columns), stores them and
        /// (one lane per row) the LSE; rows past `seq_len` are not stored.
        ///
        /// # Safety
        /// `o` holds `(head + 1) · seq_len · 256` bf16 (as pairs), `lse` `(head + 1) · seq_len` f32.
        #[inline(always)]
        unsafe fn store_rows(acc: &[f32; 128], m: [f32; 2], l: [f32; 2], rows: Rows, o: *mut u32, lse: *mut f32, head: u32) {
            let (lane, seq_len) = (rows.lane, rows.seq_len);
            unroll::<2>(|h| {
                let mut total = l[h];
                total += shuffle_xor(total, 1);
                total += shuffle_xor(total, 2);
                let row = rows.row0 + 8 * h as u32;
                if row < seq_len {
                    let inverse = if total > 0.0 { 1.0 / total } else { 0.0 };
                    let at = (head as usize * seq_len as usize + row as usize) * 256;
                    unroll::<32>(|i| {
                        let col = 8 * i + 2 * (lane as usize % 4);
                        let pair = pack_bf16x2(acc[4 * i + 2 * h] * inverse, acc[4 * i + 2 * h + 1] * inverse);
                        // SAFETY: row < seq_len and col + 1 < 256: inside O (the caller's contract).
                        unsafe { *o.add((at + col) / 2) = pair };
                    });
                    if lane.is_multiple_of(4) {
                        // SAFETY: inside `lse` (the caller's contract).
                        unsafe { *lse.add(head as usize * seq_len as usize + row as usize) = (m[h] + total.fast_log2()) * core::f32::consts::LN_2 };
                    }
                }
            });
        }

        /// The D 256 kernel body: one 128-row query tile a block, key tiles of [`BN_D256`]
        /// keys, each consumer's overlapped schedule (`OVERLAP`: the next tile's scores issued
        /// before this tile's `P·V`, the softmax beside `P·V`) or serial one
        /// (`ferrocuda_kernels::attention`'s sm_90 path at D 256; design and limits in
        /// `docs/kernels/attention.md`).
        ///
        /// # Safety
        /// The module's requirements with every map's box [`BOX_D256`]; 384 threads,
        /// [`shared_bytes_d256`]`()` of dynamic shared memory, grid `(⌈seq_len / 128⌉,
        /// batch·heads)`; run as every thread of the grid.
        #[inline(always)]
        pub unsafe fn attention_body_d256<const CAUSAL: bool, const OVERLAP: bool>(
            q_map: *const TensorMap,
            k_map: *const TensorMap,
            v_map: *const TensorMap,
            o: *mut u32,
            lse: *mut f32,
            seq_len: u32,
            scale_log2: f32,
        ) {
            let tid = thread_idx_x();
            // The other kernels' layout with a K/V tile (64 keys: four 64-column boxes) as its
            // tile: Q's 128 rows are two Q buffers of that size, consumer `c`'s 64 rows in
            // buffer `c`; then the K ring's tiles, the V ring's, Q's barrier and the rings'.
            let layout = Layout::<STAGES_D256> { base: (dynamic_shared_address() + 1023) & !1023, tile: 4 * SLAB_D256, qbufs: 2 };
            if tid == 0 {
                layout.q_full().init(1);
                // One release per consumer warp.
                layout.keys().init(8);
                layout.values().init(8);
                fence_init();
            }
            sync_threads();
            // Causal: the longest query tiles (the last ones) first, so the short ones fill the tail.
            let q_tile = if CAUSAL { grid_dim_x() - 1 - block_idx_x() } else { block_idx_x() };
            let q0 = q_tile * BM;
            let head = block_idx_y();
            let tiles = kv_tiles_d256(CAUSAL, q0, seq_len);
            if tid / 128 == 0 {
                // SAFETY: the whole warpgroup executes it; the producer needs few registers.
                unsafe { warpgroup::dealloc_registers::<24>() };
                if tid == 0 {
                    // SAFETY: the maps are valid, box [64, 64, 1] (the kernel's contract); every
                    // box starts inside its array or past its rows (filled with zeros by the
                    // copy engine, its bytes counted); each ring slot is free (its `empty` phase
                    // waited for by `produce`) before it is refilled; Q's buffer is unused yet.
                    unsafe {
                        TensorMap::acquire(q_map);
                        TensorMap::acquire(k_map);
                        TensorMap::acquire(v_map);
                        let q_full = layout.q_full();
                        q_full.arrive_expect_tx(8 * SLAB_D256);
                        for half in 0..2 {
                            for c in 0..4 {
                                TensorMap::load_3d(q_map, layout.q_at(half) + c * SLAB_D256, q_full, (64 * c) as i32, (q0 + 64 * half) as i32, head as i32);
                            }
                        }
                        for i in 0..tiles {
                            let (slot, row) = (Ring::<STAGES_D256>::slot(i), ((tiles - 1 - i) * BN_D256) as i32);
                            let full = layout.keys().produce(i, 4 * SLAB_D256);
                            for c in 0..4 {
                                TensorMap::load_3d(k_map, layout.k(slot) + c * SLAB_D256, full, (64 * c) as i32, row, head as i32);
                            }
                            let full = layout.values().produce(i, 4 * SLAB_D256);
                            for c in 0..4 {
                                TensorMap::load_3d(v_map, layout.v(slot) + c * SLAB_D256, full, (64 * c) as i32, row, head as i32);
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
            let rows = Rows { lane, row0: q0 + 64 * consumer + 16 * ((tid % 128) / 32) + lane / 4, q0, seq_len, scale_log2 };
            layout.q_full().wait(0);
            // SAFETY: the warpgroup's threads call it together; Q is in its buffer (waited for);
            // the producer fills rounds 0..tiles.
            let (acc, m, l) = unsafe {
                if OVERLAP {
                    consume_overlap::<CAUSAL>(layout, rows, layout.q_at(consumer), q0 + 64 * consumer + 63, tiles)
                } else {
                    consume::<CAUSAL>(layout, rows, layout.q_at(consumer), q0 + 64 * consumer + 63, tiles)
                }
            };
            // SAFETY: O and LSE hold every head's rows (the kernel's contract).
            unsafe { store_rows(&acc, m, l, rows, o, lse, head) };
        }

        macro_rules! d256_kernels {
            ($($name:ident: $causal:literal, $overlap:literal;)*) => {$(
                /// Attention forward at head dimension 256 (see the module docs and
                /// `attention_body_d256`), causal or not, overlapped or `_serial`, as the name
                /// says. Launch: 384 threads,
                /// `shared_bytes_d256()` of dynamic shared memory, grid `(⌈seq_len / 128⌉,
                /// batch·heads)`; Q, K, V `[batch·heads, seq_len, 256]` bf16, O the same shape,
                /// LSE `[batch·heads, seq_len]` f32. The kernel checks the launch and the
                /// lengths and returns without writing anything otherwise.
                ///
                /// # Safety
                /// `maps` points to three tensor maps (Q, K, V: 128 bytes each) of exactly `q`,
                /// `k` and `v` as `[256, seq_len, batch·heads]` bf16 (innermost first), box
                /// [`BOX_D256`] (64 rows: not the other kernels' [`BOX`]), 128-byte swizzle, not
                /// written during the launch. (`maps` must be the start of `map_words`, at least
                /// 48 words, 64-byte aligned: checked.) The copy engine writes a box of the
                /// map's size into each slot, so another box would overrun the slot's shared
                /// memory, and a map of other memory would read memory the launch did not
                /// declare (the kernel cannot read the opaque maps).
                #[kernel(launch_bounds(384, 1))]
                #[allow(clippy::too_many_arguments)]
                pub unsafe fn $name(
                    maps: *const TensorMap, map_words: &[u64], q: &[bf16], k: &[bf16], v: &[bf16],
                    mut o: UncheckedSlice<bf16>, mut lse: UncheckedSlice<f32>, seq_len: u32, scale_log2: f32,
                ) {
                    if !launch_ok::<256>(false, shared_bytes_d256(), grid_dim_y(), seq_len, maps, map_words, q, k, v, &mut o, &lse) {
                        return;
                    }
                    let (o, lse) = (o.as_mut_ptr().cast::<u32>(), lse.as_mut_ptr());
                    // SAFETY: the maps: the kernel's contract; the launch, the shared memory, the
                    // lengths and O's alignment: checked above (`launch_ok`, which also says why
                    // no two threads write one element of O or LSE, and nothing reads them).
                    unsafe { attention_body_d256::<$causal, $overlap>(maps, maps.wrapping_add(1), maps.wrapping_add(2), o, lse, seq_len, scale_log2) }
                }
            )*
                forward_table!(D256_TABLE, plain: $($name)*);
            };
        }

        /// The D 256 instances, for [`forward_kernel`].
        #[cfg(not(target_arch = "nvptx64"))]
        pub(super) const D256: &[ForwardKernel] = D256_TABLE;

        d256_kernels! {
            attention_d256: false, true;
            attention_d256_causal: true, true;
            attention_d256_serial: false, false;
            attention_d256_causal_serial: true, false;
        }
    }
}
