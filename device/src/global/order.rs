//! [`RowOrder`]: which block takes which rows in the row partitions ([`WarpRows`] and
//! [`BlockRows`]): [`Forward`] (block `b` starts at its own index) or [`Reversed`] (block `b`
//! starts where block `gridDim.x - 1 - b` would).
//!
//! [`WarpRows`]: super::partition::WarpRows
//! [`BlockRows`]: super::partition::BlockRows

/// The order in which the blocks of a launch take rows: a permutation of the block indices,
/// the same in every thread, so that the row partitions' proofs hold for it as for the
/// identity. Sealed: [`Forward`] and [`Reversed`].
pub trait RowOrder: sealed::Sealed + 'static {
    /// The block whose rows block `block` of a grid of `grid` blocks takes (`block < grid`).
    #[doc(hidden)]
    fn slot(block: u32, grid: u32) -> u32;
    /// The order's part of its partition's key (see `Partition::KEY`).
    #[doc(hidden)]
    const KEY: u64;
}

/// Block `b` takes the rows of slot `b` (CUDA's `blockIdx.x`): the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Forward;

/// Block `b` takes the rows of slot `gridDim.x - 1 - b`: the blocks run the rows backwards,
/// as llm.c's softmax (`(gridDim.x - blockIdx.x - 1) * num_warps + warp_id`) and fused
/// classifier (`gridDim.x - (blockIdx.x + 1)`) do, so that the rows a kernel touches last, the
/// first ones, are still in L2 for the kernel that follows. A permutation of the blocks
/// (`b -> G - 1 - b` is its own inverse on `0..G`), so a reversed partition is as disjoint as
/// the forward one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Reversed;

impl RowOrder for Forward {
    const KEY: u64 = 1;
    #[inline(always)]
    fn slot(block: u32, _grid: u32) -> u32 {
        block
    }
}

impl RowOrder for Reversed {
    const KEY: u64 = 2;
    #[inline(always)]
    fn slot(block: u32, grid: u32) -> u32 {
        // `block < grid` in every launch: no wrap. (Wrapping keeps a misuse outside a launch a
        // plain number.)
        grid.wrapping_sub(1).wrapping_sub(block)
    }
}

mod sealed {
    /// Keeps [`RowOrder`](super::RowOrder) to this crate (each order is a proved permutation).
    pub trait Sealed {}
    impl Sealed for super::Forward {}
    impl Sealed for super::Reversed {}
}
