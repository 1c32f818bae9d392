//! [`AtomicSlice`]: global memory every thread may read and update, atomically.

use super::LaunchRequirements;
use super::slice::{DisjointSlice, Partition};
use crate::atomic::{Atomic, AtomicAdd, AtomicAnd, AtomicCompareExchange, AtomicElement, AtomicExchange, AtomicMax, AtomicMin, AtomicOr, AtomicXor, Scope};

/// A kernel parameter whose elements any thread may read and write, atomically: counters,
/// histograms, reductions, flags, and data that threads hand to each other across a barrier
/// (`sync_threads()`) or a grid sync.
///
/// ```ignore
/// #[kernel]
/// pub fn count(out: AtomicSlice<u32>) {
///     out.add(0, 1); // every thread, one element
/// }
/// ```
///
/// Every access is one PTX instruction on global memory: `load`/`store` are
/// `ld.relaxed.gpu`/`st.relaxed.gpu` (coherent at device scope, so after a barrier or grid
/// sync a thread sees what the others stored before it), the read-modify-writes are
/// `atom`/`red`. All are relaxed: they order no other memory access (pair them with
/// [`crate::sync`] fences for that). Indices are bounds-checked like a slice's (a panic past
/// the end); [`at`](Self::at) gives one element as an [`Atomic`] cell.
///
/// Plain (non-atomic) access to the same buffer is impossible in safe code: the host launcher
/// borrows the buffer exclusively for this parameter.
pub type AtomicSlice<'a, T> = DisjointSlice<'a, T, Atomics>;

/// The partition of [`AtomicSlice`]: every thread may reach every element, atomically (no
/// plain access in safe code, so no two threads' accesses race). No launch requirement.
pub struct Atomics;

// SAFETY: every safe access is atomic, bounds-checked.
unsafe impl Partition for Atomics {
    const KEY: u64 = super::slice::partition_key("Atomics", &[]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::NONE;
    type Shape = ();
    const ATOMIC_WORD: usize = Self::ATOMIC_ELEMENTS;
}

macro_rules! forward {
    ($($(#[$doc:meta])* $name:ident, $scoped:ident: $bound:ident;)*) => {$(
        $(#[$doc])*
        /// Device scope; returns the old value. Panics if `index` is out of bounds.
        #[inline(always)]
        #[track_caller]
        pub fn $name(&self, index: usize, value: T) -> T where T: $bound {
            self.at(index).$name(value)
        }

        $(#[$doc])*
        /// At the given scope; returns the old value. Panics if `index` is out of bounds.
        #[inline(always)]
        #[track_caller]
        pub fn $scoped(&self, scope: Scope, index: usize, value: T) -> T where T: $bound {
            self.at(index).$scoped(scope, value)
        }
    )*};
}

impl<T: AtomicElement> DisjointSlice<'_, T, Atomics> {
    /// Element `index` as an atomic cell, or `None` past the end.
    #[inline(always)]
    pub fn get(&self, index: usize) -> Option<&Atomic<T>> {
        if index < self.len {
            // SAFETY: in bounds and aligned; every access through an `Atomic` is atomic.
            Some(unsafe { Atomic::from_ptr(self.pointer.add(index)) })
        } else {
            None
        }
    }

    /// Element `index` as an atomic cell. Panics if `index` is out of bounds.
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, index: usize) -> &Atomic<T> {
        match self.get(index) {
            Some(cell) => cell,
            None => out_of_bounds(index, self.len),
        }
    }

    /// Element `index` as an atomic cell, without a bounds check.
    ///
    /// # Safety
    /// `index < self.len()`.
    #[inline(always)]
    pub unsafe fn at_unchecked(&self, index: usize) -> &Atomic<T> {
        // SAFETY: the caller keeps `index` in bounds.
        unsafe { Atomic::from_ptr(self.pointer.add(index)) }
    }

    /// Reads element `index` (relaxed, device scope). Panics if out of bounds.
    #[inline(always)]
    #[track_caller]
    pub fn load(&self, index: usize) -> T {
        self.at(index).load()
    }

    /// Writes element `index` (relaxed, device scope). Panics if out of bounds.
    #[inline(always)]
    #[track_caller]
    pub fn store(&self, index: usize, value: T) {
        self.at(index).store(value)
    }

    /// Adds `value` to element `index` and returns nothing (`red.add`, device scope). Panics
    /// if out of bounds.
    #[inline(always)]
    #[track_caller]
    pub fn add(&self, index: usize, value: T)
    where
        T: AtomicAdd,
    {
        self.at(index).add(value)
    }

    /// `atomicCAS` on element `index`: stores `new` if it holds `expected` (bitwise); returns
    /// the old value either way (device scope). Panics if out of bounds.
    #[inline(always)]
    #[track_caller]
    pub fn compare_exchange(&self, index: usize, expected: T, new: T) -> T
    where
        T: AtomicCompareExchange,
    {
        self.at(index).compare_exchange(expected, new)
    }

    forward! {
        /// `atomicAdd` on element `index`.
        fetch_add, fetch_add_scoped: AtomicAdd;
        /// `atomicMin` on element `index`.
        fetch_min, fetch_min_scoped: AtomicMin;
        /// `atomicMax` on element `index`.
        fetch_max, fetch_max_scoped: AtomicMax;
        /// `atomicExch` on element `index`.
        exchange, exchange_scoped: AtomicExchange;
        /// `atomicAnd` on element `index`.
        fetch_and, fetch_and_scoped: AtomicAnd;
        /// `atomicOr` on element `index`.
        fetch_or, fetch_or_scoped: AtomicOr;
        /// `atomicXor` on element `index`.
        fetch_xor, fetch_xor_scoped: AtomicXor;
    }

    /// The start of the buffer, e.g. for `core::sync::atomic::AtomicU32::from_ptr` (every
    /// access through it must be atomic).
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut T {
        self.pointer
    }
}

#[cold]
#[track_caller]
fn out_of_bounds(index: usize, len: usize) -> ! {
    // On the GPU a message with arguments would build a `core::fmt::Arguments` in every kernel
    // that indexes an `AtomicSlice`, and ptxas charged that path 14 more registers
    // (`dynamic_shared_sum`: 52 -> 66, too many for 1024 threads per block); `kernel_panic!`
    // keeps the two numbers without `core::fmt`.
    #[cfg(target_arch = "nvptx64")]
    crate::kernel_panic!("atomic index out of bounds: the len is {} but the index is {}", len, index);
    #[cfg(not(target_arch = "nvptx64"))]
    panic!("atomic index out of bounds: the len is {} but the index is {}", len, index)
}
