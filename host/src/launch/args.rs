//! What a typed launcher hands to the launch besides slices (`memory::view::SliceArg`): each
//! argument's `void*`, and the by-value check.

use std::ffi::c_void;
use std::marker::PhantomData;

use crate::memory::view::{DevicePtr, OptionalSliceArg, SliceArg};
use crate::{LaunchConfig, LaunchProblem};
use ferrocuda_types::OutputLaunch;

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
/// memory ([`SliceArg`], made from a [`DeviceRead`]/[`DeviceWrite`] value), an output's address
/// with what its launch must meet ([`OutputArg`]), a `same_len` group member's length with the
/// group's relation ([`SameLen`]), a tensor map's device copy ([`MapArg`]) or a raw device
/// pointer (the launchers of such kernels are `unsafe`).
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
/// The same holds for what the launch's *shape* must meet (session 19, G18S-1): an output's
/// parameter carries its output's facts ([`OutputArg`]: `REQUIREMENTS` and the launch-time
/// bound of its type, its buffer's length and shape) and a `same_len` member's length parameter
/// its group's relation ([`SameLen`]), and the real launch checks them against its own
/// configuration before anything else, so the launchers' checks, renamed away, leave nothing
/// unchecked.
///
/// [`DeviceRead`]: crate::memory::view::DeviceRead
/// [`DeviceWrite`]: crate::memory::view::DeviceWrite
/// [`MapArg`]: crate::tensor_map::MapArg
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct KernelParam<'a> {
    value: *mut c_void,
    /// What the launch must meet for this parameter to be what the kernel assumes.
    fact: Option<&'a (dyn LaunchFact + 'a)>,
    _borrow: PhantomData<&'a ()>,
}

impl std::fmt::Debug for KernelParam<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelParam").field("value", &self.value).field("checked", &self.fact.is_some()).finish()
    }
}

