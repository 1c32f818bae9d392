//! What a typed launcher hands to the launch besides slices (`memory::view::SliceArg`): each
//! argument's `void*`, and the by-value check.

use std::ffi::c_void;

/// A type that can be passed to a kernel by value: plain data with no pointers to host
/// memory. Every `bytemuck::Pod` type is one (derive `Pod` on a `#[repr(C)]` struct).
///
/// # Safety
/// Every bit pattern of the type's bytes must be valid on the device, and it must hold no
/// host pointers (what `Pod` promises).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed to a kernel by value",
    label = "not plain data",
    note = "kernel parameters by value must be integers, floats, bool, or `#[repr(C)]` structs that derive `bytemuck::Pod` and `bytemuck::Zeroable`"
)]
pub unsafe trait KernelValue: Copy {}
// SAFETY: `Pod` is exactly the promise above.
unsafe impl<T: bytemuck::Pod> KernelValue for T {}

/// Compile-time check used by generated launchers: `T` may be passed by value.
#[doc(hidden)]
#[inline(always)]
pub fn require_kernel_value<T: KernelValue>() {}

/// A by-value parameter's copy for one thread of a CPU launch (a GPU copies it to every thread):
/// a safe copy, bounded by `Copy` here. The CPU launcher used to copy with `ptr::read` in an
/// `unsafe` block, relying on the by-value checks; those are made through paths a crate can
/// make its own (`extern crate self as core;`, or `as ferrocuda_host` with the real `__private`
/// re-exported beside a check of its own), and a non-`Copy` type was then duplicated into every
/// thread and dropped once per thread (audit 2026-11-28e, G17R-2: a double free). A crate that
/// replaces this function has to write its own `unsafe` to duplicate a value.
#[doc(hidden)]
#[inline(always)]
pub fn copy_param<T: Copy>(value: &T) -> T {
    *value
}

/// The `void*` that `cuLaunchKernel` wants for one argument.
#[doc(hidden)]
#[inline(always)]
pub fn param_ptr<T>(value: &T) -> *mut c_void {
    value as *const T as *mut c_void
}

/// `Self` is the type `T`: what the by-value check of a parameter written as a primitive
/// (`u32`, `f64`, `NonZeroU32`) asks, so that an alias named like a primitive
/// (`type f64 = &'static u64`, audit finding N5) is refused instead of passed by value.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is written like the primitive `{T}` but is another type, and cannot be passed to a kernel by value",
    label = "not the primitive `{T}`",
    note = "a type alias or import named like a primitive (`type f64 = &'static u64;`, `use my::usize;`) hides the primitive: \
            write the primitive's full path (`::core::primitive::f64`) or rename the alias"
)]
pub trait SamePrimitive<T> {}
impl<T> SamePrimitive<T> for T {}

/// The primitives a kernel takes by value when its parameter is written like one (`u32`,
/// `bool`, `NonZeroU32`): implemented here, for the types this crate names, and nowhere else.
///
/// The generated launchers name the primitive by an absolute path (`::core::primitive::u32`),
/// and a crate can make that path name any type of its own with `extern crate self as core;`
/// (safe code). So the path alone proves nothing: the check bounds the named type by this
/// trait too, whose impls name the real primitives from inside this crate (audit 2026-11-28e,
/// G17R-2: `extern crate self as core` with `primitive::u32` a non-`Copy` type passed the
/// check, and the CPU launcher's bitwise copy of the parameter into every thread dropped one
/// `Box` once per thread; a `Copy` type holding a host reference went to a GPU by value).
///
/// # Safety
/// Implemented only for plain data whose every value the host holds is valid on the device and
/// holds no host pointer: the integers, floats, `bool` and the non-zero integers.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a primitive a kernel can take by value",
    label = "not a primitive",
    note = "a parameter written like a primitive (`u32`, `f64`, `bool`, `NonZeroU32`) must be that primitive: is `core` or `std` renamed in \
            this crate (`extern crate .. as core;`)?"
)]
pub unsafe trait KernelScalar: Copy + Send + Sync + 'static {}
macro_rules! kernel_scalars {
    ($($t:ty),*) => {
        // SAFETY: plain data, no pointers; a value the host holds is valid on the device.
        $(unsafe impl KernelScalar for $t {})*
    };
}
kernel_scalars!(bool, i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64);
kernel_scalars!(
    core::num::NonZero<u8>,
    core::num::NonZero<u16>,
    core::num::NonZero<u32>,
    core::num::NonZero<u64>,
    core::num::NonZero<usize>,
    core::num::NonZero<i8>,
    core::num::NonZero<i16>,
    core::num::NonZero<i32>,
    core::num::NonZero<i64>,
    core::num::NonZero<isize>
);

/// Compile-time check used by generated launchers: `Written`, a parameter type spelled like
/// a primitive, is that primitive, and `Primitive` (the path the macro wrote) names a real one
/// ([`KernelScalar`], G17R-2).
#[doc(hidden)]
#[inline(always)]
pub fn require_primitive<Written: SamePrimitive<Primitive>, Primitive: KernelScalar>() {}
