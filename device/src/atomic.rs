//! Atomic operations on global memory: [`Atomic<T>`], the elements of a kernel's
//! [`AtomicSlice`](crate::global::AtomicSlice) parameters (for shared memory use
//! [`SharedArray::fetch_add`](crate::shared::SharedArray::fetch_add)).
//!
//! CUDA's `atomicAdd`, `atomicMin`, `atomicExch`, `atomicCAS`, ... with an explicit scope:
//! each function compiles to one `atom.relaxed.<scope>.global.<op>` (the address converted
//! with `cvta.to.global`, so ptxas emits `ATOMG`, and `REDG` for [`add`], whose result is
//! unused, as nvcc does for a kernel parameter). The target must be global memory. Like CUDA's, these are relaxed: they order nothing else;
//! pair them with [`crate::sync`] fences when other data must become visible with them.
//!
//! Many threads may update the same element: they reach it as a shared `&Atomic<T>` (never a
//! `&mut T`, which would claim that no other thread touches it), from
//! [`AtomicSlice::at`](crate::global::AtomicSlice::at) or the slice's own methods.
//!
//! `core::sync::atomic` also works on device memory (for example
//! `AtomicU32::from_ptr(counters.as_ptr())`): loads, stores, fences and compare-exchange honour
//! their `Ordering` at system scope, and relaxed read-modify-writes are exact. But rustc's
//! NVPTX backend (LLVM 22) drops the ordering of `fetch_add`/`swap`/`fetch_max`... with
//! `Acquire`/`Release`/`SeqCst` (they compile to relaxed `atom`); add a fence, or use these.

/// Which threads an atomic operation is atomic with respect to (the PTX `.cta`, `.gpu`,
/// `.sys` scopes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Threads of the same block (`atomicAdd_block`): the cheapest.
    Block,
    /// Every thread on this GPU (`atomicAdd`): the default.
    Device,
    /// The GPU, the host and peer GPUs (`atomicAdd_system`), for mapped or peer memory.
    System,
}

mod sealed {
    pub trait Sealed {}
    macro_rules! sealed { ($($t:ty),*) => { $(impl Sealed for $t {})* }; }
    sealed!(u16, i16, u32, i32, u64, i64, f32, f64);
    sealed!(::half::bf16, ::half::f16, crate::half::Bf16x2, crate::half::F16x2);
}

/// An element of global memory that threads access only atomically: what an
/// [`AtomicSlice`](crate::global::AtomicSlice) is made of. Shared (`&Atomic<T>`) between
/// threads; every method is one atomic PTX instruction.
#[repr(transparent)]
pub struct Atomic<T: AtomicElement> {
    value: core::cell::UnsafeCell<T>,
}

// SAFETY: every access through an `Atomic` is atomic, and the element types are plain data.
unsafe impl<T: AtomicElement> Sync for Atomic<T> {}

impl<T: AtomicElement> Atomic<T> {
    /// The element at `pointer` as an atomic cell.
    ///
    /// # Safety
    /// `pointer` is aligned and valid for reads and writes for `'a`, and during `'a` every
    /// access to it (from any thread) is atomic.
    #[inline(always)]
    pub unsafe fn from_ptr<'a>(pointer: *mut T) -> &'a Atomic<T> {
        // SAFETY: `Atomic<T>` is `repr(transparent)` over `UnsafeCell<T>`, itself over `T`.
        unsafe { &*pointer.cast::<Atomic<T>>() }
    }

    /// The element's address.
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut T {
        self.value.get()
    }

    /// Reads the value (relaxed, device scope: `ld.relaxed.gpu`).
    #[inline(always)]
    pub fn load(&self) -> T {
        // SAFETY: valid, aligned, accessed only atomically.
        unsafe { T::load_relaxed(self.as_ptr(), Scope::Device) }
    }

    /// Writes the value (relaxed, device scope: `st.relaxed.gpu`).
    #[inline(always)]
    pub fn store(&self, value: T) {
        // SAFETY: as above.
        unsafe { T::store_relaxed(self.as_ptr(), value, Scope::Device) }
    }

    /// [`load`](Self::load) at the given scope (`Scope::Block` is enough after
    /// `sync_threads()` when only the block's threads wrote it).
    #[inline(always)]
    pub fn load_scoped(&self, scope: Scope) -> T {
        // SAFETY: as above.
        unsafe { T::load_relaxed(self.as_ptr(), scope) }
    }

