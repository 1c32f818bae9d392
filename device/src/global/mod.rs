//! Kernel parameters in global memory that many GPU threads share, and the rules that keep
//! them sound.
//!
//! Every thread of a launch receives the same parameters. A `&mut [T]` given to all of them
//! would be a lie to the compiler (it is `noalias`: LLVM reuses a value read before
//! `sync_threads()` after it, audit finding U2), so `#[kernel]` does not accept one. Instead:
//!
//! | parameter | who may access what |
//! |---|---|
//! | `x: &[T]` | every thread reads any element; nobody writes (compiled to `ld.global.nc`) |
//! | [`DisjointSlice<T>`] | thread `t` (1-D index) reads and writes elements `t, t + threads, ...`, named by its [`ThreadIndex`] |
//! | [`DisjointChunks<T, N>`] | thread `t` reads and writes chunks `t, t + threads, ...` of `N` elements, named by its [`ThreadIndex`] |
//! | [`DisjointPlanes<T, P>`] | thread `t` reads and writes element `i` of each of `P` planes for its indices `i` |
//! | [`PerBlock<T>`] | one thread of block `b` reads and writes element `b`, named by its [`BlockIndex`] |
//! | [`DisjointMatrix<T>`] | thread `(x, y)` reads and writes element (row `y + k H`, column `x + m W`) of a row-major matrix of `cols` columns, named by its [`ThreadCell`] |
//! | `DisjointMatrix<T, true>` | the transpose: thread `(x, y)` reads and writes element (row `x`, column `y`), named by its `ThreadCell<true>` from [`unique_cell_transposed`] (llm.c's `out[bt * OC + oc]` with `bt` from x) |
//! | [`PerBlockTile<T, TR, TC, BX, BY, TRANSPOSED>`] | block `(bx, by)` owns tile `(by, bx)` (`(bx, by)` if `TRANSPOSED`) of `TR x TC` elements; its thread `(tx, ty)` the tile elements `(ty + BY i, tx + BX j)`, named by its [`BlockTile`] |
//! | [`PerThreadTile<T, TR, TC, MR, MC, RR, RC>`] | block `(bx, by)` owns tile `(by, bx)` of `TR x TC` elements, cut into `RR x RC` quadrants; its thread `t` (1-D blocks of exactly `(TR / RR / MR) (TC / RC / MC)` threads) the contiguous `MR x MC` micro-tile `(t / G, t % G)` of each quadrant (`G = TC / RC / MC`), named by its [`BlockTile`] |
//! | [`PerWarpRow<T>`] | warp `w` owns row `w` of a row-major matrix; its lane `l` the columns `l, l + 32, ...`, named by its [`WarpRow`] |
//! | `DisjointSlice<T, SegmentRows<WIDTH>>` | segment `s = t / WIDTH` of a 1-D launch (`WIDTH` lanes of one warp) owns row `s` of a row-major matrix; its lane `l` the columns `l, l + WIDTH, ...`, named by its [`SegmentRow`] (`cols = 1`: one value per segment, lane 0's) |
//! | `DisjointSlice<T, BlockRows>` | block `b` owns rows `b, b + gridDim.x, ...` of a row-major matrix of `cols` columns; its thread `t` the columns `t, t + blockDim.x, ...`, named by its [`BlockRow`] |
//! | `PerWarpRow<T, Reversed>`, `DisjointSlice<T, BlockRows<Reversed>>` | as above with the blocks in reverse order (block `b` takes block `gridDim.x - 1 - b`'s rows: llm.c's softmax and fused classifier), named by [`warp_row_reversed`]/[`block_row_reversed`] and their `_rows_` iterators |
//! | `DisjointSlice<T, RowTiles>` | block `(x, y)` owns columns `[y tile, min((y + 1) tile, cols))` of row `x` of a row-major matrix (`cols` and `tile` run-time, from `cols(name = (cols, tile))`); its thread `t` the columns `y tile + t + blockDim.x j` of them, named by its [`RowTile`] (vLLM's `(seq, tile)` sampler grids) |
//! | `DisjointSlice<T, GridSlices>` | slices of `n` elements every `stride` (`cols(name = (n, stride))`): thread `i = blockIdx.x * blockDim.x + threadIdx.x` owns element `blockIdx.y stride + i` for `i < n`, named by its [`SliceCell`] (llm.c's `copy_and_cast_kernel`) |
//! | `DisjointSlice<T, BlockRowsX16>` | rows as `BlockRows`, each cut into a head (elements before the first 16-byte boundary), 16-byte vectors and a tail, the same split in every thread; thread `t` owns head/tail elements and vectors `t + blockDim.x j` of each run ([`RowX16`]: vLLM's vectorised rows with a scalar tail, any width) |
//! | `DisjointSlice<T, RotaryPairs<HEAD, HALF>>` | rows as `BlockRows`, cut into heads of `HEAD`; thread `t` owns the pairs `(k, k + HALF)` of its units `t + blockDim.x j` (NeoX rotary) |
//! | `DisjointSlice<T, PermutedRows>` | thread index `i = (q a + x) b + y` owns row `(q b + y) a + x` of `cols` elements (`cols(name = (cols, a, b))`): a thread per row at a permuted row (llm.c's attention softmax, thread `(b, t, h)` -> row `(b, h, t)`), read and written with plain accesses, named by its [`ThreadIndex`] |
//! | `DisjointSlice<T, Cells3d>` | thread `(x, y, z)` owns element `(z, y, x)` of a `[depth][rows][cols]` tensor, named by its [`ThreadCell3d`] |
//! | `DisjointSlice<T, Handoff>` | block `b` publishes row `b` (atomically); the last block to [`arrive`](DisjointSlice::arrive) reads them all ([`LastBlock`]) |
//! | `DisjointSlice<T, ByLastBlock>` | only the last block of a `Handoff`, through [`LastBlock::finish`]: its thread `t` reads and writes elements `t, t + blockDim.x, ...` (relaxed 16-byte accesses) |
//! | `DisjointSlice<T, InPlaceRows>` | rows as `BlockRows`; every thread of the block reads the whole row ([`RowRead`]), then after the phase barrier (`write_own`) writes its own columns ([`RowWrite`]): in-place updates that read other threads' columns first |
//! | [`UncheckedSlice<T>`] | only `unsafe` accesses, whose callers state which thread owns which element (register micro-tiles, computed indices) |
//! | [`AtomicSlice<T>`] | every thread reads and writes any element, atomically; this is also how threads read each other's writes after a barrier or grid sync |
//!
//! All of them are one type, [`DisjointSlice<T, P>`], generic over its [`partition`] `P` (the
//! names above are aliases): a partition states one map and what the launch must satisfy
//! for it, so a new pattern is a new partition.
//!
//! The four matrix outputs get their row width `cols` from `#[kernel(cols(name = ..))]`: a
//! by-value `u32` parameter or a constant, the same in every thread (a per-thread width would
//! let two threads alias). Their launch requirements: `DisjointMatrix` a 2-D launch (`z = 1`,
//! each axis at most `u32::MAX` threads), `PerBlockTile` blocks of exactly `(BX, BY, 1)` in a
//! grid with `z = 1`, `PerThreadTile` blocks of exactly `(threads, 1, 1)` in a grid with `z = 1`, `PerWarpRow` a 1-D launch of whole warps. A read-only [`Window`] of an
//! input matrix is checked once, so a stencil's reads need no check each.
//!
//! Each output type has exactly one index-to-element map, fixed by the type (and, for
//! chunks and planes, by a const generic and the buffer's length; for the matrices, by the
//! launch's `cols`), and accepts exactly one kind of witness; one buffer is one parameter of one type during a launch (the host
//! launchers borrow outputs exclusively). So no two threads of a launch reach the same
//! element of an output, whatever calls a kernel mixes (audit finding N1). The per-thread
//! outputs need a 1-D launch of at most `u32::MAX` threads, which every launcher checks
//! ([`LaunchRequirements`]): that keeps [`unique_index`] one `mad.lo.u32`.
//!
//! Element types are [`bytemuck::Pod`]. An `unsafe` escape hatch
//! ([`DisjointSlice::get_unchecked_mut`], [`DisjointSlice::as_mut_slice`]) covers computed
//! index patterns that a witness cannot express, with the contract written there. Under the
//! CPU executor's race detector a raw view (`as_mut_slice`, `as_mut_ptr`) is the running
//! thread's private mirror of the output, and the elements it changes there are checked like
//! any other access when the thread returns (docs/kernel-model.md, "The CPU executor as a
//! sanitizer").
//!
//! On the host target (the CPU executor) the same types are raw-pointer wrappers built by the
//! generated `launch_cpu` from the host slices, with the same rules. Every output type carries
//! the launch's borrow of its buffer as a lifetime (`DisjointSlice<'a, T, P>`), which a kernel
//! leaves out in its signature (`out: DisjointSlice<f32>`): the kernel function is generic over
//! it, so a body, host code on the CPU executor, cannot keep an output or anything made from one
//! past its launch (audit 2026-11-28, G13-1; docs/kernel-model.md, "Why a handle cannot
//! outlive its launch").

