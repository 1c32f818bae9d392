//! llm.c's kernels of issue 30's fifth held-out port, ported from the docs alone (README.md,
//! docs/kernel-model.md, docs/performance.md, the device crate's rustdoc).
//!
//! Each kernel is the first try as committed; a `_fixed` variant beside it (when there is one)
//! is the fix round (bench/ports5/RESULTS.md says why). The CUDA C++ twins are
//! bench/ports5/cuda/ports5.cu (`-DPORTS5_LLMC --use_fast_math`); [`twin_abi`] declares their
//! parameter lists for the host harness.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]

use bytemuck::{Pod, Zeroable};
use core::num::NonZeroU32;
use ferrocuda_device::cache::{self, Load};
use ferrocuda_device::global::{DisjointMatrix, DisjointSlice, GridSlices, unique_cell, unique_index, unique_slice_cell};
use ferrocuda_device::half::{Bf16x2, F32ToHalf, HalfFloat, bf16};
use ferrocuda_device::prelude::*;
use ferrocuda_device::{kernel, unroll::unroll, vector};

ferrocuda_device::embed_kernels!();

pub mod twin_abi;

/// llm.c's `x128` of `floatX = __nv_bfloat16`: eight bf16 in 16 bytes (`Packed128<floatX>`).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct X128 {
    /// The eight values, in memory order.
    pub v: [bf16; 8],
}

/// `residual_forward_kernel2` (llm.c dev/cuda/residual_forward.cu): `out = inp1 + inp2` on
/// bf16, one `x128` per thread, the inputs streamed (`load128cs`), the sum rounded in `f32`.
/// First try.
#[kernel(same_len(out, inp1, inp2))]
pub fn residual_forward_kernel2(mut out: DisjointSlice<X128>, inp1: &[X128], inp2: &[X128]) {
    let i = unique_index();
    if let Some(o) = out.get_mut(i) {
        let a = cache::load(&inp1[i], Load::Streaming);
        let b = cache::load(&inp2[i], Load::Streaming);
        let mut r = X128::default();
        unroll::<4>(|k| {
            let pair = Bf16x2::from_f32s(a.v[2 * k].widen() + b.v[2 * k].widen(), a.v[2 * k + 1].widen() + b.v[2 * k + 1].widen());
            r.v[2 * k] = pair.lo();
            r.v[2 * k + 1] = pair.hi();
        });
        vector::store16(o, r);
    }
}

/// `crossentropy_forward_kernel1` (llm.c dev/cuda/crossentropy_forward.cu): `losses[bt] =
/// -log(probs[bt, targets[bt]])`, one row `bt = b T + t` per thread. `losses` has `B T`
/// elements, `probs` `B T V`. First try.
#[kernel]
pub fn crossentropy_forward_kernel1(mut losses: DisjointSlice<f32>, probs: &[f32], targets: &[i32], v: u32) {
    let i = unique_index();
    let Some(loss) = losses.get_mut(i) else { return };
    let Some(&ix) = targets.get(i.get()) else { return };
    // probs + b * T * V + t * V is the row i * V; a negative target reads nothing.
    let row = i.get() * v as usize;
    let Some(&p) = probs.get(row + ix as u32 as usize) else { return };
    *loss = -p.ln();
}

/// `crossentropy_softmax_backward_kernel1` (llm.c dev/cuda/crossentropy_softmax_backward.cu):
/// `dlogits[b, t, v] += (probs[b, t, v] - (v == target)) * dlosses[b, t]`, one element per
/// thread, with the source's index arithmetic (`b = i / (T V)`, `t = (i / V) % T`, `v = i % V`).
/// First try.
#[kernel(same_len(dlogits, probs))]
pub fn crossentropy_softmax_backward_kernel1(mut dlogits: DisjointSlice<f32>, dlosses: &[f32], probs: &[f32], targets: &[i32], t: NonZeroU32, v: NonZeroU32) {
    let i = unique_index();
    let Some(d) = dlogits.get_mut(i) else { return };
    let Some(tv) = NonZeroU32::new(t.get() * v.get()) else { return };
    let n = i.get() as u32;
    let b = n / tv;
    let tt = (n / v) % t;
    let col = n % v;
    let bt = (b * t.get() + tt) as usize;
    let (Some(&dloss), Some(&ix)) = (dlosses.get(bt), targets.get(bt)) else { return };
    let p = probs[i];
    let indicator = if col as i32 == ix { 1.0 } else { 0.0 };
    *d += (p - indicator) * dloss;
}

/// `copy_and_cast_kernel<__nv_bfloat16, float>` (llm.c llmc/cuda_utils.cuh): `dst[y stride_dst
/// + x] = bf16(src[y stride_src + x])` for `x < n`, slice `y = blockIdx.y` of a 2-D grid (the
/// master weights' copy into the bf16 parameters, one layer per `y`). First try.
#[kernel(cols(dst = stride_dst))]
pub fn copy_and_cast_kernel(mut dst: DisjointMatrix<bf16>, src: &[f32], n: u32, stride_dst: u32, stride_src: u32) {
    let cell = unique_cell();
    if cell.col() >= n {
        return;
    }
    let Some(o) = dst.get_mut(cell) else { return };
    let Some(&s) = src.get(cell.col() as usize + stride_src as usize * cell.row() as usize) else { return };
    *o = s.to_bf16();
}

/// `copy_and_cast_kernel` after the port (issue 30, session 16): the output in llm.c's own
/// partition, `GridSlices` (slice `blockIdx.y` at the run-time stride `stride_dst`, a 1-D grid
/// over its first `n` elements). The launchers check once that `n <= stride_dst` and that every
/// slice of the grid lies in `dst`, so the write's one check is the source's `idx < n`; the
/// row needs no `blockDim.y` (1-D blocks). The first try's `DisjointMatrix` checked the column
/// against `cols`, the index against the length and the kernel's own `col < n` (40 SASS
/// instructions against nvcc's 29).
#[kernel(cols(dst = (n, stride_dst)))]
pub fn copy_and_cast_kernel_slices(mut dst: DisjointSlice<bf16, GridSlices>, src: &[f32], n: u32, stride_dst: u32, stride_src: u32) {
    let me = unique_slice_cell();
    let Some(o) = dst.get_mut(me) else { return };
    let Some(&s) = src.get(me.index() as usize + stride_src as usize * me.slice() as usize) else { return };
    *o = s.to_bf16();
}
