//! [`PerBlock`]: an output with one element per block ([`Blocks`]).

use bytemuck::Pod;

use super::slice::{DisjointSlice, Partition};
use super::{BlockIndex, LaunchRequirements};

/// A kernel output with one element per block: block `b` (linear index `blockIdx.x +
/// gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)`) owns element `b`, written by the one
/// thread of the block that holds the [`BlockIndex`] `b` (from
/// [`once_per_block`](super::once_per_block)). For several values per block, use a `Pod`
/// array or struct element (`PerBlock<[u32; 3]>`).
///
/// ```ignore
/// #[kernel]
/// pub fn block_sums(x: &[f32], mut sums: PerBlock<f32>) {
///     let total = /* block reduction */;
///     if let Some(b) = once_per_block() && let Some(sum) = sums.get_mut(b) {
///         *sum = total;
///     }
/// }
/// ```
///
/// It accepts only a `BlockIndex`, and the per-thread outputs only a `ThreadIndex`: thread 1
/// of block 0 and thread 0 of block 1 no longer both own element 1 (audit finding N1). Any
/// launch shape is allowed.
pub type PerBlock<'a, T> = DisjointSlice<'a, T, Blocks>;

/// The partition of [`PerBlock`]: witness [`BlockIndex`] `b` -> element `b`. Disjoint: one
/// thread per block (thread `(0, 0, 0)`) holds its block's `BlockIndex`, and the linear block
/// index names one block in any launch. No launch requirement.
pub struct Blocks;

// SAFETY: element `b` is reached only through the `BlockIndex` `b`, which one thread of the
// launch holds (thread (0, 0, 0) of block `b`); accesses are bounds-checked.
unsafe impl Partition for Blocks {
    const KEY: u64 = super::slice::partition_key("Blocks", &[]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::NONE;
    type Shape = ();
}

impl<T: Pod> DisjointSlice<'_, T, Blocks> {
    /// This block's element, or `None` past the end.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut(&mut self, block: BlockIndex) -> Option<&mut T> {
        let b = block.owned();
        if b < self.len {
            let pointer = self.note(b, 1, true);
            // SAFETY: in bounds; only this thread holds `block`, and the borrow of `self`
            // keeps it from a second reference.
            Some(unsafe { &mut *pointer.add(b) })
        } else {
            None
        }
    }
}

impl<T: Pod> core::ops::Index<BlockIndex> for DisjointSlice<'_, T, Blocks> {
    type Output = T;

    /// This block's element; panics past the end.
    #[inline(always)]
    #[track_caller]
    fn index(&self, block: BlockIndex) -> &T {
        let b = block.owned();
        if b >= self.len {
            super::out_of_bounds(b, self.len);
        }
        let pointer = self.note(b, 1, false);
        // SAFETY: in bounds; only this thread holds `block`.
        unsafe { &*pointer.add(b) }
    }
}

impl<T: Pod> core::ops::IndexMut<BlockIndex> for DisjointSlice<'_, T, Blocks> {
    /// This block's element; panics past the end.
    #[inline(always)]
    #[track_caller]
    fn index_mut(&mut self, block: BlockIndex) -> &mut T {
        let len = self.len;
        match self.get_mut(block) {
            Some(element) => element,
            None => super::out_of_bounds(block.get(), len),
        }
    }
}