mod atomic_slice;
mod block_rows;
mod block_rows_x16;
mod cells3d;
mod chunks;
mod disjoint;
mod grid_slices;
mod handoff;
mod in_place;
mod index;
mod lane_cols;
mod matrix;
mod micro_tile;
mod order;
mod per_block;
mod permuted_rows;
mod planes;
mod row_tiles;
mod segment_rows;
mod slice;
mod tile;
mod unchecked;
mod warp_rows;
mod window;

/// The partitions of [`DisjointSlice<T, P>`]: marker types, one map each (which witness
/// reaches which elements, and what the launch must satisfy). docs/kernel-model.md states
/// each map, why it is disjoint, what the launchers check and what the CPU executor checks.
pub mod partition {
    pub use super::atomic_slice::Atomics;
    pub use super::block_rows::{BlockRows, RotaryPairs};
    pub use super::block_rows_x16::BlockRowsX16;
    pub use super::cells3d::Cells3d;
    pub use super::chunks::Chunks;
    pub use super::disjoint::Threads;
    pub use super::grid_slices::GridSlices;
    pub use super::handoff::{ByLastBlock, Handoff};
    pub use super::in_place::InPlaceRows;
    pub use super::matrix::Cells;
    pub use super::micro_tile::ThreadTiles;
    pub use super::per_block::Blocks;
    pub use super::permuted_rows::PermutedRows;
    pub use super::planes::Planes;
    pub use super::row_tiles::RowTiles;
    pub use super::segment_rows::SegmentRows;
    pub use super::slice::Partition;
    pub use super::tile::BlockTiles;
    pub use super::unchecked::Unchecked;
    pub use super::warp_rows::WarpRows;
}

