//! Issue 30's second held-out port, the vLLM half: three kernels of vLLM (`csrc/`) ported to safe
//! Rust from the docs alone, first try (see ../RESULTS.md), built without fast math as vLLM is.
//! The llm.c ports are in `llmc/` (`ferrocuda-ports2-llmc`, fast math); `cases` holds the CPU
//! references of all eight; the CUDA C++ twins are `cuda/ports2.cu`.

#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::global::partition::{BlockRows, Handoff, RotaryPairs};
use ferrocuda_device::global::{block_row, grid_stride};
use ferrocuda_device::half::{Bf16x2, F32ToHalf, HalfFloat, bf16};
use ferrocuda_device::prelude::*;
use ferrocuda_device::{LayoutKey, block_scratch, kernel};

ferrocuda_device::embed_kernels!();

#[cfg(not(target_arch = "nvptx64"))]
pub mod cases;
pub mod loops;

/// vLLM's `_f16Vec<__nv_bfloat16, 8>`: eight bf16 in one 16-byte aligned pack.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, LayoutKey)]
pub struct Vec8 {
    /// The eight values.
    pub v: [bf16; 8],
}

impl Vec8 {
    fn pair(self, i: usize) -> Bf16x2 {
        Bf16x2::new(self.v[2 * i], self.v[2 * i + 1])
    }

    fn set_pair(&mut self, i: usize, p: Bf16x2) {
        self.v[2 * i] = p.lo();
        self.v[2 * i + 1] = p.hi();
    }

    /// `operator+=`: `__hadd2` per pair.
    fn add(mut self, other: Vec8) -> Vec8 {
        for i in 0..4 {
            self.set_pair(i, self.pair(i) + other.pair(i));
        }
        self
    }

    /// `operator*=(const _f16Vec&)`: `__hmul2` per pair.
    fn mul(mut self, other: Vec8) -> Vec8 {
        for i in 0..4 {
            self.set_pair(i, self.pair(i) * other.pair(i));
        }
        self
    }

    /// `operator*=(float)`: each pair to `float2`, scaled, back with `__float22bfloat162_rn`.
    fn scale(mut self, scale: f32) -> Vec8 {
        for i in 0..4 {
            let (x, y) = self.pair(i).to_f32s();
            self.set_pair(i, Bf16x2::from_f32s(x * scale, y * scale));
        }
        self
    }

    /// `sum_squares()`.
    fn sum_squares(self) -> f32 {
        let mut result = 0.0f32;
        for i in 0..4 {
            let (x, y) = self.pair(i).to_f32s();
            result += x * x + y * y;
        }
        result
    }
}

/// vLLM `csrc/layernorm_kernels.cu` `fused_add_rms_norm_kernel<c10::BFloat16, 8>`: a token per
/// block (blocks of `min(hidden, 256)` when there are 256 tokens or more), `residual += input`
/// and `input = rms_norm(residual) * weight`, both in place, 16-byte packs, the variance by a
/// block reduction whose block size is read at run time (CUB's `BlockReduce<float, 1024>` with
/// `blockDim.x` valid items). The width is `vec_hidden_size = hidden_size / 8` (the twin derives
/// `hidden_size`); `input_stride` must be `hidden_size` (a row of `BlockRows` is `cols` wide).
#[kernel(cols(input = vec_hidden_size, residual = vec_hidden_size))]
pub fn fused_add_rms_norm_kernel(
    mut input: DisjointSlice<Vec8, BlockRows>,
    _input_stride: i64,
    mut residual: DisjointSlice<Vec8, BlockRows>,
    weight: &[Vec8],
    epsilon: f32,
    _num_tokens: i32,
    vec_hidden_size: u32,
) {
    let me = block_row();
    let mut variance = 0.0f32;
    {
        let (Some(input_row), Some(residual_row)) = (input.row_mut(me), residual.row_mut(me)) else { return };
        for (x, r) in input_row.iter_mut().zip(residual_row.iter_mut()) {
            let temp = vector::load16(&*x).add(vector::load16(&*r));
            variance += temp.sum_squares();
            vector::store16(r, temp);
        }
    }

    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let variance = reduce.sum_all(variance);
    let s_variance = (variance / (vec_hidden_size * 8) as f32 + epsilon).rsqrt();

    let (Some(input_row), Some(residual_row)) = (input.row_mut(me), residual.row_mut(me)) else { return };
    for ((w, x), r) in input_row.zip_input(weight).zip(residual_row.iter_mut()) {
        let temp = vector::load16(&*r).scale(s_variance).mul(vector::load16(w));
        vector::store16(x, temp);
    }
}

