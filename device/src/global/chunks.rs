//! [`DisjointChunks`]: an output of `N` consecutive elements per thread ([`Chunks<N>`]).

use bytemuck::Pod;

use super::slice::{DisjointSlice, Partition};
use super::{LaunchRequirements, ThreadIndex};

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
pub type DisjointChunks<'a, T, const N: usize> = DisjointSlice<'a, T, Chunks<N>>;

/// The partition of [`DisjointChunks<T, N>`]: witness [`ThreadIndex`] `i` -> elements `N i ..
/// N i + N` (chunk `i`). Disjoint: chunks of distinct indices do not overlap and the
/// witnesses are unique under `LINEAR_THREADS` (see `ThreadIndex`).
pub struct Chunks<const N: usize>;

// SAFETY: chunk `i` covers elements `N*i .. N*i+N`, disjoint for distinct `i`, inside the
// buffer for `i < len / N`; every access goes through a `ThreadIndex`, unique under
// `LINEAR_THREADS`.
unsafe impl<const N: usize> Partition for Chunks<N> {
    const KEY: u64 = super::slice::partition_key("Chunks", &[N as u64]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS;
    type Shape = ();
    const VALID: () = assert!(N > 0, "DisjointChunks<T, N> needs chunks of at least one element (N > 0)");

    #[inline(always)]
    fn units(len: usize) -> usize {
        len / N
    }
}

impl<T: Pod, const N: usize> DisjointSlice<'_, T, Chunks<N>> {
    /// This thread's chunk `index`, or `None` past the last whole chunk.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut(&mut self, index: ThreadIndex) -> Option<&mut [T; N]> {
        let i = index.owned();
        if i < self.len() {
            // SAFETY: `i < len / N`, so `N*i + N <= len` (no overflow: below the buffer's
            // length); chunks of distinct indices are disjoint, no other thread holds `index`,
            // and the borrow of `self` keeps this thread from a second reference.
            let pointer = self.note(i * N, N, true);
            Some(unsafe { &mut *pointer.add(i * N).cast::<[T; N]>() })
        } else {
            None
        }
    }
}

impl<T: Pod, const N: usize> core::ops::Index<ThreadIndex> for DisjointSlice<'_, T, Chunks<N>> {
    type Output = [T; N];

    /// This thread's chunk; panics past the last whole chunk.
    #[inline(always)]
    #[track_caller]
    fn index(&self, index: ThreadIndex) -> &[T; N] {
        let i = index.owned();
        if i >= self.len() {
            super::out_of_bounds(i, self.len());
        }
        // SAFETY: as in `get_mut`; `&self` keeps this thread from a `&mut` at the same time.
        let pointer = self.note(i * N, N, false);
        unsafe { &*pointer.add(i * N).cast::<[T; N]>() }
    }
}

impl<T: Pod, const N: usize> core::ops::IndexMut<ThreadIndex> for DisjointSlice<'_, T, Chunks<N>> {
    /// This thread's chunk; panics past the last whole chunk.
    #[inline(always)]
    #[track_caller]
    fn index_mut(&mut self, index: ThreadIndex) -> &mut [T; N] {
        let chunks = self.len();
        match self.get_mut(index) {
            Some(chunk) => chunk,
            None => super::out_of_bounds(index.get(), chunks),
        }
    }
}
