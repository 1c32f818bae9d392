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
//!   K step convert the 128 f32 accumulators per thread to bf16 and store them.
//!
//! Edges: the tensor maps describe A and B exactly, so the copy engine fills the parts of a
//! box past M, N or K with zeros (and still counts their bytes); the last K step adds zeros,
//! and the stores of a tile that crosses M or N are guarded. So any `M, N >= 1` and any
//! `K >= 1` with `K % 8 == 0` (TMA's 16-byte row stride) and `N` even (bf16 pairs are stored)
//! work; `ferrocuda_kernels::gemm` checks them, builds the maps and picks the kernel.
//!
//! The kernel is a `#[kernel]`: its launcher takes the maps as `DeviceTensorMap`s (whose
//! launches declare the memory behind them) and `C` as a device buffer. The kernel checks its
//! launch (block, grid, shared memory) and that `C` holds `M·N` elements before touching
//! anything, and returns without writing otherwise. What it cannot check is the maps' layout:
//! 2-D bf16, `[K, M]` and `[K, N]`, boxes [`BOX_A`] and [`BOX_B`], 128-byte swizzle (a map
//! with another box would make the copy engine write a stage of another size, past the stage's
//! shared memory). So the kernel is `unsafe` and so is its launcher (a safe launcher taking
//! any `DeviceTensorMap` would let safe code corrupt shared memory);
//! `ferrocuda_kernels::gemm::hopper_gemm_bf16` builds exactly those maps and is safe.

use ferrocuda_device::global::UncheckedSlice;
use ferrocuda_device::half::{bf16, pack_bf16x2};
use ferrocuda_device::kernel;
use ferrocuda_device::mbarrier::fence_init;
use ferrocuda_device::pipeline::Ring;
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, block_dim_y, block_dim_z, block_idx_x, grid_dim_x, grid_dim_y, grid_dim_z, thread_idx_x};
use ferrocuda_device::tma::{TensorMap, dynamic_shared_address};
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
const A_TILE: u32 = BM * BK * 2;
const B_TILE: u32 = BN * BK * 2;
const STAGE: u32 = A_TILE + B_TILE;
/// Dynamic shared memory per block: the stages, the ring's barriers and 1 KiB to align the
/// stages to 1024 bytes (the 128-byte swizzle's period).
pub const SHARED_BYTES: u32 = STAGES * STAGE + Ring::<STAGES>::BARRIER_BYTES + 1024;

/// Output tiles of an `m x n` result (partial tiles at the edges included).
pub const fn tiles(m: u32, n: u32) -> u32 {
    m.div_ceil(BM) * n.div_ceil(BN)
}

/// The ring of K-step stages (A and B tiles) between the producer and the consumers.
type Stages = Ring<STAGES>;

