//! A block's dynamic shared memory as `K` elements per thread, checked once (issue 30, the
//! sixth port's gap 6): CUDA's `extern __shared__ float shared[]` indexed `shared[tid]`,
//! `shared[tid + stride]`, `shared[0]` in a tree reduction, with no bounds test per access.
//!
//! [`SharedSlice::get`]/[`set`](SharedSlice::set) check every index against the launch's
//! dynamic size, which nothing relates to `threadIdx.x`: each access of a tree reduction keeps a
//! compare and a branch to the kernel's panic path (llm.c's `softmax_forward_kernel2`: 4 panic
//! calls). [`SharedSlice::per_thread`] compares the size with the block's thread count once and
//! hands out a [`PerThreadShared`] whose indices are [`ThreadSlot`]s, thread numbers below the
//! block's size by construction: [`mine`](PerThreadShared::mine) (this thread's),
//! [`partner`](PerThreadShared::partner) (`tid + stride` where `tid < stride`, the reduction's
//! own test) and [`first`](PerThreadShared::first) (slot 0, the result). The accesses compile to
//! a bare `ld.shared`/`st.shared`.
//!
//! Races between threads are what they are in any shared memory: the CPU executor reports a
//! read and a write of one element by two threads with no barrier between them; on the GPU the
//! accesses are `ld.shared`/`st.shared` through inline assembly, never Rust references, so a
//! race gives wrong values, not undefined behaviour (as [`SharedSlice`]).

use core::marker::PhantomData;

/// The most threads a block has (CUDA's limit on every GPU; the CPU executor refuses more).
const MAX_BLOCK_THREADS: u32 = 1024;

use crate::shared::{SharedArray, SharedElement, SharedSlice};
use crate::thread::{block_dim_x, block_dim_y, block_dim_z, thread_idx_x, thread_idx_y, thread_idx_z};

/// A thread number of the running block, below the block's thread count `blockDim.x *
/// blockDim.y * blockDim.z` by construction: the index of a [`PerThreadShared`] region (in
/// every region of the launch: they all have at least `K` elements per thread of the block).
/// Made only by a region's [`mine`](PerThreadShared::mine), [`partner`](PerThreadShared::partner),
/// [`first`](PerThreadShared::first) and [`slot`](PerThreadShared::slot); `Copy` but not `Send`,
/// `Sync` or `Pod`, so it cannot be stored in memory another launch (of a smaller block) reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadSlot {
    index: u32,
    _this_launch: PhantomData<*const ()>,
}

impl ThreadSlot {
    /// The thread number.
    #[inline(always)]
    pub fn get(self) -> u32 {
        self.index
    }
}

/// `K` elements of dynamic shared memory per thread of the block, as `K` planes of `threads`
/// elements (`threads = blockDim.x * blockDim.y * blockDim.z`): element `(k, slot)` at `k *
/// threads + slot`, CUDA's `shared[k * blockDim.x + tid]` (plane 0 is `shared[tid]`). Made by
/// [`SharedSlice::per_thread`], which checks the launch's dynamic size once (or
/// [`SharedArray::per_thread`] for a static array); every access after
/// that is unchecked but for `k < K`, a constant that folds.
///
/// ```ignore
/// let Some(shared) = dynamic_shared::<f32>().per_thread::<1>() else { return };  // block-uniform
/// shared.set(shared.mine(), 0, maxval);
/// let mut stride = block_dim_x() / 2;
/// while stride >= 1 {
///     sync_threads();
///     if let Some(p) = shared.partner(stride) {          // CUDA's `if (tid < stride)`
///         let me = shared.mine();
///         shared.set(me, 0, shared.get(me, 0).max(shared.get(p, 0)));
///     }
///     stride /= 2;
/// }
/// sync_threads();
/// let offset = shared.get(shared.first(), 0);
/// ```
#[derive(Clone, Copy)]
pub struct PerThreadShared<T: SharedElement, const K: usize = 1> {
    slice: SharedSlice<T>,
    threads: u32,
    tid: u32,
}

impl<T: SharedElement> SharedSlice<T> {
    /// This slice as `K` elements per thread of the block ([`PerThreadShared`]), if it holds
    /// `K * blockDim.x * blockDim.y * blockDim.z` elements; `None` otherwise (the same in every
    /// thread of the block, so a `let .. else { return }` on it returns the whole block before
    /// any barrier). One compare, made once: launch with `K * threads * size_of::<T>()` dynamic
    /// shared bytes or more (llm.c's `block_size * sizeof(float)`). `K` is at least 1: `K = 0`
    /// (no slot a thread) does not compile.
    #[inline(always)]
    pub fn per_thread<const K: usize>(self) -> Option<PerThreadShared<T, K>> {
        const { assert!(K > 0, "`per_thread::<K>()` needs K >= 1 slots a thread (K = 0 gives no slot to index)") };
        let (bx, by, bz) = (block_dim_x(), block_dim_y(), block_dim_z());
        // At most 1024 threads a block (the hardware's and every launcher's limit), but the
        // product is taken in u64 so that no launch can wrap it.
        let threads = u64::from(bx) * u64::from(by) * u64::from(bz);
        let need = (K as u64).checked_mul(threads)?;
        if threads > u64::from(u32::MAX) || (self.len() as u64) < need {
            return None;
        }
        // `threadIdx < blockDim` on each axis, so `tid < threads` (the linear thread number).
        let tid = thread_idx_x() + bx * (thread_idx_y() + by * thread_idx_z());
        Some(PerThreadShared { slice: self, threads: threads as u32, tid })
    }
}

