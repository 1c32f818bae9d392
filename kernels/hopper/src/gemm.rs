//! The Hopper bf16 GEMM: `C (M x N, row-major bf16) = A (M x K, row-major) · Bᵀ`, where B is
//! `N x K` row-major (both operands K-major: cuBLAS's "TN" case, a linear layer's `x · Wᵀ`),
//! f32 accumulation.
//!
//! Per block (384 threads, persistent: one block per SM walks the 128x256 output tiles):
//! - warpgroup 0 (producer) gives up registers (`setmaxnreg.dec 24`); one thread issues, per
//!   64-wide K step, two TMA loads (A 128x64, B 256x64, 128-byte swizzle) into one of
//!   [`STAGES`] shared-memory stages, signalling the stage's "full" mbarrier with 48 KiB;
//! - warpgroups 1 and 2 (consumers, `setmaxnreg.inc 240`) each own 64 rows of the tile: wait
//!   for "full", four `wgmma.m64n256k16` (K = 64), keep that group in flight while waiting for
//!   the previous step's, release the previous stage (one arrival per warp), and after the last
//!   K step convert the 128 f32 accumulators per thread to bf16 and store them (directly, or
//!   through shared memory and the copy engine).
//!
//! Six kernels share that body (`gemm_body`): [`gemm_bf16_tn()`] (one block per tile) and
//! [`gemm_bf16_tn_cluster2()`] (clusters of two blocks on vertically adjacent tiles, B loaded
//! half by each and multicast to both; a consumer tells its peer a stage is free with a
//! CTA-scope arrival, `MBarrier::arrive_cluster_after_reads`), each with direct stores
//! (sessions 12-13) or, since session 16, with the copy-engine epilogue
//! ([`gemm_bf16_tn_store()`], [`gemm_bf16_tn_store_cluster2()`] with 4 stages and half a tile
//! staged at a time; [`gemm_bf16_tn_store3()`], [`gemm_bf16_tn_store3_cluster2()`] with 3
//! stages and the whole tile staged): each consumer writes its bf16 tile with `stmatrix` into
//! 128-byte-swizzled 64 x 64 boxes in shared memory and one thread stores them with TMA, which
//! runs while the warpgroup starts its next tile (fast.cu's kernel 12 and CUTLASS do the same;
//! the direct stores cost about 11 instructions per 4-byte pair). The copy-engine kernels are
//! launched as programmatic dependent launches: a block sets up its barriers while the
//! previous kernel on the stream finishes, then waits for it (`grid_dependency`). All walk
//! their tiles in bands of `group` M-tiles ([`grouped_unit`]), so the blocks running at once
//! share A and B panels in L2; the host picks the kernel, the band and the grid per shape
//! (`ferrocuda_kernels::gemm`).
//!
//! Edges: the tensor maps describe A and B exactly, so the copy engine fills the parts of a
//! box past M, N or K with zeros (and still counts their bytes); the last K step adds zeros,
//! and the stores of a tile that crosses M or N are guarded (or clipped by the copy engine).
//! So any `M, N >= 1` and any `K >= 1` with `K % 8 == 0` (TMA's 16-byte row stride) and `N`
//! even (bf16 pairs are stored) work (the cluster schedule also needs an even number of M
//! tiles; the copy-engine epilogue `N % 8 == 0` and C 16-byte aligned);
//! `ferrocuda_kernels::gemm` checks them, builds (or reuses) the maps and picks the kernel.
//!
//! The kernels are `#[kernel]`s: their launchers take the maps as `DeviceTensorMap`s and `A`,
//! `B` as device slices beside them (so each launch declares its reads of the operands even
//! when the maps are cached copies that borrow nothing) and `C` as a device buffer. A kernel
//! checks its launch (block, grid, shared memory), the lengths of `A`, `B` and `C` against the
//! shape before touching anything, and returns without writing otherwise. What it cannot
//! check is the maps: 2-D bf16 maps of exactly `A` (`[K, M]`) and `B` (`[K, N]`), boxes
//! [`BOX_A`] and [`BOX_B`] (or [`BOX_B_HALF`]), 128-byte swizzle (a map with another box would
//! make the copy engine write a stage of another size, past the stage's shared memory), and
//! for the copy-engine epilogue a map of exactly `C` (`[N, M]`, box [`BOX_C`]; a map of other
//! memory would be written by the copy engine, undeclared). So
//! the kernels are `unsafe` and so are their launchers (a safe launcher taking any
//! `DeviceTensorMap` would let safe code corrupt shared memory);
//! `ferrocuda_kernels::gemm::hopper_gemm_bf16` builds exactly those maps and is safe.

