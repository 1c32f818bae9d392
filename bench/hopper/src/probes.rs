//! Small kernels that pin what the device library's Hopper/Ampere data-movement functions and
//! the performance fixes compile to; `tests/ptx.rs` checks their PTX and `ptxas` figures
//! (no GPU needed). They are launchable too; `hopper-gemm` runs `probe_tma_rank_loads`,
//! `probe_wgmma_tile` and the data-movement probes on the GPU.

use ferrocuda_device::kernel;
use ferrocuda_device::thread::thread_idx_x;

// Outputs of the `#[kernel]` probes are raw pointers: valid in both the current kernel model
// and the new one (/work/coord/KERNEL-MODEL.md: `&mut [T]` parameters are going away).

/// Launch bounds through the macro: `.maxntid 256, 1, 1` and `.minnctapersm 2` in the PTX.
///
/// # Safety
/// `out` holds one `u32` per thread of the block.
#[kernel(launch_bounds(256, 2))]
pub unsafe fn probe_launch_bounds(out: *mut u32) {
    let i = thread_idx_x();
    // SAFETY: the kernel's contract.
    unsafe { *out.add(i as usize) = i };
}

/// `.reqntid 128, 1, 1` in the PTX.
///
/// # Safety
/// `out` holds one `u32` per thread of the block.
#[kernel(reqntid(128))]
pub unsafe fn probe_reqntid(out: *mut u32) {
    let i = thread_idx_x();
    // SAFETY: the kernel's contract.
    unsafe { *out.add(i as usize) = 2 * i };
}

#[cfg(target_arch = "nvptx64")]
mod device {
    use ferrocuda_device::thread::thread_idx_x;
    use ferrocuda_device::tma::dynamic_shared_address;
    use ferrocuda_device::unroll::unroll;
    use ferrocuda_device::{cp_async, vector, warpgroup};

    /// A 16-byte struct as in the trap (`dst[i] = src[i]` gave two 64-bit loads).
    #[repr(C, align(16))]
    #[derive(Clone, Copy)]
    pub struct Float4 {
        x: f32,
        y: f32,
        z: f32,
        w: f32,
    }

    /// One `ld.global.nc.v4.u32` + one `st.global.v4.u32` per thread.
    ///
    /// # Safety
    /// `dst`/`src` hold one `Float4` per thread.
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn probe_copy16(dst: *mut Float4, src: *const Float4) {
        let i = thread_idx_x() as usize;
        // SAFETY: the kernel's contract.
        unsafe { vector::copy16(dst.add(i), src.add(i)) };
    }

    /// The trap from issue 13: a plain copy of a 16-byte struct through slices (pinned by
    /// `tests/ptx.rs`, which records what LLVM emits for it).
    ///
    /// # Safety
    /// `dst`/`src` hold one `Float4` per thread.
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn probe_struct_copy(dst: *mut Float4, src: *const Float4, n: usize) {
        // SAFETY: the kernel's contract.
        let (dst, src) = unsafe { (core::slice::from_raw_parts_mut(dst, n), core::slice::from_raw_parts(src, n)) };
        let i = thread_idx_x() as usize;
        if i < n {
            dst[i] = src[i];
        }
    }