impl<T: SharedElement, const N: usize> SharedArray<T, N> {
    /// This static array as `K` elements per thread of the block, as
    /// [`SharedSlice::per_thread`] makes of dynamic shared memory: vLLM's `__shared__ float
    /// cache[1024]` tree (`cache[tid]`, `cache[tid + s]`, `cache[0]`) is `let Some(cache) =
    /// shared_array![f32; 1024].per_thread::<1>() else { return };`, with no dynamic shared
    /// bytes at the launch (issue 30's eighth port, gap 7). `None` when `K * blockDim.x *
    /// blockDim.y * blockDim.z > N` (the same in every thread of the block). An array of `K *
    /// 1024` elements or more holds `K` for every thread of any block (a block has at most
    /// 1024 threads: the hardware's limit, and the CPU executor's), so then there is no
    /// compare at all and the result is always `Some`; a smaller one is one compare of the
    /// block size with `N`, which folds where the block size is declared
    /// (`#[kernel(reqntid(n))]`). Every access after it is a bare `ld.shared`/`st.shared`.
    #[inline(always)]
    pub fn per_thread<const K: usize>(self) -> Option<PerThreadShared<T, K>> {
        let slice = SharedSlice::from_parts(self.shared_address(), N);
        if const { matches!(K.checked_mul(MAX_BLOCK_THREADS as usize), Some(need) if need <= N) } {
            const { assert!(K > 0, "`per_thread::<K>()` needs K >= 1 slots a thread (K = 0 gives no slot to index)") };
            let (bx, by) = (block_dim_x(), block_dim_y());
            // At most 1024 threads a block, so `K * threads <= N` and the product fits a u32;
            // `threadIdx < blockDim` on each axis, so `tid < threads`.
            let threads = bx * by * block_dim_z();
            let tid = thread_idx_x() + bx * (thread_idx_y() + by * thread_idx_z());
            return Some(PerThreadShared { slice, threads, tid });
        }
        slice.per_thread::<K>()
    }
}

impl<T: SharedElement, const K: usize> PerThreadShared<T, K> {
    /// This thread's slot (`threadIdx.x` in a 1-D block; the linear thread number in general).
    #[inline(always)]
    pub fn mine(&self) -> ThreadSlot {
        ThreadSlot { index: self.tid, _this_launch: PhantomData }
    }

    /// Slot 0, where a tree reduction leaves its result (`shared[0]`).
    #[inline(always)]
    pub fn first(&self) -> ThreadSlot {
        ThreadSlot { index: 0, _this_launch: PhantomData }
    }

    /// The partner of a tree-reduction step: `Some(tid + stride)` when `tid < stride` and the
    /// sum is a thread of the block, `None` otherwise: CUDA's `if (tid < stride) ..
    /// shared[tid + stride]`, the test the reduction makes anyway (with `stride < threads -
    /// tid`, which holds for every `tid < stride` when `stride <= threads / 2`).
    #[inline(always)]
    pub fn partner(&self, stride: u32) -> Option<ThreadSlot> {
        // `tid < threads`: no underflow.
        (self.tid < stride && stride < self.threads - self.tid).then_some(ThreadSlot { index: self.tid + stride, _this_launch: PhantomData })
    }

    /// Thread `t`'s slot, if `t` is a thread of the block.
    #[inline(always)]
    pub fn slot(&self, t: u32) -> Option<ThreadSlot> {
        (t < self.threads).then_some(ThreadSlot { index: t, _this_launch: PhantomData })
    }

    /// The block's thread count (each plane's length).
    #[inline(always)]
    pub fn threads(&self) -> u32 {
        self.threads
    }

    /// The index of element `(k, slot)`; panics if `k >= K` (a constant `k` folds the test).
    #[inline(always)]
    #[track_caller]
    fn index(&self, slot: ThreadSlot, k: usize) -> usize {
        assert!(k < K, "plane {k} of a per-thread shared region of {K} planes");
        // `k < K`, `slot < threads` and `K * threads <= len` (checked by `per_thread`): the
        // index is below `len`, and `k * threads` fits (`len` is a `usize`).
        k * self.threads as usize + slot.index as usize
    }

    /// Element `(k, slot)` (`ld.shared`).
    #[inline(always)]
    #[track_caller]
    pub fn get(&self, slot: ThreadSlot, k: usize) -> T {
        let i = self.index(slot, k);
        // SAFETY: `i < len` (see `index`); a `ThreadSlot` is below the thread count of every
        // block of the launch, every region of which holds `K * threads` elements.
        unsafe { self.slice.get_unchecked(i) }
    }

    /// Writes element `(k, slot)` (`st.shared`).
    #[inline(always)]
    #[track_caller]
    pub fn set(&self, slot: ThreadSlot, k: usize, value: T) {
        let i = self.index(slot, k);
        // SAFETY: as in `get`.
        unsafe { self.slice.set_unchecked(i, value) }
    }
}
