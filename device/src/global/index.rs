//! The witnesses: [`ThreadIndex`] (an element index that belongs to this thread alone, for
//! the per-thread outputs) and [`BlockIndex`] (this block's index, for [`PerBlock`]
//! outputs).
//!
//! [`PerBlock`]: super::PerBlock

use crate::thread::{block_dim_x, block_idx_x, block_idx_y, block_idx_z, grid_dim_x, grid_dim_y, thread_idx_x, thread_idx_y, thread_idx_z};

/// An element index that no other thread of the launch holds: the proof the per-thread
/// outputs ([`DisjointSlice`](super::DisjointSlice), [`DisjointChunks`](super::DisjointChunks),
/// [`DisjointPlanes`](super::DisjointPlanes)) ask for.
///
/// Made only by [`unique_index`] and [`grid_stride`], which derive it from the thread's 1-D
/// index `t = blockIdx.x * blockDim.x + threadIdx.x`: thread `t` of a launch of `threads`
/// threads gets `t` and `t + k * threads`, the indices congruent to `t` modulo `threads`. Two
/// threads never get the same index, because every launcher of a kernel with a per-thread
/// output refuses a launch that is not 1-D or has more than `u32::MAX` threads
/// (`LaunchRequirements::LINEAR_THREADS`), so `t` is computed in `u32` without overflow and
/// names one thread.
///
/// It is `Copy` (a thread may use its index many times) but cannot be handed to another
/// thread: it is not `Pod`, not a shared-memory element and not a shuffle value, has no
/// public constructor, and is neither `Send` nor `Sync`, so no `static` (global memory every
/// GPU thread sees, e.g. behind a spin lock) can hold one.
///
/// One way around this exists on the CPU executor only, where kernels are host code: a kernel
/// body that stores its witness in a `std` thread-local (or another `std` container) and lets
/// another GPU thread of the same OS thread take it out. The CPU executor checks the owner
/// at every use and panics; the GPU build has no `std`, so such a kernel does not build for
/// the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ThreadIndex {
    index: usize,
    /// On the CPU executor: the 1-D index of the thread that made it, checked when an output
    /// is accessed with it (see above). The GPU build has no such field.
    #[cfg(not(target_arch = "nvptx64"))]
    owner: u32,
    _this_thread: NotSend,
}

/// Makes a witness `!Send + !Sync`: it stays in the thread that made it.
pub(super) type NotSend = core::marker::PhantomData<*const ()>;

impl ThreadIndex {
    #[inline(always)]
    fn new(index: usize, #[cfg_attr(target_arch = "nvptx64", allow(unused_variables))] owner: u32) -> Self {
        ThreadIndex {
            index,
            #[cfg(not(target_arch = "nvptx64"))]
            owner,
            _this_thread: core::marker::PhantomData,
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
        if self.owner != linear_thread() {
            used_by_another_thread("ThreadIndex", self.index);
        }
        self.index
    }
}

/// The index of this thread's block, in the thread `(0, 0, 0)` of the block only: the proof a
/// [`PerBlock`](super::PerBlock) output asks for. Made only by [`once_per_block`].
///
/// Block `b` owns element `b` of a `PerBlock` output; one thread per block holds the witness,
/// so no two threads hold the same `BlockIndex` (it cannot be handed on, for the reasons
/// [`ThreadIndex`] gives). It is a different type from [`ThreadIndex`]
/// on purpose: block 1 and thread 1 are different owners, and a per-thread output does not
/// accept a block's index (audit finding N1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockIndex {
    index: usize,
    #[cfg(not(target_arch = "nvptx64"))]
    owner: [u32; 6],
    _this_thread: NotSend,
}

impl BlockIndex {
    /// The block's index as a number: `blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y *
    /// blockIdx.z)`.
    #[inline(always)]
    pub fn get(self) -> usize {
        self.index
    }

    #[inline(always)]
    #[track_caller]
    pub(crate) fn owned(self) -> usize {
        #[cfg(not(target_arch = "nvptx64"))]
        if self.owner != block_thread() {
            used_by_another_thread("BlockIndex", self.index);
        }
        self.index
    }
}

