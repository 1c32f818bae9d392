//! [`Handoff`]: partial results that every block publishes and the last block to finish
//! reads (the "threadfence reduction" / "last block" pattern); [`LastBlock`], the last
//! block's view of them; and [`ByLastBlock`], an output that only the last block writes
//! ([`LastBlock::finish`]).

use core::marker::PhantomData;

use bytemuck::Pod;

use super::LaunchRequirements;
use super::slice::{DisjointSlice, Partition};
use crate::atomic::Atomic;
use crate::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};

/// The partition of `DisjointSlice<T, Handoff>`: partials handed from every block to the
/// last block to finish, CUDA's `__threadfence()` + `atomicAdd` on a counter pattern
/// (threadFenceReduction, llm.c's last-block reductions), safe.
///
/// Block `b` of a 1-D launch publishes row `b` of a row-major matrix of `cols` columns (from
/// `#[kernel(cols(name = ..))]`; 1 for one value per block), its thread `t` the columns `t +
/// blockDim.x j` ([`publish`](DisjointSlice::publish)). Then every thread of every block calls
/// [`arrive`](DisjointSlice::arrive) with the launch's counter: a barrier, then thread 0
/// fences (release: `fence.acq_rel.gpu`, SASS `MEMBAR.ALL.GPU`; CUDA's samples write
/// `__threadfence()`, `fence.sc.gpu`, whose single total order this pattern does not need) and
/// takes a ticket (`atom.add`); the block that takes the last ticket resets the counter to 0,
/// fences again (acquire) and gets a [`LastBlock`] in all its threads, which read all the rows
/// with 16-byte loads.
///
/// ```ignore
/// #[kernel(cols(partials = 1))]
/// pub fn sum(x: &[f32], partials: DisjointSlice<f32, Handoff>, counter: AtomicSlice<u32>, total: AtomicSlice<f32>) {
///     let block_sum = /* block reduction, in thread 0 */ 0.0;
///     let mut partials = partials;
///     partials.publish(0, block_sum);                     // thread 0's column 0: row b
///     if let Some(last) = partials.arrive(counter.at(0)) { // every thread of the last block
///         let mine = last.fold(0.0, |a, p| a + p);         // 16-byte loads, block-strided
///         let all = /* block reduction of `mine` */ mine;
///         if thread::index_in_block() == 0 { total.store(0, all); }
///     }
/// }
/// ```
///
/// `counter.at(0)` and `total.store(0, ..)` check their index and can panic, which keeps the
/// kernel's panic path (the CUDA samples' `reduceSinglePass` port: 784 SASS instructions, 496
/// without it); `let (Some(counter), Some(total)) = (counter.get(0), total.get(0)) else {
/// return };` then `arrive(counter)` and `total.store(all)` have none.
///
/// Soundness does not rest on the counter: every access to a `Handoff` buffer is a relaxed
/// atomic at device scope (`st.relaxed.gpu`, `ld.relaxed.gpu.v4`: the SASS of CUDA's
/// `__stcg`/`__ldcg`, `STG.E.STRONG.GPU`/`LDG.E.128.STRONG.GPU`), so no two accesses race
/// whatever the counter held. The counter makes the values right: it must hold 0 when the
/// launch starts (a zeroed buffer; each launch leaves it 0) and every block must arrive once
/// (`arrive` takes the output by value, so a thread arrives at most once).
///
/// Launch: 1-D (`LINEAR_THREADS`). Elements: `Pod` of a multiple of 4 bytes, aligned to 4
/// (`f32`, `[f32; 4]`, `Float4`, pairs of `bf16`).
pub struct Handoff;

