//! [`DisjointSlice<T, P>`]: the one output type, generic over its [`Partition`]; the
//! skeleton every output shares (a pointer, a length, the launch's shape) and the `unsafe`
//! escape hatches every partition has.

use core::marker::PhantomData;

use bytemuck::Pod;

use super::{KernelOutput, LaunchRequirements};

/// How an output's elements are divided between the threads of a launch: which elements the
/// holder of each witness may reach, and what the launch must satisfy for no two threads to
/// reach the same element (except atomically). A partition is a marker type; its accesses are
/// the inherent methods of [`DisjointSlice<T, ThisPartition>`](DisjointSlice), which take
/// the partition's witness. The partitions of this crate and their maps are listed in
/// [`partition`](super::partition) and in docs/kernel-model.md.
///
/// # Safety
/// For every launch that meets [`REQUIREMENTS`](Self::REQUIREMENTS) and `check_launch` (the
/// partition's launch-time bound) and every buffer length and shape that is the same in every
/// thread, the accesses that the inherent methods of
/// `DisjointSlice<T, Self>` give in safe code reach the element set the partition's map gives
/// the running thread, those sets are pairwise disjoint between threads (or every access is
/// atomic), and every element reached is inside the buffer. Only this crate implements it
/// (the trait is sealed): a new pattern is a new partition here, with its map, its proof and
/// its tests.
pub unsafe trait Partition: Sized + sealed::Sealed {
    /// What the launch must satisfy for the map to be disjoint (checked by every launcher).
    const REQUIREMENTS: LaunchRequirements;
    /// What the output needs besides the buffer, the same in every thread: `()`, or the row
    /// width (`u32`) that `#[kernel(cols(name = ..))]` gives.
    type Shape: Copy + PartialEq + Send + Sync + 'static;
    /// Compile-time checks of the partition's parameters (evaluated when an output is built).
    const VALID: () = ();
    /// The partition's identity (its name, its parameters, its row order), part of the key
    /// that the first launch compares between the host and the device build (audit
    /// 2026-11-28, G13R-4: a `cfg`-chosen alias gave the device another partition than the one
    /// whose `REQUIREMENTS` the host checked).
    #[doc(hidden)]
    const KEY: u64;
    /// How the other threads of a launch access the elements, which decides how the CPU
    /// executor's mirror of a raw view copies them without racing with those accesses (audit
    /// 2026-11-28, G13R-3): 0 when every plain access goes through the race detector's claims
    /// (the default), [`ATOMIC_ELEMENTS`](Self::ATOMIC_ELEMENTS) when every access is an atomic
    /// of the element's own size ([`Atomics`](super::partition::Atomics)), otherwise the size
    /// in bytes of the relaxed atomic words every access is made of (4 for the `Handoff`
    /// partitions).
    #[doc(hidden)]
    const ATOMIC_WORD: usize = 0;
    /// [`ATOMIC_WORD`](Self::ATOMIC_WORD)'s value for atomics of the element's size.
    #[doc(hidden)]
    const ATOMIC_ELEMENTS: usize = usize::MAX;

    /// The partition's launch-time bound (issue 30): a fact about `shape`, the launch and the
    /// buffer's `len` that its accesses rely on, checked by every launcher before the kernel
    /// runs (none by default). What the map needs of the launch's shape alone is
    /// [`REQUIREMENTS`](Self::REQUIREMENTS); this is for facts that also involve the shape
    /// (`Cells3d`: `gridDim.z * blockDim.z * rows` within `2^32`).
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

    /// What [`DisjointSlice::len`] counts for a buffer of `len` elements: elements, or whole
    /// chunks for [`Chunks<N>`](super::partition::Chunks).
    #[inline(always)]
    fn units(len: usize) -> usize {
        len
    }
}

