//! [`BlockRowsX16`]: a row per block like [`BlockRows`](super::partition::BlockRows), each row
//! written as 16-byte vectors plus the scalar elements before the first 16-byte boundary and
//! after the last whole vector (vLLM's `vectorize_with_alignment`: the int8 quantisers and
//! `act_and_mul` for any `hidden`); its row view [`RowX16`].

use core::marker::PhantomData;

use bytemuck::Pod;

use super::LaunchRequirements;
use super::block_rows::BlockRow;
use super::slice::{DisjointSlice, Partition};
use crate::half::{bf16, f16};
use crate::pack16::{Bf16x8, F16x8, F32x4, I8x16, U8x16};
use crate::thread::{block_dim_x, thread_idx_x};

/// The partition of `DisjointSlice<T, BlockRowsX16>`: a row-major matrix of `cols` elements
/// a row (`#[kernel(cols(name = ..))]`), a row per block as
/// [`BlockRows`](super::partition::BlockRows) (block `b` owns rows `b + k gridDim.x`, through
/// [`block_row`](super::block_row)/[`block_rows`](super::block_rows)), each row cut by
/// [`row_mut`](DisjointSlice::row_mut) into three runs that every thread computes the same way
/// from the row's address and `cols` alone:
///
/// - the **head**: the elements before the row's first 16-byte boundary (at most 15 bytes;
///   none when the row starts aligned), written one element at a time;
/// - the **body**: whole 16-byte vectors ([`X16Element::Vector`]: [`I8x16`], [`Bf16x8`], ..),
///   one `st.global.v4` each;
/// - the **tail**: the elements after the last whole vector (fewer than 16 bytes).
///
/// Thread `t` owns head and tail elements `t + blockDim.x j` of each run and body vectors `t +
/// blockDim.x j`, as a `BlockRows` thread owns its columns.
///
/// ```ignore
/// #[kernel(cols(out = hidden))]          // any hidden, not only multiples of 16
/// pub fn quant(mut out: DisjointSlice<i8, BlockRowsX16>, input: &[f32], scale: f32, hidden: u32) {
///     let me = block_row();
///     let h = hidden as usize;
///     let Some(mut row) = out.row_mut(me) else { return };
///     let Some(x) = input.get(me.row() as usize * h..me.row() as usize * h + h) else { return };
///     row.zip_vectors(x, |xs, o| {                       // 16 inputs, one 16-byte store
///         for (j, &v) in xs.iter().enumerate() { o.0[j] = (v / scale).to_i8_rn_sat(); }
///     });
///     row.zip_elements(x, |&v, o| *o = (v / scale).to_i8_rn_sat());   // head and tail
/// }
/// ```
///
/// Map: witness [`BlockRow`] `r` -> with `p` the address of element `r cols`, `h = min(((16 -
/// p mod 16) mod 16) / size_of::<T>(), cols)`, `n = (cols - h) / L` (`L` elements a vector):
/// head elements `r cols + c` for `c < h`, `c = t + blockDim.x j`; body vectors (elements `r
/// cols + h + L v .. + L`) for `v < n`, `v = t + blockDim.x j`; tail elements `r cols + h + L n
/// + k` for `k < cols - h - L n`, `k = t + blockDim.x j`. Disjoint: rows as `BlockRows`; in a
/// row, `p`, `cols` and so `h` and `n` are the same in every thread (the buffer's pointer and
/// the launch's width), the three runs are disjoint ranges of the row, and in each run a
/// block's threads own units congruent to their distinct `threadIdx.x < blockDim.x`. Why a
/// partition and not a method of a `BlockRows` row: which **bytes** a thread owns depends on
/// the view (vector `t` is bytes `16 t ..`, element `t` is byte `t`), so the split must be the
/// same in every thread, fixed by the output's type (docs/kernel-model.md). Launch: 1-D
/// (`LINEAR_THREADS`), any block size, any width.
pub struct BlockRowsX16;

