//! Kernel parameters in global memory that many GPU threads share, and the rules that keep
//! them sound.
//!
//! Every thread of a launch receives the same parameters. A `&mut [T]` given to all of them
//! would be a lie to the compiler (it is `noalias`: LLVM reuses a value read before
//! `sync_threads()` after it, audit finding U2), so `#[kernel]` does not accept one. Instead:
//!
//! | parameter | who may access what |
//! |---|---|
//! | `x: &[T]` | every thread reads any element; nobody writes (compiled to `ld.global.nc`) |
//! | [`DisjointSlice<T>`] | each thread writes (and reads) only the elements its [`ThreadIndex`] names |
//! | [`AtomicSlice<T>`] | every thread reads and writes any element, atomically; this is also how threads read each other's writes after a barrier or grid sync |
//!
//! Element types are [`bytemuck::Pod`]. An `unsafe` escape hatch
//! ([`DisjointSlice::get_unchecked_mut`], [`DisjointSlice::as_mut_slice`]) covers computed
//! index patterns that a witness cannot express, with the contract written there.
//!
//! On the host target (the CPU executor) the same types are raw-pointer wrappers built by the
//! generated `launch_cpu` from the host slices, with the same rules.

mod atomic_slice;
mod disjoint;
mod index;

pub use crate::atomic::{Atomic, AtomicElement, Scope};
pub use atomic_slice::AtomicSlice;
pub use disjoint::DisjointSlice;
pub use index::{GridStride, ThreadIndex, grid_stride, once_per_block, unique_index};

/// What the code `#[kernel]` generates calls to build these parameters; not public API.
#[doc(hidden)]
pub mod __private {
    use super::{AtomicElement, AtomicSlice, DisjointSlice};
    use bytemuck::Pod;

    /// Builds an output parameter from the pointer and length the host launcher passed.
    ///
    /// # Safety
    /// `pointer` is valid for reads and writes of `len` elements for the whole launch and no
    /// other parameter or memory access of the launch reaches those elements except through
    /// the kernel's copies of this parameter.
    #[inline(always)]
    pub unsafe fn disjoint<T: Pod>(pointer: *mut T, len: usize) -> DisjointSlice<T> {
        // SAFETY: forwarded.
        unsafe { DisjointSlice::from_raw_parts(pointer, len) }
    }

    /// As [`disjoint`], for an atomic parameter.
    ///
    /// # Safety
    /// As for [`disjoint`]; the pointer is aligned for `T`.
    #[inline(always)]
    pub unsafe fn atomic<T: AtomicElement>(pointer: *mut T, len: usize) -> AtomicSlice<T> {
        // SAFETY: forwarded.
        unsafe { AtomicSlice::from_raw_parts(pointer, len) }
    }

    /// A read-only host slice handed to every GPU thread of a CPU launch.
    pub struct InputParts<T> {
        pointer: *const T,
        len: usize,
    }

    // SAFETY: only shared references are made from it, and `T: Sync`.
    unsafe impl<T: Sync> Sync for InputParts<T> {}
    // SAFETY: as above.
    unsafe impl<T: Sync> Send for InputParts<T> {}

    impl<T> InputParts<T> {
        /// Keeps `slice`'s pointer and length.
        pub fn new(slice: &[T]) -> Self {
            InputParts { pointer: slice.as_ptr(), len: slice.len() }
        }

        /// The slice again.
        ///
        /// # Safety
        /// The slice this was made from is still borrowed (the launch has not returned).
        pub unsafe fn get<'a>(&self) -> &'a [T] {
            // SAFETY: as the caller guarantees.
            unsafe { core::slice::from_raw_parts(self.pointer, self.len) }
        }
    }

    /// An exclusively borrowed host slice handed to every GPU thread of a CPU launch as a
    /// [`DisjointSlice`] or an [`AtomicSlice`] (both only ever hand out what their rules allow).
    pub struct OutputParts<T> {
        pointer: *mut T,
        len: usize,
    }

    // SAFETY: the threads reach the elements only through `DisjointSlice` (each element from
    // one thread) or `AtomicSlice` (atomic accesses); `T: Send + Sync` so values may cross.
    unsafe impl<T: Send + Sync> Sync for OutputParts<T> {}
    // SAFETY: as above.
    unsafe impl<T: Send + Sync> Send for OutputParts<T> {}

    impl<T: Pod> OutputParts<T> {
        /// Keeps `slice`'s pointer and length; the slice stays borrowed by the caller's launch.
        pub fn new(slice: &mut [T]) -> Self {
            OutputParts { pointer: slice.as_mut_ptr(), len: slice.len() }
        }

        /// The slice as one GPU thread's output parameter.
        ///
        /// # Safety
        /// The slice this was made from is still exclusively borrowed by the launch.
        pub unsafe fn disjoint(&self) -> DisjointSlice<T> {
            // SAFETY: as the caller guarantees; the launch borrows it exclusively.
            unsafe { DisjointSlice::from_raw_parts(self.pointer, self.len) }
        }
    }

    impl<T: AtomicElement> OutputParts<T> {
        /// The slice as one GPU thread's atomic parameter.
        ///
        /// # Safety
        /// As for [`OutputParts::disjoint`].
        pub unsafe fn atomic(&self) -> AtomicSlice<T> {
            // SAFETY: as the caller guarantees.
            unsafe { AtomicSlice::from_raw_parts(self.pointer, self.len) }
        }
    }

    /// A raw pointer argument of an `unsafe` kernel, handed to every thread of a CPU launch.
    pub struct PointerParts<P>(P);

    // SAFETY: the launcher is an `unsafe fn` whose caller vouches for the pointer's use.
    unsafe impl<P> Sync for PointerParts<P> {}
    // SAFETY: as above.
    unsafe impl<P> Send for PointerParts<P> {}

    impl<P: Copy> PointerParts<P> {
        /// Wraps `pointer`.
        pub fn new(pointer: P) -> Self {
            PointerParts(pointer)
        }

        /// The pointer.
        pub fn get(&self) -> P {
            self.0
        }
    }

    /// Compile-time check the launchers use: slice elements must be plain data.
    pub const fn require_pod<T: Pod>() {}
}
