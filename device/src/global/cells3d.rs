//! [`Cells3d`]: a row-major 3-D output whose element `(z, y, x)` belongs to the thread at 3-D
//! position `(x, y, z)`; and its witness [`ThreadCell3d`].

use core::marker::PhantomData;

use bytemuck::Pod;

use super::LaunchRequirements;
use super::index::NotSend;
use super::slice::{DisjointSlice, Partition};
use crate::thread::{block_dim_x, block_dim_y, block_dim_z, block_idx_x, block_idx_y, block_idx_z, thread_idx_x, thread_idx_y, thread_idx_z};

/// The partition of `DisjointSlice<T, Cells3d>`: a row-major 3-D tensor `[depth][rows][cols]`
/// (`rows` and `cols` from `#[kernel(cols(name = (rows, cols)))]`, the depth as many planes as
/// fit in the buffer) whose element `(z, y, x)` belongs to the thread at 3-D position `(x, y,
/// z)` (`x = blockIdx.x * blockDim.x + threadIdx.x`, the same along y and z): CUDA's 3-D
/// launch writing `out[(z * rows + y) * cols + x]` with the index computed from the thread's
/// coordinates.
///
/// ```ignore
/// #[kernel(cols(out = (t, c)))]
/// pub fn add_bias_3d(x: &[f32], bias: &[f32], mut out: DisjointSlice<f32, Cells3d>, t: u32, c: u32) {
///     let me = unique_cell_3d();
///     if let Some((o, i)) = out.get_mut(me) {            // x < c && y < t && inside the buffer
///         *o = x[i] + bias[me.x() as usize];
///     }
/// }
/// ```
///
/// Map: witness [`ThreadCell3d`] `(x, y, z)` -> element `(z rows + y) cols + x` for `x <
/// cols`, `y < rows`. Disjoint: the map is one-to-one on `x < cols`, `y < rows` (mixed
/// radix), with `rows` and `cols` the same in every thread; `(x, y, z)` names one thread when
/// each axis's thread count fits in `u32` (`SPATIAL_THREADS`, checked by every launcher), so
/// the coordinates are computed in `u32` without wrapping.
pub struct Cells3d;

// SAFETY: as the doc above; `get_mut` checks `x < cols`, `y < rows`, the product against
// overflow and the element inside the buffer.
unsafe impl Partition for Cells3d {
    const KEY: u64 = super::slice::partition_key("Cells3d", &[]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::SPATIAL_THREADS;
    type Shape = (u32, u32);
}

/// This thread's 3-D position, the witness of a `DisjointSlice<T, Cells3d>`. Made only by
/// [`unique_cell_3d`]; `Copy` but not `Send`, `Sync` or `Pod` (see
/// [`ThreadIndex`](super::ThreadIndex)), checked against the running thread on the CPU
/// executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ThreadCell3d {
    x: u32,
    y: u32,
    z: u32,
    #[cfg(not(target_arch = "nvptx64"))]
    owner: [u32; 6],
    _this_thread: NotSend,
}

/// This thread's [`ThreadCell3d`]: `blockIdx * blockDim + threadIdx` along x, y and z (one
/// `mad.lo.u32` each).
#[inline(always)]
pub fn unique_cell_3d() -> ThreadCell3d {
    ThreadCell3d {
        x: block_idx_x().wrapping_mul(block_dim_x()).wrapping_add(thread_idx_x()),
        y: block_idx_y().wrapping_mul(block_dim_y()).wrapping_add(thread_idx_y()),
        z: block_idx_z().wrapping_mul(block_dim_z()).wrapping_add(thread_idx_z()),
        #[cfg(not(target_arch = "nvptx64"))]
        owner: super::index::block_thread(),
        _this_thread: PhantomData,
    }
}

impl ThreadCell3d {
    /// The column (x), to index inputs with.
    #[inline(always)]
    pub fn x(self) -> u32 {
        self.x
    }

    /// The row (y).
    #[inline(always)]
    pub fn y(self) -> u32 {
        self.y
    }

    /// The plane (z).
    #[inline(always)]
    pub fn z(self) -> u32 {
        self.z
    }

    #[inline(always)]
    #[track_caller]
    fn owned(self) -> (u32, u32, u32) {
        #[cfg(not(target_arch = "nvptx64"))]
        if self.owner != super::index::block_thread() {
            super::index::used_by_another_thread("ThreadCell3d", self.x as usize);
        }
        (self.x, self.y, self.z)
    }
}

impl<T: Pod> DisjointSlice<'_, T, Cells3d> {
    /// Rows per plane and columns per row (the launch's shape).
    #[inline(always)]
    pub fn dims(&self) -> (u32, u32) {
        self.shape
    }

    /// This thread's element `(z, y, x)` and its index `(z rows + y) cols + x` (to index
    /// inputs of the same shape with), or `None` if `x >= cols`, `y >= rows` or the element is
    /// past the end of the buffer.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut(&mut self, me: ThreadCell3d) -> Option<(&mut T, usize)> {
        let (x, y, z) = me.owned();
        let (rows, cols) = self.shape;
        if x >= cols || y >= rows {
            return None;
        }
        // `z, rows, y < 2^32`: `z rows + y < 2^64`.
        let row = z as u64 * rows as u64 + y as u64;
        let start = if row <= u32::MAX as u64 {
            // `row, cols < 2^32`: `row cols + x < 2^64`, no overflow (one compare of the high
            // word where a checked product would cost a wide multiply).
            row * cols as u64
        } else {
            match row.checked_mul(cols as u64) {
                Some(start) if start < self.len as u64 => start,
                _ => return None,
            }
        };
        // `start < 2^64 - 2^32` in both branches (`start < len <= isize::MAX` in the second):
        // `start + x` does not overflow.
        if start + x as u64 >= self.len as u64 {
            return None;
        }
        let index = (start + x as u64) as usize;
        let pointer = self.note(index, 1, true);
        // SAFETY: in bounds; the element belongs to `me` alone (see `Cells3d`), and the borrow
        // of `self` keeps this thread from a second reference.
        let element = unsafe { pointer.add(index) };
        // SAFETY: an element of a live allocation is never at address 0; said so that
        // `Some(&mut ..)` needs no null test.
        unsafe { core::hint::assert_unchecked(!element.is_null()) };
        Some((unsafe { &mut *element }, index))
    }
}
