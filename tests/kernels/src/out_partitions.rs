//! The partitions added to `DisjointSlice<T, P>` for the patterns of ported kernels (issue
//! 30): a row per block (`BlockRows`, grid-strided, in place), rows per warp grid-strided over
//! warps (`warp_rows`), 3-D cells (`Cells3d`) and the last-block handoff (`Handoff`). The
//! kernels write `mark(..)` into each element they own, so the host checks every element was
//! written once by the right map (tests/out_partitions.rs); some are deliberately wrong, for
//! the CPU executor's checks.

use ferrocuda_device::block::RuntimeBlockReduce;
use ferrocuda_device::global::partition::{BlockRows, ByLastBlock, Cells3d, GridSlices, Handoff, InPlaceRows, RotaryPairs, RowTiles, SegmentRows};
use ferrocuda_device::global::{
    AtomicSlice, DisjointSlice, PerWarpRow, Reversed, block_row, block_row_reversed, block_rows, block_rows_reversed, row_tile, unique_cell_3d,
    unique_slice_cell, warp_rows, warp_rows_reversed,
};
use ferrocuda_device::kernel;
use ferrocuda_device::thread::{block_dim_x, block_idx_x, thread_idx_x};

pub use crate::matrix_outputs::mark;

/// The value stored at (z, y, x) of a 3-D output.
#[inline(always)]
pub fn mark3(z: u32, y: u32, x: u32) -> u32 {
    z.wrapping_mul(1_000_000).wrapping_add(mark(y, x))
}

/// Each block adds `mark(row, col)` to its rows (grid-strided), each thread to its columns.
#[kernel(cols(out = cols))]
pub fn block_rows_mark(mut out: DisjointSlice<u32, BlockRows>, rows: u32, cols: u32) {
    for me in block_rows(rows) {
        let Some(row) = out.row_mut(me) else { break };
        let (r, first, stride) = (row.row(), row.lane(), row.stride());
        for (j, v) in row.iter_mut().enumerate() {
            *v += mark(r, first + stride * j as u32);
        }
    }
}

/// Block `(x, y)` adds `mark(x, col)` to the columns of tile `y` of row `x` (`RowTiles`), each
/// thread to its own; `u32::MAX` where the tile's span is not `[x cols + y tile, ..)`.
#[kernel(cols(out = (cols, tile)))]
pub fn row_tiles_mark(mut out: DisjointSlice<u32, RowTiles>, cols: u32, tile: u32) {
    let me = row_tile();
    let Some(view) = out.tile_mut(me) else { return };
    let first = me.tile() as usize * tile as usize;
    let ok = view.span().start == me.row() as usize * cols as usize + first && view.span().len() == tile.min(cols - first as u32) as usize;
    let (lane, stride) = (view.lane(), view.stride());
    for (j, v) in view.iter_mut().enumerate() {
        *v += if ok { mark(me.row(), first as u32 + lane + stride * j as u32) } else { u32::MAX };
    }
}

/// In place, one block per row: `x = 2 x + bias[col]` over a row of `cols`, each thread its
/// columns (a residual-stream update: read and written by the same thread only).
#[kernel(cols(x = cols))]
pub fn block_rows_in_place(mut x: DisjointSlice<f32, BlockRows>, bias: &[f32], cols: u32) {
    if let Some(row) = x.row_mut(block_row()) {
        for (b, v) in row.zip_input(bias) {
            *v = 2.0 * *v + *b;
        }
    }
}

/// RMS-norm in place, one block per row (vLLM's `rms_norm_kernel` map with the reduction
/// through an atomic: a test of the map, not of speed): `x = x / sqrt(mean(x^2))` rounded.
#[kernel(cols(x = cols))]
pub fn block_rows_two_passes(mut x: DisjointSlice<u32, BlockRows>, sums: AtomicSlice<u32>, cols: u32) {
    let me = block_row();
    if let Some(row) = x.row_mut(me) {
        let mut mine = 0;
        for v in row.iter_mut() {
            mine += *v;
        }
        sums.add(me.row() as usize, mine);
    }
    ferrocuda_device::sync::sync_threads();
    let total = sums.load(me.row() as usize);
    if let Some(row) = x.row_mut(me) {
        for v in row.iter_mut() {
            *v = *v * 1000 / total.max(1);
        }
    }
}

