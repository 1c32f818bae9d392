//! [`SegmentRows<WIDTH>`]: a row-major output with one row per `WIDTH`-lane segment of a warp,
//! the segment's lanes striding over the row; and its witness [`SegmentRow`].

use core::marker::PhantomData;

use bytemuck::Pod;

use super::LaunchRequirements;
use super::index::NotSend;
use super::slice::{DisjointSlice, Partition};
// Through the parent (its re-export), so that this module and `warp_rows`, which builds its
// witness on `SegmentRow`, do not import each other.
use super::LaneRow;

/// Checks at compile time that `WIDTH` is a segment width: a power of two from 1 to 32 (so that
/// it divides 32 and a segment lies inside one warp), as CUDA's shuffle width argument.
const fn segment_width(width: u32) -> u32 {
    assert!(
        width.is_power_of_two() && width <= 32,
        "a `SegmentRows<WIDTH>` segment is a power-of-two number of lanes from 1 to 32 (it must divide the warp), as CUDA's shuffle width"
    );
    width
}

/// This thread's segment and lane for a `DisjointSlice<T, SegmentRows<WIDTH>>` output: segment
/// `s = t / WIDTH` and lane `t % WIDTH` of the 1-D thread index `t = blockIdx.x * blockDim.x +
/// threadIdx.x`. Made only by [`segment_row`] and [`segment_rows`]; `Copy` but not `Send`,
/// `Sync` or `Pod` (see [`ThreadIndex`](super::ThreadIndex)), checked against the running
/// thread on the CPU executor.
///
/// In a launch that the output's launchers accepted (1-D, at most `u32::MAX` threads, `blockDim.x`
/// a multiple of `WIDTH`) the segment is `WIDTH` consecutive lanes of one warp (lanes `WIDTH k ..
/// WIDTH (k + 1)`), the lanes that `warp::reduce_within::<WIDTH, _>` and the `_within` shuffles
/// combine, and `(s, lane)` names one thread. The width is part of the type: a `SegmentRow<16>`
/// fits only `SegmentRows<16>` outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SegmentRow<const WIDTH: u32> {
    row: u32,
    lane: u32,
    #[cfg(not(target_arch = "nvptx64"))]
    owner: u32,
    _this_thread: NotSend,
}

/// This thread's [`SegmentRow`]: `(t / WIDTH, t % WIDTH)` for the 1-D thread index `t` (a shift
/// and a mask after CUDA's 1-D index): vLLM's `global_group_id = blockIdx.x * groups_per_block +
/// threadIdx.x / 16`, `lane_id = threadIdx.x % 16` for blocks of `16 groups_per_block` threads.
/// `WIDTH` is a power of two from 1 to 32 (checked at compile time).
#[inline(always)]
pub fn segment_row<const WIDTH: u32>() -> SegmentRow<WIDTH> {
    let width = const { segment_width(WIDTH) };
    let t = super::index::linear_thread();
    SegmentRow {
        row: t / width,
        lane: t % width,
        #[cfg(not(target_arch = "nvptx64"))]
        owner: t,
        _this_thread: PhantomData,
    }
}

impl<const WIDTH: u32> SegmentRow<WIDTH> {
    /// The row (the segment's global index, or a later row of [`segment_rows`]), to index
    /// inputs with.
    #[inline(always)]
    pub fn row(self) -> u32 {
        self.row
    }

    /// The lane in the segment, `0..WIDTH`.
    #[inline(always)]
    pub fn lane(self) -> u32 {
        self.lane
    }

    /// The running thread's witness for row `row` and lane `lane`: the one constructor besides
    /// [`segment_row`], for [`WarpRow`](super::WarpRow)'s reversed order (whose row is the
    /// warp's reversed slot).
    ///
    /// The caller keeps the partition's map: `lane` is this thread's lane (`< WIDTH`) and
    /// `row` one of the rows its map gives this thread's segment (or warp slot). Not `unsafe`
    /// only because it is private to `global` and every caller is checked by hand.
    #[inline(always)]
    pub(super) fn at(row: u32, lane: u32) -> Self {
        SegmentRow {
            row,
            lane,
            #[cfg(not(target_arch = "nvptx64"))]
            owner: super::index::linear_thread(),
            _this_thread: PhantomData,
        }
    }

    /// `self`, after checking on the CPU executor that the running thread made it (a
    /// witness smuggled to another thread panics there, naming `what`: `SegmentRow` or
    /// `WarpRow`).
    #[inline(always)]
    #[track_caller]
    pub(super) fn owned_as(self, what: &'static str) -> Self {
        #[cfg(not(target_arch = "nvptx64"))]
        if self.owner != super::index::linear_thread() {
            super::index::used_by_another_thread(what, self.row as usize);
        }
        #[cfg(target_arch = "nvptx64")]
        let _ = what;
        self
    }

