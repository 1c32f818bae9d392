//! Session 23 (helper gaps): kernels that check library additions for issue 30's gaps against
//! nvcc's SASS for the same CUDA C++ (bench/results/s23-gaps/nvcc-s23.cu). Not ports; each is
//! small and says which gap it exercises.

use ferrocuda_device::kernel;
use ferrocuda_device::pack8::Bf16x4;
use ferrocuda_device::prelude::*;

/// `pack8` (vLLM's 8-byte stores of `vec_n_t<bf16, 4>`): a thread per pack of four `bf16`,
/// `out = x * s + y` in `f32`, rounded in pairs. One `LDG.E.64.CONSTANT` per input, one
/// `STG.E.64`.
#[kernel]
pub fn s23_scale_add_bf16x4(mut out: DisjointSlice<Bf16x4>, x: &[Bf16x4], y: &[Bf16x4], s: f32) {
    let i = unique_index();
    let Some(o) = out.get_mut(i) else { return };
    let (Some(a), Some(b)) = (x.get(i.get()), y.get(i.get())) else { return };
    let (a, b) = (Bf16x4::load(a).to_f32s(), Bf16x4::load(b).to_f32s());
    Bf16x4::from_f32s([a[0] * s + b[0], a[1] * s + b[1], a[2] * s + b[2], a[3] * s + b[3]]).store(o);
}

/// Item 3 (a block reduction like CUB's): a block per row of `cols` floats, the threads' strided
/// sums folded by `RuntimeBlockReduce::sum` (any block size, read at run time), thread 0 writing
/// the row's sum. For the SASS against `cub::BlockReduce<float, N>` (nvcc-s23.cu).
#[kernel]
pub fn s23_row_sum_runtime(mut sums: PerBlock<f32>, x: &[f32], cols: u32) {
    let start = block_idx_x() as usize * cols as usize;
    let Some(row) = x.get(start..start + cols as usize) else { return };
    let mut s = 0.0f32;
    for i in ferrocuda_device::thread::strided_range(thread_idx_x() as usize, row.len(), block_dim_x() as usize) {
        s += row[i];
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    if let Some(total) = reduce.sum(s)
        && let Some(block) = once_per_block()
        && let Some(o) = sums.get_mut(block)
    {
        *o = total;
    }
}

/// [`s23_row_sum_runtime()`] with the block size declared (`reqntid(256)`): the size a
/// compile-time constant, as `cub::BlockReduce<float, 256>`'s.
#[kernel(reqntid(256))]
pub fn s23_row_sum_256(mut sums: PerBlock<f32>, x: &[f32], cols: u32) {
    let start = block_idx_x() as usize * cols as usize;
    let Some(row) = x.get(start..start + cols as usize) else { return };
    let mut s = 0.0f32;
    for i in ferrocuda_device::thread::strided_range(thread_idx_x() as usize, row.len(), block_dim_x() as usize) {
        s += row[i];
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    if let Some(total) = reduce.sum(s)
        && let Some(block) = once_per_block()
        && let Some(o) = sums.get_mut(block)
    {
        *o = total;
    }
}

/// [`s23_row_sum_256()`] at 1024 threads (`reqntid(1024)`, `cub::BlockReduce<float, 1024>`).
#[kernel(reqntid(1024))]
pub fn s23_row_sum_1024(mut sums: PerBlock<f32>, x: &[f32], cols: u32) {
    let start = block_idx_x() as usize * cols as usize;
    let Some(row) = x.get(start..start + cols as usize) else { return };
    let mut s = 0.0f32;
    for i in ferrocuda_device::thread::strided_range(thread_idx_x() as usize, row.len(), block_dim_x() as usize) {
        s += row[i];
    }
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    if let Some(total) = reduce.sum(s)
        && let Some(block) = once_per_block()
        && let Some(o) = sums.get_mut(block)
    {
        *o = total;
    }
}
