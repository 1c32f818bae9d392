//! Shared memory: per-block scratch space, static ([`shared_array!`](crate::shared_array)) or
//! sized at launch ([`dynamic_shared`]).
//!
//! Rust has no address spaces, so a reference into shared memory would be a generic pointer
//! and its accesses generic `ld`/`st`. These handles instead keep the 32-bit shared-window
//! address and access it with `ld.shared`/`st.shared`/`atom.shared`, exactly what nvcc emits
//! for `__shared__` arrays: one instruction per access, bounds-checked like a slice (use the
//! `_unchecked` forms in hot loops whose indices are known to be in range).
//!
//! Shared memory starts with unspecified contents. The element types allowed
//! ([`SharedElement`]: integers and floats of 4 or 8 bytes, and the 16-bit floats of
//! [`crate::half`] with their packed pairs) are valid for every bit pattern,
//! so reading before writing yields an unspecified number, never undefined behaviour.
//! Each `shared_array!` site is its own array: two arrays never alias, and every block gets
//! its own copy.

use core::marker::PhantomData;

mod sealed {
    pub trait Sealed {}
}

/// A type that can live in shared memory: any bit pattern is a valid value.
pub trait SharedElement: Copy + sealed::Sealed {
    #[doc(hidden)]
    /// # Safety
    /// `address` is an aligned shared-window address inside an array of `Self`.
    unsafe fn load_shared(address: u32) -> Self;
    #[doc(hidden)]
    /// # Safety
    /// As for `load_shared`.
    unsafe fn store_shared(address: u32, value: Self);
}

/// Shared-memory element types with an atomic add (`atom.shared.add`).
pub trait SharedAtomicAdd: SharedElement {
    #[doc(hidden)]
    /// # Safety
    /// As for [`SharedElement::load_shared`].
    unsafe fn fetch_add_shared(address: u32, value: Self) -> Self;
}

macro_rules! shared_element {
    ($($ty:ty => $ptx:literal, $reg:ident, $add:tt;)*) => {$(
        impl sealed::Sealed for $ty {}
        impl SharedElement for $ty {
            #[inline(always)]
            unsafe fn load_shared(address: u32) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    let value: $ty;
                    // SAFETY: the caller passes an in-bounds, aligned shared address.
                    unsafe {
                        core::arch::asm!(concat!("ld.shared.", $ptx, " {v}, [{a}];"), v = out($reg) value, a = in(reg32) address,
                            options(nostack, readonly, preserves_flags));
                    }
                    value
                }
                #[cfg(not(target_arch = "nvptx64"))]
                // SAFETY: every bit pattern is a valid `$ty`; the hook checks the bounds.
                unsafe { crate::cpu::hooks::shared_load::<$ty>(address) }
            }

            #[inline(always)]
            unsafe fn store_shared(address: u32, value: Self) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the caller passes an in-bounds, aligned shared address.
                unsafe {
                    core::arch::asm!(concat!("st.shared.", $ptx, " [{a}], {v};"), v = in($reg) value, a = in(reg32) address,
                        options(nostack, preserves_flags));
                }
                #[cfg(not(target_arch = "nvptx64"))]
                // SAFETY: as in `load_shared`.
                unsafe { crate::cpu::hooks::shared_store::<$ty>(address, value) }
            }
        }
        shared_element!(@add $ty, $reg, $add);
    )*};
    (@add $ty:ty, $reg:ident, -) => {};
    (@add $ty:ty, $reg:ident, $add:literal) => {
        impl SharedAtomicAdd for $ty {
            #[inline(always)]
            unsafe fn fetch_add_shared(address: u32, value: Self) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    let old: $ty;
                    // SAFETY: the caller passes an in-bounds, aligned shared address.
                    unsafe {
                        core::arch::asm!(concat!("atom.shared.add.", $add, " {o}, [{a}], {v};"), o = out($reg) old, a = in(reg32) address,
                            v = in($reg) value, options(nostack, preserves_flags));
                    }
                    old
                }
                #[cfg(not(target_arch = "nvptx64"))]
                // SAFETY: as in `load_shared`.
                unsafe { crate::cpu::hooks::shared_fetch_add::<$ty>(address, value) }
            }
        }
    };
}