/// NeoX rotary in place (vLLM's `rotary_embedding_kernel`, `IS_NEOX`), one block per token:
/// heads of 8, pairs `(k, k + 3)` for `k < 3` (a partial rotary: elements 6 and 7 of each head
/// are left alone). `cos_sin` holds `cos` then `sin` for the 3 frequencies of each token.
#[kernel(cols(q = width))]
pub fn rotary_neox(mut q: DisjointSlice<f32, RotaryPairs<8, 3>>, cos_sin: &[f32], width: u32) {
    let me = block_row();
    let base = me.row() as usize * 6;
    let Some(pairs) = q.pairs_mut(me) else { return };
    for (_head, k, x, y) in pairs {
        if let (Some(&c), Some(&s)) = (cos_sin.get(base + k as usize), cos_sin.get(base + 3 + k as usize)) {
            (*x, *y) = (*x * c - *y * s, *y * c + *x * s);
        }
    }
}

/// Rows per warp, grid-strided over the launch's warps: each lane adds `mark` to its columns.
#[kernel(cols(out = cols))]
pub fn warp_rows_strided(mut out: PerWarpRow<u32>, rows: u32, cols: u32) {
    for me in warp_rows(rows) {
        let Some(mut row) = out.row_mut(me) else { break };
        let mut j = 0;
        while let Some(v) = row.get_mut(j) {
            *v += mark(me.row(), me.lane() + 32 * j as u32);
            j += 1;
        }
    }
}

/// Thread (x, y, z) adds `mark3(z, y, x)` to element (z, y, x) and checks the index it gets.
#[kernel(cols(out = (rows, cols)))]
pub fn cells_3d(mut out: DisjointSlice<u32, Cells3d>, rows: u32, cols: u32) {
    let me = unique_cell_3d();
    if let Some((v, index)) = out.get_mut(me) {
        let want = (me.z() as usize * rows as usize + me.y() as usize) * cols as usize + me.x() as usize;
        *v += if index == want { mark3(me.z(), me.y(), me.x()) } else { u32::MAX };
    }
}

/// Issue 30 (`GridSlices`): thread `i` of slice `s` (`blockIdx.y`) adds `mark(s, i)` to
/// element `s stride + i`, for `i < n`.
#[kernel(cols(out = (n, stride)))]
pub fn p30_grid_slices_mark(mut out: DisjointSlice<u32, GridSlices>, n: u32, stride: u32) {
    let me = unique_slice_cell();
    if let Some(v) = out.get_mut(me) {
        *v += mark(me.slice(), me.index());
    }
}

/// The last-block sum: block `b` publishes the sum of its elements (thread 0 adds them up,
/// slowly: a test of the handoff, not of speed), the last block folds the partials with
/// 16-byte loads and adds its threads' shares into `total[0]`.
#[kernel(cols(partials = 1))]
pub fn handoff_sum(x: &[u32], mut partials: DisjointSlice<u32, Handoff>, counter: AtomicSlice<u32>, total: AtomicSlice<u32>) {
    if thread_idx_x() == 0 {
        let (start, threads) = (block_idx_x() as usize * block_dim_x() as usize, block_dim_x() as usize);
        let mut sum = 0u32;
        for v in x.iter().skip(start).take(threads) {
            sum = sum.wrapping_add(*v);
        }
        partials.publish(0, sum);
    }
    if let Some(last) = partials.arrive(counter.at(0)) {
        let mine = last.fold(0u32, |a, p| a.wrapping_add(p));
        total.add(0, mine);
    }
}

/// A row of `cols` channels per block (llm.c's per-channel partials): thread `t` publishes
/// `mark(b, c)` for its channels `c = t + blockDim.x j`; the last block's thread `t` sums its
/// channels over the blocks into `sums[c]`.
#[kernel(cols(partials = cols))]
pub fn handoff_channels(mut partials: DisjointSlice<[u32; 4], Handoff>, counter: AtomicSlice<u32>, sums: AtomicSlice<u32>, cols: u32) {
    let mut j = 0;
    loop {
        let c = thread_idx_x() + block_dim_x() * j;
        let b = block_idx_x();
        if !partials.publish(j, [mark(b, c), 1, 2, 3]) {
            break;
        }
        j += 1;
    }
    if let Some(last) = partials.arrive(counter.at(0)) {
        let mut c = thread_idx_x();
        while c < last.cols() {
            let sum = last.fold_column(c, 0u32, |a, p| a.wrapping_add(p[0]).wrapping_add(p[1] + p[2] + p[3] - 6));
            sums.store(c as usize, sum);
            c += block_dim_x();
        }
    }
}

