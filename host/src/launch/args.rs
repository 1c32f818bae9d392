//! What a typed launcher hands to the launch besides slices (`memory::view::SliceArg`): each
//! argument's `void*`, and the by-value check.

use std::ffi::c_void;
use std::marker::PhantomData;

use crate::memory::view::{DevicePtr, SliceArg};

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

/// One parameter of a launch as `cuLaunchKernel` takes it (the address of its value), made only
/// by this type's constructors, from values whose types say what they are on the GPU: a
/// primitive ([`KernelScalar`]), plain data ([`KernelValue`]), the address and length of device
/// memory ([`SliceArg`], made from a [`DeviceRead`]/[`DeviceWrite`] value), a tensor map's device
/// copy ([`MapArg`]) or a raw device pointer (the launchers of such kernels are `unsafe`).
///
/// [`launch_embedded`](crate::launch::launch_embedded) and
/// [`launch_in_module`](crate::launch::launch_in_module) take these instead of raw `void*`s
/// (session 18, G17R-2's residual): the generated launcher reaches them through paths the
/// kernel's crate can rename (`extern crate self as ferrocuda_host;`, a dependency renamed in
/// Cargo.toml) beside checks of its own, and a check made through such a path cannot protect
/// `unsafe` code reached through another. Bounds on the constructors of the type the real
/// launch takes are checked wherever the path leads: a crate that replaces these constructors
/// makes a type of its own, which the real launch refuses (a compile error), and a crate that
/// replaces the launch too calls its own function, whose `unsafe` it writes itself.
///
/// [`DeviceRead`]: crate::memory::view::DeviceRead
/// [`DeviceWrite`]: crate::memory::view::DeviceWrite
/// [`MapArg`]: crate::tensor_map::MapArg
#[doc(hidden)]
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct KernelParam<'a> {
    value: *mut c_void,
    _borrow: PhantomData<&'a ()>,
}

impl<'a> KernelParam<'a> {
    fn of<T>(value: &'a T) -> Self {
        KernelParam { value: value as *const T as *mut c_void, _borrow: PhantomData }
    }

    /// A parameter written like a primitive (`u32`, `f64`, `NonZeroU32`): `Written` must be the
    /// primitive `Primitive` names, and that a real one ([`require_primitive`]'s bounds).
    #[inline(always)]
    pub fn scalar<Written: SamePrimitive<Primitive>, Primitive: KernelScalar>(value: &'a Written) -> Self {
        Self::of(value)
    }

    /// A by-value parameter of plain data ([`KernelValue`]: `Pod`, no host pointers).
    #[inline(always)]
    pub fn value<T: KernelValue>(value: &'a T) -> Self {
        Self::of(value)
    }

    /// The device address of a slice argument.
    #[inline(always)]
    pub fn slice_address(arg: &'a SliceArg<'_>) -> Self {
        Self::of(&arg.ptr)
    }

    /// The length of a slice argument.
    #[inline(always)]
    pub fn slice_len(arg: &'a SliceArg<'_>) -> Self {
        Self::of(&arg.len)
    }

    /// The device address of a tensor map's copy.
    #[inline(always)]
    pub fn tensor_map(arg: &'a crate::tensor_map::MapArg<'_>) -> Self {
        Self::of(arg.address_ref())
    }

    /// A raw device pointer: only kernels whose launchers are `unsafe` take one.
    #[inline(always)]
    pub fn device_ptr<T>(pointer: &'a DevicePtr<T>) -> Self {
        Self::of(pointer.address_ref())
    }

    /// The `void**` the driver takes.
    #[inline(always)]
    pub(crate) fn as_driver_params<'s>(params: &'s mut [KernelParam<'a>]) -> &'s mut [*mut c_void] {
        // SAFETY: `KernelParam` is `repr(transparent)` over one `*mut c_void` (the marker is
        // zero-sized), so the slices have one layout; the borrow is the caller's.
        unsafe { std::slice::from_raw_parts_mut(params.as_mut_ptr().cast::<*mut c_void>(), params.len()) }
    }
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