shared_element! {
    u32 => "u32", reg32, "u32";
    i32 => "s32", reg32, "s32";
    f32 => "f32", reg32, "f32";
    u64 => "u64", reg64, "u64";
    i64 => "s64", reg64, -;
    f64 => "f64", reg64, "f64";
}

/// The 16-bit floats and their packed pairs ([`crate::half`]) are stored as their bits: one
/// `ld.shared.b16`/`st.shared.b16` (`.b32` for a pair). Every bit pattern is a value.
macro_rules! shared_element_bits {
    ($($ty:ty => $bits:ty, $ptx:literal, $reg:ident;)*) => {$(
        impl sealed::Sealed for $ty {}
        impl SharedElement for $ty {
            #[inline(always)]
            unsafe fn load_shared(address: u32) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    let bits: $bits;
                    // SAFETY: the caller passes an in-bounds, aligned shared address.
                    unsafe {
                        core::arch::asm!(concat!("ld.shared.", $ptx, " {v}, [{a}];"), v = out($reg) bits, a = in(reg32) address,
                            options(nostack, readonly, preserves_flags));
                    }
                    <$ty>::from_bits(bits)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                // SAFETY: every bit pattern is a valid `$ty`; the hook checks the bounds.
                unsafe { crate::cpu::hooks::shared_load::<$ty>(address) }
            }

            #[inline(always)]
            unsafe fn store_shared(address: u32, value: Self) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the caller passes an in-bounds, aligned shared address.
                unsafe {
                    core::arch::asm!(concat!("st.shared.", $ptx, " [{a}], {v};"), v = in($reg) value.to_bits(), a = in(reg32) address,
                        options(nostack, preserves_flags));
                }
                #[cfg(not(target_arch = "nvptx64"))]
                // SAFETY: as in `load_shared`.
                unsafe { crate::cpu::hooks::shared_store::<$ty>(address, value) }
            }
        }
    )*};
}

shared_element_bits! {
    ::half::bf16 => u16, "b16", reg16;
    ::half::f16 => u16, "b16", reg16;
    crate::half::Bf16x2 => u32, "b32", reg32;
    crate::half::F16x2 => u32, "b32", reg32;
}

/// A shared-memory array of `N` elements of `T`, made by [`shared_array!`](crate::shared_array).
/// A small `Copy` handle (the array's address); pass it to helper functions freely.
#[derive(Clone, Copy)]
pub struct SharedArray<T: SharedElement, const N: usize> {
    base: u32,
    _element: PhantomData<T>,
}

/// A run of shared memory sized at launch time, from [`dynamic_shared`].
#[derive(Clone, Copy)]
pub struct SharedSlice<T: SharedElement> {
    base: u32,
    len: usize,
    _element: PhantomData<T>,
}

/// Methods shared by [`SharedArray`] and [`SharedSlice`].
macro_rules! shared_methods {
    () => {
        /// The address of element `index` (no check).
        #[inline(always)]
        fn address(&self, index: usize) -> u32 {
            self.base + (index * core::mem::size_of::<T>()) as u32
        }

        /// Element `index` (`ld.shared`).
        ///
        /// # Panics
        /// When `index` is out of bounds, like slice indexing.
        #[inline(always)]
        #[track_caller]
        pub fn get(&self, index: usize) -> T {
            assert!(index < self.len(), "shared memory index out of bounds: the len is {} but the index is {}", self.len(), index);
            // SAFETY: in bounds.
            unsafe { T::load_shared(self.address(index)) }
        }

        /// Writes element `index` (`st.shared`).
        ///
        /// # Panics
        /// When `index` is out of bounds.
        #[inline(always)]
        #[track_caller]
        pub fn set(&self, index: usize, value: T) {
            assert!(index < self.len(), "shared memory index out of bounds: the len is {} but the index is {}", self.len(), index);
            // SAFETY: in bounds.
            unsafe { T::store_shared(self.address(index), value) }
        }

        /// Element `index` without the bounds check.
        ///
        /// # Safety
        /// `index < self.len()`.
        #[inline(always)]
        pub unsafe fn get_unchecked(&self, index: usize) -> T {
            // SAFETY: the caller keeps `index` in bounds.
            unsafe { T::load_shared(self.address(index)) }
        }

        /// Writes element `index` without the bounds check.
        ///
        /// # Safety
        /// `index < self.len()`.
        #[inline(always)]
        pub unsafe fn set_unchecked(&self, index: usize, value: T) {
            // SAFETY: the caller keeps `index` in bounds.
            unsafe { T::store_shared(self.address(index), value) }
        }

        /// Atomically adds `value` to element `index` (`atom.shared.add`, relaxed, block scope),
        /// returning the old value. Shared-memory atomics are what a block-local histogram uses.
        ///
        /// # Panics
        /// When `index` is out of bounds.
        #[inline(always)]
        #[track_caller]
        pub fn fetch_add(&self, index: usize, value: T) -> T
        where
            T: SharedAtomicAdd,
        {
            assert!(index < self.len(), "shared memory index out of bounds: the len is {} but the index is {}", self.len(), index);
            // SAFETY: in bounds.
            unsafe { T::fetch_add_shared(self.address(index), value) }
        }

        /// The 32-bit shared-window address of element 0 (for inline PTX).
        #[inline(always)]
        pub fn shared_address(&self) -> u32 {
            self.base
        }
    };
}

