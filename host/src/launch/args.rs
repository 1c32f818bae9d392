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

/// Compile-time check used by generated launchers: `Written`, a parameter type spelled like
/// a primitive, is that primitive.
#[doc(hidden)]
#[inline(always)]
pub fn require_primitive<Written: SamePrimitive<Primitive>, Primitive>() {}
