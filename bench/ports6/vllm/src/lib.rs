//! Three vLLM `csrc` kernels ported to safe Rust from ferrocuda's docs alone (issue 30's sixth
//! held-out port), first try, with `bf16` activations as vLLM runs them. Each keeps the
//! source's launch shape, types and loops; its CUDA C++ twin, as the public source writes it,
//! is in `bench/ports6/cuda/ports6.cu` (`PORTS6_VLLM`), and `bench/ports6/RESULTS.md` says what
//! each port needed. Precise math (vLLM builds without fast math), sm_90.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
// On the host, `f32`'s own `tanh`, ... win over the device library's math traits.
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::global::{AtomicSlice, BlockRows, DisjointSlice, SegmentRows, block_row, segment_row, unique_index};
use ferrocuda_device::half::fp8;
use ferrocuda_device::prelude::*;
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::shared_vector::dynamic_shared_x4;
use ferrocuda_device::thread::strided_range;
use ferrocuda_device::{kernel, sync::sync_threads, warp};

ferrocuda_device::embed_kernels!();

/// `bf16` 0.5 (`(T)0.5` in the source).
const HALF: bf16 = bf16::from_bits(0x3f00);
/// `bf16` 1.0 (`(T)1.0` in the source).
const ONE: bf16 = bf16::from_bits(0x3f80);

/// vLLM's `gelu_new_kernel<T>` for `T = bf16`, each operation where the source rounds: `x * x *
/// x` in bf16, `(T)(0.044715f * x3)`, `x + ..` in bf16, `(T)(0.79788456f * ..)`, `(T)tanhf(..)`,
/// then `((T)0.5) * x * (((T)1.0) + t)` in bf16.
#[inline(always)]
pub fn gelu_new(x: bf16) -> bf16 {
    let x3 = x.mul_rn(x).mul_rn(x).widen();
    let inner = x.add_rn((0.044715f32 * x3).to_bf16());
    let t = (0.797_884_6_f32 * inner.widen()).to_bf16().widen().tanh().to_bf16();
    HALF.mul_rn(x).mul_rn(ONE.add_rn(t))
}

/// vLLM `activation_kernel<bf16, gelu_new_kernel>` (csrc/activation_kernels.cu): `out = gelu_new
/// (input)` over `[num_tokens, d]`, one block per token (grid `num_tokens`, block `min(d,
/// 1024)`), each thread striding over the token's row by `blockDim.x`.
#[kernel(cols(out = d))]
pub fn activation_kernel_gelu_new(mut out: DisjointSlice<bf16, BlockRows>, input: &[bf16], d: u32) {
    let Some(row) = out.row_mut(block_row()) else { return };
    let Some(x) = input.get(row.span()) else { return };
    row.zip_input(x).for_each(|(x, o)| *o = gelu_new(*x));
}

/// Session 18 experiment (issue 30, gap 2, opt-in): [`activation_kernel_gelu_new()`] with the
/// row loop unrolled by 4 without a division (`LaneRow::zip_input_for_each_x4`), to see whether
/// the form that helps softmax 2 slows a large body (the lead's counted iterators did: 0.930x).
#[kernel(cols(out = d))]
pub fn activation_kernel_gelu_new_x4(mut out: DisjointSlice<bf16, BlockRows>, input: &[bf16], d: u32) {
    let Some(row) = out.row_mut(block_row()) else { return };
    let Some(x) = input.get(row.span()) else { return };
    row.zip_input_for_each_x4(x, |x, o| *o = gelu_new(*x));
}

