//! 8- and 16-byte shared-memory accesses: CUDA's `reinterpret_cast<float4*>(tile)[i]` on a
//! `__shared__ __align__(16)` array, as methods of [`SharedArray`] and [`SharedSlice`].
//!
//! `tile.get_x4(i)` reads elements `4i .. 4i+4` with one `ld.shared.v4.b32` (one `LDS.128`),
//! `tile.set_x4(i, v)` writes them with one `st.shared.v4.b32`; `get_x2`/`set_x2` move two
//! elements (8 bytes of a 4-byte type, 16 bytes of an 8-byte type). The index counts vectors,
//! as a `float4*` does, so the access is aligned by construction:
//!
//! - every [`shared_array!`](crate::shared_array) is declared `.align 16` (CUDA's
//!   `__align__(16)`), so `base + 16·i` is 16-byte aligned and the array's methods check only
//!   the bounds, like slice indexing (the `_unchecked` forms check nothing);
//! - a [`SharedSlice`] starts 16-byte aligned from [`dynamic_shared`],
//!   but [`SharedSlice::split_at`] may cut it anywhere, so its vector methods also check that
//!   the slice's start is aligned (one `and` on a loop-invariant value, hoisted out of loops).
//!
//! Why it matters: a warp's 32 `LDS.128` move 512 bytes in 4 shared-memory wavefronts, the
//! same as 128 `LDS.32` would in 4, with a quarter of the instructions; the layernorm port of
//! issue 23 was 13-19% slower until its shared reads were 16 bytes wide.
//!
//! A kernel whose dynamic shared memory holds several arrays of 16-byte vectors (llm.c's
//! `float* dbias_shared = shared; float* dweight_shared = shared + rounded_C; ..` read and
//! written as `f128`) takes them as [`SharedSliceX4`]s instead: [`dynamic_shared_x4`] (or
//! [`SharedSlice::to_x4`], which checks the start's alignment once) gives the memory as
//! vectors, [`SharedSliceX4::split_at`] and [`SharedSliceX4::carve`] cut it at whole vectors,
//! so every part is 16-byte aligned by construction and its accesses check only the index (one
//! compare, which folds into the loop's own test when the loop runs to the region's
//! [`len`](SharedSliceX4::len): `for k in strided_range(lane, tmp.len(), 32) { tmp.get(k) }`
//! has no check left and unrolls as nvcc's loop over a raw pointer).
//!
//! The elements are those of [`SharedElement`]: [`SharedX4`] (4-byte types) for `x4`,
//! [`SharedX2`] (all) for `x2`. On the CPU executor each access is one bounds-, alignment- and
//! race-checked access of the block's arena, 16 (or 8) bytes wide.

use core::marker::PhantomData;

use crate::shared::{SharedArray, SharedElement, SharedSlice, dynamic_shared};

/// A value aligned to 16 bytes, so that the CPU executor's access checks 16-byte alignment.
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Align16<T>(T);

/// A value aligned to 8 bytes (the CPU executor's 8-byte accesses of 4-byte elements).
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Align8<T>(T);

/// Element types with 16-byte `x4` accesses: the 4-byte [`SharedElement`]s (`u32`, `i32`,
/// `f32`).
pub trait SharedX4: SharedElement {
    #[doc(hidden)]
    /// # Safety
    /// `address` is a 16-byte aligned shared-window address of 16 bytes of the array.
    unsafe fn load_x4(address: u32) -> [Self; 4];
    #[doc(hidden)]
    /// # Safety
    /// As for `load_x4`.
    unsafe fn store_x4(address: u32, value: [Self; 4]);
}

/// Element types with `x2` accesses (8 bytes for 4-byte types, 16 bytes for 8-byte ones):
/// every [`SharedElement`].
pub trait SharedX2: SharedElement {
    #[doc(hidden)]
    /// # Safety
    /// `address` is a shared-window address of `2 * size_of::<Self>()` bytes of the array,
    /// aligned to that size.
    unsafe fn load_x2(address: u32) -> [Self; 2];
    #[doc(hidden)]
    /// # Safety
    /// As for `load_x2`.
    unsafe fn store_x2(address: u32, value: [Self; 2]);
}