impl<T: SharedElement, const N: usize> SharedArray<T, N> {
    #[doc(hidden)]
    /// # Safety
    /// `base` is the address of a shared array of `N` `T`s, 16-byte aligned (the vector
    /// accesses of `shared_vector` rely on it), used only through this handle's site (what
    /// `shared_array!` guarantees).
    #[inline(always)]
    pub unsafe fn __from_address(base: u32) -> Self {
        SharedArray { base, _element: PhantomData }
    }

    /// Number of elements.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        N
    }

    /// True for a zero-length array.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        N == 0
    }

    shared_methods!();
}

impl<T: SharedElement> SharedSlice<T> {
    /// A slice of `len` elements at shared address `base` (for the vector views of
    /// [`crate::shared_vector`], which keep the address's invariants themselves).
    #[inline(always)]
    pub(crate) const fn from_parts(base: u32, len: usize) -> Self {
        SharedSlice { base, len, _element: PhantomData }
    }

    /// Number of elements.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Splits into `[0, mid)` and `[mid, len)`: two non-overlapping parts, for a kernel that
    /// needs several dynamically sized arrays.
    ///
    /// # Panics
    /// When `mid > len`.
    #[track_caller]
    pub fn split_at(self, mid: usize) -> (SharedSlice<T>, SharedSlice<T>) {
        assert!(mid <= self.len, "split point {mid} beyond the shared slice's length {}", self.len);
        let tail = SharedSlice { base: self.address(mid), len: self.len - mid, _element: PhantomData };
        (SharedSlice { base: self.base, len: mid, _element: PhantomData }, tail)
    }

    /// [`split_at`](Self::split_at) without the panic: `None` when `mid > len`. A kernel
    /// that returns early on `None` keeps no panic path (and no call to the panic handler)
    /// for its shared regions.
    #[inline(always)]
    pub fn split_at_checked(self, mid: usize) -> Option<(SharedSlice<T>, SharedSlice<T>)> {
        if mid > self.len {
            return None;
        }
        let tail = SharedSlice { base: self.address(mid), len: self.len - mid, _element: PhantomData };
        Some((SharedSlice { base: self.base, len: mid, _element: PhantomData }, tail))
    }

    /// Region `k` of regions of `each` elements each: elements `k each .. (k + 1) each`, or
    /// `None` when it does not fit (or the product overflows). llm.c's per-warp
    /// `params + threadIdx.y * C` as `shared.region(warp, c)`: one test, no panic.
    #[inline(always)]
    pub fn region(self, k: usize, each: usize) -> Option<SharedSlice<T>> {
        let start = k.checked_mul(each)?;
        if start > self.len || each > self.len - start {
            return None;
        }
        Some(SharedSlice { base: self.address(start), len: each, _element: PhantomData })
    }

    shared_methods!();
}