use ferrocuda_device::cluster;
use ferrocuda_device::global::UncheckedSlice;
use ferrocuda_device::grid_dependency;
use ferrocuda_device::half::{bf16, pack_bf16x2};
use ferrocuda_device::kernel;
use ferrocuda_device::ldmatrix;
use ferrocuda_device::mbarrier::fence_init;
use ferrocuda_device::named_barrier::NamedBarrier;
use ferrocuda_device::pipeline::Ring;
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, block_dim_y, block_dim_z, block_idx_x, grid_dim_x, grid_dim_y, grid_dim_z, thread_idx_x};
use ferrocuda_device::tma::{TensorMap, dynamic_shared_address, fence_proxy_async_shared, store_commit, store_wait, store_wait_read};
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::warpgroup;
use ferrocuda_device::wgmma::{self, Descriptor, fence_accumulators_128, m64n256k16_bf16};

/// Output tile rows per block (two consumer warpgroups of 64).
pub const BM: u32 = 128;
/// Output tile columns per block.
pub const BN: u32 = 256;
/// K elements per pipeline stage.
pub const BK: u32 = 64;
/// Pipeline depth.
pub const STAGES: u32 = 4;
/// Threads per block: one producer and two consumer warpgroups.
pub const THREADS: u32 = 384;
/// TMA box of A's map (innermost first): 64 K elements x 128 rows.
pub const BOX_A: [u32; 2] = [BK, BM];
/// TMA box of B's map: 64 K elements x 256 rows.
pub const BOX_B: [u32; 2] = [BK, BN];
/// TMA box of B's map for [`gemm_bf16_tn_cluster2()`]: each block of a pair loads half the tile.
pub const BOX_B_HALF: [u32; 2] = [BK, BN / 2];
const A_TILE: u32 = BM * BK * 2;
const B_TILE: u32 = BN * BK * 2;
const STAGE: u32 = A_TILE + B_TILE;
/// Dynamic shared memory per block: the stages, the ring's barriers and 1 KiB to align the
/// stages to 1024 bytes (the 128-byte swizzle's period).
pub const SHARED_BYTES: u32 = STAGES * STAGE + Ring::<STAGES>::BARRIER_BYTES + 1024;
/// TMA box of C's map for the kernels that store through the copy engine
/// ([`gemm_bf16_tn_store()`] and friends): 64 columns (128 bytes, the swizzle's row) x 64 rows.
pub const BOX_C: [u32; 2] = [64, 64];
/// Bytes of one consumer warpgroup's 64 x 256 bf16 output tile.
const C_CONSUMER: u32 = 64 * BN * 2;
/// Bytes of one 64 x 64 box of C (a [`BOX_C`]) in shared memory.
const C_BOX: u32 = BOX_C[0] * BOX_C[1] * 2;
/// Passes of the copy-engine epilogue for a ring of `stages`: with 4 stages only half of each
/// consumer's tile is staged at a time (the shared memory holds 4 x 48 KiB of stages and
/// 2 x 16 KiB of C); with 3 stages the whole tile is staged at once (2 x 32 KiB).
pub const fn store_passes(stages: u32) -> u32 {
    if stages >= 4 { 2 } else { 1 }
}
/// Dynamic shared memory of a copy-engine-epilogue kernel with a ring of `stages` (3 or 4):
/// the stages, each consumer's C staging ([`store_passes`]), the ring's barriers and the 1 KiB
/// of alignment.
pub const fn store_shared_bytes(stages: u32) -> u32 {
    stages * STAGE + 2 * C_CONSUMER / store_passes(stages) + 16 * stages + 1024
}
/// Ring depth of [`gemm_bf16_tn_store()`] and [`gemm_bf16_tn_store_cluster2()`].
pub const STORE_STAGES: u32 = 4;
/// Ring depth of [`gemm_bf16_tn_store3()`] and [`gemm_bf16_tn_store3_cluster2()`].
pub const STORE3_STAGES: u32 = 3;

/// Output tiles of an `m x n` result (partial tiles at the edges included).
pub const fn tiles(m: u32, n: u32) -> u32 {
    m.div_ceil(BM) * n.div_ceil(BN)
}