macro_rules! x4_b32 {
    ($($t:ty: $to:expr, $from:expr;)*) => {$(
        impl SharedX4 for $t {
            #[inline(always)]
            unsafe fn load_x4(address: u32) -> [Self; 4] {
                #[cfg(target_arch = "nvptx64")]
                {
                    let from: fn(u32) -> $t = $from;
                    let (a, b, c, d): (u32, u32, u32, u32);
                    // SAFETY: the caller passes an in-bounds, 16-byte aligned shared address.
                    unsafe {
                        core::arch::asm!("ld.shared.v4.b32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
                            p = in(reg32) address, options(nostack, readonly, preserves_flags));
                    }
                    [from(a), from(b), from(c), from(d)]
                }
                #[cfg(not(target_arch = "nvptx64"))]
                // SAFETY: every bit pattern is a valid `$t`; the hook checks bounds and alignment.
                unsafe { crate::cpu::hooks::shared_load::<Align16<[$t; 4]>>(address).0 }
            }

            #[inline(always)]
            unsafe fn store_x4(address: u32, value: [Self; 4]) {
                #[cfg(target_arch = "nvptx64")]
                {
                    let to: fn($t) -> u32 = $to;
                    // SAFETY: as in `load_x4`.
                    unsafe {
                        core::arch::asm!("st.shared.v4.b32 [{p}], {{{a}, {b}, {c}, {d}}};", a = in(reg32) to(value[0]), b = in(reg32) to(value[1]),
                            c = in(reg32) to(value[2]), d = in(reg32) to(value[3]), p = in(reg32) address, options(nostack, preserves_flags));
                    }
                }
                #[cfg(not(target_arch = "nvptx64"))]
                // SAFETY: as in `load_x4`.
                unsafe { crate::cpu::hooks::shared_store::<Align16<[$t; 4]>>(address, Align16(value)) }
            }
        }

        impl SharedX2 for $t {
            #[inline(always)]
            unsafe fn load_x2(address: u32) -> [Self; 2] {
                #[cfg(target_arch = "nvptx64")]
                {
                    let from: fn(u32) -> $t = $from;
                    let (a, b): (u32, u32);
                    // SAFETY: the caller passes an in-bounds, 8-byte aligned shared address.
                    unsafe {
                        core::arch::asm!("ld.shared.v2.b32 {{{a}, {b}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, p = in(reg32) address,
                            options(nostack, readonly, preserves_flags));
                    }
                    [from(a), from(b)]
                }
                #[cfg(not(target_arch = "nvptx64"))]
                // SAFETY: as in `load_x4`.
                unsafe { crate::cpu::hooks::shared_load::<Align8<[$t; 2]>>(address).0 }
            }

            #[inline(always)]
            unsafe fn store_x2(address: u32, value: [Self; 2]) {
                #[cfg(target_arch = "nvptx64")]
                {
                    let to: fn($t) -> u32 = $to;
                    // SAFETY: as in `load_x2`.
                    unsafe {
                        core::arch::asm!("st.shared.v2.b32 [{p}], {{{a}, {b}}};", a = in(reg32) to(value[0]), b = in(reg32) to(value[1]), p = in(reg32) address,
                            options(nostack, preserves_flags));
                    }
                }
                #[cfg(not(target_arch = "nvptx64"))]
                // SAFETY: as in `load_x4`.
                unsafe { crate::cpu::hooks::shared_store::<Align8<[$t; 2]>>(address, Align8(value)) }
            }
        }
    )*};
}

x4_b32! {
    u32: |v| v, |b| b;
    i32: |v| v as u32, |b| b as i32;
    f32: f32::to_bits, f32::from_bits;
}

macro_rules! x2_b64 {
    ($($t:ty: $to:expr, $from:expr;)*) => {$(
        impl SharedX2 for $t {
            #[inline(always)]
            unsafe fn load_x2(address: u32) -> [Self; 2] {
                #[cfg(target_arch = "nvptx64")]
                {
                    let from: fn(u64) -> $t = $from;
                    let (a, b): (u64, u64);
                    // SAFETY: the caller passes an in-bounds, 16-byte aligned shared address.
                    unsafe {
                        core::arch::asm!("ld.shared.v2.b64 {{{a}, {b}}}, [{p}];", a = out(reg64) a, b = out(reg64) b, p = in(reg32) address,
                            options(nostack, readonly, preserves_flags));
                    }
                    [from(a), from(b)]
                }
                #[cfg(not(target_arch = "nvptx64"))]
                // SAFETY: every bit pattern is a valid `$t`; the hook checks bounds and alignment.
                unsafe { crate::cpu::hooks::shared_load::<Align16<[$t; 2]>>(address).0 }
            }

            #[inline(always)]
            unsafe fn store_x2(address: u32, value: [Self; 2]) {
                #[cfg(target_arch = "nvptx64")]
                {
                    let to: fn($t) -> u64 = $to;
                    // SAFETY: as in `load_x2`.
                    unsafe {
                        core::arch::asm!("st.shared.v2.b64 [{p}], {{{a}, {b}}};", a = in(reg64) to(value[0]), b = in(reg64) to(value[1]), p = in(reg32) address,
                            options(nostack, preserves_flags));
                    }
                }
                #[cfg(not(target_arch = "nvptx64"))]
                // SAFETY: as in `load_x2`.
                unsafe { crate::cpu::hooks::shared_store::<Align16<[$t; 2]>>(address, Align16(value)) }
            }
        }
    )*};
}

