//! [`MultiBlockReduce`]: a block reduction of `N` values at once (CUB's `BlockReduce` over a
//! struct, vLLM's `float3`), with thread 0's hand-off, in 2 barriers whatever `N`.

use super::{BlockValue, partials_stored, reduce_down_valid};
use crate::shared::SharedArray;
use crate::sync::sync_threads;
use crate::thread::{block_size, rank_in_block};
use crate::warp;

/// A block reduction of `N` values at once, for any block size known at run time (1 to 1024
/// threads, partial last warp included): CUB's `BlockReduce<float3>` followed by thread 0's
/// hand-off (`if (threadIdx.x == 0) { s_a = f(total.x); s_b = ..; } __syncthreads();`), as
/// vLLM's `poly_norm` and layer norms with several moments (a mean and a mean of squares,
/// Welford's counts) write it. Make one per call site with
/// [`multi_block_reduce!`](crate::multi_block_reduce) (`N` from 1 to 8; `SLOTS = 33 N` shared
/// elements: 32 partials per value and `N` for the hand-off).
///
/// ```ignore
/// // vLLM's poly_norm: three sums a row, three coefficients computed once by thread 0.
/// let reduce = multi_block_reduce!(f32; 3);
/// let [a, b, c] = reduce.sum_broadcast([x2, x4, x6], |[s2, s4, s6]| {
///     [w2 * (s2 / h + eps).rsqrt(), w1 * (s4 / h + eps).rsqrt(), w0 * (s6 / h + eps).rsqrt()]
/// });
/// ```
///
/// Cost, for `W` warps: `5 N` shuffles per warp, `N` shared stores by each warp's lane 0, one
/// barrier, warp 0 reads `N` slots a lane and folds them with `5 N` tested `shfl.down` steps
/// (CUB's shape: one warp folds, the others wait), thread 0 runs `then` and stores `N` values,
/// a second barrier, every thread reads `N` values. 2 barriers for any `N`, where `N` calls of
/// [`RuntimeBlockReduce::sum_broadcast`](super::RuntimeBlockReduce::sum_broadcast) take `2 N`
/// (issue 30's ninth port, V2: `sum_then_sum_all` plus `sum_all` were 4 barriers a row, 0.745x
/// nvcc's; every thread adding all warps' `3 x 32` partials after one barrier, llm.c's
/// `blockReduce` shape, was 0.69x: at 1024 threads the reads cost more than a barrier saves).
///
/// No trailing barrier is needed: the next call's partials are stored after this call's
/// second barrier, which warp 0 passes after its last read of them, and its hand-off is
/// written after the next call's first barrier, which every thread passes after reading this
/// one's. So one reducer serves a loop of rows. Every thread of the block must call each
/// method, in the same order (they contain `bar.sync`); `then` runs in thread 0 alone and must
/// not call warp or block collectives (the CPU executor reports one).
#[derive(Clone, Copy)]
pub struct MultiBlockReduce<T: BlockValue, const N: usize, const SLOTS: usize> {
    slots: SharedArray<T, SLOTS>,
}

impl<T: BlockValue, const N: usize, const SLOTS: usize> MultiBlockReduce<T, N, SLOTS> {
    /// A reduction of `N` values working in `slots` (at least `33 N` elements: a compile
    /// error otherwise). [`multi_block_reduce!`](crate::multi_block_reduce) makes both.
    #[inline(always)]
    pub fn new(slots: SharedArray<T, SLOTS>) -> Self {
        const {
            assert!(N >= 1 && N <= 8, "MultiBlockReduce reduces 1 to 8 values at once");
            assert!(SLOTS >= 33 * N, "MultiBlockReduce needs 33 N shared slots: make it with multi_block_reduce!(T; N)");
        }
        MultiBlockReduce { slots }
    }

    /// `then` of the block's fold of each of the `N` values (`op` associative and
    /// commutative, applied to each value separately), computed once by thread 0 and handed to
    /// every thread, in 2 barriers.
    #[inline(always)]
    #[track_caller]
    pub fn reduce_broadcast(&self, values: [T; N], op: impl Fn(T, T) -> T + Copy, then: impl FnOnce([T; N]) -> [T; N]) -> [T; N] {
        let slots = self.slots;
        let size = block_size();
        let rank = rank_in_block();
        let (lane, warp) = (rank % warp::WARP_SIZE, rank / warp::WARP_SIZE);
        // Each warp's fold of each value in its lane 0: the butterfly in blocks of whole
        // warps (the same branch in every thread), the tested fold in a partial last warp.
        let whole = size.is_multiple_of(warp::WARP_SIZE);
        let valid = (size - warp * warp::WARP_SIZE).min(warp::WARP_SIZE);
        let partials = values.map(|v| if whole { warp::reduce(v, op) } else { reduce_down_valid(v, lane, valid, op) });
        if lane == 0 {
            for (k, p) in partials.into_iter().enumerate() {
                // SAFETY: `warp < 32` (a block has at most 1024 threads) and `k < N`, so the
                // index is below `32 N <= SLOTS` (checked in `new`).
                unsafe { slots.set_unchecked(warp as usize * N + k, p) };
            }
        }
        partials_stored(slots.shared_address());
        if warp == 0 {
            let warps = size.div_ceil(warp::WARP_SIZE);
            let mut total = partials;
            for (k, t) in total.iter_mut().enumerate() {
                // Lanes past the warp count read nothing and are never folded in.
                // SAFETY: `lane < warps <= 32`, `k < N`: below `32 N`.
                let mine = if lane < warps { unsafe { slots.get_unchecked(lane as usize * N + k) } } else { *t };
                *t = reduce_down_valid(mine, lane, warps, op);
            }
            if lane == 0 {
                #[cfg(not(target_arch = "nvptx64"))]
                let then = |total| crate::cpu::hooks::solo("the `then` of `MultiBlockReduce::reduce_broadcast` (thread 0 alone)", || then(total));
                for (k, v) in then(total).into_iter().enumerate() {
                    // SAFETY: `32 N + k < 33 N <= SLOTS`.
                    unsafe { slots.set_unchecked(32 * N + k, v) };
                }
            }
        }
        sync_threads();
        // SAFETY: as above.
        core::array::from_fn(|k| unsafe { slots.get_unchecked(32 * N + k) })
    }

    /// [`reduce_broadcast`](Self::reduce_broadcast) of sums: `then` of the block's `N` sums,
    /// computed by thread 0, in every thread, 2 barriers.
    #[inline(always)]
    #[track_caller]
    pub fn sum_broadcast(&self, values: [T; N], then: impl FnOnce([T; N]) -> [T; N]) -> [T; N]
    where
        T: core::ops::Add<Output = T>,
    {
        self.reduce_broadcast(values, |a, b| a + b, then)
    }

    /// The block's `N` sums in every thread (`sum_broadcast` with nothing computed), 2
    /// barriers.
    #[inline(always)]
    #[track_caller]
    pub fn sum_all(&self, values: [T; N]) -> [T; N]
    where
        T: core::ops::Add<Output = T>,
    {
        self.reduce_broadcast(values, |a, b| a + b, |t| t)
    }
}

/// A [`MultiBlockReduce`] of `N` values of `T` with shared slots of this call site's own
/// (`33 N` elements): `multi_block_reduce!(f32; 3)`.
#[macro_export]
macro_rules! multi_block_reduce {
    [$ty:ty; $n:expr] => {
        $crate::block::MultiBlockReduce::<$ty, { $n }, { 33 * ($n) }>::new($crate::shared_array![$ty; 33 * ($n)])
    };
}
