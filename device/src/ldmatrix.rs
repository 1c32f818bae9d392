//! Warp-wide 8x8 matrix loads from and stores to shared memory (`ldmatrix`, sm_75;
//! `stmatrix`, sm_90), in the register layout of the `mma` fragments (`crate::mma`).
//!
//! `x4` moves four 8x8 matrices of 16-bit elements: lanes `8i..8i+7` give the row addresses
//! of matrix `i` (16 bytes each); afterwards register `i` of lane `l` holds row `l / 4`,
//! elements `2(l % 4)` and `+1` of matrix `i`. `.trans` transposes each matrix on the way.
//! Cost: one instruction per warp for 512 bytes (vs 4 `ld.shared.b32` per lane);
//! bank-conflict free when the 8 row addresses of a matrix fall in distinct 16-byte bank
//! groups (pad or swizzle rows).
//!
//! On the CPU executor (`crate::cpu`) each is a warp collective, as on the GPU: every lane
//! leaves its row address in a per-warp slot and waits in a ballot until all 32 lanes have
//! (fewer, when lanes have exited or the warp is partial, is an error naming the lanes that
//! came), then moves its own four registers with ordinary shared-memory loads or stores at the
//! places the layout above gives (seen by the race detector), and a `sync_warp` ends the call.

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: every lane passes its row address.
///
/// # Safety
/// All 32 lanes call it together; each `row` is a 16-byte aligned shared-window address of 16
/// readable bytes.
#[inline(always)]
#[track_caller]
pub unsafe fn load_x4(row: u32) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{a}, {b}, {c}, {d}}}, [{r}];", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, r = in(reg32) row, options(nostack, readonly))
        };
        [a, b, c, d]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::ldmatrix::matrix_x4(row, crate::cpu::ldmatrix::Op::Load)
}

/// As [`load_x4`], transposing each 8x8 matrix (`.trans`): loads B fragments of `mma` from a
/// row-major K x N tile.
///
/// # Safety
/// As for [`load_x4`].
#[inline(always)]
#[track_caller]
pub unsafe fn load_x4_trans(row: u32) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{a}, {b}, {c}, {d}}}, [{r}];", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, r = in(reg32) row, options(nostack, readonly))
        };
        [a, b, c, d]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::ldmatrix::matrix_x4(row, crate::cpu::ldmatrix::Op::LoadTrans)
}

/// `stmatrix.sync.aligned.m8n8.x4.shared.b16` (sm_90): the inverse of [`load_x4`].
/// Before the copy engine or `wgmma` reads what it wrote, each writing thread calls
/// `tma::fence_proxy_async_shared`, then a block barrier.
///
/// # Safety
/// As for [`load_x4`], with 16 writable bytes per row address, not accessed concurrently.
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
#[inline(always)]
#[track_caller]
pub unsafe fn store_x4(row: u32, value: [u32; 4]) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!("stmatrix.sync.aligned.m8n8.x4.shared.b16 [{r}], {{{a}, {b}, {c}, {d}}};", a = in(reg32) value[0], b = in(reg32) value[1], c = in(reg32) value[2], d = in(reg32) value[3], r = in(reg32) row, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::ldmatrix::matrix_x4(row, crate::cpu::ldmatrix::Op::Store(value));
}