    /// [`store`](Self::store) at the given scope.
    #[inline(always)]
    pub fn store_scoped(&self, scope: Scope, value: T) {
        // SAFETY: as above.
        unsafe { T::store_relaxed(self.as_ptr(), value, scope) }
    }
}

/// Types an [`Atomic`] can hold: 2-, 4- and 8-byte integers, 4- and 8-byte floats, and the
/// 16-bit floats of [`crate::half`] with their pairs, with relaxed loads and stores (the read-modify-writes
/// each have their own trait below).
pub trait AtomicElement: bytemuck::Pod + sealed::Sealed {
    #[doc(hidden)]
    /// # Safety
    /// `target` is valid, aligned global memory accessed only atomically.
    unsafe fn load_relaxed(target: *mut Self, scope: Scope) -> Self;
    #[doc(hidden)]
    /// # Safety
    /// As for `load_relaxed`.
    unsafe fn store_relaxed(target: *mut Self, value: Self, scope: Scope);
}

macro_rules! atomic_element {
    ($($ty:ty => $ptx:literal, $reg:ident, $bits:ty, $host_atomic:ident;)*) => {$(
        impl AtomicElement for $ty {
            #[inline(always)]
            unsafe fn load_relaxed(target: *mut Self, scope: Scope) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    let value: $ty;
                    // SAFETY: the caller passes a valid, aligned global address.
                    unsafe {
                        scoped_access!(scope, "ld", [$ptx, " {o}, [g];"], o = out($reg) value, p = in(reg64) target, options(nostack));
                    }
                    value
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = scope;
                    // SAFETY: valid and aligned (the caller's guarantee); same size as `$bits`.
                    let bits = unsafe { core::sync::atomic::$host_atomic::from_ptr(target.cast::<$bits>()) }.load(core::sync::atomic::Ordering::Relaxed);
                    // A spin-wait's poll: lets the block's other threads run now and then (P8),
                    // and tells a spin from a wait that ends (F2).
                    crate::cpu::hooks::atomic_access(target as usize, bits as u64, false);
                    bytemuck::cast(bits)
                }
            }

            #[inline(always)]
            unsafe fn store_relaxed(target: *mut Self, value: Self, scope: Scope) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the caller passes a valid, aligned global address.
                unsafe {
                    scoped_access!(scope, "st", [$ptx, " [g], {v};"], p = in(reg64) target, v = in($reg) value, options(nostack));
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = scope;
                    let bits: $bits = bytemuck::cast(value);
                    // SAFETY: as for the load. (A swap, to see whether the store changed it.)
                    let old = unsafe { core::sync::atomic::$host_atomic::from_ptr(target.cast::<$bits>()) }.swap(bits, core::sync::atomic::Ordering::Relaxed);
                    crate::cpu::hooks::atomic_access(target as usize, old as u64, old != bits);
                }
            }
        }
    )*};
}

/// `ld.relaxed.<scope>.global` / `st.relaxed.<scope>.global` with the address converted to
/// the global window.
#[cfg(target_arch = "nvptx64")]
macro_rules! scoped_access {
    ($scope:expr, $op:literal, [$($part:expr),*], $($operands:tt)*) => {
        match $scope {
            Scope::Block => core::arch::asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ", $op, ".relaxed.cta.global.", $($part),*, " }}"), $($operands)*),
            Scope::Device => core::arch::asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ", $op, ".relaxed.gpu.global.", $($part),*, " }}"), $($operands)*),
            Scope::System => core::arch::asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ", $op, ".relaxed.sys.global.", $($part),*, " }}"), $($operands)*),
        }
    };
}

atomic_element! {
    // 2-byte elements at computed indices (vLLM's `reshape_and_cache_flash` scatters one
    // 16-bit value per thread): `ld/st.relaxed.gpu.b16`, SASS `LDG.E.U16.STRONG.GPU` /
    // `STG.E.U16.STRONG.GPU` beside nvcc's `STG.E.U16` (the same 2 bytes, no read-modify-write).
    u16 => "b16", reg16, u16, AtomicU16;
    i16 => "b16", reg16, u16, AtomicU16;
    u32 => "b32", reg32, u32, AtomicU32;
    i32 => "b32", reg32, u32, AtomicU32;
    u64 => "b64", reg64, u64, AtomicU64;
    i64 => "b64", reg64, u64, AtomicU64;
    f32 => "b32", reg32, u32, AtomicU32;
    f64 => "b64", reg64, u64, AtomicU64;
}