/// Misuse: only the even threads arrive (the barrier inside `arrive` is skipped by the odd
/// ones). The CPU executor reports it; never launched on a GPU (it would hang).
#[kernel(cols(partials = 1))]
pub fn handoff_half_arrive(mut partials: DisjointSlice<u32, Handoff>, counter: AtomicSlice<u32>) {
    partials.publish(0, 1);
    if thread_idx_x().is_multiple_of(2) {
        let _ = partials.arrive(counter.at(0));
    }
}

/// Misuse: a `BlockRow` carried to a thread of another block through a host thread-local
/// (possible on the CPU executor only); the executor's owner check catches it.
#[kernel(cols(out = 8))]
pub fn smuggled_block_row(mut out: DisjointSlice<u32, BlockRows>) {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        use core::cell::Cell;
        use ferrocuda_device::global::BlockRow;
        std::thread_local! {
            static LEFT: Cell<Option<BlockRow>> = const { Cell::new(None) };
        }
        let mine = block_row();
        if let Some(theirs) = LEFT.with(|left| left.replace(Some(mine)))
            && let Some(mut row) = out.row_mut(theirs)
            && let Some(element) = row.get_mut(0)
        {
            *element = 1;
        }
    }
    let _ = &mut out;
}

/// Rows in reverse block order (`BlockRows<Reversed>`, grid-strided): each thread adds
/// `mark(row, col)` to its columns, and thread 0 records which block took the row.
#[kernel(cols(out = cols))]
pub fn block_rows_reversed_mark(mut out: DisjointSlice<u32, BlockRows<Reversed>>, who: AtomicSlice<u32>, rows: u32, cols: u32) {
    for me in block_rows_reversed(rows) {
        let Some(row) = out.row_mut(me) else { break };
        let (r, first, stride) = (row.row(), row.lane(), row.stride());
        for (j, v) in row.iter_mut().enumerate() {
            *v += mark(r, first + stride * j as u32);
        }
        if thread_idx_x() == 0
            && let Some(w) = who.get(r as usize)
        {
            w.store(block_idx_x());
        }
    }
}

/// Rows per warp with the blocks in reverse order (`PerWarpRow<u32, Reversed>`, grid-strided
/// over warps): each lane adds `mark` to its columns, lane 0 records the warp's global index.
#[kernel(cols(out = cols))]
pub fn warp_rows_reversed_mark(mut out: PerWarpRow<u32, Reversed>, who: AtomicSlice<u32>, rows: u32, cols: u32) {
    for me in warp_rows_reversed(rows) {
        let Some(mut row) = out.row_mut(me) else { break };
        let mut j = 0;
        while let Some(v) = row.get_mut(j) {
            *v += mark(me.row(), me.lane() + 32 * j as u32);
            j += 1;
        }
        if me.lane() == 0
            && let Some(w) = who.get(me.row() as usize)
        {
            w.store((block_idx_x() * block_dim_x() + thread_idx_x()) / 32);
        }
    }
}

/// Four words aligned to 16 bytes (llm.c's `x128` shape): one 16-byte access each.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable, ferrocuda_device::LayoutKey)]
pub struct Quad(pub [u32; 4]);

/// The last-block write view: every block publishes its block sum; the last block adds the
/// total to each of its threads' elements of `out` (`Quad`: one 16-byte relaxed load and
/// store each), `[old + total, index, 7, 9]`.
#[kernel(cols(partials = 1))]
pub fn last_block_finish(x: &[u32], mut partials: DisjointSlice<u32, Handoff>, counter: AtomicSlice<u32>, out: DisjointSlice<Quad, ByLastBlock>) {
    let reduce = RuntimeBlockReduce::new(ferrocuda_device::block_scratch!(u32));
    let start = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    let mine = x.get(start).copied().unwrap_or(0);
    if let Some(sum) = reduce.reduce(mine, u32::wrapping_add) {
        partials.publish(0, sum);
    }
    let Some(counter) = counter.get(0) else { return };
    let Some(last) = partials.arrive(counter) else { return };
    let total = reduce.reduce_all(last.fold(0u32, u32::wrapping_add), u32::wrapping_add);
    let mut out = last.finish(out);
    for j in 0..out.count() {
        let index = thread_idx_x() + block_dim_x() * j;
        out.update(j, |old| Quad([old.0[0].wrapping_add(total), index, 7, 9]));
    }
}

