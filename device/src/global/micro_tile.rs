//! [`PerThreadTile`]: a row-major matrix output cut into tiles, one per block, each cut into
//! contiguous register micro-tiles, one per thread (a GEMM epilogue); and its view
//! [`MicroTileMut`].

use core::marker::PhantomData;

use bytemuck::Pod;

use super::LaunchRequirements;
use super::slice::{DisjointSlice, Partition};
use super::tile::BlockTile;

/// A row-major matrix output of `cols` columns cut into tiles of `TILE_ROWS x TILE_COLS`, one
/// per block, each tile owned by its block's threads in contiguous micro-tiles of `MR x MC`:
/// what a GEMM thread holds in registers.
///
/// The map (one per type, fixed by its parameters):
///
/// - block `(bx, by)` owns tile `(by, bx)`: rows `TILE_ROWS by ..`, columns `TILE_COLS bx ..`;
/// - the tile is split into `RR x RC` equal quadrants (`1 x 1` by default) of
///   `QR x QC = (TILE_ROWS / RR) x (TILE_COLS / RC)`;
/// - thread `t` (1-D blocks of exactly `THREADS = (QR / MR) (QC / MC)` threads) is
///   `(ty, tx) = (t / (QC / MC), t % (QC / MC))` and owns, in every quadrant `(qi, qj)`, the
///   `MR x MC` elements at tile rows `qi QR + MR ty ..+MR`, columns `qj QC + MC tx ..+MC`.
///
/// `matmul_128x128`'s 8 x 8 micro-tiles are `PerThreadTile<f32, 128, 128, 8, 8>`;
/// `sgemm_pipelined`'s four 4 x 4 blocks 64 apart are `PerThreadTile<f32, 128, 128, 4, 4, 2, 2>`.
///
/// ```ignore
/// #[kernel(cols(c = n))]
/// pub fn gemm(a: &[f32], b: &[f32], mut c: PerThreadTile<f32, 128, 128, 8, 8>, m: u32, n: u32, k: u32) {
///     let Some(mut tile) = c.tile_aligned_mut(block_tile()) else { return };
///     let acc = [[0.0f32; 8]; 8]; // .. the thread's 8 x 8 block of C
///     for (i, row) in acc.iter().enumerate() {
///         tile.store_row(i as u32, 0, *row); // two st.global.v4.f32
///     }
/// }
/// ```
///
/// The width comes from `#[kernel(cols(name = ..))]` (a by-value `u32` parameter or a
/// constant, the same in every thread). Every launcher refuses a launch whose block is not
/// exactly `(THREADS, 1, 1)` or whose grid has `z > 1` (`BlockShapeRequired`). A shape whose
/// sides do not divide (`TILE_ROWS % (RR MR) != 0`, ..) does not compile.
///
/// [`tile_mut`](Self::tile_mut) and [`tile_aligned_mut`](Self::tile_aligned_mut) give whole
/// tiles only, checked once per tile; a row of the micro-tile is then reached with constant
/// checks only (which fold away when its index is a constant, as in an unrolled epilogue).
pub type PerThreadTile<'a, T, const TILE_ROWS: u32, const TILE_COLS: u32, const MR: u32, const MC: u32, const RR: u32 = 1, const RC: u32 = 1> =
    DisjointSlice<'a, T, ThreadTiles<TILE_ROWS, TILE_COLS, MR, MC, RR, RC>>;

/// The partition of [`PerThreadTile`] (its map is given there): witness [`BlockTile`] ->
/// the thread's `MR x MC` micro-tile of each quadrant of its block's tile. Launch: blocks of
/// exactly `(THREADS, 1, 1)` in a grid with `z = 1`.
pub struct ThreadTiles<const TR: u32, const TC: u32, const MR: u32, const MC: u32, const RR: u32, const RC: u32>;