/// The dynamic shared memory of this launch (the `shared_bytes` of `<<<grid, block,
/// shared_bytes>>>`) as elements of `T`: `%dynamic_smem_size / size_of::<T>()` of them,
/// 16-byte aligned. Every call returns the same memory; use [`SharedSlice::split_at`] for
/// several arrays (or [`SharedSlice::region`] for equal ones).
///
/// The host sets the size at launch with `LaunchConfig::with_shared_bytes` (ferrocuda-types,
/// re-exported by `ferrocuda`), in bytes:
///
/// ```ignore
/// // device: two arrays of C floats
/// let shared = dynamic_shared::<f32>();
/// let (Some(a), Some(b)) = (shared.region(0, c as usize), shared.region(1, c as usize)) else { return };
/// // host
/// let config = LaunchConfig::new(grid, 256).with_shared_bytes(2 * c * 4);
/// my_kernel::launch(&stream, config, /* .. */)?;
/// ```
///
/// Its length is the launch's, so the compiler cannot see it: `get`/`set`/`fetch_add` at an
/// index it cannot prove below `len()` keep a bounds check and the panic path. Take regions of
/// exact lengths (`region`, `split_at_checked`) and index them below a length you test or loop
/// to (`strided_range(tid, cols, threads)` with `cols` the region's length), or test `i <
/// shared.len()` yourself (issue 30's ninth port, L3 and L4).
#[inline(always)]
pub fn dynamic_shared<T: SharedElement>() -> SharedSlice<T> {
    #[cfg(target_arch = "nvptx64")]
    {
        let (base, bytes): (u32, u32);
        // SAFETY: reads the address of the extern shared array and a special register.
        unsafe {
            core::arch::asm!("mov.u32 {b}, __ferrocuda_dynamic_shared;", b = out(reg32) base, options(pure, nomem, nostack));
            core::arch::asm!("mov.u32 {n}, %dynamic_smem_size;", n = out(reg32) bytes, options(pure, nomem, nostack));
        }
        SharedSlice { base, len: bytes as usize / core::mem::size_of::<T>(), _element: PhantomData }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let (base, bytes) = crate::cpu::hooks::dynamic_shared();
        SharedSlice { base, len: bytes as usize / core::mem::size_of::<T>(), _element: PhantomData }
    }
}

#[cfg(target_arch = "nvptx64")]
core::arch::global_asm!(".extern .shared .align 16 .b8 __ferrocuda_dynamic_shared[];");

/// The alignment `shared_array!` declares for an element type of alignment `align`: 16 bytes
/// (or more, for a type that needs more), which `shared_vector`'s 16-byte accesses rely on.
#[doc(hidden)]
pub const fn __shared_align(align: usize) -> usize {
    if align < 16 { 16 } else { align }
}

/// A number naming one expansion of `shared_array!` (a new one at every call, even for two
/// arrays expanded from one call of a user's macro: audit N9).
#[doc(hidden)]
pub use ferrocuda_macros::__shared_site;