/// A kernel output whose elements are divided between the launch's threads by the partition
/// `P`: each thread reaches only the elements of the witnesses it holds, through the methods
/// of `DisjointSlice<T, P>` for its `P`. Without `P` it is the per-thread output (thread `t`
/// owns elements `t, t + threads, ...`, see [`Threads`](super::partition::Threads)); the
/// other output names of this module are this type with another partition:
///
/// | name | partition |
/// |---|---|
/// | `DisjointSlice<T>` | [`Threads`](super::partition::Threads) |
/// | [`DisjointChunks<T, N>`](super::DisjointChunks) | [`Chunks<N>`](super::partition::Chunks) |
/// | [`DisjointPlanes<T, P>`](super::DisjointPlanes) | [`Planes<P>`](super::partition::Planes) |
/// | [`PerBlock<T>`](super::PerBlock) | [`Blocks`](super::partition::Blocks) |
/// | [`DisjointMatrix<T>`](super::DisjointMatrix) | [`Cells`](super::partition::Cells) |
/// | [`PerBlockTile<T, ..>`](super::PerBlockTile) | [`BlockTiles<..>`](super::partition::BlockTiles) |
/// | [`PerThreadTile<T, ..>`](super::PerThreadTile) | [`ThreadTiles<..>`](super::partition::ThreadTiles) |
/// | [`PerWarpRow<T>`](super::PerWarpRow) | [`WarpRows`](super::partition::WarpRows) |
/// | [`DisjointMatrix<T, true>`](super::DisjointMatrix) | [`Cells<true>`](super::partition::Cells) (the transposed cell map) |
/// | [`UncheckedSlice<T>`](super::UncheckedSlice) | [`Unchecked`](super::partition::Unchecked) |
/// | [`AtomicSlice<T>`](super::AtomicSlice) | [`Atomics`](super::partition::Atomics) |
///
/// and without a name of their own: [`BlockRows`](super::partition::BlockRows) (a row per
/// block, grid-strided, threads striding over it), [`BlockRowsX16`](super::partition::BlockRowsX16)
/// (the same rows cut into a scalar head, 16-byte vectors and a scalar tail), [`RotaryPairs`](super::partition::RotaryPairs)
/// (rows of heads of NeoX rotary pairs, in place), [`Cells3d`](super::partition::Cells3d)
/// (thread `(x, y, z)` owns element `(z, y, x)` of a 3-D tensor),
/// [`SegmentRows<WIDTH>`](super::partition::SegmentRows) (a row per `WIDTH`-lane segment of a
/// warp, its lanes striding over it),
/// [`RowTiles`](super::partition::RowTiles) (block `(x, y)` owns a run-time tile of row `x`,
/// threads striding over it), [`GridSlices`](super::partition::GridSlices) (slice `blockIdx.y`
/// at a run-time stride, a 1-D grid over it), [`PermutedRows`](super::partition::PermutedRows)
/// (a thread per row at a permuted row: thread `(b, t, h)` owns row `(b, h, t)`) and
/// [`Handoff`](super::partition::Handoff) (one partial per block, read by the last block).
///
/// ```ignore
/// #[kernel]
/// pub fn saxpy(a: f32, x: &[f32], mut y: DisjointSlice<f32>) {
///     let i = thread::unique_index();
///     if let Some(y_i) = y.get_mut(i) {
///         *y_i = a * x[i.get()] + *y_i;
///     }
/// }
/// ```
///
/// It is a pointer and a length, not a `&mut [T]`: the compiler makes no assumption that
/// other threads leave the memory alone, so nothing is miscompiled across barriers, and the
/// accesses compile to plain `ld.global`/`st.global`. The host launcher takes the buffer as
/// `&mut` (exclusive for the launch), `launch_cpu` a `&mut [T]`; both refuse a launch that
/// does not meet the partition's [`REQUIREMENTS`](Partition::REQUIREMENTS), which keeps
/// the witnesses unique. One buffer is one parameter of one partition during a launch, so it
/// has one map (audit finding N1).
///
/// Every partition has the `unsafe` escape hatch for index patterns no witness expresses:
/// [`get_unchecked_mut`](Self::get_unchecked_mut), [`write_unchecked`](Self::write_unchecked),
/// [`as_mut_slice`](Self::as_mut_slice), [`as_mut_ptr`](Self::as_mut_ptr).
pub struct DisjointSlice<'a, T: Pod, P: Partition = super::partition::Threads> {
    pub(super) pointer: *mut T,
    pub(super) len: usize,
    pub(super) shape: P::Shape,
    /// `'a`: the launch's borrow of the buffer. Nothing made from the output (an element
    /// reference, a derived view, the output itself) can outlive it, so on the CPU executor,
    /// where a kernel body is host code with `std`, no safe code keeps one past its launch
    /// (audit 2026-11-28, G13-1).
    _elements: PhantomData<(*mut T, P, &'a mut [T])>,
}

