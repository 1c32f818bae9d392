//! The kernel model's regression kernels (audit findings U1, U2): the audit's `stale_read`
//! and `count_plain`, written the way the model allows. Their unsound forms (`&mut [T]` shared
//! by every thread, plain writes to one element from all threads) no longer compile: see
//! `tests/compile_fail/kernel_model/`.

use ferrocuda_device::global::{AtomicSlice, DisjointChunks, DisjointPlanes, DisjointSlice, PerBlock, grid_stride, once_per_block, unique_index};
use ferrocuda_device::kernel;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, block_idx_x, grid_stride_1d, index_1d, thread_idx_x};

/// The audit's `stale_read`, correct: every thread reads `flags[0]`; after a barrier thread 0
/// stores `before + 1`; after a second barrier every thread reads it again into `out[t]`.
/// Through an `AtomicSlice` the second read is a real load after the barrier, so every thread
/// sees `before + 1` (with `&mut [u32]` LLVM reused the first load: 63 of 64 threads were
/// stale on an H100 and on the CPU executor). Launch one block.
#[kernel]
pub fn stale_read(flags: AtomicSlice<u32>, mut out: DisjointSlice<u32>) {
    let before = flags.load(0);
    sync_threads();
    if thread_idx_x() == 0 {
        flags.store(0, before + 1);
    }
    sync_threads();
    let after = flags.load(0);
    if let Some(o) = out.get_mut(unique_index()) {
        *o = after;
    }
}

/// The audit's `count_plain`, correct: every thread adds 1 to `out[0]` atomically
/// (`out[0] += 1` from all threads was a data race in safe code).
#[kernel]
pub fn count_atomic(out: AtomicSlice<u32>) {
    out.add(0, 1);
}

/// Phase hand-over through global memory between the blocks' threads: each thread stores
/// `seed + its index` into `scratch`, the block synchronises, then each thread reads its
/// right neighbour's value (in the block) and writes `neighbour * 2` to `out`. Blocks of at
/// most 1024 threads, a 1-D launch; `scratch` and `out` as long as the grid.
#[kernel]
pub fn neighbour_after_barrier(seed: u32, scratch: AtomicSlice<u32>, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let block = ferrocuda_device::thread::block_dim_x() as usize;
    let (start, t) = (i.get() - thread_idx_x() as usize, thread_idx_x() as usize);
    if let Some(cell) = scratch.get(i.get()) {
        cell.store(seed + i.get() as u32);
    }
    sync_threads();
    let neighbour = start + (t + 1) % block;
    if let (Some(cell), Some(o)) = (scratch.get(neighbour), out.get_mut(i)) {
        *o = cell.load() * 2;
    }
}

/// Witness coverage: each element of `out` gets `element * 3` from a grid-stride loop, and the
/// first thread of each block writes its block's index to `blocks`, and each thread its
/// 2-element chunk of `pairs` (`[i, i + 1]`).
#[kernel]
pub fn witnesses(mut out: DisjointSlice<u32>, mut blocks: PerBlock<u32>, mut pairs: DisjointChunks<u32, 2>) {
    for i in grid_stride(out.len()) {
        out[i] = i.get() as u32 * 3;
    }
    if let Some(b) = once_per_block()
        && let Some(slot) = blocks.get_mut(b)
    {
        *slot = b.get() as u32;
    }
    let i = unique_index();
    if let Some(pair) = pairs.get_mut(i) {
        *pair = [i.get() as u32, i.get() as u32 + 1];
    }
}

/// Macro hygiene (audit W1, E3): parameters named like the launcher's own variables. The old
/// launcher's `__x_arg` for slice `x` shadowed the user's `__x_arg` (the kernel saw half of x's
/// address); `stream`, `config`, `module`, `executor` and `params` were bound twice. Writes
/// `[__x_arg, x.len(), stream + config + module + executor + params]` to `out[0..3]`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn hygiene(x: &[u32], __x_arg: u32, stream: u32, config: u32, module: u32, executor: u32, params: u32, mut out: DisjointChunks<u32, 3>) {
    if let Some(words) = out.get_mut(unique_index()) {
        *words = [__x_arg, x.len() as u32, stream + config + module + executor + params];
    }
}

/// A raw identifier as the kernel's name (audit W2): its PTX symbol and `SYMBOL` are `type`.
#[kernel]
pub fn r#type(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 7;
    }
}