    /// `cp.async.cg` 16 bytes per thread into shared memory, commit, wait, read back.
    ///
    /// # Safety
    /// `src` holds 16 bytes per thread; `dst` one `u32` per thread; 16 bytes of dynamic
    /// shared memory per thread.
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn probe_cp_async(src: *const u8, dst: *mut u32) {
        let i = thread_idx_x();
        let slot = dynamic_shared_address() + 16 * i;
        // SAFETY: the kernel's contract; each thread uses its own 16 bytes.
        unsafe { cp_async::copy_16(slot, src.add(16 * i as usize)) };
        cp_async::commit();
        cp_async::wait::<0>();
        let v: u32;
        // SAFETY: this thread's slot, written by its own completed copy.
        unsafe { core::arch::asm!("ld.shared.b32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) slot, options(nostack, readonly)) };
        // SAFETY: the kernel's contract.
        unsafe { *dst.add(i as usize) = v };
    }

    /// See [`ldmatrix_body`](super::ldmatrix_body).
    ///
    /// # Safety
    /// As for `ldmatrix_body`.
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn probe_ldmatrix(out: *mut u32) {
        // SAFETY: the kernel's contract.
        unsafe { super::ldmatrix_body(out) }
    }

    /// A 32-element register array updated in a run-time loop through `unroll`: no local
    /// memory (pinned by `tests/ptx.rs`: 0 bytes stack frame).
    ///
    /// # Safety
    /// `out` holds 32 floats per thread; `elect` one `u32` per thread.
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn probe_unroll(out: *mut f32, elect: *mut u32, x: f32, steps: u32) {
        // SAFETY: zero bits are 0.0.
        let mut acc: [f32; 32] = unsafe { core::mem::zeroed() };
        for step in 0..steps {
            unroll::<32>(|i| acc[i] = acc[i] * x + (i as u32 + step) as f32);
        }
        let t = thread_idx_x() as usize;
        unroll::<32>(|i| {
            // SAFETY: the kernel's contract.
            unsafe { *out.add(32 * t + i) = acc[i] }
        });
        // SAFETY: the kernel's contract.
        unsafe { *elect.add(t) = warpgroup::elect_one() as u32 };
    }

    /// The trap pinned by `tests/ptx.rs`: `[0.0f32; 128]` is lowered to a store loop with a
    /// run-time index, which keeps the whole array in local memory.
    ///
    /// # Safety
    /// `out` holds 128 floats per thread.
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn probe_repeat_trap(out: *mut f32, x: f32, steps: u32) {
        let mut acc = [0.0f32; 128];
        for _ in 0..steps {
            unroll::<128>(|i| acc[i] = acc[i] * x + i as f32);
        }
        let t = thread_idx_x() as usize;
        unroll::<128>(|i| {
            // SAFETY: the kernel's contract.
            unsafe { *out.add(128 * t + i) = acc[i] }
        });
    }
}

/// Transposes 32x32 tiles (one thread per element of a 32x8 block, 4 rows each), through a
/// [`Matrix`](ferrocuda_device::matrix::Matrix) view: the `row < rows && col < cols` guard
/// proves the view's checks, so no bounds-check panic path remains (pinned by `tests/ptx.rs`).
///
/// # Safety
/// `output` holds `rows * cols` floats that only this launch accesses.
#[kernel]
pub unsafe fn probe_matrix_transpose(input: &[f32], output: *mut f32, rows: u32, cols: u32) {
    use ferrocuda_device::matrix::{Matrix, MatrixMut};
    use ferrocuda_device::thread::{block_idx_x, block_idx_y, thread_idx_y};
    // SAFETY: the kernel's contract (each thread writes distinct elements).
    let output = unsafe { core::slice::from_raw_parts_mut(output, rows as usize * cols as usize) };
    let (Some(src), Some(mut dst)) = (Matrix::new(input, rows, cols), MatrixMut::new(output, cols, rows)) else {
        return;
    };
    let col = block_idx_x() * 32 + thread_idx_x();
    for i in 0..4 {
        let row = block_idx_y() * 32 + thread_idx_y() + 8 * i;
        if row < rows && col < cols {
            dst.set(col, row, src.at(row, col));
        }
    }
}

/// The same transpose with slice indexing: `input[row * cols + col]` keeps its bounds check
/// (the trap; pinned by `tests/ptx.rs` so that a compiler that learns to remove it is noticed).
///
/// # Safety
/// `output` holds `rows * cols` floats that only this launch accesses.
#[kernel]
pub unsafe fn probe_slice_transpose(input: &[f32], output: *mut f32, rows: u32, cols: u32) {
    use ferrocuda_device::thread::{block_idx_x, block_idx_y, thread_idx_y};
    // SAFETY: the kernel's contract (each thread writes distinct elements).
    let output = unsafe { core::slice::from_raw_parts_mut(output, rows as usize * cols as usize) };
    let col = block_idx_x() * 32 + thread_idx_x();
    for i in 0..4 {
        let row = block_idx_y() * 32 + thread_idx_y() + 8 * i;
        if row < rows && col < cols {
            output[(col * rows + row) as usize] = input[(row * cols + col) as usize];
        }
    }
}

#[cfg(target_arch = "nvptx64")]
mod device_grid_dependency {
    use ferrocuda_device::grid_dependency;

    /// The programmatic-dependent-launch pair (PTX pinned by `tests/ptx.rs`). The TMA loads of
    /// ranks 1, 3, 4 and 5 it used to issue are now launched by `probe_tma_rank_loads`.
    ///
    /// # Safety
    /// `out` holds one `u32`; launched alone or as a programmatic dependent.
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn probe_grid_dependency(out: *mut u32, x: u32) {
        grid_dependency::wait_for_prerequisites();
        // SAFETY: the kernel's contract.
        unsafe { *out = x };
        grid_dependency::launch_dependents();
    }
}

/// `out_ss`, `out_rs` (64x64 f32, row-major) = A (64x16 bf16, row-major) · Bᵀ (B 64x16 bf16,
/// row-major), by one warpgroup: B (and, for the SS form, A) stored by the threads into shared
/// memory at the 128-byte-swizzled addresses a `k_major_128b` descriptor reads, then one
/// `wgmma` with A from shared memory (`out_ss`) and one with A from registers (`out_rs`).
/// Checks the descriptor/swizzle model independently of TMA (`tests/cpu_gemm.rs` on the CPU
/// executor, `hopper-gemm` on a GPU).
///
/// # Safety
/// 128 threads, 1 block, [`WGMMA_TILE_SHARED_BYTES`] of dynamic shared memory; `a`, `b` hold
/// 64x16 bf16 bits each, `out_ss`, `out_rs` 64x64 f32 each.
#[inline(always)]
pub unsafe fn wgmma_tile_body(a: *const u16, b: *const u16, out_ss: *mut f32, out_rs: *mut f32) {
    use ferrocuda_device::shared::SharedElement;
    use ferrocuda_device::sync::sync_threads;
    use ferrocuda_device::tma::{dynamic_shared_address, fence_proxy_async_shared};
    use ferrocuda_device::unroll::unroll;
    use ferrocuda_device::wgmma::{self, Descriptor};

    let t = thread_idx_x();
    let a_tile = (dynamic_shared_address() + 1023) & !1023;
    let b_tile = a_tile + 8192;
    // 64 rows x 8 pairs per operand: 4 pairs per thread each.
    for p in 0..4 {
        let index = t + 128 * p;
        let (row, k) = (index / 8, 2 * (index % 8));
        // SAFETY: inside the 64x16 inputs (the caller's contract) and the two 8 KiB tiles.
        unsafe {
            let pa = *a.add((row * 16 + k) as usize) as u32 | (*a.add((row * 16 + k + 1) as usize) as u32) << 16;
            let pb = *b.add((row * 16 + k) as usize) as u32 | (*b.add((row * 16 + k + 1) as usize) as u32) << 16;
            u32::store_shared(Descriptor::swizzled_128b_address(a_tile, row, k), pa);
            u32::store_shared(Descriptor::swizzled_128b_address(b_tile, row, k), pb);
        }
    }
    fence_proxy_async_shared();
    sync_threads();
    let (warp, lane) = (t / 32, t % 32);
    let row = 16 * warp + lane / 4;
    let k = 2 * (lane % 4);
    // SAFETY: inside A (the caller's contract).
    let pair = |r: u32, k: u32| unsafe { *a.add((r * 16 + k) as usize) as u32 | (*a.add((r * 16 + k + 1) as usize) as u32) << 16 };
    let fragment = [pair(row, k), pair(row + 8, k), pair(row, k + 8), pair(row + 8, k + 8)];
    // SAFETY: zero bits are 0.0.
    let mut ss: [f32; 32] = unsafe { core::mem::zeroed() };
    // SAFETY: zero bits are 0.0.
    let mut rs: [f32; 32] = unsafe { core::mem::zeroed() };
    // SAFETY (fence, the wgmmas, commit, wait): one whole warpgroup (the caller's contract: 128
    // threads, 1 block) runs this straight-line code together; the tiles were written and fenced.
    unsafe {
        wgmma::fence();
        wgmma::m64n64k16_bf16(&mut ss, Descriptor::k_major_128b(a_tile).0, Descriptor::k_major_128b(b_tile).0, false);
        wgmma::m64n64k16_bf16_rs(&mut rs, fragment, Descriptor::k_major_128b(b_tile).0, false);
        wgmma::commit();
        wgmma::wait::<0>();
    }
    wgmma::fence_accumulators_32(&mut ss);
    wgmma::fence_accumulators_32(&mut rs);
    unroll::<8>(|i| {
        let col = 8 * i as u32 + 2 * (lane % 4);
        for (half, r) in [(0, row), (1, row + 8)] {
            for j in 0..2 {
                let at = (r * 64 + col + j) as usize;
                // SAFETY: inside the 64x64 outputs.
                unsafe {
                    *out_ss.add(at) = ss[4 * i + 2 * half + j as usize];
                    *out_rs.add(at) = rs[4 * i + 2 * half + j as usize];
                }
            }
        }
    });
}

/// The body of `probe_ldmatrix`: `stmatrix` then `ldmatrix` (x4) through 512 bytes of shared
/// memory, at the same row addresses, so each lane gets its registers back:
/// `out[4 * lane + j]` is `lane + 32 * j` (run by `tests/cpu_gemm.rs` on the CPU executor,
/// `hopper-gemm` on a GPU).
///
/// # Safety
/// One warp of 32 threads, 512 bytes of dynamic shared memory, `out` holds 128 `u32`.
#[inline(always)]
pub unsafe fn ldmatrix_body(out: *mut u32) {
    use ferrocuda_device::ldmatrix;
    use ferrocuda_device::sync::sync_warp;
    use ferrocuda_device::tma::{dynamic_shared_address, fence_proxy_async_shared};
    use ferrocuda_device::warp::FULL_MASK;

    let lane = thread_idx_x();
    let row = dynamic_shared_address() + 16 * lane;
    let value = [lane, lane + 32, lane + 64, lane + 96];
    // SAFETY: one converged warp, row addresses inside the 512 bytes.
    let back = unsafe {
        ldmatrix::store_x4(row, value);
        fence_proxy_async_shared();
        sync_warp(FULL_MASK);
        ldmatrix::load_x4(row)
    };
    for (j, v) in back.into_iter().enumerate() {
        // SAFETY: the kernel's contract.
        unsafe { *out.add(4 * lane as usize + j) = v };
    }
}

/// Dynamic shared memory of `probe_wgmma_tile`: two 8 KiB tiles and 1 KiB alignment.
pub const WGMMA_TILE_SHARED_BYTES: u32 = 2 * 8192 + 1024;

#[cfg(target_arch = "nvptx64")]
mod device_wgmma {
    ferrocuda_device::launch_bounds!(probe_wgmma_tile, 128, 1);

    /// See [`wgmma_tile_body`](super::wgmma_tile_body).
    ///
    /// # Safety
    /// As for `wgmma_tile_body`.
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn probe_wgmma_tile(a: *const u16, b: *const u16, out_ss: *mut f32, out_rs: *mut f32) {
        // SAFETY: the kernel's contract.
        unsafe { super::wgmma_tile_body(a, b, out_ss, out_rs) }
    }
}

/// One box load of `probe_tma_rank_loads`: a packed row-major u16 array of `dims` (innermost
/// first), the box shape and the coordinates of the box's first element.
#[derive(Clone, Copy, Debug)]
pub struct RankLoad {
    /// Elements per dimension, innermost first.
    pub dims: &'static [u64],
    /// Box elements per dimension (innermost extent times 2 bytes a multiple of 16).
    pub box_dims: &'static [u32],
    /// Where the box starts, innermost first (every box lies inside its array).
    pub coords: &'static [i32],
}

impl RankLoad {
    /// Elements of the array.
    pub fn array_len(&self) -> usize {
        self.dims.iter().product::<u64>() as usize
    }

    /// Elements of the box.
    pub fn box_len(&self) -> usize {
        self.box_dims.iter().map(|&b| b as usize).product()
    }

    /// The linear index in the array of the box's element `e` (innermost first): in each
    /// dimension `d` it sits at `coords[d]` plus `e`'s index in `d`.
    pub fn box_element(&self, e: usize) -> usize {
        let (mut rest, mut linear, mut pitch) = (e, 0usize, 1usize);
        for d in 0..self.dims.len() {
            let index = self.coords[d] as usize + rest % self.box_dims[d] as usize;
            rest /= self.box_dims[d] as usize;
            assert!(index < self.dims[d] as usize, "the box leaves the array");
            linear += index * pitch;
            pitch *= self.dims[d] as usize;
        }
        linear
    }

    /// Whether the array's element at linear index `i` lies inside the box.
    pub fn contains(&self, i: usize) -> bool {
        let mut rest = i;
        (0..self.dims.len()).all(|d| {
            let index = rest % self.dims[d] as usize;
            rest /= self.dims[d] as usize;
            (self.coords[d] as usize..self.coords[d] as usize + self.box_dims[d] as usize).contains(&index)
        })
    }
}

/// The rank probes' source array `k` at linear index `i`: distinct within and across the
/// arrays (each has fewer than 4096 elements).
pub fn tma_rank_value(k: usize, i: usize) -> u16 {
    assert!(i < 1 << 12);
    ((k as u16 + 1) << 12) | i as u16
}

/// The loads of `probe_tma_rank_loads`, of ranks 1, 3, 4 and 5, each box at a nonzero
/// coordinate in at least one dimension.
pub const TMA_RANK_LOADS: [RankLoad; 4] = [
    RankLoad { dims: &[256], box_dims: &[64], coords: &[64] },
    RankLoad { dims: &[16, 8, 4], box_dims: &[16, 4, 2], coords: &[0, 3, 2] },
    RankLoad { dims: &[32, 4, 6, 3], box_dims: &[8, 2, 3, 2], coords: &[8, 1, 2, 1] },
    RankLoad { dims: &[16, 3, 4, 2, 5], box_dims: &[16, 2, 2, 2, 3], coords: &[0, 1, 2, 0, 2] },
];

const fn box_bytes(load: &RankLoad) -> u32 {
    let (mut bytes, mut d) = (2, 0);
    while d < load.box_dims.len() {
        bytes *= load.box_dims[d];
        d += 1;
    }
    bytes
}

/// Bytes of each box of [`TMA_RANK_LOADS`].
pub const TMA_RANK_BOX_BYTES: [u32; 4] =
    [box_bytes(&TMA_RANK_LOADS[0]), box_bytes(&TMA_RANK_LOADS[1]), box_bytes(&TMA_RANK_LOADS[2]), box_bytes(&TMA_RANK_LOADS[3])];
/// Bytes the four loads deliver: the barrier's expected transaction count, and the size of
/// the output (the boxes one after another, each in box order, innermost first).
pub const TMA_RANK_TOTAL_BYTES: u32 = TMA_RANK_BOX_BYTES[0] + TMA_RANK_BOX_BYTES[1] + TMA_RANK_BOX_BYTES[2] + TMA_RANK_BOX_BYTES[3];
/// Where each box lands in shared memory, from the 128-byte-aligned base (each 128-byte
/// aligned, as TMA destinations without swizzle must be), then the barrier's offset.
const TMA_RANK_SHARED_OFFSETS: [u32; 5] = {
    let mut offsets = [0u32; 5];
    let mut k = 0;
    while k < 4 {
        offsets[k + 1] = offsets[k] + TMA_RANK_BOX_BYTES[k].next_multiple_of(128);
        k += 1;
    }
    offsets
};
/// Dynamic shared memory of `probe_tma_rank_loads`: the boxes, the barrier, 128 bytes to align.
pub const TMA_RANK_SHARED_BYTES: u32 = TMA_RANK_SHARED_OFFSETS[4] + 8 + 128;

/// Loads one box of each of [`TMA_RANK_LOADS`] (`TensorMap::load_1d`, `load_3d`, `load_4d`,
/// `load_5d`) into dynamic shared memory, all completing on one barrier, then the block copies
/// the four boxes to `out` one after another ([`TMA_RANK_TOTAL_BYTES`]).
///
/// # Safety
/// `maps[k]` is a tensor map in global memory of load `k` of [`TMA_RANK_LOADS`] (u16 or
/// bf16, no swizzle) over a live array; `out` holds [`TMA_RANK_TOTAL_BYTES`]; one block of 128
/// threads, [`TMA_RANK_SHARED_BYTES`] of dynamic shared memory; run as every thread of it.
#[inline(always)]
pub unsafe fn tma_rank_loads_body(maps: [*const ferrocuda_device::tma::TensorMap; 4], out: *mut u32) {
    use ferrocuda_device::shared::SharedElement;

    let tid = thread_idx_x();
    // SAFETY: the caller's contract covers the loads' (the same maps, block and shared memory).
    let at = unsafe { load_rank_boxes(maps) };
    let mut out_word = 0;
    for (k, bytes) in TMA_RANK_BOX_BYTES.into_iter().enumerate() {
        let words = bytes / 4;
        let mut w = tid;
        while w < words {
            // SAFETY: inside box `k`, delivered (the barrier's phase completed); inside `out`,
            // which holds every box (the caller's contract).
            unsafe { *out.add((out_word + w) as usize) = u32::load_shared(at[k] + 4 * w) };
            w += 128;
        }
        out_word += words;
    }
}

/// Loads one box of each of [`TMA_RANK_LOADS`] as [`tma_rank_loads_body`] does, then thread 0
/// stores each box back with the TMA store of the same rank (`TensorMap::store_1d`,
/// `store_3d`, `store_4d`, `store_5d`) at the same coordinates of `stores[k]`, commits and
/// waits: each destination array then holds the source's values inside the box and is
/// untouched elsewhere.
///
/// # Safety
/// `loads[k]` as `maps[k]` of [`tma_rank_loads_body`]; `stores[k]` a tensor map in global
/// memory of the same dims, box and element size over another live array that nothing else
/// touches while the kernel runs; one block of 128 threads, [`TMA_RANK_SHARED_BYTES`] of
/// dynamic shared memory; run as every thread of it.
#[inline(always)]
pub unsafe fn tma_rank_stores_body(loads: [*const ferrocuda_device::tma::TensorMap; 4], stores: [*const ferrocuda_device::tma::TensorMap; 4]) {
    use ferrocuda_device::tma::{self, TensorMap};

    // SAFETY: the caller's contract covers the loads'.
    let at = unsafe { load_rank_boxes(loads) };
    if thread_idx_x() == 0 {
        let [l1, l3, l4, l5] = TMA_RANK_LOADS;
        let (c1, c3, c4, c5) = (l1.coords, l3.coords, l4.coords, l5.coords);
        // SAFETY: the destination maps are valid, of these ranks and boxes (the caller's
        // contract); each box is complete in shared memory (the barrier's phase completed)
        // and stays unchanged until the wait below.
        unsafe {
            for map in stores {
                TensorMap::acquire(map);
            }
            TensorMap::store_1d(stores[0], at[0], c1[0]);
            TensorMap::store_3d(stores[1], at[1], c3[0], c3[1], c3[2]);
            TensorMap::store_4d(stores[2], at[2], [c4[0], c4[1], c4[2], c4[3]]);
            TensorMap::store_5d(stores[3], at[3], [c5[0], c5[1], c5[2], c5[3], c5[4]]);
        }
        tma::store_commit();
        tma::store_wait::<0>();
    }
}

/// The common start of the rank probes: thread 0 loads one box of each of [`TMA_RANK_LOADS`]
/// through `maps` into its own 128-byte-aligned area of dynamic shared memory, all completing
/// on one barrier, and every thread waits for it. Returns the four areas' addresses.
///
/// # Safety
/// As `maps` and the launch of [`tma_rank_loads_body`]; run as every thread of the block.
#[inline(always)]
unsafe fn load_rank_boxes(maps: [*const ferrocuda_device::tma::TensorMap; 4]) -> [u32; 4] {
    use ferrocuda_device::mbarrier::{MBarrier, fence_init};
    use ferrocuda_device::sync::sync_threads;
    use ferrocuda_device::tma::{TensorMap, dynamic_shared_address};

    let tid = thread_idx_x();
    let base = (dynamic_shared_address() + 127) & !127;
    let at = |k: usize| base + TMA_RANK_SHARED_OFFSETS[k];
    // SAFETY: 8 bytes after the boxes, 8-byte aligned, inside the requested shared memory.
    let bar = unsafe { MBarrier::at(at(4)) };
    if tid == 0 {
        bar.init(1);
        fence_init();
    }
    sync_threads();
    if tid == 0 {
        let [l1, l3, l4, l5] = TMA_RANK_LOADS;
        let (c1, c3, c4, c5) = (l1.coords, l3.coords, l4.coords, l5.coords);
        // SAFETY: the maps are valid and of these ranks (the caller's contract); each box has
        // its own 128-byte-aligned area, read only after the barrier's phase completes.
        unsafe {
            for map in maps {
                TensorMap::acquire(map);
            }
            bar.arrive_expect_tx(TMA_RANK_TOTAL_BYTES);
            TensorMap::load_1d(maps[0], at(0), bar, c1[0]);
            TensorMap::load_3d(maps[1], at(1), bar, c3[0], c3[1], c3[2]);
            TensorMap::load_4d(maps[2], at(2), bar, [c4[0], c4[1], c4[2], c4[3]]);
            TensorMap::load_5d(maps[3], at(3), bar, [c5[0], c5[1], c5[2], c5[3], c5[4]]);
        }
    }
    bar.wait(0);
    [at(0), at(1), at(2), at(3)]
}

#[cfg(target_arch = "nvptx64")]
mod device_tma_rank_loads {
    use ferrocuda_device::tma::TensorMap;

    ferrocuda_device::launch_bounds!(probe_tma_rank_loads, 128, 1);

    /// See [`tma_rank_loads_body`](super::tma_rank_loads_body).
    ///
    /// # Safety
    /// As for `tma_rank_loads_body`, with `maps = [m1, m3, m4, m5]`.
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn probe_tma_rank_loads(
        m1: *const TensorMap,
        m3: *const TensorMap,
        m4: *const TensorMap,
        m5: *const TensorMap,
        out: *mut u32,
    ) {
        // SAFETY: the kernel's contract.
        unsafe { super::tma_rank_loads_body([m1, m3, m4, m5], out) }
    }

    ferrocuda_device::launch_bounds!(probe_tma_rank_stores, 128, 1);

    /// See [`tma_rank_stores_body`](super::tma_rank_stores_body).
    ///
    /// # Safety
    /// As for `tma_rank_stores_body`, with `loads = [l1, l3, l4, l5]`, `stores = [s1, s3, s4, s5]`.
    #[unsafe(no_mangle)]
    #[allow(clippy::too_many_arguments)] // one tensor map per rank, loaded and stored
    pub unsafe extern "ptx-kernel" fn probe_tma_rank_stores(
        l1: *const TensorMap,
        l3: *const TensorMap,
        l4: *const TensorMap,
        l5: *const TensorMap,
        s1: *const TensorMap,
        s3: *const TensorMap,
        s4: *const TensorMap,
        s5: *const TensorMap,
    ) {
        // SAFETY: the kernel's contract.
        unsafe { super::tma_rank_stores_body([l1, l3, l4, l5], [s1, s3, s4, s5]) }
    }
}

/// Rows of the bf16 array `probe_tma_store` writes into.
pub const TMA_STORE_ROWS: u32 = 80;
/// Columns of that array (a row is 192 bytes, a multiple of 16 as TMA needs).
pub const TMA_STORE_COLS: u32 = 96;
/// Rows and columns of the box it stores (128-byte rows: the 128-byte swizzle).
pub const TMA_STORE_BOX: u32 = 64;
/// Where the box goes, `(column, row)`: only its first 32 columns and 48 rows lie inside the
/// array, so the store must clip the rest.
pub const TMA_STORE_AT: (i32, i32) = (64, 32);
/// Dynamic shared memory of `probe_tma_store`: the box and 1 KiB to align it to 1024 bytes.
pub const TMA_STORE_SHARED_BYTES: u32 = TMA_STORE_BOX * TMA_STORE_BOX * 2 + 1024;

/// What `probe_tma_store` puts at `(row, col)` of its box: distinct for each element.
pub const fn tma_store_value(row: u32, col: u32) -> u16 {
    (0x4000 | (row * TMA_STORE_BOX + col)) as u16
}

/// The block writes a 64x64 box of [`tma_store_value`]s into shared memory at the 128-byte
/// swizzled addresses (`Descriptor::swizzled_128b_address`), then thread 0 stores it with one
/// TMA store (`TensorMap::store_2d`) at `(x, y)` of the map, commits and waits for it.
///
/// # Safety
/// `map` is a tensor map in global memory over a live 16-bit array, with a 64x64 box and the
/// 128-byte swizzle; nothing else touches the box's part of the array while the kernel runs;
/// one block of 128 threads, [`TMA_STORE_SHARED_BYTES`] of dynamic shared memory; run as every
/// thread of it.
#[inline(always)]
pub unsafe fn tma_store_body(map: *const ferrocuda_device::tma::TensorMap, x: i32, y: i32) {
    use ferrocuda_device::shared::SharedElement;
    use ferrocuda_device::sync::sync_threads;
    use ferrocuda_device::tma::{self, TensorMap, dynamic_shared_address, fence_proxy_async_shared};
    use ferrocuda_device::wgmma::Descriptor;

    let tid = thread_idx_x();
    let base = (dynamic_shared_address() + 1023) & !1023;
    let mut pair = tid;
    while pair < TMA_STORE_BOX * TMA_STORE_BOX / 2 {
        let (row, col) = (pair / (TMA_STORE_BOX / 2), 2 * (pair % (TMA_STORE_BOX / 2)));
        let word = tma_store_value(row, col) as u32 | (tma_store_value(row, col + 1) as u32) << 16;
        // SAFETY: inside the box (row < 64, col + 1 < 64), 4-byte aligned (col is even and the
        // swizzle moves whole 16-byte chunks), inside the requested shared memory.
        unsafe { u32::store_shared(Descriptor::swizzled_128b_address(base, row, col), word) };
        pair += 128;
    }
    // The box was written through the generic proxy; the TMA engine reads it through the async
    // proxy: each writer fences, then the barrier orders all writers before thread 0's store.
    fence_proxy_async_shared();
    sync_threads();
    if tid == 0 {
        // SAFETY: the map is valid (the caller's contract); the box at `base` is complete,
        // fenced and 1024-aligned, and stays unchanged until the wait below.
        unsafe {
            TensorMap::acquire(map);
            TensorMap::store_2d(map, base, x, y);
        }
        tma::store_commit();
        tma::store_wait::<0>();
    }
}

#[cfg(target_arch = "nvptx64")]
mod device_tma_store {
    use ferrocuda_device::tma::TensorMap;

    ferrocuda_device::launch_bounds!(probe_tma_store, 128, 1);

    /// See [`tma_store_body`](super::tma_store_body).
    ///
    /// # Safety
    /// As for `tma_store_body`.
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn probe_tma_store(map: *const TensorMap, x: i32, y: i32) {
        // SAFETY: the kernel's contract.
        unsafe { super::tma_store_body(map, x, y) }
    }
}