impl<'a> KernelParam<'a> {
    fn of<T>(value: &'a T) -> Self {
        KernelParam { value: value as *const T as *mut c_void, fact: None, _borrow: PhantomData }
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

    /// The device address of a slice argument: never null (every [`SliceArg`] is real memory, or
    /// a dangling aligned address when empty), so the entry's `&[T]` is a valid reference.
    #[inline(always)]
    pub fn slice_address(arg: &'a SliceArg<'_>) -> Self {
        Self::of(&arg.ptr)
    }

    /// The device address of an optional input's argument: the slice's, or null for `None`
    /// (the entry's `Option<&[T; 0]>`). Only an [`OptionalSliceArg`] can be absent, so a plain
    /// slice parameter never gets null (session 20: `SliceArg::absent()` was a null `SliceArg`).
    #[inline(always)]
    pub fn optional_slice_address(arg: &'a OptionalSliceArg<'_>) -> Self {
        Self::of(arg.address())
    }

    /// The length of an optional input's argument (0 for `None`).
    #[inline(always)]
    pub fn optional_slice_len(arg: &'a OptionalSliceArg<'_>) -> Self {
        Self::of(arg.len_ref())
    }

    /// The length of a slice argument.
    #[inline(always)]
    pub fn slice_len(arg: &'a SliceArg<'_>) -> Self {
        Self::of(&arg.len)
    }

    /// The device address of an output argument, carrying what the launch must meet for the
    /// output's partition to hold (checked by the launch itself, G18S-1).
    #[inline(always)]
    pub fn output_address<O: OutputLaunch>(arg: &'a OutputArg<'a, O>) -> Self {
        KernelParam { value: &arg.slice.ptr as *const u64 as *mut c_void, fact: Some(arg), _borrow: PhantomData }
    }

    /// The length of a `same_len(..)` group member after the first, carrying the relation the
    /// device entry relies on (it rebuilds the member with the first one's length; checked by
    /// the launch itself, G18S-1).
    #[inline(always)]
    pub fn same_len(group: &'a SameLen<'a>) -> Self {
        KernelParam { value: &group.member.1.len as *const usize as *mut c_void, fact: Some(group), _borrow: PhantomData }
    }

    /// The device address of a tensor map's copy.
    #[inline(always)]
    pub fn tensor_map(arg: &'a crate::tensor_map::MapArg<'_>) -> Self {
        Self::of(arg.address_ref())
    }

    /// A raw device pointer: only kernels whose launchers are `unsafe` take one.
    ///
    /// # Safety
    /// The parameter it fills is a raw pointer parameter of an `unsafe` kernel, whose caller
    /// promised what the kernel does with the address. Safe, this was a way to put any address
    /// where a slice parameter's belongs, from a crate that renames `ferrocuda_host` (audit
    /// 2026-11-28g, G19R-3's class: a `KernelParam` made by a safe constructor must carry
    /// memory the launch was lent).
    #[inline(always)]
    pub unsafe fn device_ptr<T>(pointer: &'a DevicePtr<T>) -> Self {
        Self::of(pointer.address_ref())
    }

    /// The `void*`s the driver takes, once every parameter's fact holds for `config`: the
    /// launch's own check of what its outputs and `same_len` groups require (G18S-1), made
    /// before anything is queued, whatever the launcher checked through paths its crate could
    /// rename.
    ///
    /// # Errors
    /// The first parameter's [`LaunchProblem`], in parameter order.
    #[inline(always)]
    pub(crate) fn checked_driver_params<const N: usize>(params: &[KernelParam<'a>; N], config: &LaunchConfig) -> Result<[*mut c_void; N], LaunchProblem> {
        for param in params {
            if let Some(fact) = param.fact {
                fact.check(config)?;
            }
        }
        Ok(std::array::from_fn(|i| params[i].value))
    }
}

/// What a launch must meet for one parameter to be what the kernel assumes: an output's
/// partition ([`OutputArg`]), a `same_len` group's relation ([`SameLen`]).
pub(crate) trait LaunchFact {
    /// `Ok` when `config` (and the arguments the fact holds) meet it.
    fn check(&self, config: &LaunchConfig) -> Result<(), LaunchProblem>;
}

/// An output parameter's argument with what its launch must meet: the output type `O`'s
/// [`OutputLaunch`] facts (its `REQUIREMENTS` and launch-time bound, an `unsafe` trait
/// implemented by the device crate's output type), its buffer's length and its shape (the
/// `cols(..)` width, the same value the kernel gets). Made by the generated launchers, read by
/// the launch through [`KernelParam::output_address`] (session 19, G18S-1: the launchers'
/// separate checks are reached through paths the kernel's crate can rename, and replaced by
/// no-ops a 2-D launch of a per-thread output reached the GPU).
#[doc(hidden)]
pub struct OutputArg<'a, O: OutputLaunch> {
    slice: &'a SliceArg<'a>,
    name: &'static str,
    shape: O::Shape,
    _output: PhantomData<fn() -> O>,
}

impl<'a, O: OutputLaunch> OutputArg<'a, O> {
    /// The output `name`'s argument `slice`, for the output type `O` with `shape`. The type
    /// comes last, as a marker, so that the compiler meets the shape before it knows the type
    /// (a shape of the wrong type is then reported once, at the output's construction).
    #[inline(always)]
    pub fn new(slice: &'a SliceArg<'a>, name: &'static str, shape: O::Shape, _output: PhantomData<O>) -> Self {
        OutputArg { slice, name, shape, _output: PhantomData }
    }
}

impl<O: OutputLaunch> LaunchFact for OutputArg<'_, O> {
    #[inline]
    fn check(&self, config: &LaunchConfig) -> Result<(), LaunchProblem> {
        O::check(self.name, config, self.slice.len, self.shape)
    }
}