impl<const TR: u32, const TC: u32, const MR: u32, const MC: u32, const RR: u32, const RC: u32> ThreadTiles<TR, TC, MR, MC, RR, RC> {
    /// Threads per block: `(TILE_ROWS / (RR MR)) (TILE_COLS / (RC MC))`. Evaluating it (every
    /// kernel with this output does) fails the build for a shape whose sides do not divide.
    pub const THREADS: u32 = {
        assert!(TR > 0 && TC > 0 && MR > 0 && MC > 0 && RR > 0 && RC > 0, "PerThreadTile needs non-zero tile, micro-tile and quadrant counts");
        assert!(TR.is_multiple_of(RR) && TC.is_multiple_of(RC), "PerThreadTile: the tile's sides must be multiples of the quadrant counts RR and RC");
        assert!(
            (TR / RR).is_multiple_of(MR) && (TC / RC).is_multiple_of(MC),
            "PerThreadTile: a quadrant's sides must be multiples of the micro-tile's MR and MC"
        );
        match ((TR / RR) / MR).checked_mul((TC / RC) / MC) {
            Some(threads) => threads,
            None => panic!("PerThreadTile: more than u32::MAX threads per block"),
        }
    };
    /// Micro-tiles per quadrant row: thread `t` is at `(t / GRID_COLS, t % GRID_COLS)`.
    const GRID_COLS: u32 = (TC / RC) / MC;
    /// Rows of one quadrant.
    const QUADRANT_ROWS: u32 = TR / RR;
    /// Columns of one quadrant.
    const QUADRANT_COLS: u32 = TC / RC;
}

// SAFETY: block -> tile is one-to-one (tile (by, bx), a grid with z = 1, origins checked
// against `u32` overflow); within a tile, (t, qi, qj, r, c) -> (qi QR + MR (t / G) + r,
// qj QC + MC (t % G) + c) with t < THREADS (the launch requirement: blocks of exactly
// (THREADS, 1, 1)), qi < RR, qj < RC, r < MR, c < MC is a mixed-radix numbering of the tile's
// TR x TC elements, so distinct threads own disjoint elements; (row, col) -> row * cols + col
// is one-to-one on col < cols with cols the same in every thread (the shape's contract).
// Accesses go through a `BlockTile`, which only its own thread holds.
unsafe impl<const TR: u32, const TC: u32, const MR: u32, const MC: u32, const RR: u32, const RC: u32> Partition for ThreadTiles<TR, TC, MR, MC, RR, RC> {
    const KEY: u64 = super::slice::partition_key("ThreadTiles", &[TR as u64, TC as u64, MR as u64, MC as u64, RR as u64, RC as u64]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::tile_block(Self::THREADS, 1);
    type Shape = u32;
    const VALID: () = {
        let _ = Self::THREADS;
    };
}

impl<T: Pod, const TR: u32, const TC: u32, const MR: u32, const MC: u32, const RR: u32, const RC: u32>
    DisjointSlice<'_, T, ThreadTiles<TR, TC, MR, MC, RR, RC>>
{
    /// Threads per block: `(TILE_ROWS / (RR MR)) (TILE_COLS / (RC MC))`. Evaluating it (every
    /// kernel with this output does) fails the build for a shape whose sides do not divide.
    pub const THREADS: u32 = ThreadTiles::<TR, TC, MR, MC, RR, RC>::THREADS;
    const GRID_COLS: u32 = ThreadTiles::<TR, TC, MR, MC, RR, RC>::GRID_COLS;

    /// The first row and column of this block's tile and of this thread's first micro-tile
    /// (`u32`, no wrap-around), if the tile lies wholly inside the matrix.
    #[inline(always)]
    #[track_caller]
    fn whole_tile(&self, me: BlockTile) -> Option<(u32, u32, u32, u32)> {
        let (block_x, block_y, thread_x, thread_y) = me.owned_parts();
        // SAFETY: this output exists only in a launch that met `REQUIREMENTS`
        // (`KernelOutput::from_raw_parts`'s contract): blocks of exactly (THREADS, 1, 1)
        // threads, and `me` is the running thread's (it cannot be made or moved elsewhere).
        unsafe { core::hint::assert_unchecked(thread_x < Self::THREADS && thread_y == 0) };
        // A product past u32 would wrap onto another block's tile: no tile then.
        let first_row = block_y.checked_mul(TR)?;
        let first_col = block_x.checked_mul(TC)?;
        if !super::tile::whole_tile_inside(first_row, first_col, TR, TC, self.shape, self.len) {
            return None;
        }
        let (ty, tx) = (thread_x / Self::GRID_COLS, thread_x % Self::GRID_COLS);
        Some((first_row, first_col, ty * MR, tx * MC))
    }

    /// This thread's micro-tile of its block's tile, if the tile lies wholly inside the matrix
    /// (its last column below `cols`, its last row inside the buffer); `None` otherwise, the
    /// same answer in every thread of the block (so a kernel may return on it before a barrier).
    #[inline(always)]
    #[track_caller]
    pub fn tile_mut(&mut self, me: BlockTile) -> Option<MicroTileMut<'_, T, TR, TC, MR, MC, RR, RC, false>> {
        let (first_row, first_col, row, col) = self.whole_tile(me)?;
        Some(MicroTileMut::new(self, first_row, first_col, row, col))
    }