pub use crate::atomic::{Atomic, AtomicElement, Scope};
pub use atomic_slice::AtomicSlice;
pub use block_rows::{BlockRow, BlockRowIter, RotaryPairsIter, ThreadRow, block_row, block_row_reversed, block_rows, block_rows_reversed};
pub use block_rows_x16::{RowX16, X16Element};
pub use cells3d::{ThreadCell3d, unique_cell_3d};
pub use chunks::DisjointChunks;
pub use disjoint::RemovedDisjointSliceMethod;
pub use ferrocuda_types::LaunchRequirements;
pub use grid_slices::{SliceCell, unique_slice_cell};
pub use handoff::{FinishView, LastBlock};
pub use in_place::{RowRead, RowWrite};
pub use index::{BlockIndex, GridStride, ThreadIndex, grid_stride, once_per_block, unique_index};
pub use matrix::{DisjointMatrix, GridStride2d, ThreadCell, grid_stride_2d, unique_cell, unique_cell_transposed};
pub use micro_tile::{MicroTileMut, PerThreadTile};
pub use order::{Forward, Reversed, RowOrder};
pub use per_block::PerBlock;
pub use planes::DisjointPlanes;
pub use row_tiles::{RowTile, row_tile};
pub use segment_rows::{SegmentRow, SegmentRowIter, segment_row, segment_rows};
pub use slice::DisjointSlice;
pub use tile::{BlockTile, PerBlockTile, TileMut, block_tile};
pub use unchecked::UncheckedSlice;
pub use warp_rows::{
    LaneRow, LaneRowIter, LaneRowZip, LaneRowZipN, PerWarpRow, WarpRow, WarpRowIter, warp_row, warp_row_reversed, warp_rows, warp_rows_reversed,
};
pub use window::{Window, window};
// The partitions without an alias of their own, where the docs' `DisjointSlice<T, BlockRows>`
// finds them with the other output names (issue 30's third port: E0432 with
// `global::{BlockRows, Handoff}`, which only `global::partition` had).
pub use partition::PermutedRows;
pub use partition::{BlockRows, BlockRowsX16, ByLastBlock, Cells3d, GridSlices, Handoff, InPlaceRows, RotaryPairs, RowTiles, SegmentRows};
pub use permuted_rows::PermutedRowIndex;

/// A kernel output parameter type: what `#[kernel]` builds from the pointer and length the
/// launcher passes, and what it requires of the launch. Implemented by the output types of
/// this module; not for other types (its contract is the soundness of the kernel model).
///
/// # Safety
/// The type hands out access to its elements only as its documented partition allows: no
/// two threads of a launch that meets [`REQUIREMENTS`](Self::REQUIREMENTS) reach the same
/// element, except atomically.
#[doc(hidden)]
pub unsafe trait KernelOutput: Sized {
    /// The buffer's element type.
    type Element;
    /// What the launch must satisfy for the partition to hold.
    const REQUIREMENTS: LaunchRequirements;
    /// What the output needs besides the buffer: `()` for the 1-D outputs, the row width
    /// (`u32`) for the row-major ones ([`DisjointMatrix`], [`PerBlockTile`],
    /// [`PerThreadTile`], [`PerWarpRow`], `DisjointSlice<T, BlockRows>`), `(rows, cols)`
    /// for `DisjointSlice<T, Cells3d>` and `(cols, tile)` for `DisjointSlice<T, RowTiles>`,
    /// which `#[kernel(cols(name = ..))]` names.
    type Shape: Copy;
    /// The key of the output's map (its partition), which the first launch compares between
    /// the host and the device build beside the element type's key (audit 2026-11-28, G13R-4).
    #[doc(hidden)]
    const PARTITION_KEY: u64;

    /// Builds the parameter.
    ///
    /// # Safety
    /// `pointer` is valid (and aligned) for reads and writes of `len` elements for the whole
    /// launch, no other parameter or memory access of the launch reaches those elements
    /// except through the kernel's copies of this parameter, the launch meets
    /// [`REQUIREMENTS`](Self::REQUIREMENTS), and `shape` is the same in every thread of the
    /// launch.
    unsafe fn from_raw_parts(pointer: *mut Self::Element, len: usize, shape: Self::Shape) -> Self;

    /// The output's launch-time bound (issue 30): a fact about the shape, the launch and the
    /// buffer's length that the output's device code relies on, checked by every launcher
    /// (the GPU's and `launch_cpu`) before the kernel runs, after
    /// [`REQUIREMENTS`](Self::REQUIREMENTS). `output` names the parameter in the error.
    #[doc(hidden)]
    #[inline]
    fn check_launch(
        _output: &'static str,
        _config: &ferrocuda_types::LaunchConfig,
        _len: usize,
        _shape: Self::Shape,
    ) -> Result<(), ferrocuda_types::LaunchProblem> {
        Ok(())
    }
}