x2_b64! {
    u64: |v| v, |b| b;
    i64: |v| v as u64, |b| b as i64;
    f64: f64::to_bits, f64::from_bits;
}

#[cold]
#[track_caller]
fn vector_out_of_bounds(index: usize, width: usize, len: usize) -> ! {
    panic!("shared memory vector index out of bounds: elements {}..{} of {len}", index * width, index * width + width)
}

#[cold]
#[track_caller]
fn misaligned_slice(address: u32, bytes: usize) -> ! {
    panic!("{bytes}-byte vector access of a shared slice that starts at {address:#x}, not {bytes}-byte aligned: split it at a multiple of the vector width")
}

/// The vector methods of [`SharedArray`] and [`SharedSlice`]; `$check_base` says whether the
/// start must be checked for alignment (for a slice cut by `split_at`).
macro_rules! vector_methods {
    ($check_base:expr) => {
        /// Elements `4·index .. 4·index + 4` with one 16-byte load (`ld.shared.v4`, `LDS.128`):
        /// CUDA's `reinterpret_cast<float4*>(tile)[index]`.
        ///
        /// # Panics
        /// When `4·index + 4 > len`, like slice indexing (and, for a [`SharedSlice`], when its
        /// start is not 16-byte aligned).
        #[inline(always)]
        #[track_caller]
        pub fn get_x4(&self, index: usize) -> [T; 4]
        where
            T: SharedX4,
        {
            self.check_vector(index, 4);
            // SAFETY: in bounds (checked above) and 16-byte aligned (see the module docs).
            unsafe { T::load_x4(self.shared_address() + (index * 16) as u32) }
        }

        /// Writes elements `4·index .. 4·index + 4` with one 16-byte store (`st.shared.v4`,
        /// `STS.128`).
        ///
        /// # Panics
        /// As [`get_x4`](Self::get_x4).
        #[inline(always)]
        #[track_caller]
        pub fn set_x4(&self, index: usize, value: [T; 4])
        where
            T: SharedX4,
        {
            self.check_vector(index, 4);
            // SAFETY: as in `get_x4`.
            unsafe { T::store_x4(self.shared_address() + (index * 16) as u32, value) }
        }

        /// Elements `2·index .. 2·index + 2` with one load of twice the element size
        /// (`ld.shared.v2`).
        ///
        /// # Panics
        /// As [`get_x4`](Self::get_x4), for pairs.
        #[inline(always)]
        #[track_caller]
        pub fn get_x2(&self, index: usize) -> [T; 2]
        where
            T: SharedX2,
        {
            self.check_vector(index, 2);
            // SAFETY: in bounds, and aligned to the pair's size (at most 16).
            unsafe { T::load_x2(self.shared_address() + (index * 2 * core::mem::size_of::<T>()) as u32) }
        }

        /// Writes elements `2·index .. 2·index + 2` with one store (`st.shared.v2`).
        ///
        /// # Panics
        /// As [`get_x2`](Self::get_x2).
        #[inline(always)]
        #[track_caller]
        pub fn set_x2(&self, index: usize, value: [T; 2])
        where
            T: SharedX2,
        {
            self.check_vector(index, 2);
            // SAFETY: as in `get_x2`.
            unsafe { T::store_x2(self.shared_address() + (index * 2 * core::mem::size_of::<T>()) as u32, value) }
        }

        /// [`get_x4`](Self::get_x4) without checks.
        ///
        /// # Safety
        /// `4·index + 4 <= len`, and for a [`SharedSlice`] its start is 16-byte aligned.
        #[inline(always)]
        pub unsafe fn get_x4_unchecked(&self, index: usize) -> [T; 4]
        where
            T: SharedX4,
        {
            // SAFETY: the caller's contract.
            unsafe { T::load_x4(self.shared_address() + (index * 16) as u32) }
        }

        /// [`set_x4`](Self::set_x4) without checks.
        ///
        /// # Safety
        /// As [`get_x4_unchecked`](Self::get_x4_unchecked).
        #[inline(always)]
        pub unsafe fn set_x4_unchecked(&self, index: usize, value: [T; 4])
        where
            T: SharedX4,
        {
            // SAFETY: the caller's contract.
            unsafe { T::store_x4(self.shared_address() + (index * 16) as u32, value) }
        }

        #[inline(always)]
        #[track_caller]
        fn check_vector(&self, index: usize, width: usize) {
            if index >= self.len() / width {
                vector_out_of_bounds(index, width, self.len());
            }
            let bytes = width * core::mem::size_of::<T>();
            if $check_base && self.shared_address() as usize % bytes != 0 {
                misaligned_slice(self.shared_address(), bytes);
            }
        }
    };
}

