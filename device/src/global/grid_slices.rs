//! [`GridSlices`]: an output cut into slices at a run-time stride, slice `blockIdx.y` written by
//! a 1-D grid over its first `n` elements (llm.c's `copy_and_cast_kernel`); and its witness
//! [`SliceCell`].

use core::marker::PhantomData;

use bytemuck::Pod;

use super::LaunchRequirements;
use super::index::NotSend;
use super::slice::{DisjointSlice, Partition};
use crate::thread::{block_dim_x, block_idx_x, block_idx_y, thread_idx_x};

/// The partition of `DisjointSlice<T, GridSlices>`: slices of `n` elements that start every
/// `stride` elements (`(n, stride)` from `#[kernel(cols(name = (n, stride)))]`, run-time values
/// the same in every thread), slice `blockIdx.y` written by the 1-D grid of blocks along x,
/// thread `i = blockIdx.x * blockDim.x + threadIdx.x` owning element `blockIdx.y * stride + i`
/// for `i < n`: llm.c's `copy_and_cast_kernel` (`dst[idx + stride_dst * blockIdx.y]`, a grid
/// `(ceil(n / 512), slices)`: the master weights' copy, one layer a slice).
///
/// ```ignore
/// #[kernel(cols(dst = (n, stride_dst)))]
/// pub fn copy_and_cast(mut dst: DisjointSlice<bf16, GridSlices>, src: &[f32], n: u32, stride_dst: u32, stride_src: u32) {
///     let me = unique_slice_cell();                     // (blockIdx.y, blockIdx.x * blockDim.x + threadIdx.x)
///     let Some(o) = dst.get_mut(me) else { return };   // i < n: the one check
///     let Some(&s) = src.get(me.slice() as usize * stride_src as usize + me.index() as usize) else { return };
///     *o = s.to_bf16();
/// }
/// ```
///
/// Map: witness [`SliceCell`] `(s, i)` -> element `s stride + i` for `i < n`. Disjoint: one-to-one
/// on `i < n <= stride`; the launch has 1-D blocks in a grid with `z = 1` (`LINEAR_BLOCKS`), so
/// `(blockIdx.y, i)` names one thread. Launch-time bound (checked by every launcher once,
/// `OutputShapeOutOfRange` otherwise): `n <= stride` (slices do not overlap), `gridDim.x *
/// blockDim.x <= 2^32` (`i` is computed in `u32` without wrapping) and `(gridDim.y - 1) stride +
/// n <= len` (every slice the grid names lies in the buffer). A witness comes only from the
/// launch (`s < gridDim.y`), so the access checks `i < n` alone: CUDA's `if (idx < n)`, no
/// bounds check of the index (it was three, `DisjointMatrix`'s `col < cols` and `index < len`
/// beside the kernel's own `col < n`: 40 SASS instructions against nvcc's 29).
pub struct GridSlices;

/// The most threads along x a launch with a `GridSlices` output may have (`i` in `u32`).
const MAX_THREADS_X: u64 = 1 << 32;

// SAFETY: as the doc above: `get_mut` checks `i < n`; `check_launch` that `n <= stride`, that
// `i` does not wrap and that `s stride + i < len` for every `s < gridDim.y`, `i < n`.
unsafe impl Partition for GridSlices {
    const KEY: u64 = super::slice::partition_key("GridSlices", &[]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_BLOCKS;
    type Shape = (u32, u32);

    fn check_launch(
        output: &'static str,
        config: &ferrocuda_types::LaunchConfig,
        len: usize,
        (n, stride): (u32, u32),
    ) -> Result<(), ferrocuda_types::LaunchProblem> {
        use ferrocuda_types::LaunchProblem::OutputShapeOutOfRange;
        if n > stride {
            return Err(OutputShapeOutOfRange {
                output,
                rule: "a `GridSlices` output's slices of `n` elements start every `stride` elements, so `n` (the first value of \
                       `cols(name = (n, stride))`) must be at most `stride` (the second), or two slices would share elements",
                value: u64::from(n),
                limit: u64::from(stride),
            });
        }
        let threads_x = u64::from(config.grid.x) * u64::from(config.block.x);
        if threads_x > MAX_THREADS_X {
            return Err(OutputShapeOutOfRange {
                output,
                rule: "a `GridSlices` output needs gridDim.x * blockDim.x within 2^32 (each thread's index in its slice is 32-bit); \
                       launch fewer blocks along x",
                value: threads_x,
                limit: MAX_THREADS_X,
            });
        }
        // `grid.y - 1, stride < 2^32`: no overflow in u64.
        let end = u64::from(config.grid.y.saturating_sub(1)) * u64::from(stride) + u64::from(n);
        if end > len as u64 {
            return Err(OutputShapeOutOfRange {
                output,
                rule: "a `GridSlices` output must hold every slice the grid names: (gridDim.y - 1) * stride + n elements; pass a \
                       larger buffer or launch fewer slices (gridDim.y)",
                value: end,
                limit: len as u64,
            });
        }
        Ok(())
    }
}

/// This thread's slice and index in it for a `DisjointSlice<T, GridSlices>` output: slice
/// `blockIdx.y`, index `blockIdx.x * blockDim.x + threadIdx.x`. Made only by
/// [`unique_slice_cell`]; `Copy` but not `Send`, `Sync` or `Pod` (see
/// [`ThreadIndex`](super::ThreadIndex)), checked against the running thread on the CPU executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SliceCell {
    slice: u32,
    index: u32,
    #[cfg(not(target_arch = "nvptx64"))]
    owner: [u32; 6],
    _this_thread: NotSend,
}