/// The output tile `(tm, tn)` of the `unit`-th work unit in the grouped order: the units of an
/// `units_m x units_n` grid are walked in bands of `group` rows (M), column by column inside a
/// band (M fastest), so the blocks working at the same time share a few A row bands and B
/// column bands in L2. `group >= units_m` is plain column-major order (M fastest); the last
/// band may be shorter. A bijection from `0..units_m * units_n` onto the units for any
/// `group >= 1` (`group == 0` is taken as 1).
pub const fn grouped_unit(unit: u32, units_m: u32, units_n: u32, group: u32) -> (u32, u32) {
    let group = if group == 0 {
        1
    } else if group > units_m {
        units_m
    } else {
        group
    };
    let band = unit / (group * units_n);
    let first = band * group;
    let rows = if units_m - first < group { units_m - first } else { group };
    let within = unit - band * group * units_n;
    (first + within % rows, within / rows)
}

/// The GEMM (see the module docs): `c` (`m x n` bf16, row-major) `= a · bᵀ` with `a_map`
/// describing `a` (`m x k`) and `b_map` describing `b` (`n x k`); tiles walked in bands of
/// `group` M-tiles ([`grouped_unit`]). Launch: [`THREADS`] threads, a 1-D grid of at most
/// [`tiles`]`(m, n)` blocks (one per SM is best), [`SHARED_BYTES`] of dynamic shared memory.
/// `a` and `b` are passed beside their maps so that each launch declares its reads of them
/// (the maps themselves may be cached copies that borrow nothing).
///
/// # Safety
/// `a_map` and `b_map` must be 2-D bf16 maps of exactly `a` (`[k, m]` elements from `a`'s
/// first) and `b` (`[k, n]`) with boxes [`BOX_A`] and [`BOX_B`] and the 128-byte swizzle (what
/// `ferrocuda_kernels::gemm` builds): the copy engine writes a box of the map's size into each
/// stage, so another box would overrun the stage's shared memory, and a map of other memory
/// would read memory this launch did not declare (the kernel cannot read the opaque map).
/// Everything else (the launch, the lengths of `a`, `b` and `c`, the shape) the kernel checks.
#[kernel(launch_bounds(384, 1))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_bf16_tn(a_map: &TensorMap, b_map: &TensorMap, a: &[bf16], b: &[bf16], c: UncheckedSlice<bf16>, m: u32, n: u32, k: u32, group: u32) {
    // SAFETY: the kernel's contract, forwarded.
    unsafe { gemm_body::<1, STAGES, false>(a_map, b_map, core::ptr::null(), a, b, c, m, n, k, group) }
}

/// [`gemm_bf16_tn()`] in clusters of two blocks along x that compute vertically adjacent tiles
/// `(2p, n)` and `(2p + 1, n)` and share B: each block loads its own A tile and half of the B
/// tile (128 rows), multicast into both blocks' shared memory, so each block reads 32 instead
/// of 48 KiB per K step from L2. Each stage's "empty" barrier counts the consumer warps of
/// both blocks (16): a stage is refilled only when both have read it, since the peer's copy
/// writes into it. Units of work are tile pairs, walked in bands of `group` pairs. Needs an
/// even number of M tiles (`m.div_ceil(BM)` even) and an even grid; returns without writing
/// otherwise.
///
/// # Safety
/// As for [`gemm_bf16_tn()`], except that `b_map`'s box is [`BOX_B_HALF`].
#[kernel(launch_bounds(384, 1), cluster_dims(2))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_bf16_tn_cluster2(a_map: &TensorMap, b_map: &TensorMap, a: &[bf16], b: &[bf16], c: UncheckedSlice<bf16>, m: u32, n: u32, k: u32, group: u32) {
    // SAFETY: the kernel's contract, forwarded.
    unsafe { gemm_body::<2, STAGES, false>(a_map, b_map, core::ptr::null(), a, b, c, m, n, k, group) }
}

