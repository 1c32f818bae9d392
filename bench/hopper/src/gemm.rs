//! The bf16 GEMM: `C (M x N, row-major bf16) = A (M x K, row-major) · Bᵀ` where B is N x K
//! row-major (both operands K-major: cuBLAS's "TN" case), f32 accumulation.
//!
//! Per block (384 threads, persistent: one block per SM walks the 128x256 output tiles):
//! - warpgroup 0 (producer) gives up registers (`setmaxnreg.dec 24`); one thread issues, per
//!   64-wide K step, two TMA loads (A 128x64, B 256x64, 128-byte swizzle) into one of
//!   [`STAGES`] shared-memory stages, signalling the stage's "full" mbarrier with 48 KiB;
//! - warpgroups 1 and 2 (consumers, `setmaxnreg.inc 240`) each own 64 rows of the tile: wait
//!   for "full", four `wgmma.m64n256k16` (K = 64), wait for them, arrive on the stage's
//!   "empty" mbarrier (one arrival per warp), and after the last K step convert the 128 f32
//!   accumulators per thread to bf16 and store them.
//!
//! Requirements (checked by the host launcher): `M % 128 == 0`, `N % 256 == 0`, `K % 64 == 0`.

/// Output tile rows per block.
pub const BM: u32 = 128;
/// Output tile columns per block.
pub const BN: u32 = 256;
/// K elements per pipeline stage.
pub const BK: u32 = 64;
/// Pipeline depth.
pub const STAGES: u32 = 4;
/// Threads per block: one producer and two consumer warpgroups.
pub const THREADS: u32 = 384;
const A_TILE: u32 = BM * BK * 2;
const B_TILE: u32 = BN * BK * 2;
const STAGE: u32 = A_TILE + B_TILE;
/// Dynamic shared memory per block: the stages, the barriers and 1 KiB to align to 1024.
pub const SHARED_BYTES: u32 = STAGES * STAGE + 2 * STAGES * 8 + 1024;
/// Rows and columns of the `tma_copy_tile` test's tile.
pub const COPY_TILE: u32 = 64;

pub use body::{gemm_body, gemm_cluster_body, tma_copy_body};

/// The kernel bodies, on both targets: the PTX entry points below call them on the GPU; on the
/// host the CPU executor runs them (`tests/cpu_gemm.rs`).
mod body {
    use super::*;
    use ferrocuda_device::half::pack_bf16x2;
    use ferrocuda_device::mbarrier::{MBarrier, fence_init};
    use ferrocuda_device::pipeline::Ring;

    /// The ring of K-step stages (A and B tiles) between the producer and the consumers.
    type Stages = Ring<STAGES>;
    use ferrocuda_device::shared::SharedElement;
    use ferrocuda_device::sync::sync_threads;
    use ferrocuda_device::thread::{block_idx_x, block_idx_y, grid_dim_x, thread_idx_x};
    use ferrocuda_device::tma::{TensorMap, dynamic_shared_address};
    use ferrocuda_device::warpgroup;
    use ferrocuda_device::wgmma::{self, Descriptor, fence_accumulators_128, m64n256k16_bf16};

    ferrocuda_device::launch_bounds!(gemm_bf16_tn, 384, 1);
    ferrocuda_device::launch_bounds!(gemm_bf16_tn_serial, 384, 1);
    ferrocuda_device::launch_bounds!(tma_copy_tile, 128, 0);
    ferrocuda_device::launch_bounds!(gemm_bf16_tn_cluster, 384, 1);

    /// Stores accumulator pair `i` (columns `8i + 2(lane%4)`, rows `row` and `row + 8`).
    macro_rules! store_pairs {
        ($c:ident, $acc:ident, $row:ident, $col0:ident, $n:ident; $($i:literal)*) => {$(
            {
                let col = $col0 + 8 * $i;
                // SAFETY: row < M and col + 1 < N (the tile lies inside C, the launcher checked
                // the shape); C holds M x N bf16, so the pair index is in bounds.
                unsafe {
                    *$c.add((($row * $n + col) / 2) as usize) = pack_bf16x2($acc[4 * $i], $acc[4 * $i + 1]);
                    *$c.add(((($row + 8) * $n + col) / 2) as usize) = pack_bf16x2($acc[4 * $i + 2], $acc[4 * $i + 3]);
                }
            }
        )*};
    }

