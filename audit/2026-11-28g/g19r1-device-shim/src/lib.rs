//! G19R-1 (audit 2026-11-28g): the device runtime under another crate's name. A kernel crate that
//! depends on this crate as `ferrocuda_device` (Cargo's `package =` rename) gets every item of
//! the real `ferrocuda_device`, and one item of this crate's own: `__private::key_of`, which
//! `#[kernel]`'s generated code calls (through `::ferrocuda_device::__private::key_of`) to fill
//! the device build's table of parameter type keys, the table the first launch compares with
//! the host build's. Returning 0 ("unknown": the host does not compare it) switches the check
//! off. No `unsafe` in this crate.
#![no_std]

pub use ferrocuda_device::*;

/// The real `__private`, but for `key_of`.
#[doc(hidden)]
pub mod __private {
    pub use ferrocuda_device::__private::*;

    /// "Unknown" for every type: the host compares no device key of 0. No `LayoutKey` bound,
    /// so the device build may give a parameter any type at all.
    pub const fn key_of<T: ?Sized>() -> u64 {
        0
    }
}