    #[inline(always)]
    #[track_caller]
    fn owned(self) -> Self {
        self.owned_as("SegmentRow")
    }
}

/// The rows of this thread's segment below `rows`, grid-strided over segments: `s, s +
/// segments, s + 2 segments, ...` with `s = t / WIDTH` and `segments = gridDim.x * blockDim.x /
/// WIDTH`, each as a [`SegmentRow`]. A step past `u32` ends the walk (no wrap onto another
/// segment's row).
#[inline(always)]
pub fn segment_rows<const WIDTH: u32>(rows: u32) -> SegmentRowIter<WIDTH> {
    SegmentRowIter::starting_at(segment_row::<WIDTH>(), rows)
}

/// The iterator of [`segment_rows`].
#[derive(Debug)]
pub struct SegmentRowIter<const WIDTH: u32> {
    next: SegmentRow<WIDTH>,
    rows: u32,
    segments: u32,
}

impl<const WIDTH: u32> SegmentRowIter<WIDTH> {
    /// The rows `first.row(), first.row() + segments, ...` below `rows` (`segments =
    /// gridDim.x * blockDim.x / WIDTH`), for `first` a witness of the running thread whose
    /// later rows are those (its segment's, or its warp slot's for [`WarpRowIter`](super::WarpRowIter)).
    #[inline(always)]
    pub(super) fn starting_at(first: SegmentRow<WIDTH>, rows: u32) -> Self {
        let width = const { segment_width(WIDTH) };
        // The output's launch check makes `gridDim.x * blockDim.x` a multiple of `WIDTH` within
        // `u32`, so `segments >= 1`; elsewhere a plain number (`max(1)` keeps the walk finite).
        let segments = (crate::thread::grid_dim_x().wrapping_mul(crate::thread::block_dim_x()) / width).max(1);
        SegmentRowIter { next: first, rows, segments }
    }
}

impl<const WIDTH: u32> Iterator for SegmentRowIter<WIDTH> {
    type Item = SegmentRow<WIDTH>;

    #[inline(always)]
    fn next(&mut self) -> Option<SegmentRow<WIDTH>> {
        if self.next.row < self.rows {
            let item = self.next;
            // Saturating: `u32::MAX` is never below a `u32` bound, so a step never wraps.
            self.next.row = item.row.saturating_add(self.segments);
            Some(item)
        } else {
            None
        }
    }
}

/// The partition of a row-major output of `cols` columns with one row per `WIDTH`-lane segment
/// (issue 30, the sixth port's gap 4): segment `s` of a 1-D launch owns row `s` (and `s +
/// segments`, ... through [`segment_rows`]), and its lane `l` the columns `l, l + WIDTH, l + 2
/// WIDTH, ...` of it. vLLM's `per_token_group_quant_8bit_kernel` gives each quantisation group to
/// 16 lanes this way (`SegmentRows<16>`, a row per group, any group size); llm.c-style kernels
/// that give a row to 4 or 8 lanes use `SegmentRows<4>`/`<8>`. `SegmentRows<32>` is
/// [`PerWarpRow`](super::PerWarpRow)'s map for blocks of whole warps.
///
/// The elements may be bytes (`u8`, FP8), 8-byte packs (`#[repr(C, align(8))]` `Pod` structs of
/// eight FP8 values: one `st.global.v2.u32`/`STG.E.64` a lane) or 16-byte vectors. With `cols =
/// 1` it is "one value per segment, written by its lane 0" (the group's scale):
/// [`first_mut`](DisjointSlice::first_mut) gives it.
///
/// ```ignore
/// #[kernel(cols(q = vecs, scales = 1))]
/// pub fn quant(x: &[Bf16x8], mut q: DisjointSlice<Fp8x8, SegmentRows<16>>,
///              mut scales: DisjointSlice<f32, SegmentRows<16>>, vecs: u32) {
///     let me = segment_row::<16>();
///     let Some(row) = q.row_mut(me) else { return };    // the whole row is in the buffer
///     let Some(x) = x.get(row.span()) else { return };  // the group's input
///     let absmax = /* over row.zip_input(x) */ 1.0;
///     let absmax = warp::reduce_within::<16, f32>(absmax, f32::max);
///     if let Some(s) = scales.first_mut(me) { *s = absmax; }   // lane 0 only
/// }
/// ```
///
/// The width comes from `#[kernel(cols(name = ..))]` (a by-value `u32` parameter or a constant,
/// the same in every thread). Every launcher refuses a launch that is not 1-D or has more than
/// `u32::MAX` threads (`NotOneDimensional`, `TooManyThreadsForIndex`), or whose `blockDim.x` is
/// not a multiple of `WIDTH` (`OutputShapeOutOfRange`: a segment must not straddle two blocks,
/// whose lanes no shuffle joins).
///
/// Map: witness [`SegmentRow`] `(r, l)` -> elements `r cols + l + WIDTH j` for `l + WIDTH j <
/// cols`. Disjoint: `(row, col) -> row cols + col` is one-to-one on `col < cols`; distinct
/// lanes reach distinct columns (congruent to the lane modulo `WIDTH`); the rows of segment `s`
/// are congruent to `s` modulo `segments` (the launch's `threads / WIDTH`, `s < segments`), so
/// belong to it alone; and under `LINEAR_THREADS` `t = WIDTH s + l` names one thread.
pub struct SegmentRows<const WIDTH: u32>;