impl<T: SharedElement, const N: usize> SharedArray<T, N> {
    vector_methods!(false);
}

impl<T: SharedElement> SharedSlice<T> {
    vector_methods!(true);
}

/// A run of shared memory as 16-byte vectors of four `T` (`f128` / `float4` on shared
/// memory), 16-byte aligned by construction: CUDA's `reinterpret_cast<float4*>(smem +
/// offset)` for an offset that is a multiple of four elements.
///
/// Made by [`dynamic_shared_x4`] (the launch's dynamic shared memory, aligned by its
/// declaration) or [`SharedSlice::to_x4`] (any slice, its start's alignment checked once);
/// cut by [`split_at`](Self::split_at) and [`carve`](Self::carve), which count whole vectors and
/// so keep every part aligned. Its [`get`](Self::get) and [`set`](Self::set) are one
/// `ld.shared.v4` / `st.shared.v4` (`LDS.128` / `STS.128`) after one bounds compare, which the
/// compiler removes where the index is a loop's counter below [`len`](Self::len) (the
/// `SharedSlice` methods [`get_x4`](SharedSlice::get_x4) / [`set_x4`](SharedSlice::set_x4)
/// test the start's alignment as well, at every access, because `split_at` may cut anywhere).
/// A small `Copy` handle, as [`SharedSlice`].
#[derive(Clone, Copy)]
pub struct SharedSliceX4<T: SharedX4> {
    /// 16-byte aligned shared-window address of vector 0.
    base: u32,
    /// Number of vectors; `base + 16 len` is inside the memory the handle was made from.
    /// A `u32` (shared memory is addressed in 32 bits, so every length fits): a loop bounded
    /// by [`len_u32`](Self::len_u32) then proves `get`'s check in 32-bit arithmetic.
    len: u32,
    _element: PhantomData<T>,
}

/// The dynamic shared memory of this launch as 16-byte vectors of four `T`
/// (`%dynamic_smem_size / 16` of them): [`dynamic_shared`] seen as `float4`s. The memory is
/// declared `.align 16`, so no access checks alignment; cut it into arrays with
/// [`SharedSliceX4::carve`] / [`SharedSliceX4::split_at`].
#[inline(always)]
pub fn dynamic_shared_x4<T: SharedX4>() -> SharedSliceX4<T> {
    let all = dynamic_shared::<T>();
    // The dynamic shared array is declared `.align 16` (the CPU executor puts it at address 0).
    // The length fits: `all` lies in the 32-bit shared window.
    SharedSliceX4 { base: all.shared_address(), len: (all.len() / 4) as u32, _element: PhantomData }
}

#[cold]
#[track_caller]
fn carve_too_long(count: usize, each: usize, len: usize) -> ! {
    panic!("carving {count} shared regions of {each} vectors each from {len} vectors: launch with more dynamic shared memory (16 bytes a vector)")
}

#[cold]
#[track_caller]
fn split_too_long(mid: usize, len: usize) -> ! {
    panic!("split point {mid} beyond the shared region's length {len} (vectors)")
}