// SAFETY: every access to the buffer in safe code is a relaxed atomic access of aligned
// 32-bit words (or a 16-byte vector of them) inside the buffer, so no two accesses race.
unsafe impl Partition for Handoff {
    const KEY: u64 = super::slice::partition_key("Handoff", &[]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS;
    type Shape = u32;
    const ATOMIC_WORD: usize = 4;
}

/// Checks, at compile time, that `T` is made of whole aligned 32-bit words.
#[inline(always)]
const fn words<T>() -> usize {
    assert!(
        core::mem::size_of::<T>().is_multiple_of(4) && core::mem::size_of::<T>() > 0 && core::mem::align_of::<T>() >= 4,
        "a Handoff element must be a Pod of a multiple of 4 bytes, aligned to 4 (f32, [f32; N], Float4, a pair of bf16)"
    );
    core::mem::size_of::<T>() / 4
}

/// Stores `value` at `target` as relaxed device-scope atomics: one `st.relaxed.gpu.v4.b32` per
/// 16 bytes of an element whose size is a multiple of 16 and whose alignment is 16 (a
/// `Float4`, a struct of two), 32-bit words otherwise.
///
/// # Safety
/// `target` is valid and aligned global memory for a `T`.
#[inline(always)]
unsafe fn store_relaxed<T: Pod>(target: *mut T, value: T) {
    let words = const { words::<T>() };
    #[cfg(target_arch = "nvptx64")]
    if words.is_multiple_of(4) && core::mem::align_of::<T>() >= 16 {
        let bytes = bytemuck::bytes_of(&value);
        for piece in 0..words / 4 {
            let word = |w: usize| {
                u32::from_ne_bytes([bytes[16 * piece + 4 * w], bytes[16 * piece + 4 * w + 1], bytes[16 * piece + 4 * w + 2], bytes[16 * piece + 4 * w + 3]])
            };
            let (a, b, c, d) = (word(0), word(1), word(2), word(3));
            // SAFETY: 16 bytes of an element that is 16-byte aligned global memory (the caller).
            unsafe {
                core::arch::asm!(
                    "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; st.relaxed.gpu.global.v4.b32 [g], {{{a}, {b}, {c}, {d}}}; }}",
                    p = in(reg64) target.cast::<u32>().add(4 * piece), a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, d = in(reg32) d, options(nostack)
                );
            }
        }
        return;
    }
    let bytes = bytemuck::bytes_of(&value);
    for w in 0..words {
        let word = u32::from_ne_bytes([bytes[4 * w], bytes[4 * w + 1], bytes[4 * w + 2], bytes[4 * w + 3]]);
        // SAFETY: word `w` of an aligned `T` (align >= 4) in global memory.
        unsafe { Atomic::from_ptr(target.cast::<u32>().add(w)) }.store(word);
    }
}

/// Loads a `T` from `source` as relaxed device-scope atomics: one `ld.relaxed.gpu.v4.b32`
/// (`LDG.E.128.STRONG.GPU`, `__ldcg` of a `float4`) per 16 bytes of an element whose size is a
/// multiple of 16 and whose alignment is 16, 32-bit words otherwise (issue 30's third port:
/// eight scalar loads per 32-byte partial where llm.c has two 16-byte ones).
///
/// # Safety
/// `source` is valid and aligned global memory for a `T`.
#[inline(always)]
unsafe fn load_relaxed<T: Pod>(source: *mut T) -> T {
    let words = const { words::<T>() };
    let mut value = T::zeroed();
    let bytes = bytemuck::bytes_of_mut(&mut value);
    if words.is_multiple_of(4) && core::mem::align_of::<T>() >= 16 {
        for piece in 0..words / 4 {
            // SAFETY: 16 bytes of an element that is 16-byte aligned global memory (the caller).
            let four = unsafe { load_relaxed_16(source.cast::<u32>().add(4 * piece)) };
            for (w, word) in four.iter().enumerate() {
                bytes[16 * piece + 4 * w..16 * piece + 4 * w + 4].copy_from_slice(&word.to_ne_bytes());
            }
        }
        return value;
    }
    for w in 0..words {
        // SAFETY: word `w` of an aligned `T` in global memory.
        let word = unsafe { Atomic::from_ptr(source.cast::<u32>().add(w)) }.load();
        bytes[4 * w..4 * w + 4].copy_from_slice(&word.to_ne_bytes());
    }
    value
}

/// Loads 16 bytes at `source` as one relaxed device-scope vector load
/// (`ld.relaxed.gpu.global.v4.b32`, SASS `LDG.E.128.STRONG.GPU`, what `__ldcg` of a `float4`
/// gives).
///
/// # Safety
/// `source` is valid, 16-byte aligned global memory of 16 bytes.
#[inline(always)]
unsafe fn load_relaxed_16(source: *const u32) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: as the caller guarantees.
        unsafe {
            core::arch::asm!(
                "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.relaxed.gpu.global.v4.b32 {{{a}, {b}, {c}, {d}}}, [g]; }}",
                p = in(reg64) source, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, options(nostack)
            );
        }
        [a, b, c, d]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: as the caller guarantees (four aligned words).
    core::array::from_fn(|w| unsafe { Atomic::from_ptr(source.cast_mut().add(w)) }.load())
}