/// vLLM `dynamic_scaled_int8_azp_quant_kernel<bf16, float, int32_t>`
/// (csrc/quantization/compressed_tensors/int8_quant_kernels.cu): asymmetric int8 quantisation
/// per token. One block per token (grid `num_tokens`, block `min(hidden_size, 1024)`): the
/// row's maximum and minimum (two block reductions), then thread 0's scale `(max - min) / 255`
/// and zero point `nearbyint(-128 - min / scale)`, stored per token and handed to the block,
/// then `out = sat8(rni(x / scale) + azp)`.
#[kernel(cols(out = hidden_size, scale = 1, azp = 1))]
pub fn dynamic_scaled_int8_azp_quant_kernel(
    input: &[bf16],
    mut out: DisjointSlice<i8, BlockRows>,
    mut scale: DisjointSlice<f32, BlockRows>,
    mut azp: DisjointSlice<i32, BlockRows>,
    hidden_size: u32,
) {
    let me = block_row();
    let start = me.row() as usize * hidden_size as usize;
    // The same branch in every thread of the block (before the block's barriers).
    let Some(x) = input.get(start..start + hidden_size as usize) else { return };
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);

    // Scan for the min and max value for this token (the source starts the maximum at
    // `numeric_limits<float>::min()`, the smallest positive normal, and keeps it). Kept in
    // `usize`: counted in `u32` (session 19) the kernel took 29 registers instead of 32 but ran
    // slower on an H200 (1.042x -> 1.021x the twin, bench/results/s19-part).
    let mut max_val = f32::MIN_POSITIVE;
    let mut min_val = f32::MAX;
    for i in strided_range(tid, x.len(), threads) {
        let v = x[i].widen();
        max_val = max_val.max(v);
        min_val = min_val.min(v);
    }

    // Reduce the max and min values across the block: CUB's `Reduce` (result in thread 0), a
    // barrier, `Reduce` again, thread 0's scale and zero point handed to the block by a barrier.
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let block_max = reduce.max(max_val);
    let mut scale_row = scale.row_mut(me);
    let mut azp_row = azp.row_mut(me);
    // Thread 0 computes both and hands them over as one 64-bit slot: scale bits, azp bits.
    let packed: u64 = reduce.reduce_broadcast(min_val, f32::min, |block_min| {
        let block_max = block_max.unwrap_or(f32::MIN_POSITIVE);
        let scale_val = (block_max - block_min) / 255.0;
        // Use rounding to even (same as torch.round)
        let azp_val = (-128.0 - block_min / scale_val).round_ties_even() as i32;
        if let Some(s) = scale_row.as_mut().and_then(|r| r.get_mut(0)) {
            *s = scale_val;
        }
        if let Some(a) = azp_row.as_mut().and_then(|r| r.get_mut(0)) {
            *a = azp_val;
        }
        ((scale_val.to_bits() as u64) << 32) | azp_val as u32 as u64
    });
    let scale_val = f32::from_bits((packed >> 32) as u32);
    let azp_val = packed as u32 as i32;

    // Quantize the values
    let Some(row) = out.row_mut(me) else { return };
    row.zip_input(x).for_each(|(v, o)| {
        let q = (v.widen() / scale_val).to_i32_rn_sat().wrapping_add(azp_val);
        *o = q.clamp(-128, 127) as i8;
    });
}

/// Eight `bf16` (16 bytes): the source's `vec_n_t<T, 16 / sizeof(T)>`.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct Bf16x8(pub [bf16; 8]);

/// Eight FP8 E4M3 bytes (8 bytes, 8-byte aligned): the source's `vec_n_t<Float8_e4m3fn, 8>`.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct Fp8x8(pub [u8; 8]);

/// The group size this port is written for (DeepSeek's 128: one 16-byte vector per lane).
pub const GROUP_SIZE: u32 = 128;
/// Threads per group, as in the source.
pub const THREADS_PER_GROUP: u32 = 16;