/// The 16-bit floats and their pairs ([`crate::half`]): relaxed loads and stores of their bits.
macro_rules! atomic_element_bits {
    ($($ty:ty => $ptx:literal, $reg:ident, $bits:ty, $host_atomic:ident;)*) => {$(
        impl AtomicElement for $ty {
            #[inline(always)]
            unsafe fn load_relaxed(target: *mut Self, scope: Scope) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    let bits: $bits;
                    // SAFETY: the caller passes a valid, aligned global address.
                    unsafe {
                        scoped_access!(scope, "ld", [$ptx, " {o}, [g];"], o = out($reg) bits, p = in(reg64) target, options(nostack));
                    }
                    <$ty>::from_bits(bits)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = scope;
                    // SAFETY: valid and aligned (the caller's guarantee); same size as `$bits`.
                    let bits = unsafe { core::sync::atomic::$host_atomic::from_ptr(target.cast::<$bits>()) }.load(core::sync::atomic::Ordering::Relaxed);
                    crate::cpu::hooks::atomic_access(target as usize, bits as u64, false);
                    <$ty>::from_bits(bits)
                }
            }

            #[inline(always)]
            unsafe fn store_relaxed(target: *mut Self, value: Self, scope: Scope) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: the caller passes a valid, aligned global address.
                unsafe {
                    scoped_access!(scope, "st", [$ptx, " [g], {v};"], p = in(reg64) target, v = in($reg) value.to_bits(), options(nostack));
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = scope;
                    // SAFETY: as for the load.
                    let old = unsafe { core::sync::atomic::$host_atomic::from_ptr(target.cast::<$bits>()) }.swap(value.to_bits(), core::sync::atomic::Ordering::Relaxed);
                    crate::cpu::hooks::atomic_access(target as usize, old as u64, old != value.to_bits());
                }
            }
        }
    )*};
}

atomic_element_bits! {
    ::half::bf16 => "b16", reg16, u16, AtomicU16;
    ::half::f16 => "b16", reg16, u16, AtomicU16;
    crate::half::Bf16x2 => "b32", reg32, u32, AtomicU32;
    crate::half::F16x2 => "b32", reg32, u32, AtomicU32;
}

#[cfg(target_arch = "nvptx64")]
macro_rules! scoped_asm {
    ($scope:expr, [$($part:expr),*], $($operands:tt)*) => {
        match $scope {
            Scope::Block => core::arch::asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; atom.relaxed.cta.global.", $($part),*, " }}"), $($operands)*),
            Scope::Device => core::arch::asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; atom.relaxed.gpu.global.", $($part),*, " }}"), $($operands)*),
            Scope::System => core::arch::asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; atom.relaxed.sys.global.", $($part),*, " }}"), $($operands)*),
        }
    };
}