impl<'a, T: Pod> DisjointSlice<'a, T, Handoff> {
    /// Publishes `value` as this thread's `j`-th column of this block's row: column
    /// `threadIdx.x + blockDim.x j` of row `blockIdx.x` (a relaxed device-scope store).
    /// Returns `false`, storing nothing, past the row's end or the buffer's. With `cols = 1`,
    /// thread 0's `publish(0, v)` is the block's one value.
    #[inline(always)]
    pub fn publish(&mut self, j: u32, value: T) -> bool {
        let cols = self.shape as u64;
        let col = thread_idx_x() as u64 + block_dim_x() as u64 * j as u64;
        let index = block_idx_x() as u64 * cols + col;
        if col < cols && index < self.len as u64 {
            // SAFETY: inside the buffer, aligned (the buffer is an array of `T`).
            unsafe { store_relaxed(self.pointer.add(index as usize), value) };
            true
        } else {
            false
        }
    }

    /// Hands this block's row to the last block: called by **every thread of the block**
    /// (a block barrier), once (it takes the output). Thread 0 fences (release,
    /// `fence.acq_rel.gpu`) and adds 1 to `counter` (`atomicAdd`); the block that takes ticket `gridDim.x - 1`
    /// resets `counter` to 0 and gets `Some` in every thread, after an acquire fence, so it
    /// sees every block's published row. Every other block gets `None`.
    ///
    /// `counter` must hold 0 when the launch starts (allocate it zeroed; every launch
    /// leaves it 0) and every block of the launch must arrive, or no block (or one too
    /// early) is last: the results are then wrong, never undefined (see [`Handoff`]).
    #[inline(always)]
    pub fn arrive(self, counter: &Atomic<u32>) -> Option<LastBlock<'a, T>> {
        // Every thread's `publish` happens before thread 0's fence.
        crate::sync::sync_threads();
        let mut last = false;
        if thread_idx_x() == 0 {
            // Release: the block's rows (ordered before this fence by the barrier) are visible
            // before its ticket is. `fence.acq_rel.gpu` (`MEMBAR.ALL.GPU`), not `__threadfence()`'s
            // `fence.sc.gpu` (`MEMBAR.SC.GPU`): message passing needs no single total order.
            crate::sync::fence_acq_rel_device();
            let ticket = counter.fetch_add(1);
            last = ticket == grid_dim_x().wrapping_sub(1);
            if last {
                counter.store(0);
                // Acquire: the other blocks' rows, released before their tickets, are visible
                // to this block after the barrier below.
                crate::sync::fence_acq_rel_device();
            }
        }
        if crate::sync::sync_threads_or(last) {
            Some(LastBlock { pointer: self.pointer, rows: whole_rows(self.len, self.shape, grid_dim_x()), cols: self.shape, _partials: PhantomData })
        } else {
            None
        }
    }
}

/// The rows of `cols` columns a buffer of `len` elements holds, at most `grid` (one per block):
/// `min(grid, len / cols)` without a 64-bit division where the buffer holds every block's row
/// (the usual case: a call of `__cuda_sm20_div_u64` otherwise).
#[inline(always)]
fn whole_rows(len: usize, cols: u32, grid: u32) -> u32 {
    if cols == 0 {
        0
    } else if grid as u64 * cols as u64 <= len as u64 {
        grid
    } else {
        (len as u64 / cols as u64) as u32
    }
}