/// The head size of the rotary port (Llama-3 8B: 128, full rotary).
pub const HEAD_SIZE: u32 = 128;
/// `embed_dim = rot_dim / 2`.
pub const EMBED_DIM: u32 = HEAD_SIZE / 2;
/// Query heads of the rotary port (Llama-3 8B).
pub const NUM_HEADS: u32 = 32;
/// Key heads (grouped-query attention).
pub const NUM_KV_HEADS: u32 = 8;
/// A query row: `num_heads * head_size`.
pub const QUERY_COLS: u32 = NUM_HEADS * HEAD_SIZE;
/// A key row: `num_kv_heads * head_size`.
pub const KEY_COLS: u32 = NUM_KV_HEADS * HEAD_SIZE;

/// vLLM `apply_token_rotary_embedding<bf16, bf16, true>` on one pair.
#[inline(always)]
fn rotate(x: &mut bf16, y: &mut bf16, cos: bf16, sin: bf16, inverse: bool) {
    let cos_f = cos.widen();
    let mut sin_f = sin.widen();
    if inverse {
        sin_f = -sin_f;
    }
    let x_f = x.widen();
    let y_f = y.widen();
    *x = (x_f * cos_f - y_f * sin_f).to_bf16();
    *y = (y_f * cos_f + x_f * sin_f).to_bf16();
}

/// vLLM `csrc/pos_encoding_kernels.cu` `rotary_embedding_kernel<c10::BFloat16, c10::BFloat16,
/// true>` (NeoX): a token per block (blocks of `min(num_heads * rot_dim / 2, 512)`), query and key
/// rotated in place, cos/sin from the token's row of `cos_sin_cache`. Specialised to head size
/// 128, full rotary (`rot_dim = 128`, `rope_dim_offset = 0`), contiguous heads, 32 query and 8 key
/// heads: the `RotaryPairs` partition fixes the head shape at compile time and the row widths
/// are constants here; the scalar parameters stay for the twin's signature.
#[kernel(cols(query = QUERY_COLS, key = KEY_COLS))]
#[allow(clippy::too_many_arguments)]
pub fn rotary_embedding_kernel(
    positions: &[i64],
    mut query: DisjointSlice<bf16, RotaryPairs<HEAD_SIZE, EMBED_DIM>>,
    mut key: DisjointSlice<bf16, RotaryPairs<HEAD_SIZE, EMBED_DIM>>,
    cos_sin_cache: &[bf16],
    _rot_dim: i32,
    _query_stride: i64,
    _key_stride: i64,
    _head_stride: i64,
    _num_heads: i32,
    _num_kv_heads: i32,
    _head_size: i32,
    _rope_dim_offset: i64,
    inverse: bool,
) {
    let me = block_row();
    let pos = positions[me.row() as usize] as usize;
    let rot = 2 * EMBED_DIM as usize;
    let Some(cache) = cos_sin_cache.get(pos * rot..pos * rot + rot) else { return };
    let (cos_ptr, sin_ptr) = cache.split_at(EMBED_DIM as usize);
    if let Some(pairs) = query.pairs_mut(me) {
        for (_head, k, x, y) in pairs {
            rotate(x, y, cos_ptr[k as usize], sin_ptr[k as usize], inverse);
        }
    }
    if let Some(pairs) = key.pairs_mut(me) {
        for (_head, k, x, y) in pairs {
            rotate(x, y, cos_ptr[k as usize], sin_ptr[k as usize], inverse);
        }
    }
}