// SAFETY: as the doc above: every access goes through a `BlockRow` of the running thread (row
// congruent to its block modulo the grid), the split depends only on the output's pointer and
// shape (the same in every thread), `row_mut` checks the row inside the buffer once and each
// run's loop keeps its units below the run's length.
unsafe impl Partition for BlockRowsX16 {
    const KEY: u64 = super::slice::partition_key("BlockRowsX16", &[]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS;
    type Shape = u32;
}

mod sealed {
    pub trait Sealed {}
}

/// An element type of a [`BlockRowsX16`] output and its 16-byte vector: `i8` ([`I8x16`]),
/// `u8` ([`U8x16`]), `bf16` ([`Bf16x8`]), `f16` ([`F16x8`]), `f32` ([`F32x4`]). Sealed: the
/// vector must be exactly `LANES` elements in 16 bytes, aligned to 16. Other element types (`u64`,
/// `[u8; 3]`, ..) have no `BlockRowsX16` rows:
///
/// ```compile_fail
/// fn lanes<T: ferrocuda_device::global::X16Element>() -> u32 { T::LANES }
/// let _ = lanes::<u64>(); // u64 is not an X16Element
/// ```
pub trait X16Element: Pod + sealed::Sealed {
    /// The 16-byte pack of [`LANES`](Self::LANES) elements (`#[repr(C, align(16))]`).
    type Vector: Pod;
    /// Elements per vector: `16 / size_of::<Self>()`.
    const LANES: u32;
}

macro_rules! x16_element {
    ($($t:ty => $v:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl X16Element for $t {
            type Vector = $v;
            const LANES: u32 = 16 / core::mem::size_of::<$t>() as u32;
        }
        const _: () = assert!(
            core::mem::size_of::<$v>() == 16 && core::mem::align_of::<$v>() == 16 && 16 % core::mem::size_of::<$t>() == 0
        );
    )*};
}

x16_element!(i8 => I8x16, u8 => U8x16, bf16 => Bf16x8, f16 => F16x8, f32 => F32x4);

impl<T: X16Element> DisjointSlice<'_, T, BlockRowsX16> {
    /// Row `me` cut into head, 16-byte body and tail (see [`BlockRowsX16`]), seen by this
    /// thread, if the whole row lies inside the buffer (one check per row); the split costs an
    /// `AND` and two compares per row.
    #[inline(always)]
    #[track_caller]
    pub fn row_mut(&mut self, me: BlockRow) -> Option<RowX16<'_, T>> {
        let row = me.owned();
        let cols = self.shape;
        // `row, cols < 2^32`: no overflow in u64.
        if (row as u64 + 1) * cols as u64 > self.len as u64 {
            return None;
        }
        let start = row as usize * cols as usize;
        // SAFETY: `start + cols <= len`: inside the buffer (or one past its end).
        let first = unsafe { self.pointer.add(start) };
        // The split depends on the address and `cols` only, the same in every thread. `T` is
        // aligned to its size (1, 2 or 4, a divisor of 16), so the head is whole elements.
        let head_bytes = (16 - (first as usize & 15)) & 15;
        let head = ((head_bytes / core::mem::size_of::<T>()) as u32).min(cols);
        let vectors = (cols - head) / T::LANES;
        Some(RowX16 {
            first,
            index: row,
            start,
            output: self.pointer,
            len: self.len,
            cols,
            head,
            vectors,
            lane: thread_idx_x(),
            stride: block_dim_x(),
            _output: PhantomData,
        })
    }
}

/// One thread's view of its block's row of a [`BlockRowsX16`] output: the head and tail
/// elements and the body vectors congruent to its `threadIdx.x` modulo `blockDim.x`.
pub struct RowX16<'a, T: X16Element> {
    first: *mut T,
    index: u32,
    start: usize,
    output: *mut T,
    len: usize,
    cols: u32,
    head: u32,
    vectors: u32,
    lane: u32,
    stride: u32,
    _output: PhantomData<&'a mut T>,
}