impl<T: SharedX4> SharedSlice<T> {
    /// This slice as 16-byte vectors (`len() / 4` of them; a tail of fewer than four elements
    /// is left out), for accesses that check only the index: its start's alignment is tested
    /// here, once, instead of at every [`get_x4`](Self::get_x4).
    ///
    /// # Panics
    /// When the slice's start is not 16-byte aligned (a [`split_at`](Self::split_at) at an
    /// index that is not a multiple of 4).
    #[inline(always)]
    #[track_caller]
    pub fn to_x4(self) -> SharedSliceX4<T> {
        if !self.shared_address().is_multiple_of(16) {
            misaligned_slice(self.shared_address(), 16);
        }
        SharedSliceX4 { base: self.shared_address(), len: (self.len() / 4) as u32, _element: PhantomData }
    }
}

impl<T: SharedX4> SharedSliceX4<T> {
    /// Number of vectors (four elements each).
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// [`len`](Self::len) as a `u32` (exact: shared memory is addressed in 32 bits): the bound
    /// of a 32-bit loop, `for k in strided_range(lane, tmp.len_u32(), 32) { tmp.get(k as usize) }`,
    /// whose counter is one register where a `usize` one takes a pair and a 64-bit add and
    /// compare a step, and whose test is `get`'s (no check left).
    #[inline(always)]
    pub const fn len_u32(&self) -> u32 {
        self.len
    }

    /// True when empty.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The 32-bit shared-window address of vector 0 (16-byte aligned; for inline PTX).
    #[inline(always)]
    pub fn shared_address(&self) -> u32 {
        self.base
    }

    /// Vector `index`: elements `4 index .. 4 index + 4`, one 16-byte load (`ld.shared.v4`,
    /// `LDS.128`), CUDA's `load128(smem + 4 * index)`.
    ///
    /// # Panics
    /// When `index >= len()`, like slice indexing.
    #[inline(always)]
    #[track_caller]
    pub fn get(&self, index: usize) -> [T; 4] {
        if index >= self.len() {
            vector_out_of_bounds(index, 4, self.len() * 4);
        }
        // SAFETY: in bounds, and 16-byte aligned (the type's invariant).
        unsafe { T::load_x4(self.base + (index * 16) as u32) }
    }

    /// Writes vector `index` with one 16-byte store (`st.shared.v4`, `STS.128`).
    ///
    /// # Panics
    /// When `index >= len()`.
    #[inline(always)]
    #[track_caller]
    pub fn set(&self, index: usize, value: [T; 4]) {
        if index >= self.len() {
            vector_out_of_bounds(index, 4, self.len() * 4);
        }
        // SAFETY: as in `get`.
        unsafe { T::store_x4(self.base + (index * 16) as u32, value) }
    }