// SAFETY: `from_raw_parts` keeps the pointer, length and shape; every safe access goes
// through the partition's methods, whose contract (`Partition`'s safety section) makes the
// threads' element sets disjoint under `P::REQUIREMENTS`, which become the output's.
unsafe impl<T: Pod, P: Partition> KernelOutput for DisjointSlice<'_, T, P> {
    type Element = T;
    const REQUIREMENTS: LaunchRequirements = P::REQUIREMENTS;
    type Shape = P::Shape;
    const PARTITION_KEY: u64 = P::KEY;

    #[inline]
    fn check_launch(output: &'static str, config: &ferrocuda_types::LaunchConfig, len: usize, shape: P::Shape) -> Result<(), ferrocuda_types::LaunchProblem> {
        P::check_launch(output, config, len, shape)
    }

    #[inline(always)]
    unsafe fn from_raw_parts(pointer: *mut T, len: usize, shape: P::Shape) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = const { P::VALID };
        DisjointSlice { pointer, len, shape, _elements: PhantomData }
    }
}

// SAFETY: the output's `KernelOutput` facts, forwarded (one rule: the partition's): the
// partition's contract makes the threads' element sets disjoint under them.
unsafe impl<T: Pod, P: Partition> ferrocuda_types::OutputLaunch for DisjointSlice<'_, T, P> {
    type Shape = P::Shape;
    const REQUIREMENTS: LaunchRequirements = <Self as KernelOutput>::REQUIREMENTS;

    #[inline]
    fn check_launch(output: &'static str, config: &ferrocuda_types::LaunchConfig, len: usize, shape: P::Shape) -> Result<(), ferrocuda_types::LaunchProblem> {
        <Self as KernelOutput>::check_launch(output, config, len, shape)
    }
}

// SAFETY: the output carries `'a` (its `PhantomData<&'a mut [T]>`), and every safe method that
// hands out a reference or a view bounds it by the borrow of `self` or by `'a`
// (`LastBlock<'a, T>`, `FinishView<'a, U>`, `RowRead<'a, ..>`, `TileMut<'_, ..>`, ...).
unsafe impl<'a, T: Pod, P: Partition> super::OutputOf<'a> for DisjointSlice<'a, T, P> {}

impl<T: Pod, P: Partition> super::WholeBufferOutput for DisjointSlice<'_, T, P> where P::Shape: super::NoShape {}
impl<T: Pod, P: Partition> super::RowMajorOutput for DisjointSlice<'_, T, P> where P::Shape: super::LaunchShape {}

impl<T: Pod, P: Partition> DisjointSlice<'_, T, P> {
    /// Tells the CPU executor's race detector that this thread takes elements
    /// `index..index + count` (nothing on the GPU); returns where the output is for this
    /// thread (see `note_output`).
    #[inline(always)]
    pub(super) fn note(&self, index: usize, count: usize, write: bool) -> *mut T {
        super::note_output(self.pointer, self.len, index, count, write)
    }

    /// Number of units of the partition: elements (whole chunks for
    /// [`DisjointChunks`](super::DisjointChunks)).
    #[inline(always)]
    pub fn len(&self) -> usize {
        P::units(self.len)
    }

    /// True if [`len`](Self::len) is 0.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element at `index`, which this thread alone accesses, without a bounds check.
    ///
    /// # Safety
    /// `index` is below the buffer's length in elements, and **no other thread of the launch
    /// reads or writes element `index` at any time during the launch** (through any parameter
    /// or pointer; a barrier between the accesses does not make it valid: hand data between
    /// threads with an [`AtomicSlice`](super::AtomicSlice) or a
    /// [`Handoff`](super::partition::Handoff)).
    #[inline(always)]
    pub unsafe fn get_unchecked_mut(&mut self, index: usize) -> &mut T {
        let pointer = self.note(index, 1, true);
        // SAFETY: the caller keeps the index in bounds and the element to this thread.
        unsafe { &mut *pointer.add(index) }
    }

    /// Writes `value` to element `index` without a bounds check.
    ///
    /// # Safety
    /// As for [`get_unchecked_mut`](Self::get_unchecked_mut).
    #[inline(always)]
    pub unsafe fn write_unchecked(&mut self, index: usize, value: T) {
        let pointer = self.note(index, 1, true);
        // SAFETY: as the caller guarantees.
        unsafe { pointer.add(index).write(value) }
    }

    /// The whole output as a slice.
    ///
    /// # Safety
    /// For as long as the slice is used, **every element this thread reads or writes through
    /// it is accessed by no other thread of the launch at any time during the launch**
    /// (elements it does not touch may belong to other threads). This is the rule `&mut`
    /// carries for the compiler; breaking it lets the compiler reuse stale values across
    /// barriers (audit finding U2).
    #[inline(always)]
    pub unsafe fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: valid for `len` elements; exclusivity of the touched ones is the caller's.
        unsafe { core::slice::from_raw_parts_mut(self.raw_view(), self.len) }
    }

    /// The start of the output, for pointer arithmetic and intrinsics (using it is `unsafe`,
    /// under the contract of [`get_unchecked_mut`](Self::get_unchecked_mut)).
    #[inline(always)]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.raw_view()
    }

    /// Where a raw view points (see `raw_view`): the output, or on the CPU executor with race
    /// detection the running thread's mirror of it.
    #[inline(always)]
    fn raw_view(&self) -> *mut T {
        let (size, align) = (core::mem::size_of::<T>(), core::mem::align_of::<T>());
        let word = if P::ATOMIC_WORD == P::ATOMIC_ELEMENTS { size } else { P::ATOMIC_WORD };
        // Elements that cannot be accessed in such words (no atomic access of them compiles):
        // the claims, as for a plain partition.
        let word = if matches!(word, 2 | 4 | 8) && size.is_multiple_of(word) && align >= word { word } else { 0 };
        super::raw_view(self.pointer, self.len, word)
    }
}