/// The last block's view of a [`Handoff`] output: the `rows x cols` partials every block
/// published (`rows` = the launch's blocks, as many as the buffer holds), read with relaxed
/// device-scope loads.
pub struct LastBlock<'a, T: Pod> {
    pointer: *mut T,
    /// At most `gridDim.x`, and `rows * cols <= len`.
    rows: u32,
    cols: u32,
    /// `'a`: the launch's borrow of the `Handoff` output it came from (G13-1).
    _partials: PhantomData<(*mut T, &'a mut [T])>,
}

impl<T: Pod> LastBlock<'_, T> {
    /// Rows: one per block of the launch.
    #[inline(always)]
    pub fn rows(&self) -> usize {
        self.rows as usize
    }

    /// Columns per row.
    #[inline(always)]
    pub fn cols(&self) -> u32 {
        self.cols
    }

    /// Element `(row, col)`, or `None` outside the partials.
    #[inline(always)]
    pub fn get(&self, row: usize, col: u32) -> Option<T> {
        if row < self.rows as usize && col < self.cols {
            // SAFETY: inside the partials (`rows * cols <= len`), aligned.
            Some(unsafe { load_relaxed(self.pointer.add(row * self.cols as usize + col as usize)) })
        } else {
            None
        }
    }

    /// Folds column `col` over every row (`f(.. f(init, p[0][col]) .., p[rows - 1][col])`):
    /// a channel's sum over blocks. Each thread folds the columns it owns, e.g. `threadIdx.x
    /// + blockDim.x j`.
    #[inline(always)]
    pub fn fold_column<A>(&self, col: u32, init: A, mut f: impl FnMut(A, T) -> A) -> A {
        let mut acc = init;
        if col < self.cols {
            // One running pointer and a 32-bit count of the rows left: the loop holds four rows'
            // loads, the accumulator, a pointer, a stride and a count, so ptxas can keep the
            // four rows' loads in flight together (eight `LDG.E.128` for a 32-byte partial, as
            // nvcc's unrolled `for (b = 0; b < gridDim.x; b++) acc += load128(p + b * cols)`).
            // With 64-bit row indices and bounds (session 15) the loop's live registers under
            // llm.c's `launch_bounds(512, 2)` left room for two rows: ptxas folded the first
            // two before loading the last two, two L2 latencies per four rows. One row at a
            // time (a fold between loads; issue 30's third port) was 0.33x nvcc.
            let stride = self.cols as usize;
            let mut p = self.pointer.wrapping_add(col as usize);
            let mut left = self.rows;
            while left >= 4 {
                // SAFETY: rows `r .. r + 4` of column `col` (`r = rows - left`) are inside the
                // partials: `r + 3 < rows`, `col < cols`, `rows * cols <= len`; aligned.
                let v: [T; 4] = core::array::from_fn(|k| unsafe { load_relaxed(p.add(k * stride)) });
                p = p.wrapping_add(4 * stride);
                left -= 4;
                for value in v {
                    acc = f(acc, value);
                }
            }
            while left > 0 {
                // SAFETY: row `rows - left` of column `col`: inside the partials, aligned.
                acc = f(acc, unsafe { load_relaxed(p) });
                p = p.wrapping_add(stride);
                left -= 1;
            }
        }
        acc
    }

    /// Folds this thread's share of all the partials, block-strided: the 16-byte pieces
    /// `threadIdx.x, threadIdx.x + blockDim.x, ...` (one `ld.relaxed.gpu.v4`, `LDG.E.128`, each:
    /// 4 `f32`), then the elements past the last whole piece, one per thread. Element type of
    /// 4, 8 or 16 bytes with a 16-byte aligned buffer; anything else element by element.
    /// Fold the threads' results with a block reduction for the total.
    #[inline(always)]
    pub fn fold<A>(&self, init: A, mut f: impl FnMut(A, T) -> A) -> A {
        let n = self.rows as usize * self.cols as usize;
        let (me, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
        let size = core::mem::size_of::<T>();
        let mut acc = init;
        let mut done = 0;
        if (size == 4 || size == 8 || size == 16) && (self.pointer as usize).is_multiple_of(16) {
            let per = 16 / size;
            let pieces = n / per;
            let mut piece = me;
            let mut fold_piece = |acc: A, values: [u32; 4]| {
                let mut acc = acc;
                for k in 0..per {
                    // `size` bytes of plain data at byte `k size` of the piece.
                    let value: T = bytemuck::pod_read_unaligned(&bytemuck::bytes_of(&values)[k * size..(k + 1) * size]);
                    acc = f(acc, value);
                }
                acc
            };
            // Four pieces' loads before their folds (four 16-byte loads in flight), as
            // `fold_column`.
            while piece + 3 * threads < pieces {
                // SAFETY: piece + 3 threads < n / per: each 16 bytes inside the partials,
                // 16-byte aligned (aligned start, 16-byte pieces).
                let v: [[u32; 4]; 4] = core::array::from_fn(|k| unsafe { load_relaxed_16(self.pointer.cast::<u32>().add((piece + k * threads) * 4)) });
                for values in v {
                    acc = fold_piece(acc, values);
                }
                piece += 4 * threads;
            }
            while piece < pieces {
                // SAFETY: piece < n / per: 16 bytes inside the partials, 16-byte aligned.
                let values = unsafe { load_relaxed_16(self.pointer.cast::<u32>().add(piece * 4)) };
                acc = fold_piece(acc, values);
                piece += threads;
            }
            done = pieces * per;
        }
        let mut i = done + me;
        while i < n {
            // SAFETY: i < n: inside the partials.
            acc = f(acc, unsafe { load_relaxed(self.pointer.add(i)) });
            i += threads;
        }
        acc
    }
}