macro_rules! binary_op {
    ($(#[$doc:meta])* $trait_name:ident, $method:ident, $public:ident, $public_scoped:ident, $op:literal, $host:expr,
     [$($ty:ty => $ptx:literal, $reg:ident;)*]) => {
        #[doc = concat!("Element types with an atomic `", $op, "`.")]
        pub trait $trait_name: AtomicElement {
            #[doc(hidden)]
            /// # Safety
            /// `target` is valid and aligned.
            unsafe fn $method(target: *mut Self, value: Self, scope: Scope) -> Self;
        }
        $(
            impl $trait_name for $ty {
                #[inline(always)]
                unsafe fn $method(target: *mut Self, value: Self, scope: Scope) -> Self {
                    #[cfg(target_arch = "nvptx64")]
                    {
                        let old: $ty;
                        // SAFETY: the caller passes a valid, aligned address.
                        unsafe {
                            scoped_asm!(scope, [$op, ".", $ptx, " {o}, [g], {v};"],
                                o = out($reg) old, p = in(reg64) target, v = in($reg) value, options(nostack));
                        }
                        old
                    }
                    #[cfg(not(target_arch = "nvptx64"))]
                    {
                        let _ = scope;
                        let apply: fn($ty, $ty) -> $ty = $host;
                        // SAFETY: the caller passes a valid, aligned address.
                        unsafe { crate::cpu::hooks::atomic_update(target, |old| apply(old, value)) }
                    }
                }
            }
        )*

        $(#[$doc])*
        /// Device scope; returns the old value.
        #[inline(always)]
        pub fn $public<T: $trait_name>(target: &Atomic<T>, value: T) -> T {
            target.$public(value)
        }

        $(#[$doc])*
        /// At the given scope; returns the old value.
        #[inline(always)]
        pub fn $public_scoped<T: $trait_name>(scope: Scope, target: &Atomic<T>, value: T) -> T {
            target.$public_scoped(scope, value)
        }

        impl<T: $trait_name> Atomic<T> {
            $(#[$doc])*
            /// Device scope; returns the old value.
            #[inline(always)]
            pub fn $public(&self, value: T) -> T {
                // SAFETY: an `Atomic` is valid, aligned global memory accessed only atomically.
                unsafe { T::$method(self.as_ptr(), value, Scope::Device) }
            }

            $(#[$doc])*
            /// At the given scope; returns the old value.
            #[inline(always)]
            pub fn $public_scoped(&self, scope: Scope, value: T) -> T {
                // SAFETY: as above.
                unsafe { T::$method(self.as_ptr(), value, scope) }
            }
        }
    };
}

binary_op! {
    /// `atomicAdd`: `*target += value` (`atom.add`).
    AtomicAdd, atomic_add, fetch_add, fetch_add_scoped, "add", |a, b| a + b,
    [u32 => "u32", reg32; i32 => "s32", reg32; u64 => "u64", reg64; f32 => "f32", reg32; f64 => "f64", reg64;]
}

/// `atomicAdd` on the 16-bit floats and their pairs: `atom.add.noftz` (round to nearest even,
/// subnormals kept), f16 and f16 pairs on every GPU, bf16 and bf16 pairs on sm_90+ (the
/// instruction's minimum). On the host, the correctly rounded sum (`half`'s `+`, the pairs'
/// software twin) in a compare-exchange loop.
macro_rules! atomic_add_bits {
    ($($(#[$gate:meta])* $ty:ty => $ptx:literal, $reg:ident, $bits:ty;)*) => {$(
        $(#[$gate])*
        impl AtomicAdd for $ty {
            #[inline(always)]
            unsafe fn atomic_add(target: *mut Self, value: Self, scope: Scope) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    let old: $bits;
                    // SAFETY: the caller passes a valid, aligned address.
                    unsafe {
                        scoped_asm!(scope, ["add.noftz.", $ptx, " {o}, [g], {v};"],
                            o = out($reg) old, p = in(reg64) target, v = in($reg) value.to_bits(), options(nostack));
                    }
                    <$ty>::from_bits(old)
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = scope;
                    // SAFETY: the caller passes a valid, aligned address.
                    unsafe { crate::cpu::hooks::atomic_update(target, |old| old + value) }
                }
            }
        }
    )*};
}

atomic_add_bits! {
    ::half::f16 => "f16", reg16, u16;
    crate::half::F16x2 => "f16x2", reg32, u32;
    #[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
    ::half::bf16 => "bf16", reg16, u16;
    #[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
    crate::half::Bf16x2 => "bf16x2", reg32, u32;
}

binary_op! {
    /// `atomicMin`: `*target = min(*target, value)` (`atom.min`).
    AtomicMin, atomic_min, fetch_min, fetch_min_scoped, "min", |a, b| if b < a { b } else { a },
    [u32 => "u32", reg32; i32 => "s32", reg32; u64 => "u64", reg64; i64 => "s64", reg64;]
}

binary_op! {
    /// `atomicMax`: `*target = max(*target, value)` (`atom.max`).
    AtomicMax, atomic_max, fetch_max, fetch_max_scoped, "max", |a, b| if b > a { b } else { a },
    [u32 => "u32", reg32; i32 => "s32", reg32; u64 => "u64", reg64; i64 => "s64", reg64;]
}

/// `atomicMax`/`atomicMin` on `f32` and `f64`, as CUDA code writes them (vLLM's
/// `atomicMaxFloat`; there is no float `atom.max`): a value with the sign bit clear takes the
/// signed-integer max (min) of the bits, where every negative float is below it; a value with
/// the sign bit set takes the unsigned min (max), where larger bits are more negative floats and
/// every non-negative float is below. One `atom` instruction either way. The order is the bits'
/// total order: `-0.0 < +0.0`, a NaN with the sign bit clear is above `+inf`, one with it set
/// below `-inf` (IEEE `max` would ignore NaN). The host (CPU executor) applies the same rule to
/// the same bits, so both give the same result.
macro_rules! float_extremum {
    ($($ty:ty => $signed:ty, $unsigned:ty, $sign:expr;)*) => {$(
        impl AtomicMax for $ty {
            #[inline(always)]
            unsafe fn atomic_max(target: *mut Self, value: Self, scope: Scope) -> Self {
                let bits = value.to_bits();
                // SAFETY: the caller passes a valid, aligned address; the integer of the same
                // size has the same alignment.
                let old = unsafe {
                    if bits & $sign == 0 {
                        <$signed as AtomicMax>::atomic_max(target.cast(), bits as $signed, scope) as $unsigned
                    } else {
                        <$unsigned as AtomicMin>::atomic_min(target.cast(), bits, scope)
                    }
                };
                <$ty>::from_bits(old)
            }
        }

        impl AtomicMin for $ty {
            #[inline(always)]
            unsafe fn atomic_min(target: *mut Self, value: Self, scope: Scope) -> Self {
                let bits = value.to_bits();
                // SAFETY: as above.
                let old = unsafe {
                    if bits & $sign == 0 {
                        <$signed as AtomicMin>::atomic_min(target.cast(), bits as $signed, scope) as $unsigned
                    } else {
                        <$unsigned as AtomicMax>::atomic_max(target.cast(), bits, scope)
                    }
                };
                <$ty>::from_bits(old)
            }
        }
    )*};
}

float_extremum! {
    f32 => i32, u32, 1u32 << 31;
    f64 => i64, u64, 1u64 << 63;
}

binary_op! {
    /// `atomicExch`: `*target = value` (`atom.exch`).
    AtomicExchange, atomic_exchange, exchange, exchange_scoped, "exch", |_, b| b,
    [u32 => "b32", reg32; i32 => "b32", reg32; u64 => "b64", reg64; i64 => "b64", reg64; f32 => "b32", reg32; f64 => "b64", reg64;]
}

binary_op! {
    /// `atomicAnd`: `*target &= value` (`atom.and`).
    AtomicAnd, atomic_and, fetch_and, fetch_and_scoped, "and", |a, b| a & b,
    [u32 => "b32", reg32; u64 => "b64", reg64;]
}

binary_op! {
    /// `atomicOr`: `*target |= value` (`atom.or`).
    AtomicOr, atomic_or, fetch_or, fetch_or_scoped, "or", |a, b| a | b,
    [u32 => "b32", reg32; u64 => "b64", reg64;]
}

binary_op! {
    /// `atomicXor`: `*target ^= value` (`atom.xor`).
    AtomicXor, atomic_xor, fetch_xor, fetch_xor_scoped, "xor", |a, b| a ^ b,
    [u32 => "b32", reg32; u64 => "b64", reg64;]
}

binary_op! {
    /// `atomicInc`: `*target = if old >= value { 0 } else { old + 1 }` (`atom.inc.u32`): a counter
    /// that wraps to 0 after `value` (a ring buffer's slot: `fetch_inc(slots - 1)`).
    AtomicInc, atomic_inc, fetch_inc, fetch_inc_scoped, "inc", |a, b| if a >= b { 0 } else { a + 1 },
    [u32 => "u32", reg32;]
}

binary_op! {
    /// `atomicDec`: `*target = if old == 0 || old > value { value } else { old - 1 }`
    /// (`atom.dec.u32`).
    AtomicDec, atomic_dec, fetch_dec, fetch_dec_scoped, "dec", |a, b| if a == 0 || a > b { b } else { a - 1 },
    [u32 => "u32", reg32;]
}

/// Element types with an atomic compare-and-swap.
pub trait AtomicCompareExchange: AtomicElement {
    #[doc(hidden)]
    /// # Safety
    /// `target` is valid and aligned.
    unsafe fn atomic_cas(target: *mut Self, expected: Self, new: Self, scope: Scope) -> Self;
}

macro_rules! compare_exchange {
    ($($ty:ty => $ptx:literal, $reg:ident;)*) => {$(
        impl AtomicCompareExchange for $ty {
            #[inline(always)]
            unsafe fn atomic_cas(target: *mut Self, expected: Self, new: Self, scope: Scope) -> Self {
                #[cfg(target_arch = "nvptx64")]
                {
                    let old: $ty;
                    // SAFETY: the caller passes a valid, aligned address.
                    unsafe {
                        scoped_asm!(scope, ["cas.", $ptx, " {o}, [g], {e}, {n};"],
                            o = out($reg) old, p = in(reg64) target, e = in($reg) expected, n = in($reg) new, options(nostack));
                    }
                    old
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = scope;
                    // SAFETY: the caller passes a valid, aligned address.
                    unsafe { crate::cpu::hooks::atomic_update(target, |old| if old.to_bits() == expected.to_bits() { new } else { old }) }
                }
            }
        }
    )*};
}

/// Bit-pattern comparison for compare-and-swap (floats compare by bits, like the hardware).
#[cfg(not(target_arch = "nvptx64"))]
trait ToBits {
    fn to_bits(self) -> u64;
}
#[cfg(not(target_arch = "nvptx64"))]
macro_rules! to_bits { ($($t:ty => $e:expr),*) => { $(impl ToBits for $t { fn to_bits(self) -> u64 { let f: fn($t) -> u64 = $e; f(self) } })* }; }
#[cfg(not(target_arch = "nvptx64"))]
to_bits!(u32 => |v| v as u64, i32 => |v| v as u32 as u64, u64 => |v| v, i64 => |v| v as u64, f32 => |v| f32::to_bits(v) as u64, f64 => f64::to_bits);

compare_exchange! {
    u32 => "b32", reg32;
    i32 => "b32", reg32;
    u64 => "b64", reg64;
    i64 => "b64", reg64;
    f32 => "b32", reg32;
    f64 => "b64", reg64;
}

/// `atomicCAS`: if `*target == expected` (bitwise) store `new`; returns the old value either
/// way (`atom.cas`), device scope.
#[inline(always)]
pub fn compare_exchange<T: AtomicCompareExchange>(target: &Atomic<T>, expected: T, new: T) -> T {
    target.compare_exchange(expected, new)
}

/// [`compare_exchange`] at the given scope.
#[inline(always)]
pub fn compare_exchange_scoped<T: AtomicCompareExchange>(scope: Scope, target: &Atomic<T>, expected: T, new: T) -> T {
    target.compare_exchange_scoped(scope, expected, new)
}

impl<T: AtomicCompareExchange> Atomic<T> {
    /// `atomicCAS`: if the value is `expected` (bitwise) store `new`; returns the old value
    /// either way (device scope).
    #[inline(always)]
    pub fn compare_exchange(&self, expected: T, new: T) -> T {
        // SAFETY: an `Atomic` is valid, aligned global memory accessed only atomically.
        unsafe { T::atomic_cas(self.as_ptr(), expected, new, Scope::Device) }
    }

    /// [`compare_exchange`](Self::compare_exchange) at the given scope.
    #[inline(always)]
    pub fn compare_exchange_scoped(&self, scope: Scope, expected: T, new: T) -> T {
        // SAFETY: as above.
        unsafe { T::atomic_cas(self.as_ptr(), expected, new, scope) }
    }
}

/// Atomically adds `value` to `*target` at device scope, returning nothing (`red.add`:
/// `atomicAdd` with the result unused, which saves the round trip).
#[inline(always)]
pub fn add<T: AtomicAdd>(target: &Atomic<T>, value: T) {
    target.add(value)
}

/// The first API's `f32` add, kept so that old kernels say what replaced it.
#[deprecated(
    note = "use `atomic::add(target, value)` (or `target.add(value)`) on an `&Atomic<f32>`, e.g. an element of an `AtomicSlice<f32>`: an add through `&mut f32` was a data race"
)]
#[inline(always)]
pub fn add_f32(target: &Atomic<f32>, value: f32) {
    add(target, value)
}

impl<T: AtomicAdd> Atomic<T> {
    /// Adds `value` at device scope and returns nothing (`red.add`).
    #[inline(always)]
    pub fn add(&self, value: T) {
        // The unused result lets ptxas pick the reduction form (RED) by itself.
        let _ = self.fetch_add(value);
    }
}
