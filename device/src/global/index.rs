//! [`ThreadIndex`]: a witness that an index belongs to this thread alone.

use crate::thread::{block_dim_x, block_dim_y, block_dim_z, block_idx_x, block_idx_y, block_idx_z, grid_dim_x, grid_dim_y, grid_dim_z};
use crate::thread::{thread_idx_x, thread_idx_y, thread_idx_z};

/// An element index that no other thread of the launch holds: the proof
/// [`DisjointSlice::get_mut`](super::DisjointSlice::get_mut) asks for.
///
/// Made only by [`unique_index`], [`grid_stride`] and [`once_per_block`], which derive it from the thread's
/// position in the grid. It is `Copy` (a thread may use its index many times) but cannot be
/// handed to another thread: it is not `Pod`, not a shared-memory element and not a shuffle
/// value, and has no public constructor.
///
/// One way around this exists on the CPU executor only, where kernels are host code: a kernel
/// body that stores its witness in a `std` thread-local (or another `std` container) and lets
/// another GPU thread of the same OS thread take it out. The GPU build has no `std`, so such a
/// kernel does not build for the GPU; do not write one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ThreadIndex {
    index: usize,
    /// On the CPU executor: the [`unique_index`] of the thread that made it, checked when an
    /// output is accessed with it (see above). The GPU build has no such field.
    #[cfg(not(target_arch = "nvptx64"))]
    owner: usize,
}

impl ThreadIndex {
    #[inline(always)]
    fn new(index: usize, #[cfg_attr(target_arch = "nvptx64", allow(unused_variables))] owner: usize) -> Self {
        ThreadIndex {
            index,
            #[cfg(not(target_arch = "nvptx64"))]
            owner,
        }
    }

    /// The index as a number, to index inputs with (`x[i.get()]`).
    #[inline(always)]
    pub fn get(self) -> usize {
        self.index
    }

    /// The index, for an access to an output: on the CPU executor, after checking that the
    /// running GPU thread is the one that made it (a panic otherwise).
    #[inline(always)]
    #[track_caller]
    pub(crate) fn owned(self) -> usize {
        #[cfg(not(target_arch = "nvptx64"))]
        if self.owner != current_thread() {
            used_by_another_thread(self.index);
        }
        self.index
    }
}

#[cfg(not(target_arch = "nvptx64"))]
#[cold]
#[track_caller]
fn used_by_another_thread(index: usize) -> ! {
    panic!("ThreadIndex {index} was made by another GPU thread: a witness must not be passed between threads (through a thread-local or other host-only state)")
}

/// The running thread's own `unique_index()` value.
#[inline(always)]
fn current_thread() -> usize {
    let ([x, y, z], [width, height, _]) = coordinates();
    saturate(saturating_mul_add(width, y + height * z, x))
}

/// The thread's global coordinates and the grid's extent in threads (x, y, z), in `u64`
/// (no product of hardware limits overflows it: width < 2^41, height < 2^26, depth < 2^22).
#[inline(always)]
fn coordinates() -> ([u64; 3], [u64; 3]) {
    let axis = |block: u32, dim: u32, thread: u32| block as u64 * dim as u64 + thread as u64;
    let position = [
        axis(block_idx_x(), block_dim_x(), thread_idx_x()),
        axis(block_idx_y(), block_dim_y(), thread_idx_y()),
        axis(block_idx_z(), block_dim_z(), thread_idx_z()),
    ];
    let extent = [grid_dim_x() as u64 * block_dim_x() as u64, grid_dim_y() as u64 * block_dim_y() as u64, grid_dim_z() as u64 * block_dim_z() as u64];
    (position, extent)
}

/// `a * b + c`, saturating at `u64::MAX`, without a branch (a `selp`, not a jump, on the GPU).
#[inline(always)]
fn saturating_mul_add(a: u64, b: u64, c: u64) -> u64 {
    let (product, overflow) = a.overflowing_mul(b);
    core::hint::select_unpredictable(overflow, u64::MAX, product).saturating_add(c)
}

/// `usize` from `u64`, saturating (a no-op on 64-bit targets).
#[inline(always)]
fn saturate(value: u64) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

/// This thread's index, unique over the whole launch: `x + width * (y + height * z)` over the
/// thread's global coordinates (`x = blockIdx.x * blockDim.x + threadIdx.x`, ...; `width` and
/// `height` the grid's extent in threads). On a 1-D launch it equals
/// [`index_1d()`](crate::thread::index_1d); on a 2-D launch it is `col + width * row`.
///
/// A grid too large for `usize` gives `usize::MAX` to the threads past it (the value
/// saturates, never wraps), which no slice accepts, so uniqueness holds for every launch.
#[inline(always)]
pub fn unique_index() -> ThreadIndex {
    // y + height * z < 2^26 + 2^48: no overflow.
    let me = current_thread();
    ThreadIndex::new(me, me)
}

/// The indices `unique_index(), unique_index() + threads, ...` below `len`, where `threads`
/// is the number of threads in the launch: a grid-stride loop. The sets of two threads never
/// overlap.
#[inline(always)]
pub fn grid_stride(len: usize) -> GridStride {
    let ([x, y, z], [width, height, depth]) = coordinates();
    let first = saturate(saturating_mul_add(width, y + height * z, x));
    // height * depth < 2^48; the product with width saturates.
    let threads = saturate(saturating_mul_add(width, height * depth, 0)).max(1);
    GridStride { next: first, stride: threads, len, owner: first }
}

/// For the first thread of each block (`threadIdx == (0, 0, 0)`): the block's index in the
/// grid, `x + gridDim.x * (y + gridDim.y * z)`, as a witness; `None` for every other thread.
/// For outputs with one element (or one chunk) per block: `if let Some(b) = once_per_block()
/// { out[b] = block_total }`.
#[inline(always)]
pub fn once_per_block() -> Option<ThreadIndex> {
    if thread_idx_x() == 0 && thread_idx_y() == 0 && thread_idx_z() == 0 {
        // gridDim.x < 2^31, y and z < 2^16: the product stays below 2^63.
        let block = block_idx_x() as u64 + grid_dim_x() as u64 * (block_idx_y() as u64 + grid_dim_y() as u64 * block_idx_z() as u64);
        Some(ThreadIndex::new(saturate(block), current_thread()))
    } else {
        None
    }
}

/// The iterator of [`grid_stride`].
#[derive(Debug)]
pub struct GridStride {
    next: usize,
    stride: usize,
    len: usize,
    owner: usize,
}

impl Iterator for GridStride {
    type Item = ThreadIndex;

    #[inline(always)]
    fn next(&mut self) -> Option<ThreadIndex> {
        if self.next < self.len {
            let index = self.next;
            // Saturating: past `usize::MAX` there is nothing left below `len`.
            self.next = self.next.saturating_add(self.stride);
            Some(ThreadIndex::new(index, self.owner))
        } else {
            None
        }
    }
}

/// `x[i]` for an input slice and a thread's index (the same as `x[i.get()]`).
impl<T> core::ops::Index<ThreadIndex> for [T] {
    type Output = T;

    #[inline(always)]
    #[track_caller]
    fn index(&self, index: ThreadIndex) -> &T {
        &self[index.index]
    }
}