/// [`gemm_bf16_tn()`] with the epilogue through shared memory and the copy engine: each
/// consumer warpgroup converts its 64 x 256 accumulators to bf16 pairs, writes them with
/// `stmatrix` into its staging buffer (64 x 64 boxes, 128-byte swizzled, bank-conflict free)
/// and one thread hands the boxes to TMA stores (clipped at C's edges by the copy engine, no
/// guards), which run while the warpgroup starts its next tile; the staging buffer is reused
/// only after those stores have read it. Ring of [`STORE_STAGES`]; the staging holds half a
/// tile per consumer ([`store_passes`]). Launch: as [`gemm_bf16_tn()`] with
/// [`store_shared_bytes`]`(`[`STORE_STAGES`]`)` of dynamic shared memory. Needs `n % 8 == 0` and
/// `c` 16-byte aligned (TMA's row stride and address); returns without writing otherwise.
///
/// # Safety
/// As for [`gemm_bf16_tn()`], and `c_map` must be a 2-D bf16 map of exactly `c` (`[n, m]`
/// elements from `c`'s first, row stride `2n` bytes) with box [`BOX_C`] and the 128-byte
/// swizzle: the copy engine writes C through it (a map of other memory would write memory
/// this launch did not declare).
#[kernel(launch_bounds(384, 1))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_bf16_tn_store(
    a_map: &TensorMap,
    b_map: &TensorMap,
    c_map: &TensorMap,
    a: &[bf16],
    b: &[bf16],
    c: UncheckedSlice<bf16>,
    m: u32,
    n: u32,
    k: u32,
    group: u32,
) {
    // SAFETY: the kernel's contract, forwarded.
    unsafe { gemm_body::<1, STORE_STAGES, true>(a_map, b_map, c_map, a, b, c, m, n, k, group) }
}

/// [`gemm_bf16_tn_store()`] in clusters of two sharing B, as [`gemm_bf16_tn_cluster2()`].
///
/// # Safety
/// As for [`gemm_bf16_tn_store()`], except that `b_map`'s box is [`BOX_B_HALF`].
#[kernel(launch_bounds(384, 1), cluster_dims(2))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_bf16_tn_store_cluster2(
    a_map: &TensorMap,
    b_map: &TensorMap,
    c_map: &TensorMap,
    a: &[bf16],
    b: &[bf16],
    c: UncheckedSlice<bf16>,
    m: u32,
    n: u32,
    k: u32,
    group: u32,
) {
    // SAFETY: the kernel's contract, forwarded.
    unsafe { gemm_body::<2, STORE_STAGES, true>(a_map, b_map, c_map, a, b, c, m, n, k, group) }
}

/// [`gemm_bf16_tn_store()`] with a ring of [`STORE3_STAGES`] and the whole tile staged at once
/// (one pass of stores per tile). Launch with [`store_shared_bytes`]`(`[`STORE3_STAGES`]`)`.
///
/// # Safety
/// As for [`gemm_bf16_tn_store()`].
#[kernel(launch_bounds(384, 1))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_bf16_tn_store3(
    a_map: &TensorMap,
    b_map: &TensorMap,
    c_map: &TensorMap,
    a: &[bf16],
    b: &[bf16],
    c: UncheckedSlice<bf16>,
    m: u32,
    n: u32,
    k: u32,
    group: u32,
) {
    // SAFETY: the kernel's contract, forwarded.
    unsafe { gemm_body::<1, STORE3_STAGES, true>(a_map, b_map, c_map, a, b, c, m, n, k, group) }
}

/// [`gemm_bf16_tn_store3()`] in clusters of two sharing B, as [`gemm_bf16_tn_cluster2()`].
///
/// # Safety
/// As for [`gemm_bf16_tn_store()`], except that `b_map`'s box is [`BOX_B_HALF`].
#[kernel(launch_bounds(384, 1), cluster_dims(2))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_bf16_tn_store3_cluster2(
    a_map: &TensorMap,
    b_map: &TensorMap,
    c_map: &TensorMap,
    a: &[bf16],
    b: &[bf16],
    c: UncheckedSlice<bf16>,
    m: u32,
    n: u32,
    k: u32,
    group: u32,
) {
    // SAFETY: the kernel's contract, forwarded.
    unsafe { gemm_body::<2, STORE3_STAGES, true>(a_map, b_map, c_map, a, b, c, m, n, k, group) }
}