/// An output type that lives no longer than `'a`, the borrow of the buffer it is made from:
/// implemented for `DisjointSlice<'a, T, P>` (and so every alias) at its own lifetime only.
/// The CPU executor makes outputs only through `OutputParts<'a, T>::output`, which requires
/// it, so an output type written with a longer lifetime than the launch's borrow (say
/// `'static`) does not compile; with the lifetime elided, the kernel body is generic over it
/// and cannot move the output, or anything made from it, into a `'static` place (a leaked
/// box, a thread-local, a spawned thread): audit 2026-11-28, G13-1. Lifetimes are erased
/// before code generation, so the device build is unchanged.
///
/// # Safety
/// Every value of the type, and every value its safe methods return, lives no longer than
/// `'a` (the type is not `'static` unless `'a` is).
#[doc(hidden)]
pub unsafe trait OutputOf<'a> {}

/// An output addressed by its buffer alone (every output but the row-major matrices): what
/// `#[kernel]` requires of an output parameter that `cols(..)` does not name.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is a row-major matrix output: name its row width in the kernel's attribute",
    label = "needs `#[kernel(cols(<this parameter> = <a u32 parameter or constant>))]`",
    note = "the width must be the same in every thread of the launch, so it comes from a by-value kernel parameter or a constant, named once in the attribute"
)]
pub trait WholeBufferOutput: KernelOutput {}

/// A row-major output, whose row width (or, for [`Cells3d`](partition::Cells3d), rows and
/// columns) `#[kernel(cols(name = ..))]` gives.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no row width: `cols(..)` names only the row-major outputs `DisjointMatrix`, `PerBlockTile`, `PerThreadTile`, `PerWarpRow` and `DisjointSlice<T, P>` for `P` = `BlockRows`, `RotaryPairs<..>`, `Handoff` (`(rows, cols)` for `Cells3d`, `(cols, tile)` for `RowTiles`, `(n, stride)` for `GridSlices`)",
    label = "not a row-major matrix output"
)]
pub trait RowMajorOutput: KernelOutput {}

/// The shape of a partition that needs nothing besides the buffer: `()` only.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "this output's partition needs the launch's row width (`{Self}`): name it in the kernel's attribute",
    label = "needs `#[kernel(cols(<this parameter> = <a u32 parameter or constant>))]`",
    note = "the width must be the same in every thread of the launch, so it comes from a by-value kernel parameter or a constant, named once in the attribute"
)]
pub trait NoShape: Copy {
    /// The value.
    const NONE: Self;
}
impl NoShape for () {
    const NONE: Self = ();
}

/// The shape of a row-major partition, which `#[kernel(cols(..))]` gives: a width (`u32`),
/// or two values (`(u32, u32)`: rows and columns for `Cells3d`, columns and tile for `RowTiles`, elements and stride for `GridSlices`),
/// or three (`(u32, u32, u32)`: `PermutedRows`'s columns and radices).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "this output has no row width: `cols(..)` names only the row-major outputs `DisjointMatrix`, `PerBlockTile`, `PerThreadTile`, `PerWarpRow` and `DisjointSlice<T, P>` for `P` = `BlockRows`, `RotaryPairs<..>`, `Handoff` (`(rows, cols)` for `Cells3d`, `(cols, tile)` for `RowTiles`, `(n, stride)` for `GridSlices`, `(cols, a, b)` for `PermutedRows`)",
    label = "not a row-major matrix output"
)]
pub trait LaunchShape: Copy {}
impl LaunchShape for u32 {}
impl LaunchShape for (u32, u32) {}
impl LaunchShape for (u32, u32, u32) {}

/// The bounds panic of every output type's checked access. On the GPU through
/// [`kernel_panic!`](crate::kernel_panic), so that the cheap panic report keeps the index and
/// the length (stored raw beside the format string, formatted by the host) where `panic!`'s
/// message would be dropped (its `core::fmt` arguments would cost the kernel a stack frame);
/// on the host the same text through `panic!`. Not inlined: one copy of the report per kernel,
/// not one per access site (the index, length and caller's location arrive as arguments).
#[cold]
#[inline(never)]
#[track_caller]
fn out_of_bounds(index: usize, len: usize) -> ! {
    #[cfg(target_arch = "nvptx64")]
    crate::kernel_panic!("index out of bounds: the len is {} but the index is {}", len, index);
    #[cfg(not(target_arch = "nvptx64"))]
    panic!("index out of bounds: the len is {} but the index is {}", len, index)
}

/// Tells the CPU executor's race detector that the running thread takes elements
/// `index..index + count` of the output at `pointer` (`len` elements) for reading or writing;
/// nothing on the GPU. Every output type calls it where it hands out an element, so two
/// threads reaching one element during a launch are reported whichever types they went through.
///
/// Returns where the output is for this thread: `pointer` itself, except on the CPU executor
/// for a thread that took a raw view of it ([`raw_view`]), whose accesses all go to its
/// private mirror so that it sees its own writes in order.
#[inline(always)]
pub(crate) fn note_output<T>(pointer: *mut T, len: usize, index: usize, count: usize, write: bool) -> *mut T {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::cpu::hooks::note_output_access(pointer, len, index, count, write);
    #[cfg(target_arch = "nvptx64")]
    {
        let _ = (len, index, count, write);
        pointer
    }
}