/// A `same_len(first, .., member, ..)` group's relation for one member after the first: both
/// lengths equal. Read by the launch through [`KernelParam::same_len`] (G18S-1).
#[doc(hidden)]
pub struct SameLen<'a> {
    first: (&'static str, &'a SliceArg<'a>),
    member: (&'static str, &'a SliceArg<'a>),
}

impl<'a> SameLen<'a> {
    /// The relation of `member` (name, argument) to the group's `first`.
    #[inline(always)]
    pub fn new(first: (&'static str, &'a SliceArg<'a>), member: (&'static str, &'a SliceArg<'a>)) -> Self {
        SameLen { first, member }
    }
}

impl LaunchFact for SameLen<'_> {
    #[inline]
    fn check(&self, _config: &LaunchConfig) -> Result<(), LaunchProblem> {
        ferrocuda_types::same_lengths(&[(self.first.0, self.first.1.len), (self.member.0, self.member.1.len)])
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
// The one list, shared with the device crate's `DeviceScalar` (ferrocuda-types).
ferrocuda_types::impl_kernel_scalars!(unsafe impl KernelScalar);

/// Compile-time check used by generated launchers: `Written`, a parameter type spelled like
/// a primitive, is that primitive, and `Primitive` (the path the macro wrote) names a real one
/// ([`KernelScalar`], G17R-2).
#[doc(hidden)]
#[inline(always)]
pub fn require_primitive<Written: SamePrimitive<Primitive>, Primitive: KernelScalar>() {}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocuda_types::LaunchRequirements;

    /// A per-thread output's facts, as the device crate's `DisjointSlice<T>` has them.
    struct PerThread;
    // SAFETY: a test type that is never given to a kernel.
    unsafe impl OutputLaunch for PerThread {
        type Shape = ();
        const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS;
        fn check_launch(_: &'static str, _: &LaunchConfig, _: usize, _: ()) -> Result<(), LaunchProblem> {
            Ok(())
        }
    }

    /// A row-major output whose launch-time bound needs the row width to divide the length.
    struct Rows;
    // SAFETY: as above.
    unsafe impl OutputLaunch for Rows {
        type Shape = u32;
        const REQUIREMENTS: LaunchRequirements = LaunchRequirements::NONE;
        fn check_launch(output: &'static str, _: &LaunchConfig, len: usize, cols: u32) -> Result<(), LaunchProblem> {
            if len.is_multiple_of(cols as usize) {
                Ok(())
            } else {
                Err(LaunchProblem::LengthsDiffer { first: output, first_len: len as u64, other: "cols", other_len: u64::from(cols) })
            }
        }
    }

    /// G18S-1 (audit 2026-11-28e, session 18's addendum): the launchers' checks of an output's
    /// requirements and of `same_len` groups are reached through paths the kernel's crate can
    /// rename, and replaced by no-ops the real launch got a 2-D launch of a per-thread output
    /// or a group of other lengths. The facts now travel in the parameters, and the launch's own
    /// check (`checked_driver_params`, called first by `launch_embedded` / `launch_in_module`)
    /// refuses them; the parameters' `void*`s are unchanged otherwise.
    #[test]
    fn g18s_1_the_launch_checks_what_its_outputs_and_groups_carry() {
        // SAFETY (here and below): the arguments are only checked, never launched.
        let (x, y) = unsafe { (SliceArg::from_parts::<u32>(0x1000, 64), SliceArg::from_parts::<u32>(0x2000, 64)) };
        let out = OutputArg::new(&y, "out", (), PhantomData::<PerThread>);
        let params = [KernelParam::slice_address(&x), KernelParam::slice_len(&x), KernelParam::output_address(&out), KernelParam::slice_len(&y)];
        let linear = LaunchConfig::new(2u32, 32u32);
        let raw = KernelParam::checked_driver_params(&params, &linear).expect("a 1-D launch meets a per-thread output");
        assert_eq!(raw[2], &y.ptr as *const u64 as *mut c_void, "the output's address is its slice's");
        assert_eq!(raw[1], &x.len as *const usize as *mut c_void);
        let planar = LaunchConfig::new(1u32, (32u32, 2u32));
        assert!(
            matches!(KernelParam::checked_driver_params(&params, &planar), Err(LaunchProblem::NotOneDimensional { .. })),
            "a 2-D launch of a per-thread output is refused by the launch"
        );
        // A shape the output's launch-time bound refuses (64 elements, rows of 5).
        let rows = OutputArg::new(&y, "rows", 5u32, PhantomData::<Rows>);
        assert!(KernelParam::checked_driver_params(&[KernelParam::output_address(&rows)], &linear).is_err());
        let rows = OutputArg::new(&y, "rows", 8u32, PhantomData::<Rows>);
        assert!(KernelParam::checked_driver_params(&[KernelParam::output_address(&rows)], &linear).is_ok());
        // `same_len(x, short)`: the member's length parameter carries the relation.
        let short = unsafe { SliceArg::from_parts::<u32>(0x3000, 1) };
        let group = SameLen::new(("x", &x), ("short", &short));
        let params = [KernelParam::slice_len(&x), KernelParam::same_len(&group)];
        assert!(matches!(
            KernelParam::checked_driver_params(&params, &linear),
            Err(LaunchProblem::LengthsDiffer { first: "x", first_len: 64, other: "short", other_len: 1 })
        ));
        let same = SameLen::new(("x", &x), ("y", &y));
        let raw = KernelParam::checked_driver_params(&[KernelParam::same_len(&same)], &linear).expect("equal lengths");
        assert_eq!(raw[0], &y.len as *const usize as *mut c_void, "the member's own length goes to the kernel");
    }
}
