//! The vLLM kernels (csrc/moe/permute_unpermute_kernels/, TensorRT-LLM's MoE permutation), first
//! tries from the docs. bf16 rows are moved as 16-byte packs (`Bf16x8`, cutlass's
//! `Array<T, 128 / sizeof_bits<T>>`), so widths are in packs (`cols / 8`).

use core::num::NonZeroU32;

use ferrocuda_device::global::{BlockRows, block_row};
use ferrocuda_device::pack16::Bf16x8;
use ferrocuda_device::prelude::*;
use ferrocuda_device::sync::sync_warp;
use ferrocuda_device::thread::strided_range;
use ferrocuda_device::{dynamic_shared, kernel, warp};

/// vLLM's `finalizeMoeRoutingKernel<bf16, bf16, false>`: a block per original row (token); each
/// thread takes the row's 16-byte packs `threadIdx.x + blockDim.x j` and sums, over the token's
/// `k` experts, `scales[row k + e] * expanded_permuted_rows[source_to_dest[row k + e]]` at that
/// pack, in `f32`, rounded to bf16. `cols_v` is the row width in packs (`orig_cols / 8`). Without
/// the source's `num_valid_ptr` (read only when `CHECK_SKIPPED`).
#[kernel(cols(out = cols_v))]
pub fn finalize_moe_routing_kernel(
    expanded_permuted_rows: &[Bf16x8],
    mut out: DisjointSlice<Bf16x8, BlockRows>,
    scales: &[f32],
    source_to_dest: &[i32],
    cols_v: u32,
    k: u32,
) {
    let me = block_row();
    let first = me.row() as usize * k as usize;
    let (Some(map), Some(scales)) = (source_to_dest.get(first..first + k as usize), scales.get(first..first + k as usize)) else {
        return;
    };
    let Some(row) = out.row_mut(me) else { return };
    for (col, o) in row.iter_cols_mut() {
        let mut thread_output = [0.0f32; 8];
        for (&dest, &row_scale) in map.iter().zip(scales) {
            let Some(pack) = expanded_permuted_rows.get(dest as usize * cols_v as usize + col) else { continue };
            let expert_result = Bf16x8::load(pack).to_f32s();
            for e in 0..8 {
                thread_output[e] += row_scale * expert_result[e];
            }
        }
        Bf16x8::from_f32s(thread_output).store(o);
    }
}

/// vLLM's `expandInputRowsKernel<bf16, false>`: a block per expanded destination row `d`; its
/// source row `s = dest_to_source[d]`; thread 0 records the reverse map `source_to_dest[s] = d`
/// (an index chosen by the data: an atomic store) and `permuted_idx[d] = s` (the block's element);
/// every thread copies its 16-byte packs of input row `s / k` to output row `d`. `cols_v` is the
/// row width in packs. Without the source's unused `sorted_experts`, `expert_first_token_offset`,
/// `num_rows`, `num_dest_rows` and `num_local_experts`.
#[kernel(cols(permuted_output = cols_v))]
pub fn expand_input_rows_kernel(
    unpermuted_input: &[Bf16x8],
    mut permuted_output: DisjointSlice<Bf16x8, BlockRows>,
    dest_to_source: &[i32],
    source_to_dest: AtomicSlice<i32>,
    mut permuted_idx: PerBlock<i32>,
    cols_v: u32,
    k: NonZeroU32,
) {
    let me = block_row();
    let dest = me.row();
    let Some(&source) = dest_to_source.get(dest as usize) else { return };
    if let Some(block) = once_per_block() {
        if let Some(slot) = source_to_dest.get(source as usize) {
            slot.store(dest as i32);
        }
        if let Some(p) = permuted_idx.get_mut(block) {
            *p = source;
        }
    }
    let source_row = source as u32 / k;
    let start = source_row as usize * cols_v as usize;
    let Some(input_row) = unpermuted_input.get(start..start + cols_v as usize) else { return };
    let Some(row) = permuted_output.row_mut(me) else { return };
    row.zip_input(input_row).for_each(|(x, o)| Bf16x8::load(x).store(o));
}

/// vLLM's `preprocessTopkIdKernel`: the expert map (`num_experts` entries) copied to dynamic
/// shared memory by the block (launch with `num_experts * 4` bytes), then each thread maps its
/// top-k id in place: `map[id]`, or `id + num_experts` where the map says -1 (not a local
/// expert). An id outside the map (undefined in the source) is treated as not local.
#[kernel]
pub fn preprocess_topk_id_kernel(mut topk_id: DisjointSlice<i32>, size: u32, expert_map: &[i32], num_experts: u32) {
    let Some((smem, _)) = dynamic_shared::<i32>().split_at_checked(num_experts as usize) else { return };
    let Some(map) = expert_map.get(..num_experts as usize) else { return };
    // store expert_map in smem
    for i in strided_range(thread_idx_x(), num_experts, block_dim_x()) {
        smem.set(i as usize, map[i as usize]);
    }
    sync_threads();
    let idx = unique_index();
    if idx.get() < size as usize
        && let Some(id) = topk_id.get_mut(idx)
    {
        let topk = *id;
        let local_expert_idx = if (topk as u32 as usize) < smem.len() { smem.get(topk as usize) } else { -1 };
        let mapped = if local_expert_idx == -1 { topk + num_experts as i32 } else { local_expert_idx };
        sync_warp(warp::active_mask());
        *id = mapped;
    }
}