/// The partition of `DisjointSlice<T, ByLastBlock>`: an output that the last block of a
/// [`Handoff`] writes, after it has folded every block's partials (llm.c's
/// `layernorm_backward_kernel10` adds the folded `dbias`/`dweight` to the gradients, one
/// `x128` load and store per chunk). No thread reaches it except through
/// [`LastBlock::finish`]: thread `t` of the last block then owns the elements `t + blockDim.x
/// j` (block-strided; llm.c's warp-strided chunks `lane + 32 (warp + warps k)` are the same
/// set), read and written with one 16-byte relaxed device-scope access per 16 bytes
/// (`ld.relaxed.gpu.v4`/`st.relaxed.gpu.v4`: `LDG.E.128.STRONG.GPU`/`STG.E.128.STRONG.GPU`,
/// where nvcc's `load128`/`store128` are `LDG.E.128`/`STG.E.128`: the same bytes in the same
/// number of accesses, once per launch).
///
/// ```ignore
/// #[kernel(cols(scratch = c4))]
/// pub fn grads(scratch: DisjointSlice<Partial, Handoff>, dbias: DisjointSlice<X128, ByLastBlock>, counter: AtomicSlice<u32>, c4: u32) {
///     let mut scratch = scratch;
///     /* .. publish this block's partials .. */
///     let Some(counter) = counter.get(0) else { return };
///     let Some(last) = scratch.arrive(counter) else { return };
///     let mut out = last.finish(dbias);                 // every thread of the last block
///     for j in 0..out.count() {                          // elements t, t + blockDim.x, ..
///         out.update(j, |old| /* old + the folded sums */ old);
///     }
/// }
/// ```
///
/// Soundness does not rest on the handoff counter (which a launch cannot check: it may start
/// at any value or be shared with another launch, and `arrive`'s `barrier.red.or` can be
/// matched by a `sync_threads_or` elsewhere in the kernel): every access to a `ByLastBlock`
/// buffer is a relaxed atomic at device scope, so no two accesses race, whichever blocks got a
/// [`LastBlock`]. The counter (zero at launch, every block arriving once) makes one block, the
/// last, the only writer, and the block-strided map makes each element one thread's: the
/// values are then deterministic.
///
/// Launch: 1-D (`LINEAR_THREADS`). Elements: `Pod` of a multiple of 4 bytes, aligned to 4
/// (one 16-byte access per 16 bytes for a 16-byte aligned element of a multiple of 16 bytes:
/// `X128`, `Float4`).
pub struct ByLastBlock;

