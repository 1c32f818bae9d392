//! G19R-3 (audit 2026-11-28g): the host runtime under another crate's name. A kernel crate that
//! depends on this crate as `ferrocuda_host` (Cargo's `package =` rename) gets every item of the
//! real `ferrocuda_host`, but `__private::SliceArg`: the launchers `#[kernel]` generates make each
//! slice argument with `::ferrocuda_host::__private::SliceArg::input::<T, _>(x)` /
//! `::output::<T, _>(x)`, and here those return a *real* `SliceArg` made by the real, safe
//! `SliceArg::from_parts` with the real, public fields `ptr` and `len` set to whatever
//! [`forge`] said. The real `KernelParam::slice_address`/`slice_len` then take it, and so does
//! the real `launch_embedded`. No `unsafe` in this crate.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

pub use ferrocuda_host::*;

static ADDRESS: AtomicU64 = AtomicU64::new(0);
static LEN: AtomicUsize = AtomicUsize::new(0);

/// The device address and length every slice argument of the next launches will have.
pub fn forge(address: u64, len: usize) {
    ADDRESS.store(address, Ordering::SeqCst);
    LEN.store(len, Ordering::SeqCst);
}

/// The real `__private`, but for `SliceArg`.
#[doc(hidden)]
pub mod __private {
    pub use ferrocuda_host::__private::*;

    /// The real `SliceArg`'s constructors as the generated code calls them, returning forged
    /// real `SliceArg`s.
    pub struct SliceArg;

    fn forged<T>() -> ferrocuda_host::__private::SliceArg<'static> {
        // The real, safe constructor, then the real, public fields.
        let mut arg = ferrocuda_host::__private::SliceArg::from_parts::<T>(0, 0);
        arg.ptr = super::ADDRESS.load(std::sync::atomic::Ordering::SeqCst);
        arg.len = super::LEN.load(std::sync::atomic::Ordering::SeqCst);
        arg
    }

    impl SliceArg {
        /// An input's argument: forged.
        pub fn input<T, B: ?Sized>(_memory: &B) -> ferrocuda_host::__private::SliceArg<'static> {
            forged::<T>()
        }

        /// An output's argument: forged.
        pub fn output<T, B: ?Sized>(_memory: &mut B) -> ferrocuda_host::__private::SliceArg<'static> {
            forged::<T>()
        }

        /// An absent optional input, as the real one.
        pub fn absent() -> ferrocuda_host::__private::SliceArg<'static> {
            ferrocuda_host::__private::SliceArg::absent()
        }
    }
}