/// The body of every kernel; `CLUSTER` blocks (1 or 2) share each B tile, the ring has `S`
/// stages, and `STORE` picks the copy-engine epilogue (`c_map`, unused otherwise).
///
/// # Safety
/// As for [`gemm_bf16_tn()`] (`CLUSTER == 1`) or [`gemm_bf16_tn_cluster2()`] (`CLUSTER == 2`, run
/// in clusters of 2), and with `STORE` as for [`gemm_bf16_tn_store()`] (`c_map`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_body<const CLUSTER: u32, const S: u32, const STORE: bool>(
    a_map: &TensorMap,
    b_map: &TensorMap,
    c_map: *const TensorMap,
    a: &[bf16],
    b: &[bf16],
    mut c: UncheckedSlice<bf16>,
    m: u32,
    n: u32,
    k: u32,
    group: u32,
) {
    // The launch, the operands and the shape as the loads and stores below need them; the
    // same in every thread of the grid, so either every thread returns here or none does
    // (before the first barrier).
    let shared_bytes = if STORE { store_shared_bytes(S) } else { S * STAGE + Ring::<S>::BARRIER_BYTES + 1024 };
    let launch_ok = block_dim_x() == THREADS
        && block_dim_y() == 1
        && block_dim_z() == 1
        && grid_dim_y() == 1
        && grid_dim_z() == 1
        && grid_dim_x().is_multiple_of(CLUSTER)
        && dynamic_shared::<u32>().len() >= (shared_bytes / 4) as usize;
    let (mk, nk, mn) = (m as u64 * k as u64, n as u64 * k as u64, m as u64 * n as u64);
    let operands_ok = a.len() as u64 == mk && b.len() as u64 == nk && mn <= c.len() as u64;
    let c_ok = if STORE {
        // TMA: a row stride of a multiple of 16 bytes, a 16-byte aligned start.
        n.is_multiple_of(8) && (c.as_mut_ptr() as usize).is_multiple_of(16)
    } else {
        n.is_multiple_of(2) && (c.as_mut_ptr() as usize).is_multiple_of(4)
    };
    let tiles_m = m.div_ceil(BM);
    if !launch_ok || !operands_ok || !c_ok || k == 0 || !tiles_m.is_multiple_of(CLUSTER) {
        if STORE {
            // A programmatic dependent launch returns only after the work it overlaps.
            grid_dependency::wait_for_prerequisites();
        }
        return;
    }
    let (a_map, b_map) = (a_map as *const TensorMap, b_map as *const TensorMap);
    let tid = thread_idx_x();
    let rank = if CLUSTER > 1 { cluster::block_rank() } else { 0 };
    let base = (dynamic_shared_address() + 1023) & !1023;
    // SAFETY: the ring's barriers follow the stages (and the C staging), inside the dynamic
    // shared memory (at least `shared_bytes`, checked above), used only by the ring (at the
    // same offset in both blocks of a cluster).
    let ring = unsafe { Ring::<S>::at(base + S * STAGE + if STORE { 2 * C_CONSUMER / store_passes(S) } else { 0 }) };
    if tid == 0 {
        // One release per consumer warp of every block that writes into this block's stages.
        ring.init(8 * CLUSTER);
        fence_init();
    }
    if CLUSTER > 1 {
        // Both blocks' barriers exist before either block copies into or arrives on the other.
        cluster::sync();
    } else {
        sync_threads();
    }
    if STORE {
        // The copy-engine kernels are launched as programmatic dependent launches: this block
        // started while the previous kernel on the stream may still be running, and set up
        // only its shared memory so far. Let the next launch be scheduled (a hint: its blocks
        // take each SM as this kernel's block there exits), then wait for the previous work
        // to complete and its writes to be visible before anything below reads the tensor
        // maps, A or B or writes C (every thread, before any global access and before
        // returning).
        grid_dependency::launch_dependents();
        grid_dependency::wait_for_prerequisites();
    }
    // Work units: tiles, or vertical tile pairs in a cluster; each block of a cluster takes
    // its rank's tile of the unit.
    let (units_m, units_n) = (tiles_m / CLUSTER, n.div_ceil(BN));
    let units = units_m * units_n;
    let (first, stride) = (block_idx_x() / CLUSTER, grid_dim_x() / CLUSTER);
    let tile_of = |unit: u32| {
        let (um, tn) = grouped_unit(unit, units_m, units_n, group);
        (um * CLUSTER + rank, tn)
    };
    let k_steps = k.div_ceil(BK);
    if tid / 128 == 0 {
        // SAFETY: the whole warpgroup executes it; the producer needs few registers.
        unsafe { warpgroup::dealloc_registers::<24>() };
        if tid == 0 {
            // SAFETY: the maps are valid tensor maps in global memory, unchanged while the
            // kernel runs (the launcher took `DeviceTensorMap`s and declared their reads).
            unsafe {
                TensorMap::acquire(a_map);
                TensorMap::acquire(b_map);
            }
            let mut step = 0u32;
            let mut unit = first;
            while unit < units {
                let (tm, tn) = tile_of(unit);
                for kb in 0..k_steps {
                    // Empty here, and (in a cluster) in the peer, whose consumers also count.
                    let full = ring.produce(step, STAGE);
                    let dst = base + Ring::<S>::slot(step) * STAGE;
                    let (x, b_row) = ((kb * BK) as i32, tn * BN + rank * (BN / CLUSTER));
                    // SAFETY: the maps as above, acquired by this thread, with the boxes and
                    // swizzle of the kernel's contract (A: `A_TILE` bytes; B: `B_TILE /
                    // CLUSTER` bytes to each of the `CLUSTER` blocks, so every block receives
                    // `STAGE` bytes, which `produce` announced); the stage is empty in every
                    // destination block (`produce` waited for all their consumers' releases)
                    // and 1024-aligned; coordinates past the arrays are filled with zeros.
                    unsafe {
                        TensorMap::load_2d(a_map, dst, full, x, (tm * BM) as i32);
                        let b_dst = dst + A_TILE + rank * (B_TILE / CLUSTER);
                        if CLUSTER > 1 {
                            TensorMap::load_2d_multicast(b_map, b_dst, full, x, b_row as i32, 0b11);
                        } else {
                            TensorMap::load_2d(b_map, b_dst, full, x, b_row as i32);
                        }
                    }
                    step += 1;
                }
                unit += stride;
            }
        }
    } else {
        // SAFETY: the whole warpgroup executes it; 2 x 128 x 240 + 128 x 24 registers fit.
        unsafe { warpgroup::alloc_registers::<240>() };
        let consumer = tid / 128 - 1;
        let lane = tid % 32;
        let warp = (tid % 128) / 32;
        let release = |step: u32| {
            ring.release(step);
            if CLUSTER > 1 {
                // SAFETY: the peer is running: it cannot pass the final cluster barrier before
                // this block reaches it; its barrier sits at the same offset. The arrival says
                // only that this warpgroup's `wgmma` reads of the stage are complete (waited
                // for before `release` is called); the peer's copy then refills it. No
                // ordinary writes of this thread are published to the peer by it.
                unsafe { ring.empty(Ring::<S>::slot(step)).arrive_cluster_after_reads(rank ^ 1) };
            }
        };
        let mut step = 0u32;
        let mut unit = first;
        while unit < units {
            let (tm, tn) = tile_of(unit);
            // Not `[0.0f32; 128]`: rustc lowers that repeat expression to a store loop with a
            // run-time index, which keeps the array in local memory (docs/performance.md).
            // SAFETY: all-zero bits are 0.0 for every element.
            let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
            for kb in 0..k_steps {
                ring.consume(step);
                // SAFETY: the consumer warpgroup's 128 threads run this together (the branch is
                // on `tid / 128`); the stage is full (TMA-written, so visible to the async
                // proxy) and stays so until this warpgroup releases it, after the wait below.
                unsafe { issue_k_step(&mut acc, base + Ring::<S>::slot(step) * STAGE, consumer) };
                // This step's group may still run; the previous one is done, so its stage can
                // be refilled.
                // SAFETY: the consumer warpgroup's 128 threads run this together.
                unsafe { wgmma::wait::<1>() };
                fence_accumulators_128(&mut acc);
                if lane == 0 && kb > 0 {
                    release(step - 1);
                }
                step += 1;
            }
            // SAFETY: the consumer warpgroup's 128 threads run this together.
            unsafe { wgmma::wait::<0>() };
            fence_accumulators_128(&mut acc);
            if lane == 0 {
                release(step - 1);
            }
            if STORE {
                let staging = base + S * STAGE + consumer * (C_CONSUMER / store_passes(S));
                // SAFETY: the consumer warpgroup's 128 threads run this together; the staging
                // buffer is this warpgroup's own; `c_map` is the kernel's map of exactly `c`.
                unsafe { store_tile::<S>(&acc, staging, c_map, tm * BM + consumer * 64, tn * BN, consumer, warp, lane) };
            } else {
                let row = tm * BM + consumer * 64 + warp * 16 + lane / 4;
                let col0 = tn * BN + 2 * (lane % 4);
                let whole = tm * BM + BM <= m && tn * BN + BN <= n;
                store_fragment(&mut c, &acc, row, col0, m, n, whole);
            }
            unit += stride;
        }
        if STORE && tid.is_multiple_of(128) {
            // The stores read this block's shared memory and write C: both finish before the
            // block (and the kernel) does.
            store_wait::<0>();
        }
    }
    if CLUSTER > 1 {
        // No block exits while its peer may still copy into it or arrive on its barriers.
        cluster::sync();
    }
}