    /// As [`tile_mut`](Self::tile_mut), for rows written in 16-byte stores
    /// ([`MicroTileMut::store_row`] becomes `st.global.v4` of 4-byte elements): also `None`
    /// unless the buffer starts at a multiple of 16 bytes and a matrix row is a multiple of 16
    /// bytes long (then every micro-tile row starts 16-byte aligned). A micro-tile row must be
    /// a multiple of 16 bytes, of 4-, 8- or 16-byte elements (checked at compile time).
    #[inline(always)]
    #[track_caller]
    pub fn tile_aligned_mut(&mut self, me: BlockTile) -> Option<MicroTileMut<'_, T, TR, TC, MR, MC, RR, RC, true>> {
        const {
            let size = core::mem::size_of::<T>();
            assert!(size == 4 || size == 8 || size == 16, "tile_aligned_mut: 16-byte stores need elements of 4, 8 or 16 bytes");
            assert!((MC as usize * size).is_multiple_of(16), "tile_aligned_mut: a micro-tile row must be a multiple of 16 bytes");
        };
        // Multiples of 16 bytes in the tile (quadrant and tile widths): MC is, and
        // QUADRANT_COLS and TC are multiples of MC.
        if !(self.pointer as usize).is_multiple_of(16) || !(self.shape as usize * core::mem::size_of::<T>()).is_multiple_of(16) {
            return None;
        }
        let (first_row, first_col, row, col) = self.whole_tile(me)?;
        Some(MicroTileMut::new(self, first_row, first_col, row, col))
    }
}

/// One thread's micro-tile of its block's tile of a [`PerThreadTile`]: `RR MR` rows of `RC`
/// runs of `MC` contiguous elements. Row `i`, run `j` ([`row_mut(i, j)`](Self::row_mut)) is
/// tile row `(i / MR) QR + MR ty + i % MR`, tile columns `j QC + MC tx ..+MC`. When `ALIGNED`
/// (from [`PerThreadTile::tile_aligned_mut`]) every run starts 16-byte aligned.
pub struct MicroTileMut<'a, T: Pod, const TR: u32, const TC: u32, const MR: u32, const MC: u32, const RR: u32, const RC: u32, const ALIGNED: bool> {
    /// This thread's element (0, 0).
    base: *mut T,
    /// The output's start and length, for the CPU race detector.
    output: *mut T,
    len: usize,
    cols: u32,
    first_row: u32,
    first_col: u32,
    row: u32,
    col: u32,
    _output: PhantomData<&'a mut T>,
}

