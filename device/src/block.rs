//! Block-wide collectives: reduce and scan over every thread of a block, CUB's
//! `BlockReduce` and `BlockScan`, built from warp shuffles and a little shared memory.
//!
//! ```ignore
//! use ferrocuda_device::block::{BlockReduce, BlockScan};
//! use ferrocuda_device::block_scratch;
//!
//! #[kernel(launch_bounds(256, 1))]
//! pub fn row_sums(x: &[f32], mut out: DisjointSlice<f32>) {
//!     let reduce = BlockReduce::<f32, 256>::new(block_scratch!(f32));
//!     let total = reduce.sum(x[index_1d()]);          // every thread gets the block's sum
//!     let biggest = reduce.max(x[index_1d()]);        // the scratch may be reused at once
//!     // ...
//! }
//! ```
//!
//! For a block size known only at run time, and the result in one thread as CUB gives it, use
//! [`RuntimeBlockReduce`] (fewer registers at large blocks: no thread folds every warp's
//! partial).
//!
//! `THREADS` is the block size, a multiple of 32 up to 1024 (a compile error otherwise); a
//! launch with another block size panics at the first collective (one comparison, like a
//! bounds check), because a warp count that does not match would silently drop or invent
//! partial results. Call the collectives where every thread of the block calls them (they
//! contain `bar.sync`, like `__syncthreads`).
//!
//! Cost, for `THREADS / 32 = W` warps: reduce is 5 shuffle steps, one shared store per warp,
//! one barrier, `W` shared reads (as `W/4` 16-byte reads where `W` is a multiple of 4) and
//! `W - 1` combining steps, then a second barrier so that the scratch can be reused at once.
//! Every thread combines the warps' partials in the same order, so every thread gets the
//! same bits (a float sum's rounding does not vary between threads). Scan adds 5 `shfl.up`
//! steps and one more combining step per warp.
//!
//! # Scratch: whose shared memory
//!
//! A collective needs 32 slots of shared memory ([`BlockScratch`]), which the caller passes.
//! A [`shared_array!`](crate::shared_array) inside a helper function is one array for every
//! call of that helper (as a `static __shared__` in a CUDA device function is), and inside a
//! *generic* helper it cannot be declared at all (its size would depend on the caller's type).
//! So a helper that needs scratch takes it as a parameter, and each caller makes its own with
//! [`block_scratch!`](crate::block_scratch) at its own site (one array per site). Passing the
//! same scratch to consecutive `BlockReduce`/`BlockScan` collectives is correct: each ends with
//! a barrier after its last read of the scratch, so the next one's writes cannot overtake it.
//! A [`RuntimeBlockReduce`] keeps that barrier on every reduction too (audit 2026-11-28,
//! G13R-1: session 13 alternated between two sets of slots and left it out of every second
//! reduction, which raced when two reducers shared a scratch), so one set of slots serves any
//! number of collectives. Its paired calls ([`RuntimeBlockReduce::max_then_sum_all`]) fold
//! their second half in slots of the library's own, for llm.c's 2 barriers.

use crate::shared::{SharedArray, SharedElement};
use crate::shared_vector::SharedX4;
use crate::sync::sync_threads;
use crate::thread::{block_size, rank_in_block};
use crate::warp::{self, ShuffleValue};

mod multi;
pub use multi::MultiBlockReduce;

/// Values block collectives combine: those a warp shuffle moves and shared memory holds
/// (`u32`, `i32`, `f32`, `u64`, `i64`, `f64`).
pub trait BlockValue: ShuffleValue + SharedElement {}
impl<T: ShuffleValue + SharedElement> BlockValue for T {}

/// The shared memory a block collective works in: one slot per warp of the largest block.
/// Make one per call site with [`block_scratch!`](crate::block_scratch).
#[derive(Clone, Copy)]
pub struct BlockScratch<T: SharedElement> {
    slots: SharedArray<T, 32>,
}

impl<T: SharedElement> BlockScratch<T> {
    /// Scratch in `slots` (which nothing else should use while collectives run on it).
    #[inline(always)]
    pub fn new(slots: SharedArray<T, 32>) -> Self {
        BlockScratch { slots }
    }

    /// Scratch in `first` (session 13's two sets of slots, which a [`RuntimeBlockReduce`] took
    /// in turn; since every reduction ends with its barrier, one set is enough, and `second`
    /// is not used).
    #[deprecated(note = "use `BlockScratch::new(first)` or `block_scratch!(T)`: a collective needs one set of slots (every reduction ends with its barrier)")]
    #[inline(always)]
    pub fn double(first: SharedArray<T, 32>, second: SharedArray<T, 32>) -> Self {
        let _ = second;
        BlockScratch { slots: first }
    }
}

/// `BlockScratch::new(shared_array![T; 32])`: scratch of this call site's own for a block
/// collective (see [`crate::block`]); 128 bytes for an `f32`.
#[macro_export]
macro_rules! block_scratch {
    ($ty:ty) => {
        $crate::block::BlockScratch::<$ty>::new($crate::shared_array![$ty; 32])
    };
}