// SAFETY: the only safe access is through `LastBlock::finish`'s `FinishView`, whose every
// access is a relaxed device-scope atomic of aligned 32-bit words (or 16-byte vectors of them)
// inside the buffer: no two accesses race, whoever makes them.
unsafe impl Partition for ByLastBlock {
    const KEY: u64 = super::slice::partition_key("ByLastBlock", &[]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS;
    type Shape = ();
    const ATOMIC_WORD: usize = 4;
}

impl<T: Pod> LastBlock<'_, T> {
    /// The last block's write view of `out`, in every thread of the block: thread `t` owns
    /// elements `t + blockDim.x j` (see [`ByLastBlock`]). Takes `out` by value, so a thread
    /// makes one view per output.
    #[inline(always)]
    pub fn finish<'b, U: Pod>(&self, out: DisjointSlice<'b, U, ByLastBlock>) -> FinishView<'b, U> {
        let _ = const { words::<U>() };
        FinishView { pointer: out.pointer, len: out.len, first: thread_idx_x(), stride: block_dim_x(), _output: PhantomData }
    }
}

/// One thread's part of a [`ByLastBlock`] output, from [`LastBlock::finish`]: the elements
/// `threadIdx.x + blockDim.x j` below the buffer's length, each read and written with relaxed
/// device-scope accesses (16 bytes at a time where the element allows).
pub struct FinishView<'a, U: Pod> {
    pointer: *mut U,
    len: usize,
    first: u32,
    stride: u32,
    /// `'a`: the launch's borrow of the `ByLastBlock` output it came from (G13-1).
    _output: PhantomData<(*mut U, &'a mut [U])>,
}

impl<U: Pod> FinishView<'_, U> {
    /// How many elements this thread owns (`j` runs below it).
    #[inline(always)]
    pub fn count(&self) -> u32 {
        let (first, stride) = (self.first as usize, (self.stride as usize).max(1));
        if first >= self.len { 0 } else { (self.len - first).div_ceil(stride).min(u32::MAX as usize) as u32 }
    }

    /// The buffer index of this thread's `j`-th element, if inside the buffer.
    #[inline(always)]
    fn index(&self, j: u32) -> Option<usize> {
        let index = self.first as u64 + self.stride as u64 * j as u64;
        (index < self.len as u64).then_some(index as usize)
    }

    /// This thread's `j`-th element (`threadIdx.x + blockDim.x j`), or `None` past the end.
    #[inline(always)]
    pub fn get(&self, j: u32) -> Option<U> {
        let index = self.index(j)?;
        // SAFETY: inside the buffer, aligned (an array of `U`); every access is atomic.
        Some(unsafe { load_relaxed(self.pointer.add(index)) })
    }

    /// Writes this thread's `j`-th element; `false` (nothing written) past the end.
    #[inline(always)]
    pub fn set(&mut self, j: u32, value: U) -> bool {
        let Some(index) = self.index(j) else { return false };
        // SAFETY: inside the buffer, aligned; every access is atomic.
        unsafe { store_relaxed(self.pointer.add(index), value) };
        true
    }

    /// `x = f(x)` on this thread's `j`-th element (one load and one store: llm.c's `load128`
    /// .. `store128`); `false` past the end.
    #[inline(always)]
    pub fn update(&mut self, j: u32, f: impl FnOnce(U) -> U) -> bool {
        let Some(index) = self.index(j) else { return false };
        // SAFETY: inside the buffer, aligned; every access is atomic.
        unsafe {
            let pointer = self.pointer.add(index);
            store_relaxed(pointer, f(load_relaxed(pointer)));
        }
        true
    }
}