// SAFETY: as the doc above: every access goes through a `SegmentRow<WIDTH>`, whose row is
// congruent to its thread's segment modulo the launch's segments and whose lane is its
// thread's (`< WIDTH`); rows are checked inside the buffer once (`row_mut`, `first_mut`) and
// columns below `cols` at each access (`LaneRow`).
unsafe impl<const WIDTH: u32> Partition for SegmentRows<WIDTH> {
    // The width is part of the key (G17R-1's rule for widths: a `cfg` that gives the device
    // `SegmentRows<8>` and the host `SegmentRows<16>` must not pass the first launch).
    const KEY: u64 = super::slice::partition_key("SegmentRows", &[WIDTH as u64]);
    // The width's check is part of the requirements so that `#[kernel]`'s constant of them (a
    // concrete type, evaluated even by `cargo check`) refuses `SegmentRows<12>` or `<0>` in the
    // signature, not only a build that instantiates the kernel.
    const REQUIREMENTS: LaunchRequirements = {
        segment_width(WIDTH);
        LaunchRequirements::LINEAR_THREADS
    };
    type Shape = u32;
    const VALID: () = {
        segment_width(WIDTH);
    };

    fn check_launch(output: &'static str, config: &ferrocuda_types::LaunchConfig, _len: usize, _cols: u32) -> Result<(), ferrocuda_types::LaunchProblem> {
        let remainder = config.block.x % segment_width(WIDTH);
        if remainder != 0 {
            return Err(ferrocuda_types::LaunchProblem::OutputShapeOutOfRange {
                output,
                rule: "a `SegmentRows<WIDTH>` output needs blockDim.x to be a multiple of WIDTH, so that each segment is WIDTH lanes of \
                       one warp (the value is blockDim.x modulo WIDTH); launch blocks of WIDTH * k threads",
                value: u64::from(remainder),
                limit: 0,
            });
        }
        Ok(())
    }
}

impl<T: Pod, const WIDTH: u32> DisjointSlice<'_, T, SegmentRows<WIDTH>> {
    /// This segment's row, seen by this lane (columns `lane, lane + WIDTH, ...`), if the whole
    /// row lies inside the buffer (one check, made once). Walk it with
    /// [`LaneRow::zip_input`], [`LaneRow::iter_mut`] or [`LaneRow::get_mut`].
    #[inline(always)]
    #[track_caller]
    pub fn row_mut(&mut self, me: SegmentRow<WIDTH>) -> Option<LaneRow<'_, T>> {
        let me = me.owned();
        // SAFETY: `(row, lane)` comes from a `SegmentRow` of the running thread: the row is one
        // of its segment's, the lane its own (`< WIDTH`), and lanes stride by `WIDTH` (see
        // `SegmentRows`).
        unsafe { LaneRow::new(self, me.row, me.lane, WIDTH) }
    }

    /// Column 0 of this segment's row for its lane 0 (`None` in the other lanes, or past the
    /// buffer's end): with `cols = 1`, the segment's one value (vLLM's `if (lane_id == 0)
    /// *scale_output = y_s`). One compare of the row with the buffer and one of the lane.
    #[inline(always)]
    #[track_caller]
    pub fn first_mut(&mut self, me: SegmentRow<WIDTH>) -> Option<&mut T> {
        let me = me.owned();
        // `row, cols < 2^32`: no overflow in u64.
        let index = me.row as u64 * self.shape as u64;
        if me.lane == 0 && self.shape != 0 && index < self.len as u64 {
            let index = index as usize;
            let pointer = self.note(index, 1, true);
            // SAFETY: in bounds; column 0 of the row is lane 0's (`0 ≡ 0 mod WIDTH`), the row
            // this segment's (see `SegmentRows`), and the borrow of `self` keeps a second
            // reference out.
            Some(unsafe { &mut *pointer.add(index) })
        } else {
            None
        }
    }
}