/// vLLM `per_token_group_quant_8bit_kernel<bf16, c10::Float8_e4m3fn, false, false>`
/// (csrc/quantization/fp8/per_token_group_quant.cu), for groups of [`GROUP_SIZE`]: each group
/// of 128 `bf16` is quantised to FP8 E4M3 with its own scale `absmax / max_8bit` (row-major
/// scales). 16 threads per group, `groups_per_block` groups per block (block `16
/// groups_per_block`, grid `num_groups / groups_per_block`, `groups_per_block * 256` bytes of
/// dynamic shared memory): each lane copies its 16-byte vector into the group's shared slice
/// while taking its absolute maximum, the 16 lanes reduce it with `xor` shuffles 8, 4, 2, 1,
/// lane 0 stores the scale, and after a barrier each lane quantises its vector from shared
/// memory to 8 FP8 bytes.
///
/// With 128-element groups, lane `l` of group `g` owns vector `16 g + l`, which is the
/// thread's 1-D index when the block is `16 groups_per_block` threads, as the source launches
/// it: one `Fp8x8` of `output_q` per thread (`DisjointSlice<Fp8x8>` and `unique_index()`). The
/// scale, one per 16 threads, is an `AtomicSlice` store.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn per_token_group_quant_8bit_kernel(
    input: &[Bf16x8],
    mut output_q: DisjointSlice<Fp8x8>,
    output_s: AtomicSlice<f32>,
    groups_per_block: u32,
    eps: f32,
    min_8bit: f32,
    max_8bit: f32,
) {
    let t = thread_idx_x();
    let local_group_id = t / THREADS_PER_GROUP;
    let lane_id = t % THREADS_PER_GROUP;
    let global_group_id = block_idx_x() * groups_per_block + local_group_id;
    let i = unique_index();

    let mut local_absmax = eps;
    // The block's groups in shared memory (16-byte vectors; this lane's is vector `t`).
    let smem = dynamic_shared_x4::<u32>();
    // copy global -> shared & compute absmax
    if let Some(src) = input.get(i.get()) {
        let v = vector::load16(src);
        for x in v.0 {
            local_absmax = local_absmax.max(x.widen().abs());
        }
        smem.set(t as usize, bytemuck::cast(v.0));
    }

    // GroupReduceMax: the 16 lanes of the group.
    local_absmax = local_absmax.max(warp::shuffle_xor(local_absmax, 8));
    local_absmax = local_absmax.max(warp::shuffle_xor(local_absmax, 4));
    local_absmax = local_absmax.max(warp::shuffle_xor(local_absmax, 2));
    local_absmax = local_absmax.max(warp::shuffle_xor(local_absmax, 1));

    let y_s = local_absmax / max_8bit;
    if lane_id == 0
        && let Some(s) = output_s.get(global_group_id as usize)
    {
        s.store(y_s);
    }

    sync_threads();

    // quantize shared -> global 8-bit
    if let Some(o) = output_q.get_mut(i) {
        let v: [bf16; 8] = bytemuck::cast(smem.get(t as usize));
        let q = v.map(|x| (x.widen() / y_s).max(min_8bit).min(max_8bit));
        let [a, b] = fp8::e4m3x2(q[0], q[1]);
        let [c, d] = fp8::e4m3x2(q[2], q[3]);
        let [e, f] = fp8::e4m3x2(q[4], q[5]);
        let [g, h] = fp8::e4m3x2(q[6], q[7]);
        *o = Fp8x8([a, b, c, d, e, f, g, h]);
    }
}

/// Fix-round candidate of [`activation_kernel_gelu_new()`] (not the first try; built and read
/// in SASS only, not timed: the session's one GPU call had run): the same body, declared
/// `reqntid(1024)`, vLLM's block for `d >= 1024` (`min(d, 1024)`), as docs/performance.md's
/// trap table teaches for a loop striding by `blockDim.x`. The launchers refuse any other
/// block size, so it serves `d >= 1024` only. Its SASS (bench/results/s17-port/sass.txt):
/// the row loop still holds one load (LLVM left the `bf16`-and-`tanh` body rolled with the
/// constant stride too), 82 instructions against the first try's 79: no fix.
#[kernel(cols(out = d), reqntid(1024))]
pub fn activation_kernel_gelu_new_reqntid1024(mut out: DisjointSlice<bf16, BlockRows>, input: &[bf16], d: u32) {
    let Some(row) = out.row_mut(block_row()) else { return };
    let Some(x) = input.get(row.span()) else { return };
    row.zip_input(x).for_each(|(x, o)| *o = gelu_new(*x));
}

/// Eight `bf16` quantised to FP8 E4M3 as the source's `scalar_op_quant` does each: `x / y_s`
/// clamped to `[min_8bit, max_8bit]`, then c10's rounding (the hardware's `cvt.rn.satfinite`
/// gives the same bits on values already clamped to ±448).
#[inline(always)]
fn quant8(v: [bf16; 8], y_s: f32, min_8bit: f32, max_8bit: f32) -> Fp8x8 {
    let q = v.map(|x| (x.widen() / y_s).max(min_8bit).min(max_8bit));
    let [a, b] = fp8::e4m3x2(q[0], q[1]);
    let [c, d] = fp8::e4m3x2(q[2], q[3]);
    let [e, f] = fp8::e4m3x2(q[4], q[5]);
    let [g, h] = fp8::e4m3x2(q[6], q[7]);
    Fp8x8([a, b, c, d, e, f, g, h])
}