impl<T: Pod, P: Partition<Shape = u32>> DisjointSlice<'_, T, P> {
    /// Columns per row (the launch's `cols`), for the row-major partitions.
    #[inline(always)]
    pub fn cols(&self) -> u32 {
        self.shape
    }
}

/// A [`Partition::KEY`]: the partition's name with its parameters mixed in.
pub(super) const fn partition_key(name: &str, parameters: &[u64]) -> u64 {
    let mut key = ferrocuda_types::fingerprint(name);
    let mut i = 0;
    while i < parameters.len() {
        key = crate::layout_key::mix(key, parameters[i]);
        i += 1;
    }
    key
}

mod sealed {
    /// Keeps [`Partition`](super::Partition) to this crate.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a partition: `Partition` is sealed to ferrocuda_device, where each map is proved disjoint",
        label = "not one of `ferrocuda_device::global::partition`'s",
        note = "for an index pattern no partition expresses, use `UncheckedSlice<T>` (`unsafe` accesses with a written contract) or ask for a partition"
    )]
    pub trait Sealed {}
    impl Sealed for super::super::partition::Threads {}
    impl Sealed for super::super::partition::Blocks {}
    impl Sealed for super::super::partition::Unchecked {}
    impl Sealed for super::super::partition::Atomics {}
    impl<const TRANSPOSED: bool> Sealed for super::super::partition::Cells<TRANSPOSED> {}
    impl<const WIDTH: u32> Sealed for super::super::partition::SegmentRows<WIDTH> {}
    impl<O: super::super::order::RowOrder> Sealed for super::super::partition::WarpRows<O> {}
    impl<O: super::super::order::RowOrder> Sealed for super::super::partition::BlockRows<O> {}
    impl Sealed for super::super::partition::BlockRowsX16 {}
    impl Sealed for super::super::partition::Cells3d {}
    impl Sealed for super::super::partition::RowTiles {}
    impl Sealed for super::super::partition::GridSlices {}
    impl Sealed for super::super::partition::Handoff {}
    impl Sealed for super::super::partition::ByLastBlock {}
    impl<O: super::super::order::RowOrder> Sealed for super::super::partition::InPlaceRows<O> {}
    impl<const N: usize> Sealed for super::super::partition::Chunks<N> {}
    impl<const HEAD: u32, const HALF: u32> Sealed for super::super::partition::RotaryPairs<HEAD, HALF> {}
    impl<const P: usize> Sealed for super::super::partition::Planes<P> {}
    impl Sealed for super::super::partition::PermutedRows {}
    impl<const TR: u32, const TC: u32, const BX: u32, const BY: u32, const T: bool> Sealed for super::super::partition::BlockTiles<TR, TC, BX, BY, T> {}
    impl<const TR: u32, const TC: u32, const MR: u32, const MC: u32, const RR: u32, const RC: u32> Sealed
        for super::super::partition::ThreadTiles<TR, TC, MR, MC, RR, RC>
    {
    }
}
