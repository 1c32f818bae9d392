//! Issue 30's seventh held-out port, the vLLM half: three kernels of vllm-project/vllm's
//! `csrc/` (`activation_kernels.cu` at 00ccbd42, `quantization/compressed_tensors/
//! int8_quant_kernels.cu` at 00b0571e) in bf16, written from ferrocuda's docs alone, safe.
//! Built without fast math, as vLLM builds them.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]
// The kernels stay as measured on the GPU (bench/ports7/RESULTS.md): index loops over register
// arrays and counters mirror the CUDA source, and a rewrite could change the SASS compared.
#![allow(clippy::needless_range_loop, clippy::explicit_counter_loop, clippy::manual_is_multiple_of)]

use ferrocuda_device::block::RuntimeBlockReduce;
use ferrocuda_device::global::{BlockRows, BlockRowsX16, DisjointSlice, block_row};
use ferrocuda_device::half::{F32ToHalf, HalfFloat, bf16};
use ferrocuda_device::math::FloatToInt;
use ferrocuda_device::thread::{block_dim_x, strided_range, thread_idx_x};
use ferrocuda_device::{block_scratch, kernel, vector};

ferrocuda_device::embed_kernels!();

/// Eight bf16 in one 16-byte vector (half of vLLM's `vec_n_t<scalar_t, 16>`) and sixteen
/// `int8` (`vec_n_t<int8_t, 16>`): the device library's 16-byte packs
/// (`ferrocuda_device::pack16`). The first try defined its own (gap 8 of RESULTS.md); the SASS
/// is the same.
pub use ferrocuda_device::pack16::{Bf16x8, I8x16};

/// `vllm::act_and_mul_kernel_with_param<__nv_bfloat16, fatrelu_kernel<__nv_bfloat16>>(scalar_t*
/// out, const scalar_t* input, const int d, const float param)` (`fatrelu_and_mul`):
/// `out[t][i] = (x > param ? x : 0) * y` with `x = input[t][i]`, `y = input[t][d + i]`, the
/// product a bf16 multiplication (`__nv_bfloat16`'s `operator*`). One block per token, blocks
/// of `min(d, 1024)`.
#[kernel(cols(out = d))]
pub fn act_and_mul_kernel_with_param(mut out: DisjointSlice<bf16, BlockRows>, input: &[bf16], d: u32, param: f32) {
    let me = block_row();
    let t = me.row() as usize;
    let du = d as usize;
    let Some(row) = out.row_mut(me) else { return };
    let Some(inp) = input.get(2 * du * t..2 * du * t + 2 * du) else { return };
    let (xs, ys) = inp.split_at(du);
    row.zip_inputs([xs, ys]).for_each(|([&x, &y], o)| {
        let f = x.widen();
        let a = (if f > param { f } else { 0.0 }).to_bf16();
        *o = a.mul_rn(y);
    });
}

/// `vllm::static_scaled_int8_quant_kernel<__nv_bfloat16, float>(scalar_t const* input, int8_t*
/// out, scale_type const* scale_ptr, const int hidden_size)`: `out = rn_sat_i8(x / scale)`,
/// one block per token (blocks of `min(hidden, 1024)`), 16 values per step. The port takes
/// `hidden16 = hidden_size / 16` and needs `hidden_size % 16 == 0` (vLLM's scalar tail for the
/// rest is not ported: gap 2 of RESULTS.md).
#[kernel(cols(out = hidden16))]
pub fn static_scaled_int8_quant_kernel(input: &[Bf16x8], mut out: DisjointSlice<I8x16, BlockRows>, scale: &[f32], hidden16: u32) {
    let me = block_row();
    let t = me.row() as usize;
    let h = hidden16 as usize;
    let Some(&scale_val) = scale.first() else { return };
    let Some(row) = out.row_mut(me) else { return };
    let Some(inp) = input.get(2 * h * t..2 * h * t + 2 * h) else { return };
    let (pairs, _) = inp.as_chunks::<2>();
    row.zip_input(pairs).for_each(|(pair, o)| {
        let lo = vector::load16(&pair[0]).to_f32s();
        let hi = vector::load16(&pair[1]).to_f32s();
        let mut q = I8x16::default();
        for j in 0..8 {
            q.0[j] = (lo[j] / scale_val).to_i8_rn_sat();
            q.0[8 + j] = (hi[j] / scale_val).to_i8_rn_sat();
        }
        vector::store16(o, q);
    });
}

