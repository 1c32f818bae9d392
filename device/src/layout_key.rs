//! [`LayoutKey`]: a structural key of a kernel parameter's type, computed identically by the
//! host and the device build, which the first launch of a kernel compares (audit 2026-11-27c,
//! F1).
//!
//! The first launch already compares each parameter's element (or by-value) type by size,
//! alignment and `core::any::type_name`. A `#[repr(C)]` struct whose *fields* a `cfg` on
//! `target_arch` changes (their order, or a field's type) keeps its name, size and alignment,
//! so that check passed it and the GPU read the host's bytes with another layout. A type that
//! implements `LayoutKey` is compared by its key instead: for a struct deriving it
//! (`#[derive(LayoutKey)]`), a hash of its name, size and alignment and, per field, of the
//! field's name, offset, size and the field type's own key, so a permuted field, a field of
//! another type, or a nested struct that differs anywhere gives another key. Integers, floats,
//! `bool`, `bf16`/`f16` and arrays of keyed types have fixed keys.
//!
//! Every type a kernel takes by value or as the element of a slice or output must have a key
//! (F1 gap, closed in session 10): integers, floats, `bool`, the 16-bit floats and their pairs,
//! and arrays of keyed types have theirs here; a struct needs `#[derive(LayoutKey)]` (beside
//! `Pod`), or `#[kernel]` does not compile, with a message that says so. Before, a struct that
//! derived only `Pod` was compared by its name, size and alignment alone, so a `cfg` that
//! reordered or retyped its fields passed the check.

/// A key of the type's layout that the host and the device build compute the same way, so
/// that the first launch of a kernel can tell whether both builds see the same type (fields,
/// their order, offsets and types; see the [module](self)). Derive it on `#[repr(C)]` structs
/// that kernels take by value or as elements: `#[derive(Clone, Copy, Pod, Zeroable,
/// LayoutKey)]`. Every field's type must implement it too (derive it on nested structs).
///
/// # Safety
/// Two types' keys are equal only when their layouts are: the same size and alignment, and, for
/// a struct, the same fields (names, offsets, sizes, types' keys) in the same order, as the
/// derive computes it. The first launch of a kernel trusts the keys to tell the host build's
/// types from the device build's (and mixes into them what else both builds must agree on: an
/// output's partition, a `same_len` group, which parameter gives a `cols(..)` width), and a
/// device key of 0 is taken for "unknown" and not compared. A hand-written key could therefore
/// make a kernel whose builds disagree pass, and the device then reads a slice with another
/// length or writes an output with another map: the trait was safe to implement ("a wrong key
/// only weakens the check") until audit 2026-11-28e, G17R-5, showed a key chosen per build
/// undoing G13R-5's check (a `same_len` group of the device build alone: written past the
/// output). Derive it (`#[derive(LayoutKey)]` writes the `unsafe impl`); write one by hand only
/// for a generic struct, computing its key as the derive does.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no layout key, so a kernel cannot take it",
    label = "kernel parameters (by value, or as slice and output elements) need `LayoutKey`",
    note = "a struct that kernels take derives `ferrocuda_device::LayoutKey` beside `bytemuck::Pod` (`#[derive(Pod, Zeroable, \
            LayoutKey)]`): the first launch compares its fields' names, offsets and types between the host and the device build \
            (every field of a keyed struct must be keyed; a generic struct needs a hand-written impl). A type that is not plain \
            data cannot be a kernel parameter at all: see the error about `Pod`"
)]
pub unsafe trait LayoutKey {
    /// The key: equal in the host and the device build exactly when the layout agrees.
    const LAYOUT_KEY: u64;
}

/// What `#[derive(LayoutKey)]` measures a struct with, named through this crate rather than
/// `::core` (a crate can make `::core` another crate with `extern crate self as core;`, and the
/// derive's `unsafe impl` must measure the real layout: audit 2026-11-28e, G17R-2).
#[doc(hidden)]
pub use core::mem::{align_of, offset_of, size_of};

/// Folds `word` into `hash` (FNV-1a over its 8 little-endian bytes): how keys are combined.
pub const fn mix(hash: u64, word: u64) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = hash;
    let mut i = 0;
    while i < 8 {
        hash ^= (word >> (8 * i)) & 0xff;
        hash = hash.wrapping_mul(PRIME);
        i += 1;
    }
    hash
}

/// The start of a struct's key: its name, size and alignment (the derive folds each field in
/// with [`field`]).
pub const fn start(name: &str, size: usize, align: usize) -> u64 {
    mix(mix(ferrocuda_types::fingerprint(name), size as u64), align as u64)
}

/// Folds one field into a struct's key: its name, offset, size and its type's key.
pub const fn field(hash: u64, name: &str, offset: usize, size: usize, key: u64) -> u64 {
    mix(mix(mix(mix(hash, ferrocuda_types::fingerprint(name)), offset as u64), size as u64), key)
}

