//! Fixture kernels: the safe loops the docs teach, each in its `for` form (what a user writes)
//! and, where it exists, its `for_each` form, so that tests/ports2_ptx.rs can pin that both keep
//! the inputs' `ld.global.nc` and have no null test per step (issue 30, second port, item 2).

use ferrocuda_device::global::partition::{BlockRows, RotaryPairs};
use ferrocuda_device::global::{DisjointChunks, PerWarpRow, block_row, unique_index, warp_row};
use ferrocuda_device::kernel;
use ferrocuda_device::prelude::*;

/// `for ([x, w, b], o) in row.zip_inputs([x, w, b])` over a warp's row (llm.c's layernorm loop).
#[kernel(cols(out = c))]
pub fn loop_for_zip_inputs_warp(mut out: PerWarpRow<f32>, x: &[f32], w: &[f32], b: &[f32], c: u32) {
    let Some(row) = out.row_mut(warp_row()) else { return };
    let start = row.row() as usize * c as usize;
    let Some(x) = x.get(start..) else { return };
    for ([x, w, b], o) in row.zip_inputs([x, w, b]) {
        *o = *x * *w + *b;
    }
}

/// `for (x, o) in row.zip_input(x)` over a block's row.
#[kernel(cols(out = c))]
pub fn loop_for_zip_input_block(mut out: DisjointSlice<f32, BlockRows>, x: &[f32], c: u32) {
    let Some(row) = out.row_mut(block_row()) else { return };
    let start = row.row() as usize * c as usize;
    let Some(x) = x.get(start..) else { return };
    for (x, o) in row.zip_input(x) {
        *o = 2.0 * *x;
    }
}

/// `for (w, o) in row.zip_input(w).zip(other.iter_mut())` (vLLM's fused add RMS norm).
#[kernel(cols(out = c, other = c))]
pub fn loop_for_zip_input_zip_iter_mut(mut out: DisjointSlice<f32, BlockRows>, mut other: DisjointSlice<f32, BlockRows>, w: &[f32], c: u32) {
    let me = block_row();
    let (Some(row), Some(other)) = (out.row_mut(me), other.row_mut(me)) else { return };
    for ((w, o), r) in row.zip_input(w).zip(other.iter_mut()) {
        *o = *r * *w;
        *r += 1.0;
    }
}

/// `for o in row.iter_mut()` over a block's row.
#[kernel(cols(out = c))]
pub fn loop_for_iter_mut(mut out: DisjointSlice<f32, BlockRows>, v: f32, c: u32) {
    let Some(row) = out.row_mut(block_row()) else { return };
    for o in row.iter_mut() {
        *o = v;
    }
}

/// `for (_, k, x, y) in pairs` over a rotary row, reading cos/sin at `k`.
#[kernel(cols(q = c))]
pub fn loop_for_rotary(mut q: DisjointSlice<f32, RotaryPairs<128, 64>>, cos_sin: &[f32], c: u32) {
    let Some(cos_sin) = cos_sin.get(..128) else { return };
    let (cos, sin) = cos_sin.split_at(64);
    let Some(pairs) = q.pairs_mut(block_row()) else { return };
    for (_, k, x, y) in pairs {
        let (c, s) = (cos[k as usize], sin[k as usize]);
        (*x, *y) = (*x * c - *y * s, *y * c + *x * s);
    }
}

/// `for (o, x) in chunk.iter_mut().zip(x.iter())` over a thread's chunk.
#[kernel]
pub fn loop_for_chunk_zip(mut out: DisjointChunks<f32, 8>, x: &[f32]) {
    let i = unique_index();
    let Some(chunk) = out.get_mut(i) else { return };
    let Some(x) = x.get(i.get() * 8..i.get() * 8 + 8) else { return };
    for (o, x) in chunk.iter_mut().zip(x.iter()) {
        *o = 2.0 * *x;
    }
}

/// `for (x, o) in x.chunks(4).zip(..)`: a row's input read four at a time.
#[kernel(cols(out = c))]
pub fn loop_for_as_chunks(mut out: DisjointSlice<f32, BlockRows>, x: &[f32], c: u32) {
    let Some(row) = out.row_mut(block_row()) else { return };
    let (quads, _) = x.as_chunks::<4>();
    for (q, o) in row.zip_input(quads) {
        *o = q[0] + q[1] + q[2] + q[3];
    }
}

/// `for ([x], o) in row.zip_inputs([x])`: one input through `zip_inputs`.
#[kernel(cols(out = c))]
pub fn loop_for_zip_inputs_1(mut out: DisjointSlice<f32, BlockRows>, x: &[f32], c: u32) {
    let Some(row) = out.row_mut(block_row()) else { return };
    for ([x], o) in row.zip_inputs([x]) {
        *o = 2.0 * *x;
    }
}

/// `for ([x, w], o) in row.zip_inputs([x, w])`: two inputs (vLLM's `act_and_mul` halves).
#[kernel(cols(out = c))]
pub fn loop_for_zip_inputs_2(mut out: DisjointSlice<f32, BlockRows>, x: &[f32], w: &[f32], c: u32) {
    let Some(row) = out.row_mut(block_row()) else { return };
    for ([x, w], o) in row.zip_inputs([x, w]) {
        *o = *x * *w;
    }
}

/// `for ([x, w, b], o) in row.zip_inputs([x, w, b])`: three inputs, each a whole parameter.
#[kernel(cols(out = c))]
pub fn loop_for_zip_inputs_3(mut out: DisjointSlice<f32, BlockRows>, x: &[f32], w: &[f32], b: &[f32], c: u32) {
    let Some(row) = out.row_mut(block_row()) else { return };
    for ([x, w, b], o) in row.zip_inputs([x, w, b]) {
        *o = *x * *w + *b;
    }
}

/// `loop_for_zip_inputs_3` with `for_each`.
#[kernel(cols(out = c))]
pub fn loop_for_each_zip_inputs_3(mut out: DisjointSlice<f32, BlockRows>, x: &[f32], w: &[f32], b: &[f32], c: u32) {
    let Some(row) = out.row_mut(block_row()) else { return };
    row.zip_inputs([x, w, b]).for_each(|([x, w, b], o)| *o = *x * *w + *b);
}

/// `loop_for_zip_inputs_warp` with `for_each`.
#[kernel(cols(out = c))]
pub fn loop_for_each_zip_inputs_warp(mut out: PerWarpRow<f32>, x: &[f32], w: &[f32], b: &[f32], c: u32) {
    let Some(row) = out.row_mut(warp_row()) else { return };
    let start = row.row() as usize * c as usize;
    let Some(x) = x.get(start..) else { return };
    row.zip_inputs([x, w, b]).for_each(|([x, w, b], o)| *o = *x * *w + *b);
}

/// `loop_for_zip_input_zip_iter_mut` with `for_each`.
#[kernel(cols(out = c, other = c))]
pub fn loop_for_each_zip_input_zip_iter_mut(mut out: DisjointSlice<f32, BlockRows>, mut other: DisjointSlice<f32, BlockRows>, w: &[f32], c: u32) {
    let me = block_row();
    let (Some(row), Some(other)) = (out.row_mut(me), other.row_mut(me)) else { return };
    row.zip_input(w).zip(other.iter_mut()).for_each(|((w, o), r)| {
        *o = *r * *w;
        *r += 1.0;
    });
}