/// In place with reads of other threads' columns (llm.c's fused classifier's shape), rows in
/// reverse block order: every thread reads the whole row and sums it, then after the phase
/// barrier each thread replaces its own columns with `1000 x / sum` (and the column's
/// right-hand neighbour, read before the barrier, in `right`).
#[kernel(cols(x = cols, right = cols))]
pub fn in_place_rows_normalize(x: DisjointSlice<u32, InPlaceRows<Reversed>>, mut right: DisjointSlice<u32, BlockRows<Reversed>>, cols: u32) {
    let me = block_row_reversed();
    let Some(read) = x.read_row(me) else { return };
    let row = read.row();
    let sum: u32 = row.iter().fold(0u32, |a, &v| a.wrapping_add(v));
    // A read of other threads' columns: each thread's right-hand neighbours.
    if let Some(mut r) = right.row_mut(me) {
        let (first, stride) = (r.lane(), r.stride());
        let mut j = 0;
        while let Some(v) = r.get_mut(j) {
            let c = (first + stride * j as u32 + 1) % cols.max(1);
            *v = row.get(c as usize).copied().unwrap_or(0);
            j += 1;
        }
    }
    let mut write = read.write_own();
    for v in write.row_mut().iter_mut() {
        *v = (*v).wrapping_mul(1000) / sum.max(1);
    }
}

/// Misuse: thread 0 ends the read phase while the others wait at `sync_threads()` (another
/// hardware barrier): on a GPU a hang, on the CPU executor `MixedBarriers`. Never launched on
/// a GPU.
#[kernel(cols(x = 32))]
pub fn in_place_rows_mixed_barriers(x: DisjointSlice<u32, InPlaceRows>) {
    let Some(read) = x.read_row(block_row()) else { return };
    if thread_idx_x() == 0 {
        let mut write = read.write_own();
        if let Some(v) = write.row_mut().get_mut(0) {
            *v = 1;
        }
    } else {
        ferrocuda_device::sync::sync_threads();
        let _ = read.row().first();
    }
}

/// 2-byte elements at data-dependent indices (vLLM's `reshape_and_cache_flash` scatters one
/// bf16 per thread to a slot read from memory): `out[slots[i]] = x[i]` as relaxed 2-byte
/// stores (`st.relaxed.gpu.global.b16`), for `u16` and `bf16`.
#[kernel]
pub fn scatter_u16(x: &[u16], slots: &[u32], out: AtomicSlice<u16>, out_bf16: AtomicSlice<ferrocuda_device::half::bf16>) {
    let i = ferrocuda_device::thread::index_1d();
    if let (Some(&v), Some(&slot)) = (x.get(i), slots.get(i)) {
        if let Some(cell) = out.get(slot as usize) {
            cell.store(v);
        }
        if let Some(cell) = out_bf16.get(slot as usize) {
            cell.store(ferrocuda_device::half::bf16::from_bits(v));
        }
    }
}

/// `SegmentRows<4>` (session 18, issue 30 gap 4), grid-strided over segments: each lane adds
/// `mark(row, col)` to its columns `lane, lane + 4, ...` of each of its segment's rows.
#[kernel(cols(out = cols))]
pub fn segment_rows_mark4(mut out: DisjointSlice<u32, SegmentRows<4>>, rows: u32, cols: u32) {
    for me in ferrocuda_device::global::segment_rows::<4>(rows) {
        let Some(row) = out.row_mut(me) else { break };
        let (r, first, stride) = (row.row(), row.lane(), row.stride());
        for (j, v) in row.iter_mut().enumerate() {
            *v += mark(r, first + stride * j as u32);
        }
    }
}

/// `SegmentRows<16>` on bytes, one row per segment (vLLM's FP8 group): each lane adds `(row +
/// col) % 251 + 1` to its bytes, and lane 0 adds `row + 1` to the segment's one value (`cols =
/// 1`, `first_mut`).
#[kernel(cols(out = cols, first = 1))]
pub fn segment_rows_bytes16(mut out: DisjointSlice<u8, SegmentRows<16>>, mut first: DisjointSlice<u32, SegmentRows<16>>, cols: u32) {
    let me = ferrocuda_device::global::segment_row::<16>();
    if let Some(f) = first.first_mut(me) {
        *f += me.row() + 1;
    }
    let Some(row) = out.row_mut(me) else { return };
    let (r, lane) = (row.row(), row.lane());
    for (j, v) in row.iter_mut().enumerate() {
        *v = v.wrapping_add(((r + lane + 16 * j as u32) % 251 + 1) as u8);
    }
}