macro_rules! keyed {
    ($($t:ty),*) => {$(
        // SAFETY: the key of the type's name, size and alignment: distinct primitives have
        // distinct names.
        unsafe impl LayoutKey for $t {
            const LAYOUT_KEY: u64 = start(stringify!($t), core::mem::size_of::<$t>(), core::mem::align_of::<$t>());
        }
    )*};
}
keyed!(
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    bool,
    crate::half::f16,
    crate::half::bf16,
    crate::half::Bf16x2,
    crate::half::F16x2,
    core::num::NonZeroU8,
    core::num::NonZeroU16,
    core::num::NonZeroU32,
    core::num::NonZeroU64,
    core::num::NonZeroUsize,
    core::num::NonZeroI8,
    core::num::NonZeroI16,
    core::num::NonZeroI32,
    core::num::NonZeroI64,
    core::num::NonZeroIsize,
    ()
);

// SAFETY: the array's size, alignment and length and its element's key.
unsafe impl<T: LayoutKey, const N: usize> LayoutKey for [T; N] {
    const LAYOUT_KEY: u64 = mix(mix(start("[T; N]", core::mem::size_of::<Self>(), core::mem::align_of::<Self>()), N as u64), T::LAYOUT_KEY);
}

/// The key of `T`, as `#[kernel]`'s generated code reads it for each parameter's element (or
/// by-value) type, in the device build's table and in the host build's launcher: a type
/// without [`LayoutKey`] is a compile error at the parameter's type.
#[doc(hidden)]
pub const fn key_of<T: LayoutKey + ?Sized>() -> u64 {
    T::LAYOUT_KEY
}

#[cfg(test)]
mod tests {
    use super::*;

    mod host {
        #[derive(Clone, Copy, crate::LayoutKey)]
        #[repr(C)]
        pub struct Pair {
            pub a: u32,
            pub b: u32,
        }
        #[derive(Clone, Copy, crate::LayoutKey)]
        #[repr(C)]
        pub struct Elem {
            pub v: u32,
        }
        #[derive(Clone, Copy, crate::LayoutKey)]
        #[repr(C)]
        pub struct Outer {
            pub p: Pair,
            pub w: [f32; 2],
        }
    }
    mod device {
        #[derive(Clone, Copy, crate::LayoutKey)]
        #[repr(C)]
        pub struct Pair {
            pub b: u32,
            pub a: u32,
        }
        #[derive(Clone, Copy, crate::LayoutKey)]
        #[repr(C)]
        pub struct Elem {
            pub v: f32,
        }
        #[derive(Clone, Copy, crate::LayoutKey)]
        #[repr(C)]
        pub struct Outer {
            pub p: Pair,
            pub w: [f32; 2],
        }
    }
    mod same {
        #[derive(Clone, Copy, crate::LayoutKey)]
        #[repr(C)]
        pub struct Pair {
            pub a: u32,
            pub b: u32,
        }
    }

    /// F1 (audit 2026-11-27c): the shapes a `cfg` on `target_arch` made that passed the name,
    /// size and alignment check get other keys: permuted fields (r1), a field of another type
    /// of one size (r2), and a nested struct that differs (its outer struct's fields are the
    /// same); one struct written twice alike keeps its key.
    #[test]
    fn f1_structs_whose_fields_differ_get_other_layout_keys() {
        assert_ne!(<host::Pair as LayoutKey>::LAYOUT_KEY, <device::Pair as LayoutKey>::LAYOUT_KEY, "permuted fields");
        assert_ne!(<host::Elem as LayoutKey>::LAYOUT_KEY, <device::Elem as LayoutKey>::LAYOUT_KEY, "a field of another type");
        assert_ne!(<host::Outer as LayoutKey>::LAYOUT_KEY, <device::Outer as LayoutKey>::LAYOUT_KEY, "a nested struct differs");
        assert_eq!(<host::Pair as LayoutKey>::LAYOUT_KEY, <same::Pair as LayoutKey>::LAYOUT_KEY, "the same struct");
        assert_ne!(u32::LAYOUT_KEY, f32::LAYOUT_KEY);
        assert_ne!(<[u32; 2]>::LAYOUT_KEY, <[u32; 3]>::LAYOUT_KEY);
        assert_ne!(<[u32; 2]>::LAYOUT_KEY, u64::LAYOUT_KEY);
    }

    /// The generated code's reader gives the type's key (F1 gap: no fallback to the name).
    #[test]
    fn f1_the_generated_codes_reader_gives_the_structural_key() {
        assert_eq!(key_of::<host::Pair>(), <host::Pair as LayoutKey>::LAYOUT_KEY);
        assert_ne!(key_of::<crate::half::Bf16x2>(), key_of::<crate::half::F16x2>());
        assert_ne!(key_of::<crate::half::Bf16x2>(), key_of::<u32>());
    }
}