#[cfg(not(target_arch = "nvptx64"))]
#[cold]
#[track_caller]
pub(super) fn used_by_another_thread(what: &str, index: usize) -> ! {
    panic!("{what} {index} was made by another GPU thread: a witness must not be passed between threads (through a thread-local or other host-only state)")
}

/// The running thread's 1-D index `blockIdx.x * blockDim.x + threadIdx.x`, in `u32`: one
/// `mad.lo.u32` after the register reads. The launchers of kernels with per-thread outputs
/// guarantee a 1-D launch of at most `u32::MAX` threads, so it neither wraps nor repeats; in
/// any other kernel it is only a number (wrapping, never a panic).
#[inline(always)]
pub(super) fn linear_thread() -> u32 {
    block_idx_x().wrapping_mul(block_dim_x()).wrapping_add(thread_idx_x())
}

/// The thread's block and thread coordinates, the CPU owner of a [`BlockIndex`].
#[cfg(not(target_arch = "nvptx64"))]
pub(super) fn block_thread() -> [u32; 6] {
    [block_idx_x(), block_idx_y(), block_idx_z(), thread_idx_x(), thread_idx_y(), thread_idx_z()]
}

/// This thread's index, unique over the launch: `blockIdx.x * blockDim.x + threadIdx.x`
/// (CUDA's 1-D global index, computed in `u32`, as cheap as the `unsafe`
/// [`index_1d()`](crate::thread::index_1d)). Per-thread outputs accept it; the launcher of a
/// kernel with one refuses multi-dimensional launches and launches of more than `u32::MAX`
/// threads, which is what makes it unique ([`ThreadIndex`]).
#[inline(always)]
pub fn unique_index() -> ThreadIndex {
    let me = linear_thread();
    ThreadIndex::new(me as usize, me)
}

/// Largest length a grid-stride loop walks: past it, `index + stride` (`stride < 2^41`) could
/// overflow `usize` and wrap to another thread's index. No buffer is that long.
const STRIDE_LIMIT: usize = usize::MAX - (1 << 41);

/// The indices `unique_index(), unique_index() + threads, ...` below `len`, where `threads =
/// gridDim.x * blockDim.x` is the number of threads in the (1-D) launch: a grid-stride loop.
/// The sets of two threads never overlap (they are the indices congruent to each thread's
/// own modulo `threads`). The loop compiles to CUDA's `for (i = index; i < n; i += stride)`.
#[inline(always)]
pub fn grid_stride(len: usize) -> GridStride {
    let first = linear_thread();
    // One `mul.wide.u32`: never 0, below 2^41.
    let stride = grid_dim_x() as usize * block_dim_x() as usize;
    GridStride { next: first as usize, stride, len: len.min(STRIDE_LIMIT), owner: first, _this_thread: core::marker::PhantomData }
}

/// For the first thread of each block (`threadIdx == (0, 0, 0)`): the block's index in the
/// grid, `x + gridDim.x * (y + gridDim.y * z)`, as a witness for a
/// [`PerBlock`](super::PerBlock) output; `None` for every other thread:
/// `if let Some(b) = once_per_block() { sums[b] = block_total }`.
#[inline(always)]
pub fn once_per_block() -> Option<BlockIndex> {
    if thread_idx_x() == 0 && thread_idx_y() == 0 && thread_idx_z() == 0 {
        // gridDim.x < 2^31, y and z < 2^16: the sum stays below 2^63.
        let block = block_idx_x() as u64 + grid_dim_x() as u64 * (block_idx_y() as u64 + grid_dim_y() as u64 * block_idx_z() as u64);
        Some(BlockIndex {
            index: block as usize,
            #[cfg(not(target_arch = "nvptx64"))]
            owner: block_thread(),
            _this_thread: core::marker::PhantomData,
        })
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
    owner: u32,
    _this_thread: NotSend,
}

impl Iterator for GridStride {
    type Item = ThreadIndex;

    #[inline(always)]
    fn next(&mut self) -> Option<ThreadIndex> {
        if self.next < self.len {
            let index = self.next;
            // No overflow: `index < len <= usize::MAX - 2^41` and `stride < 2^41`.
            self.next = index + self.stride;
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
