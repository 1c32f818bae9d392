//! What most kernels use, for one glob import: `use ferrocuda_device::prelude::*;`.
//!
//! Why a glob: on the host (the CPU executor's build of the same kernel), `f32` and `f64`
//! have `std`'s own `sqrt`, `exp`, ... methods, which take precedence over the
//! [`DeviceFloat`] trait's, so a named `use ferrocuda_device::math::DeviceFloat;` is an unused
//! import there and rustc warns (issue 30). A glob import warns only when nothing of it is
//! used; a kernel that takes its output types and index functions from elsewhere and calls
//! only methods `std`'s floats also have leaves it unused on the host (issue 30's fourth port):
//! `#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]` at the crate root (the
//! template has it) silences both forms.

pub use crate::block::{BlockReduce, BlockScan, RuntimeBlockReduce};
pub use crate::global::{AtomicSlice, DisjointChunks, DisjointSlice, PerBlock, once_per_block, unique_index};
// The 16-bit floats' conversions and operations (`x.to_bf16()`, `h.widen()`, `a.add_rn(b)`,
// `Bf16x2::from_f32s`): issue 30's third port needed a second import for `to_bf16` (E0599).
pub use crate::half::{Bf16x2, F32ToHalf, HalfFloat, bf16};
pub use crate::math::{DeviceFloat, FastMath, FloatToInt};
pub use crate::sync::sync_threads;
// The y/z index functions too (issue 30's eighth port: llm.c's stochastic rounding reads
// `blockIdx.y` in a kernel indexed in 1-D, and the docs' 2-D rows use them).
pub use crate::thread::{
    block_dim_x, block_dim_y, block_dim_z, block_idx_x, block_idx_y, block_idx_z, grid_dim_x, grid_dim_y, grid_dim_z, index_1d, thread_idx_x, thread_idx_y,
    thread_idx_z,
};
pub use crate::{block_scratch, kernel, shared_array, vector};
