//! [`DisjointChunks`]: an output of `N` consecutive elements per thread.

use core::marker::PhantomData;

use bytemuck::Pod;

use super::{KernelOutput, LaunchRequirements, ThreadIndex};

/// A kernel output seen as chunks of `N` consecutive elements, each thread writing only its
/// own chunks: chunk `i` is elements `N * i .. N * i + N`, owned by the thread that holds the
/// [`ThreadIndex`] `i` (from [`unique_index`](super::unique_index) or
/// [`grid_stride`](super::grid_stride)). `N` is part of the type, so every thread of a launch
/// cuts the buffer the same way, and a `DisjointChunks` gives no access to single elements
/// by a thread index (audit finding N1: `get_chunk_mut::<2>(0)` overlapped `get_mut(1)`).
///
/// The host passes a buffer of any length; the last `len % N` elements belong to no chunk.
///
/// ```ignore
/// #[kernel]
/// pub fn pairs(mut out: DisjointChunks<u32, 2>) {
///     let i = unique_index();
///     if let Some(pair) = out.get_mut(i) {
///         *pair = [i.get() as u32, 0];
///     }
/// }
/// ```
pub struct DisjointChunks<T: Pod, const N: usize> {
    pointer: *mut T,
    /// Whole chunks.
    chunks: usize,
    _elements: PhantomData<*mut T>,
}

// SAFETY: chunk `i` covers elements `N*i .. N*i+N`, disjoint for distinct `i`; every access
// goes through a `ThreadIndex`, unique under `LINEAR_THREADS`.
unsafe impl<T: Pod, const N: usize> KernelOutput for DisjointChunks<T, N> {
    type Element = T;
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS;
    type Shape = ();

    #[inline(always)]
    unsafe fn from_raw_parts(pointer: *mut T, len: usize, (): ()) -> Self {
        const { assert!(N > 0, "DisjointChunks<T, N> needs chunks of at least one element (N > 0)") };
        DisjointChunks { pointer, chunks: len / N, _elements: PhantomData }
    }
}

impl<T: Pod, const N: usize> super::WholeBufferOutput for DisjointChunks<T, N> {}

impl<T: Pod, const N: usize> DisjointChunks<T, N> {
    /// Number of whole chunks (the buffer's length divided by `N`).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.chunks
    }

    /// True if there is no whole chunk.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.chunks == 0
    }

    /// This thread's chunk `index`, or `None` past the last whole chunk.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut(&mut self, index: ThreadIndex) -> Option<&mut [T; N]> {
        let i = index.owned();
        if i < self.chunks {
            // SAFETY: `i < len / N`, so `N*i + N <= len` (no overflow: below the buffer's
            // length); chunks of distinct indices are disjoint, no other thread holds `index`,
            // and the borrow of `self` keeps this thread from a second reference.
            let pointer = super::note_output(self.pointer, self.chunks * N, i * N, N, true);
            Some(unsafe { &mut *pointer.add(i * N).cast::<[T; N]>() })
        } else {
            None
        }
    }

    /// The start of the output, for `unsafe` code under the contract of
    /// [`DisjointSlice::get_unchecked_mut`](super::DisjointSlice::get_unchecked_mut).
    #[inline(always)]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        super::raw_view(self.pointer, self.chunks * N)
    }
}

impl<T: Pod, const N: usize> core::ops::Index<ThreadIndex> for DisjointChunks<T, N> {
    type Output = [T; N];

    /// This thread's chunk; panics past the last whole chunk.
    #[inline(always)]
    #[track_caller]
    fn index(&self, index: ThreadIndex) -> &[T; N] {
        let i = index.owned();
        if i >= self.chunks {
            super::out_of_bounds(i, self.chunks);
        }
        // SAFETY: as in `get_mut`; `&self` keeps this thread from a `&mut` at the same time.
        let pointer = super::note_output(self.pointer, self.chunks * N, i * N, N, false);
        unsafe { &*pointer.add(i * N).cast::<[T; N]>() }
    }
}

impl<T: Pod, const N: usize> core::ops::IndexMut<ThreadIndex> for DisjointChunks<T, N> {
    /// This thread's chunk; panics past the last whole chunk.
    #[inline(always)]
    #[track_caller]
    fn index_mut(&mut self, index: ThreadIndex) -> &mut [T; N] {
        let chunks = self.chunks;
        match self.get_mut(index) {
            Some(chunk) => chunk,
            None => super::out_of_bounds(index.get(), chunks),
        }
    }
}