/// Deliberately wrong, CPU executor only: each thread leaves its witness in a host
/// thread-local and uses the one the previous thread (same OS thread) left there. The CPU
/// executor's check turns that into a panic instead of two threads writing one element
/// (`ThreadIndex`'s docs). On the GPU (no `std`) the body is empty.
#[kernel]
pub fn smuggled_witness(mut out: DisjointSlice<u32>) {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        use core::cell::Cell;
        use ferrocuda_device::global::ThreadIndex;
        std::thread_local! {
            static LEFT: Cell<Option<ThreadIndex>> = const { Cell::new(None) };
        }
        let mine = unique_index();
        if let Some(theirs) = LEFT.with(|left| left.replace(Some(mine))) {
            out[theirs] = 1;
        }
    }
    let _ = &mut out;
}

/// `out[i] = [x[i] / d, x[i] % d]`: a `NonZeroU32` parameter, so the division has no
/// divide-by-zero panic path (the launcher's argument type already says `d != 0`).
#[kernel]
pub fn divide_by_nonzero(d: core::num::NonZeroU32, x: &[u32], mut out: DisjointChunks<u32, 2>) {
    let i = unique_index();
    if let (Some(o), Some(&v)) = (out.get_mut(i), x.get(i.get())) {
        *o = [v / d, v % d];
    }
}

/// Structure of arrays: plane 0 gets `x[i] + 1`, plane 1 gets `x[i] * 2`, for a grid-stride
/// loop over `x` (several indices per thread).
#[kernel]
pub fn planes(x: &[u32], mut out: DisjointPlanes<u32, 2>) {
    for i in grid_stride(x.len()) {
        if let Some([a, b]) = out.get_all_mut(i) {
            (*a, *b) = (x[i] + 1, x[i] * 2);
        }
    }
}

/// The speed pin's safe form (`tests/device_build.rs`): `y[i] = a * x[i] + y[i]`, one element
/// per thread, the lengths declared equal so that `y.get_mut(i)`'s check also covers `x[i]`.
#[kernel(same_len(x, y))]
pub fn saxpy_safe(a: f32, x: &[f32], mut y: DisjointSlice<f32>) {
    let i = unique_index();
    if let Some(y_i) = y.get_mut(i) {
        *y_i += a * x[i];
    }
}

/// Its unchecked twin, as CUDA C++ writes it (`int i = blockIdx.x * blockDim.x + threadIdx.x;
/// if (i < n) ..`).
///
/// # Safety
/// `x` and `y` point to `n` valid elements each, `y` written by no one else.
#[kernel]
pub unsafe fn saxpy_unchecked(a: f32, n: u32, x: *const f32, y: *mut f32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        let i = i as usize;
        // SAFETY: `i < n`, and only this thread touches element `i`.
        unsafe { *y.add(i) = a * *x.add(i) + *y.add(i) };
    }
}

/// The speed pin's grid-stride form: `y[i] = a * x[i]` over the whole slice.
#[kernel(same_len(x, y))]
pub fn scale_loop_safe(a: f32, x: &[f32], mut y: DisjointSlice<f32>) {
    for i in grid_stride(x.len()) {
        if let Some(y_i) = y.get_mut(i) {
            *y_i = a * x[i];
        }
    }
}

/// Its unchecked twin (`for (i = index; i < n; i += gridDim.x * blockDim.x)`).
///
/// # Safety
/// As for [`saxpy_unchecked`].
#[kernel]
pub unsafe fn scale_loop_unchecked(a: f32, n: usize, x: *const f32, y: *mut f32) {
    let mut i = index_1d();
    let stride = grid_stride_1d();
    while i < n {
        // SAFETY: `i < n`; the indices of two threads never meet.
        unsafe { *y.add(i) = a * *x.add(i) };
        i += stride;
    }
}

/// Deliberately wrong, CPU executor only: as [`smuggled_witness`], with a block's witness
/// carried to the next block's first thread through a host thread-local.
#[kernel]
pub fn smuggled_block_witness(mut out: PerBlock<u32>) {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        use core::cell::Cell;
        use ferrocuda_device::global::BlockIndex;
        std::thread_local! {
            static LEFT: Cell<Option<BlockIndex>> = const { Cell::new(None) };
        }
        if let Some(mine) = once_per_block()
            && let Some(theirs) = LEFT.with(|left| left.replace(Some(mine)))
        {
            out[theirs] = 1;
        }
    }
    let _ = &mut out;
}
