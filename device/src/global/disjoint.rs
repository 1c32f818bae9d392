//! [`DisjointSlice`]: an output each thread writes its own elements of.

use core::marker::PhantomData;

use bytemuck::Pod;

use super::{KernelOutput, LaunchRequirements, ThreadIndex};

/// A kernel output that each thread writes only its own elements of: those named by a
/// [`ThreadIndex`] (from [`unique_index`](super::unique_index) or
/// [`grid_stride`](super::grid_stride)). Thread `t` of a launch of `threads` threads owns the
/// elements `t, t + threads, t + 2 * threads, ...`, and nothing else gives access to them.
///
/// ```ignore
/// #[kernel]
/// pub fn saxpy(a: f32, x: &[f32], mut y: DisjointSlice<f32>) {
///     let i = thread::unique_index();
///     if let Some(y_i) = y.get_mut(i) {
///         *y_i = a * x[i.get()] + *y_i;
///     }
/// }
/// ```
///
/// It is a pointer and a length, not a `&mut [T]`: the compiler makes no assumption that
/// other threads leave the memory alone, so nothing is miscompiled across barriers, and the
/// accesses compile to plain `ld.global`/`st.global`. The host launcher takes the buffer as
/// `&mut` (exclusive for the launch), `launch_cpu` a `&mut [T]`; both refuse a launch that is
/// not 1-D or has more than `u32::MAX` threads, which keeps the witnesses unique.
///
/// It has exactly one index-to-element map. Several elements per thread in a row are a
/// [`DisjointChunks`](super::DisjointChunks), one element per block a
/// [`PerBlock`](super::PerBlock), structure-of-arrays results a
/// [`DisjointPlanes`](super::DisjointPlanes): each is its own parameter type, so one buffer
/// has one map during a launch (audit finding N1). To read what other threads wrote, use an
/// [`AtomicSlice`](super::AtomicSlice). For index patterns a witness cannot express (tiles,
/// transposes) there is an `unsafe` escape hatch: [`get_unchecked_mut`](Self::get_unchecked_mut),
/// [`write_unchecked`](Self::write_unchecked), [`as_mut_slice`](Self::as_mut_slice).
pub struct DisjointSlice<T: Pod> {
    pointer: *mut T,
    len: usize,
    _elements: PhantomData<*mut T>,
}

// SAFETY: `from_raw_parts` keeps the pointer and length; every access goes through a witness
// of the per-thread partition (`ThreadIndex`), which `LINEAR_THREADS` makes unique.
unsafe impl<T: Pod> KernelOutput for DisjointSlice<T> {
    type Element = T;
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS;
    type Shape = ();

    #[inline(always)]
    unsafe fn from_raw_parts(pointer: *mut T, len: usize, (): ()) -> Self {
        DisjointSlice { pointer, len, _elements: PhantomData }
    }
}

impl<T: Pod> super::WholeBufferOutput for DisjointSlice<T> {}

impl<T: Pod> DisjointSlice<T> {
    /// Tells the CPU executor's race detector that this thread takes elements
    /// `index..index + count` (nothing on the GPU).
    #[inline(always)]
    fn note(&self, index: usize, count: usize, write: bool) -> *mut T {
        super::note_output(self.pointer, self.len, index, count, write)
    }

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

    /// This thread's element `index`, or `None` past the end.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut(&mut self, index: ThreadIndex) -> Option<&mut T> {
        let i = index.owned();
        if i < self.len {
            let pointer = self.note(i, 1, true);
            // SAFETY: in bounds; no other thread holds `index` (see `ThreadIndex`), and the
            // borrow of `self` keeps this thread from making a second reference to it.
            Some(unsafe { &mut *pointer.add(i) })
        } else {
            None
        }
    }

    /// The element at `index`, which this thread alone accesses, without a bounds check.
    ///
    /// # Safety
    /// `index < self.len()`, and **no other thread of the launch reads or writes element
    /// `index` at any time during the launch** (through any parameter or pointer; a barrier
    /// between the accesses does not make it valid: hand data between threads with an
    /// [`AtomicSlice`](super::AtomicSlice)).
    #[inline(always)]
    pub unsafe fn get_unchecked_mut(&mut self, index: usize) -> &mut T {
        let pointer = self.note(index, 1, true);
        // SAFETY: the caller keeps the index in bounds and the element to this thread.
        unsafe { &mut *pointer.add(index) }
    }

    /// Writes `value` to element `index` without a bounds check.
    ///
    /// # Safety
    /// As for [`get_unchecked_mut`](Self::get_unchecked_mut).
    #[inline(always)]
    pub unsafe fn write_unchecked(&mut self, index: usize, value: T) {
        let pointer = self.note(index, 1, true);
        // SAFETY: as the caller guarantees.
        unsafe { pointer.add(index).write(value) }
    }

    /// The whole output as a slice.
    ///
    /// # Safety
    /// For as long as the slice is used, **every element this thread reads or writes through
    /// it is accessed by no other thread of the launch at any time during the launch**
    /// (elements it does not touch may belong to other threads). This is the rule `&mut`
    /// carries for the compiler; breaking it lets the compiler reuse stale values across
    /// barriers (audit finding U2).
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

impl<T: Pod> core::ops::Index<ThreadIndex> for DisjointSlice<T> {
    type Output = T;

    /// This thread's element; panics past the end, like slice indexing.
    #[inline(always)]
    #[track_caller]
    fn index(&self, index: ThreadIndex) -> &T {
        let i = index.owned();
        if i >= self.len {
            super::out_of_bounds(i, self.len);
        }
        let pointer = self.note(i, 1, false);
        // SAFETY: in bounds; only this thread holds `index`, and `&self` keeps it from making
        // a `&mut` to the element at the same time.
        unsafe { &*pointer.add(i) }
    }
}

impl<T: Pod> core::ops::IndexMut<ThreadIndex> for DisjointSlice<T> {
    /// This thread's element; panics past the end, like slice indexing.
    #[inline(always)]
    #[track_caller]
    fn index_mut(&mut self, index: ThreadIndex) -> &mut T {
        let len = self.len;
        match self.get_mut(index) {
            Some(element) => element,
            None => super::out_of_bounds(index.get(), len),
        }
    }
}