/// A statically sized shared-memory array, CUDA's `__shared__ T name[N]`:
/// `let tile = shared_array![f32; 32 * 33];` gives a [`SharedArray<f32, 1056>`](SharedArray).
///
/// Each expansion of the macro declares its own `.shared` array in the PTX module (so two
/// arrays never alias, also when one call of your own `macro_rules!` expands two of them, and
/// each block has its own copy); reaching the same expansion twice, for example in a helper
/// function called twice, gives the same array, as a `static __shared__` in a CUDA device
/// function does (a helper that needs scratch of its own per caller takes it as a parameter
/// instead: see [`crate::block`]). In a generic function, the array is one for every instance: its element type
/// and length must not depend on the type parameters (neither build compiles that). The
/// length must be a constant expression.
///
/// The element type and the length are resolved in the enclosing *module*: they may use its
/// items (and what it imports), not the function's local `const`s, `type`s, `use`s or generic
/// parameters. Where a local item shadows a module-level one of the same name, the two
/// readings must agree, or the macro does not compile (on the GPU build and the CPU build
/// alike): the declared array and the handle's length can never differ (audit 2026-11-29b,
/// G22R-1). Move such a local item to module level, or give it its own name.
///
/// ```compile_fail,E0308
/// # use ferrocuda_device::shared_array;
/// const LEN: usize = 1;
/// fn kernel_body() {
///     const LEN: usize = 256; // shadows the module's `LEN`: 1 element declared, 256 indexed
///     let tile = shared_array![u32; LEN];
///     tile.set(255, 7);
/// }
/// ```
/// Every array is 16-byte aligned (CUDA's `__align__(16)`), so its 16-byte vector accesses
/// ([`SharedArray::get_x4`], [`crate::shared_vector`]) are always allowed. The kernel crate
/// needs `feature(asm_experimental_arch)` on the device (see the crate docs).
#[macro_export]
macro_rules! shared_array {
    [$ty:ty; $len:expr] => {{
        // The caller's `$ty` and `$len` are evaluated twice, in two scopes that can resolve
        // them differently: here, in a module (which sees the enclosing module's items through
        // `use super::*`, but not the function's local `const`s, `type`s, `use`s or generic
        // parameters), for the array's declaration; and in the caller's block, for the handle's
        // type. The handle is made from this module's items and only then given the caller's
        // type, so a disagreement is a type error on both builds (audit 2026-11-29b, G22R-1:
        // a local `const LEN` shadowing a module-level one declared 4 bytes for a handle of
        // 1024). The items' names are reserved (`__ferrocuda_`), because the module's own
        // items shadow its glob import inside `$ty` and `$len` too.
        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code)]
        mod __ferrocuda_shared_site {
            #[allow(unused_imports)]
            use super::*;
            /// The element type as this module resolves it.
            pub(super) type __FerrocudaSharedElement = $ty;
            /// The length as this module resolves it.
            pub(super) const __FERROCUDA_SHARED_LEN: usize = $len;
            /// The bytes declared (on the GPU) or allocated (on the CPU executor).
            pub(super) const __FERROCUDA_SHARED_BYTES: usize =
                $crate::__private::core::mem::size_of::<__FerrocudaSharedElement>() * __FERROCUDA_SHARED_LEN;
            /// 16 bytes (CUDA's `__align__(16)`) for every array, so that its 16-byte vector
            /// accesses (`get_x4`, `set_x4`) need no check.
            pub(super) const __FERROCUDA_SHARED_ALIGN: usize =
                $crate::shared::__shared_align($crate::__private::core::mem::align_of::<__FerrocudaSharedElement>());
            /// This expansion's number (one call of `__shared_site!`, shared by both uses).
            #[cfg(target_arch = "nvptx64")]
            pub(super) const __FERROCUDA_SHARED_SITE: u64 = $crate::shared::__shared_site!();
            #[cfg(target_arch = "nvptx64")]
            $crate::__private::core::arch::global_asm!(
                ".shared .align {align} .b8 __ferrocuda_shared_{site}[{bytes}];",
                align = const __FERROCUDA_SHARED_ALIGN,
                bytes = const __FERROCUDA_SHARED_BYTES,
                site = const __FERROCUDA_SHARED_SITE,
            );
        }
        #[cfg(target_arch = "nvptx64")]
        let __ferrocuda_address: u32 = {
            let address: u32;
            // SAFETY: reads the address of the array declared just above.
            unsafe {
                $crate::__private::core::arch::asm!(
                    "mov.u32 {a}, __ferrocuda_shared_{site};",
                    a = out(reg32) address,
                    site = const __ferrocuda_shared_site::__FERROCUDA_SHARED_SITE,
                    options(pure, nomem, nostack),
                );
            }
            address
        };
        // The CPU executor allocates what the GPU declares: the module's values, not the
        // caller's (the two agree, or the line below does not compile).
        #[cfg(not(target_arch = "nvptx64"))]
        let __ferrocuda_address: u32 = $crate::cpu::hooks::static_shared(
            $crate::shared::__shared_site!(),
            __ferrocuda_shared_site::__FERROCUDA_SHARED_BYTES,
            __ferrocuda_shared_site::__FERROCUDA_SHARED_ALIGN,
        );
        // The handle's type comes from the module's items (what was declared); the ascription
        // to the caller's `$ty` and `$len` makes any difference between the scopes an error.
        let __ferrocuda_handle: $crate::shared::SharedArray<$ty, { $len }> =
            // SAFETY: the address is this site's own array of `__FERROCUDA_SHARED_LEN` elements
            // of `__FerrocudaSharedElement`, the handle's own type and length.
            unsafe {
                $crate::shared::SharedArray::<
                    __ferrocuda_shared_site::__FerrocudaSharedElement,
                    { __ferrocuda_shared_site::__FERROCUDA_SHARED_LEN },
                >::__from_address(__ferrocuda_address)
            };
        __ferrocuda_handle
    }};
}
