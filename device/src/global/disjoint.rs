//! [`Threads`]: the per-thread partition of [`DisjointSlice<T>`](super::DisjointSlice), each
//! thread its own elements.

use bytemuck::Pod;

use super::slice::{DisjointSlice, Partition};
use super::{LaunchRequirements, ThreadIndex};

/// The partition of `DisjointSlice<T>` (its default): thread `t` of a 1-D launch of
/// `threads` threads owns the elements `t, t + threads, t + 2 * threads, ...`, named by its
/// [`ThreadIndex`] (from [`unique_index`](super::unique_index) or
/// [`grid_stride`](super::grid_stride)).
///
/// Map: witness `i` -> element `i`. Disjoint: a `ThreadIndex` is congruent to its thread's
/// 1-D index modulo `threads`, which names one thread in a launch the launchers accepted
/// (1-D, at most `u32::MAX` threads: `LINEAR_THREADS`). A thread reads and writes its own
/// elements (`x = f(x)` in place: `*y.get_mut(i)? += ..`).
pub struct Threads;

// SAFETY: every access goes through a `ThreadIndex`, bounds-checked against the buffer; the
// witnesses are unique under `LINEAR_THREADS` (see `ThreadIndex`).
unsafe impl Partition for Threads {
    const KEY: u64 = super::slice::partition_key("Threads", &[]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS;
    type Shape = ();
}

impl<T: Pod> DisjointSlice<'_, T, Threads> {
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
}

/// Stands for a removed method of `DisjointSlice<T>` that no forwarding can keep sound: its
/// deprecated shim requires this trait, which nothing implements, so a call says what replaces
/// it (a per-thread output cannot hand thread `i` the elements of other threads).
#[diagnostic::on_unimplemented(
    message = "this method of a per-thread `DisjointSlice<T>` was removed: thread `i` has element `i` only",
    label = "removed; see the deprecation note",
    note = "several consecutive elements per thread: declare the output `DisjointChunks<T, N>` and call `out.get_mut(i)` (elements `N i .. N i + N`)",
    note = "one element in each of several planes: declare it `DisjointPlanes<T, P>` and call `out.get_mut(i)` (element `i` of every plane)"
)]
pub trait RemovedDisjointSliceMethod {}

#[allow(clippy::unused_self, reason = "shims of removed methods: they cannot be called")]
impl<T: Pod> DisjointSlice<'_, T, Threads> {
    /// Removed: thread `i`'s `N` consecutive elements are a `DisjointChunks<T, N>` output's
    /// `get_mut(i)`. A call does not compile (see [`RemovedDisjointSliceMethod`]).
    #[deprecated(note = "declare the output `DisjointChunks<T, N>` and call `get_mut(i)`: thread `i` gets elements `N i .. N i + N`")]
    pub fn get_chunk_mut<const N: usize>(&mut self, _index: ThreadIndex) -> Option<&mut [T; N]>
    where
        Self: RemovedDisjointSliceMethod,
    {
        None
    }

    /// Removed: element `i` of each of several planes is a `DisjointPlanes<T, P>` output's
    /// `get_mut(i)`. A call does not compile (see [`RemovedDisjointSliceMethod`]).
    #[deprecated(note = "declare the output `DisjointPlanes<T, P>` and call `get_mut(i)`: thread `i` gets element `i` of every plane")]
    pub fn get_strided_mut(&mut self, _index: ThreadIndex, _stride: usize, _k: usize) -> Option<&mut T>
    where
        Self: RemovedDisjointSliceMethod,
    {
        None
    }
}

impl<T: Pod> core::ops::Index<ThreadIndex> for DisjointSlice<'_, T, Threads> {
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

impl<T: Pod> core::ops::IndexMut<ThreadIndex> for DisjointSlice<'_, T, Threads> {
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