impl<T: X16Element> RowX16<'_, T> {
    /// The row (a number, to index inputs with).
    #[inline(always)]
    pub fn row(&self) -> u32 {
        self.index
    }

    /// Elements before the first 16-byte boundary (the head: columns `0..head()`).
    #[inline(always)]
    pub fn head(&self) -> u32 {
        self.head
    }

    /// Whole 16-byte vectors of the body (columns `head() .. head() + vectors() LANES`).
    #[inline(always)]
    pub fn vectors(&self) -> u32 {
        self.vectors
    }

    /// The first column of the tail (`head() + vectors() LANES`; the tail runs to `cols`).
    #[inline(always)]
    pub fn tail_start(&self) -> u32 {
        self.head + self.vectors * T::LANES
    }

    /// Whether this thread owns anything in the row: a head or tail element or a body vector
    /// (`threadIdx.x` below the head's length, the number of vectors or the tail's length).
    /// A kernel with no barrier after the row can `return` where this is `false`, as vLLM's
    /// `if (threadIdx.x < hidden / 16)` does: a block wider than the row's work (1024 threads
    /// for 512 vectors) then spends nothing on its idle warps. Why it matters: with one vector
    /// a thread, the setup around the loops (the input row's slice and cast, the head and
    /// tail loops' bounds) is a quarter of each thread's instructions, and the idle half of the
    /// block runs it too (issue 30, ports7's quantiser at any width: 0.865x nvcc).
    #[inline(always)]
    pub fn has_work(&self) -> bool {
        let tail = self.cols - self.tail_start();
        self.lane < self.vectors || self.lane < self.head || self.lane < tail
    }

    /// `f(c, &mut vector)` for this thread's body vectors, `c` the vector's first column
    /// (`head() + LANES v`, `v = threadIdx.x + blockDim.x j < vectors()`).
    #[inline(always)]
    pub fn vectors_mut(&mut self, mut f: impl FnMut(u32, &mut T::Vector)) {
        let mut v = self.lane;
        while v < self.vectors {
            let c = self.head + v * T::LANES;
            // Saturating: never wraps back to a smaller vector.
            v = v.saturating_add(self.stride);
            // SAFETY: `v < vectors`: `c + LANES <= cols`, inside the row (checked by
            // `row_mut`); `first + head` is 16-byte aligned by the split, so the vector is.
            f(c, unsafe { self.vector_at(c) });
        }
    }

    /// [`vectors_mut`](Self::vectors_mut) beside the same columns of an input row: `f(&input[c
    /// .. c + LANES], &mut vector)` for the thread's vectors whose columns all lie in `input`
    /// (one bound computed once).
    #[inline(always)]
    pub fn zip_vectors<U>(&mut self, input: &[U], mut f: impl FnMut(&[U], &mut T::Vector)) {
        let fit = input.len().saturating_sub(self.head as usize) / T::LANES as usize;
        let vectors = (self.vectors as usize).min(fit) as u32;
        let x = input.as_ptr();
        let mut v = self.lane;
        while v < vectors {
            let c = self.head + v * T::LANES;
            v = v.saturating_add(self.stride);
            // SAFETY: `v < vectors <= fit`: `c + LANES <= input.len()`; the output vector as
            // in `vectors_mut`.
            unsafe { f(core::slice::from_raw_parts(x.add(c as usize), T::LANES as usize), self.vector_at(c)) };
        }
    }

    /// The body beside an input already in vectors: `f(&packs[v], &mut vector v)` for the
    /// thread's vectors `v` below `packs.len()`, where `packs` is the input row's body (its
    /// columns `head() ..` as one `U` per output vector, e.g. `[Bf16x8; 2]` for 16 `bf16`:
    /// `bytemuck::try_cast_slice` of `&x[head..]`, which succeeds where those bytes are 16-byte
    /// aligned). One bound computed once, no test in the loop: vLLM's `vectorized_in[i]`.
    #[inline(always)]
    pub fn zip_packs<U>(&mut self, packs: &[U], mut f: impl FnMut(&U, &mut T::Vector)) {
        let vectors = (self.vectors as usize).min(packs.len()) as u32;
        let x = packs.as_ptr();
        let mut v = self.lane;
        while v < vectors {
            let c = self.head + v * T::LANES;
            // SAFETY: `v < vectors <= packs.len()`; the output vector as in `vectors_mut`.
            unsafe { f(&*x.add(v as usize), self.vector_at(c)) };
            v = v.saturating_add(self.stride);
        }
    }

    /// `f(c, &mut element)` for this thread's head and tail elements, `c` the column.
    #[inline(always)]
    pub fn elements_mut(&mut self, mut f: impl FnMut(u32, &mut T)) {
        self.scalars(self.cols, |c, o| f(c, o));
    }

    /// [`elements_mut`](Self::elements_mut) beside the same columns of an input row: `f(&input[c],
    /// &mut element)` for the thread's head and tail columns below `input.len()`.
    #[inline(always)]
    pub fn zip_elements<U>(&mut self, input: &[U], mut f: impl FnMut(&U, &mut T)) {
        let end = (self.cols as usize).min(input.len()) as u32;
        let x = input.as_ptr();
        // SAFETY: `scalars` gives columns below `end <= input.len()`.
        self.scalars(end, |c, o| f(unsafe { &*x.add(c as usize) }, o));
    }

    /// The head's and then the tail's columns of this thread below `end` (`end <= cols`).
    #[inline(always)]
    fn scalars(&mut self, end: u32, mut f: impl FnMut(u32, &mut T)) {
        let head_end = self.head.min(end);
        let mut c = self.lane;
        while c < head_end {
            let col = c;
            c = c.saturating_add(self.stride);
            // SAFETY: `col < head <= cols`: a head element of this thread.
            f(col, unsafe { self.element_at(col) });
        }
        let tail = self.tail_start();
        let mut c = tail.saturating_add(self.lane);
        while c < end {
            let col = c;
            c = c.saturating_add(self.stride);
            // SAFETY: `tail <= col < end <= cols`: a tail element of this thread (congruent to
            // its lane from the tail's start).
            f(col, unsafe { self.element_at(col) });
        }
    }

    /// # Safety
    /// `c` is a head or tail column below `cols` owned by this thread, yielded once.
    #[inline(always)]
    unsafe fn element_at<'b>(&self, c: u32) -> &'b mut T {
        super::note_output(self.output, self.len, self.start + c as usize, 1, true);
        // SAFETY: the caller's; the row is inside the buffer (`row_mut`).
        unsafe { &mut *self.first.add(c as usize) }
    }

    /// # Safety
    /// `c = head + LANES v` for a body vector `v < vectors` owned by this thread, yielded once.
    #[inline(always)]
    unsafe fn vector_at<'b>(&self, c: u32) -> &'b mut T::Vector {
        super::note_output(self.output, self.len, self.start + c as usize, T::LANES as usize, true);
        // SAFETY: the caller's: `LANES` elements inside the row, 16-byte aligned (the split).
        unsafe { &mut *self.first.add(c as usize).cast::<T::Vector>() }
    }
}