/// The barrier after each warp's lane 0 has stored its partial in the scratch. On the GPU one
/// `barrier.sync` (`sync_threads`). On the CPU executor a counting barrier of its own kind
/// keyed by the scratch's address (it meets no other barrier function and no other
/// collective's partials barrier, so a collective that some warps skip is reported whatever
/// barrier they wait at instead: G15-2c, G15-2d) that panics when threads of the block have
/// returned (audit 2026-11-28, G13R-2: a warp that returned left its
/// partial of an earlier collective in its slot, and this one would fold it in silently; the
/// GPU gives the same wrong value, so the executor reports it).
#[inline(always)]
#[track_caller]
fn partials_stored(scratch: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let _ = scratch;
        sync_threads();
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // Its own barrier kind, not `sync_threads_count`'s (barrier 1), which a GPU's
        // collective never meets (audit 2026-11-28c, G15-2c).
        let arrived = crate::cpu::hooks::barrier(crate::cpu::hooks::BarrierKind::Partials(scratch), true);
        let size = block_size();
        if arrived != size {
            threads_returned(size - arrived, size);
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
#[cold]
#[track_caller]
fn threads_returned(returned: u32, size: u32) -> ! {
    panic!(
        "{returned} of the block's {size} threads did not reach this block collective (they returned before it, or call it where the others do not): a warp that returned leaves its partial of an earlier collective in the scratch, and this one would fold it in (audit 2026-11-28, G13R-2); every thread of the block must call each collective, so return after the last one"
    )
}

/// Warps in a block of `threads`, checked at compile time.
const fn warps_of(threads: u32) -> u32 {
    assert!(threads >= 32 && threads <= 1024 && threads.is_multiple_of(32), "a block collective's THREADS must be a multiple of 32 from 32 to 1024");
    threads / 32
}

#[cold]
#[track_caller]
fn wrong_block_size(expected: u32, got: u32) -> ! {
    panic!(
        "a block collective for {expected} threads ran in a block of {got}: make THREADS the launch's block size (for a reduction, `RuntimeBlockReduce` takes any block size, read at run time)"
    )
}

/// Panics unless the block has `threads` threads.
#[inline(always)]
#[track_caller]
fn check_block_size(threads: u32) {
    let size = block_size();
    if size != threads {
        wrong_block_size(threads, size);
    }
}

/// `op` folded over the scratch's first `warps` slots, in slot order, as every thread does it.
/// 16-byte reads where the element is 4 bytes and `warps` a multiple of 4.
#[inline(always)]
fn fold_slots<T: BlockValue>(slots: SharedArray<T, 32>, warps: u32, op: impl Fn(T, T) -> T) -> T {
    // SAFETY: slot 0 exists (32 slots).
    let mut acc = unsafe { slots.get_unchecked(0) };
    for w in 1..warps as usize {
        // SAFETY: `w < warps <= 32`.
        acc = op(acc, unsafe { slots.get_unchecked(w) });
    }
    acc
}

/// [`fold_slots`] with 16-byte reads, for 4-byte elements.
#[inline(always)]
fn fold_slots_x4<T: BlockValue + SharedX4>(slots: SharedArray<T, 32>, warps: u32, op: impl Fn(T, T) -> T) -> T {
    // SAFETY: `4 * 0 + 4 <= 32`.
    let first = unsafe { slots.get_x4_unchecked(0) };
    let mut acc = op(op(op(first[0], first[1]), first[2]), first[3]);
    for q in 1..(warps / 4) as usize {
        // SAFETY: `4q + 4 <= warps <= 32`.
        let v = unsafe { slots.get_x4_unchecked(q) };
        acc = op(op(op(op(acc, v[0]), v[1]), v[2]), v[3]);
    }
    acc
}

/// Block-wide reduction (CUB's `BlockReduce`) for blocks of `THREADS` threads; every thread
/// gets the result. See the module docs for the cost and the scratch.
#[derive(Clone, Copy)]
pub struct BlockReduce<T: BlockValue, const THREADS: u32> {
    scratch: BlockScratch<T>,
}

impl<T: BlockValue, const THREADS: u32> BlockReduce<T, THREADS> {
    const WARPS: u32 = warps_of(THREADS);

    /// A reduction working in `scratch`.
    #[inline(always)]
    pub fn new(scratch: BlockScratch<T>) -> Self {
        let _ = Self::WARPS;
        BlockReduce { scratch }
    }

    /// `op` folded over every thread's `value` (`op` associative; the warps' partials are
    /// combined in warp order). Every thread of the block must call it.
    ///
    /// # Panics
    /// When the block does not have `THREADS` threads.
    #[inline(always)]
    #[track_caller]
    pub fn reduce(&self, value: T, op: impl Fn(T, T) -> T + Copy) -> T {
        self.reduce_with(value, op, fold_slots)
    }

    #[inline(always)]
    #[track_caller]
    fn reduce_with<F: Fn(T, T) -> T + Copy>(&self, value: T, op: F, fold: impl Fn(SharedArray<T, 32>, u32, F) -> T) -> T {
        check_block_size(THREADS);
        let partial = warp::reduce(value, op);
        if Self::WARPS == 1 {
            return partial;
        }
        let slots = self.scratch.slots;
        if warp::lane_id() == 0 {
            // SAFETY: the warp index is below THREADS / 32 <= 32 (the block size was checked).
            unsafe { slots.set_unchecked((rank_in_block() / 32) as usize, partial) };
        }
        partials_stored(slots.shared_address());
        let total = fold(slots, Self::WARPS, op);
        // The next collective on this scratch writes it: not before every thread has read.
        sync_threads();
        total
    }

    /// Sum of every thread's `value`.
    ///
    /// # Panics
    /// As [`reduce`](Self::reduce).
    #[inline(always)]
    #[track_caller]
    pub fn sum(&self, value: T) -> T
    where
        T: core::ops::Add<Output = T>,
    {
        self.reduce(value, |a, b| a + b)
    }

    /// Maximum of every thread's `value` (for floats a NaN may or may not win, as with `fmaxf`
    /// chains in CUDA).
    ///
    /// # Panics
    /// As [`reduce`](Self::reduce).
    #[inline(always)]
    #[track_caller]
    pub fn max(&self, value: T) -> T
    where
        T: PartialOrd,
    {
        self.reduce(value, T::max_of)
    }

    /// Minimum of every thread's `value`.
    ///
    /// # Panics
    /// As [`reduce`](Self::reduce).
    #[inline(always)]
    #[track_caller]
    pub fn min(&self, value: T) -> T
    where
        T: PartialOrd,
    {
        self.reduce(value, T::min_of)
    }
}

impl<T: BlockValue + SharedX4, const THREADS: u32> BlockReduce<T, THREADS> {
    /// [`sum`](Self::sum) for 4-byte elements with the warps' partials read 16 bytes at a time
    /// (`THREADS` a multiple of 128; falls back to [`sum`](Self::sum) otherwise).
    ///
    /// # Panics
    /// As [`reduce`](Self::reduce).
    #[inline(always)]
    #[track_caller]
    pub fn sum_x4(&self, value: T) -> T
    where
        T: core::ops::Add<Output = T>,
    {
        if Self::WARPS.is_multiple_of(4) { self.reduce_with(value, |a, b| a + b, fold_slots_x4) } else { self.sum(value) }
    }
}

/// `op` folded over the first `valid` lanes' values of this warp, by shuffling down: lane 0
/// gets the result (the other lanes a part of it), and lanes at or past `valid` take part in
/// the shuffles but are never folded in (CUB's `WarpReduce` with a valid-item count). Five
/// `shfl.sync.down` steps for 32-bit values, each folding only where `lane + delta < valid`.
#[inline(always)]
fn reduce_down_valid<T: BlockValue>(mut value: T, lane: u32, valid: u32, op: impl Fn(T, T) -> T) -> T {
    // `lane + delta < valid` as `delta <= room`: one register live across the steps.
    let room = valid as i32 - lane as i32 - 1;
    let mut delta = warp::WARP_SIZE / 2;
    while delta > 0 {
        // Clamped at the last valid lane: no lane reads past it (in a partial last warp those
        // lanes do not exist, and a GPU gives an undefined value for them, D5); the value read
        // is folded only when `lane + delta < valid` anyway.
        let other = warp::shuffle_down_clamped(value, delta, valid.saturating_sub(1));
        if delta as i32 <= room {
            value = op(value, other);
        }
        delta /= 2;
    }
    value
}

/// Butterfly over segments of `2 * top` lanes (`top` a power of two up to 16, or 0): masks `top`,
/// `top / 2`, ..., 1, every lane ending with its segment's fold (bit-identical in every lane:
/// each step combines the same two values in either order, and `op` is commutative).
#[inline(always)]
fn xor_fold<T: BlockValue>(mut value: T, top: u32, op: impl Fn(T, T) -> T) -> T {
    let mut mask = top;
    while mask > 0 {
        value = op(value, warp::shuffle_xor(value, mask));
        mask /= 2;
    }
    value
}

/// `op` folded over the first `warps` slots of `slots` (2 to 32, each stored before a barrier
/// by its warp's lane 0), by the calling warp: in every lane where `every_lane`, else in lane 0
/// (the other lanes hold parts, and lane `l` has read no slot but slot `l`). `partial` is any
/// value of the caller's (folded into no lane that counts).
///
/// Every lane wanted (the `_all` forms) and a power-of-two warp count (64, 128, 256, 512, 1024
/// threads): lane `l` reads slot `l % warps` and the warp folds by butterfly in `log2 warps`
/// steps (one shuffle and one `op` each), every lane ending with the total, so no broadcast
/// shuffle (H200: vLLM's `moeSoftmax` at 256 threads 0.89x -> 0.91x nvcc's with the one-
/// instruction `max`). Otherwise 5 `shfl.down` steps that fold only the valid lanes (lane 0
/// gets the result; a broadcast where every lane is wanted): for the result in thread 0 at 1024
/// threads these measured 1.5% faster than the butterfly's loop (CUB has thread 0 fold the
/// slots one by one instead: 31 dependent steps at 1024 threads).
#[inline(always)]
fn fold_slots_in_warp<T: BlockValue>(
    slots: SharedArray<T, 32>,
    lane: u32,
    warps: u32,
    partial: T,
    op: impl Fn(T, T) -> T + Copy,
    every_lane: bool,
    identity: Option<T>,
) -> T {
    // SAFETY (each read): the index is below `warps <= 32` (a block has at most 1024 threads).
    let read = |slot: u32| unsafe { slots.get_unchecked(slot as usize) };
    if every_lane && warps.is_power_of_two() {
        // One loop for every such count (the count is the same in every lane).
        xor_fold(read(lane & (warps - 1)), warps / 2, op)
    } else if every_lane && let Some(identity) = identity {
        // Any other count, with an identity of `op` (a sum's 0): the butterfly over the next
        // power of two, lane `l` holding slot `l % top` or the identity past the count, so
        // every lane ends with the total and no broadcast (3 warps, a row of 768 `bf16` at 8
        // a thread: 2 shuffles where the valid-lane fold took 5 and a broadcast; issue 31).
        let top = warps.next_power_of_two();
        let slot = lane & (top - 1);
        xor_fold(if slot < warps { read(slot) } else { identity }, top / 2, op)
    } else {
        // Lanes past the warp count read nothing (and are never folded in).
        let mine = if lane < warps { read(lane) } else { partial };
        let total = reduce_down_valid(mine, lane, warps, op);
        if every_lane { warp::shuffle(total, 0) } else { total }
    }
}

/// Block-wide reduction for a block size known only at run time (CUB's `BlockReduce` as
/// kernels use it, without one kernel per block size): any block shape of 1 to 1024 threads,
/// partial last warp included; the result goes to thread 0 of the block (CUB's convention),
/// or to every thread on request (the `_all` methods).
///
/// ```ignore
/// #[kernel]
/// pub fn row_sums(x: &[f32], cols: u32, mut sums: PerBlock<f32>) {
///     let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
///     let mut s = 0.0;
///     for c in (thread_idx_x()..cols).step_by(block_dim_x() as usize) { s += row[c as usize]; }
///     if let Some(total) = reduce.sum(s) && let Some(b) = once_per_block() && let Some(out) = sums.get_mut(b) {
///         *out = total;
///     }
/// }
/// ```
///
/// Cost: each warp folds its lanes with 5 shuffles (the butterfly when the block is whole warps,
/// else `shfl.down` steps that skip the missing lanes; lane 0 holds the warp's value),
/// one shared store per warp, a barrier, then warp 0 alone folds the `W` warps' values with 5
/// `shfl.down` steps that skip the missing warps; a second barrier lets the scratch be reused
/// at once (CUB leaves it to its caller). Every reduction ends with that barrier, so one set
/// of slots serves any number of reductions and reducers on one scratch (audit 2026-11-28,
/// G13R-1: session 13's alternation between two sets, which left it out of every second
/// reduction, raced when two reducers shared a scratch). A softmax's max then sum, which
/// llm.c's `blockReduce` does in 2 barriers (each call site its own `shared_val`), is
/// [`max_then_sum_all`](Self::max_then_sum_all): 2 barriers, where `max_all` then `sum_all`
/// take 4. `max` and `min` are one `max`/`min` instruction a step (`FMNMX` for `f32`; CUB's
/// `cuda::maximum` is a compare and a select). Unlike [`BlockReduce`], no thread folds 32
/// partials in registers: the register count stays near CUB's (docs/performance.md has
/// both). The `_all` forms have every warp fold the partials (a power-of-two `W`: a butterfly
/// of `log2 W` steps, 3 at 256 threads, every lane ending with the total, no broadcast
/// shuffle; any `W` for `sum_all` and
/// [`reduce_all_with_identity`](Self::reduce_all_with_identity), the identity filling the lanes
/// past `W`): the same barriers as `reduce` (a partial last warp: warp 0 folds and stores the
/// total, one more). Every thread of the block must call each method, in the same order (they
/// contain `bar.sync`); a thread that returns before a reduction is reported by the CPU
/// executor (G13R-2: its warp's stale partial would be folded in).
///
/// # Declare the block size when the launch has one
///
/// With the block size read at run time, the kernel carries every path: one warp (no shared
/// memory), whole warps, and a partial last warp (its lane-tested folds and one more barrier),
/// each with its barriers. In a single-block kernel that is most of the SASS: llm.c's
/// `global_norm_aggregate_kernel` (issue 30's eighth port) with `sum_all` was 225 SASS
/// instructions and 7 barriers over its paths (2 or 3 on any one), against 55 and 1 for
/// llm.c's `blockReduce`. Where the source always launches one block size, say so:
/// `#[kernel(reqntid(1024))]` makes `block_size()` the constant 1024, the other paths fold
/// away, and the same kernel was 49 instructions (2 barriers: the partials', and the trailing
/// one that lets the scratch be reused, which llm.c leaves out). Kernels whose outputs need
/// whole warps (`PerWarpRow`, a `DisjointSlice` over `WarpRows`) fold the partial-warp path without it.
/// [`BlockReduce<T, THREADS>`](BlockReduce) fixes the size in the type instead.
#[derive(Clone, Copy)]
pub struct RuntimeBlockReduce<T: BlockValue> {
    scratch: BlockScratch<T>,
}

impl<T: BlockValue> RuntimeBlockReduce<T> {
    /// A reduction working in `scratch`.
    #[inline(always)]
    pub fn new(scratch: BlockScratch<T>) -> Self {
        RuntimeBlockReduce { scratch }
    }

    /// The block's fold in warp 0's lane 0 (the other threads hold parts of it), the block's size.
    /// `one_path`: a block of one warp stores its partial and passes the barrier too
    /// (`reduce_broadcast`); otherwise it returns before (`reduce`, and the `_all` forms'
    /// partial-warp path, which then broadcasts by a shuffle: session 18, the barrier there cost
    /// the library's softmax 4-6 registers).
    #[inline(always)]
    #[track_caller]
    fn fold_to_thread_0(slots: SharedArray<T, 32>, value: T, op: impl Fn(T, T) -> T + Copy, one_path: bool) -> (T, u32) {
        let size = block_size();
        let rank = rank_in_block();
        let (lane, warp) = (rank % warp::WARP_SIZE, rank / warp::WARP_SIZE);
        // Whole warps (the block size a multiple of 32, the same answer in every thread): the
        // butterfly, 5 shuffles and 5 folds, no lane tests (CUB's and llm.c's first level).
        // Otherwise the last warp is partial: fold only its lanes.
        let partial = if size.is_multiple_of(warp::WARP_SIZE) {
            warp::reduce(value, op)
        } else {
            let valid = (size - warp * warp::WARP_SIZE).min(warp::WARP_SIZE);
            reduce_down_valid(value, lane, valid, op)
        };
        if !one_path && size <= warp::WARP_SIZE {
            // One warp (the branch is the same in every thread): no shared memory.
            return (partial, size);
        }
        if lane == 0 {
            // SAFETY: `warp < 32`: a block has at most 1024 threads (CUDA refuses a larger
            // launch, and so does the CPU executor).
            unsafe { slots.set_unchecked(warp as usize, partial) };
        }
        // With `one_path`, a block of one warp passes this barrier too (its slot is read by no
        // one): one path for every block size, so that what follows a caller's next barrier is
        // straight code. Session 17: `reduce_broadcast`'s shuffle for one warp made the code
        // after its hand-off barrier a join, and ptxas left the output loop's setup (`LDC`s,
        // bound tests) after the barrier, where vLLM's RMS norm has it before.
        partials_stored(slots.shared_address());
        let mut total = partial;
        if warp == 0 && size > warp::WARP_SIZE {
            // Warp 0 folds the partials by shuffles (5 tested `shfl.down` steps), not thread 0
            // one by one as CUB's second level: thread 0's fold with the 32 slots read at once
            // (CUB's SASS, session 17) kept 32 values live where the library's row kernels keep
            // their row, 6-32 more registers (the 16-column bf16 RMS norm 40 -> 46, 0.80x at
            // 8192 x 8192), and a loop over the run-time count (session 18) was unrolled by 8
            // with its reads hoisted: 40 -> 50.
            total = fold_slots_in_warp(slots, lane, size.div_ceil(warp::WARP_SIZE), partial, op, false, None);
        }
        (total, size)
    }

    /// `op` folded over every thread's `value` (`op` associative and commutative: the order is
    /// CUB's, a tree): `Some` in thread 0 of the block, `None` in the others.
    ///
    /// Where thread 0 then hands a value computed from the total to the block (`if
    /// (threadIdx.x == 0) s = f(total); __syncthreads();`), use
    /// [`reduce_broadcast`](Self::reduce_broadcast) / [`sum_broadcast`](Self::sum_broadcast):
    /// the source's 2 barriers, where this method's trailing barrier plus the hand-off's make 3.
    #[inline(always)]
    #[track_caller]
    pub fn reduce(&self, value: T, op: impl Fn(T, T) -> T + Copy) -> Option<T> {
        // A block of one warp returns before the partials' barrier (no hand-off follows; session
        // 18: passing it there cost vLLM's int8 azp quantiser, a `max` then a broadcast, 7
        // registers).
        let (total, size) = Self::fold_to_thread_0(self.scratch.slots, value, op, false);
        if size > warp::WARP_SIZE {
            // The next collective on this scratch writes it: not before warp 0 has read it.
            sync_threads();
        }
        (rank_in_block() == 0).then_some(total)
    }

    /// `op` folded over every thread's `value`, in every thread (the same bits in every thread).
    /// In blocks of whole warps, as many barriers as [`reduce`](Self::reduce): after the warps' partials are stored, every warp folds them itself
    /// (llm.c's `blockReduce`), where warp 0 folding them and storing the total for the others
    /// cost one more barrier (vLLM's `moeSoftmax`, two of these per row, ran at 0.57x nvcc's
    /// with it and libm's `expf`; issue 30). A block with a partial last warp keeps it.
    #[inline(always)]
    #[track_caller]
    pub fn reduce_all(&self, value: T, op: impl Fn(T, T) -> T + Copy) -> T {
        Self::reduce_all_in(self.scratch.slots, value, None, op, true)
    }

    /// [`reduce_all`](Self::reduce_all) with an identity of `op` (`op(x, identity) == x` for
    /// every `x`: 0 for a sum): in a block whose warp count is not a power of two, every warp
    /// folds the partials by butterfly, lanes past the count holding the identity (one step
    /// per doubling, no broadcast shuffle), where without one a warp folds only the valid
    /// lanes and broadcasts. The same bits in every thread.
    #[inline(always)]
    #[track_caller]
    pub fn reduce_all_with_identity(&self, value: T, identity: T, op: impl Fn(T, T) -> T + Copy) -> T {
        Self::reduce_all_in(self.scratch.slots, value, Some(identity), op, true)
    }

    /// [`reduce_all`](Self::reduce_all) in `slots`, with `op`'s identity when there is one;
    /// `trailing`: end with the barrier after the last read of `slots` (left out only by
    /// [`max_then_sum_all`](Self::max_then_sum_all)'s second half, whose slots no other
    /// collective writes).
    #[inline(always)]
    #[track_caller]
    fn reduce_all_in(slots: SharedArray<T, 32>, value: T, identity: Option<T>, op: impl Fn(T, T) -> T + Copy, trailing: bool) -> T {
        let size = block_size();
        if size.is_multiple_of(warp::WARP_SIZE) {
            // Whole warps: the butterfly leaves the warp's fold in every lane, and every warp
            // has the 32 lanes to read the partials with.
            let partial = warp::reduce(value, op);
            if size == warp::WARP_SIZE {
                return partial;
            }
            let rank = rank_in_block();
            let (lane, warp) = (rank % warp::WARP_SIZE, rank / warp::WARP_SIZE);
            if lane == 0 {
                // SAFETY: `warp < 32`: a block has at most 1024 threads.
                unsafe { slots.set_unchecked(warp as usize, partial) };
            }
            partials_stored(slots.shared_address());
            let total = fold_slots_in_warp(slots, lane, size / warp::WARP_SIZE, partial, op, true, identity);
            if trailing {
                // The next collective on this scratch writes it: not before every warp has read it.
                sync_threads();
            }
            return total;
        }
        // A partial last warp may have fewer lanes than there are partials: warp 0 folds them
        // and hands the total over (one more barrier).
        let (total, size) = Self::fold_to_thread_0(slots, value, op, false);
        if size <= warp::WARP_SIZE {
            return warp::shuffle(total, 0);
        }
        // Thread 0 alone read slot 0 (lane `l` of warp 0 read slot `l`), so it may overwrite it.
        if rank_in_block() == 0 {
            // SAFETY: slot 0 exists.
            unsafe { slots.set_unchecked(0, total) };
        }
        sync_threads();
        // SAFETY: slot 0 exists.
        let total = unsafe { slots.get_unchecked(0) };
        if trailing {
            // The next collective on this scratch writes it: not before every thread has read.
            sync_threads();
        }
        total
    }

    /// Sum of every thread's `value`, in thread 0 (see [`reduce`](Self::reduce)).
    #[inline(always)]
    #[track_caller]
    pub fn sum(&self, value: T) -> Option<T>
    where
        T: core::ops::Add<Output = T>,
    {
        self.reduce(value, |a, b| a + b)
    }

    /// Maximum of every thread's `value`, in thread 0.
    #[inline(always)]
    #[track_caller]
    pub fn max(&self, value: T) -> Option<T>
    where
        T: PartialOrd,
    {
        self.reduce(value, T::max_of)
    }

    /// Minimum of every thread's `value`, in thread 0.
    #[inline(always)]
    #[track_caller]
    pub fn min(&self, value: T) -> Option<T>
    where
        T: PartialOrd,
    {
        self.reduce(value, T::min_of)
    }

    /// Sum of every thread's `value`, in every thread.
    #[inline(always)]
    #[track_caller]
    pub fn sum_all(&self, value: T) -> T
    where
        T: core::ops::Add<Output = T> + Default,
    {
        // `T::default()` is 0 for every `BlockValue` type: the identity of `+`.
        self.reduce_all_with_identity(value, T::default(), |a, b| a + b)
    }

    /// Maximum of every thread's `value`, in every thread.
    #[inline(always)]
    #[track_caller]
    pub fn max_all(&self, value: T) -> T
    where
        T: PartialOrd,
    {
        self.reduce_all(value, T::max_of)
    }

    /// Minimum of every thread's `value`, in every thread.
    #[inline(always)]
    #[track_caller]
    pub fn min_all(&self, value: T) -> T
    where
        T: PartialOrd,
    {
        self.reduce_all(value, T::min_of)
    }

    /// A softmax's two reductions in llm.c's 2 barriers: the block's maximum of `value`, then
    /// the block's sum of `then(max)` (each thread's contribution, computed from the maximum),
    /// both in every thread: `(max, sum)`. llm.c's fused classifier:
    ///
    /// ```ignore
    /// let (block_max, block_sum) = reduce.max_then_sum_all(thread_max, |m| thread_sum * (thread_max - m).exp());
    /// ```
    ///
    /// `max_all` then `sum_all` take 4 barriers (each ends with the barrier that lets the
    /// scratch be reused). Here the maximum is folded in the scratch and the sum in a second
    /// set of 32 slots that only this method uses (one per element type, 128 bytes for `f32`,
    /// [`PairSlots`]): the sum's barrier orders every thread's reads of the scratch before any
    /// later write of it, and every write of the second set comes after a first barrier that
    /// orders it after every earlier read of that set, so neither needs a barrier of its own.
    /// `then` runs between the two barriers: it must not call block collectives (they would
    /// write the slots other warps still read; the CPU executor's race detector reports it).
    /// In a block with a partial last warp the two halves are `max_all` and `sum_all`.
    #[inline(always)]
    #[track_caller]
    pub fn max_then_sum_all(&self, value: T, then: impl FnOnce(T) -> T) -> (T, T)
    where
        T: PairSlots + PartialOrd + core::ops::Add<Output = T> + Default,
    {
        let size = block_size();
        if !size.is_multiple_of(warp::WARP_SIZE) {
            let max = self.max_all(value);
            return (max, self.sum_all(then(max)));
        }
        // Whole warps: each half is two barriers less its trailing one; the first's reads of
        // the scratch are ordered before any later write by the second's barrier.
        let max = Self::reduce_all_in(self.scratch.slots, value, None, T::max_of, false);
        let sum = Self::reduce_all_in(T::pair_slots(), then(max), Some(T::default()), |a, b| a + b, false);
        (max, sum)
    }

    /// [`max_then_sum_all`](Self::max_then_sum_all) for two sums (a layer norm's mean, then the
    /// sum of squared deviations from it): `(sum of value, sum of then(sum of value))`, in every
    /// thread, 2 barriers.
    #[inline(always)]
    #[track_caller]
    pub fn sum_then_sum_all(&self, value: T, then: impl FnOnce(T) -> T) -> (T, T)
    where
        T: PairSlots + core::ops::Add<Output = T> + Default,
    {
        let size = block_size();
        if !size.is_multiple_of(warp::WARP_SIZE) {
            let first = self.sum_all(value);
            return (first, self.sum_all(then(first)));
        }
        let first = Self::reduce_all_in(self.scratch.slots, value, Some(T::default()), |a, b| a + b, false);
        let second = Self::reduce_all_in(T::pair_slots(), then(first), Some(T::default()), |a, b| a + b, false);
        (first, second)
    }

    /// `then` of the block's fold of `value`, computed once (by thread 0) and handed to every
    /// thread: CUB's `Reduce` followed by `if (threadIdx.x == 0) shared = then(total);
    /// __syncthreads();` (vLLM's RMS norm: `s_variance = rsqrtf(variance / hidden_size +
    /// epsilon)`; layer norms' mean and `rstd`). The source's 2 barriers: the partials', then
    /// the hand-off's, which also orders warp 0's reads of the scratch before any later write
    /// of it, so no trailing barrier is needed ([`reduce`](Self::reduce) then a
    /// `shared_array!` hand-off take 3; [`reduce_all`](Self::reduce_all) then `then` in every
    /// thread takes 2 but runs `then` in every warp). The value travels through one slot per
    /// type that only these methods write ([`BroadcastSlot`]), always after their first
    /// barrier, which every thread passes after its read of the previous value (a block of one
    /// warp passes it too: one barrier where a shuffle would do, for one straight path; session
    /// 18, vLLM's RMS norm). `then` runs in thread 0 alone: it must not call warp or block
    /// collectives (shuffles, votes, barriers: they would wait for lanes that wait at the
    /// hand-off's barrier, or meet it; a hang or another value than thread 0's on a GPU); the
    /// CPU executor reports one (audit 2026-11-28c, G15-2b).
    #[inline(always)]
    #[track_caller]
    pub fn reduce_broadcast<U: BroadcastSlot + Default>(&self, value: T, op: impl Fn(T, T) -> T + Copy, then: impl FnOnce(T) -> U) -> U {
        let (total, _) = Self::fold_to_thread_0(self.scratch.slots, value, op, true);
        let first = rank_in_block() == 0;
        // The CPU executor reports a warp or block collective inside `then` (G15-2b): on a GPU
        // it would meet the collective the other lanes wait in.
        #[cfg(not(target_arch = "nvptx64"))]
        let then = |total| crate::cpu::hooks::solo("the `then` of `reduce_broadcast` (thread 0 alone)", || then(total));
        let slot = U::broadcast_slot();
        if first {
            // SAFETY: slot 0 of a one-element array.
            unsafe { slot.set_unchecked(0, then(total)) };
        }
        sync_threads();
        // SAFETY: as above.
        unsafe { slot.get_unchecked(0) }
    }

    /// [`reduce_broadcast`](Self::reduce_broadcast) of a sum: `then(sum of value)`, computed
    /// by thread 0, in every thread, 2 barriers. vLLM's RMS norm:
    ///
    /// ```ignore
    /// let s = reduce.sum_broadcast(variance, |total| (total / hidden as f32 + epsilon).rsqrt());
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn sum_broadcast<U: BroadcastSlot + Default>(&self, value: T, then: impl FnOnce(T) -> U) -> U
    where
        T: core::ops::Add<Output = T>,
    {
        self.reduce_broadcast(value, |a, b| a + b, then)
    }
}

/// Element types with the one shared slot through which
/// [`RuntimeBlockReduce::reduce_broadcast`] hands thread 0's value to the block (a
/// `shared_array!` of one per type, written by nothing else: the slot is reached through a
/// trait of this crate's own, which other crates cannot name, so they cannot write it; audit
/// 2026-11-28c, G15-2: it used to be a `pub` method hidden from the docs only).
///
/// ```compile_fail
/// use ferrocuda_device::block::BroadcastSlot;
/// let slot = <f32 as BroadcastSlot>::broadcast_slot();
/// ```
pub trait BroadcastSlot: BlockValue + sealed_broadcast::Sealed {}

mod sealed_broadcast {
    use crate::shared::SharedArray;

    pub trait Sealed: Sized + crate::shared::SharedElement {
        /// The type's slot.
        fn broadcast_slot() -> SharedArray<Self, 1>;
    }
}

macro_rules! broadcast_slot {
    ($($t:ty),*) => {$(
        impl sealed_broadcast::Sealed for $t {
            #[inline(always)]
            fn broadcast_slot() -> SharedArray<$t, 1> {
                crate::shared_array![$t; 1]
            }
        }
        impl BroadcastSlot for $t {}
    )*};
}
broadcast_slot!(f32, f64, u32, i32, u64, i64);

/// Element types with the second set of slots that
/// [`RuntimeBlockReduce::max_then_sum_all`] folds its sum in: one `shared_array!` of 32 per
/// type, used by nothing else (so that no other collective writes it while a warp still
/// reads it; the paired calls write it only after their first barrier). Reached through a
/// trait other crates cannot name, as [`BroadcastSlot`]'s slot (G15-2).
///
/// ```compile_fail
/// use ferrocuda_device::block::PairSlots;
/// let slots = <f32 as PairSlots>::pair_slots();
/// ```
pub trait PairSlots: BlockValue + sealed_pair::Sealed {}

mod sealed_pair {
    use crate::shared::SharedArray;

    pub trait Sealed: Sized + crate::shared::SharedElement {
        /// The type's 32 slots.
        fn pair_slots() -> SharedArray<Self, 32>;
    }
}

macro_rules! pair_slots {
    ($($t:ty),*) => {$(
        impl sealed_pair::Sealed for $t {
            #[inline(always)]
            fn pair_slots() -> SharedArray<$t, 32> {
                crate::shared_array![$t; 32]
            }
        }
        impl PairSlots for $t {}
    )*};
}
pair_slots!(f32, f64, u32, i32, u64, i64);

/// `true` in every thread when `predicate` holds in any thread of the block
/// (`__syncthreads_or`: one `bar.red.or`, no scratch).
#[inline(always)]
pub fn any(predicate: bool) -> bool {
    crate::sync::sync_threads_or(predicate)
}

/// `true` in every thread when `predicate` holds in all threads of the block
/// (`__syncthreads_and`).
#[inline(always)]
pub fn all(predicate: bool) -> bool {
    crate::sync::sync_threads_and(predicate)
}

/// Block-wide prefix scan (CUB's `BlockScan`) for blocks of `THREADS` threads, in the order of
/// [`rank_in_block`]. See the module docs for the cost and the scratch.
#[derive(Clone, Copy)]
pub struct BlockScan<T: BlockValue, const THREADS: u32> {
    scratch: BlockScratch<T>,
}

impl<T: BlockValue, const THREADS: u32> BlockScan<T, THREADS> {
    const WARPS: u32 = warps_of(THREADS);

    /// A scan working in `scratch`.
    #[inline(always)]
    pub fn new(scratch: BlockScratch<T>) -> Self {
        let _ = Self::WARPS;
        BlockScan { scratch }
    }

    /// The scan's parts: `(warp_inclusive, before, total, warp_index)`, where `warp_inclusive`
    /// folds the values of this warp's lanes `0..=lane`, `before` the totals of the warps
    /// before this one (meaningless in warp 0) and `total` the whole block.
    #[inline(always)]
    #[track_caller]
    fn parts(&self, value: T, op: impl Fn(T, T) -> T + Copy) -> (T, T, T, u32) {
        check_block_size(THREADS);
        let lane = warp::lane_id();
        let mut inclusive = value;
        let mut delta = 1;
        while delta < warp::WARP_SIZE {
            let below = warp::shuffle_up(inclusive, delta);
            if lane >= delta {
                inclusive = op(below, inclusive);
            }
            delta *= 2;
        }
        if Self::WARPS == 1 {
            let total = warp::shuffle(inclusive, 31);
            return (inclusive, total, total, 0);
        }
        let slots = self.scratch.slots;
        let warp_index = rank_in_block() / 32;
        if lane == 31 {
            // SAFETY: the warp index is below THREADS / 32 <= 32 (the block size was checked).
            unsafe { slots.set_unchecked(warp_index as usize, inclusive) };
        }
        partials_stored(slots.shared_address());
        // Every thread folds the warp totals in order and keeps the fold of those before its
        // own warp (CUB's warp-scans variant); the loop is unrolled (`WARPS` is a constant).
        // SAFETY: slot 0 exists.
        let mut prefix = unsafe { slots.get_unchecked(0) };
        let mut before = prefix;
        for w in 1..Self::WARPS {
            if warp_index == w {
                before = prefix;
            }
            // SAFETY: `w < THREADS / 32 <= 32`.
            prefix = op(prefix, unsafe { slots.get_unchecked(w as usize) });
        }
        // The next collective on this scratch writes it: not before every thread has read.
        sync_threads();
        (inclusive, before, prefix, warp_index)
    }

    /// `op` folded over the values of threads `0..=rank` (`op` associative).
    ///
    /// # Panics
    /// When the block does not have `THREADS` threads.
    #[inline(always)]
    #[track_caller]
    pub fn inclusive(&self, value: T, op: impl Fn(T, T) -> T + Copy) -> T {
        let (inclusive, before, _, warp_index) = self.parts(value, op);
        if warp_index == 0 { inclusive } else { op(before, inclusive) }
    }

    /// `(exclusive, total)`: `op` folded over `identity` and the values of threads `0..rank`
    /// (thread 0 gets `identity`), and over the whole block.
    ///
    /// # Panics
    /// As [`inclusive`](Self::inclusive).
    #[inline(always)]
    #[track_caller]
    pub fn exclusive(&self, value: T, identity: T, op: impl Fn(T, T) -> T + Copy) -> (T, T) {
        let (inclusive, before, total, warp_index) = self.parts(value, op);
        // The warp-inclusive value of the lane below is this lane's warp-exclusive value.
        let below = warp::shuffle_up(inclusive, 1);
        let exclusive = match (warp_index == 0, warp::lane_id() == 0) {
            (true, true) => identity,
            (true, false) => below,
            (false, true) => before,
            (false, false) => op(before, below),
        };
        (exclusive, total)
    }

    /// Inclusive prefix sum.
    ///
    /// # Panics
    /// As [`inclusive`](Self::inclusive).
    #[inline(always)]
    #[track_caller]
    pub fn inclusive_sum(&self, value: T) -> T
    where
        T: core::ops::Add<Output = T>,
    {
        self.inclusive(value, |a, b| a + b)
    }

    /// `(exclusive prefix sum, block total)`; thread 0 gets `T::default()` (zero).
    ///
    /// # Panics
    /// As [`inclusive`](Self::inclusive).
    #[inline(always)]
    #[track_caller]
    pub fn exclusive_sum(&self, value: T) -> (T, T)
    where
        T: core::ops::Add<Output = T> + Default,
    {
        self.exclusive(value, T::default(), |a, b| a + b)
    }
}
