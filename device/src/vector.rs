//! Vector loads and stores: one 8- or 16-byte access per thread (`ld.global.v2/.v4`,
//! `st.global.v4`, and `.nc`, the read-only data path), and a 16-byte copy that always
//! vectorises.
//!
//! Why: LLVM vectorises a copy of a 16-byte `#[repr(C, align(16))]` struct only sometimes (one
//! case seen: two 64-bit loads without `.nc`, 0.77x of a float4 copy; docs/performance.md).
//! These functions make the width explicit. Cost: one instruction each; a warp of 16-byte
//! accesses to consecutive addresses moves 512 bytes in 4 fully used 128-byte lines.
//!
//! On the host (the CPU executor) they are plain reads and writes after the GPU's alignment
//! check: an address that is not a multiple of the access's width (16 or 8 bytes) is refused
//! with a "misaligned global memory access" panic, as a GPU faults on it
//! (`CUDA_ERROR_MISALIGNED_ADDRESS`), although the Rust types (`[u32; 4]`) are only 4-byte
//! aligned.

/// The unit of [`load16`] and [`store16`]: one 128-bit integer, aligned to 16, so the access is
/// a single 16-byte load or store whose alignment is in its own type (`ld.v2.b64`/`st.v2.b64`,
/// the same `LDG.E.128`/`STG.E.128` as `.v4.b32`). Four 4-byte accesses joined by LLVM's
/// vectoriser needed the alignment proven, which it could not do in a loop whose pointer is an
/// induction variable (four `st.global.b32` inside a row loop).
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Word16(u128);

/// Checks at compile time that `T` moves as one 16-byte access.
const fn assert_16_bytes<T>() {
    assert!(
        core::mem::size_of::<T>() == 16 && core::mem::align_of::<T>() >= 16,
        "16-byte accesses move 16-byte types aligned to 16 (a #[repr(C, align(16))] struct, CUDA's float4/int4)"
    );
}

/// `*src` in one 16-byte load: CUDA's `float4 v = x[i]` (llm.c's `load128`), safe.
///
/// A plain `let v = x[i]` of a 16-byte struct is a 16-byte `memcpy` to LLVM, which it splits
/// into two 8-byte loads and on which it drops the read-only path (`.nc`); this reads the four
/// words instead, which LLVM's vectoriser joins into one access (`T`'s alignment, 16, is
/// asserted to it). What it becomes:
///
/// - on an element of a kernel's input slice (`x: &[T]`, read-only for the whole launch):
///   `ld.global.nc.v4.b32` (`LDG.E.128.CONSTANT`, as `__ldg` or a `const __restrict__` pointer);
/// - on any other reference (an element this thread wrote, shared memory): the plain weak
///   16-byte load of the reference's state space (`ld.v4`: `LDG.E.128` for global memory,
///   llm.c's `LDG.E.128`; `LDS.128` for shared).
///
/// Both are the default caching (L1 and L2); for the cache hints (`__ldcs`, ...) use
/// [`cache::load`](crate::cache::load). Safe for any reference: it is valid, aligned and not
/// written while borrowed.
#[inline(always)]
pub fn load16<T: bytemuck::Pod>(src: &T) -> T {
    const { assert_16_bytes::<T>() };
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: `src` is a valid, 16-byte aligned `T` of 16 bytes (asserted above), so it is
        // readable as one `Word16`; every bit pattern is a valid `T` (Pod).
        let word = unsafe { (src as *const T).cast::<Word16>().read() };
        bytemuck::cast(word.0)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    *src
}

/// `*dst = value` in one 16-byte store (`st.global.v4.b32`, `STG.E.128`, for global memory):
/// CUDA's `y[i] = v` of a `float4`, safe. A plain `*dst = value` of a 16-byte struct may become
/// two 8-byte stores (see [`load16`]).
#[inline(always)]
pub fn store16<T: bytemuck::Pod>(dst: &mut T, value: T) {
    const { assert_16_bytes::<T>() };
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: `dst` is a valid, exclusive, 16-byte aligned `T` of 16 bytes (asserted above).
        unsafe { (dst as *mut T).cast::<Word16>().write(Word16(bytemuck::cast(value))) };
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        *dst = value;
    }
}

/// Loads 16 bytes through the read-only (non-coherent) path (`ld.global.nc.v4.u32`).
///
/// # Safety
/// `src` is a 16-byte aligned global address of 16 readable bytes that no thread writes while
/// the kernel runs (the `.nc` path may return stale data otherwise).
#[inline(always)]
pub unsafe fn load_nc_v4(src: *const [u32; 4]) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!("ld.global.nc.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, p = in(reg64) src, options(nostack, readonly, pure))
        };
        [a, b, c, d]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::hooks::check_global_alignment(src as usize, 16, "ld.global.nc.v4.u32");
        // SAFETY: the caller's contract.
        unsafe { src.read() }
    }
}

/// Loads 16 bytes (`ld.global.v4.u32`), coherent with writes of other threads made visible by
/// the usual fences/barriers.
///
/// # Safety
/// `src` is a 16-byte aligned global address of 16 readable bytes.
#[inline(always)]
pub unsafe fn load_v4(src: *const [u32; 4]) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!("ld.global.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, p = in(reg64) src, options(nostack, readonly))
        };
        [a, b, c, d]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::hooks::check_global_alignment(src as usize, 16, "ld.global.v4.u32");
        // SAFETY: the caller's contract.
        unsafe { src.read() }
    }
}

/// Loads 8 bytes through the read-only path (`ld.global.nc.v2.u32`).
///
/// # Safety
/// As [`load_nc_v4`], for 8 bytes, 8-byte aligned.
#[inline(always)]
pub unsafe fn load_nc_v2(src: *const [u32; 2]) -> [u32; 2] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b): (u32, u32);
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!("ld.global.nc.v2.u32 {{{a}, {b}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, p = in(reg64) src, options(nostack, readonly, pure))
        };
        [a, b]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::hooks::check_global_alignment(src as usize, 8, "ld.global.nc.v2.u32");
        // SAFETY: the caller's contract.
        unsafe { src.read() }
    }
}

/// Stores 16 bytes (`st.global.v4.u32`).
///
/// # Safety
/// `dst` is a 16-byte aligned global address of 16 writable bytes that no other thread
/// accesses concurrently.
#[inline(always)]
pub unsafe fn store_v4(dst: *mut [u32; 4], value: [u32; 4]) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!("st.global.v4.u32 [{p}], {{{a}, {b}, {c}, {d}}};", a = in(reg32) value[0], b = in(reg32) value[1], c = in(reg32) value[2], d = in(reg32) value[3], p = in(reg64) dst, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::hooks::check_global_alignment(dst as usize, 16, "st.global.v4.u32");
        // SAFETY: the caller's contract.
        unsafe { dst.write(value) }
    }
}

/// Copies one 16-byte value with one `ld.global.nc.v4` and one `st.global.v4`, whatever its
/// type (`T` must be 16 bytes and 16-byte aligned; checked at compile time).
///
/// # Safety
/// `src` as for [`load_nc_v4`], `dst` as for [`store_v4`].
#[inline(always)]
pub unsafe fn copy16<T: Copy>(dst: *mut T, src: *const T) {
    const { assert!(core::mem::size_of::<T>() == 16 && core::mem::align_of::<T>() >= 16, "copy16 copies 16-byte, 16-byte aligned types") };
    // SAFETY: the caller's contract; the size and alignment are 16 (checked above).
    unsafe { store_v4(dst.cast(), load_nc_v4(src.cast())) }
}