/// `vllm::dynamic_scaled_int8_quant_kernel<__nv_bfloat16, float>(scalar_t const* input, int8_t*
/// out, scale_type* scale, const int hidden_size)`: the token's absolute maximum (a block
/// reduction: CUB's `BlockReduce<float, 1024>`), `scale[t] = absmax / 127`, then `out =
/// rn_sat_i8(x * (127 / absmax))`. One block per token, blocks of `min(hidden, 1024)`;
/// `hidden16 = hidden_size / 16` (`hidden_size % 16 == 0`, as above).
#[kernel(cols(out = hidden16, scale = 1))]
pub fn dynamic_scaled_int8_quant_kernel(input: &[Bf16x8], mut out: DisjointSlice<I8x16, BlockRows>, mut scale: DisjointSlice<f32, BlockRows>, hidden16: u32) {
    let me = block_row();
    let t = me.row() as usize;
    let h = hidden16 as usize;
    let Some(inp) = input.get(2 * h * t..2 * h * t + 2 * h) else { return };
    let (pairs, _) = inp.as_chunks::<2>();
    let tid = thread_idx_x() as usize;
    let mut absmax = 0.0f32;
    for i in strided_range(tid, pairs.len(), block_dim_x() as usize) {
        let lo = vector::load16(&pairs[i][0]).to_f32s();
        let hi = vector::load16(&pairs[i][1]).to_f32s();
        for j in 0..8 {
            absmax = absmax.max(lo[j].abs());
            absmax = absmax.max(hi[j].abs());
        }
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let block_absmax = reduce.max_all(absmax);
    if let Some(mut s) = scale.row_mut(me)
        && let Some(x) = s.get_mut(0)
    {
        *x = block_absmax / 127.0;
    }
    let tmp_scale = 127.0f32 / block_absmax;
    let Some(row) = out.row_mut(me) else { return };
    row.zip_input(pairs).for_each(|(pair, o)| {
        let lo = vector::load16(&pair[0]).to_f32s();
        let hi = vector::load16(&pair[1]).to_f32s();
        let mut q = I8x16::default();
        for j in 0..8 {
            q.0[j] = (lo[j] * tmp_scale).to_i8_rn_sat();
            q.0[8 + j] = (hi[j] * tmp_scale).to_i8_rn_sat();
        }
        vector::store16(o, q);
    });
}

/// The fix round of [`dynamic_scaled_int8_quant_kernel()`] (the `RuntimeBlockReduce` docs:
/// `reduce_broadcast` is vLLM's "reduce to thread 0, store to `__shared__`, `__syncthreads()`,
/// every thread reads it" in 2 barriers, where `max_all` has every warp fold the partials):
/// thread 0 computes the absmax and writes the scale, every thread gets the absmax.
#[kernel(cols(out = hidden16, scale = 1))]
pub fn dynamic_scaled_int8_quant_kernel_fixed(
    input: &[Bf16x8],
    mut out: DisjointSlice<I8x16, BlockRows>,
    mut scale: DisjointSlice<f32, BlockRows>,
    hidden16: u32,
) {
    let me = block_row();
    let t = me.row() as usize;
    let h = hidden16 as usize;
    let Some(inp) = input.get(2 * h * t..2 * h * t + 2 * h) else { return };
    let (pairs, _) = inp.as_chunks::<2>();
    let tid = thread_idx_x() as usize;
    let mut absmax = 0.0f32;
    for i in strided_range(tid, pairs.len(), block_dim_x() as usize) {
        let lo = vector::load16(&pairs[i][0]).to_f32s();
        let hi = vector::load16(&pairs[i][1]).to_f32s();
        for j in 0..8 {
            absmax = absmax.max(lo[j].abs());
            absmax = absmax.max(hi[j].abs());
        }
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let block_absmax = reduce.reduce_broadcast(absmax, f32::max, |m| m);
    if let Some(mut s) = scale.row_mut(me)
        && let Some(x) = s.get_mut(0)
    {
        *x = block_absmax / 127.0;
    }
    let tmp_scale = 127.0f32 / block_absmax;
    let Some(row) = out.row_mut(me) else { return };
    row.zip_input(pairs).for_each(|(pair, o)| {
        let lo = vector::load16(&pair[0]).to_f32s();
        let hi = vector::load16(&pair[1]).to_f32s();
        let mut q = I8x16::default();
        for j in 0..8 {
            q.0[j] = (lo[j] * tmp_scale).to_i8_rn_sat();
            q.0[8 + j] = (hi[j] * tmp_scale).to_i8_rn_sat();
        }
        vector::store16(o, q);
    });
}

/// The fix round of [`static_scaled_int8_quant_kernel()`] (docs/performance.md, "no launch
/// bounds: ptxas picks registers for 1 block/SM"): the first try took 38 registers, so a
/// block of 1024 threads (vLLM's `min(hidden, 1024)`) left room for one block per SM where
/// nvcc's 32 fit two: half the occupancy, 0.62x on the H200. `launch_bounds(1024, 2)` asks
/// ptxas for two blocks of 1024 (32 registers). Not measured on a GPU this session.
#[kernel(cols(out = hidden16), launch_bounds(1024, 2))]
pub fn static_scaled_int8_quant_kernel_fixed(input: &[Bf16x8], mut out: DisjointSlice<I8x16, BlockRows>, scale: &[f32], hidden16: u32) {
    let me = block_row();
    let t = me.row() as usize;
    let h = hidden16 as usize;
    let Some(&scale_val) = scale.first() else { return };
    let Some(row) = out.row_mut(me) else { return };
    let Some(inp) = input.get(2 * h * t..2 * h * t + 2 * h) else { return };
    let (pairs, _) = inp.as_chunks::<2>();
    row.zip_input(pairs).for_each(|(pair, o)| {
        // Packed until used (the builder's spill warning at 32 registers): each word of the
        // output from two bf16 pairs, widened where divided.
        let v = [vector::load16(&pair[0]), vector::load16(&pair[1])];
        let mut words = [0u32; 4];
        for (w, word) in words.iter_mut().enumerate() {
            let (a, b) = v[w / 2].0[2 * (w % 2)].to_f32s();
            let (c, d) = v[w / 2].0[2 * (w % 2) + 1].to_f32s();
            let q = |x: f32| (x / scale_val).to_i8_rn_sat() as u8 as u32;
            *word = q(a) | q(b) << 8 | q(c) << 16 | q(d) << 24;
        }
        vector::store16(o, bytemuck::cast::<[u32; 4], I8x16>(words));
    });
}

/// `static_scaled_int8_quant_kernel` for **any** `hidden_size` (session 20, gap 2 of
/// RESULTS.md): the output as `DisjointSlice<i8, BlockRowsX16>` (`cols` in bytes), its row cut
/// by the library into a byte head (until the first 16-byte boundary), 16-byte vectors and a
/// byte tail, vLLM's vectorised loop plus its scalar remainder. The first version (measured
/// 0.866x nvcc) tested each vector's input for 16-byte alignment inside the loop; this one
/// casts the input row's body to `[Bf16x8; 2]` packs once per row (`RowX16::zip_packs`, two
/// `LDG.E.128` per output vector, no test in the loop) and falls back to element loads only
/// where that cast fails (an input row whose body is not 16-byte aligned). Each output word is
/// made from two bf16 pairs, packed until divided (the `_fixed` variant's register rule);
/// `launch_bounds(1024, 2)`: 34 registers without it (two 1024-thread blocks per SM need 32).
#[kernel(cols(out = hidden), launch_bounds(1024, 2))]
pub fn static_scaled_int8_quant_kernel_x16(input: &[bf16], mut out: DisjointSlice<i8, BlockRowsX16>, scale: &[f32], hidden: u32) {
    let me = block_row();
    let t = me.row() as usize;
    let h = hidden as usize;
    let Some(&scale_val) = scale.first() else { return };
    let Some(mut row) = out.row_mut(me) else { return };
    let Some(x) = input.get(h * t..h * t + h) else { return };
    let q = |v: f32| (v / scale_val).to_i8_rn_sat();
    let (head, body) = (row.head() as usize, 16 * row.vectors() as usize);
    match x.get(head..head + body).map(bytemuck::try_cast_slice::<bf16, [Bf16x8; 2]>) {
        Some(Ok(pairs)) => row.zip_packs(pairs, |pair, o| {
            let v = [vector::load16(&pair[0]), vector::load16(&pair[1])];
            let mut words = [0u32; 4];
            for (w, word) in words.iter_mut().enumerate() {
                let (a, b) = v[w / 2].0[2 * (w % 2)].to_f32s();
                let (c, d) = v[w / 2].0[2 * (w % 2) + 1].to_f32s();
                let b8 = |x: f32| q(x) as u8 as u32;
                *word = b8(a) | b8(b) << 8 | b8(c) << 16 | b8(d) << 24;
            }
            vector::store16(o, bytemuck::cast::<[u32; 4], I8x16>(words));
        }),
        _ => row.zip_vectors(x, |xs, o| {
            for j in 0..16 {
                o.0[j] = q(xs[j].widen());
            }
        }),
    }
    row.zip_elements(x, |&v, o| *o = q(v.widen()));
}

/// [`static_scaled_int8_quant_kernel_x16()`] with the idle threads returning first (session 21,
/// helper gaps): at vLLM's launch (1024 threads, hidden 8192: 512 vectors a row) half of each
/// block owns nothing, and the `_x16` SASS ran the whole setup around the loops (the input
/// row's slice and cast, the head and tail bounds) in those threads too, about 60 instructions
/// where vLLM's `if (threadIdx.x < hidden / 16)` and the `_fixed` port's first loop test exit
/// after 30. `RowX16::has_work` is that test for a row cut into head, vectors and tail; the rest
/// is `_x16` unchanged. (No barrier follows, so the early return is allowed.)
#[kernel(cols(out = hidden), launch_bounds(1024, 2))]
pub fn static_scaled_int8_quant_kernel_x16_idle(input: &[bf16], mut out: DisjointSlice<i8, BlockRowsX16>, scale: &[f32], hidden: u32) {
    let me = block_row();
    let t = me.row() as usize;
    let h = hidden as usize;
    let Some(mut row) = out.row_mut(me) else { return };
    if !row.has_work() {
        return;
    }
    let Some(&scale_val) = scale.first() else { return };
    let Some(x) = input.get(h * t..h * t + h) else { return };
    let q = |v: f32| (v / scale_val).to_i8_rn_sat();
    let (head, body) = (row.head() as usize, 16 * row.vectors() as usize);
    match x.get(head..head + body).map(bytemuck::try_cast_slice::<bf16, [Bf16x8; 2]>) {
        Some(Ok(pairs)) => row.zip_packs(pairs, |pair, o| {
            let v = [vector::load16(&pair[0]), vector::load16(&pair[1])];
            let mut words = [0u32; 4];
            for (w, word) in words.iter_mut().enumerate() {
                let (a, b) = v[w / 2].0[2 * (w % 2)].to_f32s();
                let (c, d) = v[w / 2].0[2 * (w % 2) + 1].to_f32s();
                let b8 = |x: f32| q(x) as u8 as u32;
                *word = b8(a) | b8(b) << 8 | b8(c) << 16 | b8(d) << 24;
            }
            vector::store16(o, bytemuck::cast::<[u32; 4], I8x16>(words));
        }),
        _ => row.zip_vectors(x, |xs, o| {
            for j in 0..16 {
                o.0[j] = q(xs[j].widen());
            }
        }),
    }
    row.zip_elements(x, |&v, o| *o = q(v.widen()));
}
