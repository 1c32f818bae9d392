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
///
/// Launch-time bound (issue 30, checked by every launcher once, `OutputShapeOutOfRange`
/// otherwise): the launch's planes times `rows`, `gridDim.z * blockDim.z * rows`, is at most
/// `2^32`. A witness comes only from the launch (`z < gridDim.z * blockDim.z`), so every
/// thread's row `z rows + y` fits in a `u32` and its index `row cols + x` in a `u64`: one
/// 32-bit multiply-add, one wide multiply-add and one compare with the length, as CUDA's
/// `(z * R + y) * C + x` (it was an overflow test of the row's high word and a slow path per
/// thread: llm.c's `unpermute` in 3-D, 112 SASS instructions against nvcc's 80).
pub struct Cells3d;

/// The largest `gridDim.z * blockDim.z * rows` a launch with a `Cells3d` output may have.
const MAX_PLANE_ROWS: u64 = 1 << 32;

// SAFETY: as the doc above; `get_mut` checks `x < cols`, `y < rows` and the element inside the
// buffer, and `check_launch` that every row a witness can name fits in a `u32`.
unsafe impl Partition for Cells3d {
    const KEY: u64 = super::slice::partition_key("Cells3d", &[]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::SPATIAL_THREADS;
    type Shape = (u32, u32);

    #[inline]
    fn check_launch(
        output: &'static str,
        config: &ferrocuda_types::LaunchConfig,
        _len: usize,
        (rows, _): (u32, u32),
    ) -> Result<(), ferrocuda_types::LaunchProblem> {
        let plane_rows = u64::from(config.grid.z) * u64::from(config.block.z) * u64::from(rows);
        if plane_rows > MAX_PLANE_ROWS {
            return Err(ferrocuda_types::LaunchProblem::OutputShapeOutOfRange {
                output,
                rule: "a `Cells3d` output needs gridDim.z * blockDim.z * rows (its planes times rows per plane) within 2^32, so that \
                       each thread's row index fits in 32 bits; launch fewer planes at once, or split the tensor",
                value: plane_rows,
                limit: MAX_PLANE_ROWS,
            });
        }
        Ok(())
    }
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
        // `z < gridDim.z * blockDim.z` (the witness is the launch's) and `y < rows`, so `z rows
        // + y < gridDim.z * blockDim.z * rows <= 2^32` (`check_launch`): no wrapping in `u32`,
        // and `row cols + x < 2^64`.
        let row = z.wrapping_mul(rows).wrapping_add(y);
        let start = row as u64 * cols as u64;
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

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocuda_types::{Dim3, LaunchConfig, LaunchProblem};

    fn planes(grid_z: u32, block_z: u32) -> LaunchConfig {
        LaunchConfig::new(Dim3 { x: 1, y: 1, z: grid_z }, Dim3 { x: 1, y: 1, z: block_z })
    }

    /// Issue 30: `Cells3d`'s launch-time bound is `gridDim.z * blockDim.z * rows <= 2^32`,
    /// exactly: at the limit every row index still fits in a `u32`; one row more is refused.
    #[test]
    fn p30_cells3d_launch_bound_is_2_to_the_32_plane_rows() {
        let check = |config: &LaunchConfig, rows: u32| <Cells3d as Partition>::check_launch("out", config, 0, (rows, 1));
        assert_eq!(check(&planes(2, 1), 1 << 31), Ok(()));
        assert_eq!(check(&planes(1, 1), u32::MAX), Ok(()));
        assert_eq!(check(&planes(65_535, 64), 1024), Ok(()));
        match check(&planes(2, 1), (1 << 31) + 1) {
            Err(LaunchProblem::OutputShapeOutOfRange { output: "out", value, limit, .. }) => {
                assert_eq!((value, limit), ((1 << 32) + 2, 1 << 32));
            }
            other => panic!("{other:?}"),
        }
        assert!(check(&planes(65_535, 64), 1025).is_err());
    }
}
