//! [`DisjointSlice`]: an output each thread writes its own elements of.

use core::marker::PhantomData;

use bytemuck::Pod;

use super::ThreadIndex;

/// A kernel output that each thread writes only its own elements of: those named by a
/// [`ThreadIndex`] (from [`unique_index`](super::unique_index) or
/// [`grid_stride`](super::grid_stride)), which no other thread of the launch holds.
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
/// `&mut` (exclusive for the launch), `launch_cpu` a `&mut [T]`.
///
/// To read what other threads wrote, use an [`AtomicSlice`](super::AtomicSlice) instead. For
/// index patterns a witness cannot express (tiles, transposes, one warp per row) there is an
/// `unsafe` escape hatch: [`get_unchecked_mut`](Self::get_unchecked_mut),
/// [`write_unchecked`](Self::write_unchecked), [`as_mut_slice`](Self::as_mut_slice).
pub struct DisjointSlice<T: Pod> {
    pointer: *mut T,
    len: usize,
    _elements: PhantomData<*mut T>,
}

impl<T: Pod> DisjointSlice<T> {
    /// # Safety
    /// `pointer` is valid for reads and writes of `len` elements for the lifetime of the
    /// value, and every access to them during the launch goes through the kernel's copies of
    /// this parameter (which only hand out what this type's rules allow).
    #[inline(always)]
    pub(crate) unsafe fn from_raw_parts(pointer: *mut T, len: usize) -> Self {
        DisjointSlice { pointer, len, _elements: PhantomData }
    }

    /// Tells the CPU executor's race detector that this thread takes elements
    /// `index..index + count` (nothing on the GPU).
    #[inline(always)]
    fn note(&self, index: usize, count: usize, write: bool) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::cpu::hooks::note_output_access(self.pointer, self.len, index, count, write);
        #[cfg(target_arch = "nvptx64")]
        let _ = (index, count, write);
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
            self.note(i, 1, true);
            // SAFETY: in bounds; no other thread holds `index` (see `ThreadIndex`), and the
            // borrow of `self` keeps this thread from making a second reference to it.
            Some(unsafe { &mut *self.pointer.add(i) })
        } else {
            None
        }
    }

    /// This thread's `N` consecutive elements `N * index .. N * index + N`, or `None` if they
    /// do not all exist: several elements per thread (witnesses of different threads give
    /// disjoint chunks).
    #[inline(always)]
    #[track_caller]
    pub fn get_chunk_mut<const N: usize>(&mut self, index: ThreadIndex) -> Option<&mut [T; N]> {
        let start = index.owned().checked_mul(N)?;
        if start <= self.len && N <= self.len - start {
            self.note(start, N, true);
            // SAFETY: in bounds; the chunk of `index` overlaps no other index's chunk, and no
            // other thread holds `index`.
            Some(unsafe { &mut *self.pointer.add(start).cast::<[T; N]>() })
        } else {
            None
        }
    }

    /// Element `index + k * stride` for this thread's `index < stride`, or `None` if `index`
    /// is not below `stride` or the element does not exist: the `k`-th of several planes of
    /// `stride` elements (structure-of-arrays outputs, one result per plane per thread).
    /// Distinct indices below `stride` give distinct elements for every `k`.
    #[inline(always)]
    #[track_caller]
    pub fn get_strided_mut(&mut self, index: ThreadIndex, stride: usize, k: usize) -> Option<&mut T> {
        let i = index.owned();
        if i >= stride {
            return None;
        }
        let element = k.checked_mul(stride)?.checked_add(i)?;
        if element < self.len {
            self.note(element, 1, true);
            // SAFETY: in bounds; `i < stride` makes `(k, i) -> k * stride + i` one-to-one, and
            // no other thread holds `index`.
            Some(unsafe { &mut *self.pointer.add(element) })
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
        self.note(index, 1, true);
        // SAFETY: the caller keeps the index in bounds and the element to this thread.
        unsafe { &mut *self.pointer.add(index) }
    }

    /// Writes `value` to element `index` without a bounds check.
    ///
    /// # Safety
    /// As for [`get_unchecked_mut`](Self::get_unchecked_mut).
    #[inline(always)]
    pub unsafe fn write_unchecked(&mut self, index: usize, value: T) {
        self.note(index, 1, true);
        // SAFETY: as the caller guarantees.
        unsafe { self.pointer.add(index).write(value) }
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
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: valid for `len` elements; exclusivity of the touched ones is the caller's.
        unsafe { core::slice::from_raw_parts_mut(self.pointer, self.len) }
    }

    /// The start of the output, for pointer arithmetic and intrinsics (using it is `unsafe`,
    /// under the contract of [`get_unchecked_mut`](Self::get_unchecked_mut)).
    #[inline(always)]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.pointer
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
            out_of_bounds(i, self.len);
        }
        self.note(i, 1, false);
        // SAFETY: in bounds; only this thread holds `index`, and `&self` keeps it from making
        // a `&mut` to the element at the same time.
        unsafe { &*self.pointer.add(i) }
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
            None => out_of_bounds(index.get(), len),
        }
    }
}

#[cold]
#[track_caller]
fn out_of_bounds(index: usize, len: usize) -> ! {
    panic!("index out of bounds: the len is {} but the index is {}", len, index)
}