/// Misuse (session 18): a `SegmentRow<16>` carried to another thread through a host
/// thread-local (possible on the CPU executor only); the executor's owner check catches it.
#[kernel(cols(out = 16))]
pub fn smuggled_segment_row(mut out: DisjointSlice<u32, SegmentRows<16>>) {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        use core::cell::Cell;
        use ferrocuda_device::global::SegmentRow;
        std::thread_local! {
            static LEFT: Cell<Option<SegmentRow<16>>> = const { Cell::new(None) };
        }
        let mine = ferrocuda_device::global::segment_row::<16>();
        if let Some(theirs) = LEFT.with(|left| left.replace(Some(mine)))
            && let Some(mut row) = out.row_mut(theirs)
            && let Some(element) = row.get_mut(0)
        {
            *element = 1;
        }
    }
    let _ = &mut out;
}

/// Misuse (session 18): each lane also writes the next lane's first column of its segment's
/// row through the `unsafe` escape hatch, breaking its contract (the column is that lane's);
/// the CPU executor's race detector reports the two writes of one element.
#[kernel(cols(out = cols))]
pub fn segment_rows_neighbour_write(mut out: DisjointSlice<u32, SegmentRows<8>>, cols: u32) {
    let me = ferrocuda_device::global::segment_row::<8>();
    let (r, lane) = (me.row(), me.lane());
    if let Some(mut row) = out.row_mut(me)
        && let Some(v) = row.get_mut(0)
    {
        *v = 1;
    }
    let neighbour = (r * cols + (lane + 1) % 8) as usize;
    if neighbour < out.len() {
        // SAFETY: deliberately broken (the test's point): the element is the next lane's.
        unsafe { out.write_unchecked(neighbour, 2) };
    }
}

/// `DisjointMatrix<u32, true>` (session 18, issue 30 gap 3): thread `(x, y)` writes `mark(x,
/// y)` at (row `x`, column `y`), llm.c's `out[bt * OC + oc]` with `bt` from x.
#[kernel(cols(out = cols))]
pub fn cells_transposed_mark(mut out: ferrocuda_device::global::DisjointMatrix<u32, true>, cols: u32) {
    let cell = ferrocuda_device::global::unique_cell_transposed();
    if let Some(o) = out.get_mut(cell) {
        *o += mark(cell.row(), cell.col());
    }
}

/// `PerThreadShared` (session 18, issue 30 gap 6): two planes per thread (maximum and sum), a
/// tree reduction over the block's threads (any block shape: the linear thread number), and
/// thread 0 of block `b` stores both at `2 b`, `2 b + 1`; `u32::MAX` there if the launch gave
/// too few shared bytes. `sync = false` leaves out the barriers (the misuse the CPU executor
/// reports).
#[kernel]
pub fn per_thread_shared_tree(x: &[u32], out: AtomicSlice<u32>, sync: bool) {
    use ferrocuda_device::sync::sync_threads;
    let b = block_idx_x() as usize;
    let Some(shared) = ferrocuda_device::dynamic_shared::<u32>().per_thread::<2>() else {
        if thread_idx_x() == 0
            && let Some(o) = out.get(2 * b)
        {
            o.store(u32::MAX);
        }
        return;
    };
    let t = shared.mine();
    let v = x.get(b * shared.threads() as usize + t.get() as usize).copied().unwrap_or(0);
    shared.set(t, 0, v);
    shared.set(t, 1, v);
    let mut stride = shared.threads() / 2;
    while stride >= 1 {
        if sync {
            sync_threads();
        }
        if let Some(p) = shared.partner(stride) {
            shared.set(t, 0, shared.get(t, 0).max(shared.get(p, 0)));
            shared.set(t, 1, shared.get(t, 1).wrapping_add(shared.get(p, 1)));
        }
        stride /= 2;
    }
    sync_threads();
    if t.get() == 0
        && let (Some(m), Some(s)) = (out.get(2 * b), out.get(2 * b + 1))
    {
        m.store(shared.get(shared.first(), 0));
        s.store(shared.get(shared.first(), 1));
    }
}
