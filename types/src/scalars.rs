//! The one list of the primitives a kernel takes by value, for the host's `KernelScalar` and
//! the device crate's `DeviceScalar` (G17R-2, G19R-1): the host passes a value of exactly the
//! primitive the device entry takes, so both sides must name the same types.

/// Implements an `unsafe` marker trait for every primitive a kernel takes by value: `bool`,
/// the integers (`i8`..`i64`, `isize`, `u8`..`u64`, `usize`), `f32`, `f64` and the non-zero
/// integers (`NonZero<u8>`..`NonZero<isize>`). Written `impl_kernel_scalars!(unsafe impl Trait);`
/// (the `unsafe` says at the call site what the expansion is).
///
/// The one list that the host's `KernelScalar` and the device crate's `DeviceScalar` are
/// implemented from, so that the two cannot drift apart: a primitive the host passes by value
/// and the device entry does not take (or the reverse) would be a value of one type read as
/// another.
///
/// # Safety
/// The caller's trait must be one that plain data without pointers may implement: every value
/// of these types the host holds is valid on the device, and none holds a host pointer. The
/// type names resolve at the call site, which must not shadow a primitive's name (the crates
/// that call it are ferrocuda's own; a user crate has no reason to).
#[macro_export]
macro_rules! impl_kernel_scalars {
    (unsafe impl $trait:path) => {
        $crate::impl_kernel_scalars!(@each $trait: bool, i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64,
            ::core::num::NonZero<u8>,
            ::core::num::NonZero<u16>,
            ::core::num::NonZero<u32>,
            ::core::num::NonZero<u64>,
            ::core::num::NonZero<usize>,
            ::core::num::NonZero<i8>,
            ::core::num::NonZero<i16>,
            ::core::num::NonZero<i32>,
            ::core::num::NonZero<i64>,
            ::core::num::NonZero<isize>
        );
    };
    (@each $trait:path: $($t:ty),*) => {
        // SAFETY: plain data, no pointers; a value the host holds is valid on the device (the
        // caller's contract, see the macro's `# Safety`).
        $(unsafe impl $trait for $t {})*
    };
}

#[cfg(test)]
mod tests {
    /// A marker implemented from the list, to see which types it names.
    ///
    /// # Safety
    /// None needed: a test marker.
    unsafe trait Listed {
        const NAMED: bool = true;
    }
    crate::impl_kernel_scalars!(unsafe impl Listed);

    fn named<T: Listed>() -> bool {
        T::NAMED
    }

    #[test]
    fn the_list_names_every_primitive_and_non_zero_integer() {
        assert!(named::<bool>() && named::<i8>() && named::<u64>() && named::<usize>() && named::<f32>() && named::<f64>());
        assert!(named::<core::num::NonZeroU32>() && named::<core::num::NonZeroIsize>());
    }
}