/// One K step of a consumer warpgroup: four `wgmma.m64n256k16` over the 64-wide K slice of
/// the stage at shared address `stage` (A rows `64 * consumer ..+64`, all of B), between a
/// `wgmma.fence` and a `commit`.
///
/// # Safety
/// The whole consumer warpgroup calls it together; the stage is full (written by TMA, so
/// visible to the async proxy) and stays so until the group committed here has completed.
#[inline(always)]
unsafe fn issue_k_step(acc: &mut [f32; 128], stage: u32, consumer: u32) {
    let a_tile = stage + consumer * 64 * 128;
    let b_tile = stage + A_TILE;
    // SAFETY: the caller's contract (warpgroup-uniform, the stage full); each step of 16 K
    // elements is 32 bytes further along the 128-byte-swizzled rows.
    unsafe {
        wgmma::fence();
        unroll::<4>(|step| {
            let step = step as u32;
            m64n256k16_bf16(acc, Descriptor::k_major_128b(a_tile + 32 * step).0, Descriptor::k_major_128b(b_tile + 32 * step).0, true);
        });
        wgmma::commit();
    }
}

/// The barrier of consumer warpgroup `consumer`'s 128 threads around its staging buffer.
#[inline(always)]
fn staging_barrier(consumer: u32) -> NamedBarrier {
    // SAFETY: ids 5 and 6 are used with 128 threads (one consumer warpgroup each) only, in
    // these kernels.
    const STAGING: [NamedBarrier; 2] = unsafe { [NamedBarrier::new(5, 128), NamedBarrier::new(6, 128)] };
    STAGING[(consumer & 1) as usize]
}