/// This thread's [`SliceCell`]: slice `blockIdx.y`, index `blockIdx.x * blockDim.x +
/// threadIdx.x` (one `mad.lo.u32`; llm.c's `idx` and `blockIdx.y`).
#[inline(always)]
pub fn unique_slice_cell() -> SliceCell {
    SliceCell {
        slice: block_idx_y(),
        index: block_idx_x().wrapping_mul(block_dim_x()).wrapping_add(thread_idx_x()),
        #[cfg(not(target_arch = "nvptx64"))]
        owner: super::index::block_thread(),
        _this_thread: PhantomData,
    }
}

impl SliceCell {
    /// The slice (`blockIdx.y`), to index other slices' inputs with.
    #[inline(always)]
    pub fn slice(self) -> u32 {
        self.slice
    }

    /// The index in the slice (`blockIdx.x * blockDim.x + threadIdx.x`).
    #[inline(always)]
    pub fn index(self) -> u32 {
        self.index
    }

    #[inline(always)]
    #[track_caller]
    fn owned(self) -> (u32, u32) {
        #[cfg(not(target_arch = "nvptx64"))]
        if self.owner != super::index::block_thread() {
            super::index::used_by_another_thread("SliceCell", self.index as usize);
        }
        (self.slice, self.index)
    }
}

impl<T: Pod> DisjointSlice<'_, T, GridSlices> {
    /// Elements per slice and the slices' stride (the launch's `(n, stride)`).
    #[inline(always)]
    pub fn slice_shape(&self) -> (u32, u32) {
        self.shape
    }

    /// This thread's element `me.slice() * stride + me.index()`, or `None` if `me.index() >= n`
    /// (the one check: the launchers checked that every slice of the grid lies in the buffer).
    #[inline(always)]
    #[track_caller]
    pub fn get_mut(&mut self, me: SliceCell) -> Option<&mut T> {
        let (slice, index) = me.owned();
        let (n, stride) = self.shape;
        if index >= n {
            return None;
        }
        // `slice < gridDim.y` (the witness is the launch's) and `index < n`:
        // `slice stride + index <= (gridDim.y - 1) stride + n - 1 < len` (`check_launch`).
        let element = slice as usize * stride as usize + index as usize;
        let pointer = self.note(element, 1, true);
        // SAFETY: in bounds (above); the element belongs to `me` alone (see `GridSlices`), and
        // the borrow of `self` keeps this thread from a second reference.
        let element = unsafe { pointer.add(element) };
        // SAFETY: an element of a live allocation is never at address 0; said so that
        // `Some(&mut ..)` needs no null test.
        unsafe { core::hint::assert_unchecked(!element.is_null()) };
        Some(unsafe { &mut *element })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocuda_types::{Dim3, LaunchConfig, LaunchProblem};

    fn grid(x: u32, y: u32, block: u32) -> LaunchConfig {
        LaunchConfig::new(Dim3 { x, y, z: 1 }, Dim3 { x: block, y: 1, z: 1 })
    }

    /// Issue 30: `GridSlices`'s launch-time bound: slices no longer than the stride, every
    /// slice of the grid inside the buffer (exactly at the end is fine), `i` in `u32`.
    #[test]
    fn p30_grid_slices_launch_bound() {
        let check = |config: &LaunchConfig, len: usize, n: u32, stride: u32| <GridSlices as Partition>::check_launch("dst", config, len, (n, stride));
        assert_eq!(check(&grid(4, 3, 256), 2 * 100 + 90, 90, 100), Ok(()));
        assert_eq!(check(&grid(4, 3, 256), 300, 100, 100), Ok(()));
        let refused = |r: Result<(), LaunchProblem>| match r {
            Err(LaunchProblem::OutputShapeOutOfRange { output: "dst", value, limit, .. }) => (value, limit),
            other => panic!("{other:?}"),
        };
        assert_eq!(refused(check(&grid(4, 3, 256), 289, 90, 100)), (290, 289));
        assert_eq!(refused(check(&grid(4, 3, 256), 1000, 101, 100)), (101, 100));
        assert_eq!(refused(check(&grid(u32::MAX, 1, 2), 1000, 10, 10)).1, 1 << 32);
        // No slice at all (an empty grid along y never runs): nothing to hold.
        assert_eq!(check(&grid(4, 1, 256), 0, 0, 0), Ok(()));
    }
}