/// The pointer an `unsafe` escape hatch (`as_mut_slice`, `as_mut_ptr`) hands out for the
/// output of `len` elements at `pointer`: `pointer` on the GPU; on the CPU executor with race
/// detection, the running thread's private mirror of the output, whose changed elements are
/// recorded as the thread's writes when it returns (`cpu::raw_views` gives the argument).
///
/// `atomic_word` is the partition's [`Partition::ATOMIC_WORD`](slice::Partition::ATOMIC_WORD)
/// for elements of `T`: how the mirror's copy reads the output without racing with the other
/// threads' accesses (audit 2026-11-28, G13R-3).
#[inline(always)]
pub(crate) fn raw_view<T>(pointer: *mut T, len: usize, atomic_word: usize) -> *mut T {
    #[cfg(not(target_arch = "nvptx64"))]
    return crate::cpu::hooks::raw_output_view(pointer, len, atomic_word);
    #[cfg(target_arch = "nvptx64")]
    {
        let _ = (len, atomic_word);
        pointer
    }
}

/// What the code `#[kernel]` generates calls to build these parameters; not public API.
#[doc(hidden)]
pub mod __private {
    pub use super::{KernelOutput, LaunchRequirements, NoShape};
    use bytemuck::Pod;
    pub use ferrocuda_types::same_lengths;

    /// A by-value kernel parameter, rebuilt in the device entry from the bytes the host's
    /// launch passed (audit 2026-11-28g, G19R-1). The entry takes the parameter as
    /// `MaybeUninit<T>` (same size, alignment and ABI as `T`, so the PTX parameter is the same)
    /// and only this function makes a `T` of it, under the device crate's own bounds: `T: Pod`
    /// (every initialised bit pattern is a valid `T`: no reference, no pointer with a validity
    /// rule, no `bool`/enum niche) and `T: LayoutKey` (the key the first launch compares).
    ///
    /// Before, the entry took the parameter *as* `T`, the type the device build resolved, with
    /// no bound in that build at all: the only thing between a host `u64` and a device
    /// `&'static mut u32` of one name was the first launch's comparison of type keys, which the
    /// device build computes through `::ferrocuda_device::__private::key_of`, a path the kernel's
    /// crate can rename (a shim returning 0, "unknown"). Now the device build itself refuses a
    /// by-value type that is not plain data, whatever the tables say: the bound is this
    /// function's, and a crate that renames `ferrocuda_device` gets a function of its own here,
    /// which cannot make a `T` out of a `MaybeUninit<T>` without writing `unsafe`.
    ///
    /// Sound because the host's launch copies the bytes of an initialised host value that is
    /// `Pod` (`KernelParam::value`/`scalar`: no padding, so every byte is initialised), of the
    /// size the driver reports for this parameter (checked on the first launch,
    /// `cuFuncGetParamInfo`), and any such bytes are a valid `T: Pod`.
    #[doc(hidden)]
    #[inline(always)]
    pub fn by_value<T: Pod + crate::LayoutKey>(raw: core::mem::MaybeUninit<T>) -> T {
        // SAFETY: as above: initialised bytes (the host's `Pod` value) of `T`'s size, and every
        // initialised bit pattern is a `T` (`Pod`).
        unsafe { raw.assume_init() }
    }

    /// A by-value parameter written like a primitive (`u32`, `bool`, `NonZeroU32`), in the
    /// device entry (G19R-1): the entry takes it as the primitive the macro named by its full
    /// path (`::core::primitive::u32`), and this function, bounded by the device crate's own
    /// [`DeviceScalar`] (the real primitives only), gives it to the kernel as the type the kernel
    /// wrote. A device build whose spelling names another type (a `cfg`-chosen
    /// `type u32 = &'static mut u32;`) is a type error here, whatever the cross-build tables
    /// say; a renamed `ferrocuda_device` with an unbounded `scalar` still gets a real primitive
    /// from the entry (the parameter's type is `::core`'s, not the kernel crate's).
    ///
    /// An identity on the value, so the PTX parameter and its LLVM attributes (`noundef`, a
    /// `bool`'s range) are the primitive's, as before.
    #[doc(hidden)]
    #[inline(always)]
    pub fn scalar<T: DeviceScalar>(value: T) -> T {
        value
    }

    /// The primitives a device entry takes by value ([`scalar`]).
    ///
    /// # Safety
    /// Implemented here for the real primitives, and nowhere else: the host's launch passes
    /// a value of the same primitive (its `KernelScalar`, the same list).
    pub unsafe trait DeviceScalar: Copy {}
    // The one list, shared with the host's `KernelScalar` (ferrocuda-types).
    ferrocuda_types::impl_kernel_scalars!(unsafe impl DeviceScalar);

