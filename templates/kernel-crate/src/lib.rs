//! Example kernels of a crate of your own.
//!
//! On the GPU target this crate is `no_std`; `abi_ptx` is for the kernel entry points and
//! `asm_experimental_arch` for the inline PTX that `shared_array!` and the device library's
//! macros expand to in this crate. Both are nightly features: the builder's device toolchain
//! enables them (`RUSTC_BOOTSTRAP=1`); the host build does not see them.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
// On the host, `f32`'s own `sqrt`, `exp`, ... win over the device library's math traits, so an
// import of them (or of the prelude, if nothing else of it is used) is unused there.
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::global::{DisjointSlice, PerBlock, once_per_block, unique_index};
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, index_1d, thread_idx_x};
use ferrocuda_device::cache::{self, Load, Store};
use ferrocuda_device::math::FastMath;
use ferrocuda_device::{kernel, shared_array};

// The PTX and cubins built by build.rs, and what every launcher below loads on first use.
ferrocuda_device::embed_kernels!();

/// Parameters passed by value: `#[repr(C)]` and `Pod`, so the host and the GPU agree on the bytes,
/// and `LayoutKey` (required of every struct a kernel takes), so that the first launch checks
/// that the host and the device build agree on its fields.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct Affine {
    /// Multiplier.
    pub scale: f32,
    /// Added after scaling.
    pub offset: f32,
}

/// `y[i] = p.scale * x[i] + p.offset`, one element per thread. An output is a
/// `DisjointSlice`: a thread writes the element its unique index names (`get_mut` is `None`
/// past the end), so no two threads can write one element.
#[kernel]
pub fn affine(p: Affine, x: &[f32], mut y: DisjointSlice<f32>) {
    let i = unique_index();
    if let (Some(y_i), Some(&x_i)) = (y.get_mut(i), x.get(i.get())) {
        *y_i = p.scale * x_i + p.offset;
    }
}

/// Threads per block that [`block_sums()`] is written for.
pub const BLOCK: u32 = 256;

/// `sums[b] = x[b * BLOCK ..][..BLOCK].sum()`: a tree reduction in shared memory, one output
/// per block. Launch with [`BLOCK`] threads per block and `x.len().div_ceil(BLOCK)` blocks.
#[kernel]
pub fn block_sums(x: &[f32], mut sums: PerBlock<f32>) {
    let partial = shared_array![f32; BLOCK as usize];
    let t = thread_idx_x();
    let i = index_1d();
    partial.set(t as usize, if i < x.len() { x[i] } else { 0.0 });
    sync_threads();
    let mut stride = block_dim_x() / 2;
    while stride > 0 {
        if t < stride {
            let sum = partial.get(t as usize) + partial.get((t + stride) as usize);
            partial.set(t as usize, sum);
        }
        sync_threads();
        stride /= 2;
    }
    // Thread 0 of each block holds the block's index as its witness (`PerBlock`: one element per block).
    if let Some(sum) = once_per_block().and_then(|block| sums.get_mut(block)) {
        *sum = partial.get(0);
    }
}

/// `y[i] = gelu(x[i])` with the tanh approximation (GPT-2's GELU) on the special-function
/// unit (`tanh.approx`, sm_75 and newer: the default build's architecture), streaming both
/// arrays past the caches (`__ldcs`/`__stcs`): each element is touched once.
#[kernel]
pub fn gelu(x: &[f32], mut y: DisjointSlice<f32>) {
    let i = unique_index();
    if let (Some(y_i), Some(x_i)) = (y.get_mut(i), x.get(i.get())) {
        let v = cache::load(x_i, Load::Streaming);
        let inner = 0.797_884_6 * (v + 0.044_715 * v * v * v);
        cache::store(y_i, 0.5 * v * (1.0 + inner.fast_tanh()), Store::Streaming);
    }
}