    /// One K step of a consumer warpgroup: four `wgmma.m64n256k16` over the 64-wide K slice of
    /// the stage at shared address `stage` (A rows `64 * consumer ..+64`, all of B), between a
    /// `wgmma.fence` and a `commit`. Both GEMM bodies issue their K steps through it.
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
            for step in 0..4 {
                m64n256k16_bf16(acc, Descriptor::k_major_128b(a_tile + 32 * step).0, Descriptor::k_major_128b(b_tile + 32 * step).0, true);
            }
            wgmma::commit();
        }
    }

    /// The GEMM (see the module docs). `c` points at bf16 pairs.
    ///
    /// # Safety
    /// `a_map`/`b_map` are tensor maps in global memory (bf16, dims `[K, M]` / `[K, N]`, box
    /// `[64, 128]` / `[64, 256]`, 128-byte swizzle) of live buffers; `c` holds `M*N` bf16;
    /// the shape conditions hold; 384 threads, [`SHARED_BYTES`] of dynamic shared memory.
    #[cfg(target_arch = "nvptx64")]
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn gemm_bf16_tn(a_map: *const TensorMap, b_map: *const TensorMap, c: *mut u32, m: u32, n: u32, k: u32) {
        // SAFETY: the kernel's contract.
        unsafe { gemm_body::<true, true>(a_map, b_map, c, m, n, k) }
    }

    /// As `gemm_bf16_tn`, waiting for each K step's `wgmma`s before the next (no overlap of
    /// one step's tensor-core work with the next step's issue): the simpler variant, kept to
    /// measure what the overlap gives.
    ///
    /// # Safety
    /// As for `gemm_bf16_tn`.
    #[cfg(target_arch = "nvptx64")]
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn gemm_bf16_tn_serial(a_map: *const TensorMap, b_map: *const TensorMap, c: *mut u32, m: u32, n: u32, k: u32) {
        // SAFETY: the kernel's contract.
        unsafe { gemm_body::<false, true>(a_map, b_map, c, m, n, k) }
    }

    /// The kernel body; `OVERLAP`: keep one K step's `wgmma` group in flight while the next is
    /// issued (`wgmma.wait_group 1`), releasing each stage one step later.
    ///
    /// # Safety
    /// As for `gemm_bf16_tn`, run as every thread of the grid.
    #[inline(always)]
    pub unsafe fn gemm_body<const OVERLAP: bool, const ACQUIRE: bool>(a_map: *const TensorMap, b_map: *const TensorMap, c: *mut u32, m: u32, n: u32, k: u32) {
        let tid = thread_idx_x();
        let base = (dynamic_shared_address() + 1023) & !1023;
        // SAFETY: the ring's barriers follow the stages, inside the requested shared memory
        // (`SHARED_BYTES`), used only by the ring.
        let ring = unsafe { Stages::at(base + STAGES * STAGE) };
        if tid == 0 {
            // One release per consumer warp.
            ring.init(8);
            fence_init();
        }
        sync_threads();
        let tiles = (m / BM) * (n / BN);
        // `.max(1)` spares the `%` below a division-by-zero panic path (and its stack frame):
        // with no full row of tiles there are no tiles either.
        let tiles_m = (m / BM).max(1);
        let k_steps = k / BK;
        if tid / 128 == 0 {
            // SAFETY: the whole warpgroup executes it; the producer needs few registers.
            unsafe { warpgroup::dealloc_registers::<24>() };
            if tid == 0 {
                if ACQUIRE {
                    // SAFETY: the maps are valid (the kernel's contract).
                    unsafe {
                        TensorMap::acquire(a_map);
                        TensorMap::acquire(b_map);
                    }
                }
                let mut step = 0u32;
                let mut tile = block_idx_x();
                while tile < tiles {
                    let (tm, tn) = (tile % tiles_m, tile / tiles_m);
                    for kb in 0..k_steps {
                        let full = ring.produce(step, STAGE);
                        let dst = base + Stages::slot(step) * STAGE;
                        // SAFETY: the stage is empty (`produce` waited) and 1024-aligned; the
                        // coordinates lie inside the maps (shape checked by the launcher).
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
                    // proxy) and stays so until this warpgroup releases it below.
                    unsafe { issue_k_step(&mut acc, base + Stages::slot(step) * STAGE, consumer) };
                    if OVERLAP {
                        // This step's group may still run; the previous one is done, so its
                        // stage can be refilled.
                        // SAFETY: the consumer warpgroup's 128 threads run this code together (the branch is on `tid / 128`).
                        unsafe { wgmma::wait::<1>() };
                        fence_accumulators_128(&mut acc);
                        if lane == 0 && kb > 0 {
                            ring.release(step - 1);
                        }
                    } else {
                        // SAFETY: the consumer warpgroup's 128 threads run this code together (the branch is on `tid / 128`).
                        unsafe { wgmma::wait::<0>() };
                        fence_accumulators_128(&mut acc);
                        if lane == 0 {
                            ring.release(step);
                        }
                    }
                    step += 1;
                }
                if OVERLAP {
                    // SAFETY: the consumer warpgroup's 128 threads run this code together (the branch is on `tid / 128`).
                    unsafe { wgmma::wait::<0>() };
                    fence_accumulators_128(&mut acc);
                    if lane == 0 && k_steps > 0 {
                        ring.release(step - 1);
                    }
                }
                let row = tm * BM + consumer * 64 + warp * 16 + lane / 4;
                let col0 = tn * BN + 2 * (lane % 4);
                store_pairs!(c, acc, row, col0, n; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
                tile += grid_dim_x();
            }
        }
    }

    /// The cluster variant: launched in clusters of 2 blocks along x, which compute vertically
    /// adjacent tiles `(2p, n)` and `(2p + 1, n)` and share B: each block loads its own A tile
    /// and one half (128 rows) of the B tile, multicast into both blocks' shared memory, so the
    /// L2-to-SM traffic per K step drops from 48 to 32 KiB per block. Each stage's "empty"
    /// barrier then counts the consumer warps of both blocks (16): a consumer warp arrives on
    /// its own block's barrier and on its peer's (`mapa` + remote arrive). All threads meet at
    /// a cluster barrier before exiting, so no block leaves while its peer may still signal it.
    ///
    /// # Safety
    /// As for `gemm_bf16_tn`, except: `b_map` has the box `[64, 128]`; `M % 256 == 0`; launched
    /// with cluster dimensions (2, 1, 1) and an even grid.
    #[cfg(target_arch = "nvptx64")]
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn gemm_bf16_tn_cluster(a_map: *const TensorMap, b_map: *const TensorMap, c: *mut u32, m: u32, n: u32, k: u32) {
        // SAFETY: the kernel's contract.
        unsafe { gemm_cluster_body::<true>(a_map, b_map, c, m, n, k) }
    }

    /// The body of `gemm_bf16_tn_cluster`.
    ///
    /// # Safety
    /// As for `gemm_bf16_tn_cluster`, run as every thread of the grid.
    #[inline(always)]
    pub unsafe fn gemm_cluster_body<const ACQUIRE: bool>(a_map: *const TensorMap, b_map: *const TensorMap, c: *mut u32, m: u32, n: u32, k: u32) {
        use ferrocuda_device::cluster;
        let tid = thread_idx_x();
        let rank = cluster::block_rank();
        let peer = rank ^ 1;
        let base = (dynamic_shared_address() + 1023) & !1023;
        // SAFETY: the ring's barriers follow the stages, inside the requested shared memory,
        // used only by the ring (at the same offsets in both blocks of the cluster).
        let ring = unsafe { Stages::at(base + STAGES * STAGE) };
        if tid == 0 {
            // One release per consumer warp of both blocks.
            ring.init(16);
            fence_init();
        }
        // Both blocks' barriers exist before either block copies into or arrives on the other.
        cluster::sync();
        let pairs = (m / (2 * BM)) * (n / BN);
        let pairs_m = (m / (2 * BM)).max(1);
        let k_steps = k / BK;
        let (cluster_id, clusters) = (block_idx_x() / 2, grid_dim_x() / 2);
        if tid / 128 == 0 {
            // SAFETY: the whole warpgroup executes it.
            unsafe { warpgroup::dealloc_registers::<24>() };
            if tid == 0 {
                if ACQUIRE {
                    // SAFETY: the maps are valid (the kernel's contract).
                    unsafe {
                        TensorMap::acquire(a_map);
                        TensorMap::acquire(b_map);
                    }
                }
                let mut step = 0u32;
                let mut pair = cluster_id;
                while pair < pairs {
                    let (tm, tn) = (2 * (pair % pairs_m) + rank, pair / pairs_m);
                    for kb in 0..k_steps {
                        // Empty in both blocks: both blocks' consumers released this slot.
                        let full = ring.produce(step, STAGE);
                        let dst = base + Stages::slot(step) * STAGE;
                        // SAFETY: the stage is empty in both blocks, 1024-aligned; the
                        // coordinates lie inside the maps (shape checked by the launcher).
                        unsafe {
                            TensorMap::load_2d(a_map, dst, full, (kb * BK) as i32, (tm * BM) as i32);
                            TensorMap::load_2d_multicast(
                                b_map,
                                dst + A_TILE + rank * (B_TILE / 2),
                                full,
                                (kb * BK) as i32,
                                (tn * BN + rank * (BN / 2)) as i32,
                                0b11,
                            );
                        }
                        step += 1;
                    }
                    pair += clusters;
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
                // SAFETY: the peer is running: it cannot pass the final cluster barrier
                // before this block reaches it.
                unsafe { ring.empty(Stages::slot(step)).arrive_cluster(peer) };
            };
            let mut step = 0u32;
            let mut pair = cluster_id;
            while pair < pairs {
                let (tm, tn) = (2 * (pair % pairs_m) + rank, pair / pairs_m);
                // SAFETY: all-zero bits are 0.0 for every element.
                let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
                for kb in 0..k_steps {
                    ring.consume(step);
                    // SAFETY: the consumer warpgroup's 128 threads run this together (the branch is
                    // on `tid / 128`); the stage is full and stays so until released below.
                    unsafe { issue_k_step(&mut acc, base + Stages::slot(step) * STAGE, consumer) };
                    // SAFETY: the consumer warpgroup's 128 threads run this code together (the branch is on `tid / 128`).
                    unsafe { wgmma::wait::<1>() };
                    fence_accumulators_128(&mut acc);
                    if lane == 0 && kb > 0 {
                        release(step - 1);
                    }
                    step += 1;
                }
                // SAFETY: the consumer warpgroup's 128 threads run this code together (the branch is on `tid / 128`).
                unsafe { wgmma::wait::<0>() };
                fence_accumulators_128(&mut acc);
                if lane == 0 && k_steps > 0 {
                    release(step - 1);
                }
                let row = tm * BM + consumer * 64 + warp * 16 + lane / 4;
                let col0 = tn * BN + 2 * (lane % 4);
                store_pairs!(c, acc, row, col0, n; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
                pair += clusters;
            }
        }
        cluster::sync();
    }

    // Tensor maps in constant memory, the other place CUDA allows besides a grid-constant
    // parameter and global memory: written by the host (`cuModuleGetGlobal` + a copy) before
    // the launch, read through their generic address; no proxy fence needed.
    #[cfg(target_arch = "nvptx64")]
    core::arch::global_asm!(
        ".visible .const .align 64 .b8 hopper_const_map_a[128];",
        ".visible .const .align 64 .b8 hopper_const_map_b[128];",
        ".visible .const .align 64 .b8 hopper_const_map_b_half[128];"
    );

    /// The generic addresses of the constant-memory tensor maps (A, B, B with half-height boxes).
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub fn const_maps() -> (*const TensorMap, *const TensorMap, *const TensorMap) {
        let (a, b, h): (u64, u64, u64);
        // SAFETY: address arithmetic on module symbols.
        unsafe {
            core::arch::asm!(
                "mov.u64 {a}, hopper_const_map_a;", "cvta.const.u64 {a}, {a};",
                "mov.u64 {b}, hopper_const_map_b;", "cvta.const.u64 {b}, {b};",
                "mov.u64 {h}, hopper_const_map_b_half;", "cvta.const.u64 {h}, {h};",
                a = out(reg64) a, b = out(reg64) b, h = out(reg64) h, options(pure, nomem, nostack)
            )
        };
        (a as *const TensorMap, b as *const TensorMap, h as *const TensorMap)
    }

    ferrocuda_device::launch_bounds!(gemm_bf16_tn_const, 384, 1);
    ferrocuda_device::launch_bounds!(gemm_bf16_tn_cluster_const, 384, 1);

    /// `gemm_bf16_tn` with its tensor maps read from constant memory (`hopper_const_map_a`,
    /// `hopper_const_map_b`, written by the host before the launch); the pointer parameters
    /// are ignored.
    ///
    /// # Safety
    /// As for `gemm_bf16_tn`, with the maps in the constant symbols.
    #[cfg(target_arch = "nvptx64")]
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn gemm_bf16_tn_const(_a: *const TensorMap, _b: *const TensorMap, c: *mut u32, m: u32, n: u32, k: u32) {
        let (a_map, b_map, _) = const_maps();
        // SAFETY: the kernel's contract.
        unsafe { gemm_body::<true, false>(a_map, b_map, c, m, n, k) }
    }

    /// `gemm_bf16_tn_cluster` with its tensor maps in constant memory (B's with the half box).
    ///
    /// # Safety
    /// As for `gemm_bf16_tn_cluster`, with the maps in the constant symbols.
    #[cfg(target_arch = "nvptx64")]
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn gemm_bf16_tn_cluster_const(_a: *const TensorMap, _b: *const TensorMap, c: *mut u32, m: u32, n: u32, k: u32) {
        let (a_map, _, b_half) = const_maps();
        // SAFETY: the kernel's contract.
        unsafe { gemm_cluster_body::<false>(a_map, b_half, c, m, n, k) }
    }

    /// Diagnostics of the TMA path with bounded waits (the kernel always finishes): mode 0: an
    /// mbarrier with one plain arrival; 1: a 64x64 TMA load with the map at `map` (global
    /// memory) after `fence.proxy.tensormap` `.gpu`; 2: the same with `.sys`; 3: the map in
    /// constant memory (`hopper_const_map_a`), no fence; 4: a 1-D bulk copy of 8 KiB from `src`
    /// (no tensor map). `diag[0]` = 1 when the wait succeeded, `diag[1]` = the barrier word,
    /// `diag[2..18]` = the map as this kernel reads it, `diag[18]` = tries used.
    ///
    /// # Safety
    /// `map` a valid 2-D bf16 map with a 64x64 box (modes 1, 2; mode 3: the constant one),
    /// `src` 8 KiB (mode 4); `out` 2048 `u32`; `diag` 19 `u64`; 128 threads, 10 KiB dynamic
    /// shared memory.
    #[cfg(target_arch = "nvptx64")]
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn probe_tma_diag(map: *const TensorMap, src: *const u8, out: *mut u32, diag: *mut u64, mode: u32) {
        let tid = thread_idx_x();
        let base = (dynamic_shared_address() + 1023) & !1023;
        // SAFETY: 8 bytes after the 8 KiB tile, inside the requested shared memory.
        let bar = unsafe { MBarrier::at(base + 8192) };
        if tid == 0 {
            bar.init(1);
            fence_init();
        }
        sync_threads();
        let map = if mode == 3 { const_maps().0 } else { map };
        if tid == 0 {
            // SAFETY: per mode, the kernel's contract.
            unsafe {
                match mode {
                    0 => bar.arrive(),
                    1 | 3 => {
                        if mode == 1 {
                            TensorMap::acquire(map);
                        }
                        bar.arrive_expect_tx(8192);
                        TensorMap::load_2d(map, base, bar, 0, 0);
                    }
                    2 => {
                        core::arch::asm!("fence.proxy.tensormap::generic.acquire.sys [{m}], 128;", m = in(reg64) map, options(nostack));
                        bar.arrive_expect_tx(8192);
                        TensorMap::load_2d(map, base, bar, 0, 0);
                    }
                    _ => {
                        bar.arrive_expect_tx(8192);
                        core::arch::asm!("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], 8192, [{b}];", d = in(reg32) base, s = in(reg64) src, b = in(reg32) bar.address(), options(nostack));
                    }
                }
            }
        }
        let mut done = false;
        let mut tries = 0u64;
        while tries < (1 << 24) {
            tries += 1;
            if bar.try_wait(0) {
                done = true;
                break;
            }
        }
        if tid == 0 {
            let word: u64;
            // SAFETY: the barrier's 8 bytes.
            unsafe { core::arch::asm!("ld.shared.b64 {w}, [{a}];", w = out(reg64) word, a = in(reg32) bar.address(), options(nostack, readonly)) };
            // SAFETY: `diag` holds 19 words (the kernel's contract); the map is readable.
            unsafe {
                *diag = done as u64;
                *diag.add(1) = word;
                for i in 0..16 {
                    *diag.add(2 + i) = if mode == 4 { 0 } else { *(map as *const u64).add(i) };
                }
                *diag.add(18) = tries;
            }
        }
        if done {
            let mut i = tid;
            while i < 2048 {
                // SAFETY: inside the tile just loaded.
                let v = unsafe { u32::load_shared(base + 4 * i) };
                // SAFETY: `out` holds 2048 words.
                unsafe { *out.add(i as usize) = v };
                i += 128;
            }
        }
    }

    /// The tensor-map test: block `(bx, by)` loads the 64x64 bf16 tile at `(64·bx, 64·by)` of
    /// the 2-D map (no swizzle, box 64x64) into shared memory with one TMA load completing on
    /// an mbarrier, then all threads copy it to the same place in `out` (row length `width`).
    ///
    /// # Safety
    /// `map` is a tensor map in global memory as described; `out` holds the whole array;
    /// 128 threads, 8 KiB + 1 KiB of dynamic shared memory.
    #[cfg(target_arch = "nvptx64")]
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn tma_copy_tile(map: *const TensorMap, out: *mut u32, width: u32) {
        // SAFETY: the kernel's contract.
        unsafe { tma_copy_body(map, out, width) }
    }

    /// The body of `tma_copy_tile`.
    ///
    /// # Safety
    /// As for `tma_copy_tile`, run as every thread of the grid.
    #[inline(always)]
    pub unsafe fn tma_copy_body(map: *const TensorMap, out: *mut u32, width: u32) {
        let tid = thread_idx_x();
        let base = (dynamic_shared_address() + 1023) & !1023;
        let tile_bytes = COPY_TILE * COPY_TILE * 2;
        // SAFETY: 8 bytes after the tile, inside the requested shared memory.
        let bar = unsafe { MBarrier::at(base + tile_bytes) };
        if tid == 0 {
            bar.init(1);
            fence_init();
        }
        sync_threads();
        if tid == 0 {
            // SAFETY: the map is valid (contract); the tile area is free and 1024-aligned.
            unsafe {
                TensorMap::acquire(map);
                bar.arrive_expect_tx(tile_bytes);
                TensorMap::load_2d(map, base, bar, (block_idx_x() * COPY_TILE) as i32, (block_idx_y() * COPY_TILE) as i32);
            }
        }
        bar.wait(0);
        let mut i = tid;
        while i < COPY_TILE * COPY_TILE / 2 {
            let (r, c2) = (i / (COPY_TILE / 2), i % (COPY_TILE / 2));
            // SAFETY: inside the tile just loaded (the barrier's phase completed).
            let v = unsafe { u32::load_shared(base + 4 * i) };
            let row = block_idx_y() * COPY_TILE + r;
            let col2 = block_idx_x() * (COPY_TILE / 2) + c2;
            // SAFETY: inside `out` (grid covers the array exactly, the caller's contract).
            unsafe { *out.add((row * (width / 2) + col2) as usize) = v };
            i += 128;
        }
    }
}