/// The copy-engine epilogue of one consumer warpgroup (a ring of `S` stages): its `m64n256`
/// accumulators as bf16 into `staging` (64 x 64 boxes of 8 KiB, 128-byte swizzled: the
/// 16-byte unit `u` of row `r` of a box sits at unit `u ^ (r % 8)`, as the copy engine reads
/// them), `stmatrix` x4 per two 8-column blocks, then one thread stores the boxes to rows
/// `row0..+64`, columns `col0..` of C through `c_map` (clipped at C's edges). In
/// [`store_passes`]`(S)` passes of `4 / passes` boxes; before a pass writes the staging
/// buffer, the previous pass's (or tile's) stores have finished reading it.
///
/// # Safety
/// The consumer warpgroup's 128 threads call it together; `staging` is 1024-byte aligned
/// shared memory of `C_CONSUMER / store_passes(S)` bytes that only this warpgroup uses;
/// `c_map` is a 2-D bf16 map of C with box [`BOX_C`] and the 128-byte swizzle.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store_tile<const S: u32>(acc: &[f32; 128], staging: u32, c_map: *const TensorMap, row0: u32, col0: u32, consumer: u32, warp: u32, lane: u32) {
    let passes = store_passes(S);
    // 8-column blocks per pass, boxes per pass.
    let (blocks, boxes) = (32 / passes, 4 / passes);
    let barrier = staging_barrier(consumer);
    let issuer = warp == 0 && lane == 0;
    // The staging buffer is free once the stores that read it last have read it.
    let reclaim = || {
        if issuer {
            store_wait_read::<0>();
        }
        barrier.sync();
    };
    let flush = |pass: u32| {
        // Every thread's `stmatrix` writes before the copy engine's reads.
        fence_proxy_async_shared();
        barrier.sync();
        if issuer {
            for b in 0..boxes {
                // SAFETY: `c_map` is the kernel's map of C (box `BOX_C`, 128-byte swizzle);
                // the box at `staging + C_BOX * b` is 1024-aligned, written and fenced above,
                // and stays unchanged until `store_wait_read` (in `reclaim`) returns; the tile's
                // part of C is this warpgroup's alone (see `store_fragment`).
                unsafe { TensorMap::store_2d(c_map, staging + C_BOX * b, (col0 + 64 * (pass * boxes + b)) as i32, row0 as i32) };
            }
            store_commit();
        }
    };
    reclaim();
    // Lane `l` gives the row address of matrix `l / 8`: rows `warp * 16 + l % 8` (+8 for the
    // odd matrices), 8-column block `2p + (l / 8) / 2`.
    let quad = lane / 8;
    let row = warp * 16 + lane % 8 + 8 * (quad & 1);
    let row_base = staging + row * 128;
    unroll::<16>(|p| {
        let p = p as u32;
        if p > 0 && (2 * p).is_multiple_of(blocks) {
            flush(2 * p / blocks - 1);
            reclaim();
        }
        let block = (2 * p + quad / 2) % blocks;
        let (bx, unit) = (block / 8, block % 8);
        let address = row_base + C_BOX * bx + 16 * (unit ^ (lane % 8));
        let i = 8 * p as usize;
        let value =
            [pack_bf16x2(acc[i], acc[i + 1]), pack_bf16x2(acc[i + 2], acc[i + 3]), pack_bf16x2(acc[i + 4], acc[i + 5]), pack_bf16x2(acc[i + 6], acc[i + 7])];
        // SAFETY: the whole warp runs it; `address` is a 16-byte unit of this warp's rows in
        // the staging buffer (inside it: row < 64, box < 4 / passes), reclaimed above.
        unsafe { ldmatrix::store_x4(address, value) };
    });
    flush(passes - 1);
}