    /// [`get`](Self::get) without the bounds check.
    ///
    /// # Safety
    /// `index < len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, index: usize) -> [T; 4] {
        // SAFETY: the caller keeps `index` in bounds; aligned by the type's invariant.
        unsafe { T::load_x4(self.base + (index * 16) as u32) }
    }

    /// [`set`](Self::set) without the bounds check.
    ///
    /// # Safety
    /// `index < len()`.
    #[inline(always)]
    pub unsafe fn set_unchecked(&self, index: usize, value: [T; 4]) {
        // SAFETY: as in `get_unchecked`.
        unsafe { T::store_x4(self.base + (index * 16) as u32, value) }
    }

    /// Splits into vectors `[0, mid)` and `[mid, len)`: both start 16-byte aligned.
    ///
    /// # Panics
    /// When `mid > len()`.
    #[inline(always)]
    #[track_caller]
    pub fn split_at(self, mid: usize) -> (Self, Self) {
        if mid > self.len() {
            split_too_long(mid, self.len());
        }
        // `mid <= len`, a `u32`.
        let mid = mid as u32;
        let tail = SharedSliceX4 { base: self.base + mid * 16, len: self.len - mid, _element: PhantomData };
        (SharedSliceX4 { base: self.base, len: mid, _element: PhantomData }, tail)
    }

    /// [`split_at`](Self::split_at) without the panic: `None` when `mid > len()`. A kernel
    /// that returns early on `None` keeps no panic path for its shared regions (issue 30's
    /// seventh port: `split_at`'s panics stayed in llm.c's `fused_residual_forward_kernel5`,
    /// 683 SASS instructions against nvcc's 337).
    #[inline(always)]
    pub fn split_at_checked(self, mid: usize) -> Option<(Self, Self)> {
        if mid > self.len() {
            return None;
        }
        // `mid <= len`, a `u32`.
        let mid = mid as u32;
        let tail = SharedSliceX4 { base: self.base + mid * 16, len: self.len - mid, _element: PhantomData };
        Some((SharedSliceX4 { base: self.base, len: mid, _element: PhantomData }, tail))
    }

    /// Region `k` of regions of `each` vectors each: vectors `k each .. (k + 1) each`, or
    /// `None` when it does not fit (or `k each` overflows). llm.c gives each warp of
    /// `fused_residual_forward_kernel5` its own `C` values at `params + (2 + threadIdx.y) C`:
    /// `let (_, per_warp) = smem.split_at_checked(2 * c8)?; let mine = per_warp.region(warp,
    /// c8)?;` is one test per step and no panic path. The regions of different `k` do not
    /// overlap (the handle is `Copy`, as every shared slice: which thread writes where stays
    /// the kernel's to arrange, with barriers, as for [`split_at`](Self::split_at)).
    #[inline(always)]
    pub fn region(self, k: usize, each: usize) -> Option<Self> {
        let start = k.checked_mul(each)?;
        let len = self.len();
        if start > len || each > len - start {
            return None;
        }
        // `start + each <= len`, a `u32`.
        Some(SharedSliceX4 { base: self.base + (start * 16) as u32, len: each as u32, _element: PhantomData })
    }

    /// `N` consecutive regions of `each` vectors, then the rest: llm.c's `dbias_shared =
    /// shared; dweight_shared = shared + rounded_C` as `let ([dbias, dweight], rest) =
    /// dynamic_shared_x4::<f32>().carve::<2>(rounded_c / 4)`. One check of the total here;
    /// the regions have one length between them, so a loop bounded by it
    /// (`strided_range(start, dbias.len(), step)`) indexes every one of them unchecked.
    ///
    /// Its check stays in the kernel as a panic path (the kernel tag's shared store and the
    /// panic `CALL`s: issue 30's eighth port, llm.c's `layernorm_forward_kernel6`, 611 SASS
    /// instructions with `carve`, 463 without any panic path). A kernel that should have none
    /// uses [`carve_checked`](Self::carve_checked), which returns `None` instead.
    ///
    /// # Panics
    /// When `N * each > len()` (too little dynamic shared memory for the launch).
    #[inline(always)]
    #[track_caller]
    pub fn carve<const N: usize>(self, each: usize) -> ([Self; N], Self) {
        let total = match each.checked_mul(N) {
            Some(total) if total <= self.len() => total as u32,
            _ => carve_too_long(N, each, self.len()),
        };
        // `each <= total <= len` (a `u32`) unless `N` is 0, when no region is made.
        let each = each as u32;
        let regions = core::array::from_fn(|k| SharedSliceX4 { base: self.base + k as u32 * each * 16, len: each, _element: PhantomData });
        (regions, SharedSliceX4 { base: self.base + total * 16, len: self.len - total, _element: PhantomData })
    }

    /// [`carve`](Self::carve) without the panic: `None` when `N * each > len()` (too little
    /// dynamic shared memory for the launch, or the product overflows). The answer is the same
    /// in every thread of the block (it depends on the launch's dynamic size and `each`), so
    /// `let Some(([s_weight, s_bias], rest)) = dynamic_shared_x4::<u32>().carve_checked::<2>(c8)
    /// else { return };` returns the whole block before any barrier, and the kernel keeps no
    /// panic path for its regions (issue 30's eighth port: `carve`'s panic kept one in llm.c's
    /// `layernorm_forward_kernel6`). The host cannot see the shortfall before the launch (the
    /// dynamic size is a launch fact the kernel reads at run time), so a test of the output
    /// (or of the launch's `shared_mem_bytes`) is how a caller learns of a `None`.
    #[inline(always)]
    pub fn carve_checked<const N: usize>(self, each: usize) -> Option<([Self; N], Self)> {
        let total = each.checked_mul(N)?;
        if total > self.len() {
            return None;
        }
        // `each <= total <= len` (a `u32`) unless `N` is 0, when no region is made.
        let (each, total) = (each as u32, total as u32);
        let regions = core::array::from_fn(|k| SharedSliceX4 { base: self.base + k as u32 * each * 16, len: each, _element: PhantomData });
        Some((regions, SharedSliceX4 { base: self.base + total * 16, len: self.len - total, _element: PhantomData }))
    }

    /// The same memory as elements (`4 len()` of them), for scalar accesses
    /// ([`SharedSlice::get`]) or a reinterpretation as another element size.
    #[inline(always)]
    pub fn to_scalars(self) -> SharedSlice<T> {
        SharedSlice::from_parts(self.base, self.len() * 4)
    }
}
