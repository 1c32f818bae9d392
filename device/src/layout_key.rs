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
//! A type without the trait (a struct that derives only `bytemuck::Pod`) is still compared by
//! its name, size and alignment: its fields are not checked (the remaining gap, README "Known
//! gaps"). Derive `LayoutKey` on every struct a kernel takes.

use core::marker::PhantomData;

/// A key of the type's layout that the host and the device build compute the same way, so
/// that the first launch of a kernel can tell whether both builds see the same type (fields,
/// their order, offsets and types; see the [module](self)). Derive it on `#[repr(C)]` structs
/// that kernels take by value or as elements: `#[derive(Clone, Copy, Pod, Zeroable,
/// LayoutKey)]`. Every field's type must implement it too (derive it on nested structs).
///
/// A wrong hand-written key cannot cause undefined behaviour by itself; it only weakens the
/// check, so the trait is safe to implement. Prefer the derive.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no layout key",
    label = "a field of this type is not keyed",
    note = "derive `ferrocuda_device::LayoutKey` on the struct `{Self}` (every field of a keyed struct must be keyed)"
)]
pub trait LayoutKey {
    /// The key: equal in the host and the device build exactly when the layout agrees.
    const LAYOUT_KEY: u64;
}

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
        impl LayoutKey for $t {
            const LAYOUT_KEY: u64 = start(stringify!($t), core::mem::size_of::<$t>(), core::mem::align_of::<$t>());
        }
    )*};
}
keyed!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64, bool, crate::half::f16, crate::half::bf16, ());

impl<T: LayoutKey, const N: usize> LayoutKey for [T; N] {
    const LAYOUT_KEY: u64 = mix(mix(start("[T; N]", core::mem::size_of::<Self>(), core::mem::align_of::<Self>()), N as u64), T::LAYOUT_KEY);
}

/// What `#[kernel]` reads a parameter type's key through: [`LayoutKey::LAYOUT_KEY`] where the
/// type implements it (this inherent impl), else the key of its name ([`KeyFallback`]).
#[doc(hidden)]
pub struct KeyProbe<T: ?Sized>(PhantomData<T>);

impl<T: LayoutKey> KeyProbe<T> {
    /// The type's structural key.
    #[cfg(target_arch = "nvptx64")]
    pub const KEY: u64 = T::LAYOUT_KEY;
    /// The type's structural key (the host build's launcher).
    pub fn key() -> u64 {
        T::LAYOUT_KEY
    }
}

/// The key of a type without [`LayoutKey`]: [`ferrocuda_types::type_key`] of its name (only
/// the name, size and alignment are compared for it).
#[doc(hidden)]
pub trait KeyFallback {
    /// The key of the type's name, at compile time (the device build's table).
    #[cfg(target_arch = "nvptx64")]
    const KEY: u64;
    /// The key of the type's name (the host build's launcher).
    fn key() -> u64;
}

impl<T: ?Sized> KeyFallback for KeyProbe<T> {
    #[cfg(target_arch = "nvptx64")]
    const KEY: u64 = ferrocuda_types::type_key(core::any::type_name::<T>());
    fn key() -> u64 {
        ferrocuda_types::type_key(core::any::type_name::<T>())
    }
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

    /// The probe reads a keyed type's key, and the name's key for a type without one.
    #[test]
    fn f1_the_probe_falls_back_to_the_name_for_unkeyed_types() {
        #[derive(Clone, Copy)]
        struct Plain;
        assert_eq!(KeyProbe::<host::Pair>::key(), <host::Pair as LayoutKey>::LAYOUT_KEY);
        assert_eq!(KeyProbe::<Plain>::key(), ferrocuda_types::type_key(core::any::type_name::<Plain>()));
    }
}