/// Session 18 re-port of [`per_token_group_quant_8bit_kernel()`] with the `SegmentRows<16>`
/// partition (issue 30, the sixth port's gap 4), for **any group size that is a multiple of 8**
/// (`vecs_per_group = group_size / 8` 16-byte vectors; vLLM's vectorised path): a quantisation
/// group is a row of both outputs, one per 16-lane segment. Lane `l` of the segment takes the
/// vectors `l, l + 16, ...` of its group, as `vectorize_with_alignment` with `tid = lane_id`,
/// `stride = 16` does: through its `LaneRow` of `output_q` (`Fp8x8`, 8 bytes a lane a step) and
/// the same columns of the input row. The scale is `output_s`'s `cols = 1` row, lane 0's
/// ([`first_mut`](DisjointSlice::first_mut)). No `unsafe`, no `AtomicSlice`.
///
/// Launch as the source: block `16 groups_per_block`, grid `num_groups / groups_per_block`,
/// `groups_per_block * group_size * 2` dynamic shared bytes.
#[kernel(cols(output_q = vecs_per_group, output_s = 1))]
pub fn per_token_group_quant_8bit_segments(
    input: &[Bf16x8],
    mut output_q: DisjointSlice<Fp8x8, SegmentRows<16>>,
    mut output_s: DisjointSlice<f32, SegmentRows<16>>,
    vecs_per_group: u32,
    eps: f32,
    min_8bit: f32,
    max_8bit: f32,
) {
    let me = segment_row::<16>();
    let lane = me.lane();
    // The block's groups in shared memory, this group's at `local_group_id * vecs_per_group`.
    let smem = dynamic_shared_x4::<u32>();
    let base = (thread_idx_x() / THREADS_PER_GROUP) * vecs_per_group;
    let row = output_q.row_mut(me);
    let x = row.as_ref().and_then(|row| input.get(row.span()));

    let mut local_absmax = eps;
    // copy global -> shared & compute absmax. Session 19: the lane's loop counts in `u32`
    // (`strided_range` over `u32`s, vLLM's `int` loop; `x.len()` is the row's `u32` width): a
    // `usize` counter cost a 64-bit add and two compares a step around the one load (SASS 639
    // -> 633 instructions, 31 -> 30 registers; groups of 128: 1.500x -> 1.526x the twin on an
    // H200, bench/results/s19-part).
    if let Some(x) = x {
        for c in strided_range(lane, x.len() as u32, THREADS_PER_GROUP) {
            let v = vector::load16(&x[c as usize]);
            for e in v.0 {
                local_absmax = local_absmax.max(e.widen().abs());
            }
            smem.set((base + c) as usize, bytemuck::cast(v.0));
        }
    }

    // GroupReduceMax: xor shuffles 8, 4, 2, 1 within the 16-lane segment.
    let local_absmax = warp::reduce_within::<16, f32>(local_absmax, f32::max);

    let y_s = local_absmax / max_8bit;
    if let Some(s) = output_s.first_mut(me) {
        *s = y_s;
    }

    sync_threads();

    // quantize shared -> global 8-bit
    if let Some(row) = row {
        let mut c = base + lane;
        row.iter_mut().for_each(|o| {
            *o = quant8(bytemuck::cast(smem.get(c as usize)), y_s, min_8bit, max_8bit);
            c = c.wrapping_add(THREADS_PER_GROUP);
        });
    }
}

/// Session 18: the same kernel on FP8 **bytes** (`u8` elements), for group sizes that are not a
/// multiple of 8 (vLLM's scalar path of `vectorize_with_alignment`: lane `l` takes elements `l,
/// l + 16, ...` of its group): `DisjointSlice<u8, SegmentRows<16>>`, one byte a lane a step.
/// Shared memory holds the group as `bf16` (`groups_per_block * group_size * 2` bytes).
#[kernel(cols(output_q = group_size, output_s = 1))]
pub fn per_token_group_quant_8bit_bytes(
    input: &[bf16],
    mut output_q: DisjointSlice<u8, SegmentRows<16>>,
    mut output_s: DisjointSlice<f32, SegmentRows<16>>,
    group_size: u32,
    eps: f32,
    min_8bit: f32,
    max_8bit: f32,
) {
    let me = segment_row::<16>();
    let lane = me.lane() as usize;
    let smem = dynamic_shared::<bf16>();
    let base = ((thread_idx_x() / THREADS_PER_GROUP) * group_size) as usize;
    let row = output_q.row_mut(me);
    let x = row.as_ref().and_then(|row| input.get(row.span()));

    let mut local_absmax = eps;
    if let Some(x) = x {
        let mut c = lane;
        while c < x.len() {
            local_absmax = local_absmax.max(x[c].widen().abs());
            smem.set(base + c, x[c]);
            c += THREADS_PER_GROUP as usize;
        }
    }
    let local_absmax = warp::reduce_within::<16, f32>(local_absmax, f32::max);
    let y_s = local_absmax / max_8bit;
    if let Some(s) = output_s.first_mut(me) {
        *s = y_s;
    }

    sync_threads();

    if let Some(row) = row {
        let mut c = base + lane;
        row.iter_mut().for_each(|o| {
            let q = (smem.get(c).widen() / y_s).max(min_8bit).min(max_8bit);
            *o = fp8::e4m3(q);
            c += THREADS_PER_GROUP as usize;
        });
    }
}