impl<'a, T: Pod, const TR: u32, const TC: u32, const MR: u32, const MC: u32, const RR: u32, const RC: u32, const ALIGNED: bool>
    MicroTileMut<'a, T, TR, TC, MR, MC, RR, RC, ALIGNED>
{
    #[inline(always)]
    fn new(output: &'a mut DisjointSlice<'_, T, ThreadTiles<TR, TC, MR, MC, RR, RC>>, first_row: u32, first_col: u32, row: u32, col: u32) -> Self {
        // Inside the buffer (the whole tile is), so `add` is in bounds; no overflow: the
        // offset is below `len`.
        let offset = (first_row + row) as usize * output.shape as usize + (first_col + col) as usize;
        // SAFETY: element (first_row + row, first_col + col) lies in the tile, which lies
        // inside the buffer (checked by `whole_tile`).
        let base = unsafe { output.pointer.add(offset) };
        MicroTileMut { base, output: output.pointer, len: output.len, cols: output.shape, first_row, first_col, row, col, _output: PhantomData }
    }

    /// The matrix row and column of the block's tile's element (0, 0).
    #[inline(always)]
    pub fn origin(&self) -> (u32, u32) {
        (self.first_row, self.first_col)
    }

    /// The matrix row of this thread's row `i` (a number, to index inputs with; wrapping).
    #[inline(always)]
    pub fn row(&self, i: u32) -> u32 {
        let quadrant_rows = ThreadTiles::<TR, TC, MR, MC, RR, RC>::QUADRANT_ROWS;
        self.first_row.wrapping_add(self.row).wrapping_add((i / MR).wrapping_mul(quadrant_rows)).wrapping_add(i % MR)
    }

    /// The matrix column of the first element of this thread's run `j` (a number; wrapping).
    #[inline(always)]
    pub fn col(&self, j: u32) -> u32 {
        let quadrant_cols = ThreadTiles::<TR, TC, MR, MC, RR, RC>::QUADRANT_COLS;
        self.first_col.wrapping_add(self.col).wrapping_add(j.wrapping_mul(quadrant_cols))
    }

    /// Where run `j` of row `i` starts, after noting its `MC` elements for the CPU race
    /// detector; `None` for `i >= RR MR` or `j >= RC` (constant checks).
    #[inline(always)]
    fn run(&mut self, i: u32, j: u32) -> Option<*mut T> {
        if i >= RR * MR || j >= RC {
            return None;
        }
        let (quadrant_rows, quadrant_cols) = (ThreadTiles::<TR, TC, MR, MC, RR, RC>::QUADRANT_ROWS, ThreadTiles::<TR, TC, MR, MC, RR, RC>::QUADRANT_COLS);
        // No overflow: the row is below TR and the column below TC (both u32), so the offset
        // is inside the tile, which is inside the buffer.
        let offset = ((i / MR) * quadrant_rows + i % MR) as usize * self.cols as usize + (j * quadrant_cols) as usize;
        // SAFETY: tile row `row + (i / MR) QR + i % MR < TR` (`row = MR ty`, `ty < QR / MR`)
        // and columns `col + j QC ..+MC <= TC` (`col = MC tx`, `tx < QC / MC`): inside the
        // tile, which lies inside the buffer (checked when the view was made).
        let run = unsafe { self.base.add(offset) };
        // SAFETY: an element of a live allocation (above) is never at address 0; said so that
        // `Some(&mut ..)` needs no null test.
        unsafe { core::hint::assert_unchecked(!run.is_null()) };
        super::note_output(self.output, self.len, (run as usize - self.output as usize) / core::mem::size_of::<T>().max(1), MC as usize, true);
        Some(run)
    }

    /// Run `j` of this thread's row `i`: `MC` contiguous elements; `None` for `i >= RR MR`
    /// or `j >= RC`. Written element by element (see [`store_row`](Self::store_row) for
    /// vector stores).
    #[inline(always)]
    pub fn row_mut(&mut self, i: u32, j: u32) -> Option<&mut [T]> {
        let run = self.run(i, j)?;
        // SAFETY: `MC` elements inside the buffer that belong to this thread alone (see the
        // impl of `KernelOutput`); the borrow of `self` keeps this thread from a second
        // reference to them.
        Some(unsafe { core::slice::from_raw_parts_mut(run, MC as usize) })
    }

    /// Writes `values` to run `j` of this thread's row `i` (nothing for `i >= RR MR` or
    /// `j >= RC`, which are constant checks). In an `ALIGNED` view, in 16-byte stores.
    /// `values` holds `MC` elements (`N != MC` does not compile).
    #[inline(always)]
    pub fn store_row<const N: usize>(&mut self, i: u32, j: u32, values: [T; N]) {
        const { assert!(N == MC as usize, "store_row: give exactly MC values") };
        let Some(run) = self.run(i, j) else { return };
        if ALIGNED {
            // SAFETY: the run is this thread's, inside the buffer (`run`), and 16-byte aligned
            // (`tile_aligned_mut`: base and row width multiples of 16 bytes, and so are the
            // tile, quadrant and micro-tile widths); `N` elements are a multiple of 16 bytes.
            unsafe { store_16_byte_chunks(run, &values) };
        } else {
            // SAFETY: as in `row_mut`.
            unsafe { run.cast::<[T; N]>().write(values) };
        }
    }
}

/// 16 bytes, 16-byte aligned: one `st.global.v4` (or `.v2.b64`) store.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Aligned16<A>(A);

/// Stores `values` at `to` in 16-byte stores.
///
/// # Safety
/// `to` is 16-byte aligned, valid for writes of `N` elements and reached by no other thread;
/// `N * size_of::<T>()` is a multiple of 16 and `size_of::<T>()` is 4, 8 or 16.
#[inline(always)]
unsafe fn store_16_byte_chunks<T: Pod, const N: usize>(to: *mut T, values: &[T; N]) {
    let per_chunk = 16 / core::mem::size_of::<T>();
    let mut c = 0;
    while c < N / per_chunk {
        let at = c * per_chunk;
        // SAFETY (each arm): `at + per_chunk <= N` elements of `to`, 16-byte aligned
        // (`to` is, and `at` elements are a multiple of 16 bytes).
        unsafe {
            match per_chunk {
                4 => to.add(at).cast::<Aligned16<[T; 4]>>().write(Aligned16([values[at], values[at + 1], values[at + 2], values[at + 3]])),
                2 => to.add(at).cast::<Aligned16<[T; 2]>>().write(Aligned16([values[at], values[at + 1]])),
                _ => to.add(at).cast::<Aligned16<[T; 1]>>().write(Aligned16([values[at]])),
            }
        }
        c += 1;
    }
}
