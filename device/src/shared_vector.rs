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
//! - a [`SharedSlice`] starts 16-byte aligned from [`dynamic_shared`](crate::dynamic_shared),
//!   but [`SharedSlice::split_at`] may cut it anywhere, so its vector methods also check that
//!   the slice's start is aligned (one `and` on a loop-invariant value, hoisted out of loops).
//!
//! Why it matters: a warp's 32 `LDS.128` move 512 bytes in 4 shared-memory wavefronts, the
//! same as 128 `LDS.32` would in 4, with a quarter of the instructions; the layernorm port of
//! issue 23 was 13-19% slower until its shared reads were 16 bytes wide.
//!
//! The elements are those of [`SharedElement`]: [`SharedX4`] (4-byte types) for `x4`,
//! [`SharedX2`] (all) for `x2`. On the CPU executor each access is one bounds-, alignment- and
//! race-checked access of the block's arena, 16 (or 8) bytes wide.

use crate::shared::{SharedArray, SharedElement, SharedSlice};

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
