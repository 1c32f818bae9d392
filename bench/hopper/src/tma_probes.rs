//! The tensor-map probes of `hopper-gemm`: `probe_tma_diag` (which ways of handing a map to a
//! kernel work: global memory with each proxy fence, constant memory, a plain bulk copy) and
//! `tma_copy_tile` (a TMA round trip through shared memory, the test of the tensor-map path).
//! The GEMM itself is `ferrocuda_kernels_hopper::gemm` (the library's kernel), which
//! `hopper-gemm` benchmarks through `ferrocuda_kernels::gemm::hopper_gemm_bf16`.

/// Rows and columns of the `tma_copy_tile` test's tile.
pub const COPY_TILE: u32 = 64;

pub use body::tma_copy_body;

/// The kernel bodies, on both targets: the PTX entry points below call them on the GPU; on the
/// host the CPU executor runs them (`tests/cpu_gemm.rs`).
mod body {
    use super::*;
    use ferrocuda_device::mbarrier::{MBarrier, fence_init};
    use ferrocuda_device::shared::SharedElement;
    use ferrocuda_device::sync::sync_threads;
    use ferrocuda_device::thread::{block_idx_x, block_idx_y, thread_idx_x};
    use ferrocuda_device::tma::{TensorMap, dynamic_shared_address};

    ferrocuda_device::launch_bounds!(tma_copy_tile, 128, 0);

    // Tensor maps in constant memory, the other place CUDA allows besides a grid-constant
    // parameter and global memory: written by the host (`cuModuleGetGlobal` + a copy) before
    // the launch, read through their generic address; no proxy fence needed.
    #[cfg(target_arch = "nvptx64")]
    core::arch::global_asm!(".visible .const .align 64 .b8 hopper_const_map_a[128];");

    /// The generic address of the constant-memory tensor map `hopper_const_map_a`.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub fn const_map() -> *const TensorMap {
        let a: u64;
        // SAFETY: address arithmetic on a module symbol.
        unsafe { core::arch::asm!("mov.u64 {a}, hopper_const_map_a;", "cvta.const.u64 {a}, {a};", a = out(reg64) a, options(pure, nomem, nostack)) };
        a as *const TensorMap
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
        let map = if mode == 3 { const_map() } else { map };
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