/// Stores a consumer thread's `m64n256` accumulator fragment as bf16 pairs: pair `i` holds
/// columns `col0 + 8i`, `+1` of rows `row` and `row + 8` (the `wgmma` accumulator layout).
/// `whole`: the tile lies inside C, no guard needed; otherwise each pair is stored only when
/// its row and column are inside `m x n`.
#[inline(always)]
fn store_fragment(c: &mut UncheckedSlice<bf16>, acc: &[f32; 128], row: u32, col0: u32, m: u32, n: u32, whole: bool) {
    let pairs = c.as_mut_ptr().cast::<u32>();
    let store = |r: u32, col: u32, low: f32, high: f32| {
        if whole || (r < m && col < n) {
            let index = (r as usize * n as usize + col as usize) / 2;
            // SAFETY: `r < m` and `col + 1 < n` (`col` even, `n` even), and `c` holds at least
            // `m · n` elements from a 4-byte-aligned start (all checked at the kernel's entry),
            // so the pair is in bounds and aligned. No other thread writes it: within a block
            // the fragment layout gives each (warpgroup, warp, lane) its own rows and columns,
            // and a block's tiles are its own: its units `block_idx_x() / CLUSTER + j ·
            // grid_dim_x() / CLUSTER` of a 1-D grid (checked at entry) go through a bijection
            // (`grouped_unit`) and the block's cluster rank picks its tile of the unit. Nothing
            // reads C.
            unsafe { *pairs.add(index) = pack_bf16x2(low, high) };
        }
    };
    unroll::<32>(|i| {
        let col = col0 + 8 * i as u32;
        store(row, col, acc[4 * i], acc[4 * i + 1]);
        store(row + 8, col, acc[4 * i + 2], acc[4 * i + 3]);
    });
}

/// `c[i][j] = Σ_k a[i][k] · b[j][k]` in f64 from bf16 inputs (`a` `m x k`, `b` `n x k`), with
/// `Σ_k |a[i][k] · b[j][k]|` beside it (the scale of the f32 accumulation's rounding): the
/// tests' reference.
#[cfg(not(target_arch = "nvptx64"))]
pub fn reference_entry(a: &[bf16], b: &[bf16], k: usize, i: usize, j: usize) -> (f64, f64) {
    let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
    for kk in 0..k {
        let product = a[i * k + kk].to_f32() as f64 * b[j * k + kk].to_f32() as f64;
        exact += product;
        magnitude += product.abs();
    }
    (exact, magnitude)
}

/// True when `got` is within the GEMM's error bound of the f64 reference `(exact, magnitude)`:
/// `|got - exact| <= 2^-8 |exact| + 2^-16 magnitude` (bf16 output rounding plus f32
/// accumulation). NaN (an unwritten output) fails.
#[cfg(not(target_arch = "nvptx64"))]
pub fn within_bound(got: f32, (exact, magnitude): (f64, f64)) -> bool {
    let error = (got as f64 - exact).abs();
    !error.is_nan() && error <= exact.abs() / 256.0 + magnitude / 65536.0 + 1e-30
}