    /// [`__assume_launch`](crate::thread::__assume_launch) with the combined `REQUIREMENTS` of an entry's output types `S` (a tuple
    /// of them, nested for more than eight): what every launch of the entry was checked against
    /// (the host's launch checks the outputs' facts itself, G18S-1). Here, not in `thread`, so that
    /// `thread` does not import `global` (no import cycle inside the crate).
    ///
    /// The requirements come from the output types through the device crate's own
    /// [`OutputSet`] (an `unsafe trait`), not from a value
    /// the entry computes: the entry names its paths in the kernel's crate, which can rename
    /// `ferrocuda_device` (session 19, G18S-1), and a value computed through such a path could be
    /// one that no launch was checked against. What remains is the device build's choice of the
    /// types, which the first launch compares with the host's (their keys).
    ///
    /// # Safety
    /// The launch satisfies the outputs' requirements (checked by the host's launch).
    #[doc(hidden)]
    #[inline(always)]
    pub unsafe fn __assume_outputs_launch<S: OutputSet>(_outputs: core::marker::PhantomData<S>) {
        // SAFETY: the caller's contract.
        unsafe { crate::thread::__assume_launch(const { S::REQUIREMENTS }) }
    }

    /// The output types of a kernel entry, as a tuple (nested for more than eight): their
    /// launch requirements combined, which the entry assumes
    /// ([`__assume_outputs_launch`]).
    ///
    /// # Safety
    /// `REQUIREMENTS` is what the members' `KernelOutput::REQUIREMENTS` combine to: the
    /// implementations here, and no others.
    pub unsafe trait OutputSet {
        /// The combined requirements.
        const REQUIREMENTS: LaunchRequirements;
    }
    // SAFETY: one output's own requirements.
    unsafe impl<T: Pod, P: super::slice::Partition> OutputSet for super::DisjointSlice<'_, T, P> {
        const REQUIREMENTS: LaunchRequirements = <Self as KernelOutput>::REQUIREMENTS;
    }
    macro_rules! output_sets {
        ($($member:ident),+) => {
            // SAFETY: the members' requirements, combined as the launchers combine them.
            unsafe impl<$($member: OutputSet),+> OutputSet for ($($member,)+) {
                const REQUIREMENTS: LaunchRequirements = LaunchRequirements::NONE $(.and($member::REQUIREMENTS))+;
            }
        };
    }
    output_sets!(A);
    output_sets!(A, B);
    output_sets!(A, B, C);
    output_sets!(A, B, C, D);
    output_sets!(A, B, C, D, E);
    output_sets!(A, B, C, D, E, F);
    output_sets!(A, B, C, D, E, F, G);
    output_sets!(A, B, C, D, E, F, G, H);

    /// The launchers' check of an output's launch-time bound ([`KernelOutput::check_launch`]).
    /// The output type comes last, as a marker, so that the compiler meets the shape before it
    /// knows the type: a shape of the wrong type then fails the projection `O::Shape` with the
    /// error the output's construction gives already (the same text at the same span, which
    /// rustc prints once), not a second one.
    #[inline]
    pub fn check_output_launch<O: KernelOutput>(
        output: &'static str,
        config: &ferrocuda_types::LaunchConfig,
        len: usize,
        shape: O::Shape,
        _output_type: core::marker::PhantomData<O>,
    ) -> Result<(), ferrocuda_types::LaunchProblem> {
        O::check_launch(output, config, len, shape)
    }

    /// A read-only slice parameter (`x: &[T]`, and the `Some` of an `Option<&[T]>`), rebuilt in
    /// the device entry from the address parameter and the length the host's launch passed.
    ///
    /// The element type is bounded here, by the device crate's own `Pod` (session 21, the slice
    /// half of G19R-1): the entry names this function through `::ferrocuda_device`, a path the
    /// kernel's crate can rename, but then the function is the crate's own, and making a
    /// `&[T]` of an address takes `unsafe` there. Before, the entry called
    /// `core::slice::from_raw_parts` itself, for whatever element type the device build
    /// resolved (`Pod` was checked through a renamable `require_pod` and the device-written
    /// type tables only), so a `cfg`-chosen `&'static mut u32` element read the host's integers
    /// as references. Now every element the entry makes is plain data whatever the tables say,
    /// and the host's bytes (initialised `Pod` values) are valid ones. `'a` is unbounded, as
    /// `from_raw_parts`'s: the entry gives it the kernel call's.
    ///
    /// The entry's parameter is `&[T; 0]`: no-alias and read-only like `&[T]` (loads become
    /// `ld.global.nc`) and valid for an empty slice; this is an identity on the PTX.
    ///
    /// # Safety
    /// `pointer` is the start of `len` initialised elements of `T` in global memory that nobody
    /// writes until the kernel has finished (the launcher's `DeviceRead` borrow).
    #[doc(hidden)]
    #[inline(always)]
    pub unsafe fn input<'a, T: Pod>(pointer: &[T; 0], len: usize) -> &'a [T] {
        // SAFETY: the caller's contract; `T: Pod`, so any initialised bytes are `T`s.
        unsafe { core::slice::from_raw_parts(pointer.as_ptr(), len) }
    }

    /// Builds an output parameter from the address parameter and length the host launcher
    /// passed (and, for a row-major matrix output, the row width of `#[kernel(cols(..))]`).
    ///
    /// Takes the entry's parameter itself (`&UnsafeCell<[O::Element; 0]>`, typed by the output's
    /// element) and bounds the element by `Pod` here (session 21, as [`input`]): the entry makes
    /// no pointer of its own (before, `cell.get().cast()`, through `::core::cell::UnsafeCell`,
    /// whose `get` is the kernel crate's own method when the crate makes `::core` its own).
    ///
    /// # Safety
    /// As for [`KernelOutput::from_raw_parts`], for the pointer `cell.get()`.
    #[inline(always)]
    pub unsafe fn output<O: KernelOutput>(cell: &core::cell::UnsafeCell<[O::Element; 0]>, len: usize, shape: O::Shape) -> O
    where
        O::Element: Pod,
    {
        // SAFETY: forwarded.
        unsafe { O::from_raw_parts(cell.get().cast(), len, shape) }
    }

    /// The key of an output parameter's type, in the device build's type table and the host
    /// build's launcher: its element type's [`LayoutKey`](crate::LayoutKey) with its
    /// partition's key mixed in, so that two builds whose `cfg`s give one output two
    /// partitions (whose launch requirements differ) disagree (audit 2026-11-28, G13R-4).
    #[inline(always)]
    pub const fn output_key<O: KernelOutput>() -> u64
    where
        O::Element: crate::LayoutKey,
    {
        crate::layout_key::mix(crate::layout_key::key_of::<O::Element>(), O::PARTITION_KEY)
    }

    /// Compile-time check the launchers use: `O` is an output type whose elements are `T`,
    /// addressed by the buffer alone.
    pub const fn require_output<O: KernelOutput<Element = T> + super::WholeBufferOutput, T: Pod>() {}

    /// Compile-time check the launchers use: `O` is a row-major output whose elements are `T`
    /// (its width, or rows and columns, named in `#[kernel(cols(..))]`).
    pub const fn require_matrix_output<O: KernelOutput<Element = T> + super::RowMajorOutput, T: Pod>() {}

    /// The device type a `&TensorMap` kernel parameter must name: only
    /// [`tma::TensorMap`](crate::tma::TensorMap) (sealed: a type merely called `TensorMap`
    /// would get a host `DeviceTensorMap`'s address while the kernel reads it as another type).
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not `ferrocuda_device::tma::TensorMap`",
        label = "a `&TensorMap` kernel parameter must be the device's tensor map type",
        note = "write `map: &ferrocuda_device::tma::TensorMap` (or import it): the host passes a `DeviceTensorMap`"
    )]
    pub trait DeviceTensorMapType: sealed::Sealed {}
    #[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
    impl DeviceTensorMapType for crate::tma::TensorMap {}
    mod sealed {
        pub trait Sealed {}
        #[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
        impl Sealed for crate::tma::TensorMap {}
        pub trait SealedStore {}
        #[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
        impl SealedStore for crate::tma::StoreMap {}
    }

    /// Compile-time check the launchers use: `M` is the device's tensor map type.
    pub const fn require_tensor_map<M: DeviceTensorMapType>() {}

    /// The device type a `&StoreMap` kernel parameter must name: only
    /// [`tma::StoreMap`](crate::tma::StoreMap) (sealed, as [`DeviceTensorMapType`]).
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not `ferrocuda_device::tma::StoreMap`",
        label = "a `&StoreMap` kernel parameter must be the device's store map type",
        note = "write `dst: &ferrocuda_device::tma::StoreMap` (or import it): the host passes `&mut DeviceTensorMap` made by `TensorMap::tiled_mut`"
    )]
    pub trait DeviceStoreMapType: sealed::SealedStore {}
    #[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
    impl DeviceStoreMapType for crate::tma::StoreMap {}

    /// Compile-time check the launchers use: `M` is the device's store map type.
    pub const fn require_store_map<M: DeviceStoreMapType>() {}

    /// A read-only host slice handed to every GPU thread of a CPU launch, borrowed for `'a`
    /// (the launch): the slice each thread gets back lives no longer (G13-1).
    pub struct InputParts<'a, T> {
        pointer: *const T,
        len: usize,
        _borrow: core::marker::PhantomData<&'a [T]>,
    }

    // SAFETY: only shared references are made from it, and `T: Sync`.
    unsafe impl<T: Sync> Sync for InputParts<'_, T> {}
    // SAFETY: as above.
    unsafe impl<T: Sync> Send for InputParts<'_, T> {}

    impl<'a, T> InputParts<'a, T> {
        /// Keeps `slice`'s pointer and length.
        pub fn new(slice: &'a [T]) -> Self {
            InputParts { pointer: slice.as_ptr(), len: slice.len(), _borrow: core::marker::PhantomData }
        }

        /// The slice again, for no longer than the borrow it was made from.
        pub fn get(&self) -> &'a [T] {
            // SAFETY: made from a `&'a [T]`, which is still borrowed for `'a`.
            unsafe { core::slice::from_raw_parts(self.pointer, self.len) }
        }
    }

    /// An exclusively borrowed host slice handed to every GPU thread of a CPU launch as an
    /// output parameter (a [`KernelOutput`], which only ever hands out what its rules allow).
    ///
    /// `'a` is the launch's borrow of the slice, and every output it makes is an
    /// [`OutputOf<'a>`](super::OutputOf): a kernel body (host code with `std` on the CPU
    /// executor) cannot keep its output, or anything made from it, past the launch (audit
    /// 2026-11-28, G13-1).
    pub struct OutputParts<'a, T> {
        pointer: *mut T,
        len: usize,
        /// The launch that took the output first and the shape it took it with (a
        /// `O::Shape`): every other thread must be of that launch and give that shape.
        #[cfg(not(target_arch = "nvptx64"))]
        taken: std::sync::OnceLock<(usize, std::boxed::Box<dyn core::any::Any + Send + Sync>)>,
        _borrow: core::marker::PhantomData<&'a mut [T]>,
    }

    // SAFETY: the threads reach the elements only through a `KernelOutput` (each element from
    // one thread, or atomically); `T: Send + Sync` so values may cross.
    unsafe impl<T: Send + Sync> Sync for OutputParts<'_, T> {}
    // SAFETY: as above.
    unsafe impl<T: Send + Sync> Send for OutputParts<'_, T> {}

    impl<'a, T: Pod> OutputParts<'a, T> {
        /// Keeps `slice`'s pointer and length; the slice stays borrowed for `'a`.
        pub fn new(slice: &'a mut [T]) -> Self {
            OutputParts {
                pointer: slice.as_mut_ptr(),
                len: slice.len(),
                #[cfg(not(target_arch = "nvptx64"))]
                taken: std::sync::OnceLock::new(),
                _borrow: core::marker::PhantomData,
            }
        }

        /// The slice as one GPU thread's output parameter, which lives no longer than the
        /// borrow (`O: OutputOf<'a>`).
        ///
        /// Checks, in the calling GPU thread, what the launchers checked before the launch
        /// (session 19, audit 2026-11-28e's G18S-1): the running launch meets the output's
        /// `REQUIREMENTS` and its launch-time bound (`KernelOutput::check_launch`) for this
        /// buffer and `shape`, every thread that takes the output is of one launch and gives
        /// one `shape`, and it runs on the CPU executor at all. A failed check panics in the
        /// thread, which the executor reports as the launch's error, before any output is made.
        /// The `#[kernel]` launchers reach their own checks through paths the kernel's crate can
        /// rename (`extern crate self as ferrocuda_device;`, re-exporting the real parts beside
        /// checks of its own); these cannot be renamed away.
        ///
        /// # Safety
        /// The launch has not returned (every thread that uses the output is joined before
        /// the borrow ends), and each GPU thread takes the output once.
        pub unsafe fn output<O: KernelOutput<Element = T> + super::OutputOf<'a>>(&self, shape: O::Shape) -> O
        where
            O::Shape: PartialEq + Send + Sync + 'static,
        {
            #[cfg(not(target_arch = "nvptx64"))]
            self.check_thread::<O>(shape);
            // SAFETY: as the caller guarantees, with the launch and shape checked above; the
            // launch borrows it exclusively for `'a`.
            unsafe { O::from_raw_parts(self.pointer, self.len, shape) }
        }

        /// [`OutputParts::output`]'s checks (panics naming the problem).
        #[cfg(not(target_arch = "nvptx64"))]
        #[track_caller]
        fn check_thread<O: KernelOutput>(&self, shape: O::Shape)
        where
            O::Shape: PartialEq + Send + Sync + 'static,
        {
            let Some((launch, config)) = crate::cpu::hooks::running_launch() else {
                panic!("a kernel output is made only inside a launch of the CPU executor (the kernel's `launch_cpu`)")
            };
            if let Err(problem) = config.check_requirements(O::REQUIREMENTS).and_then(|()| O::check_launch("output", &config, self.len, shape)) {
                panic!("this launch does not meet what an output of the kernel requires ({problem}); its launcher's checks were skipped")
            }
            let (first_launch, first_shape) = self.taken.get_or_init(|| (launch, std::boxed::Box::new(shape)));
            if *first_launch != launch {
                panic!("an output's buffer was taken by two launches at once: each launch borrows its outputs exclusively")
            }
            if first_shape.downcast_ref::<O::Shape>() != Some(&shape) {
                panic!("the threads of a launch gave an output two shapes (row widths): one shape holds for every thread")
            }
        }
    }

    /// A raw pointer argument of an `unsafe` kernel, handed to every thread of a CPU launch.
    pub struct PointerParts<P>(P);

    // SAFETY: the launcher is an `unsafe fn` whose caller vouches for the pointer's use.
    unsafe impl<P> Sync for PointerParts<P> {}
    // SAFETY: as above.
    unsafe impl<P> Send for PointerParts<P> {}

    impl<P: Copy> PointerParts<P> {
        /// Wraps `pointer`.
        pub fn new(pointer: P) -> Self {
            PointerParts(pointer)
        }

        /// The pointer.
        pub fn get(&self) -> P {
            self.0
        }
    }

    /// Compile-time check the launchers use: slice elements must be plain data.
    pub const fn require_pod<T: Pod>() {}
}