/// The GEMM (see the module docs): `c` (`m x n` bf16, row-major) `= a · bᵀ` with `a_map`
/// describing A (`m x k`) and `b_map` B (`n x k`). Launch: 384 threads, a 1-D grid of at most
/// [`tiles`]`(m, n)` blocks (one per SM is best), [`SHARED_BYTES`] of dynamic shared memory.
///
/// # Safety
/// `a_map` and `b_map` must be 2-D bf16 maps of `[k, m]` and `[k, n]` elements with boxes
/// [`BOX_A`] and [`BOX_B`] and the 128-byte swizzle (what `ferrocuda_kernels::gemm` builds):
/// the copy engine writes a box of the map's size into each stage, so another box would
/// overrun the stage's shared memory (the kernel cannot read the box from the opaque map).
/// Everything else (the launch, `c`'s length and alignment, the shape) the kernel checks.
#[kernel(launch_bounds(384, 1))]
pub unsafe fn gemm_bf16_tn(a_map: &TensorMap, b_map: &TensorMap, mut c: UncheckedSlice<bf16>, m: u32, n: u32, k: u32) {
    // The launch and `c` as the stores below need them; the same in every thread, so either
    // every thread returns here or none does (before the first barrier).
    let launch_ok = block_dim_x() == THREADS
        && block_dim_y() == 1
        && block_dim_z() == 1
        && grid_dim_y() == 1
        && grid_dim_z() == 1
        && dynamic_shared::<u32>().len() >= (SHARED_BYTES / 4) as usize;
    let c_ok = n.is_multiple_of(2) && (c.as_mut_ptr() as usize).is_multiple_of(4) && (m as u64) * (n as u64) <= c.len() as u64;
    if !launch_ok || !c_ok || k == 0 {
        return;
    }
    let (a_map, b_map) = (a_map as *const TensorMap, b_map as *const TensorMap);
    let tid = thread_idx_x();
    let base = (dynamic_shared_address() + 1023) & !1023;
    // SAFETY: the ring's barriers follow the stages, inside the dynamic shared memory (at
    // least `SHARED_BYTES`, checked above), used only by the ring.
    let ring = unsafe { Stages::at(base + STAGES * STAGE) };
    if tid == 0 {
        // One release per consumer warp.
        ring.init(8);
        fence_init();
    }
    sync_threads();
    let tiles = tiles(m, n);
    let tiles_m = m.div_ceil(BM);
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
            let mut tile = block_idx_x();
            while tile < tiles {
                let (tm, tn) = (tile % tiles_m, tile / tiles_m);
                for kb in 0..k_steps {
                    let full = ring.produce(step, STAGE);
                    let dst = base + Stages::slot(step) * STAGE;
                    // SAFETY: the maps as above, acquired by this thread, with the boxes and
                    // swizzle of the module docs (`BOX_A`, `BOX_B`: exactly `A_TILE` and
                    // `B_TILE` bytes, which `produce` announced); the stage is empty (`produce`
                    // waited for its release) and 1024-aligned; coordinates past the arrays
                    // are filled with zeros by the copy engine.
                    unsafe {
                        TensorMap::load_2d(a_map, dst, full, (kb * BK) as i32, (tm * BM) as i32);
                        TensorMap::load_2d(b_map, dst + A_TILE, full, (kb * BK) as i32, (tn * BN) as i32);
                    }
                    step += 1;
                }
                tile += grid_dim_x();
            }
        }
    } else {
        // SAFETY: the whole warpgroup executes it; 2 x 128 x 240 + 128 x 24 registers fit.
        unsafe { warpgroup::alloc_registers::<240>() };
        let consumer = tid / 128 - 1;
        let lane = tid % 32;
        let warp = (tid % 128) / 32;
        let mut step = 0u32;
        let mut tile = block_idx_x();
        while tile < tiles {
            let (tm, tn) = (tile % tiles_m, tile / tiles_m);
            // Not `[0.0f32; 128]`: rustc lowers that repeat expression to a store loop with a
            // run-time index, which keeps the array in local memory (docs/performance.md).
            // SAFETY: all-zero bits are 0.0 for every element.
            let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
            for kb in 0..k_steps {
                ring.consume(step);
                // SAFETY: the consumer warpgroup's 128 threads run this together (the branch is
                // on `tid / 128`); the stage is full (TMA-written, so visible to the async
                // proxy) and stays so until this warpgroup releases it, after the wait below.
                unsafe { issue_k_step(&mut acc, base + Stages::slot(step) * STAGE, consumer) };
                // This step's group may still run; the previous one is done, so its stage can
                // be refilled.
                // SAFETY: the consumer warpgroup's 128 threads run this together.
                unsafe { wgmma::wait::<1>() };
                fence_accumulators_128(&mut acc);
                if lane == 0 && kb > 0 {
                    ring.release(step - 1);
                }
                step += 1;
            }
            // SAFETY: the consumer warpgroup's 128 threads run this together.
            unsafe { wgmma::wait::<0>() };
            fence_accumulators_128(&mut acc);
            if lane == 0 {
                ring.release(step - 1);
            }
            let row = tm * BM + consumer * 64 + warp * 16 + lane / 4;
            let col0 = tn * BN + 2 * (lane % 4);
            let whole = tm * BM + BM <= m && tn * BN + BN <= n;
            store_fragment(&mut c, &acc, row, col0, m, n, whole);
            tile += grid_dim_x();
        }
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
            // and a block's tiles (`block_idx_x() + j · grid_dim_x()` of a 1-D grid, checked at
            // entry) are its own. Nothing reads C.
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