/// vLLM `csrc/moe/moe_align_sum_kernels.cu` `count_and_sort_expert_tokens_kernel<int32_t>`: each
/// routed token slot takes a rank in its expert's segment with `atomicAdd` on `cumsum_buffer`
/// and writes its index there (grid-stride; blocks of 256, `min(ceil(numel / 256), 65535)`
/// blocks). The write index comes from an atomic, so `sorted_token_ids` is an `AtomicSlice`
/// (relaxed stores); `numel` is `topk_ids.len()`.
#[kernel]
pub fn count_and_sort_expert_tokens_kernel(topk_ids: &[i32], sorted_token_ids: AtomicSlice<i32>, cumsum_buffer: AtomicSlice<i32>, _numel: u64) {
    for i in grid_stride(topk_ids.len()) {
        let i = i.get();
        let expert_id = topk_ids[i];
        let rank_post_pad = cumsum_buffer.fetch_add(expert_id as usize, 1);
        sorted_token_ids.store(rank_post_pad as usize, i as i32);
    }
}

/// Threads per block of the single-pass reduction (the CUDA sample's `maxThreads`).
pub const REDUCE_THREADS: u32 = 256;
/// Blocks of the single-pass reduction at most (the CUDA sample's `maxBlocks`).
pub const REDUCE_MAX_BLOCKS: u32 = 64;

/// The CUDA samples' `threadFenceReduction` `reduceSinglePass<256, ..>` (the last-block
/// pattern; issue 30's ninth port, the one the held-out porter did not reach): each block sums
/// its grid-strided elements (two a step, `i` and `i + blockDim.x`), reduces them to thread 0,
/// which publishes the block's partial; `__threadfence()` + `atomicInc` on a retirement counter
/// elect the last block, which sums the partials and writes the total (and resets the counter).
/// Blocks of `REDUCE_THREADS`, `min(REDUCE_MAX_BLOCKS, ceil(n / 512))` blocks. The sample's
/// `retirementCount` is a `__device__` global; here (and in the twin) it is the `counter`
/// parameter, zeroed once. The total goes to `total[0]` (the sample writes `g_odata[0]`, over
/// block 0's partial).
#[kernel(cols(partials = 1))]
pub fn reduce_single_pass(x: &[f32], partials: DisjointSlice<f32, Handoff>, counter: AtomicSlice<u32>, total: AtomicSlice<f32>) {
    let n = x.len();
    let block = block_dim_x() as usize;
    let grid_size = block * 2 * grid_dim_x() as usize;
    let mut i = block_idx_x() as usize * block * 2 + thread_idx_x() as usize;
    let mut my_sum = 0.0f32;
    while i < n {
        my_sum += x[i];
        if let Some(&v) = x.get(i + block) {
            my_sum += v;
        }
        i += grid_size;
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let block_sum = reduce.sum(my_sum);
    let mut partials = partials;
    if let Some(s) = block_sum {
        partials.publish(0, s);
    }
    if let Some(last) = partials.arrive(counter.at(0)) {
        let mine = last.fold(0.0f32, |a, p| a + p);
        if let Some(all) = reduce.sum(mine) {
            total.store(0, all);
        }
    }
}

/// `reduce_single_pass` without a panic path: the counter and the total taken with `get(0)`
/// (an `Option`) instead of `at(0)` / `store(0, ..)`, whose bounds checks on the one-element
/// buffers kept the kernel's whole panic path (docs/performance.md, the gathers row).
#[kernel(cols(partials = 1))]
pub fn reduce_single_pass_fixed(x: &[f32], partials: DisjointSlice<f32, Handoff>, counter: AtomicSlice<u32>, total: AtomicSlice<f32>) {
    let (Some(counter), Some(total)) = (counter.get(0), total.get(0)) else { return };
    let n = x.len();
    let block = block_dim_x() as usize;
    let grid_size = block * 2 * grid_dim_x() as usize;
    let mut i = block_idx_x() as usize * block * 2 + thread_idx_x() as usize;
    let mut my_sum = 0.0f32;
    while i < n {
        my_sum += x[i];
        if let Some(&v) = x.get(i + block) {
            my_sum += v;
        }
        i += grid_size;
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let block_sum = reduce.sum(my_sum);
    let mut partials = partials;
    if let Some(s) = block_sum {
        partials.publish(0, s);
    }
    if let Some(last) = partials.arrive(counter) {
        let mine = last.fold(0.0f32, |a, p| a + p);
        if let Some(all) = reduce.sum(mine) {
            total.store(all);
        }
    }
}
