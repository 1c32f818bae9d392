//! [`UncheckedSlice`]: an output whose element ownership the kernel's own `unsafe` code
//! states.

use core::marker::PhantomData;

use bytemuck::Pod;

use super::{KernelOutput, LaunchRequirements};

/// A kernel output written only through `unsafe` accesses, for index patterns no witness
/// expresses (2-D tiles, transposes, several threads per row) and for launches of any shape.
/// Each access's contract is the same as [`DisjointSlice::get_unchecked_mut`]'s: the element
/// is in bounds and **no other thread of the launch reads or writes it at any time during the
/// launch**; the kernel's `// SAFETY:` comment says why.
///
/// It has no safe element access at all, so it needs nothing of the launch (unlike the
/// per-thread outputs, whose witnesses need a 1-D launch), and mixing it with witnesses is
/// impossible.
///
/// [`DisjointSlice::get_unchecked_mut`]: super::DisjointSlice::get_unchecked_mut
pub struct UncheckedSlice<T: Pod> {
    pointer: *mut T,
    len: usize,
    _elements: PhantomData<*mut T>,
}

// SAFETY: it hands out nothing in safe code; its `unsafe` methods carry the contract.
unsafe impl<T: Pod> KernelOutput for UncheckedSlice<T> {
    type Element = T;
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::NONE;
    type Shape = ();

    #[inline(always)]
    unsafe fn from_raw_parts(pointer: *mut T, len: usize, (): ()) -> Self {
        UncheckedSlice { pointer, len, _elements: PhantomData }
    }
}

impl<T: Pod> super::WholeBufferOutput for UncheckedSlice<T> {}

impl<T: Pod> UncheckedSlice<T> {
    /// Number of elements.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if there are no elements.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The element at `index`, without a bounds check.
    ///
    /// # Safety
    /// `index < self.len()`, and **no other thread of the launch reads or writes element
    /// `index` at any time during the launch** (a barrier between the accesses does not make
    /// it valid: hand data between threads with an [`AtomicSlice`](super::AtomicSlice)).
    #[inline(always)]
    pub unsafe fn get_unchecked_mut(&mut self, index: usize) -> &mut T {
        // SAFETY: the caller keeps the index in bounds and the element to this thread.
        let pointer = super::note_output(self.pointer, self.len, index, 1, true);
        unsafe { &mut *pointer.add(index) }
    }

    /// Writes `value` to element `index` without a bounds check.
    ///
    /// # Safety
    /// As for [`get_unchecked_mut`](Self::get_unchecked_mut).
    #[inline(always)]
    pub unsafe fn write_unchecked(&mut self, index: usize, value: T) {
        // SAFETY: as the caller guarantees.
        let pointer = super::note_output(self.pointer, self.len, index, 1, true);
        unsafe { pointer.add(index).write(value) }
    }

    /// The whole output as a slice.
    ///
    /// # Safety
    /// For as long as the slice is used, every element this thread reads or writes through it
    /// is accessed by no other thread of the launch at any time during the launch.
    #[inline(always)]
    pub unsafe fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: valid for `len` elements; exclusivity of the touched ones is the caller's.
        unsafe { core::slice::from_raw_parts_mut(super::raw_view(self.pointer, self.len), self.len) }
    }

    /// The start of the output, for pointer arithmetic and intrinsics (using it is `unsafe`,
    /// under the contract of [`get_unchecked_mut`](Self::get_unchecked_mut)).
    #[inline(always)]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        super::raw_view(self.pointer, self.len)
    }
}
